"""One engine of a deployment: a plain Run driven through its port (port.Port), with the hand-over on its books
(handover.Handover) and what the coordinator needs to know of it: its load and its room for a transfer."""
from __future__ import annotations

import weakref

from ..core.config import RunConfig
from ..core.request import FINISHED, Request
from ..loop import ModelSide, Run, StepHook
from ..port import Port
from .handover import Handover


class Instance:
    """One engine of a deployment: its role, its index in the deployment, a Run behind a Port, and the hand-over."""

    def __init__(self, role: str, index: int, rc: RunConfig, name: str, model: ModelSide, later: list[Request],
                 hooks: tuple = ()):
        self.role, self.index = role, index
        self.blocked = False  # idle with nothing of its own to wait for: asleep until something is admitted
        self.incoming = 0  # transfers on their way here (counted as load)
        self.last_step = (0.0, 0)  # (end, requests it finished) of this instance's latest step
        self.planned_free = (0, 0)  # (slots, blocks) free once its latest step was planned: its room until it ends
        self.handover = None if role == "replica" else Handover(keep_finished=role == "prefill")
        # only a decode instance is asked for room mid-step (_Planned), only a prefill instance's pool keeps K/V:
        # the others step without them, as fast as a plain run
        self.port = Port(rc, name, later, model, (*hooks, _Planned(self)) if role == "decode" else hooks,
                         self.handover.wrap if role == "prefill" else None)

    @property
    def done(self) -> bool:
        """Nothing handed to it is left to arrive, wait or run."""
        return self.port.done

    @property
    def expecting(self) -> bool:
        """More may still be handed to it (a static batch waits for more only then)."""
        return self.port.expecting

    @expecting.setter
    def expecting(self, more: bool) -> None:
        self.port.expecting = more

    @property
    def kept(self) -> int:
        """Prompts whose K/V wait here to be sent."""
        return len(self.handover.kept) if self.handover is not None else 0

    def admit(self, r: Request, t: float, kv: object = None) -> None:
        """r arrives here at time t. kv: its prompt's K/V computed elsewhere (ModelRunner.export_kv; None on a dry
        run), when it comes prefilled (num_prefilled == prefill_len, its first token in output): it only decodes."""
        prefilled = bool(r.num_prefilled) and r.num_prefilled == r.prefill_len
        if prefilled and self.handover is not None:
            self.handover.reserved.pop(r.id, None)
        self.port.hand(r, t, prefilled, kv)
        self.blocked = False

    def step(self, until: float | None):
        """One step of its run (Port.step)."""
        return self.port.step(until)

    def load(self, t: float) -> int:
        """Requests queued, running or coming here at time t. The latest step may end after t: those it finishes
        are still running at t (events are handled in time order, so no earlier step ends after t)."""
        end, finished = self.last_step
        return self.port.queued() + self.incoming + self.kept + (finished if end > t else 0)

    def room(self, r: Request, t: float, later: bool = False) -> bool:
        """A slot and K/V free here at time t for r arriving prefilled, and nobody preempted here waiting for room
        (they come back first). Until its latest step ends, what that step frees is not free yet; later: once it
        has ended."""
        return self.port.room(r, self.planned_free if t < self.last_step[0] and not later else None)

    def reserve(self, r: Request) -> None:
        """Take a slot and r's K/V here for its transfer, now (room(r, now) held)."""
        before = self.port.kv_free()[1]
        self.port.reserve(r)
        self.handover.reserved[r.id] = r
        slots, blocks = self.planned_free
        self.planned_free = (slots - 1, blocks - (before - self.port.kv_free()[1]))
        self.incoming += 1

    def let_go(self, p: Request, t: float) -> None:
        """p's K/V have left this (prefill) instance at time t: freed. Asleep for want of KV, it wakes at t."""
        self.handover.let_go(p)
        if self.blocked:
            self.blocked = False
            self.port.advance_to(t)


class _Planned(StepHook):
    """Notes a decode instance's free slots and blocks once each step is planned: until the step ends, what it
    frees is not free yet."""

    def __init__(self, instance: Instance):
        # a weak reference: the instance holds its run, which holds this hook; a cycle would keep a whole dry run
        # alive past its end (loop.gc_paused moves its objects to the oldest generation, seldom collected)
        self._instance = weakref.ref(instance)

    def planned(self, run: Run, plan) -> None:
        x = self._instance()
        x.planned_free = x.port.kv_free()


class Handoff(StepHook):
    """On a prefill instance: copies out the K/V of each prompt the step completes, before the loop frees them
    (executed), then hands each finished request to the deployment (recorded: deployment.hand_off)."""

    def __init__(self, deployment, instance_index: int):
        self._d, self.i = weakref.ref(deployment), instance_index  # weak: no cycle (as _Planned)
        self.blobs: dict[str, object] = {}

    def executed(self, run: Run, plan) -> None:
        port = self._d().instances[self.i].port
        for w in plan.works:
            r = w.request
            if w.phase == "prefill" and w.start + w.tokens == r.prefill_len:
                self.blobs[r.id] = port.export_kv(r)

    def recorded(self, run: Run, plan, record) -> None:
        for w in plan.works:
            r = w.request
            if w.phase == "prefill" and r.status == FINISHED:
                self._d().hand_off(self.i, r, self.blobs.pop(r.id, None))
