"""What the exercises' check cells call. Each checker raises AssertionError with a message for the learner.

A policy answer runs on the real engine (float64, so tokens compare exactly) beside the built-in reference
policy, on several workloads seeded freshly at check time, and must match it step for step: the same works in
every step, the same metrics, the same tokens. The chunker and the slab allocator are checked the same way, at
every step of a real run. A numeric answer is compared with what the engine's own trace says for inputs
chosen here. Nothing is compared with a stored number. Every message is in tinyserve.lang.classroom (one
table, every language).

Integrity: an answer may not hand its work to the built-in policies or to the engine (they are booby-trapped
while it runs), may not subclass a built-in policy, and the checkers refuse to run if AssertionError was
rebound or an IPython handler swallows exceptions. Messages that start with INTEGRITY say so; the grader
reports them apart. This is a speed bump, not a sandbox (the grader's sandbox is its own process, see grade.py).
"""
from __future__ import annotations

import builtins
import inspect
import math
import random
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..engine import Engine, Run
from ..core.policies import ChunkedPrefill, ContinuousBatching, DynamicBatching, Plan, Policy, StaticBatching, make_policy
from ..core.request import Request, Work
from ..core.workloads import make_prompt
from .text import say

MAX_LEN = 128  # slab length for every check run: prompts and outputs here stay well below it
CHECK_RUNS = 4  # fresh workloads per policy check


def _genuine_assertion_error() -> type:
    """The interpreter's own AssertionError, whatever the name is bound to now."""
    try:
        assert False  # noqa: B011  (a failing assert raises the C-level class, not the builtins name)
    except BaseException as e:  # noqa: BLE001
        return type(e)


_AE = _genuine_assertion_error()


class IntegrityError(_AE):
    """An answer that bypasses the exercise (delegation, rebinding); reported apart by the grader."""


class NotWritten(_AE):
    """The answer still raises the stub's NotImplementedError: not attempted (the self-check says so)."""


def _fail(msg: str) -> None:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    raise _AE(msg)


def _integrity(msg: str) -> IntegrityError:
    return IntegrityError(say("integrity", why=msg))


def _guard() -> None:
    """Refuse to check when the checks themselves were disarmed in this kernel."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if builtins.AssertionError is not _AE:
        raise _integrity(say("rebound"))
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    if shell is not None and getattr(shell, "custom_exceptions", ()):
        raise _integrity(say("custom_exc"))


REFERENCES = (StaticBatching, DynamicBatching, ContinuousBatching, ChunkedPrefill)


@contextmanager
def _tripwire(engine: bool):
    """While the learner's code runs: the built-in policies (and, unless engine, the engine) raise IntegrityError."""
    saved = []

    def trap(owner, name, what):
        def tripped(*args, **kwargs):
            raise _integrity(say("called_builtin", what=what))
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, tripped)

    for cls in REFERENCES:
        for name, v in list(vars(cls).items()):
            if inspect.isfunction(v):
                trap(cls, name, say("what_builtin", cls=cls.__name__, name=name))
    if not engine:
        trap(Engine, "start", say("what_engine"))
        trap(Run, "step", say("what_run_step"))
    try:
        yield
    finally:
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)


