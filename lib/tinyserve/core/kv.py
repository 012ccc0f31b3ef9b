"""A run's KV: its sizing (SlabPlan), the pool interface (KVPool), the slab layout (SlotPool: one slab per slot,
reserving the maximum length, the layout Ch. 7 ends on) and what a layout decides before a run's first step
(RunKV; config.layout_kv chooses the layout); the paged layout is core/blocks.py. Each layout's pool builds what
its steps need, so nobody asks which it is: its model-side K/V (runner), its trace fields, its clock (priced); the
decodes' grouping into attention calls (group_decodes) is here, below both the model and the clock.

Bytes are those of the model the clock speaks for: under the modeled clock the hardware preset's model (a
70B-class model's K and V per token, in its KV dtype) within the memory its GPU has left after the weights;
under the wall clock the tiny GPT's real tensors. Trace.kv_units says which.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..errors import TinyserveError
from ..lang import t
from .request import REJECTED, Request

# Cost, in slot-keys, of one more attention call: splitting decodes into groups pays off when it skips
# reading more than this many (slot, key) pairs of the slabs. Measured on CPU (about 300 was best); on a GPU
# reading keys is cheap and every call costs kernel launches, so it splits only for big savings. A heuristic:
# exactness is unaffected.
GROUP_CALL_COST = 256
GROUP_CALL_COST_CUDA = 65536


def kv_bytes_per_token(n_layer: int, n_kv_dim: int, itemsize: int) -> int:
    """K and V for every layer of one token (n_kv_dim: KV heads x head size; GQA stores only the KV heads)."""
    return 2 * n_layer * n_kv_dim * itemsize


def num_slots_for(batch_size: int, capacity: int | None, slab_bytes: int) -> int:
    """How many slabs exist: the batch size, capped by how many slabs the KV capacity holds (None: no cap)."""
    if capacity is None:
        return batch_size
    return min(batch_size, capacity // slab_bytes)


def words(w: str | tuple | None) -> str | None:
    """Words kept as data, a catalog key and its fields (key, {field: value}), looked up now in the current
    language; a str (or None) as it is. A run keeps what it may never show this way (its slab rule, a capacity's
    name), so its way to the first step loads no catalog."""
    return t(w[0], **w[1]) if isinstance(w, tuple) else w


def too_big_for(tokens: int, bytes_per_token: int, capacity: int | None, capacity_name: str | tuple) -> str | None:
    """Why a sequence of `tokens` positions can never be held (None if it can): its slab exceeds the capacity."""
    need = tokens * bytes_per_token
    if capacity is None or need <= capacity:
        return None
    return t("engine.reject.kv", need=need, tokens=tokens, bytes_per_token=bytes_per_token,
             capacity_name=words(capacity_name), capacity=capacity)


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
    capacity_name: str | tuple | None  # "kv_budget", or the words of the preset's KV memory (words())
    server_len: int | None  # positions a server admits per sequence (None: the slab is the run's longest, a what-if)
    rule: str | tuple = ""  # what sized the slab, as words() data: the trace keeps the text (Run.trace)

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
    # words as data (words()): looked up when shown (a refusal, the trace), so a run's first step loads no catalog
    memory_name = ("engine.kv.memory_of", {"name": hw.name if hw else ""})
    caps = [(c, n) for c, n in ((kv_budget, "kv_budget"), (memory, memory_name)) if c is not None]
    if len(caps) == 2 and caps[0][0] == caps[1][0]:  # a tie goes to the name that sorts first, as it always has
        caps = [(c, words(n)) for c, n in caps]
    capacity, cap_name = min(caps) if caps else (None, None)
    # a server admits at most its model's context: the preset's maximum length is capped by the model run
    server_len = (None if slab == "longest" else
                  max_model_len or (min(hw.max_model_len or context, context) if hw else None))
    if slab == "longest":
        rule = ("engine.slab.longest", {})
    elif max_model_len is not None:
        rule = ("engine.slab.given", {})
    elif hw is not None:
        rule = (("engine.slab.preset", {"name": hw.name}) if hw.max_model_len == server_len
                else ("engine.slab.context", {}))
    else:
        rule = ("engine.slab.real", {})
    return SlabPlan(units, dtype, bpt, capacity, cap_name, server_len, rule)


def group_decodes(dec: list[tuple[int, int, int]], call_cost: int | None = None) -> list[list[tuple[int, int, int]]]:
    """Split (row, slot, context) decodes, sorted by slot, into runs of neighbouring slots: the attention calls of
    a step's decodes (the model's indexing makes them, the modeled clock prices them: one rule for both).

    One call over a slot range reads every slot's slab up to the longest context in the range, so a long
    sequence next to short ones makes them all pay; a new group costs one more call. Greedy, left to right.
    """
    call_cost = GROUP_CALL_COST if call_cost is None else call_cost
    groups: list[list[tuple[int, int, int]]] = []
    lo = hi = T = 0
    for d in dec:
        _, slot, ctx = d
        if groups and (slot + 1 - lo) * max(T, ctx) <= (hi - lo) * T + call_cost + ctx:
            groups[-1].append(d)
            hi, T = slot + 1, max(T, ctx)
        else:
            groups.append([d])
            lo, hi, T = slot, slot + 1, ctx
    return groups


@dataclass
class RunKV:
    """What a run's KV layout decides (config.layout_kv)."""

    plan: SlabPlan  # bytes per token, capacity and slab rule (the paged pool is sized from the same plan)
    pool: KVPool  # a SlotPool, or a blocks.PagedPool
    accepted: list[Request]  # the requests that can ever fit, in order
    refused: list[tuple]  # (request, why) for those whose KV can never fit: the scheduler rejects them
    tensor_positions: int  # slabs: positions per slot; paged: positions of the block pool (blocks x block_size)


