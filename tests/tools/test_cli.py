"""The real `tinyserve` command, run in subprocesses: bad input gets one clear line and exit 2, good input the
contract's output (DESIGN.md). Most cases are dry runs or tiny JSONL workloads; the bad-input cases run one after
another in one interpreter through the command's entry point (ONE_INTERPRETER), a few of them also as real
processes that must answer the same, so the file stays fast on two cores."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import default_sigint
from tinyserve.core.tokenizer import BOS, decode
from tinyserve.core.workloads import WORKLOADS

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}  # 1 thread: processes run side by side
TIMEOUT = 180

METRIC_KEYS = {"output_throughput", "request_throughput", "duration_s", "num_steps", "ttft_ms", "tpot_ms",
               "itl_ms", "e2el_ms", "slot_utilization", "time_utilization", "busy_time_fraction", "padding_tokens", "prefill_tokens", "wasted_decode_tokens",
               "idle_slot_steps", "kv_reserved_bytes_peak", "kv_used_bytes_peak"}
LATENCY_KEYS = {"mean", "p50", "p90", "p99", "max"}
REQUEST_KEYS = {"id", "prompt_len", "output_len", "arrival_s", "first_token_s", "finish_s", "ttft_ms", "e2el_ms",
                "prefill_computed_tokens", "decode_computed_tokens"}
TOP_KEYS = {"policy", "workload", "clock", "hardware", "metrics", "requests"}


def cli(args: list[str], cwd: Path, exe: list[str] | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run `python -m tinyserve ARGS` (or another command line `exe`) in cwd, capturing text output."""
    exe = exe or [sys.executable, "-m", "tinyserve"]
    return subprocess.run(exe + args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def strict_json(text: str):
    """json.loads that refuses NaN/Infinity (not JSON, and other tools reject them)."""
    def bad(c):
        raise ValueError(f"non-standard JSON constant {c}")
    return json.loads(text, parse_constant=bad)


def jsonl(*rows: dict | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


OK = {"id": "a", "prompt_len": 5, "max_new_tokens": 3, "ignore_eos": True}
OK2 = {"id": "b", "prompt_len": 9, "max_new_tokens": 2, "arrival_s": 0.001, "ignore_eos": True}

# Files written (as bytes) into the working directory of the bad-input cases.
FILES: dict[str, bytes] = {
    "ok.jsonl": jsonl(OK, OK2).encode(),
    "malformed.jsonl": jsonl(OK, '{"id": "x", "prompt_len": 5, "max_new_tokens": 3').encode(),
    "missing_field.jsonl": jsonl({"id": "x", "prompt_len": 5}).encode(),
    "no_prompt.jsonl": jsonl({"id": "x", "max_new_tokens": 5}).encode(),
    "wrong_type.jsonl": jsonl({"id": "x", "prompt_len": "5", "max_new_tokens": 3}).encode(),
    "float_tokens.jsonl": jsonl({"id": "x", "prompt_len": 5, "max_new_tokens": 3.5}).encode(),
    "int_id.jsonl": jsonl({"id": 7, "prompt_len": 5, "max_new_tokens": 3}).encode(),
    "bool_eos.jsonl": jsonl({"id": "x", "prompt_len": 5, "max_new_tokens": 3, "ignore_eos": "yes"}).encode(),
    "not_object.jsonl": b"[1, 2]\n",
    "unknown_field.jsonl": jsonl({"id": "x", "prompt_len": 5, "max_new_tokens": 3, "colour": "red"}).encode(),
    "not_utf8.jsonl": jsonl(OK).encode() + b'{"id": "x", "prompt": "caf\xe9\xff", "max_new_tokens": 3}\n',
    "duplicate.jsonl": jsonl(OK, OK2, {**OK, "prompt_len": 6}).encode(),
    "negative_arrival.jsonl": jsonl({**OK, "arrival_s": -0.5}).encode(),
    "nan_arrival.jsonl": b'{"id": "x", "prompt_len": 5, "max_new_tokens": 3, "arrival_s": NaN}\n',
    "inf_arrival.jsonl": b'{"id": "x", "prompt_len": 5, "max_new_tokens": 3, "arrival_s": Infinity}\n',
    "empty.jsonl": b"",
    "blank.jsonl": b"\n   \n\t\n",
    "eos_unknown.jsonl": jsonl({"id": "talker", "prompt": "def f(x):", "max_new_tokens": 4}).encode(),
    "all_too_long.jsonl": jsonl({"id": "big1", "prompt_len": 4000, "max_new_tokens": 200, "ignore_eos": True},
                                {"id": "big2", "prompt_len": 5000, "max_new_tokens": 1, "ignore_eos": True}).encode(),
}
DIRS = ("dir.jsonl", "outdir")

RUN = ["run", "--workload", "ok.jsonl"]
DRY = ["--dry-run"]

# (case id, argv, substrings the one stderr line must contain (case-insensitive))
BAD: list[tuple[str, list[str], list[str]]] = [
    # command line shape
    ("no-command", [], ["required"]),
    ("unknown-command", ["frobnicate"], ["frobnicate", "generate", "run"]),
    ("run-without-workload", ["run", "--policy", "static"], ["--workload", "required"]),
    # unknown names, with the allowed values listed
    ("unknown-policy", RUN + ["--policy", "greedy"] + DRY,
     ["policy", "greedy", "static", "dynamic", "continuous", "chunked"]),
    ("unknown-workload", ["run", "--workload", "chapter-9", "--policy", "static"] + DRY,
     ["workload", "chapter-9"] + list(WORKLOADS)),
    ("unknown-hardware", RUN + ["--policy", "static", "--hardware", "abacus"] + DRY,
     ["hardware", "abacus", "h200-70b-fp8"]),
    ("unknown-device", RUN + ["--policy", "static", "--device", "tpu"], ["device", "tpu", "cpu", "cuda"]),
    ("unknown-device-dry-run", RUN + ["--policy", "static", "--device", "tpu"] + DRY,
     ["device", "tpu", "cpu", "cuda"]),
    ("unknown-dtype", RUN + ["--policy", "static", "--dtype", "float16"] + DRY,
     ["dtype", "float16", "float32", "float64"]),
    ("unknown-dtype-generate", ["generate", "def ", "--dtype", "int8"], ["dtype", "int8", "float32"]),
    ("unknown-device-generate", ["generate", "def ", "--device", "tpu"], ["device", "tpu", "cpu"]),
    ("unknown-clock", RUN + ["--policy", "static", "--clock", "sundial"] + DRY, ["clock", "sundial", "modeled", "wall"]),
    # numbers out of range, with the limit
    ("batch-size-0", RUN + ["--policy", "static", "--batch-size", "0"] + DRY, ["--batch-size", ">= 1", "0"]),
    ("batch-size-negative", RUN + ["--policy", "static", "--batch-size", "-3"] + DRY, ["--batch-size", ">= 1", "-3"]),
    ("batch-size-text", RUN + ["--policy", "static", "--batch-size", "abc"] + DRY, ["--batch-size", "integer", "abc"]),
    ("batch-size-float", RUN + ["--policy", "static", "--batch-size", "2.5"] + DRY, ["--batch-size", "integer", "2.5"]),
    ("chunk-size-0", RUN + ["--policy", "chunked", "--chunk-size", "0"] + DRY, ["--chunk-size", ">= 1"]),
    ("max-batch-tokens-below-batch", RUN + ["--policy", "chunked", "--batch-size", "8", "--max-batch-tokens", "4"] + DRY,
     ["max_batch_tokens", "batch_size", "8", "4"]),
    ("timeout-negative", RUN + ["--policy", "dynamic", "--timeout", "-1"] + DRY, ["--timeout", ">= 0", "-1"]),
    ("timeout-nan", RUN + ["--policy", "dynamic", "--timeout", "nan"] + DRY, ["--timeout", "finite", "nan"]),
    ("timeout-inf", RUN + ["--policy", "dynamic", "--timeout", "inf"] + DRY, ["--timeout", "finite", "inf"]),
    ("timeout-text", RUN + ["--policy", "dynamic", "--timeout", "abc"] + DRY, ["--timeout", "number", "abc"]),
    ("kv-budget-0", RUN + ["--policy", "static", "--kv-budget", "0"] + DRY, ["--kv-budget", ">= 1"]),
    ("kv-layout-unknown", RUN + ["--policy", "static", "--kv-layout", "pages"] + DRY, ["kv_layout", "pages", "slab", "paged"]),
    ("block-size-0", RUN + ["--policy", "static", "--kv-layout", "paged", "--block-size", "0"] + DRY,
     ["--block-size", ">= 1"]),
    ("block-size-with-slabs", RUN + ["--policy", "static", "--block-size", "8"] + DRY, ["block_size", "paged"]),
    ("paged-pool-too-small", RUN + ["--policy", "continuous", "--kv-layout", "paged", "--kv-budget", "1000"] + DRY,
     ["kv_budget", "0 blocks", "shortest prompt"]),
    ("max-model-len-too-big", RUN + ["--policy", "static", "--max-model-len", "99999"] + DRY,
     ["max_model_len", "1..4096", "99999"]),
    ("seed-text", RUN + ["--policy", "static", "--seed", "abc"] + DRY, ["--seed", "abc"]),
    ("max-new-tokens-0", ["generate", "def ", "--max-new-tokens", "0"], ["--max-new-tokens", ">= 1"]),
    ("max-new-tokens-text", ["generate", "def ", "--max-new-tokens", "abc"], ["--max-new-tokens", "integer", "abc"]),
    ("empty-prompt", ["generate", ""], ["prompt", "empty"]),
    ("prompt-longer-than-context", ["generate", "x" * 5000], ["prompt", "5001", "context", "4096"]),
    ("max-new-tokens-over-context", ["generate", "abc", "--max-new-tokens", "5000"], ["5000", "4096"]),
    ("prompt-plus-output-over-context", ["generate", "y" * 4000, "--max-new-tokens", "200"],
     ["prompt", "4001", "200", "4096"]),
    # workload files
    ("missing-file", ["run", "--workload", "nowhere.jsonl", "--policy", "static"] + DRY, ["nowhere.jsonl", "no such file"]),
    ("directory", ["run", "--workload", "dir.jsonl", "--policy", "static"] + DRY, ["dir.jsonl", "directory"]),
    ("malformed-json", ["run", "--workload", "malformed.jsonl", "--policy", "static"] + DRY,
     ["malformed.jsonl", "line 2", "malformed json"]),
    ("missing-field", ["run", "--workload", "missing_field.jsonl", "--policy", "static"] + DRY,
     ["line 1", "max_new_tokens", "missing"]),
    ("no-prompt", ["run", "--workload", "no_prompt.jsonl", "--policy", "static"] + DRY, ["line 1", "prompt", "prompt_len"]),
    ("wrong-type", ["run", "--workload", "wrong_type.jsonl", "--policy", "static"] + DRY,
     ["line 1", "prompt_len", "integer"]),
    ("float-max-new-tokens", ["run", "--workload", "float_tokens.jsonl", "--policy", "static"] + DRY,
     ["line 1", "max_new_tokens", "integer", "3.5"]),
    ("int-id", ["run", "--workload", "int_id.jsonl", "--policy", "static"] + DRY, ["line 1", "id", "string"]),
    ("string-ignore-eos", ["run", "--workload", "bool_eos.jsonl", "--policy", "static"] + DRY,
     ["line 1", "ignore_eos", "true or false"]),
    ("not-an-object", ["run", "--workload", "not_object.jsonl", "--policy", "static"] + DRY, ["line 1", "object"]),
    ("unknown-field", ["run", "--workload", "unknown_field.jsonl", "--policy", "static"] + DRY,
     ["line 1", "colour", "max_new_tokens"]),
    ("non-utf8", ["run", "--workload", "not_utf8.jsonl", "--policy", "static"] + DRY, ["line 2", "utf-8"]),
    ("duplicate-id", ["run", "--workload", "duplicate.jsonl", "--policy", "static"] + DRY,
     ["line 3", "duplicate", "'a'", "line 1"]),
    ("negative-arrival", ["run", "--workload", "negative_arrival.jsonl", "--policy", "static"] + DRY,
     ["arrival_s", ">= 0", "-0.5"]),
    ("nan-arrival", ["run", "--workload", "nan_arrival.jsonl", "--policy", "static"] + DRY, ["arrival_s", "finite", "nan"]),
    ("inf-arrival", ["run", "--workload", "inf_arrival.jsonl", "--policy", "static"] + DRY, ["arrival_s", "finite"]),
    ("empty-file", ["run", "--workload", "empty.jsonl", "--policy", "static"] + DRY, ["empty.jsonl", "no requests"]),
    ("blank-file", ["run", "--workload", "blank.jsonl", "--policy", "static"] + DRY, ["blank.jsonl", "no requests"]),
    ("dry-run-unknown-output-length", ["run", "--workload", "eos_unknown.jsonl", "--policy", "static"] + DRY,
     ["dry_run", "talker", "ignore_eos"]),
    # knobs that do not apply / do not combine
    ("chunk-size-with-static", RUN + ["--policy", "static", "--chunk-size", "4"] + DRY,
     ["chunk_size", "static", "chunked"]),
    ("timeout-with-continuous", RUN + ["--policy", "continuous", "--timeout", "1"] + DRY,
     ["timeout", "continuous", "static", "dynamic"]),
    ("max-batch-tokens-with-continuous", RUN + ["--policy", "continuous", "--max-batch-tokens", "5"] + DRY,
     ["max_batch_tokens", "continuous", "chunked"]),
    ("prefill-first-with-chunked", RUN + ["--policy", "chunked", "--prefill-first"] + DRY,
     ["prefill_first", "chunked", "continuous"]),
    ("prefill-and-decode-first", RUN + ["--policy", "continuous", "--prefill-first", "--decode-first"] + DRY,
     ["--decode-first", "--prefill-first"]),
    ("max-waiting-steps-negative", RUN + ["--policy", "continuous", "--max-waiting-steps", "-1"] + DRY,
     ["--max-waiting-steps", ">= 0", "-1"]),
    ("max-waiting-steps-text", RUN + ["--policy", "continuous", "--max-waiting-steps", "soon"] + DRY,
     ["--max-waiting-steps", "integer", "unbounded", "soon"]),
    ("max-waiting-steps-with-static", RUN + ["--policy", "static", "--max-waiting-steps", "3"] + DRY,
     ["max_waiting_steps", "static", "continuous"]),
    ("max-waiting-steps-with-prefill-first", RUN + ["--policy", "continuous", "--prefill-first",
                                                    "--max-waiting-steps", "3"] + DRY,
     ["max_waiting_steps", "3", "prefill_first"]),
    ("tokens-with-dry-run", RUN + ["--policy", "static", "--tokens"] + DRY, ["--tokens", "dry"]),
    ("wall-clock-dry-run", RUN + ["--policy", "static", "--clock", "wall"] + DRY, ["dry_run", "modeled clock"]),
    ("hardware-with-wall-clock", RUN + ["--policy", "static", "--clock", "wall", "--hardware", "h200-70b-fp8"],
     ["hardware", "modeled clock"]),
    ("trace-into-missing-dir", RUN + ["--policy", "static", "--trace", "nodir/t.json"] + DRY, ["nodir", "does not exist"]),
    ("perfetto-into-missing-dir", RUN + ["--policy", "static", "--perfetto", "nodir/p.json"] + DRY,
     ["nodir", "does not exist"]),
    ("trace-is-a-directory", RUN + ["--policy", "static", "--trace", "outdir"] + DRY, ["outdir", "directory"]),
    ("perfetto-under-a-file", RUN + ["--policy", "static", "--perfetto", "ok.jsonl/p.json"] + DRY,
     ["ok.jsonl", "directory"]),
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    for name, data in FILES.items():
        (d / name).write_bytes(data)
    for name in DIRS:
        (d / name).mkdir()
    return d


# Every bad-input case through the command's entry point, one after another in ONE fresh interpreter (`python -c
# ONE_INTERPRETER`, in the cases' folder, with the command's environment): what `python -m tinyserve ARGS` does is
# `sys.exit(main(ARGS))`, so each case is main(ARGS) with its own stdout and stderr, its exit status from main's
# return or SystemExit (argparse), an escaping exception printed as the interpreter prints it (a Traceback, exit 1),
# and warnings shown afresh for each case (catch_warnings resets what was already shown), as in a process of its
# own. The tests are about the message; REAL_PROCESS's cases also run as real processes and must answer the same,
# byte for byte. (A process per case, ~70 of them, cost most of this file's time.)
ONE_INTERPRETER = """
import contextlib, io, json, sys, traceback, warnings
from tinyserve.tools.cli import main
results = {}
for cid, argv in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) or e.code is None else (print(e.code, file=sys.stderr) or 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    results[cid] = [code or 0, out.getvalue(), err.getvalue()]
sys.__stdout__.write(json.dumps(results))
"""
# one case of each kind of answer: argparse's (SystemExit), a bad name before torch loads, a workload file's, an
# output path's
REAL_PROCESS = ["no-command", "unknown-device", "malformed-json", "trace-into-missing-dir"]


@pytest.fixture(scope="module")
def bad_results(workdir) -> dict[str, subprocess.CompletedProcess]:
    """Every bad-input case, run once per module in one interpreter (ONE_INTERPRETER)."""
    cases = json.dumps([[cid, argv] for cid, argv, _ in BAD])
    p = subprocess.run([sys.executable, "-c", ONE_INTERPRETER], cwd=workdir, env=ENV, capture_output=True,
                       text=True, timeout=TIMEOUT, input=cases)
    assert p.returncode == 0 and p.stderr == "", p.stderr[-3000:]
    got = json.loads(p.stdout)
    return {cid: subprocess.CompletedProcess(argv, *got[cid]) for cid, argv, _ in BAD}


@pytest.mark.parametrize("cid", REAL_PROCESS)
def test_a_real_process_answers_bad_input_as_the_one_interpreter_does(bad_results, workdir, cid):
    argv = next(argv for c, argv, _ in BAD if c == cid)
    p, q = cli(argv, workdir), bad_results[cid]
    assert (p.returncode, p.stdout, p.stderr) == (q.returncode, q.stdout, q.stderr)


@pytest.mark.parametrize("cid,argv,needles", BAD, ids=[c[0] for c in BAD])
def test_bad_input_gets_one_clear_line_and_exit_2(bad_results, cid, argv, needles):
    p = bad_results[cid]
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    assert p.stdout == "", p.stdout[:500]
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip() and p.stderr.endswith("\n"), p.stderr
    line = lines[0]
    assert line.startswith("tinyserve"), line
    assert len(line) < 400, line  # one readable line, not a dump
    for needle in needles:
        assert needle.lower() in line.lower(), (needle, line)


def test_every_request_over_long_exits_2_naming_each(workdir):
    p = cli(["run", "--workload", "all_too_long.jsonl", "--policy", "continuous", "--dry-run"], workdir)
    assert p.returncode == 2 and "Traceback" not in p.stderr + p.stdout, p.stderr
    lines = p.stderr.splitlines()
    # one line per rejected request (its id and the limit), then the error line
    assert [ln for ln in lines if "big1" in ln] and [ln for ln in lines if "big2" in ln], lines
    assert all("4096" in ln for ln in lines if "big" in ln), lines
    assert "every request was rejected" in lines[-1] and len(lines) == 3, lines


def check_summary(d: dict, policy: str, n_requests: int) -> None:
    assert TOP_KEYS <= set(d), set(d)
    assert d["policy"] == policy and d["clock"] == "modeled" and isinstance(d["hardware"], str)
    m = d["metrics"]
    assert METRIC_KEYS <= set(m), METRIC_KEYS - set(m)
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        assert set(m[k]) == LATENCY_KEYS, (k, m[k])
    assert len(d["requests"]) == n_requests
    for r in d["requests"]:
        assert REQUEST_KEYS <= set(r), REQUEST_KEYS - set(r)


def test_dry_run_json_trace_and_perfetto(workdir):
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    p = cli(["run", "--workload", "chapter-7.1-padding", "--policy", "static", "--dry-run", "--json",
             "--trace", "out/trace.json", "--perfetto", "out/perfetto.json"], workdir)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    d = strict_json(p.stdout)  # stdout is only JSON
    check_summary(d, "static", 2)
    assert d["workload"] == "chapter-7.1-padding"
    m = d["metrics"]
    assert m["padding_tokens"] == 4000 - 50 and m["prefill_tokens"] == 4050 and m["wasted_decode_tokens"] == 0
    assert m["ttft_ms"]["mean"] > 0 and m["e2el_ms"]["max"] >= m["e2el_ms"]["p50"]
    assert {r["id"]: (r["prompt_len"], r["output_len"]) for r in d["requests"]} == {"r0": (50, 16), "r1": (4000, 16)}
    assert all(r["prefill_computed_tokens"] == 4000 for r in d["requests"])

    tr = strict_json((out / "trace.json").read_text())
    assert len(tr["steps"]) == m["num_steps"] and tr["metrics"] == m
    assert sum(w["padding"] for s in tr["steps"] for w in s["works"]) == m["padding_tokens"]
    assert all({"slot", "request_id", "phase", "start", "tokens", "padding"} <= set(w)
               for s in tr["steps"] for w in s["works"])

    pf = strict_json((out / "perfetto.json").read_text())
    ev = pf["traceEvents"]
    names = {(e["tid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(0, "steps"), (1, "slot 0"), (2, "slot 1")} <= names
    slices = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    slot_tracks = {e["tid"] for e in slices if e["tid"] > 0}
    assert slot_tracks == {1, 2}  # a track per slot that did something
    assert {e["cat"] for e in slices if e["tid"] > 0} == {"prefill", "decode"}
    assert any(e["name"] == "r1 prefill" and e["args"]["padding"] == 0 for e in slices)
    assert any(e["name"] == "r0 prefill" and e["args"]["padding"] == 3950 for e in slices)
    counters = {e["name"] for e in ev if e["ph"] == "C"}
    assert {"batch", "kv_bytes"} <= counters
    assert sum(1 for e in slices if e["tid"] == 0) == m["num_steps"]


def test_text_summary(workdir):
    p = cli(["run", "--workload", "chapter-7.1-finisher", "--policy", "continuous", "--batch-size", "8", "--dry-run"],
            workdir)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "63 finished, 0 rejected" in p.stdout and "dry run" in p.stdout  # the finisher: 63 requests
    assert "per step" in p.stdout and "over time" in p.stdout and "kv (modeled: h200-70b-fp8" in p.stdout
    with pytest.raises(ValueError):
        json.loads(p.stdout)


def test_real_run_tokens_match_generate_and_over_long_is_rejected_alone(tmp_path):
    prompt = "def fib(n):"
    (tmp_path / "w.jsonl").write_text(jsonl(
        {"id": "fib", "prompt": prompt, "max_new_tokens": 6},
        {"id": "toolong", "prompt_len": 4090, "max_new_tokens": 10, "arrival_s": 0.0, "ignore_eos": True},
        {"prompt_len": 12, "max_new_tokens": 3, "arrival_s": 0.002, "ignore_eos": True},  # id: its line number
    ))
    with ThreadPoolExecutor(max_workers=2) as pool:
        fr = pool.submit(cli, ["run", "--workload", "w.jsonl", "--policy", "continuous", "--dtype", "float64",
                               "--device", "cpu", "--json", "--tokens"], tmp_path)
        fg = pool.submit(cli, ["generate", prompt, "--max-new-tokens", "6", "--dtype", "float64", "--device", "cpu",
                               "--json"], tmp_path)
        run, gen = fr.result(), fg.result()
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "toolong" in lines[0] and "4096" in lines[0], run.stderr
    d = strict_json(run.stdout)
    check_summary(d, "continuous", 3)
    reqs = {r["id"]: r for r in d["requests"]}
    assert set(reqs) == {"fib", "toolong", "3"}
    assert reqs["toolong"]["status"] == "rejected" and reqs["toolong"]["output_len"] == 0
    for rid in ("fib", "3"):
        r = reqs[rid]
        assert r["status"] == "finished" and len(r["tokens"]) == r["output_len"] >= 1
    assert reqs["3"]["output_len"] == 3
    assert d["metrics"]["output_tokens"] == reqs["fib"]["output_len"] + 3

    assert gen.returncode == 0 and gen.stderr == "", gen.stderr
    g = strict_json(gen.stdout)
    assert set(g) == {"prompt_tokens", "tokens", "text"}
    assert g["prompt_tokens"] == [BOS] + list(prompt.encode())
    assert 1 <= len(g["tokens"]) <= 6 and g["text"] == decode(g["tokens"])
    assert reqs["fib"]["tokens"] == g["tokens"]  # batching does not change the answer


def test_workloads_and_console_script_match_python_m(tmp_path):
    script = shutil.which("tinyserve", path=str(Path(sys.executable).parent)) or shutil.which("tinyserve")
    assert script, "the tinyserve console script is not installed next to this Python"
    a = cli(["workloads"], tmp_path)
    b = cli(["workloads"], tmp_path, exe=[script])
    assert a.returncode == b.returncode == 0 and a.stderr == b.stderr == ""
    assert a.stdout == b.stdout
    listed = [ln.split()[0] for ln in a.stdout.splitlines() if ln.strip()]
    for name in ("chapter-7.1-padding", "chapter-7.1-finisher", "chapter-7.2-longtail", "chapter-7.3-long-prompt"):
        assert name in listed
    assert all(len(ln.split(None, 1)) == 2 for ln in a.stdout.splitlines())  # each with a description
    e1 = cli(["run", "--workload", "x.jsonl", "--policy", "warp"], tmp_path)
    e2 = cli(["run", "--workload", "x.jsonl", "--policy", "warp"], tmp_path, exe=[script])
    assert e1.returncode == e2.returncode == 2 and e1.stderr == e2.stderr and "warp" in e1.stderr


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    # a real run long enough to be interrupted mid-way (32 requests, one of 2,000 tokens), started as
    # `python -m tinyserve` is, once its heavy imports are in: the child says so on a pipe of its own, so the signal
    # lands inside main() however long a loaded machine takes to import torch (a fixed sleep could land in the
    # imports, where no handler is yet, and the process died of the signal: exit -2)
    ready_r, ready_w = os.pipe()
    child = ("import os, runpy, sys, torch, tinyserve.tools.cli\n"
             f"os.write({ready_w}, b'1'); os.close({ready_w})\n"
             "sys.argv = ['tinyserve', 'run', '--workload', 'chapter-7.1-finisher', '--policy', 'static', "
             "'--device', 'cpu']\n"
             "runpy.run_module('tinyserve', run_name='__main__', alter_sys=True)\n")
    p = subprocess.Popen([sys.executable, "-c", child], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, preexec_fn=default_sigint,
                         pass_fds=(ready_w,))
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"1", p.communicate()  # b"": it exited before its imports were done
    finally:
        os.close(ready_r)
    time.sleep(1.0)  # inside main(): parsing, loading the model, the run
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert "Traceback" not in err and out == ""
    assert err.splitlines() == ["tinyserve: interrupted"], err


def test_a_paged_dry_run_reports_its_blocks(workdir):
    (workdir / "out").mkdir(exist_ok=True)
    p = cli(["run", "--workload", "chapter-7.2-longtail", "--policy", "continuous", "--batch-size", "256",
             "--workload-knob", "rate=16", "--kv-layout", "paged", "--block-size", "16", "--dry-run", "--json",
             "--trace", "out/paged.json", "--perfetto", "out/paged-perfetto.json"], workdir)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    d = strict_json(p.stdout)
    # the H200 preset's 51.25e9 bytes of KV in blocks of 16 x 327,680 bytes: 9,775 blocks
    assert d["kv"]["layout"] == "paged" and (d["kv"]["block_size"], d["kv"]["num_blocks"]) == (16, 9775)
    m = d["metrics"]
    assert 0 < m["blocks_used_peak"] <= 9775 and m["preemptions"] >= 0 and m["recomputed_tokens"] >= 0
    tr = strict_json((workdir / "out" / "paged.json").read_text())
    assert max(s["blocks_used"] for s in tr["steps"]) == m["blocks_used_peak"]
    assert all(s["blocks_used"] + s["blocks_free"] == 9775 for s in tr["steps"])
    assert tr["block_spans"] and all(len(sp) == 5 for sp in tr["block_spans"])
    counters = {e["name"] for e in strict_json((workdir / "out" / "paged-perfetto.json").read_text())["traceEvents"]
                if e["ph"] == "C"}
    assert {"kv_blocks", "preemption"} <= counters
