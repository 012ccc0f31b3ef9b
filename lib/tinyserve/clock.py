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

On a GPU the KV bandwidth is the weights' (both stream from HBM); on a CPU the tiny model's 3.3 MB of weights
stay in cache while KV comes from DRAM, so calibration.calibrate() fits the two rates apart. A CPU's last-level cache also
holds a small step's KV from one step to the next: a preset may state kv_cache_bytes, kv_cache_bandwidth_Bps
and kv_cache_ramp, and KV reads are then priced at the cache's rate while the step reads less than that, at the
memory's rate past ramp x that, in between a mix (kv_hit_fraction; on this 32 MiB-L3 CPU, 32 decodes of 64 keys
ran at ~0.2 us a key, of 256 keys at ~0.4). GPU presets state no such cache: a 70B step reads gigabytes.
The parts are added, not overlapped: a prefill chunk's compute no longer hides the decodes' KV reads (on a GPU
they are different kernels, run one after the other). ``attention`` says how the attention calls are made:

  "paged"          a serving engine (vLLM, SGLang, TGI): one batched call for every decode, each reading exactly its
                   own keys; a chunk attends causally to its prefix. A static batch is a rectangle, as in real
                   servers: its decodes attend over the padded length (Work.pad_keys), finished members included,
                   whose context keeps growing with the batch's.
  "tinyserve-cpu"  this repository's TinyGPT.forward_step, as it really runs: decodes in groups of neighbouring
  "tinyserve-cuda" slots (model.group_decodes), each group one call reading every slot up to its longest context;
                   a chunk after a prefix uses an explicit mask, computing the full chunk x (prefix + chunk) block;
                   each prefill and padding segment is its own call. On a CPU a causal segment computes whole
                   blocks of 512 keys (cpu_causal_pairs): up to 512 tokens, the full square. The tiny engine does
                   NOT pad its decodes: a static batch's decodes read their own context (rounded up to their
                   group's), and a finished member re-runs its last position. So under a tinyserve-* preset
                   (cpu-tiny) a static batch is priced as the tiny engine computes it, and under a paged preset
                   as a real server computes it.

A padded prompt is computed (and priced) as the prompt plus a separate padding segment attending to itself:
(n(n+1) + p(p+1))/2 query-key pairs, where a left-padded rectangle computes (n+p)(n+p+1)/2, n x p pairs more
(2.5% of the 50-token + 3,950-padding prefill of chapter-7.1-padding).

Modeled time is a pure function of the works, so counts and times are identical on every machine.
``calibration.calibrate`` fits the rates and overheads to step times measured here; ``tinyserve.validation``
checks the fitted model against the real engine's measured steps on the chapter workloads.
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from .errors import TinyserveError
from .requests import Work

PRESET_DIR = Path(__file__).parent / "presets"
DEFAULT_HARDWARE = "h200-70b-fp8"


