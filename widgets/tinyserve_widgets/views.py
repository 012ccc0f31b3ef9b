"""Plotly views of a Trace. Each view draws into panels (subplots) of a FigureWidget: its own figure when shown
alone, or the one shared figure of a TraceView — plotly 7's FigureWidget is an anywidget that ships ~5 MB of
JavaScript with every instance, so a board is one figure, not six. Every view: set_trace(trace), set_cursor(k),
.k, .words (its sentence), .widget (what to display alone). They draw what data.py regroups from the Trace."""
from __future__ import annotations

import base64
import contextlib
import pathlib
import weakref

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
from _plotly_utils.utils import plotlyjsShortTypes, to_typed_array_spec
from plotly.subplots import make_subplots

from tinyserve import lang
from tinyserve.analysis.figures import policy_name
from tinyserve.lang import fonts, t
from tinyserve.trace.arrays import DECODE, GRID_PHASES, PADDING, PREFILL, WASTED
from tinyserve.trace.record import Trace

from . import data as D
from .palette import PALETTE, PATTERN, SERIES
from .words import workload_label

CODES = list(range(len(GRID_PHASES) + 1))  # the phases, then GAP
_N = len(CODES)


def step_scale(colors: list[str]) -> list:
    """A plotly colorscale giving integer code c (0..len-1, z from -0.5 to len-0.5) the colour colors[c]."""
    n = len(colors)
    return [x for c, col in enumerate(colors) for x in ([c / n, col], [(c + 1) / n, col])]


