"""Clocks: the roofline cost model, the presets and their sources, and calibration."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from tinyserve.core.config import GPTConfig
from tinyserve.core.request import Work
from tinyserve.cost.clock import ModeledClock, WallClock, make_clock
from tinyserve.cost.presets import DEFAULT_HARDWARE, HardwarePreset, get_preset, list_presets, load_preset, save_preset
from tinyserve.errors import TinyserveError
from tinyserve.model.gpt import TinyGPT
from tinyserve.tools.calibrate import SLABS, PagedPoint, calibrate, fit_cost, model_preset, step_shape, works_of

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
    # F2: the 50-token prompt padded to 4,000 pays ~80x its prefill flops
    assert padded["flops"] / plain["flops"] > 70


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
    bad["n_layer"], bad["kv_cache_bytes"] = 80, 8e6  # a cache with no rate to read it at
    f.write_text(json.dumps(bad))
    with pytest.raises(TinyserveError, match="kv_cache_bytes > 0 needs kv_cache_bandwidth_Bps"):
        get_preset(str(f))
    bad["kv_cache_bandwidth_Bps"], bad["kv_cache_ramp"] = 5e10, 1.0
    f.write_text(json.dumps(bad))
    with pytest.raises(TinyserveError, match="kv_cache_ramp must be > 1"):
        get_preset(str(f))
    f.write_text("{not json")
    with pytest.raises(TinyserveError, match="cannot read"):
        load_preset(f)


def toy(attention: str = "exact") -> ModeledClock:
    """Round numbers, so every cost below can be worked out by hand."""
    return ModeledClock(HardwarePreset(
        name="toy", description="toy", bandwidth_Bps=1000.0, peak_flops=100.0, overhead_s=1.0, weight_bytes=2000.0,
        nonembed_params=10.0, n_layer=1, attn_dim=1, kv_bytes_per_token=10.0, sources=["by hand"],
        attn_flops=1000.0, call_overhead_s=0.5, attention=attention))


def test_one_decode_costs_overhead_call_weights_kv_read_and_write():
    # a decode at context 100: overhead 1 + one attention call 0.5
    # + linear max(2000 B / 1000 B/s = 2, 2 x 10 params x 1 token / 100 = 0.2) = 2
    # + decode attention max(100 keys x 10 B / 1000 = 1, 4 x 1 x 1 x 100 pairs / 1000 = 0.4) = 1
    # + KV write 1 token x 10 B / 1000 = 0.01                                            = 4.51 s
    assert toy().step_time([Work(0, None, "decode", 99, 1)]) == pytest.approx(4.51, abs=1e-12)


def test_parts_of_a_mixed_step_add_up_and_a_chunk_no_longer_hides_the_decode_reads():
    works = [Work(0, None, "decode", 99, 1), Work(1, None, "prefill", 30, 20),
             Work(2, None, "prefill", 0, 4, padding=6)]
    # tokens 1 + 20 + 4 + 6 = 31: linear max(2, 2 x 10 x 31 / 100 = 6.2) = 6.2
    # decode: 1 (as above)
    # chunk of 20 after 30 (exact: causal over its prefix): pairs 20 x 30 + 20 x 21 / 2 = 810, flops 3,240 -> 3.24;
    #   reads 50 keys x 10 B -> 0.5; max = 3.24
    # prefill 4 from 0: pairs 10 -> 40 flops -> 0.04; reads 4 keys -> 0.04; max = 0.04
    # padding 6: pairs 21 -> 84 flops -> 0.084, reads nothing
    # KV writes: 1 + 20 + 4 = 25 tokens x 10 B / 1000 = 0.25; calls: 4 x 0.5 = 2; overhead 1
    c = toy().cost(works)
    assert (c["linear_s"], c["decode_attn_s"], c["kv_write_s"], c["calls_s"]) == pytest.approx((6.2, 1.0, 0.25, 2.0))
    assert c["prefill_attn_s"] == pytest.approx(3.24 + 0.04 + 0.084)
    assert toy().step_time(works) == pytest.approx(1 + 2 + 6.2 + 1 + 3.364 + 0.25)
    # without the decode: linear 6.0 (30 tokens), and its 1 s of KV reads, 0.01 write and 0.5 call go: under one
    # max(bytes, flops) over the whole step, the chunk's compute hid those reads
    assert toy().step_time(works) - toy().step_time(works[1:]) == pytest.approx(0.2 + 1 + 0.01 + 0.5)


def test_exact_terms_of_decode_only_steps_and_of_a_one_token_prompt_with_padding():
    # decodes only (the dry run's commonest step): one call; each row reads start + 1 + pad_keys keys, here 100 each
    # (a live row at 99, a row of a static batch's rectangle at 49 + 50, a wasted row at 9 + 90)
    works = [Work(0, None, "decode", 99, 1), Work(1, None, "decode", 49, 1, pad_keys=50),
             Work(2, None, "wasted", 9, 1, pad_keys=90)]
    assert toy().terms(works) == {"tokens": 3, "kv_written": 3, "calls": 1, "rows": 3, "walk": 100,
                                  "attn": [("decode", 300, 300, 3)], "masked_pairs": 0, "gathers": 0, "gathered": 0}
    assert toy().terms([]) == {"tokens": 0, "kv_written": 0, "calls": 0, "rows": 0, "walk": 0, "attn": [],
                               "masked_pairs": 0, "gathers": 0, "gathered": 0}
    # a 1-token prompt padded by 3 beside a decode at 9: the prompt reads its one key in the decode call (keys
    # 1 + 10 = 11, 2 rows); its padding is a segment of its own (3 x 4 / 2 = 6 pairs) and stores nothing
    works = [Work(0, None, "prefill", 0, 1, padding=3), Work(1, None, "decode", 9, 1)]
    assert toy().terms(works) == {"tokens": 5, "kv_written": 2, "calls": 2, "rows": 3, "walk": 10,
                                  "attn": [("padding", 0, 6, 1), ("decode", 11, 11, 2)], "masked_pairs": 0,
                                  "gathers": 0, "gathered": 0}


def test_tinyserve_attention_prices_the_groups_and_masks_forward_step_uses():
    works = [Work(0, None, "decode", 9, 1), Work(1, None, "decode", 9, 1), Work(2, None, "decode", 999, 1),
             Work(3, None, "prefill", 30, 20)]
    # group_decodes (call cost 256): slot 1 joins slot 0 (2 x 10 <= 10 + 256 + 10); slot 2 at 1,000 keys does not
    # (3 x 1000 > 20 + 256 + 1000): groups read 2 x 10 = 20 keys -> 0.2 s and 1 x 1000 -> 10 s
    # the chunk after a prefix uses an explicit mask: the full 20 x 50 = 1000 pairs -> 4 s (reads 0.5)
    # linear: 23 tokens -> 4.6; writes 23 -> 0.23; calls 3 -> 1.5; overhead 1
    t = toy("tinyserve-cpu").terms(works)
    assert sorted(t["attn"]) == [("decode", 20, 20, 2), ("decode", 1000, 1000, 1), ("prefill", 50, 1000, 1)]
    assert toy("tinyserve-cpu").step_time(works) == pytest.approx(1 + 1.5 + 4.6 + 0.2 + 10 + 4 + 0.23)


def test_a_cpu_causal_prefill_is_priced_by_whole_key_blocks():
    from tinyserve.cost.clock import cpu_causal_pairs

    # 470 tokens: one block of keys (512 at most), so every query block computes all 470 keys: the full square
    assert cpu_causal_pairs(470) == 470 * 470
    # 600 tokens, query blocks of 64: the blocks ending at 64..512 compute one key block (512 keys): 8 x 64 x 512;
    # the blocks ending at 576 and 600 need a second key block, so all 600 keys: 64 x 600 + 24 x 600
    assert cpu_causal_pairs(600) == 8 * 64 * 512 + 64 * 600 + 24 * 600
    # 1,024 tokens, query blocks of 256 ending at 256, 512, 768, 1024: 512, 512, 1024, 1024 keys
    assert cpu_causal_pairs(1024) == 256 * (512 + 512 + 1024 + 1024)
    # the tinyserve-cpu clock charges those pairs (prefill and padding); a serving kernel skips the masked
    # half, n(n+1)/2
    t = toy("tinyserve-cpu").terms([Work(0, None, "prefill", 0, 470, padding=600)])
    assert sorted(t["attn"]) == [("padding", 0, cpu_causal_pairs(600), 1), ("prefill", 470, 470 * 470, 1)]
    assert toy().terms([Work(0, None, "prefill", 0, 470)])["attn"] == [("prefill", 470, 470 * 471 // 2, 1)]


def test_kv_reads_that_fit_the_cache_are_priced_at_its_rate():
    from dataclasses import replace

    from tinyserve.cost.pricing import kv_hit_fraction

    mib = 2 ** 20
    # all hits up to the cache's size, none past ramp x size, linear between: 10 MiB of 8 -> (12 - 10) / (12 - 8)
    assert [kv_hit_fraction(x * mib, 8 * mib, 1.5) for x in (4, 8, 10, 12, 20)] == [1.0, 1.0, 0.5, 0.0, 0.0]
    assert kv_hit_fraction(mib, 0.0) == 0.0  # no cache stated: every read from memory
    clock = ModeledClock(replace(toy("tinyserve-cpu").hardware, kv_bytes_per_token=1024.0, kv_bandwidth_Bps=1e9,
                                 kv_cache_bytes=float(mib), kv_cache_bandwidth_Bps=2e9, kv_cache_ramp=2.0,
                                 attn_flops=1e30))
    # one decode reading 512 keys x 1 KiB = 0.5 MiB: in cache, 524,288 B / 2e9 B/s; 1,536 keys = 1.5 MiB: half
    # the reads hit, 1,572,864 B x (0.5 / 2e9 + 0.5 / 1e9); 2,048 keys = 2 MiB: none, 2,097,152 B / 1e9
    reads = [clock.cost([Work(0, None, "decode", keys - 1, 1)])["decode_attn_s"] for keys in (512, 1536, 2048)]
    assert reads == pytest.approx([524288 / 2e9, 1572864 * 0.75e-9, 2097152 / 1e9], rel=1e-12)
    # a row whose keys miss the cache costs miss_row_overhead_s more (toy: call 0.5 s, no row overhead): the
    # 2-row call at 2,048 keys each (4 MiB, all misses) +2 x 3 s, at 512 (1 MiB, all hits) +0
    missing = ModeledClock(replace(clock.hardware, miss_row_overhead_s=3.0))
    two = [[Work(i, None, "decode", keys - 1, 1) for i in range(2)] for keys in (2048, 512)]
    assert [missing.cost(w)["calls_s"] - clock.cost(w)["calls_s"] for w in two] == pytest.approx([6.0, 0.0])


def test_a_step_past_big_step_tokens_pays_for_each_token_beyond():
    from dataclasses import replace

    big = ModeledClock(replace(toy().hardware, big_step_tokens=10.0, big_step_token_s=0.5))
    # toy linear: max(2000 B / 1000 = 2 s, 2 x 10 params x tokens / 100); 14 tokens: max(2, 2.8) + 4 x 0.5 = 4.8
    assert big.cost([Work(0, None, "prefill", 0, 14)])["linear_s"] == pytest.approx(4.8)
    assert big.cost([Work(0, None, "prefill", 0, 10)])["linear_s"] == pytest.approx(2.0)  # at the limit: nothing more


def test_tinyserve_decode_groups_are_the_ones_build_step_makes():
    from tinyserve.model.gpt import build_step
    from tinyserve.model.runner import step_segments

    rng = random.Random(1)
    for _ in range(20):
        ctx = [rng.choice([rng.randint(1, 64), rng.randint(500, 3000)]) for _ in range(rng.randint(1, 40))]
        works = [Work(i, None, "decode", c - 1, 1) for i, c in enumerate(ctx)]
        s = build_step(*step_segments(works, lambda i, w: [1]), torch.device("cpu"))
        engine_keys = sorted((g.hi - g.lo) * g.mask.shape[-1] for g in s.decode_groups)
        assert sorted(k for _, k, _, _ in toy("tinyserve-cpu").terms(works)["attn"]) == engine_keys


def test_static_batches_are_rectangles_under_exact_presets():
    from tinyserve.core.request import Request
    from tinyserve.engine import Engine

    seen = []

    class Recording(ModeledClock):
        def step_time(self, works, measured_s=None):
            seen.append([(w.phase, w.start, w.pad_keys) for w in works])
            return super().step_time(works, measured_s)

    reqs = [Request("a", [1, 2, 3], 2, ignore_eos=True), Request("b", [1, 2, 3, 4, 5], 4, ignore_eos=True)]
    run = Engine().start(reqs, "static", dry_run=True)
    run.clock = Recording(H200)
    while not run.done:
        run.step()
    # prefill pads a to 5; decode step t: the rectangle is 5 + t keys wide. a (3-token prompt) decodes at position
    # 3 (its keys 4, pads 2), finishes after 2 tokens, then re-runs position 4 (keys 5) while the batch grows:
    # pads 7 - 5 = 2, then 8 - 5 = 3. b (5 tokens) is the widest row: no padding keys.
    assert seen[1:] == [[("decode", 3, 2), ("decode", 5, 0)], [("wasted", 4, 2), ("decode", 6, 0)],
                        [("wasted", 4, 3), ("decode", 7, 0)]]
    p = get_preset(H200)
    plain = ModeledClock(p).step_time([Work(0, None, "wasted", 4, 1), Work(1, None, "decode", 7, 1)])
    rect = ModeledClock(p).step_time([Work(0, None, "wasted", 4, 1, pad_keys=3), Work(1, None, "decode", 7, 1)])
    assert rect - plain == pytest.approx(3 * p.kv_bytes_per_token / p.bandwidth_Bps)  # 3 more keys read
    tiny = ModeledClock("cpu-tiny")  # the tiny engine computes no padded keys: cpu-tiny does not price them
    assert tiny.step_time([Work(0, None, "wasted", 4, 1, pad_keys=3)]) == tiny.step_time([Work(0, None, "wasted", 4, 1)])


def test_a_masked_chunk_pays_its_mask_per_pair_and_nothing_else_does():
    """tinyserve's chunk after a prefix is one call given an n x (start + n) mask: masked_pair_s per pair of it."""
    base = toy("tinyserve-cpu")
    masked = HardwarePreset(**{**base.hardware.__dict__, "masked_pair_s": 1e-6})
    chunk = [Work(0, None, "prefill", 300, 100)]  # 100 queries x 400 keys = 40,000 pairs
    assert ModeledClock(masked).step_time(chunk) - base.step_time(chunk) == pytest.approx(40_000 * 1e-6)
    assert ModeledClock(masked).cost(chunk)["prefill_attn_s"] - base.cost(chunk)["prefill_attn_s"] == pytest.approx(
        0.04)
    for works in ([Work(0, None, "prefill", 0, 400)],  # causal from position 0: no mask
                  [Work(0, None, "prefill", 0, 50, padding=30)],  # a padded prompt and its padding: causal
                  [Work(0, None, "decode", 399, 1), Work(1, None, "decode", 99, 1)]):  # decode groups
        assert ModeledClock(masked).step_time(works) == base.step_time(works)
    exact = HardwarePreset(**{**toy().hardware.__dict__, "masked_pair_s": 1e-6})  # serving kernels take no mask
    assert ModeledClock(exact).step_time(chunk) == toy().step_time(chunk)


