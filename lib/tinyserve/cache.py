"""KV slots: one slab per slot, reserving the maximum length (the layout Ch. 7 ends on), and its accounting."""
from __future__ import annotations

import heapq

from .errors import TinyserveError


def kv_bytes_per_token(n_layer: int, n_embd: int, itemsize: int) -> int:
    """K and V for every layer of one token."""
    return 2 * n_layer * n_embd * itemsize


def num_slots_for(batch_size: int, kv_budget: int | None, slab_bytes: int) -> int:
    """How many slabs exist: the batch size, capped by what the KV budget can hold."""
    if kv_budget is None:
        return batch_size
    if kv_budget < slab_bytes:
        raise TinyserveError(
            f"kv_budget: {kv_budget} bytes is smaller than one sequence's slab ({slab_bytes} bytes = max_model_len "
            f"positions of K and V); raise it to at least {slab_bytes}")
    return min(batch_size, kv_budget // slab_bytes)


class SlotPool:
    """Free slots (lowest first, so busy slots stay packed at the front) and bytes reserved vs used."""

    def __init__(self, num_slots: int, slab_tokens: int, bytes_per_token: int):
        self.num_slots = num_slots
        self.slab_tokens = slab_tokens
        self.bytes_per_token = bytes_per_token
        self._free = list(range(num_slots))

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def slab_bytes(self) -> int:
        return self.slab_tokens * self.bytes_per_token

    def claim(self) -> int:
        """Take the lowest free slot."""
        if not self._free:
            raise RuntimeError("no free slot")  # a policy bug, never user input
        return heapq.heappop(self._free)

    def release(self, slot: int) -> None:
        """Give a slot back; its slab is reused as is (stale K/V past a request's length is never attended)."""
        if slot in self._free:
            raise RuntimeError(f"slot {slot} released twice")
        heapq.heappush(self._free, slot)

    def reserved_bytes(self) -> int:
        """Bytes held by claimed slabs."""
        return (self.num_slots - len(self._free)) * self.slab_bytes
