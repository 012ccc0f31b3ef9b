"""A deployment on one time axis: every instance's slot timeline as a row block, one above the other (its steps
drawn where they ran, in seconds of the modeled clock), the K/V transfers from prefill to decode instances drawn
between the blocks, and a cursor in time marking the same moment on every instance. The axis opens on a window
of WINDOW_S seconds around the cursor, where each prefill step and each transfer stands apart (a whole run of 200
requests is ~100 s: its steps would be slivers and its arrows one fringe); under the axis, an overview of the whole
run with the window on it, to drag. The cursor carries the window: moved out of it, the window follows.

    dt = run_deployment(Engine(), "chapter-7.3-mixed", RunConfig("chunked", dry_run=True), DeploymentConfig(...))
    tw.DeploymentView(dt, time=12.0)      # display it (a cell's last line); .static() is the matplotlib picture
"""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

from tinyserve.analysis.figures import policy_name
from tinyserve.deploy import DeploymentTrace
from tinyserve.lang import t

from . import data as D
from . import deploy_data as DD
from . import views as V
from .palette import PALETTE
from .words import workload_label

CODES = V.CODES[:-1]  # the phases a block draws (a stretch with no step is left blank)
TRANSFER_COLOR = PALETTE["accent"]
PX_PER_INSTANCE, PX_FRAME = 90, 180  # figure height: a block each, plus title, legend and axis
WIDTH_PX = 810  # board.BOARD_WIDTH_PX (not imported: board imports the views)
TOP_PX, TITLE_COLUMN_PX = 70, 7.5  # the top margin for a one-line title; a display column of the 13 px title
WINDOW_S = 10.0  # seconds the axis opens on, around the cursor (None: the whole run)
OVERVIEW = 0.22  # the overview's height under the axis, a share of the panel's (plotly's rangeslider thickness)
OVERVIEW_PX = 70  # added to the figure's height for it
MARGIN_L, MARGIN_R = 110, 20
STEP_GAP_PX = 4  # a block whose columns are this wide on screen draws a 1-px gap between them: each step apart


class TimeCursor:
    """A Play button and a time slider (seconds); observers get the time."""

    def __init__(self, end: float, value: float = 0.0, frames: int = 200, interval_ms: int = 120):
        self.frames = frames
        self.slider = W.FloatSlider(value=0.0, min=0.0, max=1.0, continuous_update=True, readout_format=".3f",
                                    layout=W.Layout(width="60%"), style={"description_width": "initial"})
        self.play = W.Play(value=0, min=0, max=frames, step=1, interval=interval_ms)
        self.play.observe(lambda ch: setattr(self.slider, "value", ch["new"] * self.slider.max / self.frames),
                          names="value")
        self.set_end(end)
        self.value = value
        self.widget = W.HBox([self.play, self.slider])
        self.relabel()
        V.follow_language(self)

    def relabel(self) -> None:
        """Its words in the current language."""
        self.slider.description, self.play.description = t("widgets.deploy.cursor.time"), t("cursor.play")

    def set_end(self, end: float) -> None:
        """Span 0..end seconds (keeping the value where it still fits)."""
        end = max(float(end), 1e-3)
        if self.slider.value > end:
            self.slider.value = end
        self.slider.max = end
        self.slider.step = end / 1000

    @property
    def value(self) -> float:
        return self.slider.value

    @value.setter
    def value(self, when: float) -> None:
        self.slider.value = max(0.0, min(float(when), self.slider.max))

    def observe(self, fn) -> None:
        """Call fn(time) whenever the time changes."""
        self.slider.observe(lambda ch: fn(ch["new"]), names="value")


