"""The widgets draw the Trace and nothing else: at cursor step k every view shows step k, figure data equals the
trace for every policy, a knob change draws the engine's run for that knob, bad knobs leave a message."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tinyserve_widgets as tw
from tinyserve.core.request import Request
from tinyserve.core.workloads import get_workload
from tinyserve.engine import Engine
from tinyserve.trace.arrays import DECODE, IDLE, PADDING, PREFILL, WASTED
from tinyserve.trace.record import Trace
from tinyserve_widgets import data as D
from tinyserve_widgets.views import values

POLICIES = [("static", {"batch_size": 4}), ("dynamic", {"batch_size": 4, "timeout": 0.05}),
            ("continuous", {"batch_size": 4}), ("continuous", {"batch_size": 4, "prefill_first": False}),
            ("chunked", {"batch_size": 4, "chunk_size": 64, "max_batch_tokens": 80})]


def reqs(*spec) -> list[Request]:
    """(id, prompt_len, max_new_tokens, arrival_s) with EOS ignored, so a dry run knows every length."""
    return [Request(s[0], list(range(1, s[1] + 1)), s[2], s[3], ignore_eos=True) for s in spec]


MIXED = reqs(("a", 5, 9, 0.0), ("b", 40, 3, 0.0), ("c", 12, 6, 0.01), ("d", 150, 4, 0.02), ("e", 3, 12, 0.05),
             ("f", 20, 2, 0.3), ("g", 7, 5, 0.31))


def dry(requests, policy, **knobs) -> Trace:
    return Engine().run(requests, policy, dry_run=True, progress=False, **knobs)


def cell(w) -> int:
    """The phase code a slot-step of this work must be drawn with (padding when most of its tokens are padding)."""
    return {"decode": DECODE, "wasted": WASTED}.get(w.phase, PADDING if w.padding > w.tokens else PREFILL)


def waste_by_hand(tr: Trace, k: int) -> dict:
    """Slot-steps of steps 0..k counted from the works: a padded prefill is split by its tokens."""
    out = {"useful": 0.0, "padding": 0.0, "wasted": 0.0, "idle": 0.0}
    for s in tr.steps[:k + 1]:
        out["idle"] += tr.num_slots - len(s.works)
        for w in s.works:
            if w.phase == "wasted":
                out["wasted"] += 1
            else:
                out["padding"] += w.padding / (w.tokens + w.padding)
                out["useful"] += w.tokens / (w.tokens + w.padding)
    return out


@pytest.mark.parametrize("policy,knobs", POLICIES)
def test_at_cursor_k_every_view_shows_step_k(policy, knobs):
    tr = dry(MIXED, policy, **knobs)
    view = tw.show(tr)
    assert "application/vnd.jupyter.widget-view+json" in view._repr_mimebundle_()
    n = len(tr.steps)
    for k in sorted({0, 1, n // 2, n - 1}):
        view.set_cursor(k)
        v = view.views
        assert {name: x.k for name, x in v.items()} == dict.fromkeys(v, k)
        s = tr.steps[k]
        shape = v["timeline"].shape(0)
        assert shape.x0 < k < shape.x1  # x in steps: the column of step k is k-0.5 .. k+0.5
        assert f"step {k} of {n - 1}" in v["timeline"].words.value
        assert v["waste"].totals == pytest.approx(waste_by_hand(tr, k))
        segments = v["composition"].segments
        assert sum(n_ for _, n_ in segments) == s.tokens
        decodes = sum(w.phase == "decode" for w in s.works)
        assert (decodes == 0) or segments[0] == (f"{decodes} decodes", decodes)
        chunks = [lbl for lbl, _ in segments if ": chunk " in lbl]
        assert chunks == [f"{w.request_id}: chunk {w.start}–{w.start + w.tokens - 1}" for w in s.works
                          if w.phase == "prefill"]
        unit, scale = D.kv_unit(tr)
        assert list(v["kv"].tr(2).y) == [s.kv_reserved_bytes / scale, s.kv_used_bytes / scale]
        assert v["requests"].shape(0).x0 == pytest.approx(s.start_s + s.duration_s)
        done = sum(1 for r in tr.requests if r.finish_s is not None and r.finish_s <= s.start_s + s.duration_s)
        assert f"{done} of {len(tr.requests)} requests finished by step {k}" in v["latency"].words.value


@pytest.mark.parametrize("policy,knobs", POLICIES)
def test_figure_data_equals_the_trace(policy, knobs):
    tr = dry(MIXED, policy, **knobs)
    view = tw.show(tr)
    heat = view.views["timeline"].tr(0)
    want = np.full((tr.num_slots, len(tr.steps)), IDLE)
    for j, s in enumerate(tr.steps):
        for w in s.works:
            want[w.slot, j] = cell(w)
    assert np.array_equal(values(heat.z), want)
    names = {PREFILL: "prefill", PADDING: "padding", DECODE: "useful decode", WASTED: "wasted decode"}
    for j in (0, len(tr.steps) - 1):  # hover: request, phase, tokens, positions, step time
        s = tr.steps[j]
        for w in s.works:
            assert np.asarray(heat.text)[w.slot, j] == (
                f"step {j} · {w.request_id} · {names[cell(w)]}<br>{w.tokens} tokens (+{w.padding} padding), "
                f"positions {w.start}–{w.start + w.tokens - 1}<br>step time {round(s.duration_s * 1e3, 2):g} ms")
    m = tr.metrics()
    last = len(tr.steps) - 1
    assert D.waste_at(tr, last) == pytest.approx(m["slot_steps"])
    comp = view.views["composition"]
    total = sum(values(comp.tr(i).y) for i in range(4))  # decode + prefill + padding + wasted series
    assert total.tolist() == [s.tokens for s in tr.steps]
    kv = view.views["kv"]
    unit, scale = D.kv_unit(tr)
    assert list(values(kv.tr(0).y)) == [s.kv_reserved_bytes / scale for s in tr.steps]
    assert list(values(kv.tr(1).y)) == [s.kv_used_bytes / scale for s in tr.steps]
    assert kv.yaxis().title.text == f"KV cache ({unit})"
    lat = view.views["latency"]
    assert list(values(lat.tr(0).x)) == sorted((r.first_token_s - r.arrival_s) * 1e3 for r in tr.requests)
    p50, p99 = lat.tr(1).x
    assert (p50, p99) == pytest.approx((m["ttft_ms"]["p50"], m["ttft_ms"]["p99"]))


def test_waste_meter_by_hand():
    # static batch of 3, equal prompts (no padding): a needs 6 tokens, b and c 2 each. Steps: 1 prefill + 5
    # decodes = 6 steps x 3 slots = 18 slot-steps; b and c each compute 4 wasted decodes (steps 2-5): 8 wasted,
    # 10 useful. At step 2 two of the three slots compute for finished requests.
    tr = dry(reqs(("a", 4, 6, 0.0), ("b", 4, 2, 0.0), ("c", 4, 2, 0.0)), "static", batch_size=3)
    assert len(tr.steps) == 6
    assert D.waste_at(tr, 5) == {"useful": 10.0, "padding": 0.0, "wasted": 8.0, "idle": 0.0}
    assert D.waste_at(tr, 1) == {"useful": 6.0, "padding": 0.0, "wasted": 0.0, "idle": 0.0}
    assert D.waste_sentence(tr, 2).startswith("2 of 3 slots are computing tokens nobody will read.")
    assert "So far 78% of the 9 slot-steps did useful work." in D.waste_sentence(tr, 2)  # 7 of 9


def test_binned_timeline_says_so_and_keeps_the_most_frequent_phase():
    # one slot, continuous: r1 prefills at step 0 then decodes 9 steps: 10 steps; in columns of 4 steps:
    # [P D D D] [D D D D] [D D] -> decode everywhere, and the figure says the columns are bins.
    tr = dry(reqs(("r1", 8, 10, 0.0)), "continuous", batch_size=1)
    d = D.timeline_data(tr, "steps", max_columns=3)
    assert d.bin == 4 and d.z.tolist() == [[DECODE, DECODE, DECODE]]
    assert "10 steps drawn as 3 columns of 4 steps" in d.note
    assert d.text[0, 0] == "steps 0–3: prefill 1, padding 0, decode 3, wasted 0, idle 0"
    assert d.text[0, 2] == "steps 8–9: prefill 0, padding 0, decode 2, wasted 0, idle 0"


def test_binned_counts_are_each_cells_phases_counted_one_by_one():
    # static batches on several slots, padding and waste included; bins of 7 steps, the last one short
    tr = Engine().run("chapter-7.1-padding", "static", batch_size=4, dry_run=True, progress=False)
    d = D.timeline_data(tr, "steps", max_columns=max(2, len(tr.steps) // 7))
    phase = tr.phase_grid().phase
    code = {"prefill": PREFILL, "padding": PADDING, "decode": DECODE, "wasted": WASTED, "idle": IDLE}
    assert d.bin > 1 and len(set(phase.ravel().tolist())) >= 3  # the premise: several phases share the bins
    for s in range(tr.num_slots):
        for c, (a, b) in enumerate(zip(d.first_step, d.last_step)):
            cells = phase[s, a:b + 1].tolist()
            want = [cells.count(code[f]) for f in D.BIN_FIELDS[2:]]
            assert d.hover[s, c].tolist() == [a, b] + want


def test_time_axis_labels_the_clock_and_shows_idle_gaps():
    # x arrives at 0 and finishes long before y arrives at 50 s: the gap is a column with no step
    tr = dry(reqs(("x", 4, 2, 0.0), ("y", 4, 2, 50.0)), "continuous", batch_size=1)
    d = D.timeline_data(tr, "time")
    assert "modeled" in d.x_label and tr.hardware in d.x_label
    assert d.z.tolist() == [[PREFILL, DECODE, D.GAP, PREFILL, DECODE]]
    assert d.x_edges[2] == tr.steps[1].start_s + tr.steps[1].duration_s and d.x_edges[3] == 50.0


def test_a_knob_change_draws_the_engine_run_for_that_knob():
    ex = tw.Explorer("chapter-7.1-finisher", policy="static", batch_size=32, n=12)
    ex.set(batch_size=8)
    want = Engine().run(get_workload("chapter-7.1-finisher", n=12), "static", batch_size=8, dry_run=True,
                        progress=False)
    assert [(s.start_s, s.works) for s in ex.trace.steps] == [(s.start_s, s.works) for s in want.steps]
    # 2,020 steps: the figure is the binned timeline of exactly that run
    assert np.array_equal(values(ex.board.views["timeline"].tr(0).z), D.timeline_data(want).z)
    scale = D.kv_unit(want)[1]
    assert list(values(ex.board.views["kv"].tr(0).y)) == [s.kv_reserved_bytes / scale for s in want.steps]
    ex.set(x="time")
    assert "modeled" in ex.board.views["timeline"].xaxis().title.text
    ex.set(policy="chunked", chunk_size=16)
    assert ex.trace.knobs["chunk_size"] == 16 and ex.board.views["composition"].trace is ex.trace
    assert ex.knobs["timeout"].disabled and not ex.knobs["chunk_size"].disabled


def test_the_explorer_keeps_only_its_last_traces():
    from tinyserve_widgets.explorer import HISTORY

    ex = tw.Explorer("chapter-7.1-padding", policy="static", batch_size=2)
    sizes = [1, 2, 3, 4] * 3  # 12 knob changes after the first draw: each a new run, the memory of a long drag
    for b in sizes:
        ex.set(batch_size=b)
    assert len(ex.traces) == HISTORY == 8 and ex.traces[-1] is ex.trace
    assert [tr.knobs["batch_size"] for tr in ex.traces] == sizes[-HISTORY:]


@pytest.mark.parametrize("knobs,ok", [
    ({"batch_size": 1}, True), ({"batch_size": 256}, True),
    ({"policy": "chunked", "chunk_size": 1}, True), ({"policy": "chunked", "chunk_size": 8192}, True),
    ({"n": 0}, False),  # zero requests: the workload refuses
    ({"max_model_len": 256}, None),  # the long request cannot fit a 256-position slab: rejected alone, the rest run
])
def test_extreme_knobs_keep_the_explorer_usable(knobs, ok):
    ex = tw.Explorer("chapter-7.1-finisher", policy="static", n=6)
    before = ex.trace
    got = ex.set(**knobs)
    assert "application/vnd.jupyter.widget-view+json" in ex._repr_mimebundle_()
    if ok is False:
        assert got is None and ex.trace is before and "Cannot run these settings" in ex.message.value
    else:
        assert got is ex.trace and ex.message.value == ""
    assert ex.set(n=3, batch_size=4) is not None and ex.message.value == ""  # still usable afterwards


def test_a_kv_budget_too_small_for_any_request_says_so():
    ex = tw.Explorer("chapter-7.1-finisher", policy="static", n=4)
    before = ex.trace
    assert ex.set(kv_budget=10**8, n=1) is None  # one 4,096-position slab needs 1.34 GB, more than 0.1 GB
    assert ex.trace is before and "1 of 1 requests rejected" in ex.message.value


def test_a_trace_without_steps_draws_its_latencies(tmp_path):
    tr = dry(MIXED, "continuous", batch_size=4)
    import json

    (tmp_path / "s.json").write_text(json.dumps(tr.summary()))
    summary = Trace.load(tmp_path / "s.json")
    view = tw.show(summary)
    assert list(values(view.views["latency"].tr(0).x)) == list(D.latency_ms(tr)["ttft"])
    assert "no steps" in view.views["timeline"].note(1).text
    fig = tw.board_figure(summary)
    assert len(fig.axes) >= 6


@pytest.mark.parametrize("policy,knobs", POLICIES)
def test_static_fallback_draws_every_view(policy, knobs):
    tr = dry(MIXED, policy, **knobs)
    fig = tw.board_figure(tr, k=3)
    # timeline, waste, kv, two composition panels, requests, ttft, e2e
    assert len(fig.axes) == 8
    assert fig._repr_png_().startswith(b"\x89PNG")  # a notebook shows it without pyplot's inline backend


def test_compare_shares_one_cursor_and_one_workload():
    c = tw.Compare("chapter-7.1-finisher", n=6)
    c.left.knobs["n"].value = 5
    assert c.right.knobs["n"].value == 5 and len(c.right.trace.requests) == 5
    c.cursor.value = 3
    assert c.left.board.views["timeline"].k == c.right.board.views["timeline"].k == 3
    assert "static" in c.words.value and "continuous" in c.words.value
    assert "application/vnd.jupyter.widget-view+json" in c._repr_mimebundle_()  # displays as a widget


def test_real_run_draws_the_measured_trace_and_survives_an_interrupt(monkeypatch):
    import tinyserve
    from helpers import make_random_model
    from tinyserve.loop import Run

    model = make_random_model(n_positions=64, n_layer=1, n_head=2, n_embd=16)
    monkeypatch.setattr(tinyserve, "shared_engine", lambda device="auto": Engine(model))
    work = reqs(("a", 6, 4, 0.0), ("b", 3, 2, 0.0))
    ex = tw.Explorer(work, policy="continuous", batch_size=2, x="time")
    dry_trace = ex.trace
    real = ex.run_real()
    assert real is ex.trace and real.clock == "wall" and not real.dry_run
    assert [len(s.works) for s in real.steps] == [len(s.works) for s in dry_trace.steps]  # same schedule
    assert "measured" in ex.board.views["timeline"].xaxis().title.text
    step = Run.step
    calls = {"n": 0}

    def interrupted(self):  # the real run's second step (the explorer first prices the run with a dry run)
        calls["n"] += not self.dry_run
        if calls["n"] == 2 and not self.dry_run:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(Run, "step", interrupted)
    assert ex.run_real() is None and ex.trace is real and "interrupted after 1 steps" in ex.message.value
    monkeypatch.setattr(Run, "step", step)
    assert ex.set(batch_size=1) is not None and not ex.real.disabled


def test_every_word_comes_from_the_table():
    import importlib

    from tinyserve import lang
    from tinyserve_widgets import words

    files = [p for p in Path(tw.__file__).parent.glob("*.py") if p.name != "words.py"]
    for p in files:
        importlib.import_module(f"tinyserve_widgets.{p.stem}")
    src = "".join(p.read_text() for p in files)
    keys = set(re.findall(r'\bt\("([a-z_.0-9]+)"', src))
    table = lang.table()
    assert keys and keys <= set(table), keys - set(table)
    for prefix in ("phase.", "waste.", "comp.", "req.", "state.", "knob.", "lat.", "compare."):  # f-string keys
        assert any(k.startswith(prefix) for k in table)
    # one table: the widgets keep no words of their own and look them up in tinyserve.lang (words.py re-exports none)
    assert not hasattr(words, "WORDS") and not hasattr(words, "set_language") and tw.set_language is lang.set_language


def test_set_language_is_tinyserves_and_an_unknown_code_lists_the_choices():
    import tinyserve

    try:
        assert tw.set_language("zh-TW") == "zh-TW" and tinyserve.language() == "zh-TW"
        assert tw.t("axis.slot") == "位子"
    finally:
        tinyserve.set_language("en")
    assert tw.t("axis.slot") == "slot"
    with pytest.raises(ValueError, match="unknown language 'nope'; available: en"):
        tw.set_language("nope")
