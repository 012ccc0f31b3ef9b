"""The reference harness: a learner's policy runs on the real engine beside the built-in reference policy.

A policy answer runs (float64, so tokens compare exactly) on several workloads seeded freshly at check time and
must match the reference step for step: the same works in every step, the same metrics, the same tokens. A step
hook (tinyserve.loop.StepHook) watches the learner's run: the state each plan was made from, and each plan
checked (plans.py) before the engine runs it. Also here: the shared float64 engine, the check workloads, and the
one-thread setting for the checks that run the model (torch is imported only there).
"""
from __future__ import annotations

import math
import random
from contextlib import contextmanager

from ..core.scheduling import Plan, Policy, make_policy
from ..core.request import Request
from ..core.workloads import make_prompt
from ..engine import Engine
from ..loop import Run, StepHook
from .integrity import _AE, IntegrityError, NotWritten, _fail, _guard, _own_policy_class, _tripwire
from .plans import _diff, _State, _validate
from .text import say

MAX_LEN = 128  # slab length for every check run: prompts and outputs here stay well below it
CHECK_RUNS = 4  # fresh workloads per policy check

_ENGINE: list[Engine] = []


def _engine() -> Engine:
    """The checks' engine: the shipped model on the CPU in float64 (tokens compare exactly), made once."""
    if not _ENGINE:
        _ENGINE.append(Engine(device="cpu", dtype="float64"))
    return _ENGINE[0]


@contextmanager
def _one_thread():
    """Torch on one thread while a check runs the model (torch is imported here: a check that needs no model,
    and importing the checks, never load it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: threads only fight other kernels for the cores
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fresh_seed() -> int:
    """A seed nobody stored: a new workload at every check (the checkers call harness.fresh_seed(), so a test
    that fixes the seeds patches it here)."""
    return random.SystemRandom().randrange(10**6)


# ---------------------------------------------------------------------------------------------- workloads
def workload(kind: str, seed: int) -> tuple[list[Request], dict]:
    """(requests, policy knobs) of a check workload; the same seed gives the same ones (to reproduce a failure)."""
    rng = random.Random(seed)
    n = rng.randint(6, 12)
    long_prompts = kind == "chunked"
    t, reqs = 0.0, []
    # arrivals in bursts: some together, some a few steps apart; dynamic batching's timeouts need lulls
    gaps = [0.0, 0.0, 0.0, 0.05, 0.15, 0.3] if kind == "dynamic" else [0.0, 0.0, 0.0, 0.01, 0.03, 0.06, 0.12]
    for i in range(n):
        if i:
            t += rng.choice(gaps)
        p = rng.randint(20, 60) if long_prompts and rng.random() < 0.4 else rng.randint(2, 20)
        reqs.append(Request(f"r{i}", make_prompt(p, seed=rng.randrange(10**6)), rng.randint(1, 9), round(t, 4),
                            ignore_eos=True))
    b = rng.choice([2, 3, 4])
    if kind == "dynamic":
        knobs = {"batch_size": b, "timeout": rng.choice([0.02, 0.05, 0.1])}
    elif kind == "continuous":
        knobs = {"batch_size": b}
    elif kind == "decode-first":
        knobs = {"batch_size": b, "max_waiting_steps": rng.choice([1, 2, 3, 5])}
    elif kind == "chunked":
        c = rng.choice([4, 8, 16])
        # budgets below chunk + batch_size too: there a step's decodes and a full chunk do not both fit
        knobs = {"batch_size": b, "chunk_size": c, "max_batch_tokens": max(b, c + rng.choice([-2, 0, 1, b, b + 3]))}
    else:
        raise ValueError(f"unknown workload kind {kind!r}")  # words: ok (a checker bug, not for learners)
    return reqs, knobs


def reference_policy(kind: str, **knobs) -> Policy:
    """The built-in policy an answer is compared with."""
    if kind == "continuous":
        return make_policy("continuous", prefill_first=True, **knobs)
    if kind == "decode-first":
        return make_policy("continuous", **knobs)
    return make_policy(kind, **knobs)


def _where(seed: int, reqs: list, knobs: dict) -> str:
    return say("where", seed=seed, n=len(reqs), knobs=", ".join(f"{k}={v}" for k, v in knobs.items()))


def _as_int(x, what: str) -> int:
    """A numeric answer that must be a whole number, as an int."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__index__"):
        _fail(say("not_whole", fn=what, got=repr(x)))
    if isinstance(x, float) and not x.is_integer():
        _fail(say("not_whole_tokens", fn=what, got=repr(x)))
    return int(x)


# ------------------------------------------------------------------------------------------ policy checks
class _Watch(StepHook):
    """The learner's run, step by step: the state each plan was made from, each plan checked before it runs."""

    def __init__(self, policy: Policy, knobs: dict):
        self.policy, self.knobs = policy, knobs
        self.states: list[_State] = []  # one per step with works (the trace's steps)
        self._state: _State | None = None

    def before_plan(self, run: Run) -> None:
        p = self.policy
        self._state = _State(run.now, [say("arrived", rid=r.id, ms=r.arrival_s * 1e3) for r in p.waiting],
                             [r.id for r in p.running], p.pool.num_free)

    def planned(self, run: Run, plan: Plan) -> None:
        __tracebackhide__ = True  # the learner sees the message, not the checker's frames
        _validate(plan, self.policy, len(run.steps), self.knobs)
        if plan.works:  # a plan without works records no step
            self.states.append(self._state)


