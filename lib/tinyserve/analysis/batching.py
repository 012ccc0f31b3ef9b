"""What notebooks 7.1, 7.2 and 7.4 read off a trace, computed once here (torch-free: numpy and the trace only)."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..core.blocks import blocks_for
from ..core.request import FINISHED
from ..lang import t
from ..trace.arrays import DECODE, WASTED
from ..trace.record import Trace


def _rows(trace: Trace, ids: Iterable[str] | None) -> np.ndarray:
    """Indexes into trace.requests: the given ids in their order, or every finished request."""
    if ids is None:
        return np.flatnonzero(trace.request_arrays().status == FINISHED)
    index = {r.id: i for i, r in enumerate(trace.requests)}
    return np.array([index[i] for i in ids], dtype=np.int64)


def e2e_s(trace: Trace, ids: Iterable[str] | None = None) -> np.ndarray:
    """End-to-end latency (finish - arrival, s) of the given requests, or of every finished one."""
    return trace.request_arrays().e2e_s[_rows(trace, ids)]


def ttft_s(trace: Trace, ids: Iterable[str] | None = None) -> np.ndarray:
    """Time to first token (first token - arrival, s) of the given requests, or of every finished one."""
    return trace.request_arrays().ttft_s[_rows(trace, ids)]


def queue_wait_s(trace: Trace) -> float:
    """MEDIAN time from arrival to the request's first computed step, over finished requests (0 if none)."""
    from .sweeps import median_queue_s  # the capacity sweeps' statistic: one definition for both

    return median_queue_s(trace)


def wasted_share(trace: Trace) -> float:
    """Share of the decode tokens computed that belonged to requests already done (static's waste)."""
    wt = trace.works_table()
    decodes = wt.tokens[(wt.phase == DECODE) | (wt.phase == WASTED)].sum()
    return float(wt.tokens[wt.phase == WASTED].sum() / decodes) if decodes else 0.0


def steps_until_done(trace: Trace, ids: Iterable[str]) -> np.ndarray:
    """Steps from the first one starting at or after each request's arrival to the one with its last token, inclusive."""
    ra, rows = trace.request_arrays(), _rows(trace, ids)
    arrived = np.searchsorted(trace.step_arrays().start_s, ra.arrival_s[rows], side="left")
    return ra.finish_step[rows] - arrived + 1


def iterations_computed(trace: Trace, ids: Iterable[str]) -> np.ndarray:
    """Steps that computed anything for each request (its prefill, decodes and wasted decodes)."""
    counts = np.bincount(trace.works_table().request, minlength=len(trace.requests))
    return counts[_rows(trace, ids)]


def group_longest_output(trace: Trace) -> np.ndarray:
    """Per request: the longest output among the requests admitted in the same step (its static group); -1 if never run."""
    ra = trace.request_arrays()
    out = np.full(len(ra.ids), -1, dtype=np.int64)
    ran = ra.first_step >= 0
    longest = np.full(len(trace.steps), -1, dtype=np.int64)
    np.maximum.at(longest, ra.first_step[ran], ra.output_len[ran])
    out[ran] = longest[ra.first_step[ran]]
    return out


def useful_slots_per_step(trace: Trace) -> np.ndarray:
    """Per step: slots that computed tokens a request keeps (a padded prefill counts only its own tokens' share)."""
    return trace.slot_step_shares()["useful"]


def slot_changes(trace: Trace, k: int) -> list[tuple[int, str | None, str | None]]:
    """(slot, request before, request after) for every slot whose request differs between steps k-1 and k."""
    grid = trace.phase_grid().request
    if not 0 <= k < grid.shape[1]:
        raise IndexError(t("engine.trace.step_outside", k=k, steps=grid.shape[1]))
    before = grid[:, k - 1] if k > 0 else np.full(grid.shape[0], -1)
    name = [r.id for r in trace.requests]
    return [(int(s), name[before[s]] if before[s] >= 0 else None, name[grid[s, k]] if grid[s, k] >= 0 else None)
            for s in np.flatnonzero(before != grid[:, k])]


