"""Figure data from a Trace at a cursor step: plain numpy, no drawing library (both plotly and matplotlib
draw from here, and the tests check it against the Trace). Nothing here schedules or recomputes metrics:
it only regroups what Trace.step_arrays(), phase_grid(), works_table() and request_arrays() say."""
from __future__ import annotations

import math
import string
from dataclasses import dataclass

import numpy as np

from tinyserve.core.request import FINISHED
from tinyserve.lang import t
from tinyserve.trace.arrays import DECODE, GRID_PHASES, IDLE, PADDING, PREFILL, REQUEST_STATES, WASTED
from tinyserve.trace.metrics import latency_stats
from tinyserve.trace.record import Trace

from .palette import PALETTE

GAP = len(GRID_PHASES)  # timeline code of a stretch of time with no step (waiting for the next arrival)
COLORS = {IDLE: PALETTE["idle"], PREFILL: PALETTE["prefill"], PADDING: PALETTE["padding"], DECODE: PALETTE["useful"],
          WASTED: PALETTE["wasted"], GAP: "#ffffff"}
STATE_COLORS = {"waiting": PALETTE["waiting"], "prefill": COLORS[PREFILL], "decode": COLORS[DECODE],
                "wasted": COLORS[WASTED]}
MAX_COLUMNS = 600  # more steps than this are drawn as per-step bins (a plot is ~600 px wide)
MAX_REQUESTS = 80  # the per-request view shows the first ones


def phase_name(code: int) -> str:
    """The label of a timeline code."""
    return t("phase.idle") if code == GAP else t(f"phase.{GRID_PHASES[code]}")


def time_label(trace: Trace) -> str:
    """x-axis label for time: modeled (with the hardware) or measured."""
    if trace.clock == "modeled":
        return t("axis.time.modeled", hardware=trace.hardware)
    return t("axis.time.wall")


def clamp_step(trace: Trace, k: int) -> int:
    """k limited to the trace's steps (0 when there are none)."""
    return max(0, min(int(k), len(trace.steps) - 1)) if trace.steps else 0


# ------------------------------------------------------------------------------------------------- timeline
@dataclass
class TimelineData:
    """A heatmap: z[slot, column] codes (GRID_PHASES, or GAP), column edges on x, and which steps each column holds."""

    z: np.ndarray
    x_edges: np.ndarray
    first_step: np.ndarray  # per column; -1 for a gap column
    last_step: np.ndarray
    bin: int  # steps per column
    x: str  # "steps" | "time"
    x_label: str
    cell_text: np.ndarray | None  # (slots, columns) hover text per cell; None: binned, words from `hover`
    note: str  # says when columns are bins
    # binned (no gap columns): the numbers of each cell's hover, (slots, columns, BIN_FIELDS); the browser formats
    # them (bin_template): 16 x 600 cells of words cost a redraw ~8 ms to format and send, the numbers ~0.1 ms
    hover: np.ndarray | None = None

    @property
    def text(self) -> np.ndarray:
        """(slots, columns) hover text per cell, as the browser shows it."""
        if self.cell_text is None:
            self.cell_text = bin_text(self.hover)
        return self.cell_text


BIN_FIELDS = ("a", "b", "prefill", "padding", "decode", "wasted", "idle")  # the fields of the hover.bin words


def bin_text(hover: np.ndarray) -> np.ndarray:
    """The hover.bin words of binned cells from their numbers (..., BIN_FIELDS)."""
    return vformat(t("hover.bin"), **{f: hover[..., i] for i, f in enumerate(BIN_FIELDS)})


def bin_template() -> str:
    """The same hover.bin words as a plotly hovertemplate over a cell's customdata (BIN_FIELDS order)."""
    out = []
    for literal, field, _spec, _conv in string.Formatter().parse(t("hover.bin")):
        out.append(literal)
        if field is not None:
            out.append(f"%{{customdata[{BIN_FIELDS.index(field)}]}}")
    return "".join(out)


