"""Fitting the modeled clock to a real machine: time the tiny GPT's real steps here, fit the cost model's rates.

``calibrate`` runs the step shapes the policies make (uniform and ragged decodes, prefills, chunks after a prefix,
decodes beside a chunk, padded prefills) on the model, times each the way the engine runs them (warm, back to
back, in a fresh KV cache, over several rounds) and fits the rates and overheads of clock.ModeledClock's cost
(``fit_cost``), giving a HardwarePreset such as the shipped cpu-tiny. ``tinyserve calibrate`` is the CLI;
``tinyserve.tools.validate`` checks a fitted preset against the real engine on the chapter workloads.
"""
from __future__ import annotations

import math
import platform
import time
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.kv import kv_bytes_per_token as _kv_bytes_per_token
from ..cost.clock import ModeledClock
from ..cost.presets import HardwarePreset, save_preset
from ..cost.pricing import FIT, RATES, fit_row, price, sides, step_hit, total, with_fit
from ..core.request import Work, decode_works


def _points(plan: dict, n_pos: int) -> list[tuple[str, list[Work]]]:
    """(label, works) of every calibration step: the shapes the engine's policies make, each slot once."""
    pts: list[tuple[str, list[Work]]] = []
    for b in plan.get("batches", ()):  # (a plan without points, e.g. no paged part, gives none)
        for c in plan.get("contexts", ()):
            pts.append((f"decode B={b} ctx={c}", decode_works([c] * b)))
    for b, c in plan.get("few", ()):  # a few decodes at long contexts: the quiet end of a long-tailed workload
        pts.append((f"decode B={b} ctx={c}", decode_works([c] * b)))
    for n in plan.get("prefills", ()):
        pts.append((f"prefill {n}", [Work(0, None, "prefill", 0, n)]))
    for n, start in plan.get("chunks", ()):  # a chunk after a prefix already in the slab
        pts.append((f"chunk {n} after {start}", [Work(0, None, "prefill", start, n)]))
    for short, ctx, long in plan.get("ragged", ()):  # short sequences next to a long one (decode groups split)
        pts.append((f"decode {short}x{ctx} + 1x{long}", decode_works([ctx] * short + [long])))
    for long, short, ctx in plan.get("finished", ()):  # a static batch after its fastest finishers: the long one
        pts.append((f"decode 1x{long} + {short}x{ctx}", decode_works([long] + [ctx] * short)))  # first, the rest behind it
    for b, lo, hi in plan.get("spread", ()):  # contexts spread lo..hi, shuffled over the slots: a static batch of
        ctxs = [round(lo * (hi / lo) ** (((i * 13) % b) / (b - 1))) for i in range(b)]  # varied requests, many groups
        pts.append((f"decode {b} spread {lo}-{hi}", decode_works(ctxs)))
    for b, ctx, n, start in plan.get("mixed", ()):  # decodes beside a prefill chunk (chunked, prefill-first)
        pts.append((f"decode {b}x{ctx} + chunk {n} after {start}",
                    decode_works([ctx] * b) + [Work(b, None, "prefill", start, n)]))
    for b, n, pad in plan.get("padded", ()):  # a static batch's prefill: b prompts of n tokens, each padded by pad
        pts.append((f"prefill {b}x{n} + padding {pad}", [Work(i, None, "prefill", 0, n, padding=pad) for i in range(b)]))
    return [(lbl, w) for lbl, w in pts if max(x.start + x.tokens + x.padding for x in w) <= n_pos]


FULL_PLAN = {"batches": (1, 4, 16, 32, 64), "contexts": (64, 128, 256, 512, 1024, 2048),
             "prefills": (16, 64, 256, 1024, 2048, 4000),
             "chunks": ((64, 1024), (256, 512), (512, 2048), (512, 3500)),
             "few": ((1, 512), (1, 3000), (1, 4000), (2, 1024), (2, 3000)),
             "ragged": ((31, 48, 2048), (30, 300, 4000), (8, 64, 1024), (1, 64, 4000), (2, 100, 2500)),
             "finished": ((150, 31, 30), (283, 31, 36), (600, 31, 40), (1000, 15, 50), (2000, 7, 64)),
             "spread": ((32, 20, 2400), (32, 30, 600), (16, 64, 3000)),
             "mixed": ((30, 300, 512, 2048), (16, 500, 200, 0), (4, 100, 512, 512)),
             "padded": ((30, 32, 0), (8, 20, 12), (1, 50, 3950), (16, 30, 470), (8, 32, 1968), (12, 32, 1968),
                        (16, 32, 1968)),
             # the paged KV layout (blocks of 16, the default): the shapes continuous and chunked batching make,
             # timed with block tables, so the fit sees what gathering K/V through them costs
             "paged": {"block_size": 16, "batches": (1, 4, 16, 32, 64), "contexts": (64, 256, 1024, 2048),
                       "few": ((1, 3000), (2, 1024)), "prefills": (64, 512, 2048), "chunks": ((256, 512), (512, 2048)),
                       "ragged": ((31, 48, 2048), (8, 64, 1024)), "spread": ((32, 20, 2400), (32, 30, 600)),
                       "mixed": ((30, 300, 512, 2048), (16, 500, 200, 0))},
             "repeats": 3, "rounds": 6}
