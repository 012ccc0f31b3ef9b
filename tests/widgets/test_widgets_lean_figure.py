"""The board's figures run plotly's own widget bundle with two methods made no-ops (views.BoardFigure)."""
from __future__ import annotations

import pathlib

import plotly

from tinyserve_widgets import views as V

BUNDLE = pathlib.Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"


def test_the_pinned_plotly_bundle_takes_the_patch_and_nothing_else_changes():
    src = BUNDLE.read_text(encoding="utf-8")
    lean = V._lean_bundle()
    assert lean is not None, "plotly's widget bundle changed: the delta senders were not found (see views.py)"
    for m in ("_sendLayoutDelta(ne){", "_sendTraceDeltas(ne){"):
        assert lean.count(m + "return;") == 1
    # exactly the two insertions: removing them gives the original back
    assert lean.replace("){return;", "){") == src
    assert len(lean) == len(src) + 2 * len("return;")


def test_a_bundle_without_the_expected_methods_is_left_alone():
    assert V._lean_bundle("export default {render() {}}") is None
    twice = "_sendTraceDeltas(ne){}_sendTraceDeltas(ne){}_sendLayoutDelta(ne){}"
    assert V._lean_bundle(twice) is None  # ambiguous: patch nothing


def test_every_view_and_board_figure_is_a_lean_figure_widget():
    import tinyserve_widgets as tw
    from tinyserve.engine import Engine

    trace = Engine().run("chapter-7.1-padding", "static", batch_size=2, dry_run=True, progress=False)
    board = tw.TraceView(trace)
    assert isinstance(board.fig, V.BoardFigure) and board.fig.get_state()["_esm"] == V._lean_bundle()
    assert isinstance(board.fig, plotly.graph_objects.FigureWidget)
    alone = V.WasteMeter(trace)
    assert isinstance(alone.fig, V.BoardFigure)
