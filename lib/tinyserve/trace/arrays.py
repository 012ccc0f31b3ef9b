"""What the views draw, as numpy arrays built once per trace: the works table, per-step and per-request arrays,
the slot grid, request timelines, slot-step shares (Trace's view methods return these, cached). They read a trace's
fields (fields.TraceFields; record.py, which hands them out, imports this module: not the other way)."""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

import numpy as np

from ..core.request import FINISHED, REJECTED, Request
from . import latency
from .fields import TraceFields
from .step import StepRecord

PHASES = ("prefill", "decode", "wasted", "padding", "idle")
# codes of phase_grid(): a slot-step is one of these; a padded prefill counts as padding when padding > tokens
GRID_PHASES = ("idle", "prefill", "padding", "decode", "wasted")
IDLE, PREFILL, PADDING, DECODE, WASTED = range(5)
_WORK_CODE = {"prefill": PREFILL, "decode": DECODE, "wasted": WASTED}


REQUEST_STATES = ("not arrived", "waiting", "prefill", "decode", "done", "rejected", "aborted")  # words: ok (names: data)
NOT_ARRIVED, WAITING_CODE, PREFILLING, DECODING, DONE, REJECTED_CODE, ABORTED_CODE = range(7)


@dataclass
class WorkTable:
    """One row per SlotWork, in step order. token: the work produced a token (a decode, or a prefill's last
    chunk); gap_s: for a token, the time since the request's previous token, or since arrival for the first."""

    step: np.ndarray
    slot: np.ndarray
    request: np.ndarray  # index into Trace.requests
    phase: np.ndarray  # GRID_PHASES code of the work's own phase (prefill, decode, wasted)
    start: np.ndarray
    tokens: np.ndarray
    padding: np.ndarray
    token: np.ndarray
    first_token: np.ndarray
    gap_s: np.ndarray


@dataclass
class StepArrays:
    """Per-step arrays, one entry per step (index = step number)."""

    start_s: np.ndarray
    duration_s: np.ndarray
    end_s: np.ndarray
    measured_s: np.ndarray  # nan for dry runs
    tokens: np.ndarray  # computed, padding included
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray  # useful decodes
    wasted_tokens: np.ndarray
    padding_tokens: np.ndarray
    busy_slots: np.ndarray
    num_waiting: np.ndarray
    kv_reserved_bytes: np.ndarray
    kv_used_bytes: np.ndarray
    prefill_works: np.ndarray  # requests that ran a prefill chunk
    max_itl_s: np.ndarray  # the longest inter-token gap among the decode tokens of this step (nan: none)
    max_ttft_s: np.ndarray  # the longest time-to-first-token among first tokens of this step (nan: none)
    preempted: np.ndarray  # requests preempted while this step was planned (paged layout; 0 for slabs)
    recomputed_tokens: np.ndarray  # prefill tokens this step computed again after a preemption


@dataclass
class SlotGrid:
    """(num_slots, num_steps) arrays; request is an index into Trace.requests, -1 where idle."""

    phase: np.ndarray  # GRID_PHASES codes: a padded prefill cell is PADDING when its padding > its tokens
    request: np.ndarray
    tokens: np.ndarray
    padding: np.ndarray
    start: np.ndarray


@dataclass
class RequestArrays:
    """One entry per request (Trace.requests order); steps are -1 where they never happened."""

    ids: list[str]
    status: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    arrival_s: np.ndarray
    first_token_s: np.ndarray  # nan if none
    finish_s: np.ndarray  # nan if none
    ttft_s: np.ndarray  # nan unless a first token came
    e2e_s: np.ndarray  # nan unless finished
    slot: np.ndarray
    first_step: np.ndarray  # first computed (its slot was claimed for this step)
    first_token_step: np.ndarray
    finish_step: np.ndarray  # the step that produced its last token
    last_step: np.ndarray  # the last step its slot computed for it (static: wasted decodes after finishing)