def _own_policy_class(cls) -> None:
    """The answer is a Policy subclass written in the notebook, not a built-in one in disguise."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        _fail(say("not_policy", got=repr(cls)))
    for ref in REFERENCES:
        if issubclass(cls, ref):
            raise _integrity(say("subclasses_builtin", cls=cls.__name__, ref=ref.__name__))
    ref_codes = {f.__code__: f"{ref.__name__}.{n}" for ref in REFERENCES for n, f in vars(ref).items()
                 if inspect.isfunction(f)}
    for klass in cls.__mro__:
        if klass in (Policy, object):
            break
        for n, f in vars(klass).items():
            if inspect.isfunction(f) and f.__code__ in ref_codes:
                raise _integrity(say("copies_builtin", cls=cls.__name__, name=n, ref=ref_codes[f.__code__]))


_ENGINE: list[Engine] = []


def _engine() -> Engine:
    if not _ENGINE:
        _ENGINE.append(Engine(device="cpu", dtype="float64"))  # float64: tokens compare exactly
    return _ENGINE[0]


@contextmanager
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: threads only fight other kernels for the cores
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fresh_seed() -> int:
    """A seed nobody stored: a new workload at every check."""
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


# ------------------------------------------------------------------------------------------ policy checks
@dataclass
class _State:
    now: float
    waiting: list[str]
    running: list[str]
    free_slots: int


def _fmt(w) -> str:
    """A Work or SlotWork in words."""
    rid = w.request.id if isinstance(w, Work) else w.request_id
    if w.phase == "prefill":
        pad = say("fmt_pad", n=w.padding) if w.padding else ""
        return say("fmt_prefill", rid=rid, lo=w.start, hi=w.start + w.tokens - 1, pad=pad, slot=w.slot)
    return say("fmt_other", rid=rid, phase=w.phase, slot=w.slot)


def _validate(plan, policy: Policy, idx: int, knobs: dict) -> None:
    """Rules every plan keeps, checked before the engine runs it, in the learner's terms."""
    if not isinstance(plan, Plan):
        _fail(say("not_plan", idx=idx, got=type(plan).__name__))
    works = plan.works
    if not isinstance(works, list) or not all(isinstance(w, Work) for w in works):
        _fail(say("not_works", idx=idx, got=f"{works!r:.200}"))
    slots = set()
    for w in works:
        r = w.request
        if r not in policy.running:
            _fail(say("not_running", idx=idx, rid=r.id))
        if r.done and w.phase != "wasted":
            _fail(say("already_done", idx=idx, rid=r.id, phase=w.phase))
        if w.slot != r.slot:
            _fail(say("wrong_slot", idx=idx, rid=r.id, held=r.slot, slot=w.slot))
        if w.slot in slots:
            _fail(say("two_on_slot", idx=idx, slot=w.slot))
        slots.add(w.slot)
        if w.phase == "prefill":
            if w.start != r.num_prefilled or w.tokens < 1 or w.start + w.tokens > r.prompt_len:
                _fail(say("bad_prefill", idx=idx, rid=r.id, done=r.num_prefilled, total=r.prompt_len,
                          left=r.prompt_len - r.num_prefilled, lo=w.start, hi=w.start + w.tokens - 1))
        elif w.phase in ("decode", "wasted"):
            if r.num_prefilled < r.prompt_len:
                _fail(say("early_decode", idx=idx, rid=r.id, done=r.num_prefilled, total=r.prompt_len))
        else:
            _fail(say("bad_phase", idx=idx, phase=w.phase))
    if len(works) > knobs["batch_size"]:
        _fail(say("over_batch", idx=idx, n=len(works), b=knobs["batch_size"]))
    budget = knobs.get("max_batch_tokens")
    if budget is not None and sum(w.tokens + w.padding for w in works) > budget:
        _fail(say("over_budget", idx=idx, n=sum(w.tokens for w in works), works=", ".join(_fmt(w) for w in works),
                  b=budget))


def _diff(idx: int, mine, ref, state: _State | None, knobs: dict, hint: str) -> str | None:
    a = {w.request_id: w for w in mine.works}
    b = {w.request_id: w for w in ref.works}
    lines = []
    for rid in sorted(a.keys() - b.keys(), key=_num):
        lines.append(say("extra_work", work=_fmt(a[rid]), rid=rid))
    for rid in sorted(b.keys() - a.keys(), key=_num):
        lines.append(say("missing_work", rid=rid, work=_fmt(b[rid])))
    for rid in sorted(a.keys() & b.keys(), key=_num):
        if tuple(a[rid]) != tuple(b[rid]):
            lines.append(say("other_work", rid=rid, mine=_fmt(a[rid]), ref=_fmt(b[rid])))
    if not lines and abs(mine.start_s - ref.start_s) > 1e-9:
        lines.append(say("wrong_time", mine=mine.start_s * 1e3, ref=ref.start_s * 1e3))
    if not lines:
        return None
    msg = say("diff_head", idx=idx, t=mine.start_s * 1e3) + say("clause_sep").join(lines)
    msg += say("diff_ref", idx=idx, t=ref.start_s * 1e3, works=say("list_sep").join(_fmt(w) for w in ref.works))
    if state is not None:
        msg += say("diff_state", running=state.running or say("none"), waiting=state.waiting or say("none"),
                   free=state.free_slots, b=knobs["batch_size"])
    return msg + (say("hint_sep", hint=hint) if hint else "")