def test_fit_recovers_known_rates():
    """On exact synthetic times the alternating fit finds the rates and overheads that made them."""
    model = TinyGPT(GPTConfig())
    base = model_preset(model, "t", "t", [])
    works = [[Work(i, None, "decode", c - 1, 1) for i in range(b)] for b in (1, 4, 16, 64) for c in (64, 256, 1024)]
    works += [[Work(i, None, "decode", 255, 1) for i in range(b)] for b in (9, 10, 11)]  # 9-11 MiB: on the cache's ramp
    works += [[Work(0, None, "prefill", 0, n)] for n in (16, 64, 256, 1024, 2048)]
    works += [[Work(0, None, "prefill", s, n)] for n, s in ((64, 1024), (512, 2048), (256, 512))]
    works += [[Work(i, None, "decode", 40, 1) for i in range(8)] + [Work(8, None, "prefill", 0, 20, padding=30)]]
    works += [[Work(i, None, "prefill", 0, 32) for i in range(16)]]
    works += [[Work(i, None, "prefill", 0, 32, padding=1968) for i in range(b)] for b in (4, 10, 12)]  # past 16,384
    paged = [[Work(i, None, "decode", c - 1, 1) for i in range(b)] for b in (1, 8, 32) for c in (64, 1024)]
    paged += [[Work(0, None, "prefill", s, n)] for n, s in ((64, 0), (256, 512))]
    sizes = [0] * len(works) + [16] * len(paged)
    works += paged
    truth = {"overhead_s": 3e-4, "call_overhead_s": 5e-5, "row_overhead_s": 2e-5, "walk_overhead_s": 5e-8,
             "bandwidth_Bps": 40e9,
             "kv_bandwidth_Bps": 5e9, "peak_flops": 30e9, "attn_flops": 8e9,  # decodes memory-bound, in cache or not:
             "kv_cache_bytes": 8 * 2 ** 20, "kv_cache_bandwidth_Bps": 12e9, "kv_cache_ramp": 1.5,  # else no rate to see
             "miss_row_overhead_s": 1e-5, "big_step_token_s": 2e-6, "masked_pair_s": 3e-9,
             "gather_call_s": 2e-5, "gather_Bps": 3e9}  # the paged steps' copies through their block tables
    hw = HardwarePreset(**{**base.__dict__, **truth})
    layouts = [PagedPoint(bs) if bs else SLABS for bs in sizes]
    times = np.array([lay.clock(hw).step_time(w) for w, lay in zip(works, layouts)])
    got = fit_cost([step_shape(base, w, lay) for w, lay in zip(works, layouts)], times)
    assert got == pytest.approx(truth, rel=1e-6)


