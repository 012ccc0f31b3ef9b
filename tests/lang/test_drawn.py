"""tinyserve.lang.drawn: the words a figure drew and a widget showed, recorded into the output's metadata when
chapters/build.py asks ($TINYSERVE_RECORD_TEXT); tests/chapters/test_zh_edition.py reads them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tinyserve.lang import drawn

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"


def test_nothing_is_installed_without_the_variable(monkeypatch):
    monkeypatch.delenv(drawn.ENV, raising=False)
    assert drawn.install() is False


def test_a_plotly_figure_s_words():
    spec = {"data": [{"type": "bar", "name": "靜態批次", "hovertemplate": "位子 %{y}<extra></extra>", "x": [1, 2],
                      "text": ["a", "b"]}],
            "layout": {"title": {"text": "標題"}, "xaxis": {"title": {"text": "步"}, "ticktext": ["0", "十"]},
                       "annotations": [{"text": "注意"}], "template": {"layout": {"title": {"text": "theme"}}}}}
    assert drawn.figure_words(spec) == ["靜態批次", "位子 %{y}<extra></extra>", "a", "b", "標題", "步", "0", "十",
                                        "注意"]


def test_a_widget_tree_s_words():
    W = pytest.importorskip("ipywidgets")

    class Holder:  # as tinyserve_widgets' Explorer holds its widget
        widget = W.VBox([W.ToggleButtons(options=["靜態批次", "連續批次"], description="策略", tooltips=["甲", "乙"]),
                         W.HTML("<b>粗體</b> 文字"), W.Button(description="跑一次", tooltip="提示"),
                         W.Text(placeholder="輸入數字")])

    assert drawn.widget_words(Holder()) == ["策略", "靜態批次", "連續批次", "甲", "乙", "粗體  文字", "跑一次", "提示",
                                            "輸入數字"]


def test_the_build_records_what_a_figure_drew_and_a_widget_showed(tmp_path):
    """One kernel run as build.py runs it: the drawn strings (ticks as formatted, legend, title) and the widget's
    words land in the outputs' metadata."""
    pytest.importorskip("ipywidgets")
    sys.path.insert(0, str(CHAPTERS))
    try:
        import build
    finally:
        sys.path.remove(str(CHAPTERS))
    nbformat = build.nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = build.KERNEL
    nb.cells = [nbformat.v4.new_code_cell('import tinyserve\ntinyserve.set_language("zh-TW")\n'
                                          "import matplotlib.pyplot as plt\nimport ipywidgets as W"),
                nbformat.v4.new_code_cell('fig, ax = plt.subplots()\nax.plot([1, 2], [3, 4], label="連續批次")\n'
                                          'ax.set_title("標題")\nax.legend();'),
                nbformat.v4.new_code_cell('W.ToggleButtons(options=["靜態批次", "動態批次"], description="策略")')]
    build.run_and_write(nb, "probe", tmp_path, True)
    figure = next(o for o in nb.cells[1].outputs if "image/png" in o.get("data", {}))
    words = figure.metadata["image/png"][drawn.KEY]
    assert "標題" in words and "連續批次" in words and "1.0" in words, words
    widget = nb.cells[2].outputs[0]
    assert widget.metadata[drawn.WIDGET][drawn.KEY] == ["策略", "靜態批次", "動態批次"]