def _bins(n: int, max_columns: int) -> tuple[int, np.ndarray, np.ndarray]:
    b = max(1, math.ceil(n / max_columns))
    first = np.arange(0, n, b)
    last = np.minimum(first + b - 1, n - 1)
    return b, first, last


def _strs(a: np.ndarray) -> np.ndarray:
    """str() of every element as an object array, formatting each distinct value once (a table lookup)."""
    if a.dtype == object:
        return a
    if a.size == 0:
        return a.astype(object)
    if a.dtype.kind in "iu":
        lo = int(a.min())
        table = np.array([str(v) for v in range(lo, int(a.max()) + 1)], dtype=object)
        return table[a - lo]
    u, inv = np.unique(a, return_inverse=True)
    return np.array([f"{v:g}" for v in u.tolist()], dtype=object)[inv.reshape(a.shape)]


def vformat(template: str, **arrays) -> np.ndarray:
    """template.format(...) for every element of equally shaped arrays at once: object arrays of str, added
    elementwise (one C loop per piece; numpy's fixed-width string ufuncs are slower at these widths)."""
    out = None
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        pieces = [literal] if literal else []
        if field is not None:
            pieces.append(_strs(np.asarray(arrays[field])))
        for p in pieces:
            out = p if out is None else out + p
    return np.asarray(out if out is not None else "", dtype=object)


def timeline_data(trace: Trace, x: str = "steps", max_columns: int = MAX_COLUMNS,
                  words: bool = True) -> TimelineData:
    """The slot timeline: one column per step, or per bin of steps when there are more steps than max_columns;
    words=False leaves out the per-cell hover words (the deployment picture writes its own from the numbers)."""
    if x not in ("steps", "time"):
        raise ValueError(t("widgets.error.x", x=x, steps="steps", time="time"))
    grid = trace.phase_grid()
    n, slots = len(trace.steps), trace.num_slots
    b, first, last = _bins(n, max_columns)
    sa = trace.step_arrays()
    if b > 1:  # counts of each phase per (slot, bin); the column shows the most frequent (ties: the later code)
        pad = len(first) * b - n
        g = np.concatenate([grid.phase, np.full((slots, pad), -1, dtype=np.int8)], axis=1).reshape(slots, -1, b)
        # one count of every (slot, bin, phase) cell: a pass over the grid, not a comparison and a sum per phase
        cell = np.arange(g.shape[0] * g.shape[1]).reshape(slots, -1, 1) * len(GRID_PHASES) + g
        counts = np.bincount(cell[g >= 0], minlength=g.shape[0] * g.shape[1] * len(GRID_PHASES)).reshape(
            slots, -1, len(GRID_PHASES))
        z = (len(GRID_PHASES) - 1 - np.argmax(counts[..., ::-1], axis=-1)).astype(np.int8)
        code = {"prefill": PREFILL, "padding": PADDING, "decode": DECODE, "wasted": WASTED, "idle": IDLE}
        hover = np.stack([np.broadcast_to(first, z.shape), np.broadcast_to(last, z.shape)]
                         + [counts[..., code[f]] for f in BIN_FIELDS[2:]], axis=-1)  # BIN_FIELDS' order
        text = None
        note = t("note.binned", steps=n, cols=len(first), bin=b)
    else:  # a column per step; its hover words unless words=False
        z, text, note, hover = grid.phase.astype(np.int8), None, "", None
        if words:
            ids = np.array([r.id for r in trace.requests] + [""], dtype=object)
            names = np.array([phase_name(c) for c in range(len(GRID_PHASES))], dtype=object)
            pos1 = np.where(grid.tokens > 0, grid.start + grid.tokens - 1, 0)
            ms = np.broadcast_to(np.round(sa.duration_s * 1e3, 2), (slots, n))
            text = vformat(t("hover.cell"), step=np.broadcast_to(np.arange(n), (slots, n)), id=ids[grid.request],
                           phase=names[z], tokens=grid.tokens, padding=grid.padding, a=grid.start, b=pos1, ms=ms)
            idle = vformat(t("hover.idle"), step=np.broadcast_to(np.arange(n), (slots, n)))
            text = np.where(z == IDLE, idle, text)
    if x == "steps":
        edges = np.append(first, n).astype(np.float64) - 0.5
        return TimelineData(z, edges, first, last, b, x, t("axis.step"), text, note, hover)
    left, right = sa.start_s[first], sa.end_s[last]
    gaps = np.flatnonzero(left[1:] > right[:-1] + 1e-12) + 1  # idle stretches between steps: white columns
    if len(gaps):
        if text is None and words:  # a gap column's words are not numbers: every cell as words
            text = bin_text(hover)
        z = np.insert(z, gaps, GAP, axis=1)
        text = np.insert(text, gaps, t("hover.gap"), axis=1) if words else None
        first, last = np.insert(first, gaps, -1), np.insert(last, gaps, -1)
        edges = np.sort(np.concatenate([left, right[-1:], right[gaps - 1]]))
    else:
        edges = np.append(left, right[-1]) if n else np.zeros(1)
    return TimelineData(z, edges, first, last, b, x, time_label(trace), text, note,
                        hover if text is None else None)


