"""`tinyserve run --deployment ...`, the SLO options and `tinyserve goodput`, through the CLI's main() in this
process (dry runs of 30 requests: each well under a second): bad input gets one line and exit 2 in both languages;
the JSON's numbers are checked against what the documents themselves and the shipped presets say, recomputed here."""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from tinyserve.analysis.goodput import deployment_label, goodput_per_gpu, parse_deployment
from tinyserve.deploy.config import DEFAULT_LINK
from tinyserve.tools import cli
from tinyserve.tools.cli import build_parser, main

MIXED = ["--workload", "chapter-7.3-mixed", "--workload-knob", "n=30", "--dry-run"]
RUN = ["run", *MIXED, "--policy", "chunked"]
DIS = ["--deployment", "disaggregated"]
SLO = ["--slo-ttft-ms", "400", "--slo-tpot-ms", "40"]
GOODPUT = ["goodput", "--workload", "chapter-7.3-mixed", "--workload-knob", "n=30", "--rates", "1,4", *SLO]
KV_BYTES_PER_TOKEN = 80 * 8 * 128 * 2 * 2  # h200-70b-fp8's model, Llama-3-70B: layers x KV heads x dim x (K, V) x bf16
LINKS = Path(__file__).resolve().parents[2] / "lib" / "tinyserve" / "presets" / "links"
CJK = re.compile(r"[\u4e00-\u9fff]")