def test_calibration_on_a_small_random_model_is_sane(torch_one_thread):
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, n_positions=256)).eval()
    plan = {"batches": (1, 8), "contexts": (32, 128), "prefills": (32, 128, 256), "chunks": ((32, 64),),
            "ragged": ((4, 16, 128),), "mixed": ((4, 32, 32, 32),), "padded": ((4, 8, 8),), "repeats": 3,
            "paged": {"block_size": 16, "batches": (1, 8), "contexts": (32, 128), "chunks": ((32, 64),)}}
    p = calibrate(model, quick=True, name="tiny-test", plan=plan)
    paged = [q for q in p.details["points"] if q.get("block_size")]
    assert [q["label"] for q in paged] == ["decode B=1 ctx=32 (paged)", "decode B=1 ctx=128 (paged)",
                                           "decode B=8 ctx=32 (paged)", "decode B=8 ctx=128 (paged)",
                                           "chunk 32 after 64 (paged)"]
    assert all(q["measured_s"] > 0 and q["block_size"] == 16 for q in paged)
    assert p.gather_call_s >= 0 and p.gather_Bps >= 0 and math.isfinite(p.gather_Bps)
    assert p.name == "tiny-test" and p.sources[0].startswith("calibrated on ") and p.attention == "tinyserve-cpu"
    for v in (p.bandwidth_Bps, p.peak_flops, p.attn_flops):
        assert v > 0 and math.isfinite(v)
    assert p.overhead_s >= 0 and p.call_overhead_s >= 0
    assert p.kv_bytes_per_token == 2 * 2 * 32 * 4 and p.attn_dim == 32 and p.n_layer == 2
    pts, fit = p.details["points"], p.details["fit"]
    assert len(pts) == 2 * 2 + 3 + 4 + len(paged) and all(q["measured_s"] > 0 and q["modeled_s"] > 0 for q in pts)
    rel = [abs(q["modeled_s"] - q["measured_s"]) / q["measured_s"] for q in pts]
    assert fit["max_rel_err"] == pytest.approx(max(rel), abs=1e-3)  # the reported error is the real one
    assert fit["median_rel_err"] == pytest.approx(float(np.median(rel)), abs=1e-3)
    # timing is noisy: only a loose factor, on the typical point
    assert np.median([abs(math.log(q["modeled_s"] / q["measured_s"])) for q in pts]) < math.log(2)
    for q in pts:  # the preset reproduces its own recorded predictions (a paged point priced with its blocks)
        again = recorded_clock(p, q)
        assert again.step_time(works_of(q["works"])) == pytest.approx(q["modeled_s"], abs=1e-6)


