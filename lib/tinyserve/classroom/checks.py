"""What the exercises' check cells call. Each checker raises AssertionError with a message for the learner.

A policy answer runs on the real engine (float64, so tokens compare exactly) beside the built-in reference
policy, on several workloads seeded freshly at check time, and must match it step for step: the same works in
every step, the same metrics, the same tokens. A numeric answer is compared with what the engine's own trace
says for inputs chosen here. Nothing is compared with a stored number.

Integrity: an answer may not hand its work to the built-in policies or to the engine (they are booby-trapped
while it runs), may not subclass a built-in policy, and the checkers refuse to run if AssertionError was
rebound or an IPython handler swallows exceptions. The answer runs before the checker computes the truth, so
there is nothing in memory yet for it to copy. Messages that start with INTEGRITY say so; the grader reports
them apart. This is a speed bump for honest classes, not a sandbox.
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


def _fail(msg: str) -> None:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    raise _AE(msg)


def _integrity(msg: str) -> IntegrityError:
    return IntegrityError("INTEGRITY: " + msg)


def _guard() -> None:
    """Refuse to check when the checks themselves were disarmed in this kernel."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if builtins.AssertionError is not _AE:
        raise _integrity("AssertionError was rebound, so checks could not fail; restart the kernel and remove that")
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    if shell is not None and getattr(shell, "custom_exceptions", ()):
        raise _integrity("an IPython custom exception handler (set_custom_exc) would hide failing checks")


REFERENCES = (StaticBatching, DynamicBatching, ContinuousBatching, ChunkedPrefill)


@contextmanager
def _tripwire(engine: bool):
    """While the learner's code runs: the built-in policies (and, unless engine, the engine) raise IntegrityError."""
    saved = []

    def trap(owner, name, what):
        def tripped(*args, **kwargs):
            raise _integrity(f"your answer called {what}; the exercise is to write this part yourself")
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, tripped)

    for cls in REFERENCES:
        for name, v in list(vars(cls).items()):
            if inspect.isfunction(v):
                trap(cls, name, f"the built-in {cls.__name__}.{name}")
    if not engine:
        trap(Engine, "start", "the engine (Engine.start / tinyserve.run)")
        trap(Run, "step", "the engine (Run.step)")
    try:
        yield
    finally:
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)