def _num(rid: str) -> tuple:
    return (len(rid), rid)


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
        states: list[_State] = []
        inner = policy.plan

        def plan(now, more_coming):
            idx = len(run.steps)
            st = _State(now, [say("arrived", rid=r.id, ms=r.arrival_s * 1e3) for r in policy.waiting],
                        [r.id for r in policy.running], policy.pool.num_free)
            p = inner(now, more_coming)
            _validate(p, policy, idx, knobs)
            if p.works:
                states.append(st)
            return p

        policy.plan = plan  # an instance attribute: the engine calls it, the class is untouched
        run = eng.start(reqs, policy, max_model_len=MAX_LEN)
        err, calls = None, 0
        while not run.done and err is None:
            calls += 1
            if len(run.steps) > limit or calls > 10 * limit:
                left = [r.id for r in run.requests if not r.done]
                err = say("unfinished", steps=len(run.steps), left=left)
                break
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
    mine = run.trace()
    ref = eng.run(reqs, reference_policy(kind, **knobs), max_model_len=MAX_LEN, progress=False)
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
    if "no free slot" in err:  # words: ok (the engine's messages, matched; see core/kv.py and core/run.py)
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
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    _guard()
    _own_policy_class(cls)
    with _one_thread():
        for _ in range(CHECK_RUNS):
            _run_student(cls, kind, fresh_seed(), hint)
    print(say("policy_passed", cls=cls.__name__, kind=kind, n=CHECK_RUNS))


def dynamic_policy(cls) -> None:
    """7.1 (c): the dynamic batching launch rule."""
    __tracebackhide__ = True
    _check_policy(cls, "dynamic", say("hint_dynamic"))


def continuous_policy(cls) -> None:
    """7.2 (d): the continuous batching step."""
    __tracebackhide__ = True
    _check_policy(cls, "continuous", say("hint_continuous"))


def decode_first_policy(cls) -> None:
    """7.2 (e): decode-first continuous batching with a bound on how long newcomers wait."""
    __tracebackhide__ = True
    _check_policy(cls, "decode-first", say("hint_decode_first"))


def chunked_policy(cls) -> None:
    """7.3 (i): decode-first chunk planning under a token budget."""
    __tracebackhide__ = True
    _check_policy(cls, "chunked", say("hint_chunked"))


# ----------------------------------------------------------------------------------------- numeric checks
def _call(fn, *args, engine: bool = False):
    """Call the learner's function with the built-in policies (and, unless engine, the engine) booby-trapped."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    with _tripwire(engine=engine):
        try:
            return fn(*args)
        except NotImplementedError as e:
            raise NotWritten(say("fn_not_written", fn=getattr(fn, "__name__", say("your_function")), err=e)) from None


def _as_int(x, what: str) -> int:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__index__"):
        _fail(say("not_whole", fn=what, got=repr(x)))
    if isinstance(x, float) and not x.is_integer():
        _fail(say("not_whole_tokens", fn=what, got=repr(x)))
    return int(x)


def _static_run(prompt_lens: list[int], outputs: list[int], batch_size: int, rng: random.Random, dry: bool = False):
    reqs = [Request(f"r{i}", make_prompt(p, seed=rng.randrange(10**6)), o, 0.0, ignore_eos=True)
            for i, (p, o) in enumerate(zip(prompt_lens, outputs))]
    return _engine().run(reqs, "static", batch_size=batch_size, max_model_len=None if dry else MAX_LEN,
                         dry_run=dry, progress=False)


def padding_tokens(fn) -> None:
    """7.1 (a): padding computed by one static prefill."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(fresh_seed())
    cases = [[rng.randint(1, 40) for _ in range(rng.randint(2, 6))] for _ in range(4)]
    cases += [[rng.randint(1, 40)], [7, 7, 7]]
    with _one_thread():
        for lens in cases:  # the answer first: no truth exists yet for it to find
            got = _as_int(_call(fn, list(lens)), "padding_tokens")
            truth = _static_run(lens, [1] * len(lens), len(lens), rng).metrics()["padding_tokens"]
            if got != truth:
                _fail(say("padding_wrong", lens=lens, truth=truth, got=got))
    print(say("padding_passed", n=len(cases)))