@dataclass
class HardwarePreset:
    """A model on a machine, reduced to what a roofline needs. Rates are effective (achievable), not peak."""

    name: str
    description: str
    bandwidth_Bps: float  # effective memory bandwidth, bytes/s
    peak_flops: float  # effective dense flop/s at the weights' precision
    overhead_s: float  # fixed cost of every step: launches, scheduling, sampling, all-reduce latency
    weight_bytes: float  # weight bytes streamed once per step
    nonembed_params: float  # parameters every token is multiplied through (2 flops each)
    n_layer: int
    attn_dim: int  # query heads x head_dim: QK^T and AV cost 4 x attn_dim flops per key, per layer
    kv_bytes_per_token: float  # K and V of one token over all layers (GQA: only the KV heads)
    sources: list[str]
    details: dict = field(default_factory=dict)  # published numbers, efficiency fractions, calibration data
    kv_dtype: str = "float32"  # the KV cache's element type (kv_bytes_per_token counts its bytes)
    kv_memory_bytes: float | None = None  # memory left for KV after the weights; None: not stated, no cap
    max_model_len: int | None = None  # positions the server admits per sequence: every slot's slab; None: the model's
    attn_flops: float = 0.0  # effective flop/s of attention (QK^T, AV); 0 = peak_flops
    call_overhead_s: float = 0.0  # fixed cost of one attention call (a decode group, a prefill segment)
    row_overhead_s: float = 0.0  # fixed cost of each sequence (row) an attention call handles
    walk_overhead_s: float = 0.0  # cost per key position a decode call walks (its longest context), rows aside
    kv_bandwidth_Bps: float = 0.0  # effective rate of KV reads and writes; 0 = bandwidth_Bps (both stream from HBM)
    kv_cache_bytes: float = 0.0  # KV a step can re-read from cache (kv_hit_fraction); 0 = every read from memory
    kv_cache_bandwidth_Bps: float = 0.0  # rate of KV reads that hit that cache
    kv_cache_ramp: float = 2.0  # past kv_cache_ramp x kv_cache_bytes of KV in a step, no read hits the cache
    miss_row_overhead_s: float = 0.0  # more per row of an attention call when the step's KV misses the cache
    big_step_tokens: float = 0.0  # a step with more tokens than this pays big_step_token_s per extra token; 0 = none
    big_step_token_s: float = 0.0
    # more per query-key pair of an attention call given an explicit mask (tinyserve's chunk after a prefix: the
    # n x (start + n) mask is read and added for every pair; a causal call from position 0 has none); 0 = none
    masked_pair_s: float = 0.0
    attention: str = "paged"  # how attention calls are made: see ATTENTION


_NUMBERS = {"bandwidth_Bps": float, "peak_flops": float, "overhead_s": float, "weight_bytes": float,
            "nonembed_params": float, "n_layer": int, "attn_dim": int, "kv_bytes_per_token": float,
            "attn_flops": float, "call_overhead_s": float, "row_overhead_s": float, "kv_bandwidth_Bps": float,
            "walk_overhead_s": float, "kv_cache_bytes": float, "kv_cache_bandwidth_Bps": float, "kv_cache_ramp": float,
            "miss_row_overhead_s": float, "big_step_tokens": float, "big_step_token_s": float, "masked_pair_s": float}
_MAY_BE_ZERO = {"overhead_s", "attn_flops", "call_overhead_s", "row_overhead_s", "kv_bandwidth_Bps",
                "walk_overhead_s", "kv_cache_bytes", "kv_cache_bandwidth_Bps", "miss_row_overhead_s",
                "big_step_tokens", "big_step_token_s", "masked_pair_s"}
ATTENTION = ("paged", "tinyserve-cpu", "tinyserve-cuda")  # see the module docstring


def _finite(v: float) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond float range
        return False


def load_preset(path: str | Path) -> HardwarePreset:
    """Read a preset JSON file, checking every field (a user may pass their own calibration file)."""
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TinyserveError(f"hardware: cannot read {path} ({e})") from None
    if not isinstance(d, dict):
        raise TinyserveError(f"hardware: {path} must hold a JSON object")
    allowed = {f for f in HardwarePreset.__dataclass_fields__}
    optional = {f for f, fd in HardwarePreset.__dataclass_fields__.items() if fd.default is not MISSING
                or fd.default_factory is not MISSING}
    if set(d) - allowed or allowed - optional - set(d):
        raise TinyserveError(f"hardware: {path} fields must be {', '.join(sorted(allowed))} "
                             f"(unknown: {sorted(set(d) - allowed)}, missing: {sorted(allowed - optional - set(d))})")
    for k, typ in _NUMBERS.items():
        if k not in d:
            continue
        v = d[k]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
        ok = ok and (v >= 0 if k in _MAY_BE_ZERO else v > 0) and (typ is float or float(v).is_integer())
        if not ok:
            raise TinyserveError(f"hardware: {path}: {k} must be a finite number "
                                 f"{'>= 0' if k in _MAY_BE_ZERO else '> 0'}, got {v!r}")
        d[k] = typ(v)
    if d.get("attention", "paged") not in ATTENTION:
        raise TinyserveError(f"hardware: {path}: attention must be one of {', '.join(ATTENTION)}, got {d['attention']!r}")
    if d.get("kv_cache_bytes", 0) > 0 and not d.get("kv_cache_bandwidth_Bps", 0) > 0:
        raise TinyserveError(f"hardware: {path}: kv_cache_bytes > 0 needs kv_cache_bandwidth_Bps > 0")
    if d.get("kv_cache_ramp", 2.0) <= 1:
        raise TinyserveError(f"hardware: {path}: kv_cache_ramp must be > 1, got {d['kv_cache_ramp']!r}")
    mml = d.get("max_model_len")
    if mml is not None and (isinstance(mml, bool) or not isinstance(mml, int) or mml < 1):
        raise TinyserveError(f"hardware: {path}: max_model_len must be an integer >= 1 or null, got {mml!r}")
    mem = d.get("kv_memory_bytes")
    if mem is not None and not (isinstance(mem, (int, float)) and not isinstance(mem, bool) and _finite(mem) and mem > 0):
        raise TinyserveError(f"hardware: {path}: kv_memory_bytes must be a finite number > 0 or null, got {mem!r}")
    if not isinstance(d.get("kv_dtype", ""), str):
        raise TinyserveError(f"hardware: {path}: kv_dtype must be a string, got {d['kv_dtype']!r}")
    if not (isinstance(d["name"], str) and isinstance(d["description"], str)
            and isinstance(d["sources"], list) and all(isinstance(s, str) for s in d["sources"])
            and isinstance(d.get("details", {}), dict)):
        raise TinyserveError(f"hardware: {path}: name/description must be strings, sources a list of strings")
    return HardwarePreset(**d)


