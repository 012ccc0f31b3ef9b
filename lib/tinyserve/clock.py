"""Time for the engine's step loop: the wall clock, or a roofline model of real serving hardware.

The engine calls ``clock.step_time(works, measured_s)`` once per step. ``WallClock`` returns what the engine
measured on this machine. ``ModeledClock`` returns what the same step would take for a 70B-class model on a
datacenter GPU, from a roofline: a step streams the weights once and reads/writes KV (bytes), and does two
flops per parameter per token plus attention (flops); it lasts whichever of bytes/bandwidth and flops/peak
is longer, plus a fixed per-step overhead. Modeled time is a pure function of the works, so counts and times
are identical on every machine. ``calibrate`` fits the same three numbers to step times measured here.
"""
from __future__ import annotations

import json
import math
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import date
from itertools import combinations
from pathlib import Path
from typing import Protocol

import numpy as np

from .cache import kv_bytes_per_token as _kv_bytes_per_token
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


_NUMBERS = {"bandwidth_Bps": float, "peak_flops": float, "overhead_s": float, "weight_bytes": float,
            "nonembed_params": float, "n_layer": int, "attn_dim": int, "kv_bytes_per_token": float}


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
    if set(d) - allowed or {f for f in allowed if f != "details"} - set(d):
        raise TinyserveError(f"hardware: {path} fields must be {', '.join(sorted(allowed))} "
                             f"(unknown: {sorted(set(d) - allowed)}, missing: {sorted(allowed - set(d) - {'details'})})")
    for k, typ in _NUMBERS.items():
        v = d[k]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
        ok = ok and (v >= 0 if k == "overhead_s" else v > 0) and (typ is float or float(v).is_integer())
        if not ok:
            raise TinyserveError(f"hardware: {path}: {k} must be a finite number "
                                 f"{'>= 0' if k == 'overhead_s' else '> 0'}, got {v!r}")
        d[k] = typ(v)
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


class ModeledClock:
    """Roofline time of a step on a hardware preset: overhead + max(bytes / bandwidth, flops / peak)."""

    name = "modeled"

    def __init__(self, hardware: HardwarePreset | str = DEFAULT_HARDWARE):
        self.hardware = get_preset(hardware) if isinstance(hardware, str) else hardware

    def cost(self, works: list[Work]) -> dict:
        """Bytes, flops and both roofline times of one step; a pure function of the works."""
        hw = self.hardware
        tokens = keys = kv_read = kv_written = 0
        for w in works:
            n, s, p = w.tokens, w.start, w.padding
            tokens += n + p  # padding and wasted decodes go through every matmul like useful tokens
            keys += n * s + n * (n + 1) // 2 + p * (p + 1) // 2  # causal: token i of a chunk sees s+i+1 keys
            if n:  # the slab is read once per step (a decode's context, or a chunk's prefix + itself) ...
                kv_read += s + n
                kv_written += n  # ... and the new tokens' K/V written; padding is stored nowhere
        flops = 2.0 * hw.nonembed_params * tokens + 4.0 * hw.n_layer * hw.attn_dim * keys
        nbytes = (hw.weight_bytes if works else 0.0) + hw.kv_bytes_per_token * (kv_read + kv_written)
        memory_s, compute_s = nbytes / hw.bandwidth_Bps, flops / hw.peak_flops
        return {"flops": flops, "bytes": nbytes, "tokens": tokens, "compute_s": compute_s, "memory_s": memory_s,
                "bound": "compute" if compute_s > memory_s else "memory"}

    def step_time(self, works: list[Work], measured_s: float | None = None) -> float:
        """Modeled seconds of the step (measured_s is ignored). An empty step costs nothing."""
        if not works:
            return 0.0
        c = self.cost(works)
        return self.hardware.overhead_s + max(c["memory_s"], c["compute_s"])

    def decode_step_time(self, batch: int, context: int) -> float:
        """One decode step of `batch` sequences, each attending to `context` keys (curve for notebook 7.0)."""
        return self.step_time([Work(i, None, "decode", context - 1, 1) for i in range(batch)])

    def prefill_time(self, tokens: int, start: int = 0) -> float:
        """One step that prefills `tokens` prompt tokens of one sequence from position `start`."""
        return self.step_time([Work(0, None, "prefill", start, tokens)])