def recorded_clock(p: HardwarePreset, q: dict) -> ModeledClock:
    """The clock of a recorded calibration point: a paged one where it records its block size."""
    return ModeledClock(p).for_layout(q["block_size"]) if "block_size" in q else ModeledClock(p)


def test_cpu_tiny_is_a_recorded_calibration_of_the_shipped_model():
    p = get_preset("cpu-tiny")
    assert p.sources[0].startswith("calibrated on ") and "tinyserve calibrate" in p.sources[0]
    assert (p.n_layer, p.attn_dim, p.kv_bytes_per_token) == (4, 128, 2 * 4 * 128 * 4)  # float32 slabs
    assert p.attention == "tinyserve-cpu"
    pts = p.details["points"]
    labels = [q["label"] for q in pts]
    assert len(pts) >= 30 and "prefill 4000" in labels and any(lbl.startswith("chunk ") for lbl in labels)
    for q in pts:  # the preset reproduces the predictions it recorded (paged points with their blocks)
        clock = recorded_clock(p, q)
        assert clock.step_time(works_of(q["works"])) == pytest.approx(q["modeled_s"], abs=1e-6)
    rel = [abs(q["modeled_s"] - q["measured_s"]) / q["measured_s"] for q in pts]
    assert p.details["fit"]["max_rel_err"] == pytest.approx(max(rel), abs=1e-3)


