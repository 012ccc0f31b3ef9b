"""The price of one step: the cost model's formula, written once, in its two forms.

`price(t, hw)` turns a step's terms (ModeledClock.terms: tokens, K/V written, attention calls with the keys they
read and the query-key pairs they compute, rows, the walk, masked pairs, and under the paged layout the calls that
gather K/V through block tables and the positions they copy) into the seconds of its parts under a
preset's rates: the modeled clock reads it for every step. `fit_row(...)` is the same formula made linear: once
every max() knows which side wins, the step's time is a sum of (seconds per unit) x (units of the step), one
term per number in FIT; calibration solves for those numbers, then checks itself with price().
tests/cost/test_pricing.py proves the two forms agree, so a term added to one and not the other fails there. The one
term outside FIT: the all-reduces of a tensor-parallel instance (Price.allreduce_s), known, never fitted.
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from .flops import attn_flops_per_pair, linear_flops
from .presets import HardwarePreset


def kv_hit_fraction(read_bytes: float, cache_bytes: float, ramp: float = 2.0) -> float:
    """Share of a step's KV reads served from cache: all while they fit, none past ramp x the cache.

    The engine reads the same slabs every step (one key longer), so on a CPU whose last-level cache holds them,
    the next step re-reads them from cache; once a step reads more than fits, a sweep evicts what the next one
    needs first, and the share falls off (linearly here, between cache_bytes and ramp x cache_bytes: on
    the 32 MiB-L3 box of cpu-tiny, 32 decodes of 64 keys (8 MiB of KV) ran at 0.2 us a key, of 256 keys at ~0.4).
    """
    if cache_bytes <= 0 or read_bytes >= ramp * cache_bytes:
        return 0.0
    if read_bytes <= cache_bytes:
        return 1.0
    return (ramp * cache_bytes - read_bytes) / ((ramp - 1) * cache_bytes)


def step_hit(t: dict, hw: HardwarePreset, cache: float | None = None, ramp: float | None = None) -> float:
    """The step's KV cache hit share under hw's cache (or the given one)."""
    cache = hw.kv_cache_bytes if cache is None else cache
    if not cache:
        return 0.0  # every step of a dry run on a GPU preset: they state no cache
    return kv_hit_fraction(hw.kv_bytes_per_token * sum(a[1] for a in t["attn"]), cache,
                           hw.kv_cache_ramp if ramp is None else ramp)


class Price(NamedTuple):
    """A step's priced parts (price's result): seconds of each part, and the bytes and flops they came from."""

    linear_s: float  # the linear layers: the longer of streaming the weights and their arithmetic (+ big-step tokens)
    attn_s: dict[str, float]  # attention by kind of call: "decode", "prefill", "padding"
    write_s: float  # the new tokens' K/V written
    calls_s: float  # per-call, per-row, walk and miss overheads, and the paged layout's gather calls
    memory_s: float  # the part of the above bound by memory rather than arithmetic
    kv_read: float  # KV bytes the attention calls read
    attn_flops: float  # attention flops
    lin_bytes: float  # weight bytes streamed (0 for an empty step)
    lin_flops: float  # linear-layer flops
    copy_s: float  # the paged layout's K/V copied out of the block pool (its calls are in calls_s)
    allreduce_s: float  # tensor parallel: the all-reduces between the GPUs of an instance (cost/tensor.py); 0 on one


def price(t: dict, hw: HardwarePreset) -> Price:
    """Seconds of a step's parts, and the bytes and flops they came from (Price). An empty step streams no weights."""
    attn_rate = hw.attn_flops or hw.peak_flops
    kv_bw = hw.kv_bandwidth_Bps or hw.bandwidth_Bps
    hit = step_hit(t, hw) if hw.kv_cache_bytes else 0.0  # no cache stated (a GPU preset): no call, every step
    s_per_kv_byte = hit / hw.kv_cache_bandwidth_Bps + (1 - hit) / kv_bw if hit else 1 / kv_bw
    flops_per_pair = attn_flops_per_pair(hw)
    lin_bytes = hw.weight_bytes if t["attn"] or t["tokens"] else 0.0
    lin_flops = linear_flops(hw, t["tokens"])
    linear_s = max(lin_bytes / hw.bandwidth_Bps, lin_flops / hw.peak_flops)
    if hw.big_step_tokens and t["tokens"] > hw.big_step_tokens:  # see calibrate.model_preset
        linear_s += (t["tokens"] - hw.big_step_tokens) * hw.big_step_token_s
    attn_s = {"decode": 0.0, "prefill": 0.0, "padding": 0.0}
    memory_s = lin_bytes / hw.bandwidth_Bps if lin_bytes / hw.bandwidth_Bps >= lin_flops / hw.peak_flops else 0.0
    kv_read = attn_flops = 0.0
    for kind, keys, pairs, _ in t["attn"]:
        b, f = hw.kv_bytes_per_token * keys, flops_per_pair * pairs
        kv_read, attn_flops = kv_read + b, attn_flops + f
        compute = f / attn_rate
        part = max(b * s_per_kv_byte, compute)
        attn_s[kind] += part
        memory_s += part if b * s_per_kv_byte >= compute else 0.0
    if hw.masked_pair_s and t["masked_pairs"]:
        attn_s["prefill"] += hw.masked_pair_s * t["masked_pairs"]
    write_s = hw.kv_bytes_per_token * t["kv_written"] / kv_bw
    memory_s += write_s
    calls_s = hw.call_overhead_s * t["calls"] + hw.row_overhead_s * t["rows"] + hw.walk_overhead_s * t["walk"]
    calls_s += (1 - hit) * hw.miss_row_overhead_s * t["rows"] if hw.kv_cache_bytes else 0.0
    copy_s = 0.0
    if t["gathers"]:  # the paged layout: K/V copied out of the block pool before the calls (gather_* of the preset)
        calls_s += hw.gather_call_s * t["gathers"]
        copy_s = hw.kv_bytes_per_token * t["gathered"] / hw.gather_Bps if hw.gather_Bps else 0.0
        memory_s += copy_s
    # an instance of several GPUs (cost/tensor.py): two ring all-reduces per layer, not overlapped; one GPU: one test
    allreduce_s = (hw.allreduce_step_s + hw.allreduce_token_s * t["tokens"] if hw.num_gpus > 1 and t["tokens"]
                   else 0.0)
    # tuple.__new__: Price(...) without the namedtuple's Python-level __new__ (a dry run prices every step)
    return tuple.__new__(Price, (linear_s, attn_s, write_s, calls_s, memory_s, kv_read, attn_flops, lin_bytes,
                                 lin_flops, copy_s, allreduce_s))


