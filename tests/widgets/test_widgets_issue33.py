"""Issue 33 (the readers' round), as far as the widgets go: every chapter explorer offers its real run at the
settings it opens with; the 繁體中文 widgets show no Latin word but the allowed ones; the static fallbacks' text is at
least 9 pt in a 900-px notebook column, their slot ticks whole, their legends only for what is drawn, their
captions wrapped between words."""
from __future__ import annotations

import ast
import importlib.util
import io
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.text import Text

import tinyserve
import tinyserve_widgets as tw
from tinyserve.core.request import Request
from tinyserve.engine import Engine
from tinyserve.lang import width
from tinyserve.lang.drawn import widget_words
from tinyserve_widgets import static as S
from tinyserve_widgets.predict import Predict

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------ the real-run button
def chapter_explorers() -> list[tuple[str, str]]:
    """(chapter source, the tw.Explorer(...) call as written) of every lesson that opens an explorer."""
    out = []
    for src in sorted((ROOT / "chapters" / "src").glob("7.*.py")):
        tree = ast.parse(src.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "tw.Explorer":
                out.append((src.stem, ast.unparse(node)))
    return out


class Started(Exception):
    """Raised instead of running the real model: the explorer got past its checks."""


def test_the_lessons_open_explorers():
    assert {stem[:3] for stem, _ in chapter_explorers()} >= {"7.1", "7.2", "7.3", "7.4"}


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
@pytest.mark.parametrize("stem,call", chapter_explorers(), ids=[s for s, _ in chapter_explorers()])
def test_every_chapter_explorer_offers_its_real_run_at_the_settings_it_opens_with(stem, call, lang, monkeypatch):
    class Engine_:
        def start(self, *a, **kw):
            raise Started

    monkeypatch.setattr(tinyserve, "shared_engine", lambda device="auto": Engine_())
    tinyserve.set_language(lang)
    try:
        ex = eval(call, {"tw": tw})  # the lesson's own call, as its source writes it
        assert not ex.message.value, ex.message.value
        with pytest.raises(Started):  # no refusal: the run would start
            ex.run_real()
        assert not ex.message.value, ex.message.value
    finally:
        tinyserve.set_language("en")


# ------------------------------------------------------------------------------- no English in zh-TW
def _zh_rules():
    spec = importlib.util.spec_from_file_location("zh_edition", ROOT / "tests" / "chapters" / "test_zh_edition.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.latin


def reqs():
    return [Request("r0", [1] * 40, 12, 0.0, ignore_eos=True), Request("r1", [2] * 8, 30, 0.0, ignore_eos=True),
            Request("r2", [3] * 150, 4, 0.01, ignore_eos=True), Request("r3", [4] * 20, 6, 0.02, ignore_eos=True)]


def everything_in_chinese() -> list[str]:
    """The words of every widget a lesson can show, drawn in zh-TW: an explorer with every knob and view (and its
    other settings: each policy, the paged layout, the time axis), a comparison, a board, a prediction box."""
    words: list[str] = []
    ex = tw.Explorer("chapter-7.2-longtail", policy="continuous", workload_knobs={"n": 30}, views=tw.ALL_VIEWS,
                     rate=2.0, real_knobs={"n": 4})
    words += widget_words(ex)
    for values in ({"policy": "static"}, {"policy": "dynamic", "timeout": 0.1}, {"policy": "chunked"},
                   {"kv_layout": "paged", "block_size": 16}, {"x": "time"}, {"max_model_len": 512},
                   {"order": False}):
        ex.set(**values)
        words += widget_words(ex)
    c = tw.Compare("chapter-7.1-finisher", workload_knobs={"long_output": 40})
    words += widget_words(c)
    tr = tinyserve.run(reqs(), "chunked", dry_run=True, progress=False, batch_size=2, chunk_size=16)
    words += widget_words(tw.show(tr, views=tw.ALL_VIEWS))
    p = Predict("位子 7 會浪費幾個 token？", unit="token", lo=0)
    words += widget_words(p) + [p.reveal(3)]
    p.box.value = "很多"
    words += widget_words(p)
    return [w for w in dict.fromkeys(words) if w.strip()]


def test_the_widgets_in_chinese_show_no_latin_word_but_the_allowed_ones(zh):
    latin = _zh_rules()
    bad = {}
    for text in everything_in_chinese():
        for word, ctx in latin(text):
            bad.setdefault(word, ctx)
    assert not bad, "Latin words in the zh-TW widgets (say them through t() in Chinese): " + "; ".join(
        f"{w} «{c}»" for w, c in bad.items())


def test_policy_and_layout_buttons_read_as_the_book_names_them(zh):
    ex = tw.Explorer(reqs(), policy="continuous", views=("timeline", "kv"), controls=("policy", "kv_layout"))
    assert [label for label, _ in ex.knobs["policy"].options] == ["靜態批次", "動態批次", "連續批次", "chunked prefill"]
    assert [v for _, v in ex.knobs["policy"].options] == ["static", "dynamic", "continuous", "chunked"]
    assert [label for label, _ in ex.knobs["kv_layout"].options] == ["slab", "區塊"]
    assert "連續批次" in ex.board.views["timeline"].note(0).text
    assert ex.knobs["policy"].value == "continuous"


def test_units_in_chinese(zh):
    assert tw.t("knob.rate") == "到達率（請求/秒）"
    assert tw.t("explorer.real.scaled_knob", knob=tw.t("knob.n"), value=4) == "請求數：4"
    assert "請求/秒" in tw.t("sweep_plots.fraction", load=2.0)


# ------------------------------------------------------------------------------------ the static fallbacks
def png_width(png: bytes) -> int:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">I", png[16:20])[0]


def drawn_texts(fig) -> list[Text]:
    """Every visible, non-empty text artist of a figure (titles, labels, tick labels, legends, annotations)."""
    return [a for a in fig.findobj(Text) if a.get_visible() and a.get_text().strip() and a.figure is not None]


def on_screen_px(fig, png: bytes, size_pt: float, dpi: float) -> float:
    """A font's height in CSS pixels once the PNG is shown in a COLUMN_PX notebook column (shrunk to fit if wider)."""
    return size_pt * dpi / 72 * min(1.0, S.COLUMN_PX / png_width(png))


def fallbacks():
    """The static fallbacks a lesson can store: an explorer's (timeline and waste), every board a TraceView can
    show (paged too), in both editions."""
    long = Engine().run("chapter-7.2-longtail", "continuous", dry_run=True, progress=False,
                        workload_knobs={"n": 60})
    paged = Engine().run("chapter-7.2-longtail", "continuous", dry_run=True, progress=False, kv_layout="paged",
                         block_size=16, workload_knobs={"n": 40})
    small = tinyserve.run(reqs(), "static", dry_run=True, progress=False, batch_size=4)
    return {"explorer": (long, ("timeline", "waste")), "all": (long, tw.ALL_VIEWS), "paged": (paged, tw.ALL_VIEWS),
            "four-slots": (small, ("timeline", "waste", "kv")), "composition": (long, ("composition",))}


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_every_static_fallback_draws_its_text_at_least_9_pt_in_a_900_px_column(lang):
    tinyserve.set_language(lang)
    try:
        for name, (trace, views) in fallbacks().items():
            fig = tw.board_figure(trace, k=len(trace.steps) // 2, views=views)
            png = S.png_bytes(fig)  # as the notebook stores it (also the size the test measures)
            small = [(a.get_text()[:30], round(on_screen_px(fig, png, a.get_fontsize(), S.FALLBACK_DPI), 1))
                     for a in drawn_texts(fig)
                     if on_screen_px(fig, png, a.get_fontsize(), S.FALLBACK_DPI) < S.MIN_PT * 96 / 72 - 1e-6]
            assert not small, f"{name} ({lang}, {png_width(png)} px wide): text under {S.MIN_PT} pt: {small[:8]}"
    finally:
        tinyserve.set_language("en")


def test_the_fallback_a_notebook_stores_is_the_one_measured():
    ex = tw.Explorer(reqs(), policy="continuous", views=("timeline", "waste"), batch_size=2)
    bundle = ex._repr_mimebundle_()
    png = bundle["image/png"]
    assert png_width(png) <= S.COLUMN_PX * 1.1  # drawn for the column: shown at (about) its size, not shrunk


def test_the_plotting_helpers_lessons_call_draw_no_text_under_9_pt(zh):
    """static.py's helpers also draw the lessons' own figures (7.1-7.5): their words are never set under MIN_PT."""
    from matplotlib.figure import Figure

    tr = Engine().run("chapter-7.2-longtail", "continuous", dry_run=True, progress=False, workload_knobs={"n": 40})
    fig = Figure(figsize=(10, 3))
    a1, a2 = fig.subplots(1, 2)
    S.plot_slabs_and_pages(a1, a2, tr, k=len(tr.steps) // 2, block=256)
    fig2 = Figure(figsize=(9, 6))
    b = fig2.subplots(3, 1)
    S.plot_timeline(b[0], tr)
    S.plot_composition(b[1], b[2], tr, 5)
    for f in (fig, fig2):
        S.png_bytes(f)  # drawn once, as a notebook shows it
        small = [(a.get_text()[:30], a.get_fontsize()) for a in drawn_texts(f) if a.get_fontsize() < S.MIN_PT]
        assert not small, small


def test_slot_ticks_are_whole_slots():
    from matplotlib.figure import Figure

    for slots in (2, 4, 7, 32):
        reqs_ = [Request(f"r{i}", [1] * 5, 3 + i, 0.0, ignore_eos=True) for i in range(slots)]
        tr = tinyserve.run(reqs_, "continuous", dry_run=True, progress=False, batch_size=slots)
        ax = Figure().subplots()
        S.plot_timeline(ax, tr)
        ticks = ax.get_yticks()
        assert all(float(t).is_integer() and 0 <= t < slots for t in ticks), (slots, ticks)
        view = tw.SlotTimeline(tr, 0)
        y = view.yaxis()
        assert y.tickmode == "linear" and y.tick0 == 0 and float(y.dtick).is_integer() and y.dtick >= 1


def test_a_timeline_legend_names_only_the_phases_drawn():
    from matplotlib.figure import Figure

    # decode only after a one-step prefill, no padding, no waste: continuous batching of equal requests
    tr = tinyserve.run([Request(f"r{i}", [1] * 4, 300, 0.0, ignore_eos=True) for i in range(4)], "continuous",
                       dry_run=True, progress=False, batch_size=4)
    ax = Figure().subplots()
    S.plot_timeline(ax, tr)  # 300 steps in at most MAX_COLUMNS columns: the prefill column may be binned away
    shown = {x.get_text() for x in ax.get_legend().get_texts()}
    drawn = {int(c) for c in np.unique(tw.data.timeline_data(tr, "steps", tw.data.MAX_COLUMNS).z)}
    from tinyserve_widgets import data as D

    assert shown == {D.phase_name(c) for c in drawn if c < len(tw.views.CODES) - 1}
    assert D.phase_name(2) not in shown  # padding: none here
    view = tw.SlotTimeline(tr, 0)
    named = {view.tr(1 + c).name for c in range(len(tw.views.CODES) - 1) if view.tr(1 + c).showlegend}
    assert named == shown


@pytest.mark.parametrize("text", [
    "第 3 步：12 個 decode token，加上分成 2 個 chunk 的 512 個 prefill token；token 之間最長的間隔 20.4 ms；這一步花了 31.2 ms。",
    "32 個位子裡有 31 個在算沒有人會讀的 token。32 個位子裡有 1 個閒置。到目前為止，13,440 個位子步中有 12% 做了有用的工作。",
    "Step 3: 12 decode tokens plus 512 prefill tokens in 2 chunks; the longest gap between tokens 20.4 ms; this step took 31.2 ms.",
])
@pytest.mark.parametrize("columns", [30, 44, 60])
def test_captions_wrap_between_words(text, columns):
    lines = S._wrap(text, columns).split("\n")
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost
    for line in lines:
        assert width(line) <= columns + 2, line  # a closing mark may stay on its line
        assert line[:1] not in "，。、；：）"
    pos = 0
    for line in lines[:-1]:  # where each line ends in the text: a space, or beside a CJK character or a mark
        pos = text.index(line, pos) + len(line)
        before, after = text[pos - 1], text[pos]
        assert " " in (before, after) or width(before) == 2 or width(after) == 2, (line, text[pos:pos + 10])
    if columns >= 44 and "這一步" in text:
        assert "這\n一步" not in S._wrap(text, columns)  # after the semicolon, not inside 這一步


def test_composition_and_waste_legends_name_only_what_is_drawn():
    from matplotlib.figure import Figure

    from tinyserve_widgets import data as D

    tr = tinyserve.run(reqs(), "chunked", dry_run=True, progress=False, batch_size=2, chunk_size=16)  # no padding
    a1, a2, a3 = Figure().subplots(3, 1)
    S.plot_composition(a1, a2, tr, 3)
    shown = {x.get_text() for x in a1.get_legend().get_texts()}
    assert tw.t("comp.padding") not in shown and tw.t("comp.prefill") in shown
    view = tw.StepComposition(tr, 3)
    assert {view.tr(i).name for i in range(4) if view.tr(i).showlegend} == shown - {tw.t("note.budget", budget=D.budget(tr))}
    S.plot_waste(a3, tr, 0)
    assert tw.t("waste.padding") not in {x.get_text() for x in a3.get_legend().get_texts()}
    meter = tw.WasteMeter(tr, 0)
    assert not meter.tr(1).showlegend  # padding: none in this run
