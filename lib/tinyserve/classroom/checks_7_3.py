"""Checkers of the 7.3 exercises (chunked prefill): the token-budget chunker at every step of real runs, the
chunked policy, and choosing a chunk length from measured runs."""
from __future__ import annotations

import random

from ..analysis.prefill import ttft_ms, worst_gap_ms
from ..core.scheduling import Plan
from ..core.request import Request
from ..core.workloads import make_prompt
from ..loop import Run, StepHook
from . import harness
from .harness import CHECK_RUNS, MAX_LEN, _check_policy, _engine, _one_thread, _where, reference_policy, workload
from .integrity import _call, _fail, _guard
from .text import say


def chunked_policy(cls) -> None:
    """7.3 (i): decode-first chunk planning under a token budget."""
    __tracebackhide__ = True
    _check_policy(cls, "chunked", say("hint_chunked"))


# ------------------------------------------------------------------------------------ the token-budget chunker
class _ChunkerWatch(StepHook):
    """At every step the built-in chunked policy plans: the learner's chunker, asked the same question."""

    def __init__(self, fn, knobs: dict, where: str):
        self.fn, self.knobs, self.where = fn, knobs, where

    def planned(self, run: Run, plan: Plan) -> None:
        __tracebackhide__ = True
        if not plan.works:
            return
        fn, knobs, where, idx = self.fn, self.knobs, self.where, len(run.steps)
        # the policy has admitted this step's newcomers; nothing has run yet, so num_prefilled is before the step
        prefilling = [r for r in run.policy.running if r.num_prefilled < r.prompt_len]
        decodes = sum(w.phase == "decode" for w in plan.works)
        truth = [next((w.tokens for w in plan.works if w.request is r and w.phase == "prefill"), 0)
                 for r in prefilling]
        got = _call(fn, [(r.prompt_len, r.num_prefilled) for r in prefilling], decodes, knobs["chunk_size"],
                    knobs["max_batch_tokens"])
        state = ", ".join(say("chunker_state", rid=r.id, done=r.num_prefilled, total=r.prompt_len) for r in prefilling)
        if not isinstance(got, (list, tuple)) or any(isinstance(x, bool) or not isinstance(x, int) for x in got):
            _fail(say("chunker_not_list", where=where, idx=idx, got=f"{got!r:.200}"))
        if len(got) != len(truth):
            _fail(say("chunker_len", where=where, idx=idx, n=len(truth), state=state, m=len(got)))
        if list(got) != truth:
            _fail(say("chunker_wrong", where=where, idx=idx, decodes=decodes, c=knobs["chunk_size"],
                      b=knobs["max_batch_tokens"], state=state, truth=truth, got=list(got)))


def _chunker_run(fn, seed: int) -> None:
    __tracebackhide__ = True
    reqs, knobs = workload("chunked", seed)
    hook = _ChunkerWatch(fn, knobs, _where(seed, reqs, knobs))
    _engine().run(reqs, reference_policy("chunked", **knobs), max_model_len=MAX_LEN, dry_run=True, progress=False,
                  hooks=(hook,))


def plan_chunks(fn) -> None:
    """7.3 (h): the token-budget chunker, at every step of the built-in chunked policy's runs."""
    __tracebackhide__ = True
    _guard()
    with _one_thread():
        for _ in range(CHECK_RUNS):
            _chunker_run(fn, harness.fresh_seed())
    print(say("chunker_passed", n=CHECK_RUNS))


# ---------------------------------------------------------------------------------------------- chunk length
def long_prompt_measure(seed: int):
    """measure(chunk) -> (worst inter-token gap of the in-flight requests in ms, the newcomer's TTFT in ms)."""
    rng = random.Random(seed)
    n, out = rng.randint(8, 16), rng.randint(40, 80)
    reqs = [Request(f"r{i}", make_prompt(rng.randint(16, 32), seed=rng.randrange(10**6)), out, 0.0, ignore_eos=True)
            for i in range(n)]
    reqs.append(Request("long", make_prompt(rng.randint(1500, 3000), seed=rng.randrange(10**6)), 8,
                        rng.choice([0.1, 0.2, 0.3]), ignore_eos=True))
    cache: dict[int, tuple[float, float]] = {}

    def measure(chunk: int) -> tuple[float, float]:
        """(worst inter-token gap of the requests already decoding, in ms; TTFT of 'long', in ms)."""
        if chunk not in cache:
            tr = _engine().run(reqs, "chunked", batch_size=n + 1, chunk_size=int(chunk),
                               max_batch_tokens=int(chunk) + n + 1, dry_run=True, progress=False)
            cache[chunk] = (worst_gap_ms(tr, [r.id for r in reqs if r.id != "long"]), ttft_ms(tr, "long"))
        return cache[chunk]

    return measure


CHUNKS = [64, 128, 256, 512, 1024, 2048]


def pick_chunk(fn) -> None:
    """7.3 (j): the largest chunk that keeps the worst gap and the newcomer's TTFT under their targets."""
    __tracebackhide__ = True
    _guard()
    seed = harness.fresh_seed()
    rng = random.Random(seed)
    measure = long_prompt_measure(seed)
    table = {c: measure(c) for c in CHUNKS}
    itls = sorted({v[0] for v in table.values()})
    ttfts = sorted({v[1] for v in table.values()})
    mid = lambda xs, i: (xs[i] + xs[i + 1]) / 2 if i + 1 < len(xs) else xs[i] * 1.1  # noqa: E731
    cases = [(mid(itls, rng.randrange(len(itls))), mid(ttfts, rng.randrange(len(ttfts)))) for _ in range(3)]
    cases += [(itls[0] * 0.9, ttfts[-1] * 2), (itls[-1] * 2, ttfts[0] * 0.9), (itls[-1] * 2, ttfts[-1] * 2)]
    for itl_t, ttft_t in cases:
        got = _call(fn, measure, list(CHUNKS), itl_t, ttft_t)
        ok = [c for c in CHUNKS if table[c][0] <= itl_t and table[c][1] <= ttft_t]
        truth = max(ok) if ok else None
        if got != truth:
            rows = ", ".join(say("pick_chunk_row", c=c, g=g, t=t) for c, (g, t) in table.items())
            _fail(say("pick_chunk_wrong", itl=itl_t, ttft=ttft_t, rows=rows, truth=truth, got=repr(got)))
    print(say("pick_chunk_passed", n=len(cases), seed=seed))