COLORSCALE = step_scale([D.COLORS[c] for c in CODES])
FONT = dict(size=11)
# a small template: plotly's own (applied to every new figure) costs ~0.1 s of validation per figure
TEMPLATE = {"layout": {"paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"color": "#2a3f5f"},
                       "xaxis": {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8"},
                       "yaxis": {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8"}}}
MAX_SERIES = 6  # traces a LatencyView compares at most
VIEW_WIDTH_PX = 810  # a view shown alone (autosize gave ~550 px in JupyterLab): BOARD_WIDTH_PX


# After every update from Python, plotly's widget code in the browser diffs every trace of the figure against
# what plotly.js computed from it and sends those defaults back to Python (_sendTraceDeltas, _sendLayoutDelta),
# in the same task as the redraw: ~50 ms of a board's ~150 ms cursor move, and a message the kernel then has to
# digest. Python only needs them for on_edits_completed() callbacks and to read plotly.js's computed defaults,
# which no view does. So our figures run plotly's own bundle with those two methods returning at once. The
# patch is two exact strings of the pinned plotly (requirements.txt); should a version not contain them, the
# figures are plain FigureWidgets (tests/widgets/test_widgets_lean_figure.py says which).
_DELTA_METHODS = ("_sendLayoutDelta(ne){", "_sendTraceDeltas(ne){")


def _lean_bundle(src: str | None = None) -> str | None:
    """plotly's widget bundle (or src) with the two delta senders made no-ops; None if it is not the expected one."""
    if src is None:
        import plotly

        src = (pathlib.Path(plotly.__file__).parent / "package_data" / "widgetbundle.js").read_text(encoding="utf-8")
    if any(src.count(m) != 1 for m in _DELTA_METHODS):
        return None
    for m in _DELTA_METHODS:
        src = src.replace(m, m + "return;")
    return src


_LEAN = _lean_bundle()
if _LEAN is not None:
    class BoardFigure(go.FigureWidget):
        """A FigureWidget whose browser side does not send plotly.js's computed defaults back after each update."""

        _esm = _LEAN
else:  # pragma: no cover - only with a plotly other than the pinned one
    BoardFigure = go.FigureWidget


# Figures, views and controls alive now: a language change relabels them (weakly held: a dropped view is freed)
_FIGURES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # by id(): a figure is unhashable
_LIVE: weakref.WeakSet = weakref.WeakSet()


def follow_language(obj) -> None:
    """Have obj.relabel() called whenever tinyserve.set_language changes the language."""
    _LIVE.add(obj)


def new_figure(fig=None) -> go.FigureWidget:
    """A FigureWidget with the small template and the language's font stack (optionally from a make_subplots
    figure): every figure of the widgets is made here."""
    if fig is None:
        out = BoardFigure(layout={"template": TEMPLATE})
    else:
        fig.layout.template = TEMPLATE
        out = BoardFigure(fig)
    # Traditional Chinese families named first for zh-TW, so a browser does not pick Simplified glyph shapes
    out.layout.font.family = fonts.plotly_family(lang.language())
    _FIGURES[id(out)] = out
    return out


def _relabel_all(code: str) -> None:
    """tinyserve.set_language(code) redraws every live figure's font and every live view's words."""
    for fig in list(_FIGURES.values()):
        fig.layout.font.family = fonts.plotly_family(code)
    for obj in list(_LIVE):
        obj.relabel()


lang.on_change(_relabel_all)


@contextlib.contextmanager
def batch(fig: go.FigureWidget):
    """fig.batch_update(), unless one is already open (plotly refuses to nest them): one message per change."""
    if fig._in_batch_mode:
        yield
    else:
        with fig.batch_update():
            yield


def arr(a) -> dict | list:
    """A numeric array as plotly.js's typed-array spec (base64 bytes): ipywidgets would otherwise walk every
    number of a list on its way to the browser (most of a redraw's time), and NaN (a gap) travels as bytes."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.int64:
        a = a.astype(np.int32)
    short = plotlyjsShortTypes.get(str(a.dtype))
    if short and a.size:  # what to_typed_array_spec makes of it, without its dataframe checks (~0.2 ms an array)
        spec = {"dtype": short, "bdata": base64.b64encode(a).decode("ascii")}
        if a.ndim > 1:
            spec["shape"] = str(a.shape)[1:-1]
        return spec
    spec = to_typed_array_spec(a)
    return spec if isinstance(spec, dict) else a.tolist()


# A legend entry's trace: one point at NaN (drawn nowhere, ignored by autorange), given when the view draws, not
# when the trace is made: in JupyterLab a legend trace with no point, or with the point it was made with, got no
# legend entry (its data never reached plotly.js, which then set it invisible), so the phases went unnamed
NO_POINT = arr(np.array([np.nan]))
HIDDEN_LEGEND = "legend99"  # a legend never drawn, for a trace that must have no entry (StepComposition's bar)


def legend_entry(trace, shown: bool | None = None) -> None:
    """Give a legend entry's trace its point (NO_POINT) and say whether it shows (None: as it is). The point is
    given at the first draw only: a later one would find it unchanged, and plotly sends nothing for it, yet
    validating it costs ~0.3 ms a trace on every redraw."""
    if not getattr(trace, "_pointed", False):
        trace.update(x=NO_POINT, y=NO_POINT, marker_size=11)
        trace._pointed = True  # (plotly lets a trace hold attributes named with an underscore)
    if shown is not None:
        trace.showlegend = shown


def values(v) -> np.ndarray:
    """The numbers of a figure property, whether sent as a typed-array spec or as a list (for checks)."""
    if isinstance(v, dict) and "bdata" in v:
        out = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return out.reshape([int(x) for x in v["shape"].split(",")]) if "shape" in v else out
    return np.asarray(v)


def _axis_name(ref: str) -> str:
    """'x3' -> 'xaxis3' (the layout key of an axis reference)."""
    return ref[0] + "axis" + ref[1:]


class View:
    """A view's traces, shapes and notes inside a figure, addressed by index; panels are (xref, yref) pairs."""

    n_panels = 1
    heights: tuple[float, ...] = (1.0,)
    height = 300  # of the figure when the view is shown alone

    def __init__(self, trace: Trace, k: int = 0, host: tuple | None = None):
        self.trace, self.k = trace, 0
        self.words = W.HTML()
        self._traces: list[int] = []
        self._shapes: list[int] = []
        self._notes: list[int] = []
        if host is None:
            fig = make_subplots(rows=self.n_panels, cols=1, row_heights=list(self.heights), vertical_spacing=0.14)
            self.fig = new_figure(fig)
            self.panels = [(f"x{i + 1 if i else ''}", f"y{i + 1 if i else ''}") for i in range(self.n_panels)]
            self.legend = "legend"
            self.fig.update_layout(height=self.height, width=VIEW_WIDTH_PX, font=FONT, bargap=0.15,
                                   margin=dict(l=60, r=15, t=45, b=45),
                                   legend=dict(orientation="h", yanchor="bottom", y=1.06, xanchor="right", x=1.0))
            self.widget = W.VBox([self.fig, self.words], layout=W.Layout(width="100%"))
        else:
            self.fig, self.panels, self.legend = host
            self.widget = self.words
        self._build()  # not in batch mode: plotly drops the properties of shapes and notes added in one
        self._labels()
        self.set_trace(trace, k)
        follow_language(self)

    # ---- parts of the figure ---------------------------------------------------------------------------------
    def _add(self, trace, panel: int = 0) -> None:
        trace.xaxis, trace.yaxis = self.panels[panel]
        # every trace to its view's legend, hidden entries too: one with a legendgroup left on the first legend
        # made plotly stack that legend's (another view's) entries vertically
        trace.legend = self.legend
        self.fig.add_trace(trace)
        self._traces.append(len(self.fig.data) - 1)

    def tr(self, i: int):
        """The view's i-th trace."""
        return self.fig.data[self._traces[i]]

    def _add_shape(self, panel: int, x_domain: bool = False, y_domain: bool = True, **kw) -> None:
        x, y = self.panels[panel]
        self.fig.add_shape(xref=x + (" domain" if x_domain else ""), yref=y + (" domain" if y_domain else ""), **kw)
        self._shapes.append(len(self.fig.layout.shapes) - 1)

    def shape(self, i: int):
        """The view's i-th shape (the cursor is shape 0 where there is one)."""
        return self.fig.layout.shapes[self._shapes[i]]

    def _add_note(self, panel: int, x: float, y: float, **kw) -> None:
        xr, yr = self.panels[panel]
        self.fig.add_annotation(xref=xr + " domain", yref=yr + " domain", x=x, y=y, showarrow=False, **kw)
        self._notes.append(len(self.fig.layout.annotations) - 1)

    def note(self, i: int):
        """The view's i-th annotation (0: its title)."""
        return self.fig.layout.annotations[self._notes[i]]

    def _title(self, panel: int = 0) -> None:
        # a line above the legend's one-row band (it sits on the panel's top edge, ~26 px): a long title clears it
        self._add_note(panel, 0, 1.0, text="", xanchor="left", yanchor="bottom", yshift=30, font=dict(size=13))

    def _grid(self, colors: list[str], legend: int, reverse: bool) -> None:
        """A heatmap of integer codes (colors[c] for code c), legend entries for the first `legend` codes, the
        cursor's column (shape 0), the title and a note under it for bins (note 1)."""
        self._add(go.Heatmap(z=[[0]], zmin=-0.5, zmax=len(colors) - 0.5, colorscale=step_scale(colors),
                             showscale=False, name=""))
        for c in range(legend):  # legend entries
            self._add(go.Scatter(mode="markers", hoverinfo="skip",  # its point: given by the view's draw (NO_POINT)
                                 marker=dict(symbol="square", color=colors[c],
                                             line=dict(width=0.5, color="#888"))))
        self._add_shape(0, type="rect", x0=0, x1=0, y0=0, y1=1, line=dict(color="#222", width=1.5),
                        fillcolor="rgba(0,0,0,0.12)")
        self._title()
        # the bins note sits under the title (below the axis it would run into the next panel of a board)
        self._add_note(0, 0, 1.0, text="", xanchor="left", yanchor="top", font=dict(size=10, color="#333"),
                       bgcolor="rgba(255,255,255,0.8)")
        self.yaxis().update(zeroline=False, showgrid=False, **({"autorange": "reversed"} if reverse else {}))
        self.xaxis().update(showgrid=False, zeroline=False)

    def xaxis(self, panel: int = 0):
        return self.fig.layout[_axis_name(self.panels[panel][0])]

    def yaxis(self, panel: int = 0):
        return self.fig.layout[_axis_name(self.panels[panel][1])]

    # ---- drawing ---------------------------------------------------------------------------------------------
    def _build(self) -> None: ...

    def _labels(self) -> None:
        """Set the words drawn once (legend names, titles, axis titles, hover templates) in the language."""

    def relabel(self) -> None:
        """Redraw every word in the current language (tinyserve.set_language calls it)."""
        with batch(self.fig):
            self._labels()
            self._draw()
            self._cursor(self.k)

    def set_trace(self, trace: Trace, k: int | None = None) -> None:
        """Draw another trace (keeping the cursor where it is, limited to the new trace's steps)."""
        self.trace = trace
        with batch(self.fig):
            self._draw()
            self._cursor(D.clamp_step(trace, self.k if k is None else k))

    def set_cursor(self, k: int) -> None:
        """Show the state at step k."""
        with batch(self.fig):
            self._cursor(D.clamp_step(self.trace, k))

    def _draw(self) -> None: ...

    def _cursor(self, k: int) -> None:
        self.k = k


class SlotTimeline(View):
    """Slots x steps coloured by phase; x in steps or time (modeled or wall, labelled); bins for long runs."""

    height = 340

    def __init__(self, trace: Trace, k: int = 0, x: str = "steps", max_columns: int = D.MAX_COLUMNS,
                 host: tuple | None = None):
        self.x, self.max_columns = x, max_columns
        super().__init__(trace, k, host)

    def _build(self) -> None:
        self._grid([D.COLORS[c] for c in CODES], len(CODES) - 1, reverse=True)

    def _labels(self) -> None:
        for c in CODES[:-1]:
            self.tr(1 + c).name = D.phase_name(c)
        self.yaxis().title.text = t("axis.slot")

    def set_x(self, x: str) -> None:
        """Switch the x axis between 'steps' and 'time'."""
        self.x = x
        self.set_trace(self.trace)

    def _draw(self) -> None:
        tr = self.trace
        self.data = d = D.timeline_data(tr, self.x, self.max_columns)
        h = self.tr(0)
        h.z, h.x, h.y = arr(d.z), arr(d.x_edges), arr(np.arange(tr.num_slots))
        if d.hover is None:
            h.customdata, h.text, h.hovertemplate = None, d.text, t("hover.template")
        else:  # binned: the browser formats each cell's numbers
            h.customdata, h.text = arr(d.hover), None
            h.hovertemplate = t("hover.template").replace("%{text}", D.bin_template())
        self.note(1).text = d.note or (t("note.no_steps") if not tr.steps else "")
        self.note(0).text = t("title.timeline", policy=policy_name(tr.policy), workload=workload_label(tr))
        self.xaxis().title.text = d.x_label
        # whole slots only (a 4-slot run must not get ticks at -0.5 and 1.5), at most ~8 of them
        dtick, ya = max(1, -(-tr.num_slots // 8)), self.yaxis()
        if ya.dtick != dtick:  # given when the slots change: plotly re-validates every property it is given
            ya.update(tickmode="linear", tick0=0, dtick=dtick, tickformat="d")
        present = {int(c) for c in np.unique(d.z)} if d.z.size else set()
        for c in CODES[:-1]:  # a legend names only what is drawn
            legend_entry(self.tr(1 + c), c in present)

    def _cursor(self, k: int) -> None:
        self.k = k
        x0, x1 = D.cursor_span(self.data, k)
        s = self.shape(0)
        s.x0, s.x1 = x0, x1
        sa = self.trace.step_arrays()
        self.words.value = t("cursor.label", k=k, n=len(self.trace.steps) - 1,
                             t=sa.end_s[k] if len(sa.end_s) else 0.0) if self.trace.steps else t("cursor.empty")


WASTE_KEYS = ("useful", "padding", "wasted", "idle")
WASTE_COLORS = {"useful": D.COLORS[DECODE], "padding": D.COLORS[PADDING], "wasted": D.COLORS[WASTED],
                "idle": PALETTE["idle_bar"]}


class WasteMeter(View):
    """Running totals up to the cursor: useful / padding / wasted / idle slot-steps, and a sentence."""

    height = 190

    def _build(self) -> None:
        for key in WASTE_KEYS:
            self._add(go.Bar(x=[0], y=[""], orientation="h", marker_color=WASTE_COLORS[key],
                             marker_pattern_shape=PATTERN.get(key, "")))
        self.fig.update_layout(barmode="stack")
        self._title()

    def _labels(self) -> None:
        for i, key in enumerate(WASTE_KEYS):
            word = t(f"waste.{key}")
            self.tr(i).update(name=word, hovertemplate="%{x:,.1f} " + word + "<extra></extra>")
        self.xaxis().title.text = t("axis.slot_steps")

    def _draw(self) -> None:
        self.xaxis().range = [0, self.trace.num_slots * max(1, len(self.trace.steps))]
        end = D.waste_at(self.trace, len(self.trace.steps) - 1) if self.trace.steps else {}
        for i, key in enumerate(WASTE_KEYS):  # the legend names the kinds this run has (the same at every step)
            self.tr(i).showlegend = end.get(key, 0) > 0

    def _cursor(self, k: int) -> None:
        self.k = k
        w = D.waste_at(self.trace, k)
        for i, key in enumerate(WASTE_KEYS):
            self.tr(i).x = [w[key]]
        self.note(0).text = t("title.waste", k=k)
        self.words.value = D.waste_sentence(self.trace, k) if self.trace.steps else t("note.no_steps")

    @property
    def totals(self) -> dict[str, float]:
        """What the bar shows now."""
        return {key: self.tr(i).x[0] for i, key in enumerate(WASTE_KEYS)}


COMP_SERIES = (("decode", "decode_tokens", D.COLORS[DECODE]), ("prefill", "prefill_tokens", D.COLORS[PREFILL]),
               ("padding", "padding_tokens", D.COLORS[PADDING]), ("wasted", "wasted_tokens", D.COLORS[WASTED]))


class StepComposition(View):
    """Tokens per step (decode, prefill chunks, padding, wasted) with the token budget; step k split by request;
    the longest inter-token gap of in-flight requests and newcomers' time to first token per step."""

    n_panels = 3
    heights = (0.42, 0.16, 0.42)
    height = 560

    def _build(self) -> None:
        for name, _, color in COMP_SERIES:
            self._add(go.Scatter(x=[], y=[], stackgroup="tokens", fillcolor=color,
                                 line=dict(width=0, shape="hv"), mode="lines"), 0)
        self._add(go.Bar(x=[], y=[], base=[], orientation="h", marker_color=[], text=[], textposition="inside",
                         insidetextanchor="middle"), 1)  # out of the legends: _labels
        self._add(go.Scatter(x=[], y=[], mode="lines", line=dict(color="#333", width=1.2, shape="hv")), 2)
        self._add(go.Scatter(x=[], y=[], mode="markers",
                             marker=dict(color=PALETTE["newcomer"], size=7, symbol="diamond")), 2)
        for p in (0, 2):  # cursor lines in the two step-indexed panels
            self._add_shape(p, type="line", x0=0, x1=0, y0=0, y1=1, line=dict(color="#222", width=1.5))
        self._add_shape(0, x_domain=True, y_domain=False, type="line", x0=0, x1=1, y0=0, y1=0,
                        line=dict(color="#222", width=1.5, dash="dash"))  # the budget
        self._add_shape(1, y_domain=True, type="line", x0=0, x1=0, y0=0, y1=1,
                        line=dict(color="#222", width=1.5, dash="dash"))
        for p in (0, 1, 2):
            self._title(p)
        self.xaxis(2).matches = self.panels[0][0]
        self.yaxis(1).showticklabels = False

    def _labels(self) -> None:
        for i, (name, _, _) in enumerate(COMP_SERIES):
            self.tr(i).name = t(f"comp.{name}")
        # the step bar in a legend never drawn: showlegend=False reached plotly.js in JupyterLab as null (shown,
        # as "trace 14"), while a layout's visible=False arrives intact
        self.tr(4).update(hovertemplate=t("hover.step_bar"), legend=HIDDEN_LEGEND)
        self.fig.layout[HIDDEN_LEGEND] = dict(visible=False)
        self.tr(5).name, self.tr(6).name = t("comp.itl"), t("comp.ttft")
        self.note(0).text, self.note(2).text = t("title.composition"), t("title.gaps")  # note 1: the cursor's step
        self.xaxis(2).title.text = t("axis.step")
        self.yaxis(0).title.text = t("axis.tokens")
        self.yaxis(2).title.text = t("axis.gap_ms")

    def _draw(self) -> None:
        sa = self.trace.step_arrays()
        steps = np.arange(len(self.trace.steps))
        x = arr(steps)  # encoded once for the series that share it
        for i, (_, attr, _) in enumerate(COMP_SERIES):
            y = getattr(sa, attr)
            self.tr(i).x, self.tr(i).y = x, arr(y)
            self.tr(i).showlegend = bool(len(y) and np.any(y > 0))  # a legend names only what is drawn
        self.tr(5).x, self.tr(5).y = x, arr(sa.max_itl_s * 1e3)
        has_ttft = ~np.isnan(sa.max_ttft_s)
        self.tr(6).x, self.tr(6).y = arr(steps[has_ttft]), arr(sa.max_ttft_s[has_ttft] * 1e3)
        b = D.budget(self.trace)
        self.shape(2).visible = self.shape(3).visible = b is not None
        if b is not None:
            self.shape(2).y0 = self.shape(2).y1 = b
            self.shape(3).x0 = self.shape(3).x1 = b
        ymax = max(int(sa.tokens.max()) if len(sa.tokens) else 1, b or 0)
        self.xaxis(1).range = [0, ymax * 1.05]

    def _cursor(self, k: int) -> None:
        self.k = k
        c = D.composition_at(self.trace, k)
        sizes, colors, labels = [], [], []
        for key, n in (("decode", c["decode"]), ("wasted", c["wasted"])):
            if n:
                sizes.append(n)
                colors.append(D.COLORS[DECODE if key == "decode" else WASTED])
                labels.append(t("comp.decodes_of", n=n) if key == "decode" else t("phase.wasted"))
        for rid, a, b, n in c["chunks"]:
            sizes.append(n)
            colors.append(D.COLORS[PREFILL])
            labels.append(t("comp.chunk_of", id=rid, a=a, b=b))
        if c["padding"]:
            sizes.append(c["padding"])
            colors.append(D.COLORS[PADDING])
            labels.append(t("phase.padding"))
        bar = self.tr(4)
        bar.x, bar.y, bar.base = sizes, [""] * len(sizes), [int(x) for x in np.cumsum([0] + sizes[:-1])]
        bar.marker.color, bar.text = colors, labels
        for i in (0, 1):
            self.shape(i).x0 = self.shape(i).x1 = k
        self.note(1).text = t("title.step_tokens", k=k)
        self.words.value = D.composition_sentence(self.trace, k)
        self.segments = list(zip(labels, sizes))  # what the step bar shows (read by tests)


class KVView(View):
    """Reserved vs used KV bytes per step, and a marker at the cursor."""

    height = 270

    def _build(self) -> None:
        self._add(go.Scatter(x=[], y=[], fill="tozeroy", mode="lines",
                             line=dict(color=PALETTE["kv_reserved"], width=1, shape="hv")))
        self._add(go.Scatter(x=[], y=[], fill="tozeroy", mode="lines",
                             line=dict(color=PALETTE["kv_used"], width=1, shape="hv")))
        self._add(go.Scatter(x=[0, 0], y=[0, 0], mode="markers", showlegend=True,
                             marker=dict(color="#222", size=8)))
        self._add(go.Scatter(x=[], y=[], mode="markers", cliponaxis=False,  # preemptions, on the step axis
                             marker=dict(color=PALETTE["wasted"], size=9, symbol="x-thin", line=dict(width=2,
                                         color=PALETTE["wasted"]))))
        self._title()

    def _labels(self) -> None:
        self.tr(0).name, self.tr(1).name = self.trace.kv.held_word(), t("kv.used")
        self.tr(3).name = t("kv.preempted")
        self.tr(2).name = t("kv.cursor")  # unnamed, the widget's browser side listed it as "trace 2"
        self.note(0).text = self.trace.kv.kv_title()
        self.xaxis().title.text = t("axis.step")

    def _draw(self) -> None:
        res, used, unit = D.kv_series(self.trace)
        steps = np.arange(len(res))
        self.tr(0).x, self.tr(0).y = arr(steps), arr(res)
        self.tr(1).x, self.tr(1).y = arr(steps), arr(used)
        self.yaxis().title.text = t("axis.kv", unit=unit)
        for i in (0, 1, 2):
            self.tr(i).hovertemplate = "%{y:.1f} " + unit + "<extra></extra>"
        pre = D.preemption_steps(self.trace)
        p = self.tr(3)
        p.x, p.y, p.showlegend = arr(pre), arr(np.zeros(len(pre))), bool(len(pre))
        p.hovertemplate = t("axis.step") + " %{x}<extra>" + t("kv.preempted") + "</extra>"
        self.tr(0).name = self.trace.kv.held_word()
        self.note(0).text = self.trace.kv.kv_title()

    def _cursor(self, k: int) -> None:
        self.k = k
        res, used, _ = D.kv_series(self.trace)
        m = self.tr(2)
        m.x, m.y = ([k, k], [res[k], used[k]]) if len(res) else ([], [])
        self.words.value = D.kv_sentence(self.trace, k)


class BlockView(View):
    """The paged layout's pool: blocks x steps coloured free / held / internal waste, the owner on hover, the
    cursor's column outlined (a slab run says it has no blocks)."""

    height = 320

    def __init__(self, trace: Trace, k: int = 0, max_rows: int = D.MAX_ROWS, max_columns: int = D.MAX_BLOCK_COLUMNS,
                 host: tuple | None = None):
        self.max_rows, self.max_columns = max_rows, max_columns
        super().__init__(trace, k, host)

    def _build(self) -> None:
        colors = [D.BLOCK_COLORS[c] for c in range(len(D.BLOCK_STATES))]
        self._grid(colors, len(colors), reverse=False)

    def _labels(self) -> None:
        for c, name in enumerate(D.BLOCK_STATES):
            self.tr(1 + c).name = t(f"blocks.{name}")
        self.yaxis().title.text = t("axis.block")
        self.xaxis().title.text = t("axis.step")

    def _draw(self) -> None:
        tr = self.trace
        self.data = d = D.block_map(tr, self.max_rows, self.max_columns)
        h = self.tr(0)
        h.z, h.x, h.y, h.text = arr(d.z), arr(d.x_edges), arr(d.y_edges), d.text
        h.hovertemplate = t("blocks.hover.cell" if d.exact else "blocks.hover.bin")
        for c in range(len(D.BLOCK_STATES)):  # the legend entries' point (NO_POINT)
            legend_entry(self.tr(1 + c))
        self.note(1).text = tr.kv.block_caption(d.note, d.top)
        self.note(0).text = tr.kv.blocks_title()

    def _cursor(self, k: int) -> None:
        self.k = k
        s = self.shape(0)
        s.visible = bool(len(self.data.first_step))
        s.x0, s.x1 = D.cursor_span(self.data, k)
        self.words.value = D.blocks_sentence(self.trace, k)

    def cell(self, block: int, step: int) -> tuple[int, str]:
        """The state code and hover text drawn for a block at a step (for checks)."""
        d = self.data
        r = int(np.searchsorted(d.y_edges, block, side="right")) - 1
        c = int(np.searchsorted(d.x_edges, step, side="right")) - 1
        return int(d.z[r, c]), str(d.text[r, c])


class LatencyView(View):
    """TTFT and end-to-end distributions (empirical CDFs) with p50/p99 marked, one line per trace (policy)."""

    n_panels = 2
    heights = (0.5, 0.5)
    height = 460
    PALETTE = tuple(SERIES)  # one line per compared run, the palette's colour-blind-safe order

    def __init__(self, traces: Trace | dict[str, Trace], k: int = 0, host: tuple | None = None):
        self.traces = traces if isinstance(traces, dict) else {policy_name(traces.policy): traces}
        super().__init__(next(iter(self.traces.values())), k, host)

    def _build(self) -> None:
        for i in range(MAX_SERIES):
            color = self.PALETTE[i]
            for p in (0, 1):
                self._add(go.Scatter(x=[], y=[], mode="lines", line=dict(color=color, shape="hv"), name="",
                                     legendgroup=str(i), showlegend=p == 0, visible=False), p)
                self._add(go.Scatter(x=[], y=[], mode="markers+text",
                                     textposition="middle right", marker=dict(color=color, size=8), cliponaxis=False,
                                     showlegend=False, legendgroup=str(i), visible=False), p)
        for p in (0, 1):
            self._title(p)
            self.yaxis(p).range = [0, 1.02]

    def _labels(self) -> None:
        for i in range(MAX_SERIES):
            for p in (0, 1):
                self.tr(4 * i + 2 * p + 1).text = [t("lat.p50"), t("lat.p99")]
        for p, key in ((0, "lat.ttft"), (1, "lat.e2e")):
            self.note(p).text = t(key)
            self.xaxis(p).title.text = t("axis.latency_ms")
            self.yaxis(p).title.text = t("axis.fraction")

    def set_traces(self, traces: dict[str, Trace], k: int | None = None) -> None:
        """Draw these traces (label -> trace, at most MAX_SERIES); the first one follows the cursor."""
        if len(traces) > MAX_SERIES:
            raise ValueError(t("widgets.error.traces", most=MAX_SERIES, n=len(traces)))
        self.traces = traces
        self.set_trace(next(iter(traces.values())), k)

    def _draw(self) -> None:
        self.stats = {}
        items = list(self.traces.items())
        for i in range(MAX_SERIES):
            lat = D.latency_ms(items[i][1]) if i < len(items) else None
            marked = D.percentiles(items[i][1]) if i < len(items) else None
            for p, key in ((0, "ttft"), (1, "e2e")):
                line, marks = self.tr(4 * i + 2 * p), self.tr(4 * i + 2 * p + 1)
                if lat is None:
                    line.visible = marks.visible = False
                    continue
                label, v = items[i][0], lat[key]
                p50, p99 = marked[key]
                self.stats[(label, key)] = (p50, p99)
                line.update(x=arr(v), y=arr(np.arange(1, len(v) + 1) / max(1, len(v))), name=label, visible=True,
                            hovertemplate="%{x:.1f} ms<extra>" + label + "</extra>")
                marks.update(x=[p50, p99] if len(v) else [], y=[0.5, 0.99] if len(v) else [], visible=bool(len(v)),
                             hovertemplate="%{text} %{x:.1f} ms<extra>" + label + "</extra>")

    def _cursor(self, k: int) -> None:
        self.k = k
        tr = self.trace
        if not any(len(D.latency_ms(x)["e2e"]) for x in self.traces.values()):
            self.words.value = t("lat.none")
        else:
            self.words.value = t("lat.finished", done=D.finished_by(tr, k), total=len(tr.requests),
                                 k=k if tr.steps else "—")


REQ_KEYS = ("waiting", "prefill", "decode", "wasted")


class RequestView(View):
    """One row per request: waiting for a slot, prefill, decode, slot held after finishing; the cursor's time."""

    height = 380

    def _build(self) -> None:
        for key in REQ_KEYS:
            self._add(go.Bar(x=[], y=[], base=[], orientation="h", marker_color=D.STATE_COLORS[key]))
        self._add_shape(0, type="line", x0=0, x1=0, y0=0, y1=1, line=dict(color="#222", width=1.5))
        self._title()
        self._add_note(0, 0, -0.14, text="", xanchor="left", yanchor="top", font=dict(size=10, color="#555"))
        self.fig.update_layout(barmode="overlay")
        self.yaxis().update(autorange="reversed", type="category")

    def _labels(self) -> None:
        for i, key in enumerate(REQ_KEYS):
            self.tr(i).update(name=t(f"req.{key}"), hovertemplate="%{y}: %{base:.3f}–%{customdata:.3f} s<extra>"
                              + t(f"req.{key}") + "</extra>")
        self.note(0).text = t("title.requests")
        self.yaxis().title.text = t("axis.request")

    def _draw(self) -> None:
        b = D.request_bars(self.trace)
        ids = np.array(b["ids"], dtype=object)  # one array for the four bars: plotly checks a list item by item
        for i, key in enumerate(REQ_KEYS):
            a, z = b[key]
            self.tr(i).update(y=ids, base=arr(a), x=arr(z - a), customdata=arr(z))
        self.xaxis().title.text = D.time_label(self.trace)
        cut = b["total"] > len(b["ids"])
        self.note(1).text = t("note.requests_cut", shown=len(b["ids"]), total=b["total"]) if cut else ""
        if self.panels[0] == ("x", "y") and self.widget is not self.words:  # alone: fit the figure to the rows
            self.fig.layout.height = max(220, min(self.height, 80 + 14 * len(b["ids"])))

    def _cursor(self, k: int) -> None:
        self.k = k
        sa = self.trace.step_arrays()
        s = self.shape(0)
        s.x0 = s.x1 = float(sa.end_s[k]) if len(sa.end_s) else 0.0
        s.visible = bool(self.trace.steps)
        self.words.value = D.state_sentence(self.trace, k)
