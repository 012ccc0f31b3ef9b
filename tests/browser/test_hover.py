"""A binned slot timeline's hover in the browser: plotly.js formats each cell's numbers (customdata) into the
same words the Python side would have written (data.bin_text), in both editions."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

import tinyserve
import tinyserve_widgets as tw
from tinyserve.core.request import Request

pytestmark = pytest.mark.browser


def binned_trace():
    """One slot, 40 requests one after another: 400+ steps drawn in columns of several steps."""
    reqs = [Request(f"r{i}", [1] * (4 + i % 5), 6 + i % 7, 0.0, ignore_eos=True) for i in range(40)]
    return tinyserve.run(reqs, "continuous", dry_run=True, progress=False, batch_size=2)


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_binned_cells_hover_with_the_python_words(browser, tmp_path, lang):
    tinyserve.set_language(lang)
    try:
        view = tw.SlotTimeline(binned_trace(), 0, max_columns=60)
        d, h = view.data, view.tr(0)
        assert d.bin > 1 and d.hover is not None and h.text is None  # the numbers travel, not the words
        fig = go.Figure(go.Heatmap(z=h.z, x=h.x, y=h.y, customdata=h.customdata, hovertemplate=h.hovertemplate,
                                   showscale=False))
        fig.update_layout(width=800, height=300, margin=dict(l=0, r=0, t=0, b=0))
        page = browser.new_page(viewport={"width": 820, "height": 320})
        try:
            path = tmp_path / "hover.html"
            fig.write_html(path, include_plotlyjs=True)
            page.goto(path.as_uri())
            page.wait_for_selector(".nsewdrag")
            box = page.locator(".nsewdrag").first.bounding_box()
            rows, cols = d.z.shape
            for row, col in ((0, 3), (rows - 1, cols // 2), (0, cols - 1)):
                page.mouse.move(box["x"] + box["width"] * (col + 0.5) / cols,
                                box["y"] + box["height"] * (1 - (row + 0.5) / rows))
                page.wait_for_timeout(200)
                shown = page.locator(".hoverlayer .hovertext text").first.text_content()
                slot = "slot" if lang == "en" else "位子"
                assert shown == f"{slot} {row}" + d.text[row, col].replace("<br>", ""), (row, col)
                page.mouse.move(0, 0)
        finally:
            page.close()
    finally:
        tinyserve.set_language("en")
