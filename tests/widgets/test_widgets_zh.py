"""The widgets in 繁體中文: after tinyserve.set_language("zh-TW") every view, sentence, knob and static picture
speaks Chinese (no raw table key anywhere), plotly figures name the Traditional Chinese font stack, views drawn
before the switch redraw their words, and switching back gives the English exactly as before."""
from __future__ import annotations

import re

import numpy as np

import tinyserve
import tinyserve_widgets as tw
from tinyserve import lang
from tinyserve.core.request import Request
from tinyserve.engine import Engine
from tinyserve.lang import fonts
from tinyserve_widgets import sweep_plots
from tinyserve_widgets import views as V

CJK = re.compile(r"[\u4e00-\u9fff]")
KEYS = [k for k in lang.table() if "." in k]


def reqs() -> list[Request]:
    spec = (("a", 5, 9, 0.0), ("b", 40, 3, 0.0), ("c", 150, 4, 0.02), ("d", 3, 12, 0.05), ("e", 20, 2, 0.3))
    return [Request(i, list(range(1, p + 1)), n, at, ignore_eos=True) for i, p, n, at in spec]


def dry(policy="chunked", **knobs):
    knobs = knobs or {"batch_size": 3, "chunk_size": 64, "max_batch_tokens": 80}
    return Engine().run(reqs(), policy, dry_run=True, progress=False, **knobs)


def figure_words(fig) -> list[str]:
    """Every word a figure draws once: titles and notes, axis titles, legend names, hover templates, bar texts."""
    lay = fig.layout
    out = [a.text for a in lay.annotations if a.text]
    for name in lay:
        if re.fullmatch(r"[xy]axis\d*", name) and lay[name].title.text:
            out.append(lay[name].title.text)
    for tr in fig.data:
        out += [s for s in (tr.name, tr.hovertemplate) if s]
        if tr.type in ("bar", "scatter") and tr.text is not None and not isinstance(tr.text, str):
            out += [s for s in tr.text if isinstance(s, str)]
    return out


def view_words(view) -> list[str]:
    return figure_words(view.fig) + [view.words.value]


def no_raw_key(texts: list[str]) -> None:
    raw = [(k, s) for s in texts for k in KEYS if k in s]
    assert not raw, f"raw table keys drawn: {raw[:5]}"


def alone_views(tr):
    return {"timeline": tw.SlotTimeline(tr, 4), "waste": tw.WasteMeter(tr, 4), "composition": tw.StepComposition(tr, 4),
            "kv": tw.KVView(tr, 4), "requests": tw.RequestView(tr, 4), "latency": tw.LatencyView(tr, 4)}


def test_every_view_draws_in_chinese_with_the_tc_font_stack(zh):
    tr = dry()
    board = tw.show(tr, k=4)
    for name, view in {**alone_views(tr), **{f"board.{n}": v for n, v in board.views.items()}}.items():
        texts = view_words(view)
        no_raw_key(texts)
        titles = [view.note(i).text for i in range(len(view._notes)) if view.note(i).text]
        assert titles and all(CJK.search(s) for s in titles), (name, titles)
        assert CJK.search(view.words.value), (name, view.words.value)
        assert "Noto Sans CJK TC" in view.fig.layout.font.family, name
    assert board.fig.layout.font.family == fonts.plotly_family("zh-TW")
    assert board.cursor.slider.description == "步" and board.cursor.play.description == "播放"
    cell = tw.SlotTimeline(tr, 0).data.text[0, 0]
    assert cell.startswith("第 0 步") and "位置" in cell  # the hover text of a cell