def tinyserve(argv: list[str], capsys, monkeypatch, lang: str = "en") -> tuple[int, str, str]:
    """main(argv) in the language asked for: (exit code, stdout, stderr)."""
    monkeypatch.setenv("TINYSERVE_LANG", lang)
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# (case, argv, what the English line must say (case-insensitive); the zh-TW line must hold the same values)
BAD = [
    ("prefill-0", RUN + DIS + ["--prefill-instances", "0"], ["--prefill-instances", ">= 1", "0"]),
    ("decode-negative", RUN + DIS + ["--decode-instances", "-2"], ["--decode-instances", ">= 1", "-2"]),
    ("replicas-0", RUN + ["--deployment", "colocated", "--replicas", "0"], ["--replicas", ">= 1", "0"]),
    ("replicas-text", RUN + ["--deployment", "colocated", "--replicas", "two"], ["--replicas", "integer", "two"]),
    ("unknown-kind", RUN + ["--deployment", "sideways"], ["sideways", "colocated", "disaggregated"]),
    ("unknown-link", RUN + DIS + ["--link", "pigeon"], ["pigeon", "nvlink-h200", "ib-ndr"]),
    ("ttft-0", RUN + ["--slo-ttft-ms", "0", "--slo-tpot-ms", "40"], ["--slo-ttft-ms", "> 0", "0"]),
    ("tpot-negative", RUN + DIS + ["--slo-ttft-ms", "400", "--slo-tpot-ms", "-5"], ["--slo-tpot-ms", "> 0", "-5"]),
    ("tpot-nan", RUN + ["--slo-ttft-ms", "400", "--slo-tpot-ms", "nan"], ["--slo-tpot-ms", "nan"]),
    ("prefill-with-colocated", RUN + ["--deployment", "colocated", "--prefill-instances", "1"],
     ["--prefill-instances", "disaggregated` only"]),
    ("replicas-with-disaggregated", RUN + DIS + ["--replicas", "2"], ["--replicas", "colocated` only"]),
    ("decode-layout-with-colocated", RUN + ["--deployment", "colocated", "--decode-kv-layout", "paged"],
     ["--decode-kv-layout", "disaggregated` only"]),
    ("decode-layout-unknown", RUN + DIS + ["--decode-kv-layout", "pages"], ["'pages'"]),
    ("replicas-without-deployment", RUN + ["--replicas", "2"], ["--replicas", "needs --deployment"]),
    ("wall-clock", ["run", "--workload", "chapter-7.3-mixed", "--policy", "chunked", "--clock", "wall",
                    "--deployment", "colocated"], ["modeled clock", "--clock wall"]),
    ("static-disaggregated", ["run", *MIXED, "--policy", "static", *DIS], ["static", "continuous", "chunked"]),
    ("prefill-first-disaggregated", ["run", *MIXED, "--policy", "continuous", "--prefill-first", *DIS],
     ["--prefill-first", "disaggregated"]),
    ("decode-first-disaggregated", ["run", *MIXED, "--policy", "continuous", "--decode-first", *DIS],
     ["--decode-first", "disaggregated"]),
    ("only-ttft", RUN + ["--slo-ttft-ms", "400"], ["--slo-ttft-ms", "--slo-tpot-ms", "both"]),
    ("only-tpot", RUN + DIS + ["--slo-tpot-ms", "40"], ["--slo-tpot-ms", "--slo-ttft-ms", "both"]),
    ("abbreviation", RUN + ["--deploy", "colocated"], ["--deploy"]),
    ("goodput-no-rate-knob", ["goodput", "--workload", "chapter-7.1-padding", "--rates", "1", *SLO,
                              "--deployment", "colocated"], ["chapter-7.1-padding", "rate", "chapter-7.3-mixed"]),
    ("goodput-bad-spec", GOODPUT + ["--deployment", "disaggregated:2"], ["disaggregated:2", "colocated[:n]"]),
    ("goodput-spec-count-0", GOODPUT + ["--deployment", "colocated:0"], ["colocated:0", ">= 1"]),
    ("goodput-bad-rate", ["goodput", "--workload", "chapter-7.3-mixed", "--rates", "1,-2", *SLO,
                          "--deployment", "colocated"], ["--rates", "-2"]),
    ("goodput-static-split", GOODPUT + ["--deployment", "disaggregated", "--policy", "static"], ["static", "chunked"]),
    ("goodput-rate-as-knob", GOODPUT + ["--deployment", "colocated", "--workload-knob", "rate=3"],
     ["--rates", "rate"]),
    ("goodput-one-target", ["goodput", "--workload", "chapter-7.3-mixed", "--rates", "1", "--slo-ttft-ms", "400",
                            "--deployment", "colocated"], ["--slo-tpot-ms"]),
    ("ttft-at-unknown", RUN + DIS + SLO + ["--ttft-at", "client"], ["--ttft-at", "prefill", "decode", "'client'"]),
    ("ttft-at-plain-run", RUN + ["--ttft-at", "decode"], ["--ttft-at", "needs --deployment"]),
    ("goodput-ttft-at-unknown", GOODPUT + ["--deployment", "disaggregated", "--ttft-at", "middle"],
     ["--ttft-at", "'middle'"]),
    ("seeds-empty", GOODPUT + ["--deployment", "colocated", "--seeds", ""], ["--seeds", "0,1,2,3,4"]),
    ("seeds-repeated", GOODPUT + ["--deployment", "colocated", "--seeds", "0,1,1"], ["--seeds", "'0,1,1'"]),
    ("seeds-and-seed", GOODPUT + ["--deployment", "colocated", "--seeds", "0,1", "--seed", "3"],
     ["--seeds", "--seed"]),
    # each role's own knobs (issue 44), the replicas' GPUs and the fair search
    ("prefill-chunk-0", RUN + DIS + ["--prefill-chunk-size", "0"], ["--prefill-chunk-size", "none", "0"]),
    ("prefill-chunk-word", RUN + DIS + ["--prefill-chunk-size", "whole"], ["--prefill-chunk-size", "whole"]),
    ("decode-batch-0", RUN + DIS + ["--decode-batch-size", "0"], ["--decode-batch-size", ">= 1", "0"]),
    ("prefill-gpus-0", RUN + DIS + ["--prefill-gpus", "0"], ["--prefill-gpus", ">= 1", "0"]),
    ("decode-gpus-beyond-node", RUN + DIS + ["--decode-gpus", "16"], ["--decode-gpus", "16", "at most 8"]),
    ("prefill-gpus-uneven", RUN + DIS + ["--prefill-gpus", "3"], ["--prefill-gpus", "3", "1, 2, 4, 8"]),
    ("prefill-gpus-folded", RUN + DIS + ["--prefill-gpus", "2", "--hardware", "4xh100-70b-bf16"],
     ["--prefill-gpus", "4xh100-70b-bf16"]),
    ("role-knob-colocated", RUN + ["--deployment", "colocated", "--decode-batch-size", "64"],
     ["--decode-batch-size", "disaggregated` only"]),
    ("role-knob-plain-run", RUN + ["--prefill-gpus", "2"], ["--prefill-gpus", "needs --deployment"]),
    ("replica-gpus-beyond-node", RUN + ["--deployment", "colocated", "--gpus", "9"], ["9", "at most 8"]),
    ("goodput-roles-without-split", GOODPUT + ["--deployment", "colocated", "--decode-batch-size", "64"],
     ["--decode-batch-size", "disaggregated"]),
    ("goodput-spec-knob-typo", GOODPUT + ["--deployment", "colocated:2,chunk=128"], ["chunk=128", "chunk_size"]),
    ("goodput-spec-knob-of-the-other-kind", GOODPUT + ["--deployment", "colocated:2,decode_gpus=2"],
     ["decode_gpus=2", "chunk_size, batch_size, gpus"]),
    ("fair-5", ["goodput", "--workload", "chapter-7.3-mixed", "--rates", "1", *SLO, "--fair", "5"], ["--fair", "5"]),
    ("fair-and-deployment", GOODPUT + ["--deployment", "colocated", "--fair", "2"], ["--deployment", "--fair"]),
    ("neither-fair-nor-deployment", ["goodput", "--workload", "chapter-7.3-mixed", "--rates", "1", *SLO],
     ["--deployment", "--fair"]),
    ("fair-with-chunk", ["goodput", "--workload", "chapter-7.3-mixed", "--rates", "1", *SLO, "--fair", "2",
                         "--chunk-size", "256"], ["--fair", "--chunk-size"]),
]


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_bad_input_one_line_exit_2_in_both_languages(lang, capsys, monkeypatch):
    for case, argv, needles in BAD:
        code, out, err = tinyserve(argv, capsys, monkeypatch, lang)
        assert (code, out) == (2, ""), case
        assert err.endswith("\n") and err.count("\n") == 1, (case, err)
        if lang == "en":
            assert all(n.lower() in err.lower() for n in needles), (case, err)
        else:  # the same values named, in Chinese words
            assert CJK.search(err), (case, err)
            assert all(n in err for n in needles if n.startswith("-") or n.isdigit()), (case, err)