def accepted_of(requests: list[Request], refused: list[tuple]) -> list[Request]:
    """The requests neither rejected already nor refused, in order."""
    out = {id(r) for r, _ in refused}
    return [r for r in requests if r.status != REJECTED and id(r) not in out]


@dataclass
class SlabRecord:
    """The slab layout's part of a Trace (Trace.kv): what its JSON, metrics, report and views say that a paged run's
    says otherwise (blocks.PagedRecord). A slab run has no blocks: nothing of its own to add to the documents."""

    kv_layout = "slab"
    block_size = 0
    num_blocks = 0
    block_spans: list = field(default_factory=list)  # none: a slab holds no blocks

    @classmethod
    def from_json(cls, kv: dict, d: dict) -> SlabRecord:
        """The record a saved trace's `kv` object and document describe."""
        return cls()

    def json_kv(self) -> dict:
        """Its fields of the `kv` object of a summary: none (slab_bytes / slab_tokens are every run's)."""
        return NO_FIELDS

    def json_request(self, r) -> dict:
        """Its fields of a request's JSON object: none (a slab run never preempts)."""
        return NO_FIELDS

    def json_step(self, s) -> dict:
        """Its fields of a step's JSON object: none."""
        return NO_FIELDS

    def json_trace(self) -> dict:
        """Its fields of the full trace document: none."""
        return NO_FIELDS

    def perfetto_counters(self, s, ts: float) -> list[dict]:
        """Its Chrome-trace counter events of step s: none."""
        return []

    def metrics(self, steps) -> dict:
        """Its metrics: none beyond every run's."""
        return NO_FIELDS

    def report_lines(self, m: dict, size) -> list[str]:
        """Its lines of the run's report (size: bytes as words): what the capacity holds, as slabs and exactly."""
        if m["kv_capacity_bytes"] is None:
            return []
        return [t("engine.summary.kv_capacity", capacity=size(m["kv_capacity_bytes"]), slabs=m["kv_fit_slabs"],
                  exact=m["kv_fit_exact"])]

    # ---- words of the views (widgets): the KV plot and the block map --------------------------------------------
    def held_word(self) -> str:
        """The KV plot's name for the bytes the layout holds: every slab, reserved from the start."""
        return t("kv.reserved")

    def kv_title(self) -> str:
        return t("title.kv")

    def kv_sentence(self, tr, counts, **common) -> str:
        """The KV plot's words for step k (common: k, used, reserved, unit, pct; counts(): blocks_at's)."""
        return t("kv.sentence", slots=tr.num_slots, slab=tr.slab_tokens, **common)

    def blocks_title(self) -> str:
        """The block map's title: none, a slab run has no blocks."""
        return ""

    def block_notes(self, note: str, top: int) -> list[str]:
        """The block map's notes under its axis: none."""
        return []

    def block_caption(self, note: str, top: int) -> str:
        """The block map's caption in the live view: a slab run has no blocks."""
        return t("blocks.slab")

    def blocks_sentence(self, tr, k: int, counts) -> str:
        """The block map's words for step k (counts(): blocks_at's): a slab run has no blocks."""
        return t("blocks.slab")


