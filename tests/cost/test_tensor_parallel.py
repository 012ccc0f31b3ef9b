"""Tensor parallelism inside one instance (RunConfig.gpus, --gpus N, cost/tensor.py): one GPU changes nothing; N GPUs
are priced by the stated formula, checked here by arithmetic written out from the preset's published numbers (not by
calling the code under test); the all-reduce's latency is a measured constant with its source, so a decode step gets
no slower with more GPUs while a long prefill still gets faster; every refusal is one line in both languages."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest

import tinyserve
from tinyserve.core.config import RunConfig
from tinyserve.core.request import Work, decode_works
from tinyserve.cost.clock import ModeledClock, make_clock
from tinyserve.cost.presets import get_preset, list_presets, load_preset
from tinyserve.cost.pricing import price, total
from tinyserve.cost.tensor import tensor_parallel
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.lang import t
from tinyserve.tools.calibrate import fit_cost, step_shape
from tinyserve.trace.report import format_summary

H200 = "h200-70b-fp8"
# h200-70b-fp8.json and links/nvlink-h200.json, written out: the test's own numbers
WEIGHTS = 70553706496.0  # weight bytes streamed per step
RESIDENT = 68452360192 + 2 * 2 * 1050673152  # blocks in FP8 + output head and input embedding in bf16
PARAMS = 68452360192.0  # non-embedding parameters
BW, FLOPS, ATTN_FLOPS = 3.84e12, 1.1874e15, 5.937e14
LAYERS, ATTN_DIM, D_MODEL = 80, 8192, 8192
KV_PER_TOKEN = 327680.0
KV_MEMORY = 51.25e9
OVERHEAD = 0.002
LINK_BW = 450e9  # links/nvlink-h200.json: one direction
# h200-70b-fp8.json's allreduce_latency_s: vLLM's custom all-reduce, 16 KB, 8 H100s over NVLink/NVSwitch (its source)
ALLREDUCE_LATENCY = 9.3e-6
ALLREDUCE_SOURCE = "https://github.com/sgl-project/sglang/pull/2904"

SHAPES = {  # a few step shapes: decodes alone, a prefill, a chunk after a prefix beside decodes, padding
    "decodes": decode_works([1000] * 64),
    "prefill": [Work(0, None, "prefill", 0, 2048)],
    "mixed": decode_works([300] * 8) + [Work(9, None, "prefill", 512, 256)],
    "padded": [Work(0, None, "prefill", 0, 40, padding=200), Work(1, None, "prefill", 0, 240)],
}


def allreduce_by_hand(n: int, tokens: int) -> float:
    """Two all-reduces per layer of tokens x d_model x 2 bytes: the measured latency + 2(n-1)/n x bytes / bw each."""
    one = ALLREDUCE_LATENCY + 2 * (n - 1) / n * (tokens * D_MODEL * 2) / LINK_BW
    return LAYERS * 2 * one


def test_one_gpu_is_the_preset_itself_and_prices_every_shipped_preset_as_before():
    for name in list_presets():
        hw = get_preset(name)
        base = ModeledClock(hw)
        assert all(price(base.terms(w), hw).allreduce_s == 0.0 for w in SHAPES.values())  # no term on one GPU
        if hw.num_gpus > 1:  # its file folds tensor parallelism in: --gpus is refused, even 1
            with pytest.raises(TinyserveError, match="already runs on"):
                make_clock("modeled", name, 1)
            continue
        assert tensor_parallel(hw, 1) is hw
        one = make_clock("modeled", name, 1)
        for works in SHAPES.values():
            assert one.step_time(works) == base.step_time(works)
            assert one.cost(works) == base.cost(works)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_a_decode_and_a_prefill_step_priced_by_hand(n):
    clock = make_clock("modeled", H200, n)
    # 64 decodes of 1,000 keys each: memory-bound linear layers and attention, at n x the bandwidth
    linear = max(WEIGHTS / (n * BW), 2 * PARAMS * 64 / (n * FLOPS))
    attn = max(KV_PER_TOKEN * 64 * 1000 / (n * BW), 4 * LAYERS * ATTN_DIM * 64 * 1000 / (n * ATTN_FLOPS))
    write = KV_PER_TOKEN * 64 / (n * BW)
    decode = OVERHEAD + linear + attn + write + allreduce_by_hand(n, 64)
    assert clock.step_time(SHAPES["decodes"]) == pytest.approx(decode, rel=1e-12)
    # a 2,048-token prompt from position 0: compute-bound, its causal pairs only
    tokens, pairs = 2048, 2048 * 2049 // 2
    linear = max(WEIGHTS / (n * BW), 2 * PARAMS * tokens / (n * FLOPS))
    attn = max(KV_PER_TOKEN * tokens / (n * BW), 4 * LAYERS * ATTN_DIM * pairs / (n * ATTN_FLOPS))
    write = KV_PER_TOKEN * tokens / (n * BW)
    prefill = OVERHEAD + linear + attn + write + allreduce_by_hand(n, tokens)
    assert clock.step_time(SHAPES["prefill"]) == pytest.approx(prefill, rel=1e-12)
    assert clock.cost(SHAPES["prefill"])["allreduce_s"] == pytest.approx(allreduce_by_hand(n, tokens), rel=1e-12)


def test_the_all_reduce_latency_is_a_preset_constant_with_its_measurement_cited():
    hw = get_preset(H200)
    assert hw.allreduce_latency_s == ALLREDUCE_LATENCY
    cited = [s for s in hw.sources if s.startswith("All-reduce latency")]
    assert len(cited) == 1 and ALLREDUCE_SOURCE in cited[0]
    for what in ("9.3 us", "16 KB", "8 NVIDIA H100 SXM GPUs", "NVLink/NVSwitch", "vLLM's custom all-reduce"):
        assert what in cited[0], what  # what was measured: time, message size, GPU count, interconnect, library
    assert "9.3e-6 s (allreduce_latency_s" in hw.details["tensor_parallel_model"]
    # the only number a split instance takes from it: the same per-step latency whatever n
    steps = {n: tensor_parallel(hw, n).allreduce_step_s for n in (2, 4, 8)}
    assert steps == pytest.approx({n: 2 * LAYERS * ALLREDUCE_LATENCY for n in (2, 4, 8)}, rel=1e-12)


def _decode_step(n: int, batch: int, context: int = 1000) -> float:
    return make_clock("modeled", H200, n).step_time(decode_works([context] * batch))


@pytest.mark.parametrize("batch", [1, 32, 128])
def test_a_decode_step_is_no_slower_on_more_gpus(batch):
    """Through the public pricing: 8 GPUs no slower than 4, 4 no slower than 2, 2 than 1, at batch 1, 32 and 128."""
    times = [_decode_step(n, batch) for n in (1, 2, 4, 8)]
    assert times == sorted(times, reverse=True), times
    # first principles: going from 4 GPUs to 8 halves the weights each GPU streams (70.55 GB at 3.84 TB/s a GPU,
    # 2.3 ms) and adds at most the bytes' extra share (2(n-1)/n: 1.5 -> 1.75); the latency does not grow with n
    saved = WEIGHTS / (4 * BW) - WEIGHTS / (8 * BW)
    extra_bytes = LAYERS * 2 * (1.75 - 1.5) * batch * D_MODEL * 2 / LINK_BW
    assert times[2] - times[3] >= saved - extra_bytes - 1e-12


def test_no_shipped_h100_preset_takes_gpus():
    """The H100 preset folds its 4 GPUs into its rates (num_gpus 4) and refuses --gpus: nothing to compare there."""
    h100 = [name for name in list_presets() if "h100" in name]
    assert h100 and all(get_preset(name).num_gpus > 1 and get_preset(name).tp_link is None for name in h100)


def test_a_long_prefill_still_gets_faster_with_more_gpus_and_stays_bandwidth_bound():
    prefill = [Work(0, None, "prefill", 0, 4096)]
    times = [make_clock("modeled", H200, n).step_time(prefill) for n in (1, 2, 4, 8)]
    assert times == sorted(times, reverse=True) and times[3] < times[2] / 1.3, times
    # its all-reduces are mostly bytes: 4,096 x 8,192 x 2 bytes = 67 MB each, ~260 us at 8 GPUs against 9.3 us latency
    cost = make_clock("modeled", H200, 8).cost(prefill)["allreduce_s"]
    latency = LAYERS * 2 * ALLREDUCE_LATENCY
    assert cost == pytest.approx(allreduce_by_hand(8, 4096), rel=1e-12) and cost > 20 * latency


def test_padding_goes_through_the_all_reduces_like_any_token():
    clock = make_clock("modeled", H200, 4)
    p = price(clock.terms(SHAPES["padded"]), clock.hardware)
    assert p.allreduce_s == pytest.approx(allreduce_by_hand(4, 40 + 200 + 240), rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_the_instance_holds_n_times_the_per_gpu_budget_less_the_weights(n):
    hw = make_clock("modeled", H200, n).hardware
    per_gpu = KV_MEMORY + RESIDENT  # what one GPU keeps for weights and KV (details.kv_memory)
    assert hw.kv_memory_bytes == pytest.approx(n * per_gpu - RESIDENT, rel=1e-12)
    assert hw.num_gpus == n and hw.name == H200
    assert (hw.bandwidth_Bps, hw.peak_flops, hw.attn_flops) == pytest.approx((n * BW, n * FLOPS, n * ATTN_FLOPS))
    assert hw.kv_bandwidth_Bps == 0.0  # 0 still means "the weights' rate", now n x
    assert (hw.overhead_s, hw.call_overhead_s, hw.weight_bytes) == (OVERHEAD, 0.0, WEIGHTS)
    # the run sees it: the trace's KV capacity is the instance's, and the trace says n
    tr = Engine().run("chapter-7.1-padding", "static", dry_run=True, gpus=n)
    assert tr.kv_capacity_bytes == int(hw.kv_memory_bytes) and tr.gpus == n
    assert tr.summary()["gpus"] == n and type(tr).from_dict(tr.to_dict()).gpus == n
    assert f"modeled clock on {H200}, gpus={n} [dry run]" in format_summary(tr)


def test_a_run_without_gpus_is_the_run_it_was_and_one_gpu_times_the_same():
    engine = Engine()
    for policy, knobs in [("static", {}), ("chunked", {"chunk_size": 256}), ("continuous", {"kv_layout": "paged"})]:
        omitted = engine.run("chapter-7.3-long-prompt", policy, dry_run=True, **knobs)
        given_none = engine.run("chapter-7.3-long-prompt", policy, RunConfig(policy, dry_run=True, gpus=None, **knobs))
        assert omitted.to_dict() == given_none.to_dict() and "gpus" not in omitted.to_dict()
        assert "gpus=" not in format_summary(omitted)
        one = engine.run("chapter-7.3-long-prompt", policy, dry_run=True, gpus=1, **knobs)
        assert [s.duration_s for s in one.steps] == [s.duration_s for s in omitted.steps]
        assert {**one.to_dict(), "gpus": None} == {**omitted.to_dict(), "gpus": None}  # the same but for gpus: 1
    assert RunConfig(gpus=2).to_dict()["gpus"] == 2 and RunConfig().gpus is None


def test_two_gpus_finish_a_decode_heavy_run_sooner():
    one = Engine().run("chapter-7.3-long-prompt", "chunked", dry_run=True, chunk_size=256)
    two = Engine().run("chapter-7.3-long-prompt", "chunked", dry_run=True, chunk_size=256, gpus=2)
    assert two.metrics()["duration_s"] < one.metrics()["duration_s"]


def _gpus_16_node(tmp_path):
    """h200-70b-fp8 in a node of 16 GPUs: the KV-head limit (8) comes before the node's."""
    f = tmp_path / "h200-16.json"
    f.write_text(json.dumps({**asdict(get_preset(H200)), "gpus_per_node": 16}))
    return str(f)


