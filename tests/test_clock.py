"""Clocks: the roofline cost model, the presets and their sources, and calibration."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from tinyserve.clock import (DEFAULT_HARDWARE, ModeledClock, WallClock, calibrate, fit_roofline, get_preset,
                             list_presets, load_preset, make_clock, model_preset, save_preset)
from tinyserve.errors import TinyserveError
from tinyserve.model import GPTConfig, TinyGPT
from tinyserve.requests import Work

H200 = "h200-70b-fp8"


def decodes(batch: int, context: int, phase: str = "decode") -> list[Work]:
    return [Work(i, None, phase, context - 1, 1) for i in range(batch)]


@pytest.fixture(scope="module")
def h200() -> ModeledClock:
    return ModeledClock(H200)


def test_presets_ship_and_default_is_h200():
    names = list_presets()
    assert {"h200-70b-fp8", "4xh100-70b-bf16"} <= set(names)
    assert DEFAULT_HARDWARE == H200 and make_clock("modeled").hardware.name == H200
    for n in names:
        p = get_preset(n)
        assert p.name == n and p.sources and all(isinstance(s, str) and s for s in p.sources)
        assert p.bandwidth_Bps > 0 and p.peak_flops > 0 and p.overhead_s >= 0


def test_unknown_preset_and_clock_are_clear_errors():
    with pytest.raises(TinyserveError, match=r"hardware: unknown 'x' \(choose .*h200-70b-fp8"):
        get_preset("x")
    with pytest.raises(TinyserveError, match=r"clock: unknown 'sundial' \(choose modeled, wall\)"):
        make_clock("sundial")


def test_wall_clock_returns_what_the_engine_measured():
    c = make_clock("wall")
    assert isinstance(c, WallClock) and c.name == "wall"
    assert c.step_time(decodes(3, 10), 0.0125) == 0.0125
    with pytest.raises(ValueError):
        c.step_time(decodes(1, 10), None)


def test_modeled_time_is_a_pure_function_of_the_works(h200):
    works = decodes(5, 300) + [Work(9, None, "prefill", 128, 512), Work(10, None, "prefill", 0, 40, padding=60)]
    t = h200.step_time(works)
    again = [Work(w.slot, None, w.phase, w.start, w.tokens, w.padding) for w in works]
    random.Random(0).shuffle(again)
    assert h200.step_time(again) == t and h200.cost(again) == h200.cost(works)
    assert ModeledClock(H200).step_time(works, measured_s=123.0) == t  # measured time is ignored
    assert h200.step_time([]) == 0.0


def test_modeled_time_grows_with_batch_context_and_prompt(h200):
    by_batch = [h200.decode_step_time(b, 1000) for b in (1, 2, 8, 32, 128, 512)]
    by_context = [h200.decode_step_time(16, c) for c in (1, 100, 1000, 4000)]
    by_prompt = [h200.prefill_time(n) for n in (1, 50, 512, 4000)]
    for seq in (by_batch, by_context, by_prompt):
        assert all(a < b for a, b in zip(seq, seq[1:])), seq


def test_small_decode_is_memory_bound_and_big_prefill_compute_bound(h200):
    for b in (1, 8, 32):
        assert h200.cost(decodes(b, 1000))["bound"] == "memory"
    assert h200.cost([Work(0, None, "prefill", 0, 4000)])["bound"] == "compute"
    # F1: weights are streamed anyway, so 32 sequences cost barely more than one
    assert h200.decode_step_time(32, 1000) < 1.2 * h200.decode_step_time(1, 1000)


def test_batch1_70b_fp8_decode_on_h200_is_weights_over_bandwidth(h200):
    p = h200.hardware
    published_Bps, eff = 4.8e12, p.details["efficiency"]["bandwidth"]  # NVIDIA H200 SXM datasheet: 4.8 TB/s
    assert p.details["published"]["bandwidth_Bps"] == published_Bps and 0.5 <= eff <= 0.95
    assert p.bandwidth_Bps == pytest.approx(published_Bps * eff)
    assert p.details["published"]["fp8_dense_flops"] == 1.979e15  # 3,958 TFLOPS with sparsity, halved
    assert 69e9 <= p.weight_bytes <= 71.5e9  # ~70.6B params at 1 byte (FP8)
    expected = 70e9 / (published_Bps * eff) + p.overhead_s  # independent: 70 GB / achievable bandwidth
    got = h200.decode_step_time(1, 1)
    assert got == pytest.approx(expected, rel=0.03)
    assert 70e9 / published_Bps < got < 70e9 / (0.5 * published_Bps) + 0.005  # never beats peak


def test_kv_and_attention_terms_match_the_llama3_70b_shape(h200):
    p = h200.hardware
    assert p.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680  # GQA: 8 KV heads, bf16
    assert p.n_layer == 80 and p.attn_dim == 64 * 128
    one, two = h200.cost(decodes(1, 1000)), h200.cost(decodes(1, 2000))
    assert two["bytes"] - one["bytes"] == pytest.approx(1000 * 327_680)  # each extra key read once
    assert two["flops"] - one["flops"] == pytest.approx(4 * 80 * 8192 * 1000)


def test_tensor_parallel_preset_sums_four_h100s():
    p = get_preset("4xh100-70b-bf16")
    d = p.details
    assert d["tensor_parallel"] == 4
    assert p.bandwidth_Bps == pytest.approx(4 * 3.35e12 * d["efficiency"]["bandwidth"])
    assert p.peak_flops == pytest.approx(4 * 0.989e15 * d["efficiency"]["flops"])
    assert 138e9 <= p.weight_bytes <= 142e9  # bf16: twice the FP8 bytes
    assert p.overhead_s > get_preset(H200).overhead_s  # all-reduces every layer
    c = ModeledClock(p)
    assert c.cost(decodes(1, 100))["bound"] == "memory"


def test_wasted_decodes_cost_like_decodes(h200):
    assert h200.cost(decodes(7, 500, "wasted")) == h200.cost(decodes(7, 500))
    assert h200.cost(decodes(4, 500) + decodes(3, 500, "wasted")) == h200.cost(decodes(7, 500))


def test_padding_costs_flops_but_moves_no_kv(h200):
    plain = h200.cost([Work(0, None, "prefill", 0, 50)])
    padded = h200.cost([Work(0, None, "prefill", 0, 50, padding=3950)])
    p = h200.hardware
    assert padded["flops"] - plain["flops"] == pytest.approx(
        2 * p.nonembed_params * 3950 + 4 * p.n_layer * p.attn_dim * 3950 * 3951 / 2)
    assert padded["bytes"] == plain["bytes"]
    # F2: the 50-token prompt padded to 4,000 pays ~80x its prefill compute
    assert padded["compute_s"] / plain["compute_s"] > 70


def test_preset_files_round_trip_and_are_validated(tmp_path):
    p = get_preset(H200)
    f = tmp_path / "mine.json"
    save_preset(p, f)
    assert load_preset(f) == p and get_preset(str(f)) == p
    bad = json.loads(f.read_text())
    bad["bandwidth_Bps"] = -1
    f.write_text(json.dumps(bad))
    with pytest.raises(TinyserveError, match="bandwidth_Bps"):
        get_preset(str(f))
    bad["bandwidth_Bps"], bad["n_layer"] = 1e12, 10 ** 400
    f.write_text(json.dumps(bad))
    with pytest.raises(TinyserveError, match="n_layer"):
        get_preset(str(f))
    f.write_text("{not json")
    with pytest.raises(TinyserveError, match="cannot read"):
        load_preset(f)


def test_fit_recovers_a_known_roofline():
    """On exact synthetic times the alternating fit finds the parameters that made them."""
    model = TinyGPT(GPTConfig())
    base = ModeledClock(model_preset(model, "t", "t", []))
    works = [decodes(b, c) for b in (1, 4, 16, 64) for c in (64, 256, 1024)]
    works += [[Work(0, None, "prefill", 0, n)] for n in (64, 256, 1024, 2048)]
    nbytes = np.array([base.cost(w)["bytes"] for w in works])
    flops = np.array([base.cost(w)["flops"] for w in works])
    o, bw, pk = 0.0008, 20e9, 30e9
    times = o + np.maximum(nbytes / bw, flops / pk)
    got = fit_roofline(nbytes, flops, times, np.array([len(w) > 1 or w[0].tokens == 1 for w in works]))
    assert got == pytest.approx((o, bw, pk), rel=1e-6)


@pytest.fixture
def one_thread():
    """Another process may be busy on this CPU; two spinning OpenMP threads then slow down ~100x."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_calibration_on_a_small_random_model_is_sane(one_thread):
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, n_positions=256)).eval()
    plan = {"batches": (1, 8), "contexts": (32, 128), "prefills": (32, 128, 256), "repeats": 3}
    p = calibrate(model, quick=True, name="tiny-test", plan=plan)
    assert p.name == "tiny-test" and p.sources[0].startswith("calibrated on ")
    for v in (p.bandwidth_Bps, p.peak_flops):
        assert v > 0 and math.isfinite(v)
    assert p.overhead_s >= 0
    assert p.kv_bytes_per_token == 2 * 2 * 32 * 4 and p.attn_dim == 32 and p.n_layer == 2
    pts, fit = p.details["points"], p.details["fit"]
    assert len(pts) == 2 * 2 + 3 and {q["kind"] for q in pts} == {"decode", "prefill"}
    assert all(q["measured_s"] > 0 and q["modeled_s"] > 0 for q in pts)
    rel = [abs(q["modeled_s"] - q["measured_s"]) / q["measured_s"] for q in pts]
    assert fit["max_rel_err"] == pytest.approx(max(rel), abs=1e-3)  # the reported error is the real one
    assert fit["median_rel_err"] == pytest.approx(float(np.median(rel)), abs=1e-3)
    # timing is noisy: only a loose factor, on the typical point
    assert np.median([abs(math.log(q["modeled_s"] / q["measured_s"])) for q in pts]) < math.log(2)
    again = ModeledClock(p)  # the preset reproduces its own recorded predictions
    assert again.decode_step_time(8, 128) == pytest.approx(
        next(q["modeled_s"] for q in pts if q["kind"] == "decode" and q["batch"] == 8 and q["context"] == 128), abs=1e-6)


def test_cpu_tiny_is_a_recorded_calibration_of_the_shipped_model():
    p = get_preset("cpu-tiny")
    assert p.sources[0].startswith("calibrated on ") and "tinyserve calibrate" in p.sources[0]
    assert (p.n_layer, p.attn_dim, p.kv_bytes_per_token) == (4, 128, 2 * 4 * 128 * 4)  # float32 slabs
    pts = p.details["points"]
    assert {q["kind"] for q in pts} == {"decode", "prefill"} and len(pts) >= 15
    assert {q["batch"] for q in pts if q["kind"] == "decode"} == {1, 4, 16, 32, 64}
    assert max(q["tokens"] for q in pts if q["kind"] == "prefill") == 2048
    clock = ModeledClock(p)  # the preset reproduces the predictions it recorded
    for q in pts:
        works = decodes(q["batch"], q["context"]) if q["kind"] == "decode" else [Work(0, None, "prefill", 0, q["tokens"])]
        assert clock.step_time(works) == pytest.approx(q["modeled_s"], abs=1e-6)
    rel = [abs(q["modeled_s"] - q["measured_s"]) / q["measured_s"] for q in pts]
    assert p.details["fit"]["max_rel_err"] == pytest.approx(max(rel), abs=1e-3)
