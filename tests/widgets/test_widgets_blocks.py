"""The paged layout's views (issue #24): the block map's cells agree with what the engine recorded per step, its
hover names the owner, the board's cursor moves it, the KV view marks preemptions, the Explorer's layout knobs
reach the engine, and both languages draw (static pictures too) without a missing glyph."""
from __future__ import annotations

import html
import re
import warnings

import numpy as np
import pytest

import tinyserve
import tinyserve_widgets as tw
from tinyserve import lang
from tinyserve.core.request import Request
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve_widgets import data as D
from tinyserve_widgets.static import png_bytes
from tinyserve_widgets.views import values

CJK = re.compile(r"[\u4e00-\u9fff]")
KEYS = [k for k in lang.table() if "." in k]
BPT = 327680  # KV bytes per token of the default preset (h200-70b-fp8): a budget of N blocks is N * 4 * BPT


def three(policy="continuous", **knobs):
    """Three requests of 8 + 30 positions in a pool of 20 blocks of 4: the last admitted is preempted once."""
    reqs = [Request(f"seq-{i}", list(range(1, 9)), 30, 0.0, ignore_eos=True) for i in "pqr"]
    return Engine().run(reqs, policy, dry_run=True, progress=False, kv_layout="paged", block_size=4, batch_size=3,
                        kv_budget=20 * 4 * BPT, **knobs)


def mixed(policy="chunked", **knobs):
    spec = (("a", 5, 9, 0.0), ("b", 40, 3, 0.0), ("c", 150, 4, 0.02), ("d", 3, 12, 0.05), ("e", 20, 2, 0.3))
    reqs = [Request(i, list(range(1, p + 1)), n, at, ignore_eos=True) for i, p, n, at in spec]
    if policy == "chunked":
        knobs.setdefault("chunk_size", 16)
    return Engine().run(reqs, policy, dry_run=True, progress=False, kv_layout="paged", block_size=4, batch_size=3,
                        **knobs)


def test_one_request_by_hand():
    # prompt 5, 3 tokens out, blocks of 4: after the prefill 5 positions (2 blocks, 3 empty), then the first two
    # decodes store positions 6 and 7 (the last token's K/V is never stored): 6 -> 2 empty, 7 -> 1 empty
    r = Request("x", [1, 2, 3, 4, 5], 3, 0.0, ignore_eos=True)
    tr = Engine().run([r], "continuous", dry_run=True, progress=False, kv_layout="paged", block_size=4)
    d = D.block_map(tr)
    assert d.exact and d.top == 2 and len(tr.steps) == 3
    assert d.z.tolist() == [[D.HELD] * 3, [D.BWASTE] * 3]
    assert d.unfilled[1].tolist() == [3, 2, 1]


@pytest.mark.parametrize("run", [three, lambda: three("chunked", chunk_size=4), mixed,
                                 lambda: mixed("static")])
def test_cells_agree_with_the_steps(run):
    tr = run()
    d = D.block_map(tr)
    assert d.exact  # one block-step per cell: the counts below are the map's own cells
    held = (d.z != D.FREE).sum(axis=0)
    assert held.tolist() == [s.blocks_used for s in tr.steps]
    assert d.unfilled.sum(axis=0).tolist() == [s.block_waste for s in tr.steps]
    assert ((d.unfilled > 0) == (d.z == D.BWASTE)).all()
    assert (tr.num_blocks - held).tolist() == [s.blocks_free for s in tr.steps]


def test_preemption_shows_in_the_map_the_sentence_and_the_kv_view():
    tr = three()
    k = next(i for i, s in enumerate(tr.steps) if s.preempted)
    (victim,) = tr.steps[k].preempted
    view = tw.BlockView(tr, k)
    ids = [str(view.cell(b, k)[1]) for b in range(view.data.top)]
    assert not any(victim in s for s in ids)  # its blocks went back in the step that preempted it
    assert any(victim in str(view.cell(b, k - 1)[1]) for b in range(view.data.top))
    assert "1 preemption(s) so far" in view.words.value and "0 preemption(s)" in tw.BlockView(tr, k - 1).words.value
    kv = tw.KVView(tr, k)
    assert list(values(kv.tr(3).x)) == [k] and kv.tr(3).showlegend
    assert kv.tr(0).name == "held (blocks × block size)" and "1 preemption(s) so far" in kv.words.value
    assert kv.note(0).text == "KV cache: held in blocks vs used"
    assert tw.KVView(mixed()).tr(3).showlegend is False


def test_hover_names_the_owner_and_its_block_index():
    tr = mixed()
    view = tw.BlockView(tr)
    seen = 0
    for block, rid, index, first, last in tr.block_spans[::7]:
        for k in (first, last):
            state, text = view.cell(block, k)
            assert state in (D.HELD, D.BWASTE)
            assert f"{rid}, block {index} of its table" in text
            seen += 1
    assert seen > 10
    free = [(b, k) for b in range(view.data.top) for k in range(len(tr.steps)) if view.data.z[b, k] == D.FREE]
    assert free and view.cell(*free[0]) == (D.FREE, "free")
    assert view.tr(0).hovertemplate.startswith("block %{y} · step %{x}")


def test_the_boards_cursor_moves_the_block_map():
    tr = three()
    board = tw.show(tr, views=("timeline", "blocks", "kv"), k=2)
    blocks = board.views["blocks"]
    assert blocks.k == 2 and blocks.words.value.startswith("Step 2:")
    board.set_cursor(9)
    assert blocks.k == 9 and board.views["timeline"].k == 9
    assert (blocks.shape(0).x0, blocks.shape(0).x1) == (8.5, 9.5)
    assert blocks.words.value.startswith(f"Step 9: {tr.steps[9].blocks_used} of 20 blocks")
    alone = tw.BlockView(tr, 0)
    alone.set_cursor(30)
    assert alone.k == 30 and alone.shape(0).x0 == 29.5