class DeploymentView:
    """Every instance's slot timeline on one time axis, the transfers drawn, one cursor in time. Display it."""

    def __init__(self, dt: DeploymentTrace, time: float | None = None, cursor: TimeCursor | None = None,
                 width: int = WIDTH_PX, window: float | None = WINDOW_S):
        self.window = window
        self.shown: tuple[float, float] | None = None  # the axis's range now (the browser's, after a drag)
        self.fig = V.new_figure()
        self.fig.update_layout(width=width, font=V.FONT, margin=dict(l=MARGIN_L, r=MARGIN_R, t=TOP_PX, b=95),
                               legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0,
                                           font=dict(size=10), bgcolor="rgba(255,255,255,0)"))
        for c in CODES:  # legend entries of the phases (their point is given in _draw)
            self.fig.add_trace(go.Scatter(mode="markers", hoverinfo="skip",
                                          marker=dict(symbol="square", color=D.COLORS[c],
                                                      line=dict(width=0.5, color="#888"))))
        self.fig.add_trace(go.Scatter(x=[], y=[], mode="lines+markers", hovertemplate="%{text}<extra></extra>",
                                      hoverinfo="text",  # the words alone (plotly.js added the point's x, y)
                                      line=dict(color=TRANSFER_COLOR, width=1), opacity=0.75,
                                      marker=dict(color=TRANSFER_COLOR, symbol="triangle-down")))
        self.n_fixed = len(self.fig.data)  # then one heatmap per instance (added as a deployment needs them)
        self.fig.add_shape(type="line", xref="x", yref="y domain", x0=0, x1=0, y0=0, y1=1,
                           line=dict(color="#222", width=1.5))  # the cursor; then a step frame per instance
        self.fig.add_annotation(xref="paper", yref="paper", x=0, y=1.0, yshift=34, xanchor="left", yanchor="bottom",
                                align="left", showarrow=False, text="", font=dict(size=13))  # the title
        self.fig.add_annotation(xref="paper", yref="paper", x=0, y=0, yshift=-56, xanchor="left", yanchor="top",
                                showarrow=False, align="left", text="", font=dict(size=10, color="#333"))  # the bins note,
        # under the axis title (above the panel it would run into the legend)
        self.fig.layout.yaxis.update(autorange="reversed", showgrid=False, zeroline=False, tickmode="array")
        self.fig.layout.xaxis.update(showgrid=False, zeroline=False)
        if window is not None:  # the whole run under the axis, the window on it to drag (plotly's rangeslider)
            self.fig.layout.xaxis.rangeslider.update(visible=True, thickness=OVERVIEW, bgcolor="#f4f4f4",
                                                     bordercolor="#bbb", borderwidth=1)
            self.fig.layout.margin.b += OVERVIEW_PX
            self.fig.layout.annotations[1].yshift = -56 - OVERVIEW_PX
            self.fig.layout.on_change(self._dragged, "xaxis.range")
        self.words = W.HTML()
        self.own_cursor = cursor is None
        self.cursor = TimeCursor(1.0) if cursor is None else cursor
        self.dt = dt
        self.set_trace(dt, time)
        self.cursor.observe(self.set_time)
        top = [self.cursor.widget] if self.own_cursor else []
        self.widget = W.VBox(top + [self.fig, self.words], layout=W.Layout(width="100%"))
        V.follow_language(self)

    # ---- drawing ---------------------------------------------------------------------------------------------
    def heatmap(self, i: int):
        """Instance i's heatmap."""
        return self.fig.data[self.n_fixed + i]

    def frame(self, i: int):
        """The shape outlining instance i's step at the cursor."""
        return self.fig.layout.shapes[1 + i]

    def _grow(self, n: int) -> None:
        """Heatmaps and step frames for n instances (added outside batch mode: plotly drops a new shape's
        properties inside one)."""
        while len(self.fig.data) - self.n_fixed < n:
            self.fig.add_trace(go.Heatmap(z=[[0]], zmin=-0.5, zmax=len(V.CODES) - 0.5, colorscale=V.COLORSCALE,
                                          showscale=False, hoverongaps=False, name=""))
        while len(self.fig.layout.shapes) - 1 < n:
            self.fig.add_shape(type="rect", xref="x", yref="y", x0=0, x1=0, y0=0, y1=0, visible=False,
                               line=dict(color="#222", width=1.5), fillcolor="rgba(0,0,0,0.12)")

    def set_trace(self, dt: DeploymentTrace, time: float | None = None) -> None:
        """Draw another deployment (the cursor keeps its time where the new run still has it)."""
        self.dt = dt
        self.blocks = DD.blocks(dt)
        self.t0, self.t1 = DD.time_span(dt)
        self._grow(len(self.blocks))
        if self.own_cursor:
            self.cursor.set_end(self.t1)
        with V.batch(self.fig):
            self._draw()
            self._labels()
        if time is None and not hasattr(self, "time"):
            time = (self.t0 + self.t1) / 2  # first drawn: mid-run, where every instance is busy
        if time is not None:
            self.cursor.value = time
        self.shown = None  # a new run: the window goes around the cursor again
        self.set_time(self.cursor.value)

    def _draw(self) -> None:
        fig, bl = self.fig, self.blocks
        for i in range(len(fig.data) - self.n_fixed):
            h = self.heatmap(i)
            if i >= len(bl) or not bl[i].z.size:
                h.visible = False
                continue
            b = bl[i]
            h.update(z=V.arr(b.z), x=V.arr(b.x_edges), y=V.arr(b.y_edges),
                     customdata=V.arr(b.hover), visible=True)
        x, y, _ = DD.transfer_paths(self.dt, bl)
        tr = fig.data[self.n_fixed - 1]
        size = np.where(np.arange(len(x)) % DD.POINTS == DD.LANDING, 7.0, 0.0)  # an arrowhead where the K/V lands
        tr.update(x=V.arr(x), y=V.arr(y), marker_size=V.arr(size), showlegend=bool(self.dt.transfers))
        drawn = ~np.isnan(x)
        self.drawn_transfers = int(np.sum(drawn[1:] & ~drawn[:-1]) + (len(x) > 0 and drawn[0]))  # runs of points
        present = DD.phases_present(bl)
        for c in CODES:  # a legend names only what is drawn
            V.legend_entry(fig.data[c], c in present)
        bottom = bl[-1].y1 if bl else 1.0
        fig.layout.yaxis.update(range=[bottom + 0.5, -0.5], autorange=False, tickvals=[b.centre for b in bl])
        whole = run_range(self.dt)
        if self.window is None:
            fig.layout.xaxis.range = whole
        else:
            fig.layout.xaxis.rangeslider.update(range=whole, autorange=False)
        fig.layout.height = (PX_FRAME + PX_PER_INSTANCE * max(2, len(bl)) + (OVERVIEW_PX if self.window else 0)
                             + 14 * (len(notes(bl)) > 1))

    def _labels(self) -> None:
        """Every word drawn (relabelled on a language change)."""
        fig, dt, bl = self.fig, self.dt, self.blocks
        labels = DD.instance_labels(dt)
        for c in CODES:
            fig.data[c].name = D.phase_name(c)
        fig.data[self.n_fixed - 1].name = t("widgets.deploy.transfer")
        texts = DD.transfer_texts(dt)
        # each transfer's words on its points (none on its break), as one array: plotly checks a list item by item
        fig.data[self.n_fixed - 1].text = np.array([s for x in texts for s in [x] * (DD.POINTS - 1) + [""]],
                                                   dtype=object)
        counts = D.bin_template()
        for i, label in enumerate(labels):
            self.heatmap(i).hovertemplate = t("widgets.deploy.hover.cell", instance=label, slot="%{customdata[7]}",
                                              counts=counts, time="%{x:.3f}") + "<extra></extra>"
        fig.layout.yaxis.ticktext = labels
        fig.layout.xaxis.title.text = D.time_label(dt.instances[0]) if dt.instances else ""
        from .static import _wrap  # (static draws with matplotlib: imported when first needed)

        # the title wraps to the figure's width (a long one, the 繁體中文 one, was cut at the right edge)
        lines = _wrap(title(dt), int((fig.layout.width - 130) / TITLE_COLUMN_PX)).split("\n")
        fig.layout.annotations[0].text = "<br>".join(lines)
        fig.layout.margin.t = TOP_PX + 17 * (len(lines) - 1)
        fig.layout.annotations[1].text = "<br>".join(notes(bl))

    def _show(self, lo: float, hi: float) -> None:
        """Show [lo, hi] seconds on the axis; each block whose columns are wide enough there draws a gap between
        them (each step apart), the others none (a gap would hide a sliver)."""
        self.shown = (lo, hi)
        if list(self.fig.layout.xaxis.range or ()) != [lo, hi]:
            self.fig.layout.xaxis.range = [lo, hi]
        px_per_s = (self.fig.layout.width - MARGIN_L - MARGIN_R) / max(hi - lo, 1e-9)
        for i, b in enumerate(self.blocks):
            gap = int(apart(b, px_per_s))
            if self.heatmap(i).xgap != gap:
                self.heatmap(i).xgap = gap

    def _dragged(self, layout, xrange) -> None:
        """The axis's range changed (the overview dragged in the browser, or set here): the gaps follow it."""
        if xrange is None or len(xrange) != 2 or self.shown == tuple(xrange):
            return
        with V.batch(self.fig):
            self._show(float(xrange[0]), float(xrange[1]))

    def set_time(self, when: float) -> None:
        """Mark the moment `when` (seconds) on every instance: the cursor line, each instance's step then; a
        moment out of the window moves the window around it."""
        self.time = float(when)
        m = DD.moment(self.dt, self.time)
        with V.batch(self.fig):
            if self.window is not None and (self.shown is None or not self.shown[0] <= self.time <= self.shown[1]):
                self._show(*window_range(self.dt, self.time, self.window))
            line = self.fig.layout.shapes[0]
            line.x0 = line.x1 = self.time
            for i in range(len(self.fig.layout.shapes) - 1):
                s = m["instances"][i] if i < len(self.blocks) else None
                f = self.frame(i)
                f.visible = s is not None
                if s is not None:
                    f.update(x0=s["start_s"], x1=s["end_s"], y0=self.blocks[i].y0, y1=self.blocks[i].y1)
        self.words.value = DD.moment_sentence(self.dt, self.time)

    def relabel(self) -> None:
        """Every word in the current language (tinyserve.set_language calls it)."""
        with V.batch(self.fig):
            self._labels()
        self.words.value = DD.moment_sentence(self.dt, self.time)

    def static(self, time: float | None = None):
        """A matplotlib Figure of the deployment at `time` (default: the cursor's), the window shown now (or, for
        another time, the window around it) over the overview of the whole run."""
        when = self.time if time is None else time
        shown = self.shown if time is None and self.shown else (
            window_range(self.dt, when, self.window) if self.window is not None else None)
        return deployment_figure(self.dt, when, shown)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        from .static import STATIC_FALLBACK, png_bytes

        if STATIC_FALLBACK["on"] and isinstance(bundle, dict):  # GitHub/nbviewer show this picture
            bundle["image/png"] = png_bytes(self.static())
        return bundle


