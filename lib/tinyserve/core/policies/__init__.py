"""Batching policies. Each one, asked every step, returns a plan: which slot computes what.

static      gather B requests, prefill them padded to the longest prompt, decode until the last one finishes
dynamic     static, but the batch also launches when a timeout since its first waiting request expires
continuous  iteration-level: a finished request leaves its slot the step it finishes; the next one enters
            (prefill-first, or decode-first for at most max_waiting_steps decode steps, as TGI's router)
chunked     continuous, with a per-step token budget: decodes first, then prefill chunks fill what is left
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ..config import (DEFAULT_BATCH_SIZE, DEFAULT_CHUNK, DEFAULT_MAX_WAITING_STEPS,  # noqa: F401 (old names)
                      DEFAULT_TIMEOUT_S, KNOBS, POLICIES, UNBOUNDED, RunConfig, waiting_steps)
from ..blocks import blocks_for
from ..kv import SlotPool
from ...errors import TinyserveError
from ...lang import t
from ..request import ABORTED, FINISHED, REJECTED, RUNNING, WAITING, Request, SlotWork, Work

DONE = (FINISHED, REJECTED, ABORTED)  # Request.done's statuses


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
        """Start a run on these slots with empty queues (refused while an earlier run still has work here)."""
        left = len(self.waiting) + sum(not r.done for r in self.running)
        if self.pool is not None and left:
            raise TinyserveError(t("engine.policy.busy", cls=type(self).__name__, left=left))
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
        i = _position(self.running, req)
        if i >= 0:
            del self.running[i]
            self._free(req)
        elif req in self.waiting:
            self.waiting.remove(req)

    def knobs(self) -> dict:
        """The settings this policy ran with (recorded in the trace)."""
        return {"batch_size": self.batch_size}

    def _claim(self, req: Request) -> None:
        req.slot = self.pool.claim()
        self.running.append(req)
        if self.pool.paged:
            if req.preemptions:
                req.status = RUNNING
            # a request that comes prefilled (its K/V from another instance) decodes at once: its next position too
            if not self.pool.allocate(req, req.prefill_len + (req.num_prefilled > 0)):
                raise RuntimeError(f"no blocks for {req.id}'s prefill")  # words: ok (a policy bug: admission asks fits())

    def _free(self, req: Request, last_step: int | None = None) -> None:
        self.pool.release(req.slot)
        if self.pool.paged:
            self.pool.free(req, last_step)

    def grow(self) -> None:
        """Paged layout, before each plan: every decoding request gets the block its next position needs. When
        none is free, the most recently admitted request is preempted (vLLM v1's rule under FCFS: the oldest keep
        making progress, so every request finishes) and recomputed later from its prompt and output so far."""
        size = self.pool.block_size
        for r in self.running:  # preemption shortens the list from its end: the loop then stops sooner
            done = r.num_prefilled
            if done < r.prefill_len:
                continue  # its prefill's blocks were taken when it was admitted
            need = done + len(r.output)
            if need <= len(r.block_table) * size:
                continue  # its last block has room
            while not self.pool.allocate(r, need):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is r:
                    break

    def _preempt(self, r: Request) -> None:
        """Take r out (vLLM v1's recompute preemption): blocks and slot go back, it waits at the queue's front,
        and when admitted again its prefill covers its prompt and every token it made (their K/V recomputed)."""
        self.running.remove(r)
        self._free(r, self.pool.step - 1)  # held through the previous step
        self.pool.preempted.append(r.id)
        r.computed_len = max(r.computed_len, r.context_len)
        r.num_prefilled, r.prefill_len, r.status = 0, r.prompt_len + r.output_len, WAITING
        r.preemptions += 1
        self.waiting.appendleft(r)

    def _admits(self) -> bool:
        """A waiting request may enter now: a free slot, room under the batch size, blocks for its prefill, and no
        preemption in this step (vLLM v1 admits nobody in a step that preempted: the blocks were just short)."""
        return bool(self.waiting and self.pool.num_free and len(self.running) < self.batch_size
                    and self.pool.fits(self.waiting[0]) and not (self.pool.paged and self.pool.preempted))


def _position(requests: list[Request], req: Request) -> int:
    """Where req itself is in the list (-1: absent). By identity: `in` and remove() call Request.__eq__, a dataclass
    comparing every field, for each request ahead of it (ids are unique, so identity is equality here)."""
    for i, r in enumerate(requests):
        if r is req:
            return i
    return -1


def decode_work(r: Request) -> Work:
    """The next decode of r: feed its last token at the next position."""
    return Work(r.slot, r, "decode", r.num_prefilled + len(r.output) - 1, 1)  # len(): runs per slot per step


class StaticBatching(Policy):
    """A fixed group runs from padded prefill to its last finisher; a finished member's slot keeps computing."""

    name = "static"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, timeout: float | None = None):
        super().__init__(batch_size)
        self.timeout = timeout  # None: wait for a full batch (or the end of the stream)
        self.padded_len = self.decode_steps = 0  # the running batch's padded prompt length, decode steps so far
        self._rows: list[Work] | None = None  # the running batch's decode Works, moved on in place each step
        self._live: list[Work] = []  # those rows still decoding, and those wasted (a long tail: most of them)
        self._wasted: list[Work] = []

    def knobs(self) -> dict:
        return {"batch_size": self.batch_size, "timeout": self.timeout}

    def plan(self, now: float, more_coming: bool) -> Plan:
        if self.running:
            return Plan(self._next_decodes())
        if not self.waiting:
            return Plan([])
        capacity = min(self.batch_size, self.pool.num_slots)
        deadline = self.waiting[0].arrival_s + self.timeout if self.timeout is not None else math.inf
        fit = self._fitting(capacity)
        if fit == len(self.waiting) < capacity and now < deadline and more_coming:
            return Plan([], wake_s=deadline if deadline < math.inf else None)
        batch = [self.waiting.popleft() for _ in range(fit)]
        s_max = max(r.prompt_len for r in batch)
        self.padded_len, self.decode_steps, self._rows = s_max, 0, None
        for r in batch:
            self._claim(r)
        return Plan([Work(r.slot, r, "prefill", 0, r.prompt_len, padding=s_max - r.prompt_len) for r in batch])

    def _fitting(self, capacity: int) -> int:
        """How many waiting requests, in order, the next batch takes. Paged: a static batch cannot let a member go
        mid-run, so it admits only while the free blocks hold every member's whole sequence (prompt +
        max_new_tokens); its blocks are still taken as the members grow, and it never preempts."""
        n = min(capacity, len(self.waiting))
        if not self.pool.paged:
            return n
        free = self.pool.free_blocks
        for i in range(n):
            r = self.waiting[i]
            free -= blocks_for(r.prompt_len + r.max_new_tokens, self.pool.block_size)
            if free < 0:
                return i
        return n

    def grow(self) -> None:
        """Paged: each member's next position gets its block (admission made sure there is one); a finished member
        re-runs its last position, whose block it holds after its first wasted decode."""
        for r in self.running:
            if not self.pool.allocate(r, r.num_prefilled + len(r.output)):
                raise RuntimeError(f"static batch: no block for {r.id}")  # words: ok (a bug: _fitting reserved its worst case)

    def _next_decodes(self) -> list[Work]:
        """The batch's next decode step: every row, done or not, one position on.

        One Work per row is made at the batch's first decode and updated in place after that (a long-tailed batch
        runs thousands of steps in which most rows only re-run their last position: 150,000 new Works for
        chapter-7.2-longtail dynamic). The engine reads a step's Works before the next plan; nothing keeps them.
        """
        # a real server's static batch is a rectangle: every row, done or not, attends over the padded prompt
        # plus the batch's decode steps so far; pad_keys are the keys beyond a row's own (priced by the clock)
        self.decode_steps += 1
        edge = self.padded_len + self.decode_steps - 1
        if self._rows is None:
            self._rows = [Work(r.slot, r, "decode", 0, 1) for r in self.running]
            self._live, self._wasted = list(self._rows), []
        for w in self._wasted:  # it re-runs the same position again; only the rectangle grows
            w.pad_keys += 1
        turned = False
        for w in self._live:  # one loop, no property calls: this runs for every slot of every step
            r = w.request
            w.start = start = r.num_prefilled + len(r.output) - 1
            w.pad_keys = edge - start
            if r.status in DONE:  # wasted: a done member re-runs its last decode, output thrown away
                w.phase = "wasted"
                w.record = SlotWork(w.slot, r.id, "wasted", start, 1, 0)  # the same every step from now on
                turned = True
        if turned:
            self._wasted = [w for w in self._rows if w.phase == "wasted"]
            self._live = [w for w in self._rows if w.phase != "wasted"]
        return list(self._rows)

    def finished(self, req: Request) -> None:
        if req.status == ABORTED or _position(self.running, req) < 0:
            super().finished(req)  # an abort frees its slot at once
            self._rows = None  # the batch lost a row
        if self.running and all(r.done for r in self.running):
            for r in self.running:
                self._free(r)
            self.running.clear()


