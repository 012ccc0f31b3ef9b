"""The dry run's fast paths change how things are computed, never what: checked against the plain computations."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from tinyserve.core.scheduling.scheduler import decode_work, decodes_of
from tinyserve.core.scheduling.static import DONE, StaticBatching
from tinyserve.core.config import GPTConfig
from tinyserve.core.request import Request, SlotWork, Work, _valid_ids
from tinyserve.core.tokenizer import BOS
from tinyserve.core.workloads import get_workload, ids_known, list_workloads
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.loop import gc_paused
from tinyserve.trace.arrays import _WORK_CODE


def _fresh_decodes(policy: StaticBatching) -> list[tuple]:
    """The batch's next decode step as the static plan built it before its rows were kept: new Works each step."""
    edge = policy.padded_len + policy.decode_steps - 1
    out = []
    for r in policy.running:
        start = r.num_prefilled + len(r.output) - 1
        w = Work(r.slot, r, "wasted" if r.status in DONE else "decode", start, 1, 0, edge - start)
        out.append((w.slot, w.request.id, w.phase, w.start, w.tokens, w.padding, w.pad_keys))
    return out


@pytest.mark.parametrize("policy", ["static", "dynamic"])
def test_static_rows_moved_in_place_equal_fresh_works_every_step_with_an_abort(policy):
    run = Engine().start("chapter-7.1-finisher", policy, batch_size=8, dry_run=True)
    inner = run.policy.plan
    checked = 0

    def plan(now, more_coming):
        nonlocal checked
        p = inner(now, more_coming)
        if p.works and p.works[0].phase != "prefill":  # a decode step (plan() has counted it in decode_steps)
            got = [(w.slot, w.request.id, w.phase, w.start, w.tokens, w.padding, w.pad_keys) for w in p.works]
            assert got == _fresh_decodes(run.policy)
            checked += 1
        return p

    run.policy.plan = plan
    aborted = 0
    while not run.done:
        run.step()
        live = [r for r in run.policy.running if not r.done]
        if len(live) >= 2 and run.steps[-1].works[0].phase != "prefill" and aborted < 2:
            run.abort(live[-1].id)  # mid-batch, others still decoding: the kept rows must drop it
            aborted += 1
    assert checked > 100 and aborted == 2
    assert any(w.phase == "wasted" for s in run.steps for w in s.works)


@pytest.mark.parametrize("policy", ["static", "dynamic", "continuous", "chunked"])
def test_the_kv_used_tally_equals_the_sum_over_slot_holders_every_step_with_an_abort(policy):
    """kv_used is tallied step by step, not summed: it must equal Request.context_len summed over the running
    requests at the moment the step is recorded (after the step's results, before finished ones leave)."""
    run = Engine().start("chapter-7.2-longtail", policy, batch_size=8, dry_run=True, workload_knobs={"n": 40})
    inner = run.scheduler._advance
    expected = []

    def advance(*args):
        done = inner(*args)
        expected.append(sum(r.context_len for r in run.policy.running) * run.pool.bytes_per_token)
        return done

    run.scheduler._advance = advance
    aborted = 0
    while not run.done:
        run.step()
        live = [r for r in run.policy.running if not r.done and r.num_prefilled]
        if len(run.steps) % 97 == 0 and live and aborted < 3:
            run.abort(live[0].id)  # leaves mid-run, holding K/V: the tally must drop it
            aborted += 1
    assert aborted == 3 and len(expected) == len(run.steps) > 100
    assert [s.kv_used_bytes for s in run.steps] == expected
    assert max(expected) > 0


def test_a_wasted_rows_kept_record_is_the_slotwork_the_engine_would_make():
    """A static batch's wasted row carries its SlotWork, recorded as is step after step: same fields as new."""
    run = Engine().start("chapter-7.1-finisher", "static", batch_size=8, dry_run=True)
    inner = run.policy.plan
    kept = 0

    def plan(now, more_coming):
        nonlocal kept
        p = inner(now, more_coming)
        for w in p.works:
            made = (w.slot, w.request.id, w.phase, w.start, w.tokens, w.padding)
            assert w.record is None or (w.phase == "wasted" and tuple(w.record) == made)
            kept += w.record is not None
        return p

    run.policy.plan = plan
    while not run.done:
        run.step()
    trace = run.trace()
    assert kept > 1000
    wasted = [w for s in trace.steps for w in s.works if w.phase == "wasted"]
    assert len(wasted) == kept and all(type(w) is SlotWork for w in wasted)