def run_range(dt: DeploymentTrace) -> list[float]:
    """The whole run on the time axis, with a 1% margin each side."""
    t0, t1 = DD.time_span(dt)
    pad = 0.01 * max(t1 - t0, 1e-3)
    return [t0 - pad, t1 + pad]


def window_range(dt: DeploymentTrace, when: float, window: float) -> tuple[float, float]:
    """`window` seconds around `when`, slid to lie inside the run (the whole run when it is shorter)."""
    lo, hi = run_range(dt)
    if hi - lo <= window:
        return lo, hi
    a = min(max(when - window / 2, lo), hi - window)
    return a, a + window


def step_px(b: DD.Block, px_per_s: float) -> float:
    """How wide a block's typical column (a step, or a bin of steps) is on screen at px_per_s: the median."""
    widths = np.diff(b.x_edges)[b.first_step >= 0] if b.z.size else np.zeros(0)
    return float(np.median(widths)) * px_per_s if widths.size else 0.0


def notes(bl: list[DD.Block]) -> list[str]:
    """What the blocks do not draw one to one: columns of several steps; slots that stayed idle the whole run."""
    out, join = [], t("widgets.join.list").join
    binned = [b.label for b in bl if b.note]
    if binned:
        out.append(t("widgets.deploy.note.binned", instances=join(binned)))
    idle = [t("widgets.deploy.note.idle_slots.one", instance=b.label, first=b.slots) if b.slots == b.num_slots - 1
            else t("widgets.deploy.note.idle_slots", instance=b.label, first=b.slots, last=b.num_slots - 1)
            for b in bl if b.slots < b.num_slots]
    if idle:
        out.append(t("widgets.deploy.note.idle", slots=join(idle)))
    return out