@dataclass
class BlockUsage:
    """The paged layout's blocks as arrays. Spans (one per time a block was held, sorted by block then first step):
    block, request (index into Trace.requests), index in its block table, first and last step. Partly filled last
    blocks (internal waste), one row per (sequence, step): step, block, request, unfilled positions. Per step:
    blocks held and positions wasted (what StepRecord.blocks_used / block_waste say, rebuilt from the above)."""

    block: np.ndarray
    request: np.ndarray
    index: np.ndarray
    first: np.ndarray
    last: np.ndarray
    waste_step: np.ndarray
    waste_block: np.ndarray
    waste_request: np.ndarray
    waste_positions: np.ndarray
    held: np.ndarray  # per step
    waste: np.ndarray  # per step


@dataclass
class RequestTimeline:
    """One request's life in the trace; chunks are (step, start position, tokens, padding) of its prefills."""

    id: str
    status: str
    prompt_len: int
    output_len: int
    arrival_s: float
    slot: int | None
    claimed_s: float | None  # start of its first computed step: its slot was claimed for that step
    first_step: int | None
    chunks: list[tuple[int, int, int, int]]
    first_token_s: float | None
    finish_s: float | None
    decode_steps: int
    wasted_steps: int
    last_step: int | None


_WORKS = operator.attrgetter("works")  # a C-level getter: a generator expression costs ~0.5 us a step


def _step_column(tr: TraceFields, name: str, dtype) -> np.ndarray:
    """One StepRecord field of every step as an array (a C loop: long runs have ~10,000 steps)."""
    return np.fromiter(map(operator.attrgetter(name), tr.steps), dtype=dtype, count=len(tr.steps))


def _recompute_tokens(tr: TraceFields, token, ph, step, req, index) -> np.ndarray:
    """Tokens of a run with preemptions: only a request's first prefill to end its prompt made a token (a later one
    is a recompute chunk); a recompute's last chunk, ending past the prompt, made one (StepRecord.resumed)."""
    pre = np.flatnonzero(token & (ph == PREFILL))
    _, first = np.unique(req[pre], return_index=True)
    token = token & (ph != PREFILL)
    token[pre[first]] = True
    for k, s in enumerate(tr.steps):
        for rid in s.resumed:
            token[(step == k) & (req == index[rid]) & (ph == PREFILL)] = True
    return token