class KVPool:
    """The interface every KV pool gives the scheduler, the run and its runner (SlotPool here, blocks.PagedPool):
    claim and release a slot (the rows of the batch, lowest first, so busy slots stay packed at the front);
    fits / fitting / allocate / grow / free for the K/V a request needs (grow starts each step; preempted lists
    who was taken back in it); reserved_bytes / held_bytes; and what the layout builds for the others: runner
    (its model-side K/V), priced (its clock), holds (room for a handed-over request), step_fields and trace_fields.
    The scheduler never asks which layout it has."""

    preempted: tuple | list = ()
    step = 0
    free_blocks = 0  # blocks free now (a layout without blocks has none)

    def __init__(self, num_slots: int, bytes_per_token: int):
        self.num_slots = num_slots
        self.bytes_per_token = bytes_per_token
        self._free = list(range(num_slots))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def claim(self) -> int:
        """Take the lowest free slot."""
        if not self._free:
            raise RuntimeError("no free slot")  # words: ok (a policy bug, never user input)
        return heapq.heappop(self._free)

    def release(self, slot: int) -> None:
        """Give a slot back (its K/V are the layout's: free)."""
        if slot in self._free:
            raise RuntimeError(f"slot {slot} released twice")  # words: ok (a policy bug)
        heapq.heappush(self._free, slot)


class SlotPool(KVPool):
    """The KV pool of the slab layout: each slot's slab reserved from the start, bytes reserved vs used. A slab
    already holds a request's longest sequence, so most of the interface has nothing to do here."""

    record = SlabRecord  # its part of a Trace
    knobs: dict = {}  # the layout's own knobs and their defaults (RunConfig checks them): none

    def __init__(self, num_slots: int, slab_tokens: int, bytes_per_token: int):
        super().__init__(num_slots, bytes_per_token)
        self.slab_tokens = slab_tokens

    @classmethod
    def lay_out(cls, plan: SlabPlan, requests: list[Request], batch_size: int, config) -> RunKV:
        """The slab layout of a run: as many slots as the capacity holds slabs of the longest sequence it admits."""
        refused = plan.refusals(requests)
        accepted = accepted_of(requests, refused)
        longest = max((r.prompt_len + r.max_new_tokens for r in accepted), default=1)
        slab_tokens, bpt = plan.slab_tokens(longest), plan.bytes_per_token
        pool = cls(num_slots_for(batch_size, plan.capacity, slab_tokens * bpt), slab_tokens, bpt)
        # the real model's slabs: max_model_len if given, else the run's longest (a 4,096-position float64 slab
        # per slot would not fit Binder's memory); the modeled bytes are accounted apart (the trace says which)
        return RunKV(plan, pool, accepted, refused, config.max_model_len or longest)

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

    def holds(self, positions: int, free_blocks: int) -> bool:
        """Room for a sequence of `positions` positions, given that many free blocks: a slot's slab has it."""
        return True

    def grow(self, step: int, running, preempt) -> None:
        """Step `step` is being planned: room for each running request's next position. Its slab has it (preempt
        is never called)."""

    def free(self, r, last_step: int | None = None) -> None:
        """r's K/V leave with its slot (release); its slab is reused as is (stale K/V past a request's length is
        never attended)."""

    def step_fields(self, running, works, preempted_once: bool) -> dict:
        """The layout's own StepRecord fields: none for slabs."""
        return NO_FIELDS

    def trace_fields(self, last_step: int) -> dict:
        """The layout's own Trace fields: every slot's slab, and its record (SlabRecord)."""
        return {"slab_bytes": self.slab_bytes, "slab_tokens": self.slab_tokens, "kv": SlabRecord()}

    def priced(self, clock):
        """The clock that prices this layout's steps: the given one."""
        return clock

    def runner(self, make, model, positions: int):
        """The model's runner for this pool (make: model.runner.ModelRunner): a slab of `positions` per slot."""
        return make.with_slabs(model, self.num_slots, positions)

    def reserved_bytes(self) -> int:
        """Bytes of every slot's slab: a slab server reserves them all when it starts, busy or not."""
        return self.num_slots * self.slab_bytes

    def held_bytes(self) -> int:
        """Bytes of the slabs claimed by running requests (the rest of the reservation sits idle)."""
        return (self.num_slots - len(self._free)) * self.slab_bytes
