"""Checkers of the 7.3 exercises (chunked prefill): the token-budget chunker at every step of real runs, the
chunked policy, choosing a chunk length from measured runs, and choosing a deployment (section 6's hand-off)."""
from __future__ import annotations

import random

from ..analysis.goodput import GOAL, parse_spec, run_config
from ..analysis.prefill import ttft_ms, worst_gap_ms
from ..core.scheduling import Plan
from ..core.request import Request
from ..core.workloads import make_prompt
from ..deploy import run_deployment
from ..engine import Engine
from ..errors import TinyserveError
from ..loop import Run, StepHook
from . import harness
from .harness import CHECK_RUNS, MAX_LEN, _check_policy, _engine, _one_thread, _where, reference_policy, workload
from .integrity import NotWritten, _call, _fail, _guard
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


# ------------------------------------------------------------------------------------------------ a deployment
# 7.3 (o): two H200s serve chapter-7.3-mixed at a fixed rate under section 6's tight targets. The notebook's given
# cell holds the same numbers (tests/classroom/test_classroom.py holds them together); every run is a short dry run
DEPLOY_WORKLOAD = "chapter-7.3-mixed"
DEPLOY_TRAFFIC = {"n": 50, "rate": 3.0}  # requests, and requests/s for the whole deployment
DEPLOY_TARGETS = (400.0, 25.0)  # TTFT and TPOT targets in ms: 7.3 section 6's tight pair (analysis/fair.PAIRS)
DEPLOY_HARDWARE = "h200-70b-fp8"
SHARE_TOLERANCE = 0.005  # a share written with two decimals is the same share


def deployment_trace(spec: str):
    """A deployment's DeploymentTrace on the exercise's traffic: one dry run on the modeled clock."""
    dc, own = parse_spec(spec)
    rc = run_config("chunked", {"dry_run": True, "hardware": DEPLOY_HARDWARE}, own, dict(DEPLOY_TRAFFIC))
    return run_deployment(Engine(), DEPLOY_WORKLOAD, rc, dc)


def _answer_of(fn) -> tuple[str, float]:
    """The learner's (deployment, share) after checking its form: the function runs free (it runs the engine and
    the built-in chunked policy, as the exercise asks); a tuple of exactly a str and a number from 0 to 1."""
    __tracebackhide__ = True
    _guard()
    try:
        got = fn()
    except NotImplementedError as e:
        raise NotWritten(say("fn_not_written", fn=getattr(fn, "__name__", say("your_function")), err=e)) from None
    if type(got) is not tuple or len(got) != 2 or type(got[0]) is not str:
        _fail(say("deploy_not_pair", got=f"{got!r:.200}"))
    spec, share = got
    if type(share) not in (int, float) or not 0 <= share <= 1:
        _fail(say("deploy_not_share", got=f"{share!r:.60}"))
    try:
        dc, own = parse_spec(spec)
    except TinyserveError as e:
        _fail(say("deploy_bad_spec", spec=spec, err=e))
    gpus = [n for n in (own.get("gpus"), dc.prefill_gpus, dc.decode_gpus) if n is not None]
    if dc.num_instances != 2 or any(n != 1 for n in gpus):
        _fail(say("deploy_shape", spec=spec))
    if share < GOAL:
        _fail(say("deploy_below_goal", spec=spec, share=share, goal=GOAL))
    return spec, float(share)


def deployment_choice(fn) -> None:
    """7.3 (o), as the learner checks it: the answer's form (a deployment of two GPUs, one per instance, and the
    share of requests it met both targets for, at least the goal). The grader's hidden check runs it again."""
    __tracebackhide__ = True
    spec, share = _answer_of(fn)
    print(say("deploy_form_ok", spec=spec, share=share))


def deployment_measured(fn) -> None:
    """7.3 (o), the grader's hidden check: the chosen deployment run again on the exercise's traffic meets the goal,
    and the share the learner gave is the one that run measures."""
    __tracebackhide__ = True
    spec, share = _answer_of(fn)
    slo = deployment_trace(spec).slo(*DEPLOY_TARGETS)
    truth = slo["attainment"]
    if abs(share - truth) > SHARE_TOLERANCE:
        _fail(say("deploy_share_wrong", spec=spec, share=share, truth=truth, met=slo["met"], n=slo["requests"]))
    if truth < GOAL:  # (a share given right is at least the goal: the form check saw to it; kept for clarity)
        _fail(say("deploy_misses_goal", spec=spec, truth=truth, goal=GOAL))
    print(say("deploy_passed", spec=spec, truth=truth, met=slo["met"], n=slo["requests"]))
