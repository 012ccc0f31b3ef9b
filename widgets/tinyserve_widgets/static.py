"""Static matplotlib pictures of every view (for committed notebooks read on GitHub/nbviewer, where no kernel
runs and widget state is stripped). Same data functions as the live views; no pyplot state is touched.
Chinese labels draw with the CJK fallback font that tinyserve.set_language("zh-TW") gives matplotlib."""
from __future__ import annotations

import io

import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tinyserve.analysis.figures import policy_name
from tinyserve.lang import t, width
from tinyserve.trace.arrays import GRID_PHASES
from tinyserve.trace.record import Trace

from . import data as D
from .palette import HATCH, PALETTE, SERIES
from .words import workload_label

STATIC_FALLBACK = {"on": True}  # displayed TraceView/Explorer outputs also carry a PNG (GitHub shows it)
# Text size. A notebook column is about COLUMN_PX = 900 px wide; a PNG wider than that is shrunk to fit. The static
# fallbacks are drawn BOARD_IN wide and stored at FALLBACK_DPI, so they show at their drawn size there (96 px an
# inch: CSS's, where 1 pt = 4/3 px), and no word is smaller than MIN_PT = 9 pt on screen (12 px; small text is
# drawn at SMALL_PT, titles at TITLE_PT). tests/widgets/test_static_fonts.py checks every fallback.
COLUMN_PX, MIN_PT = 900, 9
SMALL_PT, TITLE_PT = 10, 11
FALLBACK_DPI = 96
BOARD_IN = COLUMN_PX / FALLBACK_DPI  # 9.375 in
_CODES = list(range(len(GRID_PHASES) + 1))
_CMAP = ListedColormap([D.COLORS[c] for c in _CODES])
_NORM = BoundaryNorm(np.arange(len(_CODES) + 1) - 0.5, len(_CODES))


class StaticFigure(Figure):
    """A matplotlib Figure that a notebook shows as a PNG without pyplot (no inline backend needed)."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)


def set_static_fallback(on: bool) -> None:
    """Turn the PNG beside displayed widgets on (default) or off (smaller notebooks)."""
    STATIC_FALLBACK["on"] = bool(on)


def png_bytes(fig: Figure, dpi: int = FALLBACK_DPI) -> bytes:
    """The figure as PNG bytes (at FALLBACK_DPI: a BOARD_IN-wide figure fills a notebook column at its size)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


_NO_START = set("，。、；：！？）」』》〉,.;:!?)]}%")  # never at the start of a line
_BREAK_AFTER = set("，。、；：！？）」』》〉")  # a good place to end a line (English: at its spaces)


def _cjk(ch: str) -> bool:
    return width(ch) == 2


def _wrap(text: str, columns: int = 110) -> str:
    """Lines of at most `columns` display columns (a CJK character takes two), broken where a reader breaks
    them: after punctuation in the line's second half, else at a space in its last ~40%, else between two
    characters (never inside a Latin word or a number), and never before closing punctuation."""
    lines = []
    for para in text.split("\n"):
        rest = para
        while width(rest) > columns:
            cut, w = 0, 0
            while cut < len(rest) and w + width(rest[cut]) <= columns:
                w += width(rest[cut])
                cut += 1
            best = None
            for share, good in ((0.5, lambda j: rest[j - 1] in _BREAK_AFTER),  # after punctuation, else at a space
                                (0.6, lambda j: rest[j - 1] == " " or (j < len(rest) and rest[j] == " "))):
                for j in range(cut, 0, -1):  # the last such place in the line's last part
                    if width(rest[:j]) < share * columns:
                        break
                    if good(j):
                        best = j
                        break
                if best is not None:
                    break
            if best is None:  # between two characters: CJK on either side, never inside a word
                j = cut
                while j > 0 and not (_cjk(rest[j - 1]) or _cjk(rest[j]) or rest[j] == " "):
                    j -= 1
                best = j or cut
            while best < len(rest) and rest[best] in _NO_START:  # a closing mark stays on its line
                best += 1
            lines.append(rest[:best].rstrip())
            rest = rest[best:].lstrip()
        lines.append(rest)
    return "\n".join(lines)


def _columns(ax, pt: float = SMALL_PT, share: float = 1.0) -> int:
    """How many display columns of pt-point text fit under an axes (a column is half an em: a CJK character
    takes two); share: of the axes' width (a legend beside takes the rest). Measured before the layout
    shrinks the axes, hence the margin."""
    inches = ax.bbox.width / ax.figure.dpi * share
    return max(20, int(0.85 * inches * 72 / (pt / 2)))