def test_the_gpu_presets_attention_mode_is_exact_and_an_old_paged_file_still_loads(tmp_path):
    from tinyserve.cost.presets import PRESET_DIR

    assert {get_preset(n).attention for n in ("h200-70b-fp8", "4xh100-70b-bf16")} == {"exact"}
    d = json.loads((PRESET_DIR / "h200-70b-fp8.json").read_text())
    d["attention"] = "paged"  # a calibration file written before the rename: "paged" now names the KV layout
    (tmp_path / "old.json").write_text(json.dumps(d))
    old = load_preset(tmp_path / "old.json")
    assert old.attention == "exact"
    works = [Work(0, None, "decode", 99, 1), Work(1, None, "prefill", 30, 20)]
    assert ModeledClock(old).step_time(works) == ModeledClock("h200-70b-fp8").step_time(works)


def test_paged_terms_count_the_gathers_and_keys_build_step_makes():
    """Under the paged layout a tinyserve-* clock prices what build_step builds: one call per decode group with a
    row per decode, reading (and first gathering) its longest context in whole blocks, and each prefill segment
    gathering its prefix and its own K/V."""
    from tinyserve.model.gpt import build_paged_step
    from tinyserve.model.runner import step_segments
    from tinyserve.tools.calibrate import block_tables

    rng = random.Random(3)
    for block_size in (1, 4, 16, 256):
        for _ in range(15):
            works, slot = [], 0
            for _ in range(rng.randint(1, 30)):
                if rng.random() < 0.8:
                    works.append(Work(slot, None, "decode", rng.choice([rng.randint(0, 64), rng.randint(500, 3000)]), 1))
                else:
                    works.append(Work(slot, None, "prefill", rng.choice([0, rng.randint(1, 1500)]), rng.randint(2, 300)))
                slot += rng.randint(1, 3)
            tables = block_tables(works, block_size)
            s = build_paged_step(*step_segments(works, lambda i, w: [1] * w.tokens), torch.device("cpu"), tables,
                                 block_size)
            t = toy("tinyserve-cpu").for_layout(block_size).terms(works)
            engine_decodes = sorted((g.n * g.mask.shape[-1], g.n) for g in s.decode_groups)
            assert sorted((k, r) for kind, k, _, r in t["attn"] if kind == "decode") == engine_decodes
            assert all(g.tables.shape == (g.n, g.mask.shape[-1] // block_size) for g in s.decode_groups)
            engine_gathered = (sum(g.tables.numel() for g in s.decode_groups)
                               + sum(len(p) for p in s.prefill_tables if p is not None)) * block_size
            assert t["gathered"] == engine_gathered
            assert t["gathers"] == len(s.decode_groups) + sum(p is not None for p in s.prefill_tables)
            # the slab layout gathers nothing; an exact preset prices a paged kernel reading in place: nothing either
            assert toy("tinyserve-cpu").terms(works)["gathers"] == toy("tinyserve-cpu").terms(works)["gathered"] == 0
            assert toy().for_layout(block_size).terms(works) == toy().terms(works)


def test_a_paged_run_is_priced_by_its_layout_and_the_gather_rates():
    from dataclasses import replace

    from tinyserve.engine import Engine

    hw = replace(get_preset("cpu-tiny"), gather_call_s=2e-5, gather_Bps=5e9)
    kw = dict(policy="continuous", batch_size=8, dry_run=True, hardware=hw, progress=False,
              workload_knobs={"n": 12})
    paged = Engine().run("chapter-7.2-longtail", kv_layout="paged", block_size=16, **kw)
    slab_clock, paged_clock = ModeledClock(hw), ModeledClock(hw).for_layout(16)
    gathered = 0
    for st in paged.steps:
        works = [Work.of(w) for w in st.works]
        assert st.duration_s == pytest.approx(paged_clock.step_time(works), rel=1e-9)
        t = paged_clock.terms(works)
        gathered += t["gathered"]
        # the gather's price, on top of what the same works would cost with the groups priced as paged
        no_gather = ModeledClock(replace(hw, gather_call_s=0.0, gather_Bps=0.0)).for_layout(16).step_time(works)
        assert st.duration_s - no_gather == pytest.approx(
            2e-5 * t["gathers"] + hw.kv_bytes_per_token * t["gathered"] / 5e9, rel=1e-9)
    assert gathered > 0
    assert any(st.duration_s > 1.01 * slab_clock.step_time([Work.of(w) for w in st.works]) for st in paged.steps)
    # and a preset without gather rates prices nothing for the copies: a slab run is unchanged by all of this
    slab = Engine().run("chapter-7.2-longtail", **kw)
    assert [st.duration_s for st in slab.steps] == pytest.approx(
        [slab_clock.step_time([Work.of(w) for w in st.works]) for st in slab.steps], rel=1e-9)
