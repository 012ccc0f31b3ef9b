"""Figure data of a DeploymentTrace, plain numpy (the plotly view and the matplotlib picture both draw from here):
every instance's slot timeline on one time axis, stacked as row blocks, the K/V transfers between them, and what
each instance does at a moment. Nothing is scheduled or recomputed: the columns are data.timeline_data's (from
Trace.phase_grid() and step_arrays()), the times are the steps' and the transfers' own."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyserve.deploy import DeploymentTrace
from tinyserve.lang import t
from tinyserve.trace.arrays import DECODE, GRID_PHASES, IDLE, PADDING, PREFILL, WASTED
from tinyserve.trace.record import Trace

from . import data as D

MAX_CELLS = 40_000  # slot x column cells of one figure (2 instances x 32 slots x 600 columns; more: wider bins)
MIN_COLUMNS = 100
MIN_SHARE = 0.5  # a block is at least this share of the tallest one's height (its rows drawn taller)
GAP_ROWS = 0.4  # space between two instances' row blocks, as a share of the tallest block (the transfers cross it)
HOVER_FIELDS = D.BIN_FIELDS + ("slot",)  # each cell's numbers: steps a..b, phase counts (data.hover.bin), its slot
_CODE = {"prefill": PREFILL, "padding": PADDING, "decode": DECODE, "wasted": WASTED, "idle": IDLE}


def instance_labels(dt: DeploymentTrace) -> list[str]:
    """'prefill 0', 'decode 0', 'replica 1': each instance by its role and its number within that role."""
    seen: dict[str, int] = {}
    out = []
    for role in dt.roles:
        out.append(t("widgets.deploy.instance", role=t(f"widgets.deploy.role.{role}"), i=seen.get(role, 0)))
        seen[role] = seen.get(role, 0) + 1
    return out


@dataclass
class Block:
    """One instance's row block: z[slot, column] phase codes (NaN: a stretch with no step), column edges in
    seconds, the steps each column holds (-1: a gap), each cell's hover numbers (HOVER_FIELDS) and where the block
    sits on the y axis (slot s spans y0 + s .. y0 + s + 1)."""

    label: str
    role: str
    z: np.ndarray
    x_edges: np.ndarray
    first_step: np.ndarray
    last_step: np.ndarray
    hover: np.ndarray
    y0: float
    slots: int
    note: str
    num_slots: int = 0  # the instance's slots; the block draws the first `slots` of them (the others stayed idle)
    row: float = 1.0  # a slot's height on the y axis

    @property
    def y_edges(self) -> np.ndarray:
        """Where each slot's row starts and the last one ends on the y axis."""
        return self.y0 + self.row * np.arange(self.slots + 1, dtype=np.float64)

    @property
    def y1(self) -> float:
        return self.y0 + self.slots * self.row

    @property
    def centre(self) -> float:
        return self.y0 + self.slots * self.row / 2