def make_clock(kind: str = "modeled", hardware: str | HardwarePreset | None = None) -> WallClock | ModeledClock:
    """The clock the CLI's --clock/--hardware name; hardware defaults to DEFAULT_HARDWARE."""
    if kind == "wall":
        return WallClock()
    if kind == "modeled":
        return ModeledClock(hardware if hardware is not None else DEFAULT_HARDWARE)
    raise TinyserveError(f"clock: unknown {kind!r} (choose modeled, wall)")


# ---------------------------------------------------------------------------------------------- calibration
FULL_PLAN = {"batches": (1, 4, 16, 32, 64), "contexts": (64, 256, 1024), "prefills": (64, 128, 256, 512, 1024, 2048),
             "repeats": 5}
QUICK_PLAN = {"batches": (1, 8), "contexts": (32, 128), "prefills": (32, 128), "repeats": 3}


def model_preset(model, name: str, description: str, sources: list[str]) -> HardwarePreset:
    """A preset with the shape of a TinyGPT and placeholder rates (1 B/s, 1 flop/s, no overhead)."""
    cfg = model.config
    elem = model.wte.weight.element_size()
    nonembed = sum(p.numel() for p in model.h.parameters()) + sum(p.numel() for p in model.ln_f.parameters())
    return HardwarePreset(
        name=name, description=description, bandwidth_Bps=1.0, peak_flops=1.0, overhead_s=0.0,
        weight_bytes=float((nonembed + model.wte.weight.numel()) * elem),  # blocks + the tied output head
        nonembed_params=float(nonembed), n_layer=cfg.n_layer, attn_dim=cfg.n_embd,
        kv_bytes_per_token=float(_kv_bytes_per_token(cfg.n_layer, cfg.n_embd, elem)),
        kv_dtype=str(model.dtype).removeprefix("torch."), sources=sources)