def cursor_span(data: TimelineData | BlockMapData, k: int) -> tuple[float, float]:
    """x0, x1 of the timeline's (or block map's) column holding step k."""
    if len(data.first_step) == 0:
        return 0.0, 0.0
    col = int(np.flatnonzero((data.first_step <= k) & (data.last_step >= k) & (data.first_step >= 0))[0])
    return float(data.x_edges[col]), float(data.x_edges[col + 1])


# ---------------------------------------------------------------------------------------------- waste meter
def waste_at(trace: Trace, k: int) -> dict[str, float]:
    """Slot-steps by kind, summed over steps 0..k."""
    if not trace.steps:
        return {"useful": 0.0, "padding": 0.0, "wasted": 0.0, "idle": 0.0}
    shares = trace.cached("waste_totals", lambda: {key: np.cumsum(v) for key, v in trace.slot_step_shares().items()})
    k = clamp_step(trace, k)
    return {key: float(v[k]) for key, v in shares.items()}


def slots_at(trace: Trace, k: int) -> dict[str, int]:
    """What the slots do in step k: useful (prefill or decode), padding (mostly padding), wasted, idle."""
    col = trace.phase_grid().phase[:, clamp_step(trace, k)] if trace.steps else np.zeros(trace.num_slots)
    return {"useful": int(((col == PREFILL) | (col == DECODE)).sum()), "padding": int((col == PADDING).sum()),
            "wasted": int((col == WASTED).sum()), "idle": int((col == IDLE).sum())}


def waste_sentence(trace: Trace, k: int) -> str:
    """The waste meter's words: what the slots do at step k, and the running share of useful slot-steps."""
    s = slots_at(trace, k)
    slots = trace.num_slots
    if s["wasted"]:
        head = t("waste.sentence.wasted", wasted=s["wasted"], slots=slots)
    elif s["padding"]:
        head = t("waste.sentence.padding", padding=s["padding"], slots=slots)
    elif s["idle"] == slots:
        head = t("waste.sentence.idle", idle=s["idle"], slots=slots)
    elif s["useful"] == slots:
        head = t("waste.sentence.full", slots=slots)
    else:
        head = t("widgets.join.sentences", a=t("waste.sentence.useful", useful=s["useful"], slots=slots),
                 b=t("waste.sentence.idle", idle=s["idle"], slots=slots))
    w = waste_at(trace, k)
    total = sum(w.values())
    return t("widgets.join.sentences", a=head,
             b=t("waste.sentence.total", pct=100 * w["useful"] / total if total else 0.0, total=total))


# ------------------------------------------------------------------------------------------ step composition
def budget(trace: Trace) -> int | None:
    """The policy's token budget per step, if it has one (chunked prefill)."""
    return trace.knobs.get("max_batch_tokens")


