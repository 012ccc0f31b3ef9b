"""A trace told as a published figure tells it: per iteration, who computes what, and who waits and why.

Read-only views of a Trace for the gallery notebook (chapters/7.5) and its tests; nothing here schedules.
Iterations are numbered from 1, as the figures number them (the trace's step index + 1).
"""
from __future__ import annotations

from dataclasses import replace

from ..core.scheduling.registry import POLICY_CLASSES
from ..lang import t, width, wrap
from ..trace.record import Trace

PHASE_MARK = {"prefill": "p", "decode": "d", "wasted": "w"}


def policy_name(policy: str) -> str:
    """A named policy as the reader's language names it ('continuous' -> 連續批次 in zh-TW); others as they are."""
    return t(f"figures.policy.{policy}") if policy in POLICY_CLASSES else policy


def setting_label(label: str) -> str:
    """A sweep setting's label ('continuous B=32') with its policy named in the reader's language."""
    policy, sep, knobs = label.partition(" ")
    return policy_name(policy) + sep + knobs


def named(settings: list) -> list:
    """Copies of sweep settings (tinyserve.analysis.sweeps.Setting) labelled in the reader's language."""
    return [replace(s, label=setting_label(s.label)) for s in settings]


def frames(trace: Trace) -> list[list[str]]:
    """Per step, each work as 'id:d' (decode), 'id:w' (wasted decode) or 'id:pN' (N prompt tokens; +padM)."""
    out = []
    for s in trace.steps:
        row = []
        for w in s.works:
            mark = f"{w.request_id}:{PHASE_MARK[w.phase]}"
            if w.phase == "prefill":
                mark += str(w.tokens) + (f"+pad{w.padding}" if w.padding else "")
            row.append(mark)
        out.append(row)
    return out


def _waits(trace: Trace, step: int) -> list[tuple[str, str, dict]]:
    """(request id, what it waits on, the numbers) for each request that had arrived by this step but computes
    nothing in it yet; what it waits on: 'batch' (request-level batching), 'cap', 'budget' or 'decode_first'."""
    s = trace.steps[step]
    computing = {w.request_id for w in s.works}
    knobs = trace.knobs
    cap = min(knobs.get("batch_size", trace.num_slots), trace.num_slots)
    budget = knobs.get("max_batch_tokens")
    out = []
    for r in trace.requests:
        if r.arrival_s > s.start_s or r.id in computing:
            continue
        first = next((k for k, st in enumerate(trace.steps) if any(w.request_id == r.id for w in st.works)), None)
        if first is not None and first < step:
            continue  # already started (e.g. prefilled and now sitting a step out): not waiting to enter
        if trace.policy in ("static", "dynamic") and s.works:
            out.append((r.id, "batch", {}))
        elif len(s.works) >= cap:
            out.append((r.id, "cap", {"cap": cap}))
        elif budget is not None:
            out.append((r.id, "budget", {"tokens": s.tokens, "budget": budget}))
        else:
            out.append((r.id, "decode_first", {}))
    return out


def waiting(trace: Trace, step: int) -> list[tuple[str, str]]:
    """(request id, why) for each request that had arrived by this step but computes nothing in it yet."""
    return [(rid, t(f"figures.why.{kind}", **fields)) for rid, kind, fields in _waits(trace, step)]


def waiting_on(trace: Trace, step: int) -> dict[str, str]:
    """{request id: the limit it waits on, in a few words ('token budget', 'batch cap', ...)} for this step."""
    return {rid: t(f"figures.limit.{kind}") for rid, kind, _ in _waits(trace, step)}


def paused(trace: Trace, step: int) -> list[str]:
    """Requests that started earlier, are not finished, and compute nothing in this step (they sit it out)."""
    s = trace.steps[step]
    computing = {w.request_id for w in s.works}
    started = {w.request_id for st in trace.steps[:step] for w in st.works}
    return [r.id for r in trace.requests if r.id in started and r.id not in computing
            and (r.finish_s is None or r.finish_s > s.start_s)]


def story(trace: Trace, first: int = 0, last: int | None = None, columns: int = 100) -> str:
    """One line per iteration: what each request computes, who sits the step out, who waits and why; a line
    wider than `columns` display columns goes on below its 'iter  k:', a new line at each '|' first."""
    lines = []
    fr = frames(trace)
    for k in range(first, len(trace.steps) if last is None else min(last, len(trace.steps))):
        parts = [" ".join(fr[k])]
        out = paused(trace, k)
        if out:
            parts.append(t("figures.story.paused", ids=", ".join(out)))
        by_reason: dict[str, list[str]] = {}
        for rid, why in waiting(trace, k):
            by_reason.setdefault(why, []).append(rid)
        if by_reason:
            parts.append(t("figures.story.waiting", groups=t("figures.story.sep").join(
                t("figures.story.group", ids=", ".join(ids), why=why) for why, ids in by_reason.items())))
        head = t("figures.story.iter", k=k + 1)
        room = max(20, columns - width(head))
        rows = [""]
        for part in parts:
            if rows[-1] and width(rows[-1] + part) > room:
                rows.append("")
            rows[-1] += part if rows[-1] else part.lstrip()
        rows = [ln for row in rows for ln in wrap(row, room)]
        lines.append(head + ("\n" + " " * width(head)).join(rows))
    return "\n".join(lines)


def token_iterations(trace: Trace) -> dict[str, list[int]]:
    """For each request, the iterations (1-based) whose forward pass produced one of its output tokens."""
    out: dict[str, list[int]] = {}
    for k, s in enumerate(trace.steps):
        for w in s.works:
            r = trace.request(w.request_id)
            ends_prompt = w.phase == "prefill" and w.start + w.tokens == r.prompt_len
            if w.phase == "decode" or ends_prompt:
                out.setdefault(w.request_id, []).append(k + 1)
    return out


def iterations(trace: Trace, request_id: str, phase: str | None = None) -> list[int]:
    """Iterations (1-based) in which a request computes anything (or only `phase`: prefill/decode/wasted)."""
    return [k + 1 for k, s in enumerate(trace.steps)
            if any(w.request_id == request_id and (phase is None or w.phase == phase) for w in s.works)]
