"""Plotly FigureWidget views of a Trace. Each view: .widget (to display), set_trace(trace), set_cursor(k).
They draw what data.py regroups from the Trace; none schedules or computes metrics itself."""
from __future__ import annotations

import math

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tinyserve.trace import GRID_PHASES, Trace

from . import data as D
from .words import t

CODES = list(range(len(GRID_PHASES) + 1))  # the phases, then GAP
_N = len(CODES)
COLORSCALE = [x for c in CODES for x in ([c / _N, D.COLORS[c]], [(c + 1) / _N, D.COLORS[c]])]
FONT = dict(size=11)


# a small template: plotly's own (applied to every new figure) costs ~0.1 s of validation per figure
TEMPLATE = {"layout": {"paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"color": "#2a3f5f"},
                       "xaxis": {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8"},
                       "yaxis": {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8"}}}


def new_figure(fig=None) -> go.FigureWidget:
    """A FigureWidget with the small template (optionally from a make_subplots figure)."""
    if fig is None:
        return go.FigureWidget(layout={"template": TEMPLATE})
    fig.layout.template = TEMPLATE
    return go.FigureWidget(fig)


def _layout(fig: go.FigureWidget, title: str, height: int) -> None:
    fig.update_layout(title=dict(text=title, font=dict(size=13)), height=height, font=FONT,
                      margin=dict(l=55, r=15, t=40, b=40), bargap=0.15,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))


class View:
    """Shared parts: the figure, a line of words under it, the trace and the cursor."""

    height = 300

    def __init__(self, trace: Trace, k: int = 0):
        self.trace = trace
        self.k = 0
        self.words = W.HTML()
        self.fig = new_figure()
        self.widget = W.VBox([self.fig, self.words], layout=W.Layout(width="100%"))
        self._build()
        self.set_trace(trace, k)

    def _build(self) -> None: ...

    def set_trace(self, trace: Trace, k: int | None = None) -> None:
        """Draw another trace (keeping the cursor where it is, limited to the new trace's steps)."""
        self.trace = trace
        with self.fig.batch_update():
            self._draw()
            self._cursor(D.clamp_step(trace, self.k if k is None else k))

    def set_cursor(self, k: int) -> None:
        """Show the state at step k."""
        with self.fig.batch_update():
            self._cursor(D.clamp_step(self.trace, k))

    def _draw(self) -> None: ...

    def _cursor(self, k: int) -> None:
        self.k = k


class SlotTimeline(View):
    """Slots x steps coloured by phase; x in steps or time (modeled or wall, labelled); bins for long runs."""

    height = 330

    def __init__(self, trace: Trace, k: int = 0, x: str = "steps", max_columns: int = D.MAX_COLUMNS):
        self.x, self.max_columns = x, max_columns
        super().__init__(trace, k)

    def _build(self) -> None:
        f = self.fig
        f.add_heatmap(z=[[0]], zmin=-0.5, zmax=_N - 0.5, colorscale=COLORSCALE, showscale=False, name="")
        for c in CODES[:-1]:  # legend entries
            f.add_scatter(x=[None], y=[None], mode="markers", name=D.phase_name(c), hoverinfo="skip",
                          marker=dict(symbol="square", size=11, color=D.COLORS[c], line=dict(width=0.5, color="#888")))
        f.add_shape(type="rect", x0=0, x1=0, y0=0, y1=1, xref="x", yref="paper",
                    line=dict(color="#222", width=1.5), fillcolor="rgba(0,0,0,0.12)")
        f.add_annotation(text="", xref="paper", yref="paper", x=0, y=-0.2, showarrow=False, xanchor="left",
                         font=dict(size=10, color="#555"))
        _layout(f, "", self.height)
        f.update_yaxes(title=t("axis.slot"), autorange="reversed", zeroline=False, showgrid=False)
        f.update_xaxes(showgrid=False, zeroline=False)

    def set_x(self, x: str) -> None:
        """Switch the x axis between 'steps' and 'time'."""
        self.x = x
        self.set_trace(self.trace)

    def _draw(self) -> None:
        tr = self.trace
        self.data = d = D.timeline_data(tr, self.x, self.max_columns)
        h = self.fig.data[0]
        h.z, h.x, h.y = d.z, d.x_edges, np.arange(tr.num_slots)
        h.customdata, h.text = d.customdata, d.text
        h.hovertemplate = t("hover.cell") if d.bin == 1 else t("hover.bin")
        self.fig.layout.annotations[0].text = d.note or (t("note.no_steps") if not tr.steps else "")
        self.fig.layout.title.text = t("title.timeline", policy=tr.policy, workload=tr.workload)
        self.fig.layout.xaxis.title.text = d.x_label
        self.fig.layout.yaxis.title.text = t("axis.slot")

    def _cursor(self, k: int) -> None:
        self.k = k
        x0, x1 = D.cursor_span(self.data, k)
        s = self.fig.layout.shapes[0]
        s.x0, s.x1 = x0, x1
        sa = self.trace.step_arrays()
        self.words.value = t("cursor.label", k=k, n=len(self.trace.steps) - 1,
                             t=sa.end_s[k] if len(sa.end_s) else 0.0) if self.trace.steps else t("cursor.empty")


WASTE_KEYS = ("useful", "padding", "wasted", "idle")
WASTE_COLORS = {"useful": D.COLORS[D.DECODE], "padding": D.COLORS[D.PADDING], "wasted": D.COLORS[D.WASTED],
                "idle": "#bdbdbd"}


class WasteMeter(View):
    """Running totals up to the cursor: useful / padding / wasted / idle slot-steps, and a sentence."""

    height = 170

    def _build(self) -> None:
        for key in WASTE_KEYS:
            self.fig.add_bar(x=[0], y=[""], orientation="h", name=t(f"waste.{key}"), marker_color=WASTE_COLORS[key],
                             hovertemplate="%{x:,.1f} " + t(f"waste.{key}") + "<extra></extra>")
        _layout(self.fig, "", self.height)
        self.fig.update_layout(barmode="stack")
        self.fig.update_xaxes(title=t("axis.slot_steps"))

    def _draw(self) -> None:
        total = self.trace.num_slots * max(1, len(self.trace.steps))
        self.fig.layout.xaxis.range = [0, total]

    def _cursor(self, k: int) -> None:
        self.k = k
        w = D.waste_at(self.trace, k)
        for bar, key in zip(self.fig.data, WASTE_KEYS):
            bar.x = [w[key]]
        self.fig.layout.title.text = t("title.waste", k=k)
        self.words.value = D.waste_sentence(self.trace, k) if self.trace.steps else t("note.no_steps")


COMP_SERIES = (("decode", "decode_tokens", D.COLORS[D.DECODE]), ("prefill", "prefill_tokens", D.COLORS[D.PREFILL]),
               ("padding", "padding_tokens", D.COLORS[D.PADDING]), ("wasted", "wasted_tokens", D.COLORS[D.WASTED]))


class StepComposition(View):
    """Tokens per step (decode, prefill chunks, padding, wasted) with the token budget; step k split by request;
    the longest inter-token gap of in-flight requests and newcomers' time to first token per step."""

    height = 520

    def __init__(self, trace: Trace, k: int = 0):
        super().__init__(trace, k)

    def _build(self) -> None:
        fig = make_subplots(rows=3, cols=1, row_heights=[0.42, 0.16, 0.42], vertical_spacing=0.11,
                            subplot_titles=(t("title.composition"), "", t("title.gaps")))
        for name, _, color in COMP_SERIES:
            fig.add_scatter(x=[], y=[], name=t(f"comp.{name}"), stackgroup="tokens", line=dict(width=0, shape="hv"),
                            fillcolor=color, mode="lines", row=1, col=1)
        fig.add_bar(x=[], y=[], base=[], orientation="h", marker_color=[], text=[], textposition="inside",
                    insidetextanchor="middle", showlegend=False, hovertemplate="%{text}: %{x} tokens<extra></extra>",
                    row=2, col=1)
        fig.add_scatter(x=[], y=[], name=t("comp.itl"), mode="lines", line=dict(color="#333", width=1.2, shape="hv"),
                        row=3, col=1)
        fig.add_scatter(x=[], y=[], name=t("comp.ttft"), mode="markers", marker=dict(color="#e45756", size=7,
                        symbol="diamond"), row=3, col=1)
        self.fig = new_figure(fig)
        self.widget.children = (self.fig, self.words)
        for ref in ("x", "x3"):  # cursor lines in the two step-indexed panels
            self.fig.add_shape(type="line", x0=0, x1=0, y0=0, y1=1, xref=ref, yref=f"{'y' if ref == 'x' else 'y3'} domain",
                               line=dict(color="#222", width=1.5))
        self.fig.add_shape(type="line", x0=0, x1=1, y0=0, y1=0, xref="x domain", yref="y",
                           line=dict(color="#222", width=1.5, dash="dash"))  # the budget
        self.fig.add_shape(type="line", x0=0, x1=0, y0=0, y1=1, xref="x2", yref="y2 domain",
                           line=dict(color="#222", width=1.5, dash="dash"))
        _layout(self.fig, "", self.height)
        self.fig.update_xaxes(title=t("axis.step"), row=3, col=1)
        self.fig.update_xaxes(matches="x", row=3, col=1)
        self.fig.update_yaxes(title=t("axis.tokens"), row=1, col=1)
        self.fig.update_yaxes(title=t("axis.gap_ms"), row=3, col=1)
        self.fig.update_yaxes(showticklabels=False, row=2, col=1)
        self.fig.update_layout(legend=dict(y=1.08))

    def _draw(self) -> None:
        sa = self.trace.step_arrays()
        steps = np.arange(len(self.trace.steps))
        for tr_, (_, attr, _) in zip(self.fig.data[:4], COMP_SERIES):
            tr_.x, tr_.y = steps, getattr(sa, attr)
        self.fig.data[5].x, self.fig.data[5].y = steps, sa.max_itl_s * 1e3
        has_ttft = ~np.isnan(sa.max_ttft_s)
        self.fig.data[6].x, self.fig.data[6].y = steps[has_ttft], sa.max_ttft_s[has_ttft] * 1e3
        b = D.budget(self.trace)
        shapes = self.fig.layout.shapes
        shapes[2].visible = shapes[3].visible = b is not None
        if b is not None:
            shapes[2].y0 = shapes[2].y1 = b
            shapes[3].x0 = shapes[3].x1 = b
        ymax = max(int(sa.tokens.max()) if len(sa.tokens) else 1, b or 0)
        self.fig.layout.xaxis2.range = [0, ymax * 1.05]

    def _cursor(self, k: int) -> None:
        self.k = k
        c = D.composition_at(self.trace, k)
        sizes, colors, labels = [], [], []
        for key, n in (("decode", c["decode"]), ("wasted", c["wasted"])):
            if n:
                sizes.append(n)
                colors.append(D.COLORS[D.DECODE if key == "decode" else D.WASTED])
                labels.append(t("comp.decodes_of", n=n) if key == "decode" else t("phase.wasted"))
        for rid, a, b, n in c["chunks"]:
            sizes.append(n)
            colors.append(D.COLORS[D.PREFILL])
            labels.append(t("comp.chunk_of", id=rid, a=a, b=b))
        if c["padding"]:
            sizes.append(c["padding"])
            colors.append(D.COLORS[D.PADDING])
            labels.append(t("phase.padding"))
        bar = self.fig.data[4]
        bar.x, bar.y, bar.base = sizes, [""] * len(sizes), list(np.cumsum([0] + sizes[:-1]))
        bar.marker.color, bar.text = colors, labels
        self.fig.layout.shapes[0].x0 = self.fig.layout.shapes[0].x1 = k
        self.fig.layout.shapes[1].x0 = self.fig.layout.shapes[1].x1 = k
        self.fig.layout.annotations[0].text = t("title.step_tokens", k=k)
        self.words.value = D.composition_sentence(self.trace, k)
        self.segments = list(zip(labels, sizes))  # what the step bar shows (read by tests)


class KVView(View):
    """Reserved vs used KV bytes per step, and a marker at the cursor."""

    height = 260

    def _build(self) -> None:
        f = self.fig
        f.add_scatter(x=[], y=[], name=t("kv.reserved"), fill="tozeroy", mode="lines",
                      line=dict(color="#9ecae9", width=1, shape="hv"))
        f.add_scatter(x=[], y=[], name=t("kv.used"), fill="tozeroy", mode="lines",
                      line=dict(color="#4c78a8", width=1, shape="hv"))
        f.add_scatter(x=[0, 0], y=[0, 0], mode="markers", showlegend=False, marker=dict(color="#222", size=8),
                      hovertemplate="%{y:.1f} MB<extra></extra>")
        _layout(f, t("title.kv"), self.height)
        f.update_xaxes(title=t("axis.step"))
        f.update_yaxes(title=t("axis.kv_mb"))

    def _draw(self) -> None:
        res, used = D.kv_mb(self.trace)
        steps = np.arange(len(res))
        self.fig.data[0].x, self.fig.data[0].y = steps, res
        self.fig.data[1].x, self.fig.data[1].y = steps, used

    def _cursor(self, k: int) -> None:
        self.k = k
        res, used = D.kv_mb(self.trace)
        m = self.fig.data[2]
        m.x, m.y = ([k, k], [res[k], used[k]]) if len(res) else ([], [])
        self.words.value = D.kv_sentence(self.trace, k)


class LatencyView(View):
    """TTFT and end-to-end distributions (empirical CDFs) with p50/p99 marked, one line per trace (policy)."""

    height = 300

    def __init__(self, traces: Trace | dict[str, Trace], k: int = 0):
        self.traces = traces if isinstance(traces, dict) else {traces.policy: traces}
        super().__init__(next(iter(self.traces.values())), k)

    def _build(self) -> None:
        self.fig = new_figure(make_subplots(rows=1, cols=2, subplot_titles=(t("lat.ttft"), t("lat.e2e")),
                                            horizontal_spacing=0.1))
        self.widget.children = (self.fig, self.words)
        _layout(self.fig, t("title.latency"), self.height)
        self.fig.update_yaxes(title=t("axis.fraction"), row=1, col=1, range=[0, 1.02])
        self.fig.update_yaxes(range=[0, 1.02], row=1, col=2)
        self.fig.update_xaxes(title=t("axis.latency_ms"))

    def set_traces(self, traces: dict[str, Trace], k: int | None = None) -> None:
        """Draw these traces (label -> trace); the first one follows the cursor."""
        self.traces = traces
        self.set_trace(next(iter(traces.values())), k)

    def _draw(self) -> None:
        palette = ["#4c78a8", "#e45756", "#54a24b", "#b279a2", "#f58518", "#72b7b2"]
        self.fig.data = []
        self.stats = {}
        for i, (label, tr) in enumerate(self.traces.items()):
            lat = D.latency_ms(tr)
            color = palette[i % len(palette)]
            for col, key in ((1, "ttft"), (2, "e2e")):
                v = lat[key]
                p50, p99 = D.percentiles(v)
                self.stats[(label, key)] = (p50, p99)
                y = np.arange(1, len(v) + 1) / max(1, len(v))
                self.fig.add_scatter(x=v, y=y, mode="lines", line=dict(color=color, shape="hv"), name=label,
                                     legendgroup=label, showlegend=col == 1, row=1, col=col,
                                     hovertemplate="%{x:.1f} ms<extra>" + label + "</extra>")
                if len(v):
                    self.fig.add_scatter(x=[p50, p99], y=[0.5, 0.99], mode="markers+text", row=1, col=col,
                                         text=[t("lat.p50"), t("lat.p99")], textposition="middle right",
                                         marker=dict(color=color, size=8), showlegend=False, legendgroup=label,
                                         hovertemplate="%{text} %{x:.1f} ms<extra>" + label + "</extra>")

    def _cursor(self, k: int) -> None:
        self.k = k
        tr = self.trace
        if not any(len(D.latency_ms(x)["e2e"]) for x in self.traces.values()):
            self.words.value = t("lat.none")
        else:
            self.words.value = t("lat.finished", done=D.finished_by(tr, k), total=len(tr.requests),
                                 k=k if tr.steps else "—")


class RequestView(View):
    """One row per request: waiting for a slot, prefill, decode, slot held after finishing; the cursor's time."""

    height = 360

    def _build(self) -> None:
        for key in ("waiting", "prefill", "decode", "wasted"):
            self.fig.add_bar(x=[], y=[], base=[], orientation="h", name=t(f"req.{key}"),
                             marker_color=D.STATE_COLORS[key], hovertemplate="%{y}: %{base:.3f}–%{customdata:.3f} s"
                             "<extra>" + t(f"req.{key}") + "</extra>")
        self.fig.add_shape(type="line", x0=0, x1=0, y0=0, y1=1, yref="paper", line=dict(color="#222", width=1.5))
        self.fig.add_annotation(text="", xref="paper", yref="paper", x=0, y=-0.16, showarrow=False, xanchor="left",
                                font=dict(size=10, color="#555"))
        _layout(self.fig, t("title.requests"), self.height)
        self.fig.update_layout(barmode="overlay")
        self.fig.update_yaxes(autorange="reversed", title=t("axis.request"), type="category")

    def _draw(self) -> None:
        b = D.request_bars(self.trace)
        for bar, key in zip(self.fig.data, ("waiting", "prefill", "decode", "wasted")):
            a, z = b[key]
            bar.y, bar.base, bar.x, bar.customdata = b["ids"], a, z - a, z
        self.fig.layout.xaxis.title.text = D.time_label(self.trace)
        cut = b["total"] > len(b["ids"])
        self.fig.layout.annotations[0].text = t("note.requests_cut", shown=len(b["ids"]), total=b["total"]) if cut else ""
        self.fig.layout.height = max(200, min(self.height, 60 + 14 * len(b["ids"])))

    def _cursor(self, k: int) -> None:
        self.k = k
        sa = self.trace.step_arrays()
        x = float(sa.end_s[k]) if len(sa.end_s) else 0.0
        s = self.fig.layout.shapes[0]
        s.x0 = s.x1 = x
        s.visible = bool(self.trace.steps)
        self.words.value = D.state_sentence(self.trace, k)