def _wasted_truth(outs: list[int], b: int, rng: random.Random, dry: bool) -> tuple[int, int]:
    m = _static_run([rng.randint(2, 12) for _ in outs], outs, b, rng, dry).metrics()
    return m["decode_tokens"], m["wasted_decode_tokens"]


def wasted_fraction(fn) -> None:
    """7.1 (b): the fastest finisher's wasted fraction."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(fresh_seed())
    cases = []
    for _ in range(4):
        n = rng.randint(2, 8)
        cases.append(([rng.randint(1, 12) for _ in range(n)], rng.randint(1, 4), False))
    cases.append(([2000] + [20] * 31, 32, True))  # the chapter's case, as a dry run (counts, no model)
    with _one_thread():
        for outs, b, dry in cases:
            got = _call(fn, list(outs), b)
            useful, wasted = _wasted_truth(outs, b, rng, dry)
            truth = wasted / (useful + wasted) if useful + wasted else 0.0
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isclose(
                    got, truth, rel_tol=1e-9, abs_tol=1e-12):
                shown = outs if len(outs) <= 10 else say("outs_long", first=outs[0], n=len(outs) - 1, second=outs[1])
                _fail(say("wasted_wrong", outs=shown, b=b, useful=useful, wasted=wasted, truth=truth, got=repr(got)))
    print(say("wasted_passed", n=len(cases)))


def _sample_traces(seed: int) -> list[tuple[str, object]]:
    traces = []
    for kind in ("dynamic", "continuous", "chunked"):
        reqs, knobs = workload(kind, seed)
        traces.append((say("trace_label", kind=kind, seed=seed),
                       _engine().run(reqs, reference_policy(kind, **knobs), max_model_len=MAX_LEN, progress=False)))
    return traces


def first_step(fn) -> None:
    """7.2 (f): the step in which a request was first computed."""
    __tracebackhide__ = True
    _guard()
    with _one_thread():
        traces = _sample_traces(fresh_seed())
    for label, tr in traces:
        for r in tr.requests:
            truth = next(s.index for s in tr.steps if any(w.request_id == r.id for w in s.works))
            got = _as_int(_call(fn, tr, r.id), "first_step")
            if got != truth:
                w = next(w for w in tr.steps[truth].works if w.request_id == r.id)
                _fail(say("first_step_wrong", label=label, rid=r.id, ms=r.arrival_s * 1e3, truth=truth, work=_fmt(w),
                          got=got))
    print(say("first_step_passed", n=len(traces)))


def slot_waste(fn) -> None:
    """7.2 (f): tokens a slot computed and threw away."""
    __tracebackhide__ = True
    _guard()
    with _one_thread():
        traces = _sample_traces(fresh_seed())
    for label, tr in traces:
        for slot in range(tr.num_slots):
            pad = sum(w.padding for s in tr.steps for w in s.works if w.slot == slot)
            wasted = sum(w.tokens for s in tr.steps for w in s.works if w.slot == slot and w.phase == "wasted")
            got = _as_int(_call(fn, tr, slot), "slot_waste")
            if got != pad + wasted:
                _fail(say("slot_waste_wrong", label=label, slot=slot, pad=pad, wasted=wasted, total=pad + wasted,
                          got=got))
    print(say("slot_waste_passed", n=len(traces)))


# ------------------------------------------------------------------------------------ the token-budget chunker
def _chunker_run(fn, seed: int) -> None:
    __tracebackhide__ = True
    reqs, knobs = workload("chunked", seed)
    where = _where(seed, reqs, knobs)
    policy = reference_policy("chunked", **knobs)
    inner, steps = policy.plan, [0]

    def plan(now, more_coming):
        p = inner(now, more_coming)
        if not p.works:
            return p
        idx, steps[0] = steps[0], steps[0] + 1
        prefilling = [r for r in policy.running if r.num_prefilled < r.prompt_len]  # before this step runs
        decodes = sum(w.phase == "decode" for w in p.works)
        truth = [next((w.tokens for w in p.works if w.request is r and w.phase == "prefill"), 0) for r in prefilling]
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
        return p

    policy.plan = plan
    _engine().run(reqs, policy, max_model_len=MAX_LEN, dry_run=True, progress=False)


def plan_chunks(fn) -> None:
    """7.3 (h): the token-budget chunker, at every step of the built-in chunked policy's runs."""
    __tracebackhide__ = True
    _guard()
    with _one_thread():
        for _ in range(CHECK_RUNS):
            _chunker_run(fn, fresh_seed())
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
            gaps = [b - a for r in tr.requests if r.id != "long" for a, b in zip(r.token_times, r.token_times[1:])]
            long = tr.request("long")
            cache[chunk] = (max(gaps) * 1e3, (long.first_token_s - long.arrival_s) * 1e3)
        return cache[chunk]

    return measure


