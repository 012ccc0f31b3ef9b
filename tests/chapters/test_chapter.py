"""The chapter's mechanics, out of the named workloads (counts and modeled times: deterministic anywhere)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tinyserve.core.workloads import get_workload
from tinyserve.engine import Engine


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
    first = [r for r in tr.requests if 1 <= int(r.id[1:]) < 32]  # the 31 short ones in r0's batch
    assert len(first) == 31 and all(r.max_new_tokens == 20 for r in first)
    decode_steps = 1999  # after the batch's one prefill step, it decodes until r0's 2,000th token
    for r in first:
        wasted = r.decode_computed_tokens - (r.output_len - 1)
        assert wasted == 2000 - 20 and wasted / decode_steps > 0.99
    # the 31 queued requests form a second batch of 20-token requests: no waste there
    assert m["wasted_decode_tokens"] == 31 * (2000 - 20)
    cont = engine.run("chapter-7.1-finisher", "continuous", batch_size=32, dry_run=True)
    assert cont.metrics()["wasted_decode_tokens"] == 0
    # with continuous batching a 20-token request finishes after about 20 iterations, whoever else is there
    assert all(len({s.index for s in cont.steps for w in s.works if w.request_id == r.id}) == 20
               for r in cont.requests if r.max_new_tokens == 20)


def _last_step(tr, rid: str) -> int:
    return max(s.index for s in tr.steps for w in s.works if w.request_id == rid)


def test_queued_short_requests_wait_for_the_long_one_under_static_only(engine):
    static = engine.run("chapter-7.1-finisher", "static", dry_run=True)
    cont = engine.run("chapter-7.1-finisher", "continuous", dry_run=True)
    queued = [f"r{i}" for i in range(32, 63)]
    # static: the second batch launches after r0's 2,000 steps (steps 0..1999): prefill at 2000, done at 2019
    assert {_last_step(static, q) for q in queued} == {2019}
    # continuous: the first short ones leave after step 19 (prefill + 19 decodes); the queue enters at step 20
    # and is done 20 steps later, at step 39, while r0 keeps decoding
    assert {_last_step(cont, q) for q in queued} == {39}


def test_longtail_defaults_show_the_utilisation_gap_and_a_tighter_p99(engine):
    static = engine.run("chapter-7.2-longtail", "static", dry_run=True).metrics()
    cont = engine.run("chapter-7.2-longtail", "continuous", dry_run=True).metrics()
    # the chapter's ranges (F7): static 10-25%, continuous 60-80%, both ways of counting utilisation
    for key in ("slot_utilization", "time_utilization"):
        assert 0.10 <= static[key] <= 0.25 and 0.60 <= cont[key] <= 0.80, (key, static[key], cont[key])
    assert cont["e2el_ms"]["p99"] < static["e2el_ms"]["p99"] / 3


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


def test_a_chunk_rides_free_below_the_ridge_and_costs_the_decodes_past_it(engine):
    # h200-70b-fp8 by hand: 70.55e9 B / 3.84e12 B/s = 18.37 ms of weight streaming a step; 2 x 68.45e9 flops a
    # token / 1.1874e15 flop/s = 0.1153 ms of arithmetic a token; ridge 18.37 / 0.1153 = 159.4 tokens a step
    plain = engine.run(get_workload("chapter-7.3-long-prompt")[:-1], "continuous", batch_size=32,
                       dry_run=True).steps[10].duration_s
    stall = {c: _worst_stall(engine.run("chapter-7.3-long-prompt", "chunked", chunk_size=c, dry_run=True))
             for c in (128, 512)}
    # 30 decodes + a 128-token chunk = 158 tokens, under the ridge: the thirty barely notice (attention, KV writes)
    assert stall[128] < 1.15 * plain
    # 30 + 512 = 542 tokens: at least (542 - 159.4) x 0.1153 ms = 44.1 ms of arithmetic more than a plain step
    assert stall[512] - plain >= 0.0441


def test_learner_notebooks_read_in_fifteen_minutes_and_print_no_claim_ids():
    import json
    import re
    from pathlib import Path

    chapters = Path(__file__).resolve().parents[2] / "chapters"
    counts = {}
    for src in sorted((chapters / "src").glob("7.[0-4]-*.py")):  # the lessons (7.5 and 7.6 are appendices)
        prose, md = [], False
        for line in src.read_text(encoding="utf-8").splitlines():
            if line.startswith("# ## Appendix"):
                break  # the main path ends where a lesson's own appendix begins
            if line.startswith("# %%"):
                md = "[markdown]" in line
            elif md:
                prose.append(line[2:])
        # a word has a letter or a digit (not "—" or a list's "*"); a glued value is one word
        counts[src.stem] = sum(bool(re.search(r"\w", w)) for w in " ".join(prose).split())
    assert len(counts) == 5 and all(n <= 900 for n in counts.values()), counts  # ~15 minutes of reading each
    for name in ("7.0-why-batching", "7.3-chunked-prefill", "7.5-figures-you-know", "7.6-appendix-evidence"):
        nb = json.loads((chapters / f"{name}.ipynb").read_text(encoding="utf-8"))
        text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
        assert text and not re.search(r"\bF[1-9]:", text), name  # the outline's claim ids mean nothing to a learner
