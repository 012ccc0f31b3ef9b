"""Widgets a reader can trust: one colour-blind-safe palette, titles that name the workload and its knobs,
labels that fit, the engine's own message for a setting it rejects, a real run scaled down and said so."""
from __future__ import annotations

from pathlib import Path

import pytest

import tinyserve_widgets as tw
from tinyserve.engine import Engine
from tinyserve.trace.arrays import DECODE, PADDING, PREFILL, WASTED
from tinyserve_widgets import data as D
from tinyserve_widgets.palette import OKABE_ITO, PALETTE

WIDGETS = Path(tw.__file__).parent


def test_one_okabe_ito_palette_and_no_red_green_pair_left():
    for old in ("#54a24b", "#e45756", "#e15759", "#4c78a8"):  # the previous green/red/blue, anywhere in widgets/
        assert not [p.name for p in WIDGETS.glob("*.py") if old in p.read_text().lower()], old
    assert D.COLORS[DECODE] == OKABE_ITO["bluish_green"] and D.COLORS[WASTED] == OKABE_ITO["vermillion"]
    assert D.COLORS[PREFILL] == OKABE_ITO["blue"] and D.COLORS[PADDING] == OKABE_ITO["yellow"]
    assert PALETTE["useful"] != PALETTE["wasted"]


def test_a_named_workload_with_a_knob_is_titled_by_name_and_knob():
    tr = Engine().run("chapter-7.1-finisher", "static", batch_size=8, workload_knobs={"n": 9, "long_output": 40},
                      dry_run=True, progress=False)
    assert tr.workload_label() == "chapter-7.1-finisher (n=9, long_output=40)"
    view = tw.show(tr, views=("timeline",))
    assert "chapter-7.1-finisher (n=9, long_output=40)" in view.views["timeline"].note(0).text
    assert "custom" not in view.views["timeline"].note(0).text
    ex = tw.Explorer("chapter-7.2-longtail", policy="continuous", rate=0.5, controls=("policy", "rate"),
                     workload_knobs={"n": 20}, views=("timeline",))
    assert "chapter-7.2-longtail (n=20, rate=0.5)" in ex.status.value


def test_buttons_fit_their_labels_and_offer_only_the_chosen_policies():
    ex = tw.Explorer("chapter-7.1-finisher", policy="static", policies=("static", "dynamic"), n=4,
                     views=("waste",), controls=("policy", "batch_size", "timeout", "order", "max_batch_tokens"))
    assert [v for _, v in ex.knobs["policy"].options] == ["static", "dynamic"]
    assert [label for label, _ in ex.knobs["policy"].options] == ["static", "dynamic"]  # English: the engine's
    for name in ("policy", "order", "x"):  # width: auto, so "continuous" and "decode-first" are never cut
        assert ex.knobs[name].style.button_width == "auto"
    assert ex.knobs["max_batch_tokens"].options[0][0] == "auto"  # its meaning is in the description, not cut


def test_a_setting_the_engine_rejects_shows_its_message_not_a_traceback():
    ex = tw.Explorer("chapter-7.1-finisher", policy="continuous", n=4, views=("waste",))
    before = ex.trace
    assert ex.set(batch_size=0) is None
    assert ex.trace is before
    assert "batch_size" in ex.message.value and "Traceback" not in ex.message.value
    assert ex.message.value.count("<div") == 1  # one message box


def test_the_slab_length_knob_reaches_the_engine_and_rejections_are_counted():
    ex = tw.Explorer("chapter-7.2-longtail", policy="continuous", views=("kv",), controls=("batch_size", "max_model_len"),
                     workload_knobs={"n": 30})
    assert ex.trace.slab_tokens == 4096
    tr = ex.set(max_model_len=512)
    assert tr.slab_tokens == 512 and tr.steps[0].kv_reserved_bytes == tr.num_slots * 512 * tr.kv_bytes_per_token
    rejected = sum(r.status == "rejected" for r in tr.requests)
    assert rejected > 0 and f"{rejected} of 30 requests rejected" in ex.status.value
    assert "slab of 512 positions" in D.kv_sentence(tr, 0)