CHUNKS = [64, 128, 256, 512, 1024, 2048]


def pick_chunk(fn) -> None:
    """7.3 (j): the largest chunk that keeps the worst gap and the newcomer's TTFT under their targets."""
    __tracebackhide__ = True
    _guard()
    seed = fresh_seed()
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


# --------------------------------------------------------------------------------------------------- KV
def _bytes_per_token() -> int:
    one = [Request("r0", make_prompt(4, seed=1), 2, 0.0, ignore_eos=True)]
    return _engine().start(one, "continuous", batch_size=1, max_model_len=8, clock="wall").pool.bytes_per_token


def slabs_that_fit(fn) -> None:
    """7.4 (l): how many max-length slabs a KV memory holds."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(fresh_seed())
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


def kv_bytes_used(fn) -> None:
    """7.4 (m): KV bytes a sequence really holds (its prompt included)."""
    __tracebackhide__ = True
    _guard()
    seed = fresh_seed()
    rng = random.Random(seed)
    reqs = [Request(f"r{i}", make_prompt(rng.randint(2, 30), seed=rng.randrange(10**6)), rng.randint(1, 8), 0.0,
                    ignore_eos=True) for i in range(rng.randint(4, 7))]
    with _one_thread():
        run = _engine().start(reqs, "continuous", batch_size=rng.randint(2, 3), max_model_len=MAX_LEN, clock="wall")
        bpt = run.pool.bytes_per_token
        while not run.done:
            rec = run.step()
            if rec is None:
                continue
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
    print(say("kv_passed", seed=seed))


class _MirrorPool:
    """The engine's slot pool, with every call the policy makes repeated on the learner's allocator and compared."""

    def __init__(self, ref, mine, where: str, step):
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


def slab_allocator(cls) -> None:
    """7.4 (n): a slab allocator that refuses what does not fit, mirrored on every claim and release of real runs."""
    __tracebackhide__ = True
    _guard()
    eng = _engine()
    bpt = _bytes_per_token()
    with _one_thread():
        for _ in range(CHECK_RUNS):
            seed = fresh_seed()
            rng = random.Random(seed)
            reqs, knobs = workload("continuous", seed)
            b = knobs["batch_size"] = rng.randint(3, 6)
            max_len = rng.choice([32, 48, 64])
            memory = rng.randint(1, b + 1) * max_len * bpt + rng.randrange(max_len * bpt)
            knobs["kv_budget"] = memory
            where = _where(seed, reqs, knobs)
            run = eng.start(reqs, reference_policy("continuous", batch_size=b), kv_budget=memory,
                            max_model_len=max_len, clock="wall")
            try:
                with _tripwire(engine=False):
                    mine = cls(memory, max_len, bpt, b)
            except NotImplementedError as e:
                raise NotWritten(say("fn_not_written", fn="MySlabs.__init__", err=e)) from None
            got = getattr(mine, "num_slots", None)
            if got != run.pool.num_slots:
                _fail(say("slabs_count", where=where, memory=memory, max_len=max_len, bpt=bpt, b=b,
                          truth=run.pool.num_slots, got=got))
            mirror = _MirrorPool(run.pool, mine, where, lambda: len(run.steps))
            run.policy.pool = mirror  # the engine keeps its own pool for its accounting; the policy talks to both
            while not run.done:
                rec = run.step()
                if rec is None:
                    continue
                held = run.pool.num_slots - run.pool.num_free
                got = mirror._mine("held_bytes")
                if got != run.pool.held_bytes():
                    _fail(say("slabs_held", where=where, idx=rec.index, truth=run.pool.held_bytes(),
                              held=held, got=got))
                if run.pool.num_free == 0:  # full: a claim now must be refused, not over-commit the memory
                    got = mirror._mine("claim")
                    if got is not None:
                        _fail(say("slabs_overcommit", where=where, idx=rec.index, n=run.pool.num_slots, got=got))
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
    print(say("slabs_alloc_passed", n=CHECK_RUNS))


# ----------------------------------------------------------------------------------- predict -> derive -> check
def _reflect_padding(fn):
    truth = _static_run([50, 4000], [1, 1], 2, random.Random(0), dry=True).metrics()["padding_tokens"]
    return "reflect_padding", (lambda: fn([50, 4000])), truth, None


def _reflect_wasted(fn):
    outs = [2000] + [20] * 31
    tr = _static_run([8] * 32, outs, 32, random.Random(0), dry=True)
    m = tr.metrics()
    truth = m["wasted_decode_tokens"] / (m["decode_tokens"] + m["wasted_decode_tokens"])
    long_slot = next(w.slot for s in tr.steps for w in s.works if w.request_id == "r0")
    mine = [w for s in tr.steps for w in s.works if w.slot != long_slot and w.phase in ("decode", "wasted")]
    share = sum(w.phase == "wasted" for w in mine) / len(mine)
    return "reflect_wasted", (lambda: fn(outs, 32)), round(truth, 4), say("reflect_wasted_note", short=share)


REFLECT = {"padding": _reflect_padding, "wasted": _reflect_wasted}


def reflect(which: str, prediction, fn) -> None:
    """Print the learner's prediction beside their function's answer and the engine's, for the chapter's case."""
    with _one_thread():
        title, mine, truth, note = REFLECT[which](fn)
    print(say("reflect_head", title=say(title)))
    print(say("reflect_guess", guess=prediction) if prediction is not None else say("reflect_no_guess"))
    try:
        got = _call(mine)
        print(say("reflect_fn", got=round(got, 4) if isinstance(got, float) else got))
    except (NotWritten, NotImplementedError):
        print(say("reflect_fn_missing"))
    print(say("reflect_engine", truth=truth))
    if note:
        print(say("reflect_note", note=note))


# the checker a check cell's metadata names (tinyserve.checker), for the self-check and the grader
CHECKERS = {f.__name__: f for f in (padding_tokens, wasted_fraction, dynamic_policy, continuous_policy,
                                    decode_first_policy, first_step, slot_waste, plan_chunks, chunked_policy,
                                    pick_chunk, slabs_that_fit, kv_bytes_used, slab_allocator)}
