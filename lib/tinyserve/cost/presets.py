"""Hardware presets: a model on a machine, reduced to what the cost model needs, read from JSON and checked.

The shipped presets (lib/tinyserve/presets/*.json) cite their sources; `tinyserve calibrate --out` writes one.
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path

from ..errors import TinyserveError
from ..lang import english, t

PRESET_DIR = Path(__file__).parents[1] / "presets"
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
    # the paged KV layout under a tinyserve-* preset: before attending, the tiny engine copies each call's keys and
    # values out of the block pool through the block tables into a reused buffer the caches hold, a few sequences at
    # a time (model/gpt.PagedKV.gather, every layer), a cost the slabs do not have: gather_call_s per call that
    # gathers, and the gathered bytes at gather_Bps; 0 = none (exact presets: a paged kernel reads through the table
    # in place, cost/clock.py)
    gather_call_s: float = 0.0
    gather_Bps: float = 0.0
    attention: str = "exact"  # how attention calls are made: see ATTENTION
    num_gpus: int = 1  # GPUs one instance of this model uses (tensor parallel): a deployment's goodput is per GPU
    # tensor parallelism inside one instance (RunConfig.gpus, cost/tensor.py): how far the model may be split
    gpus_per_node: int = 1  # GPUs of one node, the most an instance may split the model over
    tp_link: str | None = None  # the link between them (a name in presets/links/); None: this preset is not split
    n_kv_heads: int = 0  # the model's KV heads: at most one GPU per head (0: not stated)
    d_model: int = 0  # the model's hidden size: each all-reduce moves tokens x d_model activations (0: not stated)
    # the fixed time of one all-reduce of a decode-sized message over tp_link, whatever the GPU count (a measured
    # collective, cited in the preset's sources; cost/tensor.py); required with a tp_link (0: not stated)
    allreduce_latency_s: float = 0.0
    resident_weight_bytes: float = 0.0  # weights held in GPU memory (the input embedding too); 0 = weight_bytes
    # an instance split over num_gpus GPUs (cost/tensor.py writes them): its all-reduces' seconds per token through
    # the linear layers and per step (their latency); 0 = none (one GPU, or a file whose rates fold them in)
    allreduce_token_s: float = 0.0
    allreduce_step_s: float = 0.0

    def text(self, what: str = "description") -> str | list[str]:
        """A text of this preset in the learner's language: "description", "sources" (a list) or "details.KEY".

        The translation (tinyserve.lang, key engine.preset.NAME.WHAT) is used only while its English is still
        this preset's own text; an edited or user-made preset speaks its own words."""
        if what == "sources":
            return [self._says(f"sources.{i}", s) for i, s in enumerate(self.sources)]
        own = self.details[what.removeprefix("details.")] if what.startswith("details.") else getattr(self, what)
        return self._says(what, own)

    def _says(self, what: str, own: str) -> str:
        key = f"engine.preset.{self.name}.{what}"
        return t(key) if english(key) == own else own


_NUMBERS = {"bandwidth_Bps": float, "peak_flops": float, "overhead_s": float, "weight_bytes": float,
            "nonembed_params": float, "n_layer": int, "attn_dim": int, "kv_bytes_per_token": float,
            "attn_flops": float, "call_overhead_s": float, "row_overhead_s": float, "kv_bandwidth_Bps": float,
            "walk_overhead_s": float, "kv_cache_bytes": float, "kv_cache_bandwidth_Bps": float, "kv_cache_ramp": float,
            "miss_row_overhead_s": float, "big_step_tokens": float, "big_step_token_s": float, "masked_pair_s": float,
            "gather_call_s": float, "gather_Bps": float, "num_gpus": int, "gpus_per_node": int, "n_kv_heads": int,
            "d_model": int, "resident_weight_bytes": float, "allreduce_latency_s": float, "allreduce_token_s": float,
            "allreduce_step_s": float}
_MAY_BE_ZERO = {"overhead_s", "attn_flops", "call_overhead_s", "row_overhead_s", "kv_bandwidth_Bps",
                "walk_overhead_s", "kv_cache_bytes", "kv_cache_bandwidth_Bps", "miss_row_overhead_s",
                "big_step_tokens", "big_step_token_s", "masked_pair_s", "gather_call_s", "gather_Bps", "n_kv_heads",
                "d_model", "resident_weight_bytes", "allreduce_latency_s", "allreduce_token_s", "allreduce_step_s"}
ATTENTION = ("exact", "tinyserve-cpu", "tinyserve-cuda")  # see cost/clock.py's docstring
OLD_ATTENTION = {"paged": "exact"}  # the name before "paged" came to mean the KV layout (core/blocks.py)


def _finite(v: float) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond float range
        return False