def _own_policy_class(cls) -> None:
    """The answer is a Policy subclass written in the notebook, not a built-in one in disguise."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        _fail(f"expected a class that subclasses tinyserve.policies.Policy, got {cls!r}")
    for ref in REFERENCES:
        if issubclass(cls, ref):
            raise _integrity(f"{cls.__name__} subclasses the built-in {ref.__name__}; subclass Policy and write plan()")
    ref_codes = {f.__code__: f"{ref.__name__}.{n}" for ref in REFERENCES for n, f in vars(ref).items()
                 if inspect.isfunction(f)}
    for klass in cls.__mro__:
        if klass in (Policy, object):
            break
        for n, f in vars(klass).items():
            if inspect.isfunction(f) and f.__code__ in ref_codes:
                raise _integrity(f"{cls.__name__}.{n} is the built-in {ref_codes[f.__code__]}; write it yourself")


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
    elif kind == "chunked":
        c = rng.choice([4, 8, 16])
        # budgets below chunk + batch_size too: there a step's decodes and a full chunk do not both fit
        knobs = {"batch_size": b, "chunk_size": c, "max_batch_tokens": max(b, c + rng.choice([-2, 0, 1, b, b + 3]))}
    else:
        raise ValueError(f"unknown workload kind {kind!r}")
    return reqs, knobs


def reference_policy(kind: str, **knobs) -> Policy:
    """The built-in policy an answer is compared with."""
    if kind == "continuous":
        return make_policy("continuous", prefill_first=True, **knobs)
    return make_policy(kind, **knobs)


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
        pad = f" + {w.padding} padding" if w.padding else ""
        return f"{rid} prefill of positions {w.start}..{w.start + w.tokens - 1}{pad} on slot {w.slot}"
    return f"{rid} {w.phase} on slot {w.slot}"


def _validate(plan, policy: Policy, idx: int, knobs: dict) -> None:
    """Rules every plan keeps, checked before the engine runs it, in the learner's terms."""
    if not isinstance(plan, Plan):
        _fail(f"step {idx}: plan() must return Plan(works), got {type(plan).__name__}")
    works = plan.works
    if not isinstance(works, list) or not all(isinstance(w, Work) for w in works):
        _fail(f"step {idx}: Plan.works must be a list of Work, got {works!r:.200}")
    slots = set()
    for w in works:
        r = w.request
        if r not in policy.running:
            _fail(f"step {idx}: your plan computes {r.id}, which is not in self.running (admit a request by "
                  "claiming a slot for it: req.slot = self.pool.claim(); self.running.append(req))")
        if r.done and w.phase != "wasted":
            _fail(f"step {idx}: your plan asks {r.id} to {w.phase}, but {r.id} already finished; finished() must "
                  "take it out of self.running and give its slot back (self.pool.release(req.slot))")
        if w.slot != r.slot:
            _fail(f"step {idx}: {r.id} holds slot {r.slot}, but your Work puts it on slot {w.slot}")
        if w.slot in slots:
            _fail(f"step {idx}: two works on slot {w.slot}; a slot computes for one request per step")
        slots.add(w.slot)
        if w.phase == "prefill":
            if w.start != r.num_prefilled or w.tokens < 1 or w.start + w.tokens > r.prompt_len:
                _fail(f"step {idx}: {r.id} has {r.num_prefilled} of its {r.prompt_len} prompt tokens in its KV; "
                      f"a prefill must continue at position {r.num_prefilled} with 1..{r.prompt_len - r.num_prefilled}"
                      f" tokens, yours covers {w.start}..{w.start + w.tokens - 1}")
        elif w.phase in ("decode", "wasted"):
            if r.num_prefilled < r.prompt_len:
                _fail(f"step {idx}: {r.id} decodes before its prompt is prefilled "
                      f"({r.num_prefilled} of {r.prompt_len} tokens)")
        else:
            _fail(f"step {idx}: unknown phase {w.phase!r} (prefill, decode or wasted)")
    if len(works) > knobs["batch_size"]:
        _fail(f"step {idx}: your plan computes for {len(works)} requests, more than batch_size={knobs['batch_size']}")
    budget = knobs.get("max_batch_tokens")
    if budget is not None and sum(w.tokens + w.padding for w in works) > budget:
        _fail(f"step {idx}: your plan computes {sum(w.tokens for w in works)} tokens "
              f"({', '.join(_fmt(w) for w in works)}), over the token budget max_batch_tokens={budget}")


def _diff(idx: int, mine, ref, state: _State | None, knobs: dict, hint: str) -> str | None:
    a = {w.request_id: w for w in mine.works}
    b = {w.request_id: w for w in ref.works}
    lines = []
    for rid in sorted(a.keys() - b.keys(), key=_num):
        lines.append(f"you computed {_fmt(a[rid])}; the reference did not compute {rid} in this step")
    for rid in sorted(b.keys() - a.keys(), key=_num):
        lines.append(f"you did not compute {rid}; the reference computed {_fmt(b[rid])}")
    for rid in sorted(a.keys() & b.keys(), key=_num):
        if tuple(a[rid]) != tuple(b[rid]):
            lines.append(f"{rid}: you computed {_fmt(a[rid])}, the reference {_fmt(b[rid])}")
    if not lines and abs(mine.start_s - ref.start_s) > 1e-9:
        lines.append(f"the same works, but your step started at t = {mine.start_s * 1e3:.1f} ms and the "
                     f"reference's at t = {ref.start_s * 1e3:.1f} ms (a batch launched at the wrong time)")
    if not lines:
        return None
    msg = f"step {idx} (t = {mine.start_s * 1e3:.1f} ms): " + "; ".join(lines)
    msg += f". The reference's step {idx} (t = {ref.start_s * 1e3:.1f} ms): " + ", ".join(_fmt(w) for w in ref.works)
    if state is not None:
        msg += (f". When your policy planned it: running {state.running or 'none'}, waiting {state.waiting or 'none'},"
                f" {state.free_slots} free slot(s), batch_size={knobs['batch_size']}")
    return msg + (f". {hint}" if hint else "")


