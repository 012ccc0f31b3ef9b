"""Static batching, as the chapter tells it: a batch is formed, its prompts are prefilled together, padded to the
longest, and it runs until its longest member ends; a member that is done keeps computing (wasted) until then."""
from __future__ import annotations

import math

from ..knobs import DEFAULT_BATCH_SIZE
from ..request import ABORTED, FINISHED, REJECTED, Request, SlotWork, Work
from .scheduler import Plan, Policy, _position

DONE = (FINISHED, REJECTED, ABORTED)  # Request.done's statuses, read per row per step


class StaticBatching(Policy):
    """A fixed batch runs from its padded prefill to its last finisher; a finished member's slot keeps computing."""

    name = "static"
    takes = ("timeout",)  # its knobs beyond batch_size (RunConfig checks them: core/config.py)

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, timeout: float | None = None):
        super().__init__(batch_size)
        self.timeout = timeout  # None: wait for a full batch (or the end of the stream)
        self.padded_len = self.decode_steps = 0  # the running batch's padded prompt length, decode steps so far
        self._rows: list[Work] | None = None  # the batch's decode Works, kept from step to step (_next_decodes)
        self._live: list[Work] = []  # the rows still decoding,
        self._wasted: list[Work] = []  # and those already wasted (in a long tail: most of them)

    def knobs(self) -> dict:
        return {"batch_size": self.batch_size, "timeout": self.timeout}

    def plan(self, now: float, more_coming: bool) -> Plan:
        if self.running:  # the batch runs on, every row one position further
            return Plan(self._next_decodes())
        if not self.waiting:
            return Plan([])
        # form a batch: as many as fit, or wait for more (until the timeout, if there is one)
        capacity = min(self.batch_size, self.pool.num_slots)
        deadline = self.waiting[0].arrival_s + self.timeout if self.timeout is not None else math.inf
        fit = self.pool.fitting(self.waiting, min(capacity, len(self.waiting)))
        if fit == len(self.waiting) < capacity and now < deadline and more_coming:
            return Plan([], wake_s=deadline if deadline < math.inf else None)
        batch = [self.waiting.popleft() for _ in range(fit)]
        longest = max(r.prompt_len for r in batch)
        self.padded_len, self.decode_steps, self._rows = longest, 0, None
        for r in batch:
            self._claim(r)
        return Plan([Work(r.slot, r, "prefill", 0, r.prompt_len, padding=longest - r.prompt_len) for r in batch])

    def grow(self, step: int) -> None:
        """Each member's next position gets its KV: admission (pool.fitting) reserved the worst case, so a static
        batch never preempts."""
        self.pool.grow(step, self.running, _never)

    def _next_decodes(self) -> list[Work]:
        """The batch's next decode step: every row, done or not, one position on.

        A real server's static batch is a rectangle: every row attends over the padded prompt plus the batch's
        decode steps so far (pad_keys: the keys beyond a row's own, which the clock prices).
        """
        self.decode_steps += 1
        edge = self.padded_len + self.decode_steps - 1
        # Speed: one Work per row, made at the batch's first decode and moved on in place, and the wasted rows
        # kept apart with their trace record made once (most rows of a long-tailed batch only re-run their last
        # position, for thousands of steps). Measured 2026-12-04 (median of 9, CPU): chapter-7.2-longtail dynamic,
        # B=16, dry run 105 ms against 162 ms with new Works each step, a third of its widgets row (175 ms). The
        # engine reads a step's Works before the next plan; nothing keeps them.
        if self._rows is None:
            self._rows = [Work(r.slot, r, "decode", 0, 1) for r in self.running]
            self._live, self._wasted = list(self._rows), []
        for w in self._wasted:  # a done row re-runs its last position; only the rectangle grows
            w.pad_keys += 1
        turned = False
        for w in self._live:
            r = w.request
            w.start = start = r.num_prefilled + len(r.output) - 1
            w.pad_keys = edge - start
            if r.status in DONE:  # done: from now on it re-runs its last decode, output thrown away
                w.phase = "wasted"
                w.record = SlotWork(w.slot, r.id, "wasted", start, 1, 0)
                turned = True
        if turned:
            self._wasted = [w for w in self._rows if w.phase == "wasted"]
            self._live = [w for w in self._rows if w.phase != "wasted"]
        return list(self._rows)

    def finished(self, req: Request) -> None:
        """A done member keeps its slot until the whole batch is done (an abort frees it at once)."""
        if req.status == ABORTED or _position(self.running, req) < 0:
            super().finished(req)
            self._rows = None  # the batch lost a row
        if self.running and all(r.done for r in self.running):
            for r in self.running:
                self._free(r)
            self.running.clear()


def _never(r: Request) -> None:
    raise RuntimeError(f"static batch: no KV for {r.id}")  # words: ok (a bug: admission reserved its worst case)