QUICK_PLAN = {"batches": (1, 8), "contexts": (32, 128), "prefills": (32, 128), "chunks": ((32, 64),),
              "ragged": ((4, 16, 128),), "mixed": ((4, 32, 32, 32),), "padded": ((4, 8, 8),),
              "paged": {"block_size": 16, "batches": (1, 8), "contexts": (32, 128), "chunks": ((32, 64),)},
              "repeats": 3, "rounds": 2}


class SlabPoint:
    """A calibration point's K/V as the slab layout holds them: how it is run and priced."""

    knobs: dict = {}  # the layout's own knobs, recorded with the point: none

    def clock(self, preset: HardwarePreset) -> ModeledClock:
        """The clock that prices the point."""
        return ModeledClock(preset)

    def runner(self, model, works: list[Work]) -> tuple:
        """(a ModelRunner, the step's block tables: none) for the point: a slab per slot of at least CALIBRATION_SLAB
        positions (_time_steps)."""
        from ..model.runner import ModelRunner

        max_len = max(max(w.start + w.tokens for w in works), min(CALIBRATION_SLAB, model.config.n_positions))
        return ModelRunner.with_slabs(model, max(w.slot for w in works) + 1, max_len), None


class PagedPoint:
    """A calibration point's K/V as the paged layout holds them, in blocks of block_size positions handed out by
    block_tables: how it is run and priced (its K/V gathered through the tables)."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.knobs = {"block_size": block_size}  # the layout's own knobs, recorded with the point

    def clock(self, preset: HardwarePreset) -> ModeledClock:
        """The clock that prices the point: a paged one."""
        return ModeledClock(preset).for_layout(self.block_size)

    def runner(self, model, works: list[Work]) -> tuple:
        """(a ModelRunner over just the blocks the point's tables hold, the tables) for the point."""
        from ..model.runner import ModelRunner

        tables = block_tables(works, self.block_size)
        return ModelRunner.with_blocks(model, sum(len(t) for t in tables.values()), self.block_size), tables


SLABS = SlabPoint()


def plan_points(plan: dict, n_pos: int) -> list[tuple[str, list[Work], SlabPoint | PagedPoint]]:
    """(label, works, layout) of every calibration step: the slab points, then the paged ones (plan["paged"], a plan
    of its own with its block_size; none if it has none)."""
    paged = plan.get("paged", {})
    return ([(lbl, w, SLABS) for lbl, w in _points(plan, n_pos)]
            + [(f"{lbl} (paged)", w, PagedPoint(paged["block_size"])) for lbl, w in _points(paged, n_pos)])


def block_tables(works: list[Work], block_size: int) -> dict[int, list[int]]:
    """Each work's slot's block table, its blocks handed out a round at a time over the slots (as sequences that
    grow side by side take them from the pool: one block each per block_size steps), so tables interleave."""
    need = {w.slot: -(-(w.start + w.tokens) // block_size) for w in works}
    tables: dict[int, list[int]] = {slot: [] for slot in need}
    nxt = 0
    for j in range(max(need.values())):
        for slot, nb in need.items():
            if nb > j:
                tables[slot].append(nxt)
                nxt += 1
    return tables


def model_preset(model, name: str, description: str, sources: list[str]) -> HardwarePreset:
    """A preset with the shape of a TinyGPT, tinyserve's attention and placeholder rates (1 B/s, 1 flop/s)."""
    cfg = model.config
    elem = model.wte.weight.element_size()
    nonembed = sum(p.numel() for p in model.h.parameters()) + sum(p.numel() for p in model.ln_f.parameters())
    return HardwarePreset(
        name=name, description=description, bandwidth_Bps=1.0, peak_flops=1.0, overhead_s=0.0,
        weight_bytes=float((nonembed + model.wte.weight.numel()) * elem),  # blocks + the tied output head
        nonembed_params=float(nonembed), n_layer=cfg.n_layer, attn_dim=cfg.n_embd,
        kv_bytes_per_token=float(_kv_bytes_per_token(cfg.n_layer, cfg.n_embd, elem)),
        kv_dtype=str(model.dtype).removeprefix("torch."), sources=sources, attn_flops=1.0,
        # past this many tokens a step's MLP activations (4 x n_embd a token) outgrow 32 MiB, the size of this
        # box's L3 and of glibc's largest heap block (bigger ones are fresh mmap'd pages, faulted in every step):
        # 8, 12, 16 and 32 padded 2,000-token prompts cost 107, 113, 116 and 115 ms each here
        big_step_tokens=float(32 * 2 ** 20 // (4 * cfg.n_embd * elem)),
        call_overhead_s=0.0, attention="tinyserve-cuda" if model.device.type == "cuda" else "tinyserve-cpu")


def step_timer(device) -> tuple[str, Callable[[], float]]:
    """How steps are timed: the thread's CPU time on a one-thread CPU run, else wall time (CUDA synchronised).

    On a machine shared with other processes, wall time counts the time the OS gave to them (a 4 ms step
    measured 4-13 ms on a busy 2-core box); the thread's CPU time does not, and on a quiet machine it equals wall
    time for a one-thread run. GPU work is not CPU time, and with several threads the calling thread's CPU time
    is not the step's, so those use wall time.
    """
    import torch

    if torch.device(device).type == "cpu" and torch.get_num_threads() == 1:
        return "thread CPU time", time.thread_time
    return "wall", time.perf_counter


CALIBRATION_SLAB = 2048  # positions per slot of the calibration's KV cache (at least), see _time_steps


CALIBRATION_ROUNDS = 6  # rounds of _time_steps over every point (calibrate takes each point's fastest)
WARMUP_S, WARMUP_STEPS = 0.05, 50  # a fresh cache is warmed up for 50 ms or 50 steps, at least one (_time_steps)
SLOW_STEP_S = 0.5  # a point slower than this is timed once per round


def _time_steps(model, points: list[tuple[list[Work], SlabPoint | PagedPoint]], repeats: int) -> list[float]:
    """One round: the fastest time of build_step + forward_step + greedy sampling of each (works, layout) point,
    in turn (layout: SLABS, or a PagedPoint's block pool read through block_tables).

    Each point runs its repeats back to back, as the engine runs similar steps one after another (caches warm:
    a one-decode step measured 0.43 ms after itself and ~1 ms after a 4,000-token prefill), after a warm-up of
    WARMUP_S or WARMUP_STEPS: in a freshly allocated cache, 32 decodes of 64 keys took 3.7 ms, then 2.5, 2.2 ...
    and settled at ~1.6 ms only after 6-8 steps (the engine runs hundreds of steps on one cache).
    Its KV cache has slabs of at least CALIBRATION_SLAB positions, as the engine's slabs hold a whole request
    (640 or 2,048 positions made no difference we could measure). Each point gets a freshly allocated cache:
    where the OS places a cache's pages changes how well it sits in the CPU's caches (one 32-slot step measured
    1.57-2.03 ms across 8 allocations), and each engine run allocates its own. calibrate() runs several rounds
    and keeps each point's fastest, so that a busy moment of the machine does not land on all the points of one
    shape. The minimum, not the median: other processes only ever add time.
    """
    from ..model.runner import step_segments

    _, clock = step_timer(model.device)
    out = []
    for works, layout in points:
        segs, sample = step_segments(works, lambda i, w: [(7 * i + j) % 256 for j in range(w.tokens)])
        runner, tables = layout.runner(model, works)

        def timed() -> float:
            t0 = clock()
            runner.forward(runner.build(segs, sample, tables))  # sampling included; on CUDA it waits for the step
            return clock() - t0

        spent, n = timed(), 1
        while n < WARMUP_STEPS and spent < WARMUP_S:
            spent, n = spent + timed(), n + 1
        # a step of over half a second is timed once a round: its noise is small next to it, its cost is not
        out.append(min(timed() for _ in range(repeats if spent < SLOW_STEP_S else 1)))
        del runner
    return out


def _nnls(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (Lawson and Hanson's active-set method)."""
    norms = np.linalg.norm(X, axis=0)
    usable = norms > 0
    A = X[:, usable] / norms[usable]  # columns are bytes, flops and counts: scale them alike
    n = A.shape[1]
    x, passive = np.zeros(n), np.zeros(n, dtype=bool)
    for _ in range(3 * n):
        grad = A.T @ (y - A @ x)
        if passive.all() or grad[~passive].max() <= 1e-12:
            break
        passive[np.argmax(np.where(passive, -np.inf, grad))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], y, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)  # step back to where the first coefficient reaches zero, drop it
            x = x + np.min(x[neg] / (x[neg] - z[neg])) * (z - x)
            passive &= x > 1e-15
            x[~passive] = 0.0
    out = np.zeros(X.shape[1])
    out[usable] = x / norms[usable]
    return out


@dataclass
class StepShape:
    """One calibration point as the fit sees it: the step's terms (ModeledClock.terms) under a preset's model."""

    terms: dict
    preset: HardwarePreset  # the model's shape (bytes and flops per token); its rates are what the fit finds


def step_shape(preset: HardwarePreset, works: list[Work], layout: SlabPoint | PagedPoint = SLABS) -> StepShape:
    """The StepShape of a step under this preset's model shape and attention mode, its K/V held as layout holds
    them."""
    return StepShape(layout.clock(preset).terms(works), preset)


def _predict(shapes: list[StepShape], x: list[float], cache: float, ramp: float) -> np.ndarray:
    """Modeled seconds of every point under fitted numbers x (pricing.FIT's order): pricing.price, as the clock."""
    return np.array([total(price(s.terms, hw), hw) for s in shapes
                     for hw in [with_fit(s.preset, x, cache, ramp)]])


CACHE_GRID_MIB = (0, 2, 3, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32, 48)  # kv_cache_bytes fit_cost tries
RAMP_GRID = (1.25, 1.5, 2.0, 3.0)  # and kv_cache_ramp


def fit_cost(shapes: list[StepShape], times: np.ndarray, cache_grid_mib: tuple = CACHE_GRID_MIB,
             ramp_grid: tuple = RAMP_GRID) -> dict:
    """Fit overheads (step, call, row, row missing the cache, big-step token), bandwidths, flop rates and the KV cache.

    Each max() in the cost is linear once we know which side wins, so alternate: fix every term's side (memory
    or compute), solve the non-negative linear problem (rows divided by their time, so fast and slow steps count
    alike; relative error), re-decide the sides with the new rates, repeat; keep the best fit seen over a few
    starting guesses and every cache size and ramp of the grids (the two numbers that are not linear). Calibration
    measures one device: a preset split over GPUs (its all-reduces, outside FIT: pricing.fit_row) is refused.
    """
    if any(s.preset.allreduce_token_s or s.preset.allreduce_step_s for s in shapes):
        raise ValueError("fit_cost: a tensor-parallel preset's all-reduces are not fitted")  # words: ok (a bug)
    def solve(hits: list[float], cache: float, mem_lin: list[bool], mem_attn: list[list[bool]]) -> np.ndarray:
        rows = [fit_row(s.terms, s.preset, h, cache, ml, ma) for s, h, ml, ma in zip(shapes, hits, mem_lin, mem_attn)]
        return _nnls(np.array(rows) / times[:, None], np.ones_like(times))

    best, best_err = None, math.inf
    starts = [(False, True), (True, True), (False, False), (True, False)]  # (linear memory-bound?, attn memory-bound?)
    grid = [(0.0, 2.0)] + [(m * 2 ** 20, q) for m in cache_grid_mib if m for q in ramp_grid]
    for cache, ramp in grid:
        hits = [step_hit(s.terms, s.preset, cache, ramp) for s in shapes]
        for lin0, attn0 in starts:
            mem_lin = [lin0] * len(shapes)
            mem_attn = [[attn0] * len(s.terms["attn"]) for s in shapes]
            for _ in range(30):
                x = list(solve(hits, cache, mem_lin, mem_attn))
                for i, k in enumerate(FIT):  # never infinitely fast: finite, JSON-writable
                    if k in RATES:
                        x[i] = max(x[i], 1e-16 if k in ("peak_flops", "attn_flops") else 1e-15)
                err = float(np.sum(((_predict(shapes, x, cache, ramp) - times) / times) ** 2))
                if err < best_err:
                    best, best_err = (x, cache, ramp), err
                new = [sides(s.terms, s.preset, h, x) for s, h in zip(shapes, hits)]
                new_lin, new_attn = [n[0] for n in new], [n[1] for n in new]
                if new_lin == mem_lin and new_attn == mem_attn:
                    break
                mem_lin, mem_attn = new_lin, new_attn
    x, cache, ramp = best
    fitted = with_fit(shapes[0].preset, x, cache, ramp)
    return {k: float(getattr(fitted, k)) for k in FIT + ("kv_cache_bytes", "kv_cache_ramp")}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _rel_errors(rel: list[float]) -> dict:
    return {"median_rel_err": round(float(np.median(rel)), 4), "max_rel_err": round(float(np.max(rel)), 4),
            "rms_rel_err": round(float(np.sqrt(np.mean(np.square(rel)))), 4)}


def calibrate(model, quick: bool = False, name: str = "cpu-tiny", plan: dict | None = None,
              between_rounds: Callable[[int], object] | None = None) -> HardwarePreset:
    """Time real ragged steps of `model` here and fit the cost model's rates and overheads to them.

    The steps are the shapes the policies make (uniform and ragged decodes, prefills, chunks after a prefix,
    decodes beside a chunk, padded prefills); each point is the fastest of a few repeats in each of a few rounds.
    between_rounds(i), if given, runs after round i (all but the last): benchmarks/costmodel.py validates there,
    so that the calibration and the validation it is checked against see the same moments of the machine. The
    returned preset records every point (its works, measured and modeled time) and the fit's relative errors.
    """
    import torch

    plan = plan or (QUICK_PLAN if quick else FULL_PLAN)
    points = plan_points(plan, model.config.n_positions)
    dev = model.device
    where = _cpu_name() if dev.type == "cpu" else torch.cuda.get_device_name(dev)
    base = model_preset(model, name, f"the tiny GPT ({model.num_params():,} params, {str(model.dtype)[6:]}) "
                        f"run by tinyserve's forward_step on {where}",
                        [f"calibrated on {where} with tinyserve calibrate, {date.today()}"])
    rounds = plan.get("rounds", CALIBRATION_ROUNDS)
    measured = np.full(len(points), math.inf)
    for i in range(rounds):
        measured = np.minimum(measured, _time_steps(model, [(w, lay) for _, w, lay in points], plan["repeats"]))
        if between_rounds is not None and i < rounds - 1:
            between_rounds(i)
    rates = fit_cost([step_shape(base, w, lay) for _, w, lay in points], measured)
    preset = HardwarePreset(**{**asdict(base), **rates})
    rows, rel = [], []
    for (label, works, layout), t in zip(points, measured):
        clock = layout.clock(preset)
        m = clock.step_time(works)
        rel.append(abs(m - t) / t)
        rows.append({"label": label, "works": runs_of(works), **layout.knobs,
                     "measured_s": round(float(t), 7), "modeled_s": round(m, 7), "bound": clock.cost(works)["bound"]})
    preset.details = {
        "device": where, "torch": torch.__version__, "threads": torch.get_num_threads(), "dtype": str(model.dtype),
        "repeats": plan["repeats"], "quick": quick, "timer": step_timer(dev)[0],
        "statistic": f"fastest of the repeats, run back to back after a warm-up ({WARMUP_S * 1e3:.0f} ms or "
                     f"{WARMUP_STEPS} steps), in {rounds} rounds over "
                     "every point, each in a fresh KV cache",
        "kv_slab_positions": CALIBRATION_SLAB,
        "fit": _rel_errors(rel), "points": rows,
        "notes": ["every rate here is effective on this machine, fitted; nothing is a datasheet number",
                  "attention 'tinyserve-cpu': priced as forward_step runs it (clock module docstring)",
                  "points marked (paged) ran with the paged KV layout (block_size): their K/V are gathered through "
                  "block tables, priced by gather_call_s and gather_Bps"],
    }
    return preset


def runs_of(works: list[Work]) -> list[list]:
    """Works on slots 0, 1, 2... as [count, phase, start, tokens, padding] runs of identical works (compact JSON)."""
    runs: list[list] = []
    for i, w in enumerate(works):
        if w.slot != i:
            raise ValueError("runs_of: works must sit on slots 0, 1, 2, ... in order")
        if runs and runs[-1][1:] == [w.phase, w.start, w.tokens, w.padding]:
            runs[-1][0] += 1
        else:
            runs.append([1, w.phase, w.start, w.tokens, w.padding])
    return runs


def works_of(runs: list[list]) -> list[Work]:
    """Works from the [count, phase, start, tokens, padding] runs a calibration records (slots 0, 1, 2...)."""
    out: list[Work] = []
    for count, phase, start, tokens, padding in runs:
        for _ in range(count):
            out.append(Work(len(out), None, phase, start, tokens, padding))
    return out


def run_calibration(quick: bool = False, out: str | Path | None = None, device: str = "cpu") -> HardwarePreset:
    """Calibrate the shipped checkpoint (float32) on this machine; write the preset JSON to `out` if given."""
    from ..model.runner import fixed, load_model

    model = load_model(device=device, dtype="float32")
    with fixed():  # the thread governor would change the setting the points are timed at
        preset = calibrate(model, quick=quick, name="cpu-tiny" if model.device.type == "cpu" else f"{device}-tiny")
    if out is not None:
        save_preset(preset, out)
    return preset