def _time_step(model, works: list[Work], repeats: int) -> float:
    """Median seconds of build_step + forward_step + greedy sampling for these works (one warm-up first)."""
    from .model import KVCache, build_step

    cfg = model.config
    max_len = max(w.start + w.tokens for w in works)
    kv = KVCache(cfg, len(works), max_len, model.dtype, model.device)
    segs = [(w.slot, w.start, [(7 * i + j) % 256 for j in range(w.tokens)]) for i, w in enumerate(works)]
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        logits = model.forward_step(build_step(segs, [True] * len(segs), model.device), kv)
        logits.argmax(-1).tolist()  # sampling; on CUDA this also waits for the step to finish
        if r:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _nnls(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients, by trying every subset of columns (there are 3)."""
    best, best_res = np.zeros(X.shape[1]), float(np.sum(y ** 2))
    for k in range(1, X.shape[1] + 1):
        for cols in combinations(range(X.shape[1]), k):
            c, *_ = np.linalg.lstsq(X[:, cols], y, rcond=None)
            if np.all(c >= 0):
                full = np.zeros(X.shape[1])
                full[list(cols)] = c
                res = float(np.sum((X @ full - y) ** 2))
                if res < best_res:
                    best, best_res = full, res
    return best


def fit_roofline(nbytes: np.ndarray, flops: np.ndarray, times: np.ndarray, memory_first: np.ndarray
                 ) -> tuple[float, float, float]:
    """Fit t = o + max(bytes*a, flops*b) in relative error; returns (overhead_s, bandwidth_Bps, peak_flops).

    The max() makes it non-linear, so alternate: fix each point's regime, solve the linear problem
    (non-negative, each row divided by its time so fast and slow steps count alike), re-classify, repeat.
    """
    mem = memory_first.copy()
    best, best_err = (0.0, 0.0, 0.0), math.inf
    for _ in range(50):
        X = np.column_stack([np.ones_like(times), np.where(mem, nbytes, 0.0), np.where(mem, 0.0, flops)])
        o, a, b = _nnls(X / times[:, None], np.ones_like(times))
        a, b = max(a, 1e-15), max(b, 1e-16)  # never infinitely fast: keeps rates finite and JSON-writable
        pred = o + np.maximum(nbytes * a, flops * b)
        err = float(np.sum(((pred - times) / times) ** 2))
        if err < best_err:
            best, best_err = (o, a, b), err
        new = nbytes * a >= flops * b
        if np.array_equal(new, mem):
            break
        mem = new
    o, a, b = best
    return float(o), float(1 / a), float(1 / b)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def calibrate(model, quick: bool = False, name: str = "cpu-tiny", plan: dict | None = None) -> HardwarePreset:
    """Time real ragged steps of `model` here and fit the roofline's overhead, bandwidth and flop rate.

    Decode steps at several batch sizes and contexts (bandwidth-ish) and single prefills of growing length
    (compute-ish); each point is the median of a few repeats. The returned preset records every point, its
    modeled time and the fit's relative errors in details.
    """
    import torch

    plan = plan or (QUICK_PLAN if quick else FULL_PLAN)
    n_pos = model.config.n_positions
    points: list[tuple[str, int, int, list[Work]]] = []
    for b in plan["batches"]:
        for c in plan["contexts"]:
            if c <= n_pos:
                points.append(("decode", b, c, [Work(i, None, "decode", c - 1, 1) for i in range(b)]))
    for n in plan["prefills"]:
        if n <= n_pos:
            points.append(("prefill", 1, n, [Work(0, None, "prefill", 0, n)]))
    dev = model.device
    where = _cpu_name() if dev.type == "cpu" else torch.cuda.get_device_name(dev)
    base = model_preset(model, name, f"the tiny GPT ({model.num_params():,} params, {str(model.dtype)[6:]}) "
                        f"measured on {where}", [f"calibrated on {where} with tinyserve calibrate, {date.today()}"])
    unit = ModeledClock(base)
    costs = [unit.cost(w) for _, _, _, w in points]
    measured = np.array([_time_step(model, w, plan["repeats"]) for _, _, _, w in points])
    nbytes = np.array([c["bytes"] for c in costs])
    flops = np.array([c["flops"] for c in costs])
    o, bw, pk = fit_roofline(nbytes, flops, measured, np.array([k == "decode" for k, *_ in points]))
    preset = HardwarePreset(**{**asdict(base), "overhead_s": o, "bandwidth_Bps": bw, "peak_flops": pk})
    clock = ModeledClock(preset)
    rows, rel = [], []
    for (kind, b, c, works), t, cst in zip(points, measured, costs):
        m = clock.step_time(works)
        rel.append(abs(m - t) / t)
        rows.append({"kind": kind, "batch": b, "context" if kind == "decode" else "tokens": c,
                     "measured_s": round(float(t), 7), "modeled_s": round(m, 7),
                     "bound": clock.cost(works)["bound"], "bytes": cst["bytes"], "flops": cst["flops"]})
    preset.details = {
        "device": where, "torch": torch.__version__, "threads": torch.get_num_threads(), "dtype": str(model.dtype),
        "repeats": plan["repeats"], "quick": quick,
        "fit": {"median_rel_err": round(float(np.median(rel)), 4), "max_rel_err": round(float(np.max(rel)), 4),
                "rms_rel_err": round(float(np.sqrt(np.mean(np.square(rel)))), 4)},
        "points": rows,
    }
    return preset


def run_calibration(quick: bool = False, out: str | Path | None = None, device: str = "cpu") -> HardwarePreset:
    """Calibrate the shipped checkpoint (float32) on this machine; write the preset JSON to `out` if given."""
    from .model import load_model

    model = load_model(device=device, dtype="float32")
    preset = calibrate(model, quick=quick, name="cpu-tiny" if model.device.type == "cpu" else f"{device}-tiny")
    if out is not None:
        save_preset(preset, out)
    return preset
