"""A learner's plan in the learner's terms: the rules every plan keeps, and where it differs from the reference's.

The harness (harness.py) checks each plan of a learner's policy with _validate before the engine runs it, and
explains the first step that differs from the reference policy's with _diff.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.scheduling import Plan, Policy
from ..core.request import Work
from .integrity import _fail
from .text import say


@dataclass
class _State:
    """What the policy planned from: the time, who waited, who ran, and the free slots."""

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
    """Step idx of the learner's run beside the reference's, in words (None when they agree)."""
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
    """Sort key: r2 before r10."""
    return (len(rid), rid)
