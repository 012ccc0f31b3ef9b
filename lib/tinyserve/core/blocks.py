"""The paged KV layout (Ch. 8's answer to the slab): a pool of fixed-size blocks and a block table per sequence.

Torch-free (nano-vllm's block manager, vLLM's names), so a dry run allocates the very blocks a real run's model
reads through. A sequence holds ceil(positions / block_size) blocks, taken as it grows and all given back when it
finishes or is preempted. Slots stay as the batch's rows (vLLM's max_num_seqs): a paged run has batch_size of them,
none reserving memory; admission is limited by free blocks. Which request is preempted, and how it is recomputed,
is the policy's decision (core/scheduling/scheduler.Policy._preempt).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..errors import TinyserveError
from ..lang import t
from .kv import KVPool, RunKV, SlabPlan, accepted_of, words
from .request import REJECTED, Request


DEFAULT_BLOCK_SIZE = 16  # vLLM's default block size (--block-size)


def blocks_for(positions: int, block_size: int) -> int:
    """Blocks a sequence of `positions` positions holds (the last one partly filled)."""
    return -(-positions // block_size)


BLOCK_FIELDS = ("blocks_used", "blocks_free", "block_waste", "preempted", "resumed", "recomputed_tokens")


@dataclass
class PagedRecord:
    """The paged layout's part of a Trace (Trace.kv): the pool's size, every block's span (the block map), and
    what its JSON, metrics, report and views add to every run's (kv.SlabRecord is the slab layout's)."""

    block_size: int = 0  # positions per block
    num_blocks: int = 0  # blocks in the pool
    # each time a block was held: (block, request id, its index in the request's table, first step, last step);
    # a block map (blocks x steps, owner per cell) is these spans drawn as bars
    block_spans: list[tuple] = field(default_factory=list)
    kv_layout = "paged"

    @classmethod
    def from_json(cls, kv: dict, d: dict) -> PagedRecord:
        """The record a saved trace's `kv` object and document describe."""
        return cls(kv.get("block_size", 0), kv.get("num_blocks", 0), [tuple(sp) for sp in d.get("block_spans", [])])

    def json_kv(self) -> dict:
        """Its fields of the `kv` object of a summary, after every run's."""
        return {"layout": "paged", "block_size": self.block_size, "num_blocks": self.num_blocks}

    def json_request(self, r) -> dict:
        """Its fields of a request's JSON object: how often it was preempted."""
        return {"preemptions": r.preemptions}

    def json_step(self, s) -> dict:
        """Its fields of a step's JSON object: the step's block counts and preemptions (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(s, k)) for k in BLOCK_FIELDS)}

    def json_trace(self) -> dict:
        """Its fields of the full trace document: every block's span."""
        return {"block_spans": [list(sp) for sp in self.block_spans]}

    def perfetto_counters(self, s, ts: float) -> list[dict]:
        """Its Chrome-trace counter events of step s (at ts microseconds): blocks, and preemptions."""
        return [{"ph": "C", "pid": 1, "name": "kv_blocks", "ts": ts,
                 "args": {"used": s.blocks_used, "free": s.blocks_free, "waste_positions": s.block_waste}},
                {"ph": "C", "pid": 1, "name": "preemption", "ts": ts,
                 "args": {"preempted": len(s.preempted), "recomputed_tokens": s.recomputed_tokens}}]

    def metrics(self, steps) -> dict:
        """Preemptions, prefill tokens computed again after them, the most blocks held at once."""
        return {"preemptions": sum(len(s.preempted) for s in steps),
                "recomputed_tokens": sum(s.recomputed_tokens for s in steps),
                "blocks_used_peak": max((s.blocks_used for s in steps), default=0)}

    def report_lines(self, m: dict, size) -> list[str]:
        """Its line of the run's report: the pool, the most blocks held, preemptions and recomputed tokens."""
        return [t("engine.summary.kv_blocks", blocks=self.num_blocks, size=self.block_size,
                  held=m["blocks_used_peak"], preemptions=m["preemptions"], recomputed=m["recomputed_tokens"])]

    # ---- words of the views (widgets): the KV plot and the block map --------------------------------------------
    def held_word(self) -> str:
        """The KV plot's name for the bytes the layout holds: the blocks in tables."""
        return t("kv.held")

    def kv_title(self) -> str:
        return t("title.kv.paged")

    def kv_sentence(self, tr, counts, **common) -> str:
        """The KV plot's words for step k (common: k, used, reserved, unit, pct; counts(): blocks_at's)."""
        st = tr.steps[common["k"]]
        return t("kv.sentence.paged", **common, size=self.block_size, blocks=st.blocks_used,
                 total=st.blocks_used + st.blocks_free, preempted=counts()["preempted"])

    def blocks_title(self) -> str:
        """The block map's title: the pool's blocks and their size."""
        return t("title.blocks", blocks=self.num_blocks, size=self.block_size)

    def block_notes(self, note: str, top: int) -> list[str]:
        """The block map's notes (note: the binning's, if any), and the blocks never held when some were not."""
        notes = [note] if note else []
        if 0 < top < self.num_blocks:
            notes.append(t("blocks.unused", top=top, last=self.num_blocks - 1))
        return notes

    def block_caption(self, note: str, top: int) -> str:
        """The block map's caption in the live view: its notes, a line each."""
        return "<br>".join(self.block_notes(note, top))

    def blocks_sentence(self, tr, k: int, counts) -> str:
        """The block map's words for step k, within the run's steps (counts(): blocks_at's)."""
        if not tr.steps:
            return t("note.no_steps")
        c = counts()
        return t("blocks.sentence", k=k, used=c["used"], total=self.num_blocks,
                 free=c["free"], size=self.block_size, waste=c["waste"],
                 pct=100 * c["waste"] / max(1, c["used"] * self.block_size), preempted=c["preempted"],
                 recomputed=c["recomputed"])