REFUSALS = [  # (clock, hardware, gpus, key, its fields)
    ("wall", None, 2, "engine.knob.gpus_wall", {}),
    ("modeled", "4xh100-70b-bf16", 2, "engine.knob.gpus_folded", {"preset": "4xh100-70b-bf16", "num_gpus": 4}),
    ("modeled", "4xh100-70b-bf16", 4, "engine.knob.gpus_folded", {"preset": "4xh100-70b-bf16", "num_gpus": 4}),
    ("modeled", "cpu-tiny", 2, "engine.knob.gpus_one", {"preset": "cpu-tiny", "value": 2}),
    ("modeled", H200, 9, "engine.knob.gpus_node", {"preset": H200, "limit": 8, "value": 9}),
    ("modeled", "16", 9, "engine.knob.gpus_heads", {"preset": H200, "limit": 8, "value": 9}),
    ("modeled", H200, 3, "engine.knob.gpus_divide", {"preset": H200, "heads": 8, "value": 3, "choices": "1, 2, 4, 8"}),
    ("modeled", H200, 6, "engine.knob.gpus_divide", {"preset": H200, "heads": 8, "value": 6, "choices": "1, 2, 4, 8"}),
    ("modeled", H200, 0, "engine.knob.at_least", {"name": "gpus", "lo": 1, "value": 0}),
    ("modeled", H200, 2.5, "engine.knob.integer", {"name": "gpus", "lo": 1, "value": 2.5}),
    ("modeled", H200, "2", "engine.knob.integer", {"name": "gpus", "lo": 1, "value": "2"}),
]


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
@pytest.mark.parametrize("clock, hardware, gpus, key, fields", REFUSALS, ids=[r[3] + str(r[2]) for r in REFUSALS])
def test_each_refusal_is_one_line_in_both_languages(tmp_path, lang, clock, hardware, gpus, key, fields):
    hardware = _gpus_16_node(tmp_path) if hardware == "16" else hardware
    tinyserve.set_language(lang, figures=False)
    try:
        expected = t(key, **fields)
        assert "\n" not in expected and (lang == "en") == expected.isascii()
        with pytest.raises(TinyserveError) as e:  # the engine's one way in: RunConfig, then the clock
            Engine().start("chapter-7.1-padding", "static", dry_run=clock == "modeled", clock=clock,
                           hardware=hardware, gpus=gpus)
        assert str(e.value) == expected
        with pytest.raises(TinyserveError) as e:  # the clock alone says the same
            make_clock(clock, hardware, gpus)
        assert str(e.value) == expected
    finally:
        tinyserve.set_language("en", figures=False)


