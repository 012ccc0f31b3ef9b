"""A request and its lifecycle; a step's unit of work on one slot."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import TinyserveError
from ..lang import t

WAITING, RUNNING, FINISHED, REJECTED, ABORTED = "waiting", "running", "finished", "rejected", "aborted"


@dataclass
class Request:
    """One generation request: its prompt, its limits, and (filled by the engine) what happened to it."""

    id: str
    prompt: list[int]  # token ids, BOS first
    max_new_tokens: int
    arrival_s: float = 0.0
    ignore_eos: bool = False
    output_len_hint: int | None = None  # known output length (from an earlier run) for dry runs

    status: str = WAITING
    slot: int = -1
    num_prefilled: int = 0  # prompt tokens already in the KV slab
    output: list[int] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    admitted_s: float | None = None
    finish_s: float | None = None
    finish_reason: str | None = None  # "length" | "eos" | "aborted" | the rejection reason
    prefill_computed_tokens: int = 0  # incl. padding computed on its behalf
    decode_computed_tokens: int = 0  # incl. tokens computed after it was done (wasted)
    # the paged KV layout (core/blocks.py): its block table, and what preemption made it recompute
    block_table: list[int] = field(default_factory=list, repr=False)
    prefill_len: int = -1  # positions its prefill covers: the prompt, or after a preemption prompt + output so far
    preemptions: int = 0
    computed_len: int = 0  # positions whose K/V were ever stored: a later prefill below this recomputes them

    def __post_init__(self) -> None:
        if self.prefill_len < 0:
            self.prefill_len = len(self.prompt)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def output_len(self) -> int:
        return len(self.output)

    @property
    def done(self) -> bool:
        """True once it needs no more computing (its slot may still be held, as in static batching)."""
        return self.status in (FINISHED, REJECTED, ABORTED)

    @property
    def first_token_s(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    @property
    def context_len(self) -> int:
        """Tokens whose K/V are in the slab (or blocks)."""
        n = self.num_prefilled
        if self.prefill_len != len(self.prompt):  # recomputing after a preemption: only its prefill is stored
            return n
        made = len(self.output)  # read per running sequence per step of a paged run: no property, no max()
        return n + made - 1 if made else n

    # its lifecycle: waiting -> running -> finished, or rejected before it runs, or aborted at any time; a
    # preempted request goes back to waiting. Only these methods set `status`, and only core/scheduling/scheduler.py
    # calls them (tests/core/test_lifecycle_owner.py); a record read back is built whole (the constructor).
    def admit(self, t: float) -> None:
        """First computed at t: running."""
        self.admitted_s, self.status = t, RUNNING

    def resume(self) -> None:
        """Running again (given a slot after a preemption)."""
        self.status = RUNNING

    def preempt(self) -> None:
        """Its K/V taken back: waiting again, to recompute its prompt and every token it made (vLLM v1's recompute)."""
        self.computed_len = max(self.computed_len, self.context_len)
        self.num_prefilled, self.prefill_len, self.status = 0, self.prompt_len + self.output_len, WAITING
        self.preemptions += 1

    def finish(self, t: float, reason: str) -> None:
        """Done at t ("length" or "eos")."""
        self.status, self.finish_s, self.finish_reason = FINISHED, t, reason

    def abort(self, t: float | None) -> None:
        """Stopped at t by its client."""
        self.status, self.finish_s, self.finish_reason = ABORTED, t, "aborted"

    def reject(self, reason: str) -> None:
        """Refused before it runs, with the reason in words."""
        self.status, self.finish_reason = REJECTED, reason

    def prefill_ids(self, start: int, n: int) -> list[int]:
        """Token ids of prefill positions start..start+n-1 (past the prompt: its output, recomputed)."""
        if start + n <= len(self.prompt):
            return self.prompt[start:start + n]
        return (self.prompt + self.output)[start:start + n]

    def fresh(self, output_len_hint: int | None = None) -> Request:
        """A copy with an empty lifecycle (so a workload can run again), optionally with a known output length."""
        hint = self.output_len_hint if output_len_hint is None else output_len_hint
        return Request(self.id, list(self.prompt), self.max_new_tokens, self.arrival_s, self.ignore_eos, hint)

    def prefilled(self, output: list[int], token_times: list[float]) -> Request:
        """A fresh copy whose prompt was computed elsewhere, its first tokens made (a deployment's decode side)."""
        return Request(self.id, list(self.prompt), self.max_new_tokens, self.arrival_s, self.ignore_eos,
                       self.output_len_hint, output=list(output), token_times=list(token_times),
                       num_prefilled=len(self.prompt))

    def known_output_len(self) -> int | None:
        """The output length, if it is fixed before running (EOS ignored, or a hint)."""
        if self.output_len_hint is not None:
            return self.output_len_hint
        return self.max_new_tokens if self.ignore_eos else None


class SlotWork(NamedTuple):
    """What one slot did in one step, as the trace records it: a Work with its request's id (Work.recorded)."""

    slot: int
    request_id: str
    phase: str  # prefill | decode | wasted
    start: int  # first position computed
    tokens: int
    padding: int  # padding tokens computed alongside (static prefill)


@dataclass(slots=True)  # slotted: a dry run makes one per slot per step (150,000 for chapter-7.2-longtail)
class Work:
    """What one slot computes in one step."""

    slot: int
    request: Request | None
    phase: str  # "prefill" | "decode" | "wasted"
    start: int  # first position computed
    tokens: int  # tokens computed at positions start .. start+tokens-1
    padding: int = 0  # padding tokens computed alongside (static prefill): real compute, output thrown away
    pad_keys: int = 0  # keys a static batch's decode attends beyond its own: the padded rectangle (clock.py)
    # the trace's SlotWork of a work that repeats unchanged step after step (a static batch's wasted row), made
    # once by the policy and recorded as is by the engine; None: the engine makes a new one
    record: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def context(self) -> int:
        """Keys this work attends to at its last position."""
        return self.start + self.tokens

    def recorded(self) -> SlotWork:
        """The trace's record of this work (the one kept in `record`, if the policy made it)."""
        return self.record or SlotWork(self.slot, self.request.id, self.phase, self.start, self.tokens, self.padding)

    @classmethod
    def of(cls, rec: SlotWork | tuple) -> Work:
        """A work back from its record, without its request (what pricing and calibration need)."""
        slot, _, phase, start, tokens, padding = rec
        return cls(slot, None, phase, start, tokens, padding)


def decode_works(contexts, first_slot: int = 0) -> list[Work]:
    """One decode per context (slots first_slot, first_slot + 1, ...), each making the token at position context - 1."""
    return [Work(first_slot + i, None, "decode", c - 1, 1) for i, c in enumerate(contexts)]


def check_length(prompt_len: int, max_new_tokens: int, context: int) -> None:
    """Raise a clear error unless a prompt plus its output fits the context."""
    if prompt_len < 1:
        raise TinyserveError(t("engine.length.empty"))
    if max_new_tokens < 1:
        raise TinyserveError(t("engine.length.max_new_tokens", value=max_new_tokens))
    if prompt_len + max_new_tokens > context:
        raise TinyserveError(t("engine.length.too_long", prompt=prompt_len, new=max_new_tokens, limit=context))


def _valid_ids(ids: list, vocab: int) -> bool:
    """Token ids are integers (not bools) in 0..vocab-1; plain ints first (in C: a dry run checks ~100,000 ids on
    every knob change), the slow ABC check only if needed."""
    if set(map(type, ids)) == {int}:
        distinct = set(ids)  # a prompt repeats its ids: min and max of the distinct ones are ~3x cheaper (all ints)
        return 0 <= min(distinct) and max(distinct) < vocab
    return all(isinstance(t, numbers.Integral) and not isinstance(t, bool) and 0 <= t < vocab for t in ids)


def check_prompts(requests: list[Request], vocab: int) -> None:
    """Raise unless every prompt's token ids are integers in 0..vocab-1."""
    for r in requests:
        if not _valid_ids(r.prompt, vocab):
            raise TinyserveError(t("engine.request.token_ids", id=r.id, top=vocab - 1))


def check_requests(requests: list[Request], vocab: int, limit: int, limit_name: str, dry_run: bool,
                   prompts_checked: bool = False) -> list[tuple[Request, str]]:
    """Raise on malformed requests; return (request, why) for each that can never fit: the scheduler rejects them
    (the others still run). prompts_checked: their token ids are known to fit this vocabulary already (a named
    workload's: workloads.ids_known; or check_prompts ran: a deployment checks once for all its instances, which
    share the prompts: 200 of 2,000-3,500 tokens in chapter-7.3-mixed, each scan ~5 ms)."""
    ids = set()
    refused = []
    for r in requests:
        if r.id in ids:
            raise TinyserveError(t("engine.request.duplicate", id=r.id))
        ids.add(r.id)
        if not (isinstance(r.arrival_s, (int, float)) and math.isfinite(r.arrival_s) and r.arrival_s >= 0):
            raise TinyserveError(t("engine.request.arrival", id=r.id, value=r.arrival_s))
        if not prompts_checked:
            check_prompts([r], vocab)
        if isinstance(r.max_new_tokens, bool) or not isinstance(r.max_new_tokens, numbers.Integral):
            raise TinyserveError(t("engine.request.max_new_tokens", id=r.id, value=r.max_new_tokens))
        hint = r.output_len_hint
        if hint is not None and (isinstance(hint, bool) or not isinstance(hint, numbers.Integral)):
            raise TinyserveError(t("engine.request.hint", id=r.id, value=hint))
        reason = None
        if r.prompt_len < 1:
            reason = t("engine.reject.empty")
        elif r.max_new_tokens < 1:
            reason = t("engine.reject.max_new_tokens", value=r.max_new_tokens)
        elif r.prompt_len + r.max_new_tokens > limit:
            key = "max_model_len" if limit_name == "max_model_len" else "context"  # limit_name: the one or 'the context'
            reason = t(f"engine.reject.too_long.{key}", prompt=r.prompt_len, new=r.max_new_tokens, limit=limit)
        elif hint is not None and not 1 <= hint <= r.max_new_tokens:  # a replay cannot outrun its own limit
            reason = t("engine.reject.hint", hint=hint, max_new=r.max_new_tokens)
        if reason:
            refused.append((r, reason))
        elif dry_run and r.known_output_len() is None:
            raise TinyserveError(t("engine.request.dry_run_length", id=r.id))
    return refused
