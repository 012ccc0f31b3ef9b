"""The stall bound of chunked prefill, as a property over random workloads (dry runs, modeled clock).

Under chunked prefill every in-flight request decodes in every step (all decodes are planned first and the
budget is at least the batch size), so each inter-token gap is exactly one step, and that step carries at most
max_batch_tokens tokens. The step that admits a newcomer is one of those budgeted steps too: in our engine the
admission costs no extra step. So no gap can exceed the time of one full-budget step (sweeps.stall_bound_s).
Continuous batching without a budget has no such bound: a long prompt's prefill step stalls every decode.
"""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyserve.analysis.sweeps import stall_bound_s
from tinyserve.core.request import FINISHED, Request
from tinyserve.core.workloads import get_workload, make_prompt
from tinyserve.engine import Engine


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 10))
    reqs = [Request(f"r{i}", make_prompt(draw(st.integers(1, 2500)), seed=i), draw(st.integers(1, 30)),
                    draw(st.floats(0.0, 1.0, allow_nan=False)), ignore_eos=True) for i in range(n)]
    b = draw(st.integers(1, 8))
    chunk = draw(st.integers(1, 1024))
    budget = draw(st.integers(b, b + 1024))
    return reqs, b, chunk, budget


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_inter_token_gap_exceeds_one_full_budget_step(case):
    reqs, b, chunk, budget = case
    t = Engine().run(reqs, "chunked", batch_size=b, chunk_size=chunk, max_batch_tokens=budget, dry_run=True,
                     progress=False)
    ends = {s.start_s + s.duration_s: s for s in t.steps}
    bound = stall_bound_s(budget, max(r.prompt_len + r.max_new_tokens for r in reqs), batch_size=b)
    for r in t.requests:
        assert r.status == FINISHED
        for a, z in zip(r.token_times, r.token_times[1:]):
            step = ends[z]  # the step whose end produced the later token ...
            assert step.start_s == a  # ... began when the earlier one came out: the gap is exactly one step
            assert any(w.request_id == r.id and w.phase == "decode" for w in step.works)
            assert step.tokens <= budget
            assert z - a <= bound


def test_continuous_without_budget_breaks_the_bound():
    # the 7.3 scenario: 30 requests decoding when a 4,000-token prompt arrives. Chunked (512-token chunks,
    # 542-token budget) keeps every gap within one full-budget step; continuous puts the whole prompt in one
    # step beside the 30 decodes, and that gap is longer than the bound the chunked run obeys.
    reqs = get_workload("chapter-7.3-long-prompt")
    ctx = max(r.prompt_len + r.max_new_tokens for r in reqs)
    bound = stall_bound_s(542, ctx, batch_size=32)
    gaps = {}
    for policy, knobs in (("chunked", dict(chunk_size=512, max_batch_tokens=542)), ("continuous", {})):
        t = Engine().run(reqs, policy, batch_size=32, dry_run=True, progress=False, **knobs)
        gaps[policy] = max(z - a for r in t.requests if r.id != "long" for a, z in zip(r.token_times, r.token_times[1:]))
    assert gaps["chunked"] <= bound < gaps["continuous"]
