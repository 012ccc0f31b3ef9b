"""Batching policies. Each one, asked every step, returns a plan: which slot computes what.

static      gather B requests, prefill them padded to the longest prompt, decode until the last one finishes
dynamic     static, but the batch also launches when a timeout since its first waiting request expires
continuous  iteration-level: a finished request leaves its slot the step it finishes; the next one enters
chunked     continuous, with a per-step token budget: decodes first, then prefill chunks fill what is left
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .cache import SlotPool
from .errors import TinyserveError
from .requests import ABORTED, Request, Work

POLICIES = ("static", "dynamic", "continuous", "chunked")
DEFAULT_BATCH_SIZE = 32
DEFAULT_TIMEOUT_S = 0.1  # dynamic batching's default wait for stragglers
DEFAULT_CHUNK = 512  # the chapter's example chunk length
# knobs beyond batch_size that each policy takes
KNOBS = {"static": {"timeout"}, "dynamic": {"timeout"}, "continuous": {"prefill_first"},
         "chunked": {"chunk_size", "max_batch_tokens"}}


@dataclass
class Plan:
    """This step's works; when there are none, wake_s is when the policy wants to be asked again."""

    works: list[Work]
    wake_s: float | None = None


class Policy:
    """Shared queue and slot handling; subclasses decide who computes what."""

    name = ""

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE):
        self.batch_size = batch_size
        self.waiting: deque[Request] = deque()  # arrived, no slot yet (FIFO)
        self.running: list[Request] = []  # holding a slot, in admission order
        self.pool: SlotPool | None = None

    def bind(self, pool: SlotPool) -> None:
        """Start a run on these slots with empty queues."""
        self.pool = pool
        self.waiting.clear()
        self.running.clear()

    def add(self, req: Request) -> None:
        """A request has arrived."""
        self.waiting.append(req)

    def plan(self, now: float, more_coming: bool) -> Plan:
        """What to compute in the next step at time `now`; more_coming: requests are still to arrive."""
        raise NotImplementedError

    def finished(self, req: Request) -> None:
        """A request is done (finished or aborted): free what it holds."""
        if req in self.running:
            self.running.remove(req)
            self.pool.release(req.slot)
        elif req in self.waiting:
            self.waiting.remove(req)

    def knobs(self) -> dict:
        """The settings this policy ran with (recorded in the trace)."""
        return {"batch_size": self.batch_size}

    def _claim(self, req: Request) -> None:
        req.slot = self.pool.claim()
        self.running.append(req)


def decode_work(r: Request) -> Work:
    """The next decode of r: feed its last token at the next position."""
    return Work(r.slot, r, "decode", r.num_prefilled + r.output_len - 1, 1)


class StaticBatching(Policy):
    """A fixed group runs from padded prefill to its last finisher; a finished member's slot keeps computing."""

    name = "static"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, timeout: float | None = None):
        super().__init__(batch_size)
        self.timeout = timeout  # None: wait for a full batch (or the end of the stream)

    def knobs(self) -> dict:
        return {"batch_size": self.batch_size, "timeout": self.timeout}

    def plan(self, now: float, more_coming: bool) -> Plan:
        if self.running:
            # wasted: a done member re-runs its last decode, output thrown away, until the batch ends
            return Plan([decode_work(r) if not r.done else Work(r.slot, r, "wasted", decode_work(r).start, 1)
                         for r in self.running])
        if not self.waiting:
            return Plan([])
        capacity = min(self.batch_size, self.pool.num_slots)
        deadline = self.waiting[0].arrival_s + self.timeout if self.timeout is not None else math.inf
        if len(self.waiting) < capacity and now < deadline and more_coming:
            return Plan([], wake_s=deadline if deadline < math.inf else None)
        batch = [self.waiting.popleft() for _ in range(min(capacity, len(self.waiting)))]
        s_max = max(r.prompt_len for r in batch)
        for r in batch:
            self._claim(r)
        return Plan([Work(r.slot, r, "prefill", 0, r.prompt_len, padding=s_max - r.prompt_len) for r in batch])

    def finished(self, req: Request) -> None:
        if req.status == ABORTED or req not in self.running:
            super().finished(req)  # an abort frees its slot at once
        if self.running and all(r.done for r in self.running):
            for r in self.running:
                self.pool.release(r.slot)
            self.running.clear()


class DynamicBatching(StaticBatching):
    """Static batching whose batch also launches when the first waiting request has waited `timeout`."""

    name = "dynamic"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, timeout: float = DEFAULT_TIMEOUT_S):
        super().__init__(batch_size, timeout)