class PagedPool(KVPool):
    """The KV pool of the paged layout: slots (rows of the batch, reserving nothing) plus a pool of KV blocks
    handed out to sequences' block tables (the interface: core/kv.KVPool)."""

    record = PagedRecord  # its part of a Trace
    knobs = {"block_size": DEFAULT_BLOCK_SIZE}  # the layout's own knobs and their defaults (RunConfig checks them)

    def __init__(self, num_slots: int, num_blocks: int, block_size: int, bytes_per_token: int):
        super().__init__(num_slots, bytes_per_token)
        self.num_blocks, self.block_size = num_blocks, block_size
        # a heap, lowest block first: held blocks stay packed at the bottom, so the block map reads easily and
        # the real model's tensors need only as many blocks as were ever held at once (ids stay below that peak)
        self._free_blocks = list(range(num_blocks))
        self.held = 0  # blocks in sequences' tables
        self.step = 0  # the step being planned (grow sets it): block spans are dated with it
        self.preempted: list[str] = []  # requests preempted while planning this step
        self.spans: list[list] = []  # [block, request id, index in its table, first step, last step or None]
        self._open: dict[int, list] = {}  # block -> its open span

    @classmethod
    def lay_out(cls, plan: SlabPlan, requests: list[Request], batch_size: int, config) -> RunKV:
        """The paged layout of a run, sized as slabs would be (equal memory): the longest request, as a slab run's."""
        longest = max((r.prompt_len + r.max_new_tokens for r in requests if r.status != REJECTED), default=1)
        block_size, bpt = config.block_size, plan.bytes_per_token
        pool = paged_pool(batch_size, plan.capacity, plan.slab_tokens(longest) * bpt, block_size, bpt)
        refused = refusals_paged(pool, requests, plan.capacity_name)
        accepted = accepted_of(requests, refused)
        # lowest-first allocation keeps block ids below the most ever held at once, at most every slot's longest
        # sequence, so the tensors need no more blocks than that, however large the modeled pool
        most = max((r.prompt_len + r.max_new_tokens for r in accepted), default=1)
        tensor = block_size * min(pool.num_blocks, pool.num_slots * blocks_for(most, block_size))
        return RunKV(plan, pool, accepted, refused, tensor)

    @property
    def free_blocks(self) -> int:
        return len(self._free_blocks)

    def holds(self, positions: int, free_blocks: int) -> bool:
        """Room for a sequence of `positions` positions, given free_blocks free blocks."""
        return blocks_for(positions, self.block_size) <= free_blocks

    def fits(self, r: Request) -> bool:
        """Free blocks hold r's prefill (its prompt, or everything it had when preempted)."""
        # a prefilled arrival (a deployment's decode instance) also needs its next position's block
        return blocks_for(r.prefill_len + (r.num_prefilled > 0), self.block_size) <= len(self._free_blocks)

    def fitting(self, requests, n: int) -> int:
        """How many of the first n requests, in order, the free blocks hold whole (prompt + max_new_tokens): a
        static batch cannot let a member go mid-run, so it takes only what its worst case leaves room for."""
        free = len(self._free_blocks)
        for i in range(n):
            r = requests[i]
            free -= blocks_for(r.prompt_len + r.max_new_tokens, self.block_size)
            if free < 0:
                return i
        return n

    def grow(self, step: int, running: list[Request], preempt) -> None:
        """Step `step` is being planned: every decoding request gets the block its next position needs; while none
        is free, preempt(the last admitted) frees some (it leaves `running`; if it is the one growing, it stops)."""
        self.step, self.preempted = step, []
        size = self.block_size
        for r in running:  # preemption shortens the list from its end: the loop then stops sooner
            done = r.num_prefilled
            if done < r.prefill_len:
                continue  # its prefill's blocks were taken when it was admitted
            need = done + len(r.output)
            if need <= len(r.block_table) * size:
                continue  # its last block has room
            while not self.allocate(r, need):
                victim = running[-1]
                preempt(victim)
                if victim is r:
                    break

    def allocate(self, r: Request, positions: int) -> bool:
        """Grow r's block table to cover `positions`; False (nothing taken) when too few blocks are free."""
        table = r.block_table
        need = blocks_for(positions, self.block_size) - len(table)
        if need > len(self._free_blocks):
            return False
        for _ in range(need):
            b = heapq.heappop(self._free_blocks)
            span = [b, r.id, len(table), self.step, None]
            table.append(b)
            self.spans.append(span)
            self._open[b] = span
        self.held += max(need, 0)
        return True

    def free(self, r: Request, last_step: int | None = None) -> None:
        """Give back every block of r's table (held through last_step, default the step being planned)."""
        last = self.step if last_step is None else last_step
        for b in r.block_table:
            self._open.pop(b)[4] = last
            heapq.heappush(self._free_blocks, b)
        self.held -= len(r.block_table)
        r.block_table = []  # a new list: snapshots of r keep the old one

    def reserved_bytes(self) -> int:
        """Bytes of the blocks sequences hold (free blocks are anyone's: nothing is reserved ahead)."""
        return self.held * self.block_size * self.bytes_per_token

    held_bytes = reserved_bytes

    def step_fields(self, running, works, preempted_once: bool) -> dict:
        """A step's block counts, preemptions and recomputed tokens (step_blocks)."""
        return step_blocks(self, running, works, preempted_once)

    def trace_fields(self, last_step: int) -> dict:
        """The layout, the pool's size and every block's span (the block map)."""
        return {"kv": PagedRecord(self.block_size, self.num_blocks, self.closed_spans(last_step))}

    def priced(self, clock):
        """The clock, told the blocks: a modeled clock prices what the paged engine computes (its attention reads
        whole blocks)."""
        return clock.for_layout(self.block_size)

    def runner(self, make, model, positions: int):
        """The model's runner for this pool (make: model.runner.ModelRunner): `positions` positions in blocks."""
        return make.with_blocks(model, positions // self.block_size, self.block_size)

    def closed_spans(self, last_step: int) -> list[tuple]:
        """Every (block, request id, index, first step, last step) so far; still-held blocks end at last_step."""
        return [(b, rid, i, first, last_step if last is None else last) for b, rid, i, first, last in self.spans]


def paged_pool(batch_size: int, capacity: int | None, slab_bytes: int, block_size: int,
               bytes_per_token: int) -> PagedPool:
    """The pool a paged run gets: the capacity (a preset's KV memory, --kv-budget), else the slab layout's bytes
    for the same batch size (equal memory, so the two layouts compare fairly)."""
    pool_bytes = capacity if capacity is not None else batch_size * slab_bytes
    return PagedPool(batch_size, pool_bytes // (block_size * bytes_per_token), block_size, bytes_per_token)


def refusals_paged(pool: PagedPool, requests: list[Request], capacity_name: str | tuple | None) -> list[tuple]:
    """(request, why) for each request not yet rejected that could never fit the pool even by itself: the
    scheduler rejects it, alone. A pool too small for even the shortest prompt is an error: nothing could run.
    capacity_name: SlabPlan's (words() data, looked up only for a message)."""
    name = capacity_name or ("engine.kv.equal_memory", {})
    live = [r for r in requests if r.status != REJECTED]
    shortest = min((r.prompt_len for r in live), default=0)
    if live and blocks_for(shortest, pool.block_size) > pool.num_blocks:
        raise TinyserveError(t("engine.kv.pool_small", knob="kv_budget" if capacity_name == "kv_budget" else
                               "block_size", blocks=pool.num_blocks, size=pool.block_size, name=words(name),
                               shortest=shortest))
    out = []
    for r in live:
        need = blocks_for(r.prompt_len + r.max_new_tokens, pool.block_size)
        if need > pool.num_blocks:
            out.append((r, t("engine.kv.too_many_blocks", need=need, size=pool.block_size,
                             positions=r.prompt_len + r.max_new_tokens, blocks=pool.num_blocks, name=words(name))))
    return out


def step_blocks(pool: PagedPool, running: list[Request], works: list, preempted_once: bool) -> dict:
    """A paged step's StepRecord fields, after its K/V were stored: blocks held and free, internal waste,
    preemptions, the requests whose recompute ended, and the tokens recomputed (only once someone was preempted)."""
    recomputed, resumed = 0, []
    for w in works if preempted_once else ():  # only a preempted request recomputes
        r = w.request
        if w.phase != "prefill" or not r.preemptions:
            continue
        if r.computed_len > w.start:  # positions it had stored before a preemption
            recomputed += min(w.start + w.tokens, r.computed_len) - w.start
        if r.num_prefilled == r.prompt_len and w.start + w.tokens > r.prompt_len:
            resumed.append(r.id)  # its recompute ended here and sampled its next token
    size, waste = pool.block_size, 0
    for r in running:  # internal waste: the unfilled tail of each sequence's last filled block. A table covers its
        # filled positions, so the room left in it is that tail plus whole blocks held ahead (a chunked prompt's, a
        # static batch's done row's), which are held, not waste
        waste += -r.context_len % size
    return {"blocks_used": pool.held, "blocks_free": pool.free_blocks, "block_waste": waste,
            "preempted": tuple(pool.preempted), "resumed": tuple(resumed), "recomputed_tokens": recomputed}
