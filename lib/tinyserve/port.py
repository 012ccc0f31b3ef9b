"""The port through which a deployment's instance drives a plain Run (loop.py), which knows no deployment: requests
handed to it at given times (some with their prompt's K/V computed elsewhere), K/V held for requests outside its
batch, its idle clock moved no further than the next event elsewhere, which may bring it work."""
from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence

from .core.config import RunConfig
from .core.request import REJECTED, Request
from .loop import ModelSide, Run, StepHook
from .trace.record import Trace
from .trace.step import StepRecord

class Port:
    """A Run its requests are handed to (hand), each at its time, from an inbox; step(until) runs it one step."""

    def __init__(self, config: RunConfig, name: str, requests: list[Request], model: ModelSide,
                 hooks: Sequence[StepHook] = (), pool: Callable | None = None):
        """requests: all it may be handed (the KV is laid out for them: Run.handed); pool(pool, hold): a wrapper of
        its KV pool (deploy/handover.py), hold(tokens) counting the K/V it keeps outside the batch."""
        wrap = None if pool is None else (lambda kv: pool(kv, lambda tokens: self.run.scheduler.hold(tokens)))
        self.run = Run.handed(config, name, requests, model, hooks, wrap)
        self.inbox: list[tuple] = []  # (time, order, request, prefilled, its K/V), a heap
        self.expecting = False  # more may be handed at times not known yet (waiting for them is no stall)
        self._order = 0

    @property
    def now(self) -> float:
        return self.run.now

    @property
    def done(self) -> bool:
        """Nothing handed to it is left to arrive, wait or run."""
        return not self.inbox and self.run.done

    def next_step_s(self) -> float:
        """When its next step may start: its clock, or never (inf) when done. One call where the `now` and `done`
        properties were four: the coordinator asks every instance at every event."""
        run = self.run
        return run.now if self.inbox or not run.done else math.inf

    @property
    def num_done(self) -> int:
        return self.run.num_done

    @property
    def hardware(self):
        """The preset its modeled clock prices (cost.presets.Hardware)."""
        return self.run.clock.hardware

    @property
    def bytes_per_token(self) -> int:
        return self.run.pool.bytes_per_token

    def trace(self) -> Trace:
        return self.run.trace()

    def queued(self) -> int:
        """Requests handed to it and not done: in its inbox, queued or holding a slot."""
        run = self.run
        return len(run.pending) + len(self.inbox) + len(run.policy.waiting) + len(run.policy.running)

    def hand(self, r: Request, t: float, prefilled: bool = False, kv: object = None) -> None:
        """r arrives here at time t. prefilled: its prompt was computed elsewhere and its K/V (kv:
        ModelRunner.export_kv, None on a dry run) go into the slot and K/V reserved for it (reserve): it decodes."""
        if r.status == REJECTED:
            raise RuntimeError(f"{r.id} was rejected: not admitted")  # words: ok (a deployment bug)
        self._order += 1
        heapq.heappush(self.inbox, (t, self._order, r, prefilled, kv))

    def step(self, until: float | None) -> StepRecord | None:
        """Hand the run what has arrived by its clock and run one step of it. Idle, its clock jumps to its next
        event, but not past `until` (the next event elsewhere); with nothing to wait for it stays where it is."""
        run = self.run
        while self.inbox and self.inbox[0][0] <= run.now:
            _, _, r, prefilled, kv = heapq.heappop(self.inbox)
            run.requests.append(r)
            if not prefilled:
                run.scheduler.add(r)
                continue
            if run.runner is not None:  # its K/V go into the slot or blocks reserved for it
                run.runner.import_kv(r, kv)
            run.scheduler.hold(-r.prompt_len)  # held outside the batch until now: they join it
            run.scheduler.enter(r)
        arriving = self.inbox[0][0] if self.inbox else None
        run.open = arriving is not None or self.expecting
        rec = run.step()
        if rec is None and run.open:
            events = [t for t in (run.next_event_s, arriving) if t is not None]
            if events:
                self.advance_to(min(events) if until is None or min(events) <= until else until)
        return rec

    def advance_to(self, t: float) -> None:
        """An idle run waits for something elsewhere: its clock jumps to t (never back)."""
        self.run.now = max(self.run.now, t)

    def export_kv(self, r: Request) -> object:
        """A copy of r's prompt's K/V (None on a dry run)."""
        return None if self.run.runner is None else self.run.runner.export_kv(r, r.prompt_len)

    # ---- K/V held outside the batch --------------------------------------------------------------------------
    def kv_free(self) -> tuple[int, int]:
        """Free slots and free blocks (0 in the slab layout) now."""
        pool = self.run.pool
        return pool.num_free, pool.free_blocks

    def room(self, r: Request, free: tuple[int, int] | None = None) -> bool:
        """A slot and K/V for r arriving prefilled (its prompt and next position), and nobody waiting here for room
        (they come first). free: the (slots, blocks) to judge by (kv_free() at an earlier moment), default now."""
        slots, blocks = self.kv_free() if free is None else free
        return not self.run.policy.waiting and slots > 0 and self.run.pool.holds(r.prefill_len + 1, blocks)

    def reserve(self, r: Request) -> None:
        """Take a slot and r's K/V here now for its transfer (room(r) held); they count as used."""
        self.run.scheduler.reserve(r)
        self.run.scheduler.hold(r.prompt_len)
