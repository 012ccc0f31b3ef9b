"""Continuous batching (iteration-level scheduling): the batch is decided again before every step; a finished
request leaves its slot at once and the next one in the queue enters."""
from __future__ import annotations

from ...errors import TinyserveError
from ...lang import t
from ..knobs import DEFAULT_BATCH_SIZE, DEFAULT_MAX_WAITING_STEPS, UNBOUNDED
from ..kv import SlotPool
from ..request import Work
from .scheduler import Plan, Policy, decodes_of


def waiting_steps(prefill_first: bool | None, max_waiting_steps: float | None) -> float:
    """One bound from the two ways of saying it (prefill_first is the older, coarser knob)."""
    if max_waiting_steps is None:
        return DEFAULT_MAX_WAITING_STEPS if prefill_first is False else 0
    if prefill_first is not None and prefill_first != (max_waiting_steps == 0):
        raise TinyserveError(t("engine.knob.waiting_contradicts", value=max_waiting_steps, prefill_first=prefill_first))
    return max_waiting_steps


class ContinuousBatching(Policy):
    """Slots are refilled from the FIFO queue after every step.

    max_waiting_steps decides when a newcomer's prefill may join the decodes (it stalls them for a step):
      0          prefill-first: the next step, beside the decodes
      N > 0      decode-first with a bound: newcomers wait while decodes run, and are forced in after N decode
                 steps in which a slot was free for them (TGI's max_waiting_tokens; TGI counts from its last
                 prefill, we count the steps the queue actually waited, so a late newcomer waits too)
      UNBOUNDED  decode-first without a bound: newcomers enter only when no decode is in flight
    prefill_first=True is max_waiting_steps=0 (the default); prefill_first=False alone means the TGI default, 20.
    """

    name = "continuous"
    takes = ("prefill_first", "max_waiting_steps")  # its knobs beyond batch_size (core/config.py checks them)
    admits_prefilled = True  # a deployment's decode instance can run it: prefilled requests decode at once

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
        return decodes_of(self.running)

    def plan(self, now: float, more_coming: bool) -> Plan:
        decodes = self._decodes()
        room = self._admits()
        if not decodes or self.waited >= self.max_waiting_steps:
            n = len(self.running)
            self._admit()
            self.waited = 0
            # admitted prefilled (a deployment's decode instance): they decode in this step already
            decodes += decodes_of(self.running[n:])
        elif room:
            self.waited += 1  # this decode step runs while a newcomer could have entered
        return Plan(decodes + [Work(r.slot, r, "prefill", r.num_prefilled, r.prefill_len - r.num_prefilled)
                               for r in self.running if r.num_prefilled < r.prefill_len])
