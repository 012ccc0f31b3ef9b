"""Every metric on small schedules counted by hand (issue #8, item 6).

The clock is the modeled one on a preset whose rates are so high that a step costs exactly its fixed overhead,
10 ms: every time below is then a count of steps and gaps, worked out in the comments. The expected values
come from those comments, not from running the code.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.cost.presets import PRESET_DIR
from tinyserve.engine import Engine

D = 0.010  # every step lasts 10 ms
BPT = 327_680  # KV bytes per token of the preset's model (Llama-3-70B-class, bf16 KV)


@pytest.fixture(scope="module")
def ten_ms(tmp_path_factory) -> str:
    """The h200 preset with effectively infinite bandwidth and flops: a step = its 10 ms overhead."""
    d = json.loads((PRESET_DIR / "h200-70b-fp8.json").read_text())
    d.update(bandwidth_Bps=1e30, peak_flops=1e30, overhead_s=D)
    for k in ("attn_flops",):
        if k in d:
            d[k] = 1e30
    if "call_overhead_s" in d:
        d["call_overhead_s"] = 0.0
    path = tmp_path_factory.mktemp("preset") / "ten-ms.json"
    path.write_text(json.dumps(d))
    return str(path)


def req(rid: str, prompt: int, out: int, arrival: float = 0.0) -> Request:
    return Request(rid, [BOS] + [70] * (prompt - 1), out, arrival, ignore_eos=True)


def run(ten_ms, reqs, policy, **knobs):
    return Engine().run(reqs, policy, hardware=ten_ms, dry_run=True, **knobs)


@pytest.fixture(scope="module")
def cont(ten_ms):
    """Continuous, 2 slots, prefill-first. a (prompt 3, 3 tokens) and b (prompt 2, 1 token) at t=0; c (prompt 2,
    2 tokens) at t=0.1, after an idle gap.
      step 0  t=0.00-0.01  slot 0: a prefill -> a1    slot 1: b prefill -> b1 (b done)
      step 1  t=0.01-0.02  slot 0: a decode  -> a2    slot 1: idle (b left)
      step 2  t=0.02-0.03  slot 0: a decode  -> a3 (a done)
      idle    t=0.03-0.10  nothing to run: the clock jumps to c's arrival
      step 3  t=0.10-0.11  slot 0: c prefill -> c1 (the lowest free slot)
      step 4  t=0.11-0.12  slot 0: c decode  -> c2 (c done)
    """
    return run(ten_ms, [req("a", 3, 3), req("b", 2, 1), req("c", 2, 2, 0.1)], "continuous", batch_size=2)


def test_step_times_are_the_overhead(cont):
    assert [round(s.start_s, 9) for s in cont.steps] == [0.0, 0.01, 0.02, 0.1, 0.11]
    assert [s.duration_s for s in cont.steps] == pytest.approx([D] * 5, abs=1e-12)


def test_latencies(cont):
    m = cont.metrics()
    # TTFT: a and b get their first token at the end of step 0 (10 ms); c at 0.11 - 0.10 = 10 ms
    assert m["ttft_ms"]["mean"] == pytest.approx(10.0) and m["ttft_ms"]["max"] == pytest.approx(10.0)
    # e2e: a 30 ms, b 10 ms, c 0.12 - 0.10 = 20 ms -> mean 20, p50 20, max 30
    assert (m["e2el_ms"]["mean"], m["e2el_ms"]["p50"], m["e2el_ms"]["max"]) == pytest.approx((20.0, 20.0, 30.0))
    # TPOT (first token excluded): a (30 - 10) / 2 = 10 ms, c (20 - 10) / 1 = 10 ms; b has one token: none
    assert m["tpot_ms"]["mean"] == pytest.approx(10.0) and m["tpot_ms"]["p99"] == pytest.approx(10.0)
    # ITL: a's gaps 10, 10 and c's 10: three gaps of 10 ms
    assert m["itl_ms"]["mean"] == pytest.approx(10.0) and m["itl_ms"]["max"] == pytest.approx(10.0)
    assert sum(len(r.token_times) - 1 for r in cont.requests) == 3


def test_throughput_and_duration(cont):
    m = cont.metrics()
    # from the first arrival (0) to the last finish (0.12): 6 tokens (3 + 1 + 2), 3 requests
    assert m["duration_s"] == pytest.approx(0.12)
    assert m["output_throughput"] == pytest.approx(6 / 0.12)  # 50 tokens/s
    assert m["request_throughput"] == pytest.approx(3 / 0.12)  # 25 requests/s
    assert (m["num_steps"], m["output_tokens"], m["num_finished"]) == (5, 6, 3)
    assert (m["prefill_tokens"], m["decode_tokens"], m["padding_tokens"], m["wasted_decode_tokens"]) == (7, 3, 0, 0)


def test_utilisation_per_step_and_time_weighted(cont):
    m = cont.metrics()
    # per step: useful slot-steps 2 + 1 + 1 + 1 + 1 = 6 of 2 slots x 5 steps = 10 -> 0.6 (the gap is invisible)
    assert m["slot_utilization"] == pytest.approx(0.6)
    assert m["slot_steps"] == pytest.approx({"useful": 6, "padding": 0, "wasted": 0, "idle": 4})
    assert m["idle_slot_steps"] == 4
    # time-weighted: 6 useful slot-steps x 10 ms = 0.06 slot-s of 2 slots x 0.12 s = 0.24 -> 0.25
    assert m["time_utilization"] == pytest.approx(0.25)
    # steps fill 5 x 10 ms of the 120 ms
    assert m["busy_time_fraction"] == pytest.approx(0.05 / 0.12)


def test_kv_used_and_reserved(cont, ten_ms):
    m = cont.metrics()
    # held after each step: step 0 a 3 + b 2 = 5; step 1 a 3 + 1 = 4; step 2 a 5; step 3 c 2; step 4 c 3
    assert [s.kv_used_bytes // BPT for s in cont.steps] == [5, 4, 5, 2, 3]
    # reserved: both slots' slabs of the server's maximum length (4,096 positions) from step 0, busy or not
    assert [s.kv_reserved_bytes // BPT for s in cont.steps] == [8192] * 5
    assert (m["kv_used_bytes_peak"], m["kv_reserved_bytes_peak"]) == (5 * BPT, 8192 * BPT)
    # the what-if of slabs of the run's longest (a's 3 + 3 = 6 positions): 12 positions, still from step 0
    longest = run(ten_ms, [req("a", 3, 3), req("b", 2, 1), req("c", 2, 2, 0.1)], "continuous", batch_size=2,
                  slab="longest")
    assert [s.kv_reserved_bytes // BPT for s in longest.steps] == [12] * 5


def test_slot_phases(cont):
    grid = cont.slot_phases()
    assert grid.tolist() == [["prefill", "decode", "decode", "prefill", "decode"],
                             ["prefill", "idle", "idle", "idle", "idle"]]


def test_perfetto_merges_a_requests_consecutive_steps_of_one_phase(cont):
    ev = cont.to_perfetto()["traceEvents"]
    slices = sorted((e["tid"] - 1, e["name"], round(e["ts"]), round(e["dur"]), e["args"]["tokens"])
                    for e in ev if e["ph"] == "X" and e["tid"] > 0)
    # slot 0: a's prefill (step 0), a's two decodes merged into one 20 ms slice, c's prefill, c's decode;
    # c's prefill is not merged with a's decode (another request) nor across the idle gap
    assert slices == [(0, "a decode", 10_000, 20_000, 2), (0, "a prefill", 0, 10_000, 3),
                      (0, "c decode", 110_000, 10_000, 1), (0, "c prefill", 100_000, 10_000, 2),
                      (1, "b prefill", 0, 10_000, 2)]


def test_static_padding_and_wasted_slots(ten_ms):
    """Static, 2 slots: a (prompt 3, 3 tokens) and b (prompt 1, 1 token) launch together.
      step 0: a prefill 3 tokens; b prefill 1 token + 2 padding (padded to 3) -> a1, b1 (b done)
      step 1: a decode -> a2; b wasted
      step 2: a decode -> a3; b wasted; the batch ends
    """
    tr = run(ten_ms, [req("a", 3, 3), req("b", 1, 1)], "static", batch_size=2)
    m = tr.metrics()
    assert (m["padding_tokens"], m["wasted_decode_tokens"], m["prefill_tokens"], m["decode_tokens"]) == (4 - 2, 2, 4, 2)
    # b's prefill slot-step is 1/3 useful, 2/3 padding; a is useful in all 3 steps; b wastes 2
    assert m["slot_steps"] == pytest.approx({"useful": 3 + 1 / 3, "padding": 2 / 3, "wasted": 2, "idle": 0})
    assert m["slot_utilization"] == pytest.approx((10 / 3) / 6)  # 0.5556
    assert m["time_utilization"] == pytest.approx((10 / 3) * D / (2 * 0.03))  # no gaps: the same 0.5556
    assert tr.request("b").prefill_computed_tokens == 3 and tr.request("b").decode_computed_tokens == 2
    assert tr.slot_phases().tolist() == [["prefill", "decode", "decode"], ["prefill", "wasted", "wasted"]]
    # b: first token at 10 ms, its e2e 10 ms, though its slot is held until 30 ms
    assert tr.request_dict(tr.request("b"))["e2el_ms"] == pytest.approx(10.0)


def test_dynamic_timeout_wait_counts_as_idle_time(ten_ms):
    """Dynamic, 4 slots, timeout 50 ms: x and y (prompt 2, 2 tokens) at t=0; z (the same) at t=0.5.
      0.00-0.05 x, y wait for the timeout (z is still to come, so the batch waits for it or the timeout)
      step 0 0.05-0.06 x, y prefill; step 1 0.06-0.07 x, y decode
      0.07-0.50 idle until z arrives; nothing else is coming, so z launches at once
      step 2 0.50-0.51 z prefill; step 3 0.51-0.52 z decode
    """
    tr = run(ten_ms, [req("x", 2, 2), req("y", 2, 2), req("z", 2, 2, 0.5)], "dynamic", batch_size=4, timeout=0.05)
    m = tr.metrics()
    # TTFT: x, y 60 ms, z 10 ms -> median 60; e2e: x, y 70 ms, z 20 ms
    assert m["ttft_ms"]["p50"] == pytest.approx(60.0) and m["e2el_ms"]["max"] == pytest.approx(70.0)
    assert m["duration_s"] == pytest.approx(0.52)
    # per step: 2 + 2 + 1 + 1 = 6 useful slot-steps of 4 slots x 4 steps = 0.375;
    # by time: 6 x 10 ms = 0.06 slot-s of 4 slots x 0.52 s = 2.08 -> 0.0288
    assert m["slot_utilization"] == pytest.approx(6 / 16)
    assert m["time_utilization"] == pytest.approx(0.06 / 2.08)
    assert m["busy_time_fraction"] == pytest.approx(0.04 / 0.52)
    assert np.count_nonzero(tr.slot_phases() == "idle") == 10 == m["idle_slot_steps"]