def total(parts: Price, hw: HardwarePreset) -> float:
    """A step's modeled seconds from its priced parts."""
    attn_s = parts.attn_s
    return (hw.overhead_s + parts.calls_s + parts.linear_s + attn_s["decode"] + (attn_s["prefill"] + attn_s["padding"])
            + parts.write_s + parts.copy_s + parts.allreduce_s)


# The numbers calibration fits, in fit_row's order; a rate (bytes or flops per second) enters as 1/rate.
FIT = ("overhead_s", "call_overhead_s", "row_overhead_s", "walk_overhead_s", "bandwidth_Bps", "kv_bandwidth_Bps",
       "peak_flops", "attn_flops", "kv_cache_bandwidth_Bps", "miss_row_overhead_s", "big_step_token_s",
       "masked_pair_s", "gather_call_s", "gather_Bps")
RATES = {"bandwidth_Bps", "kv_bandwidth_Bps", "peak_flops", "attn_flops", "kv_cache_bandwidth_Bps", "gather_Bps"}


def per_unit(hw: HardwarePreset) -> list[float]:
    """hw's numbers in FIT's order, as seconds per unit (the vector fit_row's coefficients multiply)."""
    vals = {**{k: getattr(hw, k) for k in FIT}, "attn_flops": hw.attn_flops or hw.peak_flops,
            "kv_bandwidth_Bps": hw.kv_bandwidth_Bps or hw.bandwidth_Bps}
    return [(1 / vals[k] if vals[k] else 0.0) if k in RATES else vals[k] for k in FIT]


def with_fit(hw: HardwarePreset, x: list[float], cache: float, ramp: float) -> HardwarePreset:
    """hw with fitted numbers (FIT's order, seconds per unit) and a KV cache of `cache` bytes."""
    vals = {k: (1 / v if v else 0.0) if k in RATES else v for k, v in zip(FIT, x)}
    if not cache:
        vals["kv_cache_bandwidth_Bps"], vals["miss_row_overhead_s"] = 0.0, 0.0
    return replace(hw, **vals, kv_cache_bytes=cache, kv_cache_ramp=ramp)


def sides(t: dict, hw: HardwarePreset, hit: float, x: list[float]) -> tuple[bool, list[bool]]:
    """Which side of each max() wins under per-unit numbers x: (linear memory-bound?, each call memory-bound?)."""
    p = dict(zip(FIT, x))
    per_pair = attn_flops_per_pair(hw)
    mem_lin = p["bandwidth_Bps"] * hw.weight_bytes >= p["peak_flops"] * linear_flops(hw, t["tokens"])
    per_byte = hit * p["kv_cache_bandwidth_Bps"] + (1 - hit) * p["kv_bandwidth_Bps"]
    mem_attn = [per_byte * hw.kv_bytes_per_token * keys >= p["attn_flops"] * per_pair * pairs
                for _, keys, pairs, _ in t["attn"]]
    return mem_lin, mem_attn


def fit_row(t: dict, hw: HardwarePreset, hit: float, cache: float, mem_lin: bool, mem_attn: list[bool]) -> list[float]:
    """price()'s terms, linear once each max() has its side: the units of the step multiplying each number of FIT.

    All of them but the all-reduces of an instance split over several GPUs (Price.allreduce_s, cost/tensor.py): a
    known term, not fitted (calibration measures one device: tools.calibrate.fit_cost refuses such a preset). So
    fit_row . per_unit(hw) + price(t, hw).allreduce_s == total(price(t, hw), hw), and on one GPU the sum alone."""
    per_pair = attn_flops_per_pair(hw)
    kv = sum(hw.kv_bytes_per_token * keys for (_, keys, _, _), m in zip(t["attn"], mem_attn) if m)
    flops = sum(per_pair * pairs for (_, _, pairs, _), m in zip(t["attn"], mem_attn) if not m)
    lin_flops = linear_flops(hw, t["tokens"])
    big = max(0.0, t["tokens"] - hw.big_step_tokens) if hw.big_step_tokens else 0.0
    return [1.0, t["calls"], t["rows"], t["walk"], hw.weight_bytes if mem_lin else 0.0,
            hw.kv_bytes_per_token * t["kv_written"] + (1 - hit) * kv, 0.0 if mem_lin else lin_flops, flops,
            hit * kv, (1 - hit) * t["rows"] if cache else 0.0, big, t["masked_pairs"], t["gathers"],
            hw.kv_bytes_per_token * t["gathered"] if t["gathers"] else 0.0]
