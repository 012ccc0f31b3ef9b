"""Chunked prefill: continuous batching under a token budget per step. Every decode goes first; prompts are cut
into chunks that fill what is left of the budget, so a long prompt never stalls the decodes for a whole step."""
from __future__ import annotations

from ..knobs import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK
from ..request import Work
from .scheduler import Plan
from .continuous import ContinuousBatching


class ChunkedPrefill(ContinuousBatching):
    """Continuous batching under a token budget per step: every decode first, then prefill chunks (FIFO)."""

    name = "chunked"
    takes = ("chunk_size", "max_batch_tokens")  # its knobs beyond batch_size (RunConfig checks them: core/config.py)

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
