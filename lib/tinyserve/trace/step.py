"""One step of a run as the trace records it (the engine makes one per step)."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.request import SlotWork


@dataclass(slots=True)  # slotted: a dry run makes one per step (9,194 for chapter-7.2-longtail dynamic)
class StepRecord:
    """One iteration of the engine: one forward pass over all its works."""

    index: int
    start_s: float
    duration_s: float
    works: list[SlotWork]
    kv_reserved_bytes: int
    kv_used_bytes: int
    measured_s: float | None = None  # wall time of the forward, when the model ran
    num_waiting: int = 0  # requests arrived and still without a slot after this step's plan (the queue)
    # the paged KV layout only (core/blocks.py): blocks in tables / free after the step, internal waste (positions
    # in the unfilled tail of each sequence's last filled block), requests preempted while planning
    # it, requests whose recompute ended in it (sampling their next token), prefill tokens it computed again
    blocks_used: int = 0
    blocks_free: int = 0
    block_waste: int = 0
    preempted: tuple = ()
    resumed: tuple = ()
    recomputed_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Tokens computed in this step, padding included."""
        return sum(w.tokens + w.padding for w in self.works)