def composition_at(trace: Trace, k: int) -> dict:
    """Step k's tokens: decode / wasted / padding totals and each prefill chunk (request, first, last position)."""
    if not trace.steps:
        return {"step": 0, "decode": 0, "wasted": 0, "padding": 0, "chunks": [], "total": 0, "budget": budget(trace)}
    k = clamp_step(trace, k)
    s, sa = trace.steps[k], trace.step_arrays()
    chunks = [(w.request_id, w.start, w.start + w.tokens - 1, w.tokens) for w in s.works if w.phase == "prefill"]
    return {"step": k, "decode": int(sa.decode_tokens[k]), "wasted": int(sa.wasted_tokens[k]),
            "padding": int(sa.padding_tokens[k]), "chunks": chunks, "total": s.tokens, "budget": budget(trace)}


def composition_sentence(trace: Trace, k: int) -> str:
    """The step composition's words for step k."""
    c = composition_at(trace, k)
    sa = trace.step_arrays()
    if not trace.steps:
        return t("note.no_steps")
    itl = sa.max_itl_s[c["step"]]
    return t("comp.sentence", k=c["step"], decodes=c["decode"], prefill=sum(ch[3] for ch in c["chunks"]),
             chunks=len(c["chunks"]), itl=t("unit.none") if math.isnan(itl) else t("unit.ms", v=itl * 1e3),
             dur=sa.duration_s[c["step"]] * 1e3)


# --------------------------------------------------------------------------------------------------- KV
def kv_unit(trace: Trace) -> tuple[str, float]:
    """MB, or GB when the reserved bytes reach 10 GB (a 70B model's KV), and the bytes in one unit."""
    peak = int(trace.step_arrays().kv_reserved_bytes.max()) if trace.steps else 0
    return ("GB", 1e9) if peak >= 10**10 else ("MB", 1e6)


def kv_series(trace: Trace) -> tuple[np.ndarray, np.ndarray, str]:
    """Reserved and used KV per step in kv_unit(), and the unit's name."""
    sa = trace.step_arrays()
    unit, scale = kv_unit(trace)
    return sa.kv_reserved_bytes / scale, sa.kv_used_bytes / scale, unit


def kv_sentence(trace: Trace, k: int) -> str:
    """The KV view's words for step k."""
    if not trace.steps:
        return t("note.no_steps")
    k = clamp_step(trace, k)
    res, used, unit = kv_series(trace)
    return trace.kv.kv_sentence(trace, lambda: blocks_at(trace, k), k=k, used=used[k], reserved=res[k],
                                unit=unit, pct=100 * used[k] / res[k] if res[k] else 0.0)


# ------------------------------------------------------------------------------------------------ latency
def latency_ms(trace: Trace) -> dict[str, np.ndarray]:
    """Sorted TTFT and end-to-end latencies (ms) of finished requests (works for a trace without steps)."""
    ra = trace.request_arrays()
    done = ra.status == FINISHED
    return {"ttft": np.sort(ra.ttft_s[done] * 1e3), "e2e": np.sort(ra.e2e_s[done] * 1e3)}


def percentiles(trace: Trace) -> dict[str, tuple[float, float]]:
    """p50 and p99 (ms) of TTFT ("ttft") and end-to-end latency ("e2e"), from the function Trace.metrics() takes
    them from (nan: none finished)."""
    m = latency_stats(trace.requests)
    return {key: tuple(math.nan if m[name][p] is None else m[name][p] for p in ("p50", "p99"))
            for key, name in (("ttft", "ttft_ms"), ("e2e", "e2el_ms"))}


def finished_by(trace: Trace, k: int) -> int:
    """Requests finished by the end of step k."""
    if not trace.steps:
        return int(np.sum(trace.request_arrays().status == FINISHED))
    ra = trace.request_arrays()
    return int(np.sum((ra.finish_step >= 0) & (ra.finish_step <= clamp_step(trace, k))))


