"""The chapter's mechanics, out of the named workloads (counts and modeled times: deterministic anywhere)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tinyserve.engine import Engine
from tinyserve.workloads import get_workload


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(device="cpu")


def test_padding_makes_the_short_prompt_pay_80x_its_prefill(engine):
    tr = engine.run("chapter-7.1-padding", "static", batch_size=2, dry_run=True)
    short, long_ = sorted(tr.requests, key=lambda r: r.prompt_len)
    assert (short.prompt_len, long_.prompt_len) == (50, 4000)
    assert short.prefill_computed_tokens == long_.prompt_len
    assert short.prefill_computed_tokens / short.prompt_len == 80
    assert tr.metrics()["padding_tokens"] == 3950
    # without batching them together there is no padding at all
    assert engine.run("chapter-7.1-padding", "continuous", dry_run=True).metrics()["padding_tokens"] == 0


def test_fastest_finisher_wastes_99_percent_of_31_slots(engine):
    tr = engine.run("chapter-7.1-finisher", "static", batch_size=32, dry_run=True)
    m = tr.metrics()
    shorts = [r for r in tr.requests if r.max_new_tokens == 20]
    assert len(shorts) == 31
    decode_steps = m["num_steps"] - 1  # after the one prefill step, the batch decodes until the 2,000th token
    assert decode_steps == 1999
    for r in shorts:
        wasted = r.decode_computed_tokens - (r.output_len - 1)
        assert wasted / decode_steps > 0.99
    assert m["wasted_decode_tokens"] == 31 * (2000 - 20)
    cont = engine.run("chapter-7.1-finisher", "continuous", batch_size=32, dry_run=True)
    assert cont.metrics()["wasted_decode_tokens"] == 0
    # with continuous batching a 20-token request finishes after about 20 iterations, whoever else is there
    assert all(len({s.index for s in cont.steps for w in s.works if w.request_id == r.id}) == 20
               for r in cont.requests if r.max_new_tokens == 20)


def _worst_stall(tr) -> float:
    """Longest gap between two tokens of the in-flight requests (all but 'long')."""
    return max(float(np.max(np.diff(r.token_times))) for r in tr.requests if r.id != "long")


def test_chunked_prefill_cuts_the_in_flight_decodes_worst_stall(engine):
    prefill_first = engine.run("chapter-7.3-long-prompt", "continuous", prefill_first=True, dry_run=True)
    # decode-first without a bound (drain, then refill): the newcomer waits for all 30 decodes to finish
    decode_first = engine.run("chapter-7.3-long-prompt", "continuous", max_waiting_steps=math.inf, dry_run=True)
    chunked = engine.run("chapter-7.3-long-prompt", "chunked", chunk_size=512, dry_run=True)
    ttft = {name: (t.request("long").first_token_s - t.request("long").arrival_s)
            for name, t in [("pf", prefill_first), ("df", decode_first), ("ch", chunked)]}
    # the dilemma: prefill-first stalls the 30 decodes, decode-first stalls the newcomer
    assert _worst_stall(prefill_first) > 5 * _worst_stall(decode_first)
    assert ttft["df"] > 5 * ttft["pf"]
    # chunking: the decodes' worst stall shrinks a lot, and the newcomer's TTFT stays close to prefill-first's
    assert _worst_stall(chunked) < _worst_stall(prefill_first) / 3
    assert ttft["ch"] < 2 * ttft["pf"]
    long_chunks = [w.tokens for s in chunked.steps for w in s.works if w.request_id == "long" and w.phase == "prefill"]
    assert len(long_chunks) == 8 and max(long_chunks) <= 512 and sum(long_chunks) == 4000


def test_dry_run_equals_the_real_model_run_on_a_chapter_workload(engine):
    reqs = get_workload("chapter-7.3-long-prompt", n=6, arrival_s=0.05)
    real = engine.run(reqs, "chunked", chunk_size=512)
    dry = engine.run(reqs, "chunked", chunk_size=512, dry_run=True)
    assert sum(w.request_id == "long" for s in real.steps for w in s.works if w.phase == "prefill") == 8
    assert real.metrics() == dry.metrics()
    assert [s.works for s in real.steps] == [s.works for s in dry.steps]