def test_a_preset_file_states_its_split_fields_or_is_refused(tmp_path):
    good = asdict(get_preset(H200))
    f = tmp_path / "hw.json"
    for change, key in [({"tp_link": "nvlink-h100"}, "engine.hardware.tp_link"),
                        ({"tp_link": 3}, "engine.hardware.tp_link"),
                        ({"n_kv_heads": 0}, "engine.hardware.tp_shape"),
                        ({"d_model": 0}, "engine.hardware.tp_shape"),
                        ({"allreduce_latency_s": 0}, "engine.hardware.tp_shape"),
                        ({"allreduce_step_s": 1e-3}, "engine.hardware.allreduce")]:
        f.write_text(json.dumps({**good, **change}))
        with pytest.raises(TinyserveError) as e:
            load_preset(f)
        assert str(e.value) == t(key, path=f, choices="ib-ndr, nvlink-h200", value=change.get("tp_link"))
    for change, field in [({"gpus_per_node": 0}, "gpus_per_node"), ({"n_kv_heads": 2.5}, "n_kv_heads"),
                          ({"allreduce_latency_s": -1e-6}, "allreduce_latency_s"),
                          ({"d_model": -1}, "d_model"), ({"resident_weight_bytes": -1}, "resident_weight_bytes")]:
        f.write_text(json.dumps({**good, **change}))
        with pytest.raises(TinyserveError, match=f"{field} must be a finite number"):
            load_preset(f)
    # a split instance saved and read back is a preset whose file folds tensor parallelism in: it refuses --gpus
    f.write_text(json.dumps(asdict(tensor_parallel(get_preset(H200), 4))))
    saved = load_preset(f)
    assert saved == tensor_parallel(get_preset(H200), 4)
    with pytest.raises(TinyserveError, match="already runs on 4 GPUs"):
        tensor_parallel(saved, 2)


def test_calibration_refuses_a_split_preset():
    hw = tensor_parallel(get_preset(H200), 2)
    with pytest.raises(ValueError, match="all-reduces are not fitted"):
        fit_cost([step_shape(hw, SHAPES["decodes"])], np.array([0.01]))


def test_the_cli_runs_with_gpus_and_says_a_refusal_in_one_line():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    args = [sys.executable, "-m", "tinyserve", "run", "--workload", "chapter-7.1-padding", "--policy", "static",
            "--dry-run", "--json"]
    out = subprocess.run(args + ["--gpus", "2"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["gpus"] == 2 and doc["hardware"] == H200
    assert doc["kv"]["capacity_bytes"] == int(2 * (KV_MEMORY + RESIDENT) - RESIDENT)
    for lang, words in [("en", "runs on one GPU only"), ("zh-TW", "只能跑在一顆 GPU 上")]:
        bad = subprocess.run(args + ["--gpus", "2", "--hardware", "cpu-tiny"], env={**env, "TINYSERVE_LANG": lang},
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
