"""analysis/steady.py and the goodput it serves: runs long enough to read a steady state, saturation throughput read
while overloaded, and no goodput above what a deployment sustains, from `tinyserve goodput`'s own defaults."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tinyserve.analysis import steady
from tinyserve.analysis.goodput import goodput_per_gpu, parse_spec, run_config, sweep
from tinyserve.deploy import run_deployment
from tinyserve.engine import Engine


def test_saturation_counts_the_middle_of_the_completions():
    # 100 completions: the first 10 and the last 10 ignored; completions 10..90 arrive every 0.5 s: 2 per second,
    # whatever the slow start (one every 5 s) and the drain (one every 3 s) look like
    f = [5.0 * i for i in range(10)] + [50.0 + 0.5 * i for i in range(81)] + [90.0 + 3 * i for i in range(1, 10)]
    assert steady.saturation(f) == pytest.approx(80 / 40.0)


def test_a_run_is_steady_with_enough_requests_for_its_rate():
    assert steady.requests_at(1.0) == steady.MIN_REQUESTS
    fast = 2 * steady.MIN_REQUESTS / steady.SPAN_S  # twice as many arrive in the span as the minimum
    assert steady.requests_at(fast) == pytest.approx(2 * steady.MIN_REQUESTS, abs=1)
    assert steady.requests_at(fast, scale=2) == pytest.approx(4 * steady.MIN_REQUESTS, abs=2)
    assert steady.is_burst(200, 1.0) and not steady.is_burst(steady.requests_at(7.0), 7.0)


def _throughput_when_overloaded(spec: str, gpus: int) -> float:
    """Completions per second of 2,000 requests offered at 30 req/s per GPU (far past what any deployment here
    sustains), first to last completion: measured independently of steady.saturation's window."""
    dc, own = parse_spec(spec)
    rc = run_config("chunked", {"dry_run": True, "seed": 0}, own, {"rate": 30.0 * gpus, "n": 2000})
    f = sorted(r.finish_s for r in run_deployment(Engine(), "chapter-7.3-mixed", rc, dc).requests)
    return (len(f) - 1) / (f[-1] - f[0])


SPECS = [("colocated:2,chunk_size=128", 2), ("disaggregated:1:1,prefill_chunk_size=none,decode_batch_size=64", 2)]


@pytest.mark.slow
def test_goodput_from_the_commands_defaults_is_never_above_what_the_deployment_sustains():
    """The defaults of `tinyserve goodput` (no n given): before steady runs, 200 requests read the split's goodput
    at the paper's targets above what it can complete per second."""
    rates = [2.0, 4.0, 8.0, 12.0, 16.0, 24.0]
    rows = sweep([s for s, _ in SPECS], "chapter-7.3-mixed", rates, 2500.0, 150.0)
    assert not any(r["burst"] for r in rows) and all(r["requests"] >= steady.MIN_REQUESTS for r in rows)
    for g, (spec, gpus) in zip(goodput_per_gpu(rows), SPECS):
        assert g["goodput_per_gpu"] is not None
        sustained = _throughput_when_overloaded(spec, gpus) / gpus
        assert g["goodput_per_gpu"] <= sustained, (spec, g, sustained)
        assert g["saturation_per_gpu"] == pytest.approx(sustained, rel=0.1)  # the two ways of measuring agree


@pytest.mark.slow
def test_a_short_run_is_said_to_be_a_burst():
    out = subprocess.run([sys.executable, "-m", "tinyserve", "goodput", "--workload", "chapter-7.3-mixed",
                          "--rates", "4,12", "--slo-ttft-ms", "2500", "--slo-tpot-ms", "150", "--deployment",
                          "colocated:1,chunk_size=128", "--workload-knob", "n=200", "--json"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert all(r["burst"] and r["requests"] == 200 for r in doc["rows"]) and doc["goodput"][0]["burst"]
    # the saturation is measured on its own 1,000 requests whatever n the sweep was given
    assert doc["rows"][0]["saturation_rps"] == pytest.approx(_throughput_when_overloaded(
        "colocated:1,chunk_size=128", 1), rel=0.1)
    text = subprocess.run([sys.executable, "-m", "tinyserve", "goodput", "--workload", "chapter-7.3-mixed",
                           "--rates", "4,12", "--slo-ttft-ms", "2500", "--slo-tpot-ms", "150", "--deployment",
                           "colocated:1,chunk_size=128", "--workload-knob", "n=200"],
                          capture_output=True, text=True, check=True).stdout
    assert "~ :" in text and text.split("\n")[2].rstrip().endswith("~")  # the row is marked, the mark explained
