"""One cursor (Play + step slider) driving every view of a trace."""
from __future__ import annotations

import ipywidgets as W

from tinyserve.trace import Trace

from . import data as D
from . import views as V
from .words import t

VIEWS = ("timeline", "waste", "composition", "kv", "requests", "latency")


class Cursor:
    """A Play button and a step slider, linked in the browser; observers get the step number."""

    def __init__(self, num_steps: int, k: int = 0, interval_ms: int = 120):
        last = max(0, num_steps - 1)
        self.slider = W.IntSlider(value=min(k, last), min=0, max=last, description=t("axis.step"),
                                  continuous_update=True, layout=W.Layout(width="60%"))
        self.play = W.Play(value=self.slider.value, min=0, max=last, step=self._stride(num_steps),
                           interval=interval_ms, description=t("cursor.play"))
        W.jslink((self.play, "value"), (self.slider, "value"))
        self.widget = W.HBox([self.play, self.slider])

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


class TraceView:
    """Every view of one trace, moved together by one cursor. Display it (last line of a cell) or call show()."""

    def __init__(self, trace: Trace, k: int = 0, x: str = "steps", views: tuple[str, ...] = VIEWS,
                 compare: dict[str, Trace] | None = None, cursor: Cursor | None = None):
        unknown = set(views) - set(VIEWS)
        if unknown:
            raise ValueError(f"views: unknown {sorted(unknown)} (choose from {', '.join(VIEWS)})")
        self.trace = trace
        k = D.clamp_step(trace, k)
        self.own_cursor = cursor is None  # a shared cursor (Compare) is drawn and resized by its owner
        self.cursor = Cursor(len(trace.steps), k) if cursor is None else cursor
        self.views: dict[str, V.View] = {}
        make = {"timeline": lambda: V.SlotTimeline(trace, k, x=x), "waste": lambda: V.WasteMeter(trace, k),
                "composition": lambda: V.StepComposition(trace, k), "kv": lambda: V.KVView(trace, k),
                "requests": lambda: V.RequestView(trace, k),
                "latency": lambda: V.LatencyView(compare or {trace.policy: trace}, k)}
        for name in views:
            self.views[name] = make[name]()
        self.cursor.observe(self._move)
        top = [self.cursor.widget] if self.own_cursor else []
        self.widget = W.VBox(top + self._rows(), layout=W.Layout(width="100%"))

    def _rows(self) -> list:
        v, rows = self.views, []
        for group in (("timeline",), ("waste", "kv"), ("composition",), ("requests", "latency")):
            ws = [v[n].widget for n in group if n in v]
            if len(ws) == 1:
                rows.append(ws[0])
            elif ws:
                for w in ws:
                    w.layout.width = "50%"
                rows.append(W.HBox(ws, layout=W.Layout(width="100%")))
        return rows

    def _move(self, k: int) -> None:
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
        for name, view in self.views.items():
            if name == "latency":
                view.set_traces(compare or {trace.policy: trace}, k)
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

        if STATIC_FALLBACK["on"] and isinstance(bundle, dict):  # GitHub/nbviewer show this picture; JupyterLab the widget
            bundle["image/png"] = png_bytes(self.static())
        return bundle


def show(trace: Trace, k: int = 0, x: str = "steps", views: tuple[str, ...] = VIEWS,
         compare: dict[str, Trace] | None = None) -> TraceView:
    """Every view of a trace under one cursor (returns the TraceView; display it as a cell's last line)."""
    return TraceView(trace, k, x, views, compare)