def _works_table(tr: TraceFields) -> WorkTable:
    n = len(tr.steps)
    counts = np.fromiter(map(len, map(_WORKS, tr.steps)), dtype=np.int64, count=n)
    m = int(counts.sum())
    step = np.repeat(np.arange(n, dtype=np.int64), counts)
    # every work's six fields in one flat list (C speed, no list of the works first), then a column is every sixth
    flat = list(itertools.chain.from_iterable(itertools.chain.from_iterable(map(_WORKS, tr.steps))))
    slot, start, tokens, padding = (np.fromiter(flat[i::6], dtype=np.int64, count=m) for i in (0, 3, 4, 5))
    index = {r.id: i for i, r in enumerate(tr.requests)}
    req = np.fromiter(map(index.__getitem__, flat[1::6]), dtype=np.int64, count=m)
    ph = np.fromiter(map(_WORK_CODE.__getitem__, flat[2::6]), dtype=np.int8, count=m)
    prompt_len = np.array([r.prompt_len for r in tr.requests], dtype=np.int64)
    token = (ph == DECODE) | ((ph == PREFILL) & (start + tokens == prompt_len[req] if m else False))
    if any(s.resumed for s in tr.steps):  # the paged layout preempted someone
        token = _recompute_tokens(tr, token, ph, step, req, index)
    end = _step_column(tr, "start_s", np.float64) + _step_column(tr, "duration_s", np.float64)
    # gaps: each token's time minus the same request's previous token (or its arrival for the first one)
    gap = np.full(m, np.nan)
    first = np.zeros(m, dtype=bool)
    rows = np.flatnonzero(token)
    if len(rows):
        order = rows[np.argsort(req[rows], kind="stable")]  # per request, in step order
        t = end[step[order]]
        r = req[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = r[1:] != r[:-1]
        prev = np.empty(len(order))
        prev[1:] = t[:-1]
        arrival = np.array([x.arrival_s for x in tr.requests], dtype=np.float64)
        prev[new] = arrival[r[new]]
        gap[order] = t - prev
        first[order[new]] = True
    return WorkTable(step, slot, req, ph, start, tokens, padding, token, first, gap)


def _step_arrays(tr: TraceFields) -> StepArrays:
    n = len(tr.steps)
    wt = tr.works_table()
    start, dur = _step_column(tr, "start_s", np.float64), _step_column(tr, "duration_s", np.float64)
    meas = np.array([np.nan if s.measured_s is None else s.measured_s for s in tr.steps], dtype=np.float64)

    def per_step(weights, mask=None) -> np.ndarray:
        w = weights if mask is None else np.where(mask, weights, 0)
        return np.bincount(wt.step, weights=w, minlength=n).astype(np.int64)

    def max_per_step(mask) -> np.ndarray:
        out = np.full(n, -np.inf)
        np.maximum.at(out, wt.step[mask], wt.gap_s[mask])
        out[out == -np.inf] = np.nan
        return out

    prefill = wt.phase == PREFILL
    return StepArrays(
        start_s=start, duration_s=dur, end_s=start + dur, measured_s=meas,
        tokens=per_step(wt.tokens + wt.padding), prefill_tokens=per_step(wt.tokens, prefill),
        decode_tokens=per_step(wt.tokens, wt.phase == DECODE), wasted_tokens=per_step(wt.tokens, wt.phase == WASTED),
        padding_tokens=per_step(wt.padding), busy_slots=np.bincount(wt.step, minlength=n).astype(np.int64),
        num_waiting=_step_column(tr, "num_waiting", np.int64),
        kv_reserved_bytes=_step_column(tr, "kv_reserved_bytes", np.int64),
        kv_used_bytes=_step_column(tr, "kv_used_bytes", np.int64),
        prefill_works=per_step(np.ones(len(wt.step), dtype=np.int64), prefill),
        max_itl_s=max_per_step(wt.token & ~wt.first_token), max_ttft_s=max_per_step(wt.first_token),
        preempted=np.fromiter((len(s.preempted) for s in tr.steps), dtype=np.int64, count=n),
        recomputed_tokens=_step_column(tr, "recomputed_tokens", np.int64))


def _block_usage(tr: TraceFields) -> BlockUsage:
    n, size = len(tr.steps), max(1, tr.block_size)
    index = {r.id: i for i, r in enumerate(tr.requests)}
    m = len(tr.block_spans)
    flat = list(itertools.chain.from_iterable(tr.block_spans))  # every fifth item is one column (C speed)
    blk, idx, first, last = (np.fromiter(flat[i::5], dtype=np.int64, count=m) for i in (0, 2, 3, 4))
    req = np.fromiter(map(index.__getitem__, flat[1::5]), dtype=np.int64, count=m)
    order = np.lexsort((first, blk))
    blk, req, idx, first, last = blk[order], req[order], idx[order], first[order], last[order]
    # positions each sequence has stored after each step: its last work's end (a decode stores one position), or
    # 0 from a preemption on (its blocks went back; a recompute's chunks fill new ones)
    wt = tr.works_table()
    run = wt.phase != WASTED
    ev_req, ev_step = [wt.request[run]], [wt.step[run]]
    ev_ctx = [np.where(wt.phase[run] == PREFILL, wt.start[run] + wt.tokens[run], wt.start[run] + 1)]
    pre = [(index[rid], k) for k, s in enumerate(tr.steps) for rid in s.preempted]
    if pre:
        p = np.array(pre, dtype=np.int64)
        ev_req.append(p[:, 0]), ev_step.append(p[:, 1]), ev_ctx.append(np.zeros(len(p), dtype=np.int64))
    ev_kind = np.concatenate([np.ones(len(ev_req[0]), dtype=np.int64), np.zeros(len(pre), dtype=np.int64)])
    ev_req, ev_step, ev_ctx = (np.concatenate(a) for a in (ev_req, ev_step, ev_ctx))
    ev_key = ev_req * (n + 1) + ev_step
    o = np.lexsort((ev_kind, ev_key))  # a preemption before the same step's work
    ev_key, ev_req, ev_ctx = ev_key[o], ev_req[o], ev_ctx[o]
    # every (sequence, step) holding blocks: the spans of each table's first block
    h = idx == 0
    length = last[h] - first[h] + 1
    p_req = np.repeat(req[h], length)
    p_step = np.repeat(first[h], length) + (np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length))
    at = np.searchsorted(ev_key, p_req * (n + 1) + p_step, side="right") - 1
    ok = at >= 0
    ok[ok] = ev_req[at[ok]] == p_req[ok]
    filled = np.where(ok, ev_ctx[np.maximum(at, 0)], 0)
    # the unfilled tail of the last filled block: block number filled // size of the sequence's table
    rem = -filled % size
    w = np.flatnonzero(rem > 0)
    top = int(idx.max()) + 1 if len(idx) else 1
    key2 = (req * top + idx) * (n + 1) + first
    o2 = np.argsort(key2, kind="stable")
    wi = filled[w] // size
    at2 = np.searchsorted(key2[o2], (p_req[w] * top + wi) * (n + 1) + p_step[w], side="right") - 1
    found = (at2 >= 0) & (wi < top)
    s2 = o2[np.maximum(at2, 0)]
    found &= (req[s2] == p_req[w]) & (idx[s2] == wi) & (last[s2] >= p_step[w])
    w, s2 = w[found], s2[found]
    held = np.cumsum(np.bincount(first, minlength=n + 1)[:n] - np.bincount(last + 1, minlength=n + 1)[:n])
    return BlockUsage(blk, req, idx, first, last, p_step[w], blk[s2], p_req[w], rem[w], held,
                      np.bincount(p_step[w], weights=rem[w], minlength=n).astype(np.int64))


