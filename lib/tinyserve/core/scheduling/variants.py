"""Scheduling rules of other systems that our four policies do not follow, for the gallery and the ablation.

Each is a small subclass of one of our policies, so the engine, the trace and the metrics stay the same;
only the plan differs. They exist to show, on one engine, how a published figure's system differs from ours.

separate-prefill  vLLM's original rule: a step that prefills carries no decodes (they sit that step out)
whole-prompt      TensorRT-LLM without context chunking: a newcomer joins only if its whole prompt fits the
                  step's token budget; the first that does not fit blocks those behind it (FIFO)
chunk-only        chunked prefill without mixing: a step carries either prefill chunks or decodes, never both;
                  when both wait, the two kinds of step alternate (one chunk step, then one decode step)
"""
from __future__ import annotations

from .scheduler import Plan
from .chunked import ChunkedPrefill
from .continuous import ContinuousBatching
from ..request import Work


def _prefill(r, n: int | None = None) -> Work:
    left = r.prefill_len - r.num_prefilled
    return Work(r.slot, r, "prefill", r.num_prefilled, left if n is None else min(n, left))


class SeparatePrefill(ContinuousBatching):
    """Prefill-only steps first (every newcomer's whole prompt), decode-only steps otherwise (vLLM v0)."""

    name = "separate-prefill"

    def __init__(self, batch_size: int = 32):
        super().__init__(batch_size, max_waiting_steps=0)

    def plan(self, now: float, more_coming: bool) -> Plan:
        self._admit()
        prefills = [_prefill(r) for r in self.running if r.num_prefilled < r.prefill_len]
        return Plan(prefills if prefills else self._decodes())


class WholePromptBudget(ContinuousBatching):
    """Decodes first, then newcomers whose WHOLE prompt fits the rest of the budget, in FIFO order."""

    name = "whole-prompt"

    def __init__(self, batch_size: int = 32, max_batch_tokens: int = 512):
        super().__init__(batch_size, max_waiting_steps=0)
        self.max_batch_tokens = max_batch_tokens

    def knobs(self) -> dict:
        return {"batch_size": self.batch_size, "max_batch_tokens": self.max_batch_tokens}

    def plan(self, now: float, more_coming: bool) -> Plan:
        works = self._decodes()
        budget = self.max_batch_tokens - len(works)
        # a prompt longer than the whole budget could never run: let it through alone rather than block forever
        while self._admits() and (self.waiting[0].prefill_len <= budget
                                  or (not works and budget == self.max_batch_tokens)):
            r = self.waiting.popleft()
            self._claim(r)
            works.append(_prefill(r))
            budget -= r.prefill_len
        return Plan(works)


class ChunkOnly(ChunkedPrefill):
    """Chunked prefill that never mixes: chunk steps and decode steps alternate while both have work."""

    name = "chunk-only"

    def __init__(self, batch_size: int = 32, chunk_size: int = 512, max_batch_tokens: int | None = None):
        super().__init__(batch_size, chunk_size, max_batch_tokens)
        self._last = "decode"

    def plan(self, now: float, more_coming: bool) -> Plan:
        self._admit()
        decodes = self._decodes()
        chunks, budget = [], self.max_batch_tokens
        for r in self.running:
            if budget <= 0:
                break
            if r.num_prefilled < r.prefill_len:
                w = _prefill(r, min(self.chunk_size, budget))
                chunks.append(w)
                budget -= w.tokens
        if chunks and (not decodes or self._last == "decode"):
            self._last = "prefill"
            return Plan(chunks)
        self._last = "decode"
        return Plan(decodes)
