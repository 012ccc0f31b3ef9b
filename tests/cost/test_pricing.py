"""The cost model's two forms agree: price() (what the clock charges) and fit_row() (what calibration solves) give
the same seconds for any step and any rates, so a term added to one and not the other fails here."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from tinyserve.cost.clock import ModeledClock
from tinyserve.cost.presets import get_preset
from tinyserve.cost.flops import attn_flops_per_pair, linear_flops
from tinyserve.cost.pricing import FIT, fit_row, per_unit, price, sides, step_hit, total
from tinyserve.cost.tensor import tensor_parallel
from tinyserve.core.request import Work


def random_works(rng: random.Random) -> list[Work]:
    works, slot = [], 0
    for _ in range(rng.randint(1, 12)):
        kind = rng.choice(["decode", "decode", "prefill", "chunk", "padded", "wasted"])
        if kind in ("decode", "wasted"):
            works.append(Work(slot, None, kind, rng.randint(0, 3000), 1))
        elif kind == "prefill":
            works.append(Work(slot, None, "prefill", 0, rng.randint(2, 900)))
        elif kind == "chunk":
            works.append(Work(slot, None, "prefill", rng.randint(1, 2000), rng.randint(2, 512)))
        else:
            works.append(Work(slot, None, "prefill", 0, rng.randint(2, 60), padding=rng.randint(1, 900)))
        slot += rng.randint(1, 3)
    return works


def layout_clock(hw, block_size: int) -> ModeledClock:
    """A clock for slab K/V (block_size 0) or K/V paged in blocks of block_size positions."""
    return ModeledClock(hw).for_layout(block_size) if block_size else ModeledClock(hw)


def random_rates(hw, rng: random.Random):
    """Every fitted number set, a KV cache stated, so that every term of the formula is switched on."""
    return replace(hw, overhead_s=rng.uniform(1e-5, 1e-3), call_overhead_s=rng.uniform(0, 1e-4),
                   row_overhead_s=rng.uniform(0, 5e-5), walk_overhead_s=rng.uniform(0, 1e-7),
                   bandwidth_Bps=rng.uniform(1e9, 1e11), kv_bandwidth_Bps=rng.uniform(1e9, 1e10),
                   peak_flops=rng.uniform(1e10, 1e11), attn_flops=rng.uniform(1e9, 1e11),
                   kv_cache_bytes=rng.choice([0.0, 4 * 2 ** 20, 16 * 2 ** 20]), kv_cache_ramp=rng.choice([1.5, 2.0]),
                   kv_cache_bandwidth_Bps=rng.uniform(1e10, 5e10), miss_row_overhead_s=rng.uniform(0, 2e-5),
                   big_step_tokens=rng.choice([0.0, 2000.0]), big_step_token_s=rng.uniform(0, 1e-6),
                   masked_pair_s=rng.uniform(0, 1e-8), gather_call_s=rng.uniform(0, 3e-5),
                   gather_Bps=rng.choice([0.0, rng.uniform(1e9, 2e10)]))


@pytest.mark.parametrize("preset", ["cpu-tiny", "h200-70b-fp8"])
def test_linear_form_equals_the_price_for_random_steps_and_rates(preset):
    rng = random.Random(7)
    base = get_preset(preset)
    for _ in range(300):
        hw = random_rates(base, rng)
        # the paged layout too (its gathers: block sizes from one position to 256)
        t = layout_clock(hw, rng.choice([0, 0, 1, 16, 256])).terms(random_works(rng))
        x = per_unit(hw)
        hit = step_hit(t, hw)
        mem_lin, mem_attn = sides(t, hw, hit, x)
        row = fit_row(t, hw, hit, hw.kv_cache_bytes, mem_lin, mem_attn)
        assert len(row) == len(x) == len(FIT)
        assert sum(r * v for r, v in zip(row, x)) == pytest.approx(total(price(t, hw), hw), rel=1e-9)


def test_the_clock_charges_what_price_says():
    hw = get_preset("cpu-tiny")
    works = [Work(0, None, "decode", 99, 1), Work(1, None, "prefill", 300, 100), Work(3, None, "prefill", 0, 40, 20)]
    clock = ModeledClock(hw)
    assert clock.step_time(works) == total(price(clock.terms(works), hw), hw)
    # by hand, the linear part of a decode-only step on the H200 preset: memory-bound, weights / bandwidth
    h200 = get_preset("h200-70b-fp8")
    t = ModeledClock(h200).terms([Work(0, None, "decode", 9, 1)])
    assert price(t, h200).linear_s == h200.weight_bytes / h200.bandwidth_Bps


def test_price_names_its_parts_and_counts_flops_with_the_one_helpers():
    hw = get_preset("h200-70b-fp8")
    works = [Work(0, None, "decode", 99, 1), Work(1, None, "prefill", 300, 100), Work(2, None, "prefill", 0, 40, 20)]
    t = ModeledClock(hw).terms(works)
    p = price(t, hw)
    assert p.lin_flops == linear_flops(hw, t["tokens"]) == 2.0 * hw.nonembed_params * 161  # 1 + 100 + 40 + 20 padding
    assert p.attn_flops == sum(attn_flops_per_pair(hw) * pairs for _, _, pairs, _ in t["attn"])
    assert attn_flops_per_pair(hw) == 4.0 * hw.n_layer * hw.attn_dim
    assert set(p.attn_s) == {"decode", "prefill", "padding"} and p.attn_s["padding"] > 0
    linear_s, attn_s, *_, copy_s, allreduce_s = p  # still a tuple for a caller that unpacks it
    assert (linear_s, attn_s, copy_s, allreduce_s) == (p.linear_s, p.attn_s, p.copy_s, 0.0)
    assert total(p, hw) == pytest.approx(hw.overhead_s + p.calls_s + p.linear_s + sum(p.attn_s.values()) + p.write_s
                                         + p.copy_s, rel=1e-15)


@pytest.mark.parametrize("n", [2, 8])
def test_a_split_instance_agrees_but_for_its_known_all_reduces(n):
    """Over several GPUs (cost/tensor.py) the all-reduces are a known term outside FIT: the linear form plus
    Price.allreduce_s is the price, for any step and any rates (calibration refuses such a preset:
    test_tensor_parallel.py)."""
    rng = random.Random(n)
    base = tensor_parallel(get_preset("h200-70b-fp8"), n)
    for _ in range(200):
        hw = random_rates(base, rng)
        t = layout_clock(hw, rng.choice([0, 16])).terms(random_works(rng))
        x = per_unit(hw)
        hit = step_hit(t, hw)
        p = price(t, hw)
        assert p.allreduce_s > 0
        row = fit_row(t, hw, hit, hw.kv_cache_bytes, *sides(t, hw, hit, x))
        assert sum(r * v for r, v in zip(row, x)) + p.allreduce_s == pytest.approx(total(p, hw), rel=1e-9)
