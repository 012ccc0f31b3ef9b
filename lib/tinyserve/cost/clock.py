"""Time for the engine's step loop: the wall clock, or a cost model of real serving hardware.

The engine calls ``clock.step_time(works, measured_s)`` once per step. ``WallClock`` returns what the engine
measured on this machine. ``ModeledClock`` returns what the same step would take for a 70B-class model on a
datacenter GPU, pricing each part of the step the way it runs:

  linear layers   one pass over all the step's tokens: max(weight bytes / bandwidth, 2 x params x tokens / peak)
  decode attention  reads each decode's K/V: max(kv bytes / kv bandwidth, 4 x n_layer x attn_dim x keys / attn_flops)
  prefill attention computes, per segment: max(prefix kv bytes / kv bandwidth, 4 x n_layer x attn_dim x pairs / attn_flops)
  kv writes       the new tokens' K/V: kv bytes / kv bandwidth
  overheads       overhead_s per step + call_overhead_s per attention call + row_overhead_s per sequence (row)
                  of each attention call (on a CPU, SDPA's per-(sequence, head) set-up: ~50 us a decode here)
                  + walk_overhead_s per key position of a decode call's longest context (a CPU kernel walks the
                  keys in sequence: one sequence reading 2,000 keys got ~30% less bandwidth per key than 32 did)
                  + miss_row_overhead_s per row whose keys miss the cache (below)
  big steps       big_step_token_s per token past big_step_tokens (see model_preset)
  masks           masked_pair_s per query-key pair of a call given an explicit mask (tinyserve-* only: a chunk
                  after a prefix; the kernel reads and adds the mask for every pair; fitted ~5 ns on cpu-tiny)
  gathers         the paged layout, tinyserve-* only: gather_call_s per call whose K/V are copied out of the block
                  pool, and the copied bytes at gather_Bps (below)
  all-reduces     an instance split over N GPUs (--gpus N, tensor parallel: cost/tensor.py): two all-reduces per
                  layer of the step's activations (tokens x d_model x 2 bytes, bf16; tokens as the linear layers
                  count them, padding included), each allreduce_latency_s (the preset's measured small-message
                  all-reduce, the same whatever N) + 2(N-1)/N x bytes / link bandwidth over the preset's tp_link,
                  not overlapped; the rates are N x the preset's (each GPU holds 1/N of the weights and K/V and does
                  1/N of the flops) and the KV memory N x (kv_memory_bytes + W) - W, W the resident weights. A
                  modeled simplification: no overlap of communication with compute, one latency whatever the
                  message size (mid-size messages, ~1 MB, measure slower), every GPU's share exactly 1/N. One GPU:
                  0, nothing changes

On a GPU the KV bandwidth is the weights' (both stream from HBM); on a CPU the tiny model's 3.3 MB of weights
stay in cache while KV comes from DRAM, so calibration.calibrate() fits the two rates apart. A CPU's last-level cache also
holds a small step's KV from one step to the next: a preset may state kv_cache_bytes, kv_cache_bandwidth_Bps
and kv_cache_ramp, and KV reads are then priced at the cache's rate while the step reads less than that, at the
memory's rate past ramp x that, in between a mix (kv_hit_fraction; on this 32 MiB-L3 CPU, 32 decodes of 64 keys
ran at ~0.2 us a key, of 256 keys at ~0.4). GPU presets state no such cache: a 70B step reads gigabytes.
The parts are added, not overlapped: a prefill chunk's compute no longer hides the decodes' KV reads (on a GPU
they are different kernels, run one after the other). ``attention`` says how the attention calls are made:

  "exact"          a serving engine (vLLM, SGLang, TGI): one batched call for every decode, each reading exactly its
                   own keys; a chunk attends causally to its prefix. A static batch is a rectangle, as in real
                   servers: its decodes attend over the padded length (Work.pad_keys), finished members included,
                   whose context keeps growing with the batch's.
  "tinyserve-cpu"  this repository's TinyGPT.forward_step, as it really runs: decodes in groups of neighbouring
  "tinyserve-cuda" slots (core/kv.group_decodes), each group one call reading every slot up to its longest context;
                   a chunk after a prefix uses an explicit mask, computing the full chunk x (prefix + chunk) block;
                   each prefill and padding segment is its own call. On a CPU a causal segment computes whole
                   blocks of 512 keys (cpu_causal_pairs): up to 512 tokens, the full square. The tiny engine does
                   NOT pad its decodes: a static batch's decodes read their own context (rounded up to their
                   group's), and a finished member re-runs its last position. So under a tinyserve-* preset
                   (cpu-tiny) a static batch is priced as the tiny engine computes it, and under an exact preset
                   as a real server computes it.

The paged KV layout (core/blocks.py) is priced as the same works: exact presets already read exactly each
sequence's keys, which is what a paged kernel reads. What paging adds is the block-table indirection: one 4-byte
block id per block of keys read, per layer. On the GPU presets a block of 16 positions holds 16 x 327,680 / 80 =
65,536 bytes per layer, so the table adds 4 / 65,536 = 0.006% to the KV bytes read, and we assume (stated) that a
modern paged kernel (FlashAttention / FlashInfer with a block table, vLLM v1) loses nothing else to the
indirection: the clock adds nothing. The vLLM paper's first kernel ran 20-26% slower than FasterTransformer's
contiguous one (Kwon et al. 2023, sec. 7.1, https://arxiv.org/abs/2309.06180); that upper bound is not modeled.
What paging really costs shows in the works themselves: a preempted request's recompute is a prefill, priced as
one. Under a tinyserve-* preset (cpu-tiny) the clock prices a paged step as the tiny engine runs it
(model/gpt.build_paged_step, PagedKV.gather), which is not a slab step: each decode group is a call with one row per
decode (no holes), whose keys and values are first copied out of the block pool through the tables, every row up to
the group's longest context rounded up to whole blocks, a few sequences at a time into one reused buffer small
enough for the CPU's caches (gpt.GATHER_BYTES), so attention reads the copy from cache; each prefill segment copies
its prefix and its own K/V the same way. The terms count the groups and prefills that gather (`gathers`: one each,
however many batches their copy takes) and the positions copied (`gathered`), priced at gather_call_s per gather
and the copied bytes at gather_Bps, both fitted by calibration on paged steps: what a copy costs that lands in cache
and is read from there, not from memory; cpu-tiny's fit of 2026-12-06, on reads planned once a step: ~88 us a
gather and 64 GB/s copied (benchmarks/costmodel.py measured real paged steps at 1.4-2.8x the slab price
before this term existed, and up to 9x before the reused buffer: each copy was a fresh tensor, faulted in; issue 51,
benchmarks/paged.py). The paged pool hands its run a PagedClock (PagedPool.priced: ModeledClock.for_layout), whose
terms gather; a slab run's ModeledClock gathers nothing.

A padded prompt is computed (and priced) as the prompt plus a separate padding segment attending to itself:
(n(n+1) + p(p+1))/2 query-key pairs, where a left-padded rectangle computes (n+p)(n+p+1)/2, n x p pairs more
(2.5% of the 50-token + 3,950-padding prefill of chapter-7.1-padding).

Modeled time is a pure function of the works, so counts and times are identical on every machine.
``tools.calibrate.calibrate`` fits the rates and overheads to step times measured here; ``tinyserve.tools.validate``
checks the fitted model against the real engine's measured steps on the chapter workloads.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Protocol

from ..core.kv import GROUP_CALL_COST, GROUP_CALL_COST_CUDA, group_decodes
from ..core.request import Work, decode_works
from ..errors import TinyserveError
from ..lang import t
from .pricing import price, total
from .presets import DEFAULT_HARDWARE, HardwarePreset, get_preset
from .tensor import tensor_parallel

class Clock(Protocol):
    name: str

    def step_time(self, works: list[Work], measured_s: float | None) -> float: ...


class WallClock:
    """The time the engine measured (perf_counter around the step, CUDA synchronised)."""

    name = "wall"
    hardware = None

    def for_layout(self, block_size: int) -> WallClock:
        """This clock for a paged run: the same (measured time is what the layout cost)."""
        return self

    def step_time(self, works: list[Work], measured_s: float | None) -> float:
        """Return measured_s; the engine must measure when this clock is used."""
        if measured_s is None:
            raise ValueError("WallClock.step_time needs measured_s")  # words: ok (a bug: the loop measures)
        return float(measured_s)


@lru_cache(maxsize=4096)
def cpu_causal_pairs(n: int) -> int:
    """Query-key pairs PyTorch's CPU flash attention computes for a causal segment of n tokens.

    Its kernel (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) walks blocks of queries (32, 64 or 256 rows
    as n grows) and, for each, whole blocks of 512 keys up to the block's last query: the causal mask saves only
    whole key blocks. Measured here (1 thread): a causal segment of up to 512 tokens costs what a full n x n one
    does, 2,000 tokens 0.64 of it (this count: 0.63), where n(n+1)/2 would say 0.5.
    """
    q_block = 256 if n >= 768 else 64 if n >= 192 else 32
    pairs = 0
    for m in range(0, n, q_block):
        last = min(m + q_block, n)  # keys the block's last query may see
        pairs += (last - m) * min(n, -(-last // 512) * 512)
    return pairs


def _exact_terms(works: list[Work]) -> dict:
    """ModeledClock.terms under an exact preset: every decode in one call reading exactly its keys (the rectangle of
    a static batch included), a prefill computing only its causal pairs. A dry run prices every step with it, most
    of them decodes only: those take one list comprehension (a third of a loop's time), their keys summed in C."""
    # each decode's keys less one: start + pad_keys (a static batch's rectangle: Work.pad_keys)
    keys = [w.start + w.pad_keys for w in works if w.tokens == 1 and not w.padding]
    stored = padding = 0  # beside the decodes: prompt tokens (their K/V stored) and padding (stored nowhere)
    attn: list[tuple] = []
    if len(keys) < len(works):  # prompts or padding in the step: every work in turn
        keys = []
        for w in works:
            n, p = w.tokens, w.padding
            if n == 1:  # a decode (or a 1-token chunk): reads its slab
                keys.append(w.start + w.pad_keys)
            elif n:  # causal from position 0 or after a prefix: only the pairs a serving kernel computes
                s = w.start
                stored += n
                attn.append(("prefill", s + n, n * s + n * (n + 1) // 2, 1))
            if p:  # a padding segment: computed, attends to itself only, reads no slab
                padding += p
                attn.append(("padding", 0, p * (p + 1) // 2, 1))
    d = len(keys)
    rows = len(attn) + d  # a row per prefill and padding call, one per decode
    if d:
        k = sum(keys) + d
        attn.append(("decode", k, k, d))
    return {"tokens": stored + padding + d, "kv_written": stored + d, "calls": len(attn), "rows": rows,
            "walk": max(keys) + 1 if d else 0, "attn": attn, "masked_pairs": 0, "gathers": 0, "gathered": 0}


class ModeledClock:
    """Modeled time of a step on a hardware preset: its parts priced as they run, then added (module docstring).
    It prices slab K/V; a paged run's pool hands it a PagedClock instead (for_layout)."""

    name = "modeled"

    def __init__(self, hardware: HardwarePreset | str = DEFAULT_HARDWARE):
        self.hardware = get_preset(hardware) if isinstance(hardware, str) else hardware

    def for_layout(self, block_size: int) -> PagedClock:
        """This clock for a run whose KV is paged in blocks of block_size positions (PagedPool.priced)."""
        return PagedClock(self.hardware, block_size)

    def terms(self, works: list[Work]) -> dict:
        """What a step moves and computes, split by part: a pure function of the works (no rates applied).

        Returns tokens (through the linear layers), kv_written (tokens whose K/V are stored), calls (attention
        calls), rows (sequences over all calls), attn: one (kind, keys read, query-key pairs, rows) per call, and
        under the paged layout of a tinyserve-* preset (PagedClock) gathers (calls whose K/V are copied out of the
        block pool first) and gathered (positions copied: whole blocks, as model/gpt.PagedKV.gather copies them).
        """
        mode = self.hardware.attention
        if mode == "exact":  # (an exact preset's paged kernel reads through the table in place: no gathers either)
            return _exact_terms(works)
        tokens = written = masked = 0
        attn: list[tuple[str, int, int]] = []
        decodes: list[tuple[int, int, int]] = []  # (row, slot, keys read), as model.gpt.build_step lists them
        for w in works:  # runs for every slot of every step of a dry run: keep it lean
            n, s, p = w.tokens, w.start, w.padding
            tokens += n + p  # padding and wasted decodes go through every matmul like useful tokens
            written += n  # padding is stored nowhere
            if n == 1:  # a decode (or a 1-token chunk): reads its slab
                decodes.append((len(decodes), w.slot, s + 1))
            elif n:
                # causal from position 0; after a prefix, serving kernels skip the masked half, tinyserve's explicit
                # mask computes the whole n x (s + n) block
                if s:
                    pairs = n * (s + n)
                    masked += pairs
                else:
                    pairs = cpu_causal_pairs(n) if mode == "tinyserve-cpu" else n * (n + 1) // 2
                attn.append(("prefill", s + n, pairs, 1))  # reads its prefix and its own new K/V from the slab
            if p:  # a padding segment: computed, attends to itself only, reads no slab
                attn.append(("padding", 0, cpu_causal_pairs(p) if mode == "tinyserve-cpu" else p * (p + 1) // 2, 1))
        # the groups forward_step really makes, each reading as its layout reads them (_read)
        cost = GROUP_CALL_COST_CUDA if mode == "tinyserve-cuda" else GROUP_CALL_COST
        gathers, gathered = self._read(group_decodes(sorted(decodes, key=lambda d: d[1]), cost), attn)
        walk = sum(k // r for kind, k, _, r in attn if kind == "decode")  # longest context
        return {"tokens": tokens, "kv_written": written, "calls": len(attn), "rows": sum(a[3] for a in attn),
                "walk": walk, "attn": attn, "masked_pairs": masked, "gathers": gathers, "gathered": gathered}

    @staticmethod
    def _read(groups: list[list[tuple[int, int, int]]], attn: list[tuple]) -> tuple[int, int]:
        """Append each decode group's call to attn as slabs read it; (gathers, positions gathered): none.

        Every slot in a group's range, decoding or not, is a row of its call, each reading the longest context."""
        for g in groups:
            rows = g[-1][1] + 1 - g[0][1]
            keys = rows * max(k for _, _, k in g)
            attn.append(("decode", keys, keys, rows))
        return 0, 0

    def cost(self, works: list[Work]) -> dict:
        """Bytes, flops and seconds of each part of one step; a pure function of the works."""
        hw = self.hardware
        t = self.terms(works)
        p = price(t, hw)  # pricing.price: the one formula
        attn_s = p.attn_s
        # the all-reduces (tensor parallel) wait on the link: neither compute nor memory, apart in allreduce_s
        compute_s = p.linear_s + sum(attn_s.values()) + p.write_s + p.copy_s - p.memory_s
        return {"flops": p.lin_flops + p.attn_flops, "bytes": p.lin_bytes + p.kv_read + hw.kv_bytes_per_token * (
                    t["kv_written"] + t["gathered"]),
                "tokens": t["tokens"], "calls": t["calls"], "linear_s": p.linear_s,
                "decode_attn_s": attn_s["decode"], "prefill_attn_s": attn_s["prefill"] + attn_s["padding"],
                "kv_write_s": p.write_s, "calls_s": p.calls_s, "gather_copy_s": p.copy_s, "allreduce_s": p.allreduce_s,
                "overhead_s": hw.overhead_s if works else 0.0,
                "compute_s": compute_s, "memory_s": p.memory_s,
                "bound": "compute" if compute_s > p.memory_s else "memory"}

    def step_time(self, works: list[Work], measured_s: float | None = None) -> float:
        """Modeled seconds of the step (measured_s is ignored). An empty step costs nothing."""
        if not works:
            return 0.0
        return total(price(self.terms(works), self.hardware), self.hardware)

    def decode_step_time(self, batch: int, context: int) -> float:
        """One decode step of `batch` sequences, each attending to `context` keys (curve for notebook 7.0)."""
        return self.step_time(decode_works([context] * batch))

    def prefill_time(self, tokens: int, start: int = 0) -> float:
        """One step that prefills `tokens` prompt tokens of one sequence from position `start`."""
        return self.step_time([Work(0, None, "prefill", start, tokens)])


class PagedClock(ModeledClock):
    """The modeled clock of a run whose K/V are paged in blocks of block_size positions (core/blocks.py): under a
    tinyserve-* preset its steps read as model/gpt.build_paged_step builds them (module docstring)."""

    def __init__(self, hardware: HardwarePreset | str, block_size: int):
        super().__init__(hardware)
        self.block_size = block_size

    def _read(self, groups: list[list[tuple[int, int, int]]], attn: list[tuple]) -> tuple[int, int]:
        """Append each decode group's call to attn as the block pool reads it; (gathers, positions gathered).

        Each prefill already in attn gathers its prefix and its own K/V through its table first; each decode group
        is a call with a row per decode, gathered to the group's longest context, all in whole blocks."""
        bs = self.block_size
        gathers = gathered = 0
        for kind, keys, _, _ in attn:  # the prefill and padding calls: only a prefill reads K/V
            if kind == "prefill":
                gathers += 1
                gathered += -(-keys // bs) * bs
        for g in groups:
            rows = len(g)
            keys = rows * -(-max(k for _, _, k in g) // bs) * bs
            gathered += keys
            attn.append(("decode", keys, keys, rows))
        return gathers + len(groups), gathered


def make_clock(kind: str = "modeled", hardware: str | HardwarePreset | None = None,
               gpus: int | None = None) -> WallClock | ModeledClock:
    """The clock the CLI's --clock/--hardware/--gpus name; hardware defaults to DEFAULT_HARDWARE; gpus (RunConfig.gpus):
    an instance of that many GPUs, tensor parallel (cost.tensor.tensor_parallel), None: the preset as it is."""
    if kind == "wall":
        if gpus is not None:
            raise TinyserveError(t("engine.knob.gpus_wall"))
        return WallClock()
    if kind == "modeled":
        clock = ModeledClock(hardware if hardware is not None else DEFAULT_HARDWARE)
        if gpus is not None:
            clock.hardware = tensor_parallel(clock.hardware, gpus)
        return clock
    raise TinyserveError(t("engine.knob.clock", clock=kind))