def save_preset(preset: HardwarePreset, path: str | Path) -> None:
    """Write a preset as JSON (the format load_preset and get_preset read)."""
    Path(path).write_text(json.dumps(asdict(preset), indent=2) + "\n", encoding="utf-8")


def list_presets() -> list[str]:
    """Names of the shipped presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def get_preset(name: str) -> HardwarePreset:
    """A shipped preset by name, or a FILE.json (e.g. written by `tinyserve calibrate --out`)."""
    names = list_presets()
    if name in names:
        return load_preset(PRESET_DIR / f"{name}.json")
    if isinstance(name, str) and name.endswith(".json") and Path(name).is_file():
        return load_preset(name)
    raise TinyserveError(f"hardware: unknown {name!r} (choose {', '.join(names)}, or a FILE.json from tinyserve calibrate)")


class Clock(Protocol):
    name: str

    def step_time(self, works: list[Work], measured_s: float | None) -> float: ...


class WallClock:
    """The time the engine measured (perf_counter around the step, CUDA synchronised)."""

    name = "wall"
    hardware = None

    def step_time(self, works: list[Work], measured_s: float | None) -> float:
        """Return measured_s; the engine must measure when this clock is used."""
        if measured_s is None:
            raise ValueError("WallClock.step_time needs measured_s")
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


class ModeledClock:
    """Modeled time of a step on a hardware preset: its parts priced as they run, then added (module docstring)."""

    name = "modeled"

    def __init__(self, hardware: HardwarePreset | str = DEFAULT_HARDWARE):
        self.hardware = get_preset(hardware) if isinstance(hardware, str) else hardware

    def terms(self, works: list[Work]) -> dict:
        """What a step moves and computes, split by part: a pure function of the works (no rates applied).

        Returns tokens (through the linear layers), kv_written (tokens whose K/V are stored), calls (attention
        calls), rows (sequences over all calls) and attn: one (kind, keys read, query-key pairs, rows) per call.
        """
        mode = self.hardware.attention
        paged = mode == "paged"
        tokens = written = masked = 0
        attn: list[tuple[str, int, int]] = []
        decodes: list[tuple[int, int, int]] = []  # (row, slot, keys read), as model.build_step lists them
        dec_n = dec_keys = dec_max = 0  # paged: one call, so only the count, total and longest keys matter
        for w in works:  # runs for every slot of every step of a dry run: keep it lean
            n, s, p = w.tokens, w.start, w.padding
            tokens += n + p  # padding and wasted decodes go through every matmul like useful tokens
            written += n  # padding is stored nowhere
            if n == 1:  # a decode (or a 1-token chunk): reads its slab
                if paged:
                    k = s + 1 + w.pad_keys  # the rectangle: see the docstring
                    dec_n += 1
                    dec_keys += k
                    if k > dec_max:
                        dec_max = k
                else:
                    decodes.append((len(decodes), w.slot, s + 1))
            elif n:
                # causal from position 0; after a prefix, paged kernels skip the masked half, tinyserve's explicit
                # mask computes the whole n x (s + n) block
                if paged:
                    pairs = n * s + n * (n + 1) // 2
                elif s:
                    pairs = n * (s + n)
                    masked += pairs
                else:
                    pairs = cpu_causal_pairs(n) if mode == "tinyserve-cpu" else n * (n + 1) // 2
                attn.append(("prefill", s + n, pairs, 1))  # reads its prefix and its own new K/V from the slab
            if p:  # a padding segment: computed, attends to itself only, reads no slab
                attn.append(("padding", 0, cpu_causal_pairs(p) if mode == "tinyserve-cpu" else p * (p + 1) // 2, 1))
        if paged:  # one batched call, each decode reading exactly its keys
            if dec_n:
                attn.append(("decode", dec_keys, dec_keys, dec_n))
        else:  # the groups forward_step really makes, each reading (slots in range) x (longest context)
            from .model import GROUP_CALL_COST, GROUP_CALL_COST_CUDA, group_decodes

            cost = GROUP_CALL_COST_CUDA if mode == "tinyserve-cuda" else GROUP_CALL_COST
            for g in group_decodes(sorted(decodes, key=lambda d: d[1]), cost):
                rows = g[-1][1] + 1 - g[0][1]  # every slot in the range, decoding or not, is a row of the call
                keys = rows * max(k for _, _, k in g)
                attn.append(("decode", keys, keys, rows))
        walk = dec_max if paged else sum(k // r for kind, k, _, r in attn if kind == "decode")  # longest context
        return {"tokens": tokens, "kv_written": written, "calls": len(attn), "rows": sum(a[3] for a in attn),
                "walk": walk, "attn": attn, "masked_pairs": masked}

    def _price(self, works: list[Work]) -> tuple:
        """The step's terms and the seconds of its parts: the one formula cost() and step_time() both read."""
        hw = self.hardware
        t = self.terms(works)
        attn_rate = hw.attn_flops or hw.peak_flops
        kv_bw = hw.kv_bandwidth_Bps or hw.bandwidth_Bps
        hit = (kv_hit_fraction(hw.kv_bytes_per_token * sum(a[1] for a in t["attn"]), hw.kv_cache_bytes, hw.kv_cache_ramp)
               if hw.kv_cache_bytes else 0.0)  # every step of a dry run: GPU presets state no cache
        s_per_kv_byte = hit / hw.kv_cache_bandwidth_Bps + (1 - hit) / kv_bw if hit else 1 / kv_bw
        flops_per_pair = 4.0 * hw.n_layer * hw.attn_dim  # QK^T and AV, 2 flops per multiply-add, every layer
        lin_bytes = hw.weight_bytes if works else 0.0
        lin_flops = 2.0 * hw.nonembed_params * t["tokens"]
        linear_s = max(lin_bytes / hw.bandwidth_Bps, lin_flops / hw.peak_flops)
        if hw.big_step_tokens and t["tokens"] > hw.big_step_tokens:  # see model_preset
            linear_s += (t["tokens"] - hw.big_step_tokens) * hw.big_step_token_s
        attn_s = {"decode": 0.0, "prefill": 0.0, "padding": 0.0}
        memory_s = lin_bytes / hw.bandwidth_Bps if lin_bytes / hw.bandwidth_Bps >= lin_flops / hw.peak_flops else 0.0
        kv_read = attn_flops = 0.0
        for kind, keys, pairs, _ in t["attn"]:
            b, f = hw.kv_bytes_per_token * keys, flops_per_pair * pairs
            kv_read, attn_flops = kv_read + b, attn_flops + f
            compute = f / attn_rate
            part = max(b * s_per_kv_byte, compute)
            attn_s[kind] += part
            memory_s += part if b * s_per_kv_byte >= compute else 0.0
        if hw.masked_pair_s and t["masked_pairs"]:
            attn_s["prefill"] += hw.masked_pair_s * t["masked_pairs"]
        write_s = hw.kv_bytes_per_token * t["kv_written"] / kv_bw
        memory_s += write_s
        calls_s = hw.call_overhead_s * t["calls"] + hw.row_overhead_s * t["rows"] + hw.walk_overhead_s * t["walk"]
        calls_s += (1 - hit) * hw.miss_row_overhead_s * t["rows"] if hw.kv_cache_bytes else 0.0
        return t, linear_s, attn_s, write_s, calls_s, memory_s, kv_read, attn_flops, lin_bytes, lin_flops

    def cost(self, works: list[Work]) -> dict:
        """Bytes, flops and seconds of each part of one step; a pure function of the works."""
        hw = self.hardware
        t, linear_s, attn_s, write_s, calls_s, memory_s, kv_read, attn_flops, lin_bytes, lin_flops = self._price(works)
        total = linear_s + sum(attn_s.values()) + write_s
        compute_s = total - memory_s
        return {"flops": lin_flops + attn_flops, "bytes": lin_bytes + kv_read + hw.kv_bytes_per_token * t["kv_written"],
                "tokens": t["tokens"], "calls": t["calls"], "linear_s": linear_s,
                "decode_attn_s": attn_s["decode"], "prefill_attn_s": attn_s["prefill"] + attn_s["padding"],
                "kv_write_s": write_s, "calls_s": calls_s, "overhead_s": hw.overhead_s if works else 0.0,
                "compute_s": compute_s, "memory_s": memory_s,
                "bound": "compute" if compute_s > memory_s else "memory"}

    def step_time(self, works: list[Work], measured_s: float | None = None) -> float:
        """Modeled seconds of the step (measured_s is ignored). An empty step costs nothing."""
        if not works:
            return 0.0
        _, linear_s, attn_s, write_s, calls_s, *_ = self._price(works)  # the parts cost() reports, without its dict
        return (self.hardware.overhead_s + calls_s + linear_s + attn_s["decode"] + (attn_s["prefill"] + attn_s["padding"])
                + write_s)

    def decode_step_time(self, batch: int, context: int) -> float:
        """One decode step of `batch` sequences, each attending to `context` keys (curve for notebook 7.0)."""
        return self.step_time([Work(i, None, "decode", context - 1, 1) for i in range(batch)])

    def prefill_time(self, tokens: int, start: int = 0) -> float:
        """One step that prefills `tokens` prompt tokens of one sequence from position `start`."""
        return self.step_time([Work(0, None, "prefill", start, tokens)])


