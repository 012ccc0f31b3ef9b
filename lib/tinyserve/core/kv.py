"""KV slots: one slab per slot, reserving the maximum length (the layout Ch. 7 ends on), and its accounting.

Bytes are those of the model the clock speaks for: under the modeled clock the hardware preset's model (a
70B-class model's K and V per token, in its KV dtype) within the memory its GPU has left after the weights;
under the wall clock the tiny GPT's real tensors. Trace.kv_units says which.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from ..errors import TinyserveError
from ..lang import LazyText, t
from .request import REJECTED


def kv_bytes_per_token(n_layer: int, n_kv_dim: int, itemsize: int) -> int:
    """K and V for every layer of one token (n_kv_dim: KV heads x head size; GQA stores only the KV heads)."""
    return 2 * n_layer * n_kv_dim * itemsize


def num_slots_for(batch_size: int, capacity: int | None, slab_bytes: int) -> int:
    """How many slabs exist: the batch size, capped by how many slabs the KV capacity holds (None: no cap)."""
    if capacity is None:
        return batch_size
    return min(batch_size, capacity // slab_bytes)


def too_big_for(tokens: int, bytes_per_token: int, capacity: int | None, capacity_name: str) -> str | None:
    """Why a sequence of `tokens` positions can never be held (None if it can): its slab exceeds the capacity."""
    need = tokens * bytes_per_token
    if capacity is None or need <= capacity:
        return None
    return t("engine.reject.kv", need=need, tokens=tokens, bytes_per_token=bytes_per_token,
             capacity_name=capacity_name, capacity=capacity)


SLAB_RULES = ("max_model_len", "longest")
NO_FIELDS: dict = {}  # shared, never written


@dataclass
class SlabPlan:
    """How a run's KV is laid out: bytes per token (of the model the clock speaks for), the capacity that caps the
    slots, and the slab every slot reserves from step 0."""

    units: str  # "modeled": the preset's model; "real": the tiny GPT's tensors
    dtype: str
    bytes_per_token: int
    capacity: int | None  # the KV budget or modeled KV memory that caps the slots (None: no cap)
    capacity_name: str | LazyText | None
    server_len: int | None  # positions a server admits per sequence (None: the slab is the run's longest, a what-if)
    rule: str | LazyText = ""  # what sized the slab, in words the trace keeps (Trace.slab_rule, made str there)

    def refusals(self, requests: list) -> list[tuple]:
        """(request, why) for each request not yet rejected whose slab can never fit: the scheduler rejects it,
        alone."""
        out = []
        for r in requests:
            if r.status != REJECTED:
                reason = too_big_for(self.server_len or r.prompt_len + r.max_new_tokens, self.bytes_per_token,
                                     self.capacity, self.capacity_name)
                if reason:
                    out.append((r, reason))
        return out

    def slab_tokens(self, longest: int) -> int:
        """Positions of every slot's slab, given the run's longest accepted request."""
        return self.server_len or longest


def plan_slabs(hw, n_layer: int, n_embd: int, itemsize: int, dtype_name: str, context: int, kv_budget: int | None,
               max_model_len: int | None, slab: str) -> SlabPlan:
    """The KV layout of a run: hw is the modeled clock's preset (None under the wall clock)."""
    if slab not in SLAB_RULES:
        raise TinyserveError(t("engine.knob.slab", choices=", ".join(SLAB_RULES), value=slab))
    if hw is not None:  # KV in the bytes of the model the clock speaks for
        units, dtype, bpt = "modeled", hw.kv_dtype, int(hw.kv_bytes_per_token)
        memory = None if hw.kv_memory_bytes is None else int(hw.kv_memory_bytes)
    else:
        units, dtype, memory = "real", dtype_name, None
        bpt = kv_bytes_per_token(n_layer, n_embd, itemsize)
    # words as LazyText: looked up when shown (a refusal, the trace), so a run's first step loads no catalog
    memory_name = LazyText("engine.kv.memory_of", name=hw.name if hw else "")
    caps = [(c, n) for c, n in ((kv_budget, "kv_budget"), (memory, memory_name)) if c is not None]
    if len(caps) == 2 and caps[0][0] == caps[1][0]:  # a tie goes to the name that sorts first, as it always has
        caps = [(c, str(n)) for c, n in caps]
    capacity, cap_name = min(caps) if caps else (None, None)
    # a server admits at most its model's context: the preset's maximum length is capped by the model run
    server_len = (None if slab == "longest" else
                  max_model_len or (min(hw.max_model_len or context, context) if hw else None))
    if slab == "longest":
        rule = LazyText("engine.slab.longest")
    elif max_model_len is not None:
        rule = LazyText("engine.slab.given")
    elif hw is not None:
        rule = (LazyText("engine.slab.preset", name=hw.name) if hw.max_model_len == server_len
                else LazyText("engine.slab.context"))
    else:
        rule = LazyText("engine.slab.real")
    return SlabPlan(units, dtype, bpt, capacity, cap_name, server_len, rule)


class SlotPool:
    """The KV pool of the slab layout: free slots (lowest first, so busy slots stay packed at the front), each
    slot's slab reserved from the start, bytes reserved vs used.

    The interface every KV pool gives the scheduler (core/blocks.PagedPool is the paged one): claim and release a
    slot, fits / fitting / allocate / grow / free for the K/V a request needs (grow starts each step; preempted
    lists who was taken back in it), step_fields and trace_fields for the record. A slab already holds a
    request's longest sequence, so here most of them have nothing to do; the scheduler never asks which layout
    it has.
    """

    block_size = None  # no blocks
    preempted: tuple = ()  # a slab is never taken back
    step = 0

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

    def fits(self, r) -> bool:
        """A free slot's slab holds any accepted request (the paged layout asks its free blocks)."""
        return True

    def fitting(self, requests, n: int) -> int:
        """How many of the first n requests, in order, can be held whole (prompt + max_new_tokens) at once, given
        a slot each: all of them, a slab holds the longest."""
        return n

    def allocate(self, r, positions: int) -> bool:
        """Room for r's first `positions` positions: its slab has it."""
        return True

    def grow(self, step: int, running, preempt) -> None:
        """Step `step` is being planned: room for each running request's next position. Its slab has it (preempt
        is never called)."""

    def free(self, r, last_step: int | None = None) -> None:
        """r's K/V leave with its slot (release)."""

    def step_fields(self, running, works, preempted_once: bool) -> dict:
        """The layout's own StepRecord fields: none for slabs."""
        return NO_FIELDS

    def trace_fields(self, last_step: int) -> dict:
        """The layout's own Trace fields: none for slabs."""
        return NO_FIELDS

    def priced(self, clock):
        """The clock that prices this layout's steps: the given one."""
        return clock

    def claim(self) -> int:
        """Take the lowest free slot."""
        if not self._free:
            raise RuntimeError("no free slot")  # words: ok (a policy bug, never user input)
        return heapq.heappop(self._free)

    def release(self, slot: int) -> None:
        """Give a slot back; its slab is reused as is (stale K/V past a request's length is never attended)."""
        if slot in self._free:
            raise RuntimeError(f"slot {slot} released twice")  # words: ok (a policy bug)
        heapq.heappush(self._free, slot)

    def reserved_bytes(self) -> int:
        """Bytes of every slot's slab: a slab server reserves them all when it starts, busy or not."""
        return self.num_slots * self.slab_bytes

    def held_bytes(self) -> int:
        """Bytes of the slabs claimed by running requests (the rest of the reservation sits idle)."""
        return (self.num_slots - len(self._free)) * self.slab_bytes