def _slot_grid(tr: TraceFields) -> SlotGrid:
    shape = (tr.num_slots, len(tr.steps))
    wt = tr.works_table()
    phase = np.zeros(shape, dtype=np.int8)
    code = np.where((wt.phase == PREFILL) & (wt.padding > wt.tokens), PADDING, wt.phase).astype(np.int8)
    phase[wt.slot, wt.step] = code
    grids = []
    for col, fill in ((wt.request, -1), (wt.tokens, 0), (wt.padding, 0), (wt.start, 0)):
        g = np.full(shape, fill, dtype=np.int64)
        g[wt.slot, wt.step] = col
        grids.append(g)
    return SlotGrid(phase, *grids)


def _request_arrays(tr: TraceFields) -> RequestArrays:
    m = len(tr.requests)
    wt = tr.works_table()

    def per_request(rows: np.ndarray, values: np.ndarray, how) -> np.ndarray:
        out = np.full(m, -1, dtype=np.int64)
        if how is np.minimum:
            tmp = np.full(m, np.iinfo(np.int64).max)
            np.minimum.at(tmp, wt.request[rows], values[rows])
            out = np.where(tmp == np.iinfo(np.int64).max, -1, tmp)
        else:
            np.maximum.at(out, wt.request[rows], values[rows])
        return out

    def seconds(values) -> np.ndarray:  # nan where a time is None
        return np.array([nan if x is None else x for x in values], dtype=np.float64)

    nan = float("nan")
    every = np.ones(len(wt.step), dtype=bool)
    status = np.array([r.status for r in tr.requests], dtype=object)
    return RequestArrays(
        ids=[r.id for r in tr.requests], status=status,
        prompt_len=np.array([r.prompt_len for r in tr.requests], dtype=np.int64),
        output_len=np.array([r.output_len for r in tr.requests], dtype=np.int64),
        arrival_s=seconds(r.arrival_s for r in tr.requests),
        first_token_s=seconds(r.first_token_s for r in tr.requests), finish_s=seconds(r.finish_s for r in tr.requests),
        ttft_s=seconds(map(latency.ttft_s, tr.requests)), e2e_s=seconds(map(latency.e2e_s, tr.requests)),
        slot=np.array([r.slot for r in tr.requests], dtype=np.int64),
        first_step=per_request(every, wt.step, np.minimum),
        first_token_step=per_request(wt.first_token, wt.step, np.minimum),
        finish_step=np.where(status == FINISHED, per_request(wt.token, wt.step, np.maximum), -1),
        last_step=per_request(every, wt.step, np.maximum))