def kv_hit_fraction(read_bytes: float, cache_bytes: float, ramp: float = 2.0) -> float:
    """Share of a step's KV reads served from cache: all while they fit, none past ramp x the cache.

    The engine reads the same slabs every step (one key longer), so on a CPU whose last-level cache holds them,
    the next step re-reads them from cache; once a step reads more than fits, a sweep evicts what the next one
    needs first, and the share falls off (linearly here, between cache_bytes and ramp x cache_bytes: on
    the 32 MiB-L3 box of cpu-tiny, 32 decodes of 64 keys (8 MiB of KV) ran at 0.2 us a key, of 256 keys at ~0.4).
    """
    if cache_bytes <= 0 or read_bytes >= ramp * cache_bytes:
        return 0.0
    if read_bytes <= cache_bytes:
        return 1.0
    return (ramp * cache_bytes - read_bytes) / ((ramp - 1) * cache_bytes)


def make_clock(kind: str = "modeled", hardware: str | HardwarePreset | None = None) -> WallClock | ModeledClock:
    """The clock the CLI's --clock/--hardware name; hardware defaults to DEFAULT_HARDWARE."""
    if kind == "wall":
        return WallClock()
    if kind == "modeled":
        return ModeledClock(hardware if hardware is not None else DEFAULT_HARDWARE)
    raise TinyserveError(f"clock: unknown {kind!r} (choose modeled, wall)")