def read_fields(path: Path, cls, what: str, field_order: list[str]) -> dict:
    """A preset file's JSON object with exactly cls's fields (those with defaults optional); what: the messages'
    key ("engine.hardware", "engine.link"); field_order: the fields as the message lists them."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TinyserveError(t(f"{what}.cannot_read", path=path, error=e)) from None
    if not isinstance(d, dict):
        raise TinyserveError(t(f"{what}.not_object", path=path))
    fields = cls.__dataclass_fields__
    optional = {f for f, fd in fields.items() if fd.default is not MISSING or fd.default_factory is not MISSING}
    unknown, missing = sorted(set(d) - set(fields)), sorted(set(fields) - optional - set(d))
    if unknown or missing:
        raise TinyserveError(t(f"{what}.fields", path=path, fields=", ".join(field_order), unknown=unknown,
                               missing=missing))
    return d


def check_texts(d: dict, path: Path, what: str) -> None:
    """name and description strings, sources a list of strings, details (optional) an object."""
    if not (isinstance(d["name"], str) and isinstance(d["description"], str)
            and isinstance(d["sources"], list) and all(isinstance(s, str) for s in d["sources"])
            and isinstance(d.get("details", {}), dict)):
        raise TinyserveError(t(f"{what}.texts", path=path))


def load_preset(path: str | Path) -> HardwarePreset:
    """Read a preset JSON file, checking every field (a user may pass their own calibration file)."""
    path = Path(path)
    d = read_fields(path, HardwarePreset, "engine.hardware", sorted(HardwarePreset.__dataclass_fields__))
    for k, typ in _NUMBERS.items():
        if k not in d:
            continue
        v = d[k]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
        ok = ok and (v >= 0 if k in _MAY_BE_ZERO else v > 0) and (typ is float or float(v).is_integer())
        if not ok:
            raise TinyserveError(t("engine.hardware.number", path=path, field=k,
                                   op=">= 0" if k in _MAY_BE_ZERO else "> 0", value=v))
        d[k] = typ(v)
    d["attention"] = OLD_ATTENTION.get(d.get("attention", "exact"), d.get("attention", "exact"))  # old files load
    if d["attention"] not in ATTENTION:
        raise TinyserveError(t("engine.hardware.attention", path=path, choices=", ".join(ATTENTION), value=d["attention"]))
    if d.get("kv_cache_bytes", 0) > 0 and not d.get("kv_cache_bandwidth_Bps", 0) > 0:
        raise TinyserveError(t("engine.hardware.kv_cache", path=path))
    if d.get("kv_cache_ramp", 2.0) <= 1:
        raise TinyserveError(t("engine.hardware.ramp", path=path, value=d["kv_cache_ramp"]))
    mml = d.get("max_model_len")
    if mml is not None and (isinstance(mml, bool) or not isinstance(mml, int) or mml < 1):
        raise TinyserveError(t("engine.hardware.max_model_len", path=path, value=mml))
    mem = d.get("kv_memory_bytes")
    if mem is not None and not (isinstance(mem, (int, float)) and not isinstance(mem, bool) and _finite(mem) and mem > 0):
        raise TinyserveError(t("engine.hardware.kv_memory", path=path, value=mem))
    if not isinstance(d.get("kv_dtype", ""), str):
        raise TinyserveError(t("engine.hardware.kv_dtype", path=path, value=d["kv_dtype"]))
    check_tensor_fields(d, path)
    check_texts(d, path, "engine.hardware")
    return HardwarePreset(**d)


def check_tensor_fields(d: dict, path: Path) -> None:
    """tp_link null or a shipped link's name, stated with the model's shape it splits and the measured latency of one
    all-reduce over it; all-reduce terms only for an instance of several GPUs (price() reads them only then)."""
    link = d.get("tp_link")
    if link is not None:
        links = list_presets(PRESET_DIR / "links")
        if not isinstance(link, str) or link not in links:
            raise TinyserveError(t("engine.hardware.tp_link", path=path, choices=", ".join(links), value=link))
        if not (d.get("n_kv_heads", 0) and d.get("d_model", 0) and d.get("allreduce_latency_s", 0)):
            raise TinyserveError(t("engine.hardware.tp_shape", path=path))
    if (d.get("allreduce_token_s", 0) or d.get("allreduce_step_s", 0)) and d.get("num_gpus", 1) == 1:
        raise TinyserveError(t("engine.hardware.allreduce", path=path))


def save_preset(preset: HardwarePreset, path: str | Path) -> None:
    """Write a preset as JSON (the format load_preset and get_preset read)."""
    Path(path).write_text(json.dumps(asdict(preset), indent=2) + "\n", encoding="utf-8")


def list_presets(folder: Path = PRESET_DIR) -> list[str]:
    """Names of the shipped presets (of hardware; links: cost/links.py)."""
    return sorted(p.stem for p in folder.glob("*.json"))


def find_preset(name: str, folder: Path, load, unknown_key: str):
    """A shipped preset of `folder` by name, or a FILE.json, read by load(path); else the error unknown_key."""
    names = list_presets(folder)
    if name in names:
        return load(folder / f"{name}.json")
    if isinstance(name, str) and name.endswith(".json") and Path(name).is_file():
        return load(name)
    raise TinyserveError(t(unknown_key, name=name, choices=", ".join(names)))


def get_preset(name: str) -> HardwarePreset:
    """A shipped preset by name, or a FILE.json (e.g. written by `tinyserve calibrate --out`)."""
    return find_preset(name, PRESET_DIR, load_preset, "engine.preset.unknown")
