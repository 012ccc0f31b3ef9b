"""Checkers of the 7.2 exercises (continuous batching): the continuous and decode-first policies, and reading a
trace (a request's first step, a slot's waste)."""
from __future__ import annotations

from . import harness
from .harness import MAX_LEN, _as_int, _check_policy, _engine, _one_thread, reference_policy, workload
from .integrity import _call, _fail, _guard
from .plans import _fmt
from .text import say


def continuous_policy(cls) -> None:
    """7.2 (d): the continuous batching step."""
    __tracebackhide__ = True
    _check_policy(cls, "continuous", say("hint_continuous"))


def decode_first_policy(cls) -> None:
    """7.2 (e): decode-first continuous batching with a bound on how long newcomers wait."""
    __tracebackhide__ = True
    _check_policy(cls, "decode-first", say("hint_decode_first"))


def _sample_traces(seed: int) -> list[tuple[str, object]]:
    """(label, trace) of the reference policies' runs on this seed's workloads: the traces an answer reads."""
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
        traces = _sample_traces(harness.fresh_seed())
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
        traces = _sample_traces(harness.fresh_seed())
    for label, tr in traces:
        for slot in range(tr.num_slots):
            pad = sum(w.padding for s in tr.steps for w in s.works if w.slot == slot)
            wasted = sum(w.tokens for s in tr.steps for w in s.works if w.slot == slot and w.phase == "wasted")
            got = _as_int(_call(fn, tr, slot), "slot_waste")
            if got != pad + wasted:
                _fail(say("slot_waste_wrong", label=label, slot=slot, pad=pad, wasted=wasted, total=pad + wasted,
                          got=got))
    print(say("slot_waste_passed", n=len(traces)))