def max_columns(dt: DeploymentTrace) -> int:
    """Columns per instance: MAX_CELLS shared by every slot of the deployment (at most data.MAX_COLUMNS)."""
    slots = sum(max(1, tr.num_slots) for tr in dt.instances)
    return int(min(D.MAX_COLUMNS, max(MIN_COLUMNS, MAX_CELLS // max(1, slots))))


def _columns(tr: Trace, cols: int) -> tuple[np.ndarray, ...]:
    """One instance's columns on the time axis: timeline_data's step columns (bins past `cols` steps), their hover
    numbers, and a NaN column wherever no step runs (an idle stretch between two columns)."""
    d = D.timeline_data(tr, "steps", cols, words=False)
    slots, n = tr.num_slots, len(d.first_step)
    if d.hover is None:  # one step per column: its phase counted once
        z = d.z.astype(np.int64)
        counts = [(z == _CODE[f]).astype(np.int64) for f in D.BIN_FIELDS[2:]]
        hover = np.stack([np.broadcast_to(d.first_step, z.shape), np.broadcast_to(d.last_step, z.shape)] + counts,
                         axis=-1)
    else:
        hover = d.hover
    hover = np.concatenate([hover, np.broadcast_to(np.arange(slots)[:, None, None], (slots, n, 1))], axis=-1)
    sa = tr.step_arrays()
    left, right = sa.start_s[d.first_step], sa.end_s[d.last_step]
    z = d.z.astype(np.float32)
    first, last = d.first_step, d.last_step
    gaps = np.flatnonzero(left[1:] > right[:-1] + 1e-12) + 1
    if len(gaps):
        z = np.insert(z, gaps, np.nan, axis=1)
        hover = np.insert(hover, gaps, 0, axis=1)
        first, last = np.insert(first, gaps, -1), np.insert(last, gaps, -1)
        edges = np.sort(np.concatenate([left, right[-1:], right[gaps - 1]]))
    else:
        edges = np.append(left, right[-1])
    small = hover.max(initial=0) < 2**15  # int16 halves what a redraw sends
    return z, edges, first, last, hover.astype(np.int16 if small else np.int32), d.note


def blocks(dt: DeploymentTrace) -> list[Block]:
    """Every instance's row block, the first at the top (y grows downwards), GAP_ROWS of the tallest between.
    A block draws the slots up to the last one its instance used (used_slots): a prefill instance that holds a
    few prompts at a time would otherwise be 32 rows of idle with its steps as one-row slivers; and its rows are
    drawn taller where the block would be under MIN_SHARE of the tallest one's height."""
    cols = max_columns(dt)
    out = []
    for label, role, tr in zip(instance_labels(dt), dt.roles, dt.instances):
        if tr.steps:
            z, edges, first, last, hover, note = _columns(tr, cols)
        else:
            z, edges = np.zeros((tr.num_slots, 0), np.float32), np.zeros(1)
            first = last = np.zeros(0, np.int64)
            hover, note = np.zeros((tr.num_slots, 0, len(HOVER_FIELDS)), np.int16), ""
        rows = used_slots(tr)
        out.append(Block(label, role, z[:rows], edges, first, last, hover[:rows], 0.0, rows, note, tr.num_slots))
    tallest = max((b.slots for b in out), default=1)
    gap, y = GAP_ROWS * tallest, 0.0
    for b in out:
        b.y0, b.row = y, max(1.0, MIN_SHARE * tallest / b.slots)
        y = b.y1 + gap
    return out


def used_slots(tr: Trace) -> int:
    """1 + the last slot some step of the instance used (every step, not the drawn columns: a bin of several
    steps may draw a briefly used slot idle); at least 1."""
    grid = tr.phase_grid().phase if tr.steps else np.zeros((0, 0))
    busy = np.flatnonzero((grid != IDLE).any(axis=1)) if grid.size else np.zeros(0, np.int64)
    return int(busy[-1]) + 1 if busy.size else 1


def time_span(dt: DeploymentTrace) -> tuple[float, float]:
    """From the first arrival to the last step's end or transfer's landing, over every instance."""
    ends = [float(tr.step_arrays().end_s[-1]) for tr in dt.instances if tr.steps]
    ends += [x.end_s for x in dt.transfers]
    starts = [r.arrival_s for r in dt.requests]
    t0 = min(starts, default=0.0)
    return t0, max(ends, default=t0)


POINTS = 5  # points a transfer takes in transfer_paths (a NaN break last)
LANDING = 3  # the index of its landing point among them (the arrowhead)


def transfer_paths(dt: DeploymentTrace, bl: list[Block]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each transfer as 4 points and a break: along the prefill block's lower edge from ready (the first token)
    to start (the link free), through the middle of the gap between the blocks (a point to hover there: plotly
    names a line's points, not its segments) to the decode block's upper edge at end (landed). x, y (NaN
    breaks) and the index of the transfer at each point (-1 at a break)."""
    n = len(dt.transfers)
    x = np.full((n, POINTS), np.nan)
    y = np.full((n, POINTS), np.nan)
    for i, tr in enumerate(dt.transfers):
        ys, yd = bl[tr.src].y1, bl[tr.dst].y0
        x[i, :4] = tr.ready_s, tr.start_s, (tr.start_s + tr.end_s) / 2, tr.end_s
        y[i, :4] = ys, ys, (ys + yd) / 2, yd
    which = np.repeat(np.arange(n), POINTS).reshape(n, POINTS)
    which[:, -1] = -1
    return x.ravel(), y.ravel(), which.ravel()


def transfer_texts(dt: DeploymentTrace) -> list[str]:
    """The hover words of each transfer: which request, how many bytes, how long, from where to where."""
    labels = instance_labels(dt)
    return [t("widgets.deploy.hover.transfer", request=x.request_id, mb=x.bytes / 1e6, link=x.link,
              ms=(x.end_s - x.start_s) * 1e3, wait=(x.start_s - x.ready_s) * 1e3, src=labels[x.src],
              dst=labels[x.dst]) for x in dt.transfers]


def step_at(tr: Trace, when: float) -> int | None:
    """The step running at time `when` on one instance (start_s <= when < end_s), None when it is idle."""
    if not tr.steps:
        return None
    sa = tr.step_arrays()
    k = int(np.searchsorted(sa.start_s, when, side="right")) - 1
    return k if k >= 0 and when < sa.end_s[k] else None


def moment(dt: DeploymentTrace, when: float) -> dict:
    """What the deployment does at time `when`: per instance its step (or None) and that step's [start, end),
    prefill and decode tokens; transfers on the wire and waiting for their link."""
    insts = []
    for tr in dt.instances:
        k = step_at(tr, when)
        if k is None:
            insts.append(None)
            continue
        sa = tr.step_arrays()
        insts.append({"step": k, "start_s": float(sa.start_s[k]), "end_s": float(sa.end_s[k]),
                      "prefill": int(sa.prefill_tokens[k]), "decode": int(sa.decode_tokens[k])})
    wire = sum(x.start_s <= when < x.end_s for x in dt.transfers)
    queued = sum(x.ready_s <= when < x.start_s for x in dt.transfers)
    return {"time": when, "instances": insts, "on_wire": wire, "queued": queued}


def moment_sentence(dt: DeploymentTrace, when: float) -> str:
    """The cursor's words: each instance's step at that moment (or idle), the transfers under way."""
    m = moment(dt, when)
    parts = []
    for label, s in zip(instance_labels(dt), m["instances"]):
        parts.append(t("widgets.deploy.cursor.idle", instance=label) if s is None else
                     t("widgets.deploy.cursor.step", instance=label, k=s["step"], prefill=s["prefill"],
                       decode=s["decode"]))
    head = t("widgets.deploy.cursor.at", time=when, instances=t("widgets.join.list").join(parts))
    if dt.kind != "disaggregated":
        return head
    return t("widgets.join.sentences", a=head, b=t("widgets.deploy.cursor.transfers", wire=m["on_wire"],
                                                   queued=m["queued"]))


def phases_present(bl: list[Block]) -> set[int]:
    """The phase codes some block draws (a legend names only what is drawn)."""
    out: set[int] = set()
    for b in bl:
        if b.z.size:
            out |= {int(c) for c in np.unique(b.z[~np.isnan(b.z)])}
    return out & set(range(len(GRID_PHASES)))
