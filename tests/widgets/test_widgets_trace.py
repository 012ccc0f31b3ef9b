"""The Trace's view arrays (what every widget draws) equal what the steps say; small cases counted by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tinyserve.core.request import Request
from tinyserve.engine import Engine
from tinyserve.trace.arrays import DECODE, DECODING, DONE, IDLE, PADDING, PREFILL, WAITING_CODE, WASTED
from tinyserve.trace.record import Trace


def reqs(*spec) -> list[Request]:
    """(id, prompt_len, max_new_tokens[, arrival_s]) -> requests with EOS ignored (lengths known: dry runs)."""
    return [Request(s[0], list(range(s[1])), s[2], s[3] if len(s) > 3 else 0.0, ignore_eos=True) for s in spec]


def dry(requests, policy, **knobs) -> Trace:
    return Engine().run(requests, policy, dry_run=True, progress=False, **knobs)


def test_static_grid_and_step_arrays_by_hand():
    # a: prompt 2, 2 tokens; b: prompt 6, 4 tokens; one static batch of 2.
    # step 0: prefill a (2 tokens + 4 padding) and b (6) -> first tokens; step 1: both decode, a is done;
    # steps 2-3: a's slot recomputes (wasted) while b decodes its 3rd and 4th token.
    tr = dry(reqs(("a", 2, 2), ("b", 6, 4)), "static", batch_size=2)
    g = tr.phase_grid()
    assert g.phase.tolist() == [[PADDING, DECODE, WASTED, WASTED],  # padding 4 > tokens 2: drawn as padding
                                [PREFILL, DECODE, DECODE, DECODE]]
    assert g.tokens.tolist() == [[2, 1, 1, 1], [6, 1, 1, 1]] and g.padding.tolist() == [[4, 0, 0, 0], [0, 0, 0, 0]]
    assert g.request.tolist() == [[0, 0, 0, 0], [1, 1, 1, 1]]
    sa = tr.step_arrays()
    assert sa.prefill_tokens.tolist() == [8, 0, 0, 0] and sa.padding_tokens.tolist() == [4, 0, 0, 0]
    assert sa.decode_tokens.tolist() == [0, 2, 1, 1] and sa.wasted_tokens.tolist() == [0, 0, 1, 1]
    assert sa.tokens.tolist() == [12, 2, 2, 2] and sa.busy_slots.tolist() == [2, 2, 2, 2]
    # two slabs of the server's maximum length (4,096 positions), reserved from step 0: 8,192 throughout;
    # KV in the slabs after each step: a 2,3,3,3 tokens (wasted decodes store nothing new); b 6,7,8,9.
    per_token = tr.kv_bytes_per_token  # bytes per token of whatever model the clock speaks for
    assert (sa.kv_reserved_bytes / per_token).tolist() == [8192, 8192, 8192, 8192]
    assert (sa.kv_used_bytes / per_token).tolist() == [8, 10, 11, 12]
    tl = {t.id: t for t in tr.request_timelines()}
    assert tl["a"].chunks == [(0, 0, 2, 4)] and tl["a"].decode_steps == 1 and tl["a"].wasted_steps == 2
    assert tl["a"].last_step == 3 and tl["b"].last_step == 3 and tl["b"].decode_steps == 3


def test_queue_gaps_states_by_hand():
    # continuous, one slot: x (prompt 2, 2 tokens) runs steps 0-1 while y waits; y (prompt 3, 1 token) runs step 2
    tr = dry(reqs(("x", 2, 2), ("y", 3, 1)), "continuous", batch_size=1)
    sa = tr.step_arrays()
    assert sa.num_waiting.tolist() == [1, 1, 0]
    end = sa.end_s
    assert sa.max_ttft_s[0] == end[0] and math.isnan(sa.max_ttft_s[1]) and sa.max_ttft_s[2] == end[2]
    assert math.isnan(sa.max_itl_s[0]) and sa.max_itl_s[1] == end[1] - end[0] and math.isnan(sa.max_itl_s[2])
    assert tr.request_states(0).tolist() == [DECODING, WAITING_CODE]
    assert tr.request_states(1).tolist() == [DONE, WAITING_CODE]
    assert tr.request_states(2).tolist() == [DONE, DONE]
    y = tr.request_timelines()[1]
    assert (y.slot, y.first_step, y.claimed_s, y.chunks) == (0, 2, end[1], [(2, 0, 3, 0)])
    assert tr.phase_grid().phase.tolist() == [[PREFILL, DECODE, PREFILL]]


def test_chunks_and_gaps_by_hand():
    # chunked, chunk 2, budget 3: p (prompt 5, 2 tokens) prefills 2+2+1 over steps 0-2, first token at step 2,
    # then one decode at step 3.
    tr = dry(reqs(("p", 5, 2)), "chunked", batch_size=2, chunk_size=2, max_batch_tokens=3)
    assert tr.request_timelines()[0].chunks == [(0, 0, 2, 0), (1, 2, 2, 0), (2, 4, 1, 0)]
    sa = tr.step_arrays()
    assert sa.prefill_tokens.tolist() == [2, 2, 1, 0] and sa.decode_tokens.tolist() == [0, 0, 0, 1]
    assert sa.prefill_works.tolist() == [1, 1, 1, 0]
    assert tr.phase_grid().phase.tolist() == [[PREFILL] * 3 + [DECODE], [IDLE] * 4]
    ra = tr.request_arrays()
    assert (ra.first_step[0], ra.first_token_step[0], ra.finish_step[0]) == (0, 2, 3)


@pytest.mark.parametrize("workload,policy,knobs", [
    ("chapter-7.1-finisher", "static", {}), ("chapter-7.1-finisher", "continuous", {}),
    ("chapter-7.2-longtail", "dynamic", {"batch_size": 8}),
    ("chapter-7.2-longtail", "continuous", {"prefill_first": False}),
    ("chapter-7.3-long-prompt", "chunked", {"chunk_size": 256}), ("chapter-7.1-padding", "static", {}),
])
def test_arrays_equal_the_steps_and_metrics(workload, policy, knobs):
    tr = dry(workload, policy, **knobs)
    sa, g, m = tr.step_arrays(), tr.phase_grid(), tr.metrics()
    assert sa.kv_used_bytes.tolist() == [s.kv_used_bytes for s in tr.steps]
    assert sa.kv_reserved_bytes.tolist() == [s.kv_reserved_bytes for s in tr.steps]
    assert sa.tokens.tolist() == [s.tokens for s in tr.steps]
    assert sa.busy_slots.tolist() == [len(s.works) for s in tr.steps]
    assert sa.start_s.tolist() == [s.start_s for s in tr.steps]
    assert int(sa.prefill_tokens.sum()) == m["prefill_tokens"] and int(sa.padding_tokens.sum()) == m["padding_tokens"]
    assert int(sa.decode_tokens.sum()) == m["decode_tokens"]
    assert int(sa.wasted_tokens.sum()) == m["wasted_decode_tokens"]
    assert int((g.phase == IDLE).sum()) == m["idle_slot_steps"]
    for j, s in enumerate(tr.steps):  # every cell from the step's own works
        busy = {w.slot: w for w in s.works}
        for slot in range(tr.num_slots):
            w = busy.get(slot)
            want = IDLE if w is None else {"decode": DECODE, "wasted": WASTED}.get(
                w.phase, PADDING if w.padding > w.tokens else PREFILL)
            assert g.phase[slot, j] == want
    # inter-token gaps recomputed from the tokens' times, request by request
    wt = tr.works_table()
    for i, r in enumerate(tr.requests):
        rows = np.flatnonzero(wt.token & (wt.request == i))
        gaps = wt.gap_s[rows]
        assert len(rows) == r.output_len
        if len(rows):
            assert gaps[0] == pytest.approx(r.first_token_s - r.arrival_s)
            assert np.allclose(gaps[1:], np.diff(r.token_times))


def test_snapshot_does_not_change_when_the_run_goes_on():
    run = Engine().start(reqs(("a", 4, 5), ("b", 3, 2)), "continuous", dry_run=True)
    run.step()
    snap = run.trace()
    before = ([s.index for s in snap.steps], [list(r.output) for r in snap.requests],
              [list(r.token_times) for r in snap.requests], [r.status for r in snap.requests])
    while not run.done:
        run.step()
    after = ([s.index for s in snap.steps], [list(r.output) for r in snap.requests],
             [list(r.token_times) for r in snap.requests], [r.status for r in snap.requests])
    assert before == after == ([0], [[-1], [-1]], [[snap.steps[0].duration_s]] * 2, ["running", "running"])
    assert len(run.trace().steps) == 5  # a: 1 prefill + 4 decodes; b finishes inside


def test_load_round_trip(tmp_path):
    tr = dry("chapter-7.3-long-prompt", "chunked", chunk_size=512)
    tr.save(tmp_path / "t.json")
    back = Trace.load(tmp_path / "t.json")
    assert back.metrics() == tr.metrics()
    assert [(s.start_s, s.works, s.kv_used_bytes, s.num_waiting) for s in back.steps] == \
        [(s.start_s, s.works, s.kv_used_bytes, s.num_waiting) for s in tr.steps]
    assert np.array_equal(back.phase_grid().phase, tr.phase_grid().phase)
    (tmp_path / "s.json").write_text(__import__("json").dumps(tr.summary()))
    summary = Trace.load(tmp_path / "s.json")  # a --json summary: no steps, latencies kept
    assert summary.steps == [] and summary.metrics()["ttft_ms"] == tr.metrics()["ttft_ms"]
    assert summary.metrics()["e2el_ms"] == tr.metrics()["e2el_ms"]


def test_load_bad_file_says_so(tmp_path):
    from tinyserve.errors import TinyserveError

    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TinyserveError, match="bad.json"):
        Trace.load(tmp_path / "bad.json")