def _num(rid: str) -> tuple:
    return (len(rid), rid)


def _run_student(cls, kind: str, seed: int, hint: str) -> None:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    reqs, knobs = workload(kind, seed)
    where = f"[workload seed {seed}: {len(reqs)} requests, {', '.join(f'{k}={v}' for k, v in knobs.items())}] "
    eng = _engine()
    # the learner's policy runs first, so no reference result exists yet for it to find
    limit = sum(r.prompt_len + r.max_new_tokens for r in reqs) + 50  # one token a step would still finish
    with _tripwire(engine=True):
        try:
            policy = cls(**knobs)
        except NotImplementedError as e:
            raise _AE(where + f"your policy's __init__ is not written yet ({e})") from None
        except TypeError as e:
            _fail(where + f"{cls.__name__}({', '.join(f'{k}={v}' for k, v in knobs.items())}) failed: {e}")
        states: list[_State] = []
        inner = policy.plan

        def plan(now, more_coming):
            idx = len(run.steps)
            st = _State(now, [f"{r.id} (arrived {r.arrival_s * 1e3:.0f} ms)" for r in policy.waiting],
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
                err = f"your policy did not finish the workload: after {len(run.steps)} steps {left} are unfinished"
                break
            try:
                run.step()
            except _AE as e:
                if isinstance(e, IntegrityError):
                    raise
                err = str(e)
            except NotImplementedError as e:
                raise _AE(where + f"part of your policy is not written yet (NotImplementedError: {e})") from None
            except RuntimeError as e:
                err = _runtime_hint(str(e), len(run.steps), policy, knobs)
            except Exception as e:  # the learner's code raised: show it as a failed check with its cause
                raise _AE(where + f"step {len(run.steps)}: your policy raised {type(e).__name__}: {e}") from e
            held = policy.pool.num_slots - policy.pool.num_free
            if err is None and held > len(policy.running):
                gone = [r.id for r in run.requests if r.done and r not in policy.running]
                err = (f"after step {len(run.steps) - 1}, {held} slots are claimed but only {len(policy.running)} "
                       f"requests are running: finished() did not give back the slot of a finished request "
                       f"(self.pool.release(req.slot)); finished so far: {gone}")
    mine = run.trace()
    ref = eng.run(reqs, reference_policy(kind, **knobs), max_model_len=MAX_LEN, progress=False)
    # the first step that differs explains more than an error it led to later
    for rec in mine.steps:
        i = rec.index
        if i >= len(ref.steps):
            _fail(where + f"your policy ran a step {i}; the reference had finished everything after "
                  f"{len(ref.steps)} steps")
        d = _diff(i, rec, ref.steps[i], states[i] if i < len(states) else None, knobs, hint)
        if d:
            _fail(where + d)
    if err is not None:
        _fail(where + err)
    if len(mine.steps) != len(ref.steps):
        _fail(where + f"your policy finished after {len(mine.steps)} steps, the reference after {len(ref.steps)}")
    for r_m, r_r in zip(mine.requests, ref.requests):
        if r_m.output != r_r.output:
            _fail(where + f"{r_m.id} generated different tokens than under the reference: the same model must give "
                  "the same tokens when the same positions are computed; check the prefill positions")
    mm, mr = mine.metrics(), ref.metrics()
    for k, v in mr.items():
        if isinstance(v, (int, float)) and not math.isclose(mm[k], v, rel_tol=1e-9, abs_tol=1e-12):
            _fail(where + f"metric {k}: yours {mm[k]}, the reference's {v}")


def _runtime_hint(err: str, idx: int, policy: Policy, knobs: dict) -> str:
    running = [r.id for r in policy.running]
    if "no free slot" in err:
        held = policy.pool.num_slots - policy.pool.num_free
        return (f"step {idx}: your policy claimed a slot when none was free ({held} of {policy.pool.num_slots} held;"
                f" running {running}, batch_size={knobs['batch_size']}). Does plan() stop admitting at batch_size, "
                "and does finished() give back the slot of every finished request (self.pool.release(req.slot))?")
    if "released twice" in err:
        return f"step {idx}: your policy released a slot twice ({err}); release a request's slot once, when it finishes"
    if "stalled" in err:
        return (f"step {idx}: your policy returned an empty plan with requests waiting {[r.id for r in policy.waiting]}"
                " and none left to arrive: they would wait forever (launch what is waiting when nothing more comes)")
    if "wake" in err:
        return f"step {idx}: Plan.wake_s must be later than now ({err})"
    return f"step {idx}: the engine stopped: {err}"


def _check_policy(cls, kind: str, hint: str = "") -> None:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    _guard()
    _own_policy_class(cls)
    with _one_thread():
        for _ in range(CHECK_RUNS):
            _run_student(cls, kind, fresh_seed(), hint)
    print(f"passed: {cls.__name__} matched the built-in {kind} policy step for step on {CHECK_RUNS} fresh workloads")


def dynamic_policy(cls) -> None:
    """7.1 (c): the dynamic batching launch rule."""
    __tracebackhide__ = True
    _check_policy(cls, "dynamic", "Launch when the batch is full, when the oldest waiting request has waited "
                  "`timeout`, or when nothing more will arrive; otherwise wait (Plan([], wake_s=deadline)).")


def continuous_policy(cls) -> None:
    """7.2 (d): the continuous batching step."""
    __tracebackhide__ = True
    _check_policy(cls, "continuous", "Every step: running requests that are prefilled decode; waiting requests "
                  "enter free slots (FIFO, up to batch_size) and prefill their whole prompt in the same step.")


def chunked_policy(cls) -> None:
    """7.3 (e): decode-first chunk planning under a token budget."""
    __tracebackhide__ = True
    _check_policy(cls, "chunked", "Admit into free slots first; then every prefilled request decodes; then the "
                  "budget left goes to prefill chunks (at most chunk_size each) in admission order.")


# ----------------------------------------------------------------------------------------- numeric checks
def _call(fn, *args):
    """Call the learner's function with the engine and the built-in policies booby-trapped."""
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    with _tripwire(engine=False):
        try:
            return fn(*args)
        except NotImplementedError as e:
            raise _AE(f"{getattr(fn, '__name__', 'your function')} is not written yet ({e})") from None


def _as_int(x, what: str) -> int:
    __tracebackhide__ = True  # the learner sees the message, not the checker's frames
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__index__"):
        _fail(f"{what} must return a whole number, got {x!r}")
    if isinstance(x, float) and not x.is_integer():
        _fail(f"{what} must return a whole number of tokens, got {x!r}")
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
                _fail(f"for prompts of {lens} tokens in one static batch, the engine's prefill computed {truth} "
                      f"padding tokens (every prompt is padded up to the longest, {max(lens)}); "
                      f"your padding_tokens returned {got}")
    print(f"passed: padding_tokens agreed with the engine's trace on {len(cases)} batches")


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
            m = _static_run([rng.randint(2, 12) for _ in outs], outs, b, rng, dry).metrics()
            useful, wasted = m["decode_tokens"], m["wasted_decode_tokens"]
            truth = wasted / (useful + wasted) if useful + wasted else 0.0
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isclose(
                    got, truth, rel_tol=1e-9, abs_tol=1e-12):
                shown = outs if len(outs) <= 10 else f"[{outs[0]}, then {len(outs) - 1} x {outs[1]}]"
                _fail(f"for outputs {shown} in static batches of {b} (in arrival order), the engine's decode steps "
                      f"computed {useful} useful and {wasted} wasted tokens (the first token of each request comes "
                      f"from its prefill): a wasted fraction of {truth:.6f}; your wasted_fraction returned {got!r}")
    print(f"passed: wasted_fraction agreed with the engine's trace on {len(cases)} workloads")


def _sample_traces(seed: int) -> list[tuple[str, object]]:
    traces = []
    for kind in ("dynamic", "continuous", "chunked"):
        reqs, knobs = workload(kind, seed)
        traces.append((f"{kind} (workload seed {seed})",
                       _engine().run(reqs, reference_policy(kind, **knobs), max_model_len=MAX_LEN, progress=False)))
    return traces


def first_step(fn) -> None:
    """7.2 (g): the step in which a request was first computed."""
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
                _fail(f"in a {label} trace, {r.id} (arrived at t = {r.arrival_s * 1e3:.1f} ms) was first computed in "
                      f"step {truth} ({_fmt(w)}); your first_step returned {got}")
    print(f"passed: first_step agreed with {len(traces)} traces")


def slot_waste(fn) -> None:
    """7.2 (g): tokens a slot computed and threw away."""
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
                _fail(f"in a {label} trace, slot {slot} computed {pad} padding tokens and {wasted} wasted decode "
                      f"tokens = {pad + wasted} thrown away; your slot_waste returned {got}")
    print(f"passed: slot_waste agreed with {len(traces)} traces")


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
    """7.3 (h): the largest chunk that keeps the worst gap and the newcomer's TTFT under their targets."""
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
            rows = ", ".join(f"{c}: gap {g:.1f} ms / TTFT {t:.1f} ms" for c, (g, t) in table.items())
            _fail(f"targets: worst gap <= {itl_t:.1f} ms and newcomer TTFT <= {ttft_t:.1f} ms. The engine measured "
                  f"{rows}. The largest chunk meeting both is {truth}; your pick_chunk returned {got!r}")
    print(f"passed: pick_chunk chose right for {len(cases)} pairs of targets (workload seed {seed})")


def slabs_that_fit(fn) -> None:
    """7.4 (f): how many max-length slabs a KV memory holds."""
    __tracebackhide__ = True
    _guard()
    rng = random.Random(fresh_seed())
    eng = _engine()
    one = [Request("r0", make_prompt(4, seed=1), 2, 0.0, ignore_eos=True)]
    bpt = eng.start(one, "continuous", batch_size=1, max_model_len=8, clock="wall").pool.bytes_per_token
    cases = []
    for i in range(5):  # memories of k slabs and a bit (exactly k slabs once: the boundary)
        max_len = rng.randint(8, 64)
        k = rng.randint(1, 24)
        cases.append((k * max_len * bpt + (0 if i == 0 else rng.randrange(max_len * bpt)), max_len))
    for memory, max_len in cases:
        got = _as_int(_call(fn, memory, max_len, bpt), "slabs_that_fit")
        run = eng.start(one, "continuous", batch_size=10_000, kv_budget=memory, max_model_len=max_len, clock="wall")
        if run.pool.bytes_per_token != bpt:
            raise RuntimeError("the engine's KV bytes per position changed between runs")  # a checker bug
        truth = run.pool.num_slots
        if got != truth:
            _fail(f"with {memory:,} bytes of KV memory, slabs of max_len={max_len} positions and {bpt:,} bytes of K "
                  f"and V per position, the engine made {truth} slots (one slab = {max_len * bpt:,} bytes); "
                  f"your slabs_that_fit returned {got}")
    print(f"passed: slabs_that_fit agreed with the engine's slot pool on {len(cases)} memories")


def kv_bytes_used(fn) -> None:
    """7.4 (f): KV bytes a sequence really holds (its prompt included)."""
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
                    _fail(f"after step {rec.index}, {r.id} (a {r.prompt_len}-token prompt, {r.output_len} token(s) "
                          f"generated) has K/V for {r.context_len} positions in the engine = {truth:,} bytes "
                          f"({bpt:,} bytes per position); your kv_bytes_used({r.prompt_len}, {r.output_len}, {bpt}) "
                          f"returned {got:,}")
            total = sum(_call(fn, r.prompt_len, r.output_len, bpt) for r in held)
            if total != rec.kv_used_bytes:
                _fail(f"after step {rec.index} the trace reports {rec.kv_used_bytes:,} KV bytes in use; "
                      f"the sum of your kv_bytes_used is {total:,}")
    print(f"passed: kv_bytes_used agreed with the trace's KV bytes in use on every step (workload seed {seed})")