def _run_student(cls, kind: str, seed: int, hint: str) -> None:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    reqs, knobs = workload(kind, seed)
    where = _where(seed, reqs, knobs)
    eng = _engine()
    # the learner's policy runs first, so no reference result exists yet for it to find
    limit = sum(r.prompt_len + r.max_new_tokens for r in reqs) + 50  # one token a step would still finish
    with _tripwire(engine=True):
        try:
            policy = cls(**knobs)
        except NotImplementedError as e:
            raise NotWritten(where + say("init_not_written", err=e)) from None
        except TypeError as e:
            _fail(where + say("init_failed", cls=cls.__name__, args=", ".join(f"{k}={v}" for k, v in knobs.items()),
                              err=e))
        watch = _Watch(policy, knobs)
        run = eng.start(reqs, policy, max_model_len=MAX_LEN, hooks=(watch,))
        err = _drive(run, policy, limit, knobs, where)
    ref = eng.run(reqs, reference_policy(kind, **knobs), max_model_len=MAX_LEN, progress=False)
    _compare(run.trace(), ref, watch.states, err, knobs, hint, where)


def _drive(run: Run, policy: Policy, limit: int, knobs: dict, where: str) -> str | None:
    """Step the learner's run to its end; the first thing that went wrong, in words (None if nothing). Stepped by
    hand, not run.finish(): each step's error is caught, and a run that does not finish is cut off."""
    __tracebackhide__ = True
    err, calls = None, 0
    while not run.done and err is None:
        calls += 1
        if len(run.steps) > limit or calls > 10 * limit:
            left = [r.id for r in run.requests if not r.done]
            return say("unfinished", steps=len(run.steps), left=left)
        try:
            run.step()
        except _AE as e:
            if isinstance(e, IntegrityError):
                raise
            err = str(e)
        except NotImplementedError as e:
            raise NotWritten(where + say("part_not_written", err=e)) from None
        except RuntimeError as e:
            err = _runtime_hint(str(e), len(run.steps), policy, knobs)
        except Exception as e:  # the learner's code raised: show it as a failed check with its cause
            raise _AE(where + say("policy_raised", idx=len(run.steps), exc=type(e).__name__, err=e)) from e
        held = policy.pool.num_slots - policy.pool.num_free
        if err is None and held > len(policy.running):
            gone = [r.id for r in run.requests if r.done and r not in policy.running]
            err = say("slot_leak", idx=len(run.steps) - 1, held=held, running=len(policy.running), gone=gone)
    return err


def _compare(mine, ref, states: list, err: str | None, knobs: dict, hint: str, where: str) -> None:
    """Fail with the first step where the learner's run and the reference differ, else with err, else on
    tokens or metrics."""
    __tracebackhide__ = True
    # the first step that differs explains more than an error it led to later
    for rec in mine.steps:
        i = rec.index
        if i >= len(ref.steps):
            _fail(where + say("extra_step", idx=i, n=len(ref.steps)))
        d = _diff(i, rec, ref.steps[i], states[i] if i < len(states) else None, knobs, hint)
        if d:
            _fail(where + d)
    if err is not None:
        _fail(where + err)
    if len(mine.steps) != len(ref.steps):
        _fail(where + say("step_count", mine=len(mine.steps), ref=len(ref.steps)))
    for r_m, r_r in zip(mine.requests, ref.requests):
        if r_m.output != r_r.output:
            _fail(where + say("other_tokens", rid=r_m.id))
    mm, mr = mine.metrics(), ref.metrics()
    for k, v in mr.items():
        if isinstance(v, (int, float)) and not math.isclose(mm[k], v, rel_tol=1e-9, abs_tol=1e-12):
            _fail(where + say("metric", key=k, mine=mm[k], ref=v))


def _runtime_hint(err: str, idx: int, policy: Policy, knobs: dict) -> str:
    running = [r.id for r in policy.running]
    if "no free slot" in err:  # words: ok (the engine's messages, matched; see core/kv.py and loop.py)
        held = policy.pool.num_slots - policy.pool.num_free
        return say("no_free_slot", idx=idx, held=held, slots=policy.pool.num_slots, running=running,
                   b=knobs["batch_size"])
    if "released twice" in err:  # words: ok
        return say("released_twice", idx=idx, err=err)
    if "stalled" in err:
        return say("stalled", idx=idx, waiting=[r.id for r in policy.waiting])
    if "wake" in err:
        return say("bad_wake", idx=idx, err=err)
    return say("engine_stopped", idx=idx, err=err)


def _check_policy(cls, kind: str, hint: str = "") -> None:
    """A policy answer against the reference on CHECK_RUNS fresh workloads of this kind."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    _guard()
    _own_policy_class(cls)
    with _one_thread():
        for _ in range(CHECK_RUNS):
            _run_student(cls, kind, fresh_seed(), hint)
    print(say("policy_passed", cls=cls.__name__, kind=kind, n=CHECK_RUNS))