class DynamicBatching(StaticBatching):
    """Static batching whose batch also launches when the first waiting request has waited `timeout`."""

    name = "dynamic"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, timeout: float = DEFAULT_TIMEOUT_S):
        super().__init__(batch_size, timeout)


class ContinuousBatching(Policy):
    """Iteration-level scheduling: slots are refilled from the FIFO queue after every step.

    max_waiting_steps decides when a newcomer's prefill may join the decodes (it stalls them for a step):
      0          prefill-first: the next step, beside the decodes
      N > 0      decode-first with a bound: newcomers wait while decodes run, and are forced in after N decode
                 steps in which a slot was free for them (TGI's max_waiting_tokens; TGI counts from its last
                 prefill, we count the steps the queue actually waited, so a late newcomer waits too)
      UNBOUNDED  decode-first without a bound: newcomers enter only when no decode is in flight
    prefill_first=True is max_waiting_steps=0 (the default); prefill_first=False alone means the TGI default, 20.
    """

    name = "continuous"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, prefill_first: bool | None = None,
                 max_waiting_steps: float | None = None):
        super().__init__(batch_size)
        self.max_waiting_steps = waiting_steps(prefill_first, max_waiting_steps)
        self.waited = 0  # decode steps the queue has waited with a slot free for it

    @property
    def prefill_first(self) -> bool:
        return self.max_waiting_steps == 0

    def bind(self, pool: SlotPool) -> None:
        super().bind(pool)
        self.waited = 0

    def knobs(self) -> dict:
        # JSON has no infinity: null stands for unbounded
        bound = None if self.max_waiting_steps == UNBOUNDED else self.max_waiting_steps
        return {"batch_size": self.batch_size, "prefill_first": self.prefill_first, "max_waiting_steps": bound}

    def _admit(self) -> None:
        while self._admits():
            self._claim(self.waiting.popleft())

    def _decodes(self) -> list[Work]:
        return [decode_work(r) for r in self.running if r.num_prefilled == r.prefill_len]

    def plan(self, now: float, more_coming: bool) -> Plan:
        decodes = self._decodes()
        room = self._admits()
        if not decodes or self.waited >= self.max_waiting_steps:
            n = len(self.running)
            self._admit()
            self.waited = 0
            # admitted prefilled (a deployment's decode instance): they decode in this step already
            decodes += [decode_work(r) for r in self.running[n:] if r.num_prefilled == r.prefill_len]
        elif room:
            self.waited += 1  # this decode step runs while a newcomer could have entered
        return Plan(decodes + [Work(r.slot, r, "prefill", r.num_prefilled, r.prefill_len - r.num_prefilled)
                               for r in self.running if r.num_prefilled < r.prefill_len])