def _whole_slots(ax, n: int) -> None:
    """Slot ticks at whole slots only (never at -0.5 or 1.5), at most ~8 of them."""
    step = max(1, -(-n // 8))
    ax.set_yticks(range(0, n, step))


def plot_timeline(ax, trace: Trace, k: int | None = None, x: str = "steps", max_columns: int = D.MAX_COLUMNS):
    """Slots x steps coloured by phase, the cursor's column outlined."""
    d = D.timeline_data(trace, x, max_columns)
    if d.z.size:
        ax.pcolormesh(d.x_edges, np.arange(trace.num_slots + 1) - 0.5, d.z, cmap=_CMAP, norm=_NORM)
    ax.set_ylim(trace.num_slots - 0.5, -0.5)
    _whole_slots(ax, trace.num_slots)
    ax.set_xlabel(d.x_label)
    ax.set_ylabel(t("axis.slot"))
    ax.set_title(t("title.timeline", policy=policy_name(trace.policy), workload=workload_label(trace)),
                 fontsize=TITLE_PT, pad=SMALL_PT * 2.2)
    if k is not None and trace.steps:
        x0, x1 = D.cursor_span(d, D.clamp_step(trace, k))
        ax.axvspan(x0, x1, color="k", alpha=0.15, lw=1.5)
    from matplotlib.patches import Patch

    present = {int(c) for c in np.unique(d.z)} if d.z.size else set()
    handles = [Patch(color=D.COLORS[c], label=D.phase_name(c)) for c in _CODES[:-1] if c in present]
    if handles:  # a legend names only what is drawn, between the title and the axes
        ax.legend(handles=handles, fontsize=SMALL_PT, ncol=len(handles), loc="lower right", bbox_to_anchor=(1, 1),
                  borderaxespad=0.2, frameon=False, handlelength=1.2, columnspacing=1.0)
    if d.note or not trace.steps:
        ax.set_xlabel(d.x_label + "\n" + _wrap(d.note or t("note.no_steps"), _columns(ax)), fontsize=SMALL_PT)


def plot_waste(ax, trace: Trace, k: int):
    """Running totals of slot-steps up to step k, with the sentence."""
    from .views import WASTE_COLORS, WASTE_KEYS

    w = D.waste_at(trace, k)
    left = 0.0
    for key in WASTE_KEYS:
        if w[key] <= 0:  # nothing of this kind yet: neither a bar nor a legend entry
            continue
        ax.barh([0], [w[key]], left=left, color=WASTE_COLORS[key], hatch=HATCH.get(key, ""), edgecolor="white",
                lw=0, label=t(f"waste.{key}"))
        left += w[key]
    ax.set_xlim(0, trace.num_slots * max(1, len(trace.steps)))
    ax.set_yticks([])
    # the sentence goes in the x label so the constrained layout makes room for it
    ax.set_xlabel(t("axis.slot_steps") + "\n" + _wrap(D.waste_sentence(trace, k) if trace.steps
                                                      else t("note.no_steps"), _columns(ax, share=1.1)),
                  fontsize=SMALL_PT)
    ax.set_title(t("title.waste", k=D.clamp_step(trace, k)), fontsize=TITLE_PT)
    _legend_beside(ax)


def _legend_beside(ax, **kw) -> None:
    """A legend right of the axes, never over the data (a patch drawn on a bar of its own colour vanishes)."""
    if ax.get_legend_handles_labels()[0]:  # a trace without steps draws nothing to name
        ax.legend(fontsize=SMALL_PT, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, frameon=False,
                  **kw)


def plot_composition(ax_series, ax_gaps, trace: Trace, k: int):
    """Tokens per step by kind with the budget line, and the inter-token gaps / newcomer TTFT, cursor at k."""
    from .views import COMP_SERIES

    sa = trace.step_arrays()
    steps = np.arange(len(trace.steps))
    drawn = [(n, getattr(sa, attr), c) for n, attr, c in COMP_SERIES if np.any(getattr(sa, attr) > 0)]
    if len(steps) and drawn:  # only the kinds this run has: a legend names only what is drawn
        ax_series.stackplot(steps, *[y for _, y, _ in drawn], colors=[c for _, _, c in drawn], step="post",
                            labels=[t(f"comp.{n}") for n, _, _ in drawn])
    b = D.budget(trace)
    if b is not None:
        ax_series.axhline(b, color="k", ls="--", lw=1, label=t("note.budget", budget=b))
    ax_series.axvline(D.clamp_step(trace, k), color="k", lw=1)
    ax_series.set_ylabel(t("axis.tokens"))
    ax_series.set_title(t("title.composition"), fontsize=TITLE_PT)
    _legend_beside(ax_series)
    ax_gaps.step(steps, sa.max_itl_s * 1e3, where="post", color="#333", lw=1, label=t("comp.itl"))
    has = ~np.isnan(sa.max_ttft_s)
    ax_gaps.plot(steps[has], sa.max_ttft_s[has] * 1e3, "D", color=PALETTE["newcomer"], ms=4, label=t("comp.ttft"))
    ax_gaps.axvline(D.clamp_step(trace, k), color="k", lw=1)
    ax_gaps.set_xlabel(t("axis.step") + "\n" + _wrap(D.composition_sentence(trace, k), _columns(ax_gaps, share=1.2)),
                       fontsize=SMALL_PT)
    ax_gaps.set_ylabel(t("axis.gap_ms"))
    ax_gaps.set_title(t("title.gaps"), fontsize=TITLE_PT)
    _legend_beside(ax_gaps)


def plot_kv(ax, trace: Trace, k: int):
    """Reserved vs used KV per step, cursor at k."""
    res, used, unit = D.kv_series(trace)
    steps = np.arange(len(res))
    held = trace.kv.held_word()
    ax.fill_between(steps, res, step="post", color=PALETTE["kv_reserved"], label=held)
    ax.fill_between(steps, used, step="post", color=PALETTE["kv_used"], label=t("kv.used"))
    pre = D.preemption_steps(trace)
    if len(pre):
        ax.plot(pre, np.zeros(len(pre)), "x", color=PALETTE["wasted"], ms=7, mew=2, clip_on=False,
                label=t("kv.preempted"))
    if len(res):
        ax.axvline(D.clamp_step(trace, k), color="k", lw=1)
    ax.set_xlabel(t("axis.step") + "\n" + _wrap(D.kv_sentence(trace, k), _columns(ax, share=1.1)), fontsize=SMALL_PT)
    ax.set_ylabel(t("axis.kv", unit=unit))
    ax.set_title(trace.kv.kv_title(), fontsize=TITLE_PT)
    _legend_beside(ax)


_BCMAP = ListedColormap([D.BLOCK_COLORS[c] for c in range(len(D.BLOCK_STATES))])
_BNORM = BoundaryNorm(np.arange(len(D.BLOCK_STATES) + 1) - 0.5, len(D.BLOCK_STATES))


def plot_blocks(ax, trace: Trace, k: int | None = None, max_rows: int = D.MAX_ROWS,
                max_columns: int = D.MAX_BLOCK_COLUMNS):
    """The paged pool's blocks x steps (free / held / internal waste), the cursor's column outlined, the sentence."""
    from matplotlib.patches import Patch

    d = D.block_map(trace, max_rows, max_columns)
    if d.z.size:
        ax.pcolormesh(d.x_edges, d.y_edges, d.z, cmap=_BCMAP, norm=_BNORM)
        ax.set_ylim(d.y_edges[0], d.y_edges[-1])
        if k is not None:
            ax.axvspan(*D.cursor_span(d, D.clamp_step(trace, k)), color="k", alpha=0.15, lw=1.5)
    ax.set_ylabel(t("axis.block"))
    ax.set_title(trace.kv.blocks_title(), fontsize=TITLE_PT, pad=SMALL_PT * 2.2)
    present = {int(c) for c in np.unique(d.z)} if d.z.size else set()
    handles = [Patch(color=D.BLOCK_COLORS[c], label=t(f"blocks.{name}")) for c, name in enumerate(D.BLOCK_STATES)
               if c in present]
    if handles:  # only the states drawn
        ax.legend(handles=handles, fontsize=SMALL_PT, ncol=len(handles), loc="lower right", bbox_to_anchor=(1, 1),
                  borderaxespad=0.2, frameon=False)
    notes = trace.kv.block_notes(d.note, d.top)
    words = D.blocks_sentence(trace, 0 if k is None else k)
    ax.set_xlabel("\n".join([t("axis.step")] + [_wrap(x, _columns(ax)) for x in notes + [words]]),
                  fontsize=SMALL_PT)


def plot_latency(ax_ttft, ax_e2e, traces: Trace | dict[str, Trace]):
    """Empirical CDFs of TTFT and end-to-end latency, p50/p99 marked, one line per trace."""
    traces = traces if isinstance(traces, dict) else {policy_name(traces.policy): traces}
    for i, (label, tr) in enumerate(traces.items()):
        lat, marked = D.latency_ms(tr), D.percentiles(tr)
        for ax, key in ((ax_ttft, "ttft"), (ax_e2e, "e2e")):
            v = lat[key]
            if not len(v):
                continue
            line, = ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=label,
                            color=SERIES[i % len(SERIES)])
            p50, p99 = marked[key]
            ax.plot([p50, p99], [0.5, 0.99], "o", color=line.get_color(), ms=4)
            ax.annotate(f"{t('lat.p50')} {p50:.0f}", (p50, 0.5), fontsize=SMALL_PT, xytext=(4, -10),
                        textcoords="offset points")
            ax.annotate(f"{t('lat.p99')} {p99:.0f}", (p99, 0.99), fontsize=SMALL_PT, xytext=(4, -10),
                        textcoords="offset points")
    for ax, key in ((ax_ttft, "ttft"), (ax_e2e, "e2e")):
        ax.set_title(t(f"lat.{key}"), fontsize=TITLE_PT)
        ax.set_xlabel(t("axis.latency_ms"))
        ax.set_ylim(0, 1.02)
    ax_ttft.set_ylabel(t("axis.fraction"))
    if ax_ttft.get_legend_handles_labels()[0]:
        ax_ttft.legend(fontsize=SMALL_PT, loc="lower right", frameon=False)


def plot_requests(ax, trace: Trace, k: int):
    """One row per request: waiting, prefill, decode, slot held after finishing; the cursor's time."""
    b = D.request_bars(trace)
    y = np.arange(len(b["ids"]))
    for key in ("waiting", "prefill", "decode", "wasted"):
        a, z = b[key]
        ok = ~(np.isnan(a) | np.isnan(z))
        if ok.any():  # a legend entry only for what is drawn
            ax.barh(y[ok], (z - a)[ok], left=a[ok], color=D.STATE_COLORS[key], label=t(f"req.{key}"), height=0.8)
    ax.set_yticks(y[::max(1, -(-len(y) // 14))])  # at most ~14 ids: they stay SMALL_PT
    ax.set_yticklabels([b["ids"][i] for i in ax.get_yticks().astype(int)], fontsize=SMALL_PT)
    ax.set_ylim(len(y) - 0.5, -0.5)
    sa = trace.step_arrays()
    if len(sa.end_s):
        ax.axvline(sa.end_s[D.clamp_step(trace, k)], color="k", lw=1)
    text = D.state_sentence(trace, k)
    if b["total"] > len(b["ids"]):
        text += " (" + t("note.requests_cut", shown=len(b["ids"]), total=b["total"]) + ")"
    ax.set_xlabel(D.time_label(trace) + "\n" + _wrap(text, _columns(ax)), fontsize=SMALL_PT)
    ax.set_title(t("title.requests"), fontsize=TITLE_PT)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=SMALL_PT, loc="lower right", frameon=False)


def board_figure(trace: Trace, k: int = 0, views: tuple[str, ...] = ("timeline", "waste", "composition", "kv",
                 "requests", "latency"), x: str = "steps", compare: dict[str, Trace] | None = None) -> Figure:
    """A static picture of the chosen views at step k (the same layout as TraceView)."""
    k = D.clamp_step(trace, k)
    rows = []
    if "timeline" in views:
        rows.append(("timeline", 3.0))
    if "blocks" in views:
        rows.append(("blocks", 3.0))
    if "waste" in views or "kv" in views:
        rows.append(("waste_kv", 2.4))
    if "composition" in views:
        rows.append(("composition", 5.2))
    if "requests" in views or "latency" in views:
        rows.append(("requests_latency", 3.6))
    fig = StaticFigure(figsize=(BOARD_IN, sum(h for _, h in rows) + 0.8 * len(rows)), layout="constrained")
    sub = fig.subfigures(len(rows), 1, height_ratios=[h for _, h in rows]) if len(rows) > 1 else [fig]
    for (name, _), sf in zip(rows, np.atleast_1d(sub)):
        if name == "timeline":
            plot_timeline(sf.subplots(), trace, k, x)
        elif name == "blocks":
            plot_blocks(sf.subplots(), trace, k)
        elif name == "waste_kv":
            both = [v for v in ("waste", "kv") if v in views]
            axes = np.atleast_1d(sf.subplots(1, len(both)))
            for v, ax in zip(both, axes):
                (plot_waste if v == "waste" else plot_kv)(ax, trace, k)
        elif name == "composition":
            a1, a2 = sf.subplots(2, 1, sharex=True)
            plot_composition(a1, a2, trace, k)
        else:
            cols = (["requests"] if "requests" in views else []) + (["ttft", "e2e"] if "latency" in views else [])
            axes = np.atleast_1d(sf.subplots(1, len(cols), width_ratios=[2 if c == "requests" else 1 for c in cols]))
            if "requests" in views:
                plot_requests(axes[0], trace, k)
            if "latency" in views:
                plot_latency(axes[-2], axes[-1], compare or {policy_name(trace.policy): trace})
    return fig



def plot_slabs_and_pages(ax_slabs, ax_blocks, trace: Trace, k: int, slots: int = 4, block: int = 256,
                         pool: int = 64, seed: int = 0):
    """The first `slots` busy slots at step k laid out two ways: one slab per slot (all reserved), and blocks of
    `block` positions handed out from a shared pool of `pool` blocks, with each sequence's page table."""
    g = trace.phase_grid()
    k = D.clamp_step(trace, k)
    held = {s: int(g.start[s, k] + g.tokens[s, k]) for s in range(trace.num_slots) if g.request[s, k] >= 0}
    held = dict(list(held.items())[:slots])
    colors = [PALETTE[c] for c in ("kv_used", "accent", "useful", "other")]
    slab = trace.slab_tokens
    for row, (s, n) in enumerate(held.items()):
        ax_slabs.add_patch(Rectangle((0, row), slab, 0.7, color=PALETTE["kv_reserved"], alpha=0.45, lw=0))
        ax_slabs.add_patch(Rectangle((0, row), n, 0.7, color=colors[row % len(colors)], lw=0))
        ax_slabs.text(slab * 1.02, row + 0.35, t("pages.slab_row", slot=s, n=n, slab=slab), va="center",
                      fontsize=SMALL_PT)
    ax_slabs.set(xlim=(0, slab * 1.6), ylim=(len(held), -0.3), yticks=[], xlabel=t("pages.positions"))
    ax_slabs.set_xticks([x for x in ax_slabs.get_xticks() if 0 <= x <= slab])  # positions exist up to the slab
    ax_slabs.set_title(t("pages.slabs"), fontsize=TITLE_PT)
    free = iter(np.random.default_rng(seed).permutation(pool))  # any free block will do: that is the point
    owner = np.full(pool, -1)
    table = {}
    for row, (s, n) in enumerate(held.items()):
        table[s] = [int(next(free)) for _ in range(-(-n // block))]
        owner[table[s]] = row
    cols = 16
    for b in range(pool):
        o = owner[b]
        ax_blocks.add_patch(Rectangle((b % cols, b // cols), 0.9, 0.9, lw=0,
                                      color=colors[o % len(colors)] if o >= 0 else "#eeeeee"))
        if o >= 0:
            ax_blocks.text(b % cols + 0.45, b // cols + 0.5, str(list(held)[o]), ha="center", va="center",
                           fontsize=MIN_PT, color="white")
    rows = -(-pool // cols)
    line = 0.6  # one page-table line, in block rows
    top = -line * len(table) - 0.3
    for row, (s, blocks) in enumerate(table.items()):  # inside the frame, a little in from its left edge
        shown = ", ".join(map(str, blocks[:10])) + (", …" if len(blocks) > 10 else "")  # one line in the frame
        ax_blocks.text(0.15, top + line * row, t("pages.table_row", slot=s, blocks=shown),
                       fontsize=SMALL_PT, va="top", color=colors[row % len(colors)])
    ax_blocks.set(xlim=(-0.1, cols), ylim=(rows, top - 0.2), xticks=[], yticks=[])
    ax_blocks.set_title(t("pages.blocks", block=block), fontsize=TITLE_PT)
    return held, table