def test_explorer_and_compare_in_chinese(zh):
    ex = tw.Explorer(reqs(), policy="chunked", batch_size=3, chunk_size=64, max_waiting_steps=20)
    knobs = {name: w.description for name, w in ex.knobs.items()}
    assert all(CJK.search(d) for n, d in knobs.items() if n != "x"), knobs
    assert ex.knobs["x"].description == "x 軸" and CJK.search(ex.real.description)
    assert dict(ex.knobs["max_batch_tokens"].options)["自動"] == "auto"
    assert CJK.search(ex.status.value)
    no_raw_key([ex.status.value] + [lab for w in ex.knobs.values() for lab in getattr(w, "_options_labels", ())])
    assert ex.set(max_model_len=64) is not None  # request c (154 positions) is rejected, the rest run
    assert "5 個請求中有 1 個被拒絕" in ex.status.value and ex.status.value.endswith("。</span>"), ex.status.value
    assert ex.set(max_model_len=None, kv_budget=10**8) is None and "5 個請求中有 5 個被拒絕" in ex.message.value
    no_raw_key([ex.status.value, ex.message.value])
    c = tw.Compare(reqs(), a={"batch_size": 3}, b={"batch_size": 3})
    assert "有用的位子步" in c.words.value and "A（靜態批次）" in c.words.value
    no_raw_key(view_words(c.latency))


def test_views_drawn_before_the_switch_redraw_and_english_comes_back_exactly():
    tr = dry()
    views = alone_views(tr)
    board, ex = tw.show(tr, k=3), tw.Explorer(reqs(), policy="chunked", batch_size=3)
    before = {n: view_words(v) for n, v in views.items()}
    before_board = figure_words(board.fig) + [board.cursor.play.description]
    before_knobs = [(w.description, getattr(w, "options", None)) for w in ex.knobs.values()]
    font = board.fig.layout.font.family
    try:
        tinyserve.set_language("zh-TW")
        for name, v in views.items():
            assert CJK.search(v.note(0).text) and CJK.search(v.words.value), name
            no_raw_key(view_words(v))
        assert board.fig.layout.font.family == fonts.plotly_family("zh-TW") != font
        assert CJK.search(board.views["waste"].words.value) and board.cursor.play.description == "播放"
        assert ex.knobs["batch_size"].description == "批次大小 B" and ex.knobs["order"].value is True
        assert ex.knobs["x"].options[0] == ("步", "steps")
    finally:
        tinyserve.set_language("en")
    assert {n: view_words(v) for n, v in views.items()} == before
    assert figure_words(board.fig) + [board.cursor.play.description] == before_board
    assert [(w.description, getattr(w, "options", None)) for w in ex.knobs.values()] == before_knobs
    assert board.fig.layout.font.family == font == fonts.plotly_family("en")


def test_static_pictures_in_chinese_wrap_by_display_width(zh):
    fig = tw.board_figure(dry(), k=4)  # glyphs drawn: tests/lang's font test renders every zh-TW figure
    titles = [ax.get_title() for ax in fig.get_axes() if ax.get_title()]
    assert titles and all(CJK.search(s) for s in titles), titles
    no_raw_key(titles + [ax.get_xlabel() for ax in fig.get_axes()])
    for ax in fig.get_axes():
        for line in ax.get_xlabel().split("\n")[1:]:  # the sentences under the axes
            assert lang.width(line) <= 112, line


def test_sweep_plots_label_in_chinese(zh):
    from matplotlib.figure import Figure

    v = np.array([0.1, 0.2, 0.4])
    axes = Figure().subplots(1, 2, squeeze=False)
    sweep_plots.plot_cdfs({(2.0, "static"): {"ttft_s": v, "e2e_s": v}}, axes)
    labels = [axes[0][0].get_xlabel(), axes[0][1].get_xlabel(), axes[0][0].get_ylabel()]
    assert all(CJK.search(s) for s in labels) and "2 請求/秒" in labels[2], labels
    no_raw_key(labels)


def test_a_view_built_alone_in_english_names_the_default_font():
    view = tw.WasteMeter(dry(), 2)
    assert view.fig.layout.font.family == fonts.plotly_family("en") and view.fig.layout.font.size == V.FONT["size"]
