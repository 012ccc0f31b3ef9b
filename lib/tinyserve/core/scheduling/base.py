"""What every policy shares: the plan it returns, the queue and the slots it keeps, and how a request enters a
slot and leaves it. The policies themselves (one file each, beside this one) only decide who computes what.

A learner writes a policy the same way: subclass Policy, write plan(now, more_coming) (and finished(r) if the
policy holds slots differently). The Scheduler (scheduler.py) asks it for each step's plan and owns everything
else: statuses, the stop rule, freeing slots and KV.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..knobs import DEFAULT_BATCH_SIZE
from ..kv import SlotPool
from ..request import Request, Work
from ...errors import TinyserveError
from ...lang import t


@dataclass
class Plan:
    """This step's works; when there are none, wake_s is when the policy wants to be asked again."""

    works: list[Work]
    wake_s: float | None = None


class Policy:
    """The queue and the slots; subclasses decide who computes what (plan)."""

    name = ""
    takes: tuple[str, ...] = ()  # knobs beyond batch_size (a named policy declares its own)
    admits_prefilled = False  # whether a deployment's decode instance can run it

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
        """A request has arrived: it waits at the back of the queue."""
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

    def grow(self, step: int) -> None:
        """Before step `step` is planned: the pool gives every decoding request room for its next position; when
        it has none (pages run out), the most recently admitted request is preempted (vLLM v1's rule under FCFS:
        the oldest keep making progress, so every request finishes). Slabs always have room."""
        self.pool.grow(step, self.running, self._preempt)

    def _claim(self, req: Request) -> None:
        """req enters a slot; the pool takes what its prefill needs (a preempted request, all it had)."""
        req.slot = self.pool.claim()
        self.running.append(req)
        if not self.pool.allocate(req, req.prefill_len + (req.num_prefilled > 0)):
            raise RuntimeError(f"no KV for {req.id}'s prefill")  # words: ok (a policy bug: admission asks fits())

    def _free(self, req: Request, last_step: int | None = None) -> None:
        self.pool.free(req, last_step)  # its K/V, then its slot: a pool that keeps the K/V keeps the slot too
        self.pool.release(req.slot)

    def _preempt(self, r: Request) -> None:
        """Take r out: its KV and slot go back and it waits at the queue's front (the Scheduler marks it preempted:
        it recomputes its prompt and every token it made when admitted again)."""
        self.running.remove(r)
        self._free(r, self.pool.step - 1)  # held through the previous step
        self.pool.preempted.append(r.id)
        self.waiting.appendleft(r)

    def _admits(self) -> bool:
        """A waiting request may enter now: a free slot, room under the batch size, KV for its prefill, and no
        preemption in this step (vLLM v1 admits nobody in a step that preempted: the blocks were just short)."""
        if not self.waiting:
            return False
        return bool(self.pool.num_free and len(self.running) < self.batch_size
                    and self.pool.fits(self.waiting[0]) and not self.pool.preempted)


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
