"""One cursor (Play + step slider) driving every view of a trace."""
from __future__ import annotations

import ipywidgets as W

from tinyserve.analysis.figures import policy_name
from tinyserve.lang import t
from tinyserve.trace.record import Trace

from . import data as D
from . import views as V

VIEWS = ("timeline", "waste", "composition", "kv", "requests", "latency")  # show()'s default
ALL_VIEWS = VIEWS + ("blocks",)  # "blocks": the paged layout's block map (BlockView), on request


class Cursor:
    """A Play button and a step slider, linked in the browser; observers get the step number."""

    def __init__(self, num_steps: int, k: int = 0, interval_ms: int = 120):
        last = max(0, num_steps - 1)
        self.slider = W.IntSlider(value=min(k, last), min=0, max=last, continuous_update=True,
                                  layout=W.Layout(width="60%"))
        self.play = W.Play(value=self.slider.value, min=0, max=last, step=self._stride(num_steps),
                           interval=interval_ms)
        W.jslink((self.play, "value"), (self.slider, "value"))
        self.widget = W.HBox([self.play, self.slider])
        self.relabel()
        V.follow_language(self)

    def relabel(self) -> None:
        """Its words in the current language."""
        self.slider.description, self.play.description = t("axis.step"), t("cursor.play")

    @staticmethod
    def _stride(n: int) -> int:
        return max(1, n // 200)  # Play crosses any run in about 200 frames

    def set_steps(self, num_steps: int) -> None:
        """Resize to a new trace, keeping the value if it still fits."""
        last = max(0, num_steps - 1)
        for w in (self.slider, self.play):
            if w.value > last:
                w.value = last
            w.max = last
        self.play.step = self._stride(num_steps)

    @property
    def value(self) -> int:
        return self.slider.value

    @value.setter
    def value(self, k: int) -> None:
        self.slider.value = max(self.slider.min, min(int(k), self.slider.max))
        self.play.value = self.slider.value

    def observe(self, fn) -> None:
        """Call fn(k) whenever the step changes."""
        self.slider.observe(lambda ch: fn(ch["new"]), names="value")


# the board: rows of (view, panel) cells and their heights in pixels; a row of one cell spans the width
ROWS = ((("timeline", 0),), 300), ((("blocks", 0),), 260), ((("waste", 0), ("kv", 0)), 170), ((("composition", 0),), 190), \
    ((("composition", 1),), 60), ((("composition", 2),), 150), ((("requests", 0), ("latency", 0), ("latency", 1)), 300)
SPAN = {1: (4,), 2: (2, 2), 3: (2, 1, 1)}  # columns each cell takes in a row of n cells (4 columns)
BOARD_WIDTH_PX = 810  # fits the output area of a 900-px notebook column (the prompt takes ~80 px of it)
GAP_PX = 130  # between rows: an x-axis title, then the next panel's title above its legend (up to three rows)


def _ref(axis) -> str:
    """layout.xaxis3 -> 'x3'."""
    name = axis.plotly_name
    return name[0] + name[5:]


class TraceView:
    """Every view of one trace in ONE figure, moved together by one cursor. Display it (last line of a cell)."""

    def __init__(self, trace: Trace, k: int = 0, x: str = "steps", views: tuple[str, ...] = VIEWS,
                 compare: dict[str, Trace] | None = None, cursor: Cursor | None = None,
                 width: int = BOARD_WIDTH_PX):
        from plotly.subplots import make_subplots

        unknown = set(views) - set(ALL_VIEWS)
        if unknown:
            raise ValueError(t("widgets.error.views", unknown=sorted(unknown), choices=", ".join(ALL_VIEWS)))
        self.trace = trace
        k = D.clamp_step(trace, k)
        self.own_cursor = cursor is None  # a shared cursor (Compare) is drawn and resized by its owner
        self.cursor = Cursor(len(trace.steps), k) if cursor is None else cursor
        rows = [(tuple(c for c in cells if c[0] in views), h) for cells, h in ROWS]
        rows = [(cells, h) for cells, h in rows if cells]
        specs = [[spec for n in SPAN[len(cells)] for spec in ({"colspan": n},) + (None,) * (n - 1)]
                 for cells, _ in rows]
        total = sum(h for _, h in rows) + GAP_PX * (len(rows) - 1)
        fig = make_subplots(rows=len(rows), cols=4, specs=specs, row_heights=[h for _, h in rows],
                            vertical_spacing=GAP_PX / total, horizontal_spacing=0.07)
        self.fig = V.new_figure(fig)
        # a fixed width: left to autosize, the widget came out ~550 px wide in JupyterLab and the legends wrapped
        self.fig.update_layout(height=total + 90, width=width, font=V.FONT, bargap=0.15,
                               margin=dict(l=60, r=20, t=50, b=40))
        panels: dict[str, list] = {}
        for r, (cells, _) in enumerate(rows, start=1):
            col = 1
            for (name, _), span in zip(cells, SPAN[len(cells)]):
                sp = self.fig.get_subplot(r, col)
                panels.setdefault(name, []).append((_ref(sp.xaxis), _ref(sp.yaxis)))
                col += span
        legends = {name: "legend" if i == 0 else f"legend{i + 1}" for i, name in enumerate(panels)}
        make = {"timeline": lambda h: V.SlotTimeline(trace, k, x=x, host=h),
                "waste": lambda h: V.WasteMeter(trace, k, h),
                "composition": lambda h: V.StepComposition(trace, k, h), "kv": lambda h: V.KVView(trace, k, h),
                "requests": lambda h: V.RequestView(trace, k, h), "blocks": lambda h: V.BlockView(trace, k, host=h),
                "latency": lambda h: V.LatencyView(compare or {policy_name(trace.policy): trace}, k, h)}
        self.views: dict[str, V.View] = {}
        for name in ALL_VIEWS:  # not in batch mode: plotly drops the properties of shapes added in one
            if name in panels:
                self.views[name] = make[name]((self.fig, panels[name], legends[name]))
                xa = self.fig.layout[V._axis_name(panels[name][0][0])]
                ya = self.fig.layout[V._axis_name(panels[name][0][1])]
                self.fig.layout[legends[name]] = dict(x=xa.domain[1], y=ya.domain[1] + 0.004, xanchor="right",
                                                      yanchor="bottom", orientation="h", font=dict(size=10),
                                                      bgcolor="rgba(255,255,255,0)")
        self.cursor.observe(self._move)
        boxes = [v.words for v in self.views.values()]
        top = [self.cursor.widget] if self.own_cursor else []
        self.widget = W.VBox(top + [self.fig, W.VBox(boxes)], layout=W.Layout(width="100%"))

    def _move(self, k: int) -> None:
        with V.batch(self.fig):  # one message to the browser for every view
            for view in self.views.values():
                view.set_cursor(k)

    @property
    def k(self) -> int:
        """The cursor's step."""
        return self.cursor.value

    def set_cursor(self, k: int) -> None:
        """Move the one cursor (every view follows)."""
        self.cursor.value = k

    def set_trace(self, trace: Trace, compare: dict[str, Trace] | None = None) -> None:
        """Draw another trace in every view (the cursor stays, limited to the new run)."""
        self.trace = trace
        if self.own_cursor:
            self.cursor.set_steps(len(trace.steps))
        k = self.cursor.value
        with V.batch(self.fig):
            for name, view in self.views.items():
                if name == "latency":
                    view.set_traces(compare or {policy_name(trace.policy): trace}, k)
                else:
                    view.set_trace(trace, k)

    def static(self, k: int | None = None):
        """A matplotlib Figure of every view at step k (default: the cursor)."""
        from .static import board_figure

        return board_figure(self.trace, self.k if k is None else k, views=tuple(self.views),
                            x=self.views["timeline"].x if "timeline" in self.views else "steps")

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        from .static import STATIC_FALLBACK, png_bytes

        # GitHub/nbviewer show this picture; JupyterLab the widget
        if STATIC_FALLBACK["on"] and isinstance(bundle, dict):
            bundle["image/png"] = png_bytes(self.static())
        return bundle


def show(trace: Trace, k: int = 0, x: str = "steps", views: tuple[str, ...] = VIEWS,
         compare: dict[str, Trace] | None = None, width: int = BOARD_WIDTH_PX) -> TraceView:
    """Every view of a trace under one cursor (returns the TraceView; display it as a cell's last line)."""
    return TraceView(trace, k, x, views, compare, width=width)