# ----------------------------------------------------------------------------------------------- requests
def request_bars(trace: Trace, max_requests: int = MAX_REQUESTS) -> dict:
    """Per request (first max_requests): [start, end) times of waiting, prefill, decode and held-after-finish."""
    ra, sa = trace.request_arrays(), trace.step_arrays()
    m = min(len(ra.ids), max_requests)
    nan = np.full(m, np.nan)

    def at(steps: np.ndarray, arr: np.ndarray) -> np.ndarray:
        return np.where(steps >= 0, arr[np.maximum(steps, 0)] if len(arr) else nan, np.nan)

    claimed = at(ra.first_step[:m], sa.start_s)
    first_tok, fin = ra.first_token_s[:m], ra.finish_s[:m]
    last_end = at(ra.last_step[:m], sa.end_s)
    return {"ids": ra.ids[:m], "total": len(ra.ids),
            "waiting": (ra.arrival_s[:m], claimed), "prefill": (claimed, first_tok), "decode": (first_tok, fin),
            "wasted": (np.where(last_end > fin, fin, np.nan), np.where(last_end > fin, last_end, np.nan))}


def state_counts(trace: Trace, k: int) -> dict[str, int]:
    """How many requests are in each REQUEST_STATES state at the end of step k."""
    st = trace.request_states(clamp_step(trace, k)) if trace.steps else np.zeros(0, dtype=np.int8)
    return {name: int(np.sum(st == i)) for i, name in enumerate(REQUEST_STATES)}


def state_sentence(trace: Trace, k: int) -> str:
    """The per-request view's words for step k."""
    counts = t("widgets.join.list").join(t("widgets.state_count", n=v, state=t(f"state.{name}"))
                                         for name, v in state_counts(trace, k).items() if v)
    return t("req.states", k=clamp_step(trace, k), counts=counts or t("unit.none"))


# ----------------------------------------------------------------------------------------------- block map
BLOCK_STATES = ("free", "held", "waste")  # a block at a step: in no table; in a table; a sequence's partly filled last block
FREE, HELD, BWASTE = range(3)
BLOCK_COLORS = {FREE: PALETTE["idle"], HELD: PALETTE["kv_used"], BWASTE: PALETTE["wasted"]}
MAX_ROWS = 80  # more blocks than this (of those ever held) are drawn as bins of blocks
# columns of the block map: half the timeline's, as its cells carry ~3x the rows (80 vs 16-32 slots); 40% of its
# redraw time (the hover texts sent) for ~2.7 px per column
MAX_BLOCK_COLUMNS = 300


@dataclass
class BlockMapData:
    """A heatmap of the paged pool: z[row, column] BLOCK_STATES codes (the most frequent state of the cell's
    block-steps when rows or columns are bins), block edges on y, step edges on x, hover text per cell."""

    z: np.ndarray
    y_edges: np.ndarray
    x_edges: np.ndarray
    first_step: np.ndarray  # per column
    last_step: np.ndarray
    bin: int  # steps per column
    rows: int  # blocks per row
    top: int  # blocks drawn: 0 .. top-1 (every block ever held; the rest of the pool stayed free)
    text: np.ndarray
    note: str
    unfilled: np.ndarray  # per cell, positions of a partly filled last block left empty (one block-step cells only)

    @property
    def exact(self) -> bool:
        """One block-step per cell (no bins)."""
        return self.rows == 1 and self.bin == 1