def _request_timelines(tr: TraceFields) -> list[RequestTimeline]:
    wt, ra = tr.works_table(), tr.request_arrays()
    chunks: list[list] = [[] for _ in tr.requests]
    for i in np.flatnonzero(wt.phase == PREFILL):
        chunks[wt.request[i]].append((int(wt.step[i]), int(wt.start[i]), int(wt.tokens[i]), int(wt.padding[i])))
    m = len(tr.requests)
    decodes = np.bincount(wt.request[wt.phase == DECODE], minlength=m)
    wasted = np.bincount(wt.request[wt.phase == WASTED], minlength=m)
    out = []
    for i, r in enumerate(tr.requests):
        fs = int(ra.first_step[i])
        out.append(RequestTimeline(
            r.id, r.status, r.prompt_len, r.output_len, r.arrival_s, r.slot if r.slot >= 0 else None,
            tr.steps[fs].start_s if fs >= 0 else None, fs if fs >= 0 else None, chunks[i], r.first_token_s,
            r.finish_s, int(decodes[i]), int(wasted[i]), int(ra.last_step[i]) if ra.last_step[i] >= 0 else None))
    return out


def _slot_step_shares(tr: TraceFields) -> dict[str, np.ndarray]:
    wt, n = tr.works_table(), len(tr.steps)
    total = (wt.tokens + wt.padding).astype(np.float64)
    wasted = (wt.phase == WASTED).astype(np.float64)
    pad_share = np.divide(wt.padding, total, out=np.zeros(len(total)), where=total > 0) * (1.0 - wasted)
    busy = np.bincount(wt.step, minlength=n)
    return {"useful": np.bincount(wt.step, weights=1.0 - wasted - pad_share, minlength=n),
            "padding": np.bincount(wt.step, weights=pad_share, minlength=n),
            "wasted": np.bincount(wt.step, weights=wasted, minlength=n),
            "idle": (tr.num_slots - busy).astype(np.float64)}


def slot_phases(tr: TraceFields) -> np.ndarray:
    """(num_slots, num_steps) array of phase names ('idle' where a slot did nothing)."""
    grid = np.full((tr.num_slots, len(tr.steps)), "idle", dtype=object)
    for j, s in enumerate(tr.steps):
        for w in s.works:
            grid[w.slot, j] = w.phase
    return grid


def slots_held(tr: TraceFields) -> np.ndarray:
    """Per step: slots holding a request (claimed at its first step, held through its last, wasted included)."""
    ra, n = tr.request_arrays(), len(tr.steps)
    ran = ra.first_step >= 0
    edges = np.zeros(n + 1, dtype=np.int64)
    np.add.at(edges, ra.first_step[ran], 1)
    np.add.at(edges, ra.last_step[ran] + 1, -1)
    return np.cumsum(edges[:n])


def request_states(tr: TraceFields, k: int) -> np.ndarray:
    """Each request's state (REQUEST_STATES code) at the end of step k."""
    ra, sa = tr.request_arrays(), tr.step_arrays()
    t_end = sa.end_s[k] if len(sa.end_s) else 0.0
    st = np.full(len(ra.ids), WAITING_CODE, dtype=np.int8)
    st[ra.arrival_s > t_end] = NOT_ARRIVED
    st[(ra.first_step >= 0) & (ra.first_step <= k)] = PREFILLING
    st[(ra.first_token_step >= 0) & (ra.first_token_step <= k)] = DECODING
    st[(ra.finish_step >= 0) & (ra.finish_step <= k)] = DONE
    st[ra.status == REJECTED] = REJECTED_CODE
    aborted = (ra.status == "aborted") & (ra.finish_s <= t_end)
    st[aborted] = ABORTED_CODE
    return st