def test_plain_int_ids_take_the_fast_check_and_agree_with_the_slow_one():
    assert _valid_ids([1, 2, 3], 10) and not _valid_ids([1, 10], 10) and not _valid_ids([-1, 2], 10)
    assert not _valid_ids([1, True], 10)  # a bool is not a token id
    assert _valid_ids([np.int64(3), 4], 10) and not _valid_ids([np.int64(11)], 10)  # numpy ints: the slow path
    assert _valid_ids([], 10)


def test_a_dry_run_leaves_its_objects_out_of_the_young_generation():
    """The trace is promoted at once (no young-generation pass over ~170,000 records after the run)."""
    gc.collect()
    trace = Engine().run("chapter-7.1-finisher", "static", batch_size=32, dry_run=True, progress=False)
    assert gc.get_count()[0] < 1000 and len(trace.steps) > 1000
    assert gc.isenabled()


def test_gc_paused_leaves_objects_frozen_by_someone_else_frozen():
    # Watch one object of ours rather than the freeze count: frozen objects of earlier tests may die meanwhile.
    ours = [object()]
    gc.freeze()
    try:
        with gc_paused():
            _ = [[i] for i in range(1000)]
        assert gc.get_freeze_count() > 0 and gc.isenabled()
        assert not any(o is ours for o in gc.get_objects())  # still in the permanent generation, not thawed
    finally:
        gc.unfreeze()


def test_the_works_table_equals_the_works_field_by_field():
    trace = Engine().run("chapter-7.3-long-prompt", "chunked", chunk_size=256, dry_run=True, progress=False)
    wt = trace.works_table()
    works = [(j, w) for j, s in enumerate(trace.steps) for w in s.works]
    index = {r.id: i for i, r in enumerate(trace.requests)}
    assert wt.step.tolist() == [j for j, _ in works]
    assert wt.slot.tolist() == [w.slot for _, w in works]
    assert wt.request.tolist() == [index[w.request_id] for _, w in works]
    assert wt.phase.tolist() == [_WORK_CODE[w.phase] for _, w in works]
    assert (wt.start.tolist(), wt.tokens.tolist(), wt.padding.tolist()) == (
        [w.start for _, w in works], [w.tokens for _, w in works], [w.padding for _, w in works])
    sa = trace.step_arrays()
    assert sa.end_s.tolist() == [s.start_s + s.duration_s for s in trace.steps]
    assert sa.kv_used_bytes.tolist() == [s.kv_used_bytes for s in trace.steps]
    assert sa.num_waiting.tolist() == [s.num_waiting for s in trace.steps]


def test_an_empty_trace_still_has_empty_arrays():
    r = Request("a", [1] * 10, 5, ignore_eos=True)
    run = Engine().start([r], "static", batch_size=1, dry_run=True)
    trace = run.trace()  # before any step
    assert len(trace.works_table().step) == 0 and len(trace.step_arrays().end_s) == 0


@pytest.mark.parametrize("name", [n for n, _ in list_workloads()])
def test_a_named_workloads_ids_are_bos_and_bytes_as_ids_known_assumes(name):
    # the premise of skipping the token-id scan for named workloads: every id is a byte or BOS, whatever the seed
    for seed in (0, 1, 7):
        ids = {i for r in get_workload(name, seed=seed) for i in r.prompt}
        assert ids <= set(range(256)) | {BOS} and all(type(i) is int for i in ids)
    assert ids_known(name, BOS + 1) and not ids_known(name, BOS)


def test_a_model_whose_vocabulary_misses_bos_still_refuses_a_named_workload():
    from tinyserve.model.gpt import TinyGPT  # torch only here: the other tests of this file run without it

    small = TinyGPT(GPTConfig(vocab_size=BOS, n_positions=256, n_layer=1, n_head=1, n_embd=8)).eval()
    with pytest.raises(TinyserveError, match="token ids"):
        Engine(small).start("chapter-7.1-padding", "static")
    assert not ids_known("custom", 10**6) and not ids_known("x.jsonl", 10**6)


def test_decodes_of_is_decode_work_of_each_request_whose_prompt_is_in():
    # decodes_of restates decode_work's position inline (a call per slot per step was a sixth of a dry run)
    run = Engine().start("chapter-7.3-long-prompt", "chunked", chunk_size=64, dry_run=True)
    checked = 0
    while not run.done:
        running = list(run.policy.running)
        got = [(w.slot, w.request, w.phase, w.start, w.tokens) for w in decodes_of(running)]
        want = [decode_work(r) for r in running if r.num_prefilled == r.prefill_len]
        assert got == [(w.slot, w.request, w.phase, w.start, w.tokens) for w in want]
        checked += len(got) > 0 and any(r.num_prefilled < r.prefill_len for r in running)
        run.step()
    assert checked  # steps where some running request was still prefilling, so the filter mattered