class ChunkedPrefill(ContinuousBatching):
    """Continuous batching under a token budget per step: every decode first, then prefill chunks (FIFO)."""

    name = "chunked"

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, chunk_size: int = DEFAULT_CHUNK,
                 max_batch_tokens: int | None = None):
        super().__init__(batch_size, max_waiting_steps=0)
        self.chunk_size = chunk_size
        # the default budget: a full chunk beside every slot's decode (set here only)
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
            if r.num_prefilled < r.prefill_len:
                n = min(self.chunk_size, r.prefill_len - r.num_prefilled, budget)
                works.append(Work(r.slot, r, "prefill", r.num_prefilled, n))
                budget -= n
        return Plan(works)


def make_policy(name: str, batch_size: int | None = None, timeout: float | None = None,
                chunk_size: int | None = None, max_batch_tokens: int | None = None,
                prefill_first: bool | None = None, max_waiting_steps: int | float | None = None) -> Policy:
    """Build a policy by name, its knobs checked by RunConfig; a knob that does not apply to the policy is an error."""
    return policy_for(RunConfig(name, batch_size, timeout, chunk_size, max_batch_tokens, prefill_first,
                                max_waiting_steps))


def policy_for(cfg: RunConfig) -> Policy:
    """The policy a checked RunConfig names, with its knobs."""
    b = cfg.batch_size
    if cfg.policy == "static":
        return StaticBatching(b, cfg.timeout)
    if cfg.policy == "dynamic":
        return DynamicBatching(b, DEFAULT_TIMEOUT_S if cfg.timeout is None else cfg.timeout)
    if cfg.policy == "continuous":
        return ContinuousBatching(b, cfg.prefill_first, cfg.max_waiting_steps)
    return ChunkedPrefill(b, DEFAULT_CHUNK if cfg.chunk_size is None else cfg.chunk_size, cfg.max_batch_tokens)
