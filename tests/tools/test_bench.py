"""`tinyserve bench`: the --quick smoke run has every system, identical tokens and positive throughputs
(performance is measured by the benchmark, never asserted here), and without transformers the command fails
with one clear line and exit 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("transformers")
pytest.importorskip("psutil")

from tinyserve.tools import bench  # noqa: E402

SYSTEMS = {"ours static B=16", "ours dynamic B=16", "ours continuous B=16", "ours continuous B=32",
           "ours continuous B=64", "ours chunked B=32", "hf generate static B=16", "hf generate static B=16 sorted",
           "hf continuous"}


@pytest.fixture(scope="module")
def quick_result() -> dict:
    return bench.run_bench(repeats=1, quick=True, device="cpu")


def test_workload_is_seeded_and_long_tailed() -> None:
    a, b = bench.make_workload(), bench.make_workload()
    assert [(s.prompt, s.output_len) for s in a] == [(s.prompt, s.output_len) for s in b]
    assert len(a) == 64
    prompts, outs = [len(s.prompt) for s in a], [s.output_len for s in a]
    assert all(16 <= p <= 64 or 256 <= p <= 512 for p in prompts)
    assert all(16 <= o <= 64 or o == 256 for o in outs)
    assert 4 <= sum(p >= 256 for p in prompts) <= 16 and 2 <= sum(o == 256 for o in outs) <= 12
    q = bench.make_workload(quick=True)
    assert len(q) == 12 and sum(s.output_len for s in q) < sum(outs) / 5


def test_quick_bench_structure(quick_result: dict) -> None:
    res = quick_result
    assert {x["system"] for x in res["systems"]} == SYSTEMS
    total = res["workload"]["output_tokens"]
    assert total == sum(res["workload"]["output_lens"]) > 0
    for x in res["systems"]:
        assert x["tokens_identical"], f"{x['system']}: {x['mismatches']}"
        assert x["identical"] == x["total"] == res["workload"]["num_requests"]
        assert len(x["tokens_per_s_all"]) == 1 and x["tokens_per_s"] > 0
        assert x["tokens_per_s_min"] <= x["tokens_per_s"] <= x["tokens_per_s_max"]
        assert x["vs_hf_continuous"] > 0 and x["vs_hf_oracle_static"] > 0
    g = res["goals"]
    # the goals are the stated thresholds (3x hf continuous, 1x hf oracle-sorted static) applied to the ratios
    assert g["continuous_3x_hf_continuous"] is (g["ours_continuous_vs_hf_continuous"] >= 3.0)
    assert g["continuous_1x_hf_oracle_static"] is (g["ours_continuous_vs_hf_oracle_static"] >= 1.0)
    b = res["bookkeeping"]
    assert b["steps"] > 0 and 0 <= b["bookkeeping_share"] < 1 and 0 < b["forward_s"] <= b["loop_s"]
    for curve in (res["decode_step_ours"], res["decode_step_hf"]):
        assert [c["batch"] for c in curve] == [1, 8] and all(c["step_ms"] > 0 for c in curve)
    m = res["machine"]
    assert m["torch"] and m["transformers"] and m["cpu"] and m["date"]
    # each kind ran in its own process (--quick) with its own default threads: ours tinyserve's, transformers' torch's
    from tinyserve import threads

    want_ours = int(os.environ.get("OMP_NUM_THREADS", threads.recommended_threads()))
    want_hf = int(os.environ.get("OMP_NUM_THREADS", len(os.sched_getaffinity(0))))
    assert {x["system"]: x["threads"] for x in res["systems"]} == m["torch_threads"] == {
        s: want_ours if s.startswith("ours") else want_hf for s in SYSTEMS}
    json.dumps(res)  # --json must be able to print it
    table = bench.format_table(res)
    assert all(name in table for name in SYSTEMS) and "goals:" in table


def test_cli_json(capsys, monkeypatch, quick_result: dict) -> None:
    # the CLI path prints exactly one JSON object (reusing the module's run to stay fast)
    from tinyserve.tools.cli import main

    monkeypatch.setattr(bench, "run_bench", lambda **kw: quick_result)
    assert main(["bench", "--json", "--quick", "--repeats", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["systems"] == quick_result["systems"]


def test_bench_without_transformers_is_one_clear_line() -> None:
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "transformers" or name.startswith("transformers."):
                    raise ImportError("blocked for the test")
                return None
        sys.meta_path.insert(0, Block())
        from tinyserve.tools.cli import main
        sys.exit(main(["bench"]))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "transformers" in lines[0] and "Traceback" not in p.stderr