def decode_capacity_tok_s(trace: Trace, batch: int | None = None) -> float:
    """Tokens/s the modeled GPU makes with `batch` sequences (default: every slot) all decoding at the traffic's
    mean context (prompt + half the output, averaged over the finished requests)."""
    from ..cost.clock import ModeledClock

    if trace.clock != "modeled" or trace.hardware is None:
        raise ValueError(t("engine.trace.needs_modeled", clock=trace.clock))
    ra = trace.request_arrays()
    done = ra.status == FINISHED
    context = int(round(float(np.mean(ra.prompt_len[done] + ra.output_len[done] / 2)))) if done.any() else 1
    b = trace.num_slots if batch is None else batch
    return b / ModeledClock(trace.hardware).decode_step_time(b, max(context, 1))


def capacity_share(trace: Trace) -> float:
    """Output tokens/s achieved / decode_capacity_tok_s: how much of what the GPU could make at this batch was made."""
    return trace.metrics()["output_throughput"] / decode_capacity_tok_s(trace)


def kv_bytes_per_position(trace: Trace) -> int:
    """Bytes of K and V one token position holds in the trace's KV units (the modeled model's, or the tiny GPT's)."""
    return int(trace.kv_bytes_per_token)


def kv_used_share(trace: Trace) -> float:
    """KV bytes holding tokens / KV bytes reserved, each weighted by step duration, over the run."""
    sa = trace.step_arrays()
    reserved = float(np.sum(sa.kv_reserved_bytes * sa.duration_s))
    return float(np.sum(sa.kv_used_bytes * sa.duration_s)) / reserved if reserved else 0.0


def schedule(trace: Trace) -> list[list[tuple]]:
    """What every step computed, slot by slot, without times: two runs with equal schedules ran the same steps."""
    return [[tuple(w) for w in s.works] for s in trace.steps]


def paged_positions(lengths: Iterable[int], block: int) -> int:
    """Positions reserved when each sequence gets whole blocks of `block` positions (rounded up)."""
    return sum(blocks_for(n, block) for n in lengths) * block


def block_columns(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step of a paged trace: blocks held in tables, blocks free, internal waste (positions)."""
    cols = ([s.blocks_used for s in trace.steps], [s.blocks_free for s in trace.steps],
            [s.block_waste for s in trace.steps])
    return tuple(np.asarray(c, dtype=np.int64) for c in cols)


def block_waste_share(trace: Trace) -> float:
    """Positions in the unfilled tails of last blocks / positions in held blocks, each weighted by step duration."""
    used, _, waste = block_columns(trace)
    d = trace.step_arrays().duration_s
    held = float(np.sum(used * trace.block_size * d))
    return float(np.sum(waste * d)) / held if held else 0.0


def table_entries_per_sequence(trace: Trace) -> float:
    """Block-table entries of a running sequence, on average over the run (time-weighted): blocks held / sequences."""
    used, _, _ = block_columns(trace)
    d = trace.step_arrays().duration_s
    seqs = float(np.sum(trace.step_arrays().busy_slots * d))
    return float(np.sum(used * d)) / seqs if seqs else 0.0


def layout_summary(trace: Trace) -> dict:
    """What 7.4 compares between the slab and the paged layout: the most sequences computed in one step, output
    tokens/s, TTFT and e2e p99 (s), peak KV held and used (GB), preemptions (0 for slabs)."""
    m = trace.metrics()
    return {"peak": int(trace.step_arrays().busy_slots.max(initial=0)), "tok_s": m["output_throughput"],
            "ttft_p99": m["ttft_ms"]["p99"] / 1e3, "e2e_p99": m["e2el_ms"]["p99"] / 1e3,
            "held_gb": m["kv_reserved_bytes_peak"] / 1e9, "used_gb": m["kv_used_bytes_peak"] / 1e9,
            "preemptions": m.get("preemptions", 0)}