def apart(b: DD.Block, px_per_s: float) -> bool:
    """Whether a block draws a gap between its columns at px_per_s: each column one step (not binned), wide
    enough on screen that a 1-px gap leaves it visible."""
    return not b.note and step_px(b, px_per_s) >= STEP_GAP_PX


def deployment_name(dt: DeploymentTrace) -> str:
    """'2 colocated replicas' / '1 prefill + 1 decode instance over nvlink-h200', in the reader's language."""
    c = dt.config
    if dt.kind == "colocated":
        return t("widgets.deploy.name.colocated", n=c["replicas"])
    return t("widgets.deploy.name.disaggregated", p=c["prefill_instances"], d=c["decode_instances"], link=dt.link)


def title(dt: DeploymentTrace) -> str:
    """The figure's title: the deployment, the policy, the workload, the GPUs."""
    wl = workload_label(dt.instances[0]) if dt.instances else dt.workload
    return t("widgets.deploy.title", deployment=deployment_name(dt), policy=policy_name(dt.policy), workload=wl,
             gpus=dt.num_gpus)


# ---- the static picture ----------------------------------------------------------------------------------------
def plot_deployment(ax, dt: DeploymentTrace, when: float | None = None,
                    shown: tuple[float, float] | None = None) -> None:
    """Every instance's row block on one time axis, the transfers, the cursor's moment (matplotlib); shown: the
    seconds the axis shows (None: the whole run)."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Patch

    from .static import _CMAP, _NORM, SMALL_PT, TITLE_PT, _columns, _wrap

    bl = DD.blocks(dt)
    lo, hi = shown or run_range(dt)
    px_per_s = ax.get_window_extent().width / max(hi - lo, 1e-9)
    for b in bl:
        if b.z.size:
            ax.pcolormesh(b.x_edges, b.y_edges, np.ma.masked_invalid(b.z), cmap=_CMAP,
                          norm=_NORM)
            if apart(b, px_per_s):  # each step apart, as the interactive figure's gaps
                inner = b.x_edges[1:-1][(b.first_step[1:] >= 0) & (b.first_step[:-1] >= 0)]
                ax.vlines(inner, b.y0, b.y1, colors="white", linewidths=0.8)
    x, y, _ = DD.transfer_paths(dt, bl)
    k = DD.POINTS
    segs = [np.column_stack([x[i:i + k - 1], y[i:i + k - 1]]) for i in range(0, len(x), k)]
    if segs:
        ax.add_collection(LineCollection(segs, colors=TRANSFER_COLOR, linewidths=0.8, alpha=0.75))
        ax.plot(x[DD.LANDING::k], y[DD.LANDING::k], "v", color=TRANSFER_COLOR, ms=3)
    ax.set_xlim(lo, hi)
    ax.set_ylim((bl[-1].y1 if bl else 1) + 0.5, -0.5)
    ax.set_yticks([b.centre for b in bl], [b.label for b in bl])
    ax.set_xlabel(D.time_label(dt.instances[0]) if dt.instances else "")
    # a long title (the 繁體中文 one) would widen the picture past the panel: it wraps to the panel's width
    ax.set_title(_wrap(title(dt), _columns(ax, TITLE_PT)), fontsize=TITLE_PT, pad=SMALL_PT * 2.2, loc="left")
    if when is not None:
        ax.axvline(when, color="k", lw=1.2)
        for b, s in zip(bl, DD.moment(dt, when)["instances"]):
            if s is not None:
                ax.axvspan(s["start_s"], s["end_s"], (bl[-1].y1 + 0.5 - b.y1) / (bl[-1].y1 + 1),
                           (bl[-1].y1 + 0.5 - b.y0) / (bl[-1].y1 + 1), color="k", alpha=0.15)
    present = DD.phases_present(bl)
    handles = [Patch(color=D.COLORS[c], label=D.phase_name(c)) for c in CODES if c in present]
    if segs:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=TRANSFER_COLOR, marker="v", ms=4, label=t("widgets.deploy.transfer")))
    if handles:
        ax.legend(handles=handles, fontsize=SMALL_PT, ncol=len(handles), loc="lower right", bbox_to_anchor=(1, 1),
                  borderaxespad=0.2, frameon=False, handlelength=1.2, columnspacing=1.0)


def plot_overview(ax, dt: DeploymentTrace, shown: tuple[float, float]) -> None:
    """The whole run in miniature (every block, no words) with the window `shown` outlined: the interactive
    figure's overview under its axis, as the static picture draws it."""
    from .static import _CMAP, _NORM, SMALL_PT

    bl = DD.blocks(dt)
    for b in bl:
        if b.z.size:
            ax.pcolormesh(b.x_edges, b.y_edges, np.ma.masked_invalid(b.z), cmap=_CMAP,
                          norm=_NORM)
    lo, hi = run_range(dt)
    ax.set_xlim(lo, hi)
    ax.set_ylim((bl[-1].y1 if bl else 1) + 0.5, -0.5)
    ax.set_yticks([])
    ax.tick_params(labelsize=SMALL_PT - 1)
    ax.axvspan(lo, shown[0], color="#888", alpha=0.35, lw=0)  # outside the window: greyed, as plotly's slider
    ax.axvspan(shown[1], hi, color="#888", alpha=0.35, lw=0)
    ax.axvspan(*shown, fill=False, ec="#222", lw=1.2)


def deployment_figure(dt: DeploymentTrace, when: float | None = None, shown: tuple[float, float] | None = None):
    """A static picture of a deployment at time `when`, with the cursor's words under it; shown: the window the
    axis shows (None: the whole run), then drawn over an overview of the whole run."""
    from .static import BOARD_IN, SMALL_PT, StaticFigure, _columns, _wrap

    rows = 1.6 + 0.75 * max(2, len(dt.instances))
    if shown is None:
        fig = StaticFigure(figsize=(BOARD_IN, rows), layout="constrained")
        ax = fig.subplots()
    else:
        fig = StaticFigure(figsize=(BOARD_IN, rows + 0.9), layout="constrained")
        ax, over = fig.subplots(2, 1, height_ratios=[rows, 0.55])
        plot_overview(over, dt, shown)
    plot_deployment(ax, dt, when, shown)
    words = ([DD.moment_sentence(dt, when)] if when is not None else []) + notes(DD.blocks(dt))
    if words:
        ax.set_xlabel(ax.get_xlabel() + "\n" + "\n".join(_wrap(w, _columns(ax)) for w in words), fontsize=SMALL_PT)
    return fig
