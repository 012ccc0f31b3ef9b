"""Checkers of the 7.4 exercises (the KV cache bounds the batch): slabs that fit a memory, the K/V bytes a
sequence holds, and a slab allocator mirrored on every claim and release of real runs."""
from __future__ import annotations

import random
from typing import Callable

from ..core.scheduling import ContinuousBatching, Plan
from ..core.request import Request
from ..core.workloads import make_prompt
from ..engine import Engine
from ..loop import Run, StepHook
from ..trace.step import StepRecord
from . import harness
from .harness import CHECK_RUNS, MAX_LEN, _as_int, _engine, _one_thread, _where, workload
from .integrity import _AE, NotWritten, _call, _fail, _guard, _tripwire
from .text import say


def _bytes_per_token() -> int:
    """K/V bytes per token of the checks' engine (a run is set up for it, never stepped)."""
    one = [Request("r0", make_prompt(4, seed=1), 2, 0.0, ignore_eos=True)]
    return _engine().start(one, "continuous", batch_size=1, max_model_len=8, clock="wall").pool.bytes_per_token


def slabs_that_fit(fn) -> None:
    """7.4 (l): how many max-length slabs a KV memory holds."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(harness.fresh_seed())
    eng = _engine()
    one = [Request("r0", make_prompt(4, seed=1), 2, 0.0, ignore_eos=True)]
    bpt = _bytes_per_token()
    cases = []
    for i in range(5):  # memories of k slabs and a bit (exactly k slabs once: the boundary)
        max_len = rng.randint(8, 64)
        k = rng.randint(1, 24)
        cases.append((k * max_len * bpt + (0 if i == 0 else rng.randrange(max_len * bpt)), max_len))
    for memory, max_len in cases:
        got = _as_int(_call(fn, memory, max_len, bpt), "slabs_that_fit")
        run = eng.start(one, "continuous", batch_size=10_000, kv_budget=memory, max_model_len=max_len, clock="wall")
        if run.pool.bytes_per_token != bpt:
            raise RuntimeError(say("bpt_changed"))  # a checker bug
        truth = run.pool.num_slots
        if got != truth:
            _fail(say("slabs_wrong", memory=memory, max_len=max_len, bpt=bpt, truth=truth, got=got))
    print(say("slabs_passed", n=len(cases)))


class _KVWatch(StepHook):
    """After every step: the learner's count for each request the step computed, and their sum, against the
    engine's."""

    def __init__(self, fn):
        self.fn = fn

    def recorded(self, run: Run, plan: Plan, rec: StepRecord) -> None:
        __tracebackhide__ = True
        fn, bpt = self.fn, run.pool.bytes_per_token
        held = [run.requests[[r.id for r in run.requests].index(w.request_id)] for w in rec.works]
        for r in held:
            got = _as_int(_call(fn, r.prompt_len, r.output_len, bpt), "kv_bytes_used")
            truth = r.context_len * bpt
            if got != truth:
                _fail(say("kv_wrong", idx=rec.index, rid=r.id, prompt=r.prompt_len, gen=r.output_len,
                          ctx=r.context_len, truth=truth, bpt=bpt, got=got))
        total = sum(_call(fn, r.prompt_len, r.output_len, bpt) for r in held)
        if total != rec.kv_used_bytes:
            _fail(say("kv_sum_wrong", idx=rec.index, truth=rec.kv_used_bytes, got=total))


def kv_bytes_used(fn) -> None:
    """7.4 (m): KV bytes a sequence really holds (its prompt included)."""
    __tracebackhide__ = True
    _guard()
    seed = harness.fresh_seed()
    rng = random.Random(seed)
    reqs = [Request(f"r{i}", make_prompt(rng.randint(2, 30), seed=rng.randrange(10**6)), rng.randint(1, 8), 0.0,
                    ignore_eos=True) for i in range(rng.randint(4, 7))]
    with _one_thread():
        _engine().run(reqs, "continuous", batch_size=rng.randint(2, 3), max_model_len=MAX_LEN, clock="wall",
                      progress=False, hooks=(_KVWatch(fn),))
    print(say("kv_passed", seed=seed))