def test_the_kv_words_of_a_paged_run_count_its_blocks_not_a_slab():
    tr = Engine().run("chapter-7.2-longtail", "continuous", batch_size=64, dry_run=True, progress=False,
                      kv_layout="paged", block_size=16, workload_knobs={"n": 40})
    k = len(tr.steps) // 2
    st = tr.steps[k]
    words = D.kv_sentence(tr, k)
    assert st.blocks_used > 0 and "slab" not in words
    assert f"{st.blocks_used:,} of {st.blocks_used + st.blocks_free:,} blocks of 16 positions" in words
    assert f"{st.kv_reserved_bytes / 1e6:.1f} MB held" in words or f"{st.kv_reserved_bytes / 1e9:.1f} GB held" in words


def test_the_real_run_is_scaled_down_and_says_so(monkeypatch):
    import tinyserve
    from helpers import make_random_model

    model = make_random_model(n_positions=256, n_layer=1, n_head=2, n_embd=16)
    monkeypatch.setattr(tinyserve, "shared_engine", lambda device="auto": Engine(model))
    ex = tw.Explorer("chapter-7.1-finisher", policy="continuous", n=6, views=("waste",), controls=("policy", "n"),
                     workload_knobs={"long_output": 30}, real_knobs={"n": 2, "long_output": 5})
    assert len(ex.trace.requests) == 6
    real = ex.run_real()
    assert real is ex.trace and len(real.requests) == 2 and real.clock == "wall"
    assert real.workload_label() == "chapter-7.1-finisher (long_output=5, n=2)"
    assert "Scaled down for the real run (requests: 2, long_output: 5)" in ex.status.value


def test_a_real_run_the_cost_model_says_is_too_slow_is_not_started(monkeypatch):
    """The explorer prices the real run's steps with the CPU's fitted cost model first; past REAL_LIMIT_S it says
    so in the widget and starts nothing (a knob moved far can make a short workload slow)."""
    import tinyserve
    from tinyserve_widgets import explorer as E

    started = []
    monkeypatch.setattr(tinyserve, "shared_engine", lambda device="auto": started.append(device))
    ex = tw.Explorer("chapter-7.3-long-prompt", policy="chunked", chunk_size=512, views=("composition",))
    monkeypatch.setattr(E, "REAL_LIMIT_S", 0.01)  # any real run of this workload costs more than 10 ms
    assert ex.run_real() is None and started == []
    assert "would compute for about" in ex.message.value and "cpu-tiny" in ex.message.value
    # nothing moved: it says so, never "the slider you just moved"
    assert "No knob was moved" in ex.message.value and "moved back" not in ex.message.value
    ex.set(chunk_size=64)
    assert ex.run_real() is None and started == []
    assert "Moved since the explorer opened: chunk length 512 → 64" in ex.message.value


def test_the_real_run_estimate_counts_compute_not_the_wait_for_arrivals():
    """7.1's explorer opens at 0.5 req/s: its 12 scaled-down requests arrive over ~25 s, but the real loop jumps
    its clock over idle gaps (it never sleeps), so the run computes for about a second: it must be offered."""
    from tinyserve.core.workloads import get_workload
    from tinyserve_widgets.explorer import REAL_LIMIT_S, real_seconds

    reqs = [r.fresh() for r in get_workload("chapter-7.2-longtail", seed=0, n=12, rate=0.5)]
    dry = Engine().run(reqs, "dynamic", dry_run=True, hardware="cpu-tiny", progress=False, slab="longest",
                       batch_size=32, timeout=0.5)
    assert dry.metrics()["duration_s"] > REAL_LIMIT_S  # the old estimate: waiting included, refused
    assert real_seconds(dry) < REAL_LIMIT_S / 3  # compute only: a few seconds at most
    assert real_seconds(dry) == pytest.approx(sum(s.duration_s for s in dry.steps))