def test_long_runs_are_binned_and_say_so():
    tr = tinyserve.run("chapter-7.2-longtail", policy="continuous", dry_run=True, kv_layout="paged",
                       workload_knobs={"n": 60}, kv_budget=2 * 10**9)
    view = tw.BlockView(tr, 500)
    d = view.data
    assert not d.exact and d.z.shape[0] <= D.MAX_ROWS and d.z.shape[1] <= D.MAX_BLOCK_COLUMNS
    assert "rows of" in view.note(1).text and "most frequent state" in view.note(1).text
    assert view.tr(0).hovertemplate.startswith("blocks near")
    col = np.flatnonzero((d.first_step <= 500) & (d.last_step >= 500))[0]
    assert view.shape(0).x0 == d.x_edges[col] and d.x_edges[col] <= 500 <= d.x_edges[col + 1]
    assert f"Step 500: {tr.steps[500].blocks_used:,} of {tr.num_blocks:,} blocks" in view.words.value


def test_a_slab_run_says_it_has_no_blocks():
    tr = tinyserve.run("chapter-7.1-padding", policy="static", dry_run=True)
    view = tw.BlockView(tr, 1)
    assert view.data.z.size == 0 and "kv_layout='paged'" in view.words.value
    kv = tw.KVView(tr)
    assert kv.tr(0).name == "reserved" and kv.note(0).text == "KV cache: reserved vs used"
    # the cursor's dots are named in the legend (left unnamed, JupyterLab listed them as "trace 2")
    assert kv.tr(2).name == "at the cursor's step" and kv.tr(2).showlegend


def test_explorer_layout_knobs_reach_the_engine_and_bad_ones_show_its_message():
    ex = tw.Explorer("chapter-7.1-padding", policy="static", views=("timeline", "blocks"))
    assert {"kv_layout", "block_size"} <= set(ex.controls) and ex.knobs["block_size"].disabled
    assert ex.trace.kv_layout == "slab"
    for size in (1, 16, 256):
        tr = ex.set(kv_layout="paged", block_size=size)
        assert tr.kv_layout == "paged" and tr.block_size == size and not ex.knobs["block_size"].disabled
        assert ex.board.views["blocks"].data.top == max(s.blocks_used for s in tr.steps)
    before = ex.trace
    assert ex.set(kv_budget=4 * BPT) is None  # a pool of 16 positions: too small for any prompt
    assert ex.trace is before and "Cannot run these settings" in ex.message.value
    with pytest.raises(TinyserveError) as e:  # the same words as the engine's own error
        tinyserve.run("chapter-7.1-padding", policy="static", dry_run=True, kv_layout="paged", block_size=256,
                      kv_budget=4 * BPT, batch_size=ex.knobs["batch_size"].value)
    assert html.escape(str(e.value)) in ex.message.value
    assert "kv_layout" not in tw.Explorer("chapter-7.1-padding", views=("timeline", "waste")).controls
    assert tw.Explorer("chapter-7.1-padding", views=("timeline",), kv_layout="paged").trace.kv_layout == "paged"


def test_block_map_and_kv_view_in_chinese(zh):
    tr = three()
    board = tw.show(tr, views=("blocks", "kv"), k=17)
    for view in (tw.BlockView(tr, 17), board.views["blocks"], board.views["kv"]):
        texts = [a.text for a in view.fig.layout.annotations if a.text] + [view.words.value]
        texts += [x.name for x in view.fig.data if x.name] + [x.hovertemplate for x in view.fig.data if x.hovertemplate]
        raw = [(k, s) for s in texts for k in KEYS if k in s]
        assert not raw, raw
        assert CJK.search(view.words.value) and "搶佔" in view.words.value
    cell = tw.BlockView(tr, 0).cell(0, 0)[1]
    assert CJK.search(cell) and "page table" in cell
    assert tw.Explorer("chapter-7.1-padding", views=("blocks",)).knobs["block_size"].description == "區塊大小（位置數）"


@pytest.mark.parametrize("code", ["en", "zh-TW"])
def test_static_fallback_draws_the_block_map_without_missing_glyphs(code):
    tinyserve.set_language(code)
    try:
        tr = three()
        fig = tw.board_figure(tr, k=17, views=("timeline", "blocks", "kv"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            png = png_bytes(fig)
        assert png.startswith(b"\x89PNG")
        assert not [w for w in caught if "Glyph" in str(w.message) and "missing" in str(w.message)]
        ax = next(a for a in fig.get_axes() if a.get_ylabel() == lang.t("axis.block"))
        assert D.blocks_sentence(tr, 17)[:12] in ax.get_xlabel()
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == [lang.t(f"blocks.{s}") for s in D.BLOCK_STATES]
    finally:
        tinyserve.set_language("en")


@pytest.mark.parametrize("policy,knobs", [("continuous", {}), ("chunked", {"chunk_size": 64})])
def test_block_usage_of_a_long_run_with_preemptions_equals_the_steps(policy, knobs):
    tr = tinyserve.run("chapter-7.2-longtail", policy=policy, dry_run=True, kv_layout="paged",
                       workload_knobs={"n": 60}, kv_budget=2 * 10**9, **knobs)
    assert tr.metrics()["preemptions"] > 0
    u = tr.block_usage()
    assert u.held.tolist() == [s.blocks_used for s in tr.steps]
    assert u.waste.tolist() == [s.block_waste for s in tr.steps]
    assert (u.waste_positions > 0).all() and (u.waste_positions < tr.block_size).all()
