"""Trace.timeline(id): one request's life, the same record request_timelines() lists, read by id."""
from __future__ import annotations

import pytest

from tinyserve.engine import Engine


def test_timeline_by_id_is_the_listed_one_and_its_chunks_are_the_steps_that_prefilled_it():
    tr = Engine().run("chapter-7.3-long-prompt", "chunked", chunk_size=512, dry_run=True, progress=False)
    listed = {tl.id: tl for tl in tr.request_timelines()}
    assert tr.timeline("long") is listed["long"]
    # counted by hand from the steps: the steps in which the long prompt was prefilled, and the first of them
    prefill_steps = [s.index for s in tr.steps if any(w.request_id == "long" and w.phase == "prefill" for w in s.works)]
    assert [c[0] for c in tr.timeline("long").chunks] == prefill_steps
    assert tr.timeline("long").first_step == prefill_steps[0]
    assert len(prefill_steps) == -(-4000 // 512)  # a 4,000-token prompt in chunks of 512


def test_timeline_of_an_unknown_id_is_a_key_error():
    tr = Engine().run("chapter-7.1-padding", "static", dry_run=True, progress=False)
    with pytest.raises(KeyError):
        tr.timeline("nobody")