def test_options_are_spelled_in_full_and_none_is_a_prefix_of_another():
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert parser.allow_abbrev is False
    for name, sub in subs.items():
        assert sub.allow_abbrev is False, name
        opts = sorted(o for a in sub._actions for o in a.option_strings if o.startswith("--"))
        pairs = {(a, b) for a in opts for b in opts if a != b and b.startswith(a)}
        # an exact match always wins, so a whole option that begins another is unambiguous; no other pair exists
        assert pairs <= {("--workload", "--workload-knob"), ("--seed", "--seeds")}, (name, pairs)
    assert cli.DEFAULT_LINK == DEFAULT_LINK  # the default --help names


def slo_by_hand(requests: list[dict], ttft_ms: float, tpot_ms: float) -> int:
    """Requests meeting both targets, from the JSON's own fields (TPOT over the tokens after the first)."""
    met = 0
    for r in requests:
        if r["status"] != "finished":
            continue
        n = r["output_len"]
        tpot = (r["finish_s"] - r["first_token_s"]) * 1e3 / (n - 1) if n > 1 else 0.0
        met += r["ttft_ms"] <= ttft_ms and tpot <= tpot_ms
    return met


def test_disaggregated_json_transfers_priced_by_the_link_one_at_a_time(capsys, monkeypatch):
    link = json.loads((LINKS / "ib-ndr.json").read_text())
    code, out, _ = tinyserve(RUN + DIS + ["--link", "ib-ndr", *SLO, "--json"], capsys, monkeypatch)
    assert code == 0
    d = json.loads(out)
    assert d["deployment"] == {"kind": "disaggregated", "replicas": None, "prefill_instances": 1,
                               "decode_instances": 1, "link": "ib-ndr", "decode_kv_layout": None,
                               "prefill_chunk_size": None, "decode_batch_size": None, "prefill_gpus": None,
                               "decode_gpus": None, "gpus_per_instance": {"prefill": 1, "decode": 1}, "num_gpus": 2}
    assert [i["role"] for i in d["instances"]] == ["prefill", "decode"]
    reqs = {r["id"]: r for r in d["requests"]}
    assert len(reqs) == 30 and all(r["instances"] == [0, 1] for r in reqs.values())
    assert len(d["transfers"]) == 30 and d["metrics"]["transfers"] == 30
    free = 0.0
    for x in sorted(d["transfers"], key=lambda x: x["start_s"]):
        assert x["bytes"] == reqs[x["request_id"]]["prompt_len"] * KV_BYTES_PER_TOKEN
        assert x["real_bytes"] is None  # a dry run copies nothing
        assert x["end_s"] - x["start_s"] == pytest.approx(link["latency_s"] + x["bytes"] / link["bandwidth_Bps"])
        assert x["start_s"] == max(x["ready_s"], free)  # one at a time, first come first served
        free = x["end_s"]
        # the prefill made the first token; the decode's second token comes after the K/V landed
        assert x["ready_s"] == pytest.approx(reqs[x["request_id"]]["first_token_s"])
    assert any(x["start_s"] > x["ready_s"] for x in d["transfers"])  # ib-ndr is slow enough to queue here
    s = d["slo"]
    assert (s["ttft_ms"], s["tpot_ms"], s["requests"]) == (400, 40, 30)
    assert s["met"] == slo_by_hand(d["requests"], 400, 40) and s["attainment"] == s["met"] / 30