# ---------------------------------------------------------------------------------------------- slab allocator
class _MirrorPool:
    """The engine's slot pool, with every call the policy makes repeated on the learner's allocator and compared."""

    def __init__(self, ref, mine, where: str, step: Callable[[], int]):
        self.ref, self.mine, self.where, self.step = ref, mine, where, step
        self.num_slots = ref.num_slots
        self.rid = "?"

    def _mine(self, method: str, *args):
        __tracebackhide__ = True
        try:
            with _tripwire(engine=False):
                got = getattr(self.mine, method)
                return got(*args) if callable(got) else got
        except NotImplementedError as e:
            raise NotWritten(say("fn_not_written", fn=f"MySlabs.{method}", err=e)) from None
        except _AE:
            raise
        except Exception as e:  # noqa: BLE001 - the learner's code raised
            _fail(say("slabs_raised", where=self.where, idx=self.step(), method=method, exc=type(e).__name__, err=e))

    @property
    def num_free(self) -> int:
        truth, got = self.ref.num_free, self._mine("num_free")
        if got != truth:
            _fail(say("slabs_free", where=self.where, idx=self.step(), truth=truth, got=got))
        return truth

    def claim(self) -> int:
        free = self.ref.num_free
        truth = self.ref.claim()
        got = self._mine("claim")
        if got != truth:
            _fail(say("slabs_claim", where=self.where, idx=self.step(), truth=truth, rid=self.rid, free=free, got=got))
        return truth

    def release(self, slot: int) -> None:
        self.ref.release(slot)
        self._mine("release", slot)

    def __getattr__(self, name):  # anything else the engine reads: the engine's own pool
        return getattr(self.ref, name)


class _MirroredContinuous(ContinuousBatching):
    """The reference policy (continuous, prefill first) talking to a _MirrorPool: bind wraps the engine's pool,
    so the policy's claims and releases reach the learner's allocator too while the engine keeps its own pool for
    its accounting (nothing of the run is reassigned)."""

    def __init__(self, batch_size: int, mine, where: str, step: Callable[[], int]):
        super().__init__(batch_size, prefill_first=True)
        self._mirror_args = (mine, where, step)
        self.mirror: _MirrorPool | None = None

    def bind(self, pool) -> None:
        self.mirror = _MirrorPool(pool, *self._mirror_args)
        super().bind(self.mirror)


class _SlabWatch(StepHook):
    """After every step: the learner's held bytes against the engine's, and, when every slot is taken, a claim
    that must be refused."""

    def __init__(self, policy: _MirroredContinuous):
        self.policy = policy  # its mirror is made when the run binds it

    def recorded(self, run: Run, plan: Plan, rec: StepRecord) -> None:
        __tracebackhide__ = True
        pool, mirror = run.pool, self.policy.mirror
        where = mirror.where
        held = pool.num_slots - pool.num_free
        got = mirror._mine("held_bytes")
        if got != pool.held_bytes():
            _fail(say("slabs_held", where=where, idx=rec.index, truth=pool.held_bytes(), held=held, got=got))
        if pool.num_free == 0:  # full: a claim now must be refused, not over-commit the memory
            got = mirror._mine("claim")
            if got is not None:
                _fail(say("slabs_overcommit", where=where, idx=rec.index, n=pool.num_slots, got=got))


def _slab_run(cls, eng: Engine, bpt: int, seed: int) -> None:
    """One real run of the reference policy with the learner's allocator mirrored, then a double release."""
    __tracebackhide__ = True
    rng = random.Random(seed)
    reqs, knobs = workload("continuous", seed)
    b = knobs["batch_size"] = rng.randint(3, 6)
    max_len = rng.choice([32, 48, 64])
    memory = rng.randint(1, b + 1) * max_len * bpt + rng.randrange(max_len * bpt)
    knobs["kv_budget"] = memory
    where = _where(seed, reqs, knobs)
    try:
        with _tripwire(engine=False):
            mine = cls(memory, max_len, bpt, b)
    except NotImplementedError as e:
        raise NotWritten(say("fn_not_written", fn="MySlabs.__init__", err=e)) from None
    policy = _MirroredContinuous(b, mine, where, lambda: len(run.steps))  # run: set below, before any step
    run = eng.start(reqs, policy, kv_budget=memory, max_model_len=max_len, clock="wall",
                    hooks=(_SlabWatch(policy),))
    got = getattr(mine, "num_slots", None)
    if got != run.pool.num_slots:
        _fail(say("slabs_count", where=where, memory=memory, max_len=max_len, bpt=bpt, b=b,
                  truth=run.pool.num_slots, got=got))
    run.finish(progress=False)
    # every slot is free again: giving one back twice is a bug the allocator must catch
    try:
        with _tripwire(engine=False):
            mine.release(0)
    except ValueError:
        pass
    except NotImplementedError as e:
        raise NotWritten(say("fn_not_written", fn="MySlabs.release", err=e)) from None
    else:
        _fail(say("slabs_release_twice", where=where, slot=0))


def slab_allocator(cls) -> None:
    """7.4 (n): a slab allocator that refuses what does not fit, mirrored on every claim and release of real runs."""
    __tracebackhide__ = True
    _guard()
    eng = _engine()
    bpt = _bytes_per_token()
    with _one_thread():
        for _ in range(CHECK_RUNS):
            _slab_run(cls, eng, bpt, harness.fresh_seed())
    print(say("slabs_alloc_passed", n=CHECK_RUNS))