class ContinuousBatching(Policy):
    """Iteration-level scheduling: slots are refilled from the FIFO queue after every step.

    prefill_first: a newcomer's whole prompt runs in the next step beside the decodes (they stall for it);
    otherwise (decode-first) newcomers wait until no decode is in flight (their TTFT pays instead).
    """

    name = "continuous"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, prefill_first: bool = True):
        super().__init__(batch_size)
        self.prefill_first = prefill_first

    def knobs(self) -> dict:
        return {"batch_size": self.batch_size, "prefill_first": self.prefill_first}

    def _admit(self) -> None:
        while self.waiting and self.pool.num_free and len(self.running) < self.batch_size:
            self._claim(self.waiting.popleft())

    def _decodes(self) -> list[Work]:
        return [decode_work(r) for r in self.running if r.num_prefilled == r.prompt_len]

    def plan(self, now: float, more_coming: bool) -> Plan:
        decodes = self._decodes()
        if self.prefill_first or not decodes:
            self._admit()
        return Plan(decodes + [Work(r.slot, r, "prefill", r.num_prefilled, r.prompt_len - r.num_prefilled)
                               for r in self.running if r.num_prefilled < r.prompt_len])


class ChunkedPrefill(ContinuousBatching):
    """Continuous batching under a token budget per step: every decode first, then prefill chunks (FIFO)."""

    name = "chunked"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, chunk_size: int = DEFAULT_CHUNK,
                 max_batch_tokens: int | None = None):
        super().__init__(batch_size, prefill_first=True)
        self.chunk_size = chunk_size
        self.max_batch_tokens = max_batch_tokens if max_batch_tokens is not None else chunk_size + batch_size

    def knobs(self) -> dict:
        return {"batch_size": self.batch_size, "chunk_size": self.chunk_size, "max_batch_tokens": self.max_batch_tokens}

    def plan(self, now: float, more_coming: bool) -> Plan:
        self._admit()
        works = self._decodes()
        budget = self.max_batch_tokens - len(works)
        for r in self.running:
            if budget <= 0:
                break
            if r.num_prefilled < r.prompt_len:
                n = min(self.chunk_size, r.prompt_len - r.num_prefilled, budget)
                works.append(Work(r.slot, r, "prefill", r.num_prefilled, n))
                budget -= n
        return Plan(works)


def _int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TinyserveError(f"{name}: must be an integer >= {lo}, got {value!r}")
    if value < lo:
        raise TinyserveError(f"{name}: must be >= {lo}, got {value}")
    return value


def make_policy(name: str, batch_size: int | None = None, timeout: float | None = None,
                chunk_size: int | None = None, max_batch_tokens: int | None = None,
                prefill_first: bool | None = None) -> Policy:
    """Build a policy by name, validating its knobs; a knob that does not apply to the policy is an error."""
    if name not in POLICIES:
        raise TinyserveError(f"policy: unknown {name!r} (choose {', '.join(POLICIES)})")
    given = {"timeout": timeout, "chunk_size": chunk_size, "max_batch_tokens": max_batch_tokens,
             "prefill_first": prefill_first}
    for knob, v in given.items():
        if v is not None and knob not in KNOBS[name]:
            users = " and ".join(p for p in POLICIES if knob in KNOBS[p])
            raise TinyserveError(f"{knob}: does not apply to the {name} policy (only to {users})")
    b = _int("batch_size", batch_size if batch_size is not None else DEFAULT_BATCH_SIZE, 1)
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout < 0:
            raise TinyserveError(f"timeout: must be a finite number of seconds >= 0, got {timeout!r}")
        timeout = float(timeout)
    if name == "static":
        return StaticBatching(b, timeout)
    if name == "dynamic":
        return DynamicBatching(b, DEFAULT_TIMEOUT_S if timeout is None else timeout)
    if name == "continuous":
        return ContinuousBatching(b, True if prefill_first is None else bool(prefill_first))
    c = _int("chunk_size", chunk_size if chunk_size is not None else DEFAULT_CHUNK, 1)
    t = _int("max_batch_tokens", max_batch_tokens if max_batch_tokens is not None else c + b, 1)
    if t < b:
        raise TinyserveError(
            f"max_batch_tokens: must be >= batch_size ({b}) so that no decode is ever skipped, got {t}")
    return ChunkedPrefill(b, c, t)