def block_map(trace: Trace, max_rows: int = MAX_ROWS, max_columns: int = MAX_BLOCK_COLUMNS) -> BlockMapData:
    """Blocks x steps of a paged run: free, held, or holding a sequence's unfilled tail (internal waste)."""
    n, u = len(trace.steps), trace.block_usage()
    top = int(u.block.max()) + 1 if len(u.block) else 0
    if not n or not top:
        z = np.zeros((0, 0), dtype=np.int8)
        return BlockMapData(z, np.zeros(1), np.zeros(1), np.zeros(0, int), np.zeros(0, int), 1, 1, 0,
                            z.astype(object), "", z.astype(np.int64))
    b, first, last = _bins(n, max_columns)
    rb = max(1, math.ceil(top / max_rows))
    rows, cols = -(-top // rb), len(first)
    # block-steps held per (row, step): +1 from a span's first step, -1 after its last, summed along steps
    rowk = u.block // rb
    diff = np.zeros((rows, n + 1), dtype=np.int32)
    np.add.at(diff, (rowk, u.first), 1)
    np.add.at(diff, (rowk, u.last + 1), -1)
    held = np.add.reduceat(np.cumsum(diff[:, :n], axis=1), first, axis=1)
    waste = np.bincount((u.waste_block // rb) * cols + u.waste_step // b, minlength=rows * cols).reshape(rows, cols)
    size = np.minimum(np.arange(rows) * rb + rb, top) - np.arange(rows) * rb
    free = size[:, None] * (last - first + 1)[None, :] - held
    counts = np.stack([free, held - waste, waste], axis=-1)
    z = (2 - np.argmax(counts[..., ::-1], axis=-1)).astype(np.int8)  # ties: the later state
    # hover: the owner of the cell's first block at its first step (the whole cell when it is one block-step);
    # the words are formatted once per distinct (owner, state, unfilled positions), not per cell
    a, k = (np.arange(rows) * rb)[:, None], first[None, :]
    key = u.block * (n + 1) + u.first
    at = np.searchsorted(key, (a * (n + 1) + k).ravel(), side="right") - 1
    s = np.maximum(at, 0)
    owned = (at >= 0) & (u.block[s] == np.repeat(a.ravel(), cols)) & (u.last[s] >= np.tile(first, rows))
    exact = rb == 1 and b == 1
    wpos = np.zeros(z.size, dtype=np.int64)
    if exact:
        wpos[u.waste_block * cols + u.waste_step] = u.waste_positions
    combo = (np.where(owned, s, -1) * 3 + z.ravel()) * (trace.block_size + 1) + wpos
    uniq, inv = np.unique(combo, return_inverse=True)
    us, rest = np.divmod(uniq, 3 * (trace.block_size + 1))
    uz, uw = np.divmod(rest, trace.block_size + 1)
    ids = np.array([r.id for r in trace.requests], dtype=object)
    state = np.array([t(f"blocks.{x}") for x in BLOCK_STATES], dtype=object)[uz]
    words = state + np.where(us >= 0, vformat(t("blocks.owner"), id=ids[u.request[np.maximum(us, 0)]],
                                              i=u.index[np.maximum(us, 0)]), "")
    words = words + np.where(uw > 0, vformat(t("blocks.hover.waste"), w=uw, size=trace.block_size), "")
    text = words[inv].reshape(z.shape)
    note = "" if exact else t("blocks.binned", blocks=top, rows=rows, per=rb, steps=n, cols=cols, bin=b)
    y_edges = np.append(np.arange(rows) * rb, top).astype(np.float64) - 0.5
    x_edges = np.append(first, n).astype(np.float64) - 0.5
    return BlockMapData(z, y_edges, x_edges, first, last, b, rb, top, text, note, wpos.reshape(z.shape))


def blocks_at(trace: Trace, k: int) -> dict[str, int]:
    """Step k's blocks (used, free, internal waste in positions) and preemptions / recomputed tokens up to k."""
    if not trace.steps:
        return {"used": 0, "free": trace.num_blocks, "waste": 0, "preempted": 0, "recomputed": 0}
    k = clamp_step(trace, k)
    s = trace.steps[k]
    sa = trace.step_arrays()
    counts = trace.cached("preempt_totals", lambda: (np.cumsum(sa.preempted), np.cumsum(sa.recomputed_tokens)))
    return {"used": s.blocks_used, "free": s.blocks_free, "waste": s.block_waste, "preempted": int(counts[0][k]),
            "recomputed": int(counts[1][k])}


def blocks_sentence(trace: Trace, k: int) -> str:
    """The block map's words for step k."""
    return trace.kv.blocks_sentence(trace, clamp_step(trace, k), lambda: blocks_at(trace, k))


def preemption_steps(trace: Trace) -> np.ndarray:
    """Steps in which a sequence was preempted (each step once)."""
    return np.array([i for i, s in enumerate(trace.steps) if s.preempted], dtype=np.int64)