def test_one_colocated_replica_is_the_plain_run_and_plain_runs_get_the_slo_block(capsys, monkeypatch):
    plain = json.loads(tinyserve(RUN + [*SLO, "--json"], capsys, monkeypatch)[1])
    one = json.loads(tinyserve(RUN + ["--deployment", "colocated", *SLO, "--json"], capsys, monkeypatch)[1])
    times = [(r["first_token_s"], r["finish_s"]) for r in plain["requests"]]
    assert [(r["first_token_s"], r["finish_s"]) for r in one["requests"]] == times
    assert one["slo"] == plain["slo"] and plain["slo"]["met"] == slo_by_hand(plain["requests"], 400, 40)
    four = json.loads(tinyserve(RUN + ["--deployment", "colocated", "--replicas", "2", "--hardware",
                                       "4xh100-70b-bf16", "--json"], capsys, monkeypatch)[1])
    assert four["deployment"]["num_gpus"] == 8 and "slo" not in four  # 4 GPUs per instance (the preset's)
    assert sorted({i for r in four["requests"] for i in r["instances"]}) == [0, 1]  # both replicas served


def test_trace_perfetto_and_text(tmp_path, capsys, monkeypatch):
    trace, perfetto = tmp_path / "t.json", tmp_path / "p.json"
    code, out, _ = tinyserve(RUN + DIS + [*SLO, "--trace", str(trace), "--perfetto", str(perfetto)], capsys,
                             monkeypatch)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("deployment disaggregated, 1 prefill + 1 decode")
    assert any(ln.startswith("  instance 0 (prefill)") for ln in lines)
    assert any(ln.startswith("  instance 1 (decode)") for ln in lines)
    assert any(ln.startswith("  KV transfers  30 over nvlink-h200") for ln in lines)
    assert lines[-1].startswith("  SLO  TTFT <= 400 ms and TPOT <= 40 ms:")
    d = json.loads(trace.read_text())
    assert d["roles"] == ["prefill", "decode"] and all(v == [0, 1] for v in d["routes"].values())
    for inst in d["instances"]:  # each instance's full trace: its steps, its requests with token times
        assert inst["trace"]["steps"] and all("token_times_s" in r for r in inst["trace"]["requests"])
    assert all(len(r["token_times_s"]) == r["output_len"] for r in d["requests"])
    ev = json.loads(perfetto.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    assert names == {1: "instance 0 prefill (chunked)", 2: "instance 1 decode (chunked)", 3: "links (nvlink-h200)"}
    kv = [e for e in ev if e.get("cat") == "transfer"]
    assert len(kv) == 30 and {e["pid"] for e in kv} == {3}
    assert {e["cat"] for e in ev if e["pid"] == 1 and e["ph"] == "X" and "cat" in e} == {"prefill"}
    assert {e["cat"] for e in ev if e["pid"] == 2 and e["ph"] == "X" and "cat" in e} == {"decode"}
    code, out, _ = tinyserve(RUN + DIS + SLO, capsys, monkeypatch, "zh-TW")
    assert code == 0 and out.startswith("部署 disaggregated") and "執行個體 1（負責 decode）" in out


def goodput_by_hand(rates: list[float], shares: list[float]) -> float | None:
    """Where the attainment first falls below 90%, interpolated between the two rates around it."""
    points = sorted(zip(rates, shares))
    for i, (rate, share) in enumerate(points):
        if share < 0.9:
            if i == 0:
                return None
            r0, s0 = points[i - 1]
            return r0 + (s0 - 0.9) / (s0 - share) * (rate - r0)
    return points[-1][0]


def test_goodput_rows_match_single_runs_and_the_rule(capsys, monkeypatch):
    code, out, _ = tinyserve(GOODPUT + ["--deployment", "colocated:2", "--deployment", "disaggregated:1:1", "--json"],
                             capsys, monkeypatch)
    assert code == 0
    d = json.loads(out)
    assert [(r["deployment"], r["rate"]) for r in d["rows"]] == [
        ("colocated:2", 1.0), ("colocated:2", 4.0), ("disaggregated:1:1:nvlink-h200", 1.0),
        ("disaggregated:1:1:nvlink-h200", 4.0)]
    for row in d["rows"]:  # each row is the run the `run` command makes at that rate
        kind, *counts = row["deployment"].split(":")
        shape = (["--replicas", counts[0]] if kind == "colocated" else
                 ["--prefill-instances", counts[0], "--decode-instances", counts[1], "--link", counts[2]])
        one = json.loads(tinyserve(RUN + ["--deployment", kind, *shape, "--workload-knob", f"rate={row['rate']}",
                                          *SLO, "--json"], capsys, monkeypatch)[1])
        assert (row["met"], row["requests"], row["num_gpus"]) == (one["slo"]["met"], 30, 2)
    for g in d["goodput"]:
        rows = [r for r in d["rows"] if r["deployment"] == g["deployment"]]
        rps = goodput_by_hand([r["rate"] for r in rows], [r["met"] / r["requests"] for r in rows])
        # 30 requests a run is a burst: said, and a crossing past what the deployment sustains is read as that
        assert g["burst"] and all(r["burst"] for r in rows)
        if rps is not None and rps > g["saturation_rps"]:
            rps = g["saturation_rps"]
            assert g["read"] == "saturation"
        assert g["goodput_rps"] == pytest.approx(rps) and g["goodput_per_gpu"] == (None if rps is None else
                                                                                      pytest.approx(rps / 2))
    code, out, _ = tinyserve(GOODPUT + ["--deployment", "colocated:2"], capsys, monkeypatch)
    table = out.splitlines()
    assert code == 0 and table[1].split() == ["deployment", "GPUs", "1/s", "4/s", "sustains", "/", "GPU", "goodput",
                                              "per", "GPU"]
    assert table[2].split()[:2] == ["colocated:2", "2"]


def test_specs_and_goodput_per_gpu():
    for spec, label in (("colocated", "colocated:1"), ("colocated:3", "colocated:3"),
                        ("disaggregated", f"disaggregated:1:1:{DEFAULT_LINK}"),
                        ("disaggregated:2:1:ib-ndr", "disaggregated:2:1:ib-ndr")):
        assert deployment_label(parse_deployment(spec)) == label
    rows = [{"deployment": "a", "kind": "colocated", "num_gpus": 2, "rate": r, "attainment": s}
            for r, s in ((1, 0.95), (2, 0.9), (4, 0.85), (8, 0.95))]  # 4 misses: 8 does not count
    # the curve crosses 90% exactly at 2 (2's attainment is the goal): 2 + (0.9 - 0.9) / (0.9 - 0.85) x (4 - 2)
    rows += [{"deployment": "b", "kind": "colocated", "num_gpus": 1, "rate": 1, "attainment": 0.5}]
    a, b = goodput_per_gpu(rows)
    assert (a["goodput_rps"], a["goodput_per_gpu"], a["read"], a["monotone"]) == (2, 1.0, "crossing", False)
    assert (b["goodput_rps"], b["goodput_per_gpu"], b["lowest_rate"], b["read"]) == (None, None, 1, "below")


def test_a_real_disaggregated_run_copies_the_kv_and_keeps_the_tokens(tmp_path, capsys, monkeypatch,
                                                                    torch_one_thread):
    rows = [{"id": "a", "prompt_len": 20, "max_new_tokens": 6, "ignore_eos": True},
            {"id": "b", "prompt_len": 33, "max_new_tokens": 4, "arrival_s": 0.001, "ignore_eos": True},
            {"id": "c", "prompt_len": 9, "max_new_tokens": 1, "arrival_s": 0.002, "ignore_eos": True}]
    (tmp_path / "w.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["run", "--workload", str(tmp_path / "w.jsonl"), "--policy", "continuous", "--tokens", "--json"]
    plain = json.loads(tinyserve(argv, capsys, monkeypatch)[1])
    split = json.loads(tinyserve(argv + DIS, capsys, monkeypatch)[1])
    assert [r["tokens"] for r in split["requests"]] == [r["tokens"] for r in plain["requests"]]
    assert [r["instances"] for r in split["requests"]] == [[0, 1], [0, 1], [0]]  # c ends with its first token
    per_token = 4 * 128 * 2 * 4  # the tiny GPT: 4 layers x 128 (K, V each) x float32
    assert [(x["request_id"], x["real_bytes"]) for x in split["transfers"]] == [("a", 20 * per_token),
                                                                               ("b", 33 * per_token)]


def test_ttft_at_decode_counts_the_transfer_in_ttft_and_says_so(capsys, monkeypatch):
    """--ttft-at decode: the JSON names the convention; TTFT grows by at least the transfer, and attainment never
    rises; the default is DistServe's (prefill)."""
    docs = {}
    for at in (None, "prefill", "decode"):
        argv = RUN + DIS + SLO + ["--json"] + (["--ttft-at", at] if at else [])
        code, out, err = tinyserve(argv, capsys, monkeypatch)
        assert code == 0, err
        docs[at] = json.loads(out)
    assert docs[None]["ttft_at"] == "prefill" and docs[None] == docs["prefill"]
    dec, pre = docs["decode"], docs["prefill"]
    assert dec["ttft_at"] == "decode"
    assert dec["metrics"]["ttft_ms"]["p50"] > pre["metrics"]["ttft_ms"]["p50"]
    assert dec["slo"]["met_ttft"] <= pre["slo"]["met_ttft"]
    code, out, _ = tinyserve(GOODPUT + ["--deployment", "disaggregated", "--ttft-at", "decode", "--json"], capsys,
                             monkeypatch)
    assert code == 0 and json.loads(out)["slo"]["ttft_at"] == "decode"


def test_goodput_over_seeds_is_each_seeds_sweep_and_its_median_and_range(capsys, monkeypatch):
    """--seeds: a sweep per seed (each as --seed would run it alone) and per deployment the median and the range."""
    code, out, err = tinyserve(GOODPUT + ["--deployment", "disaggregated", "--seeds", "0,1,2", "--json"], capsys,
                               monkeypatch)
    assert code == 0, err
    d = json.loads(out)
    assert d["seeds"] == [0, 1, 2] and [r["seed"] for r in d["runs"]] == [0, 1, 2]
    for run in d["runs"]:
        alone = json.loads(tinyserve(GOODPUT + ["--deployment", "disaggregated", "--seed", str(run["seed"]), "--json"],
                                     capsys, monkeypatch)[1])
        assert run["rows"] == alone["rows"] and run["goodput"] == alone["goodput"]
    (g,) = d["goodput"]
    values = sorted(-1 if x["goodput_per_gpu"] is None else x["goodput_per_gpu"] for x in g["per_seed"])
    as_value = lambda x: -1 if x["goodput_per_gpu"] is None else x["goodput_per_gpu"]  # noqa: E731
    assert (as_value(g["min"]), as_value(g["median"]), as_value(g["max"])) == (values[0], values[1], values[2])
    code, text, _ = tinyserve(GOODPUT + ["--deployment", "disaggregated", "--seeds", "0,1,2"], capsys, monkeypatch)
    assert code == 0 and "over 3 seeds" in text and text.count("seed ") >= 3
