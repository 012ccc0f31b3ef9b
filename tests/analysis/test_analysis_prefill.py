"""analysis.prefill: the roofline numbers and trace readings the notebooks import. Expected values are worked
out by hand in the comments (round-number presets), not taken from the code under test."""
import math

import pytest

from tinyserve.analysis import prefill as P
from tinyserve.core.request import FINISHED, Request, decode_works
from tinyserve.cost.clock import ModeledClock
from tinyserve.cost.presets import HardwarePreset, get_preset
from tinyserve.trace.record import Trace


def toy(**over) -> HardwarePreset:
    """2 GB of weights at 1 TB/s (2 ms a step), 1e9 parameters at 1e14 flop/s (2e9 flops = 20 us a token)."""
    d = dict(name="toy", description="round numbers", bandwidth_Bps=1e12, peak_flops=1e14, overhead_s=0.0,
             weight_bytes=2e9, nonembed_params=1e9, n_layer=2, attn_dim=64, kv_bytes_per_token=1024.0, sources=[])
    d.update(over)
    return HardwarePreset(**d)


def test_roofline_of_round_numbers():
    hw = toy()
    assert P.weight_stream_s(hw) == pytest.approx(2e-3)  # 2e9 B / 1e12 B/s
    assert P.compute_s_per_token(hw) == pytest.approx(20e-6)  # 2 x 1e9 / 1e14
    assert P.linear_compute_s(hw, 50) == pytest.approx(1e-3)  # 50 x 20 us
    assert P.ridge_tokens(hw) == pytest.approx(100.0)  # 2 ms / 20 us
    assert P.ridge_intensity(hw) == pytest.approx(100.0)  # 1e14 / 1e12 flop per byte
    assert P.intensity(hw, 100) == pytest.approx(100.0)  # 2 x 1e9 x 100 / 2e9: the ridge in tokens and in flop/byte agree
    assert P.intensity(hw, 1) == pytest.approx(1.0)


def test_linear_time_is_flat_to_the_ridge_then_grows_by_one_token_of_arithmetic_each():
    clock = ModeledClock(toy())
    assert P.linear_s(clock, 1) == pytest.approx(2e-3)
    assert P.linear_s(clock, 99) == pytest.approx(2e-3)  # 99 x 20 us = 1.98 ms < 2 ms: hidden in the stream
    assert P.linear_s(clock, 300) == pytest.approx(6e-3)  # 300 x 20 us
    assert P.achieved_flops(clock, 50) == pytest.approx(5e13)  # 2e9 x 50 flops in 2 ms: half the peak
    assert P.achieved_flops(clock, 300) == pytest.approx(1e14)  # compute-bound: the peak


def test_the_h200_ridge_is_near_160_tokens():
    hw = get_preset("h200-70b-fp8")
    # 70.55e9 B / 3.84e12 B/s = 18.37 ms; 2 x 68.45e9 / 1.1874e15 = 0.1153 ms a token; 18.37 / 0.1153 = 159.4
    assert P.weight_stream_s(hw) * 1e3 == pytest.approx(18.37, abs=0.01)
    assert P.compute_s_per_token(hw) * 1e3 == pytest.approx(0.1153, abs=1e-4)
    assert P.ridge_tokens(hw) == pytest.approx(159.4, abs=0.1)


def test_decode_and_mixed_works():
    ws = decode_works([5, 9], first_slot=3)
    assert [(w.slot, w.phase, w.start, w.tokens) for w in ws] == [(3, "decode", 4, 1), (4, "decode", 8, 1)]
    ws = P.mixed_works(2, 10, 64, chunk_start=128)
    assert [(w.slot, w.phase, w.start, w.tokens) for w in ws] == [(0, "decode", 9, 1), (1, "decode", 9, 1),
                                                                  (2, "prefill", 128, 64)]
    assert sum(w.tokens for w in ws) == 66


def _trace(times: dict[str, list[float]], arrival: dict[str, float]) -> Trace:
    reqs = []
    for rid, tt in times.items():
        r = Request(rid, [0, 1, 2], len(tt), arrival[rid], ignore_eos=True)
        r.token_times = list(tt)
        r.output = [7] * len(tt)
        r.status = FINISHED if tt else r.status
        r.finish_s = tt[-1] if tt else None
        reqs.append(r)
    return Trace("continuous", "hand", "modeled", None, 2, {}, True, [], reqs)


def test_worst_gap_ttft_e2el_from_token_times():
    tr = _trace({"a": [0.10, 0.12, 0.20], "b": [0.50, 0.51], "long": [1.0, 2.5], "none": []},
                {"a": 0.0, "b": 0.25, "long": 0.5, "none": 0.0})
    assert P.worst_gap_ms(tr, "a") == pytest.approx(80.0)  # 0.20 - 0.12
    assert P.worst_gap_ms(tr, ["a", "b"]) == pytest.approx(80.0)
    assert P.worst_gap_ms(tr, "b") == pytest.approx(10.0)
    assert P.worst_gap_ms(tr) == pytest.approx(1500.0)  # all of them: long's 2.5 - 1.0
    assert P.worst_gap_ms(tr, "none") == 0.0  # no two tokens: no gap
    assert P.worst_gap_step(tr, "none") is None
    assert P.ttft_ms(tr, "b") == pytest.approx(250.0)  # 0.50 - 0.25
    assert P.ttft_ms(tr, "none") is None
    assert P.e2el_ms(tr, "long") == pytest.approx(2000.0)  # 2.5 - 0.5
    with pytest.raises(KeyError):
        P.worst_gap_ms(tr, "nobody")


def test_worst_gap_step_of_a_dry_run():
    from tinyserve.core.workloads import make_prompt
    from tinyserve.engine import Engine

    # two 10-token prompts prefilled together (step 0, 20 tokens, first tokens), then two decode steps of 2
    # tokens each; the second reads one more key per sequence, so it is the longer: the worst gap ends there
    reqs = [Request(f"r{i}", make_prompt(10, seed=i), 3, 0.0, ignore_eos=True) for i in range(2)]
    t = Engine().run(reqs, "continuous", batch_size=2, dry_run=True, progress=False)
    assert [s.tokens for s in t.steps] == [20, 2, 2]
    s = P.worst_gap_step(t)
    assert (s.index, s.tokens) == (2, 2)
    assert math.isclose(P.worst_gap_ms(t), 1e3 * t.steps[2].duration_s)
    assert P.worst_gap_step(t, "r0").index == 2
