"""The sweeps serving papers draw, from dry runs on the modeled clock (default: a 70B model on one H200, FP8).

capacity   the highest request rate whose P99 inter-token gap stays under a target, for continuous batching at
           several batch caps and chunked prefill at several token budgets (Sarathi-Serve's Fig. 12)
ablation   P50 TTFT and P99 inter-token gap for mixing alone, chunking alone and both (Sarathi-Serve's Table 4)
cdfs       TTFT and end-to-end latency distributions at two loads, with a knob for output-length spread
           (the latency CDFs of Anyscale's continuous batching post)

Every run is a dry run (lengths fixed, modeled clock), so every number here is the same on any machine.
Times are modeled, not measured: they say what the policy does on the preset's hardware, not on this CPU.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from ..engine import Engine
from ..core.scheduling import Policy
from ..core.request import FINISHED, Request
from ..trace.latency import e2e_s, ttft_s
from ..trace.record import Trace
from ..core.scheduling.variants import ChunkOnly
from ..core.workloads import get_workload, make_prompt
from ..lang import ljust, rjust, t, width

MAX_QUEUE_S = 2.0  # Sarathi-Serve's sustainability rule: the median wait for a slot must stay under 2 s


@dataclass
class Setting:
    """A policy and its knobs under a label ('continuous B=64'); policy may be a Policy factory."""

    label: str
    policy: str | type
    knobs: dict = field(default_factory=dict)

    def make(self) -> str | Policy:
        """A fresh policy (variants are objects with state; named policies are built by the engine)."""
        return self.policy if isinstance(self.policy, str) else self.policy(**self.knobs)


def run(requests: list[Request], setting: Setting, hardware: str | None = None) -> Trace:
    """One dry run of these requests (fresh copies) under a setting."""
    knobs = setting.knobs if isinstance(setting.policy, str) else {}
    return Engine().run(requests, setting.make(), dry_run=True, progress=False, hardware=hardware, **knobs)


def p99_gap_ms(trace: Trace) -> float:
    """P99 of every inter-token gap of every finished request (TBT / ITL), in ms; 0 if there is none."""
    p = trace.metrics()["itl_ms"]["p99"]
    return 0.0 if p is None else p


def median_queue_s(trace: Trace) -> float:
    """Median time from arrival to first computed step (waiting for a slot), over finished requests."""
    waits = [r.admitted_s - r.arrival_s for r in trace.requests if r.status == FINISHED]
    return float(np.median(waits)) if waits else 0.0


# ------------------------------------------------------------------------------------------------ capacity
def capacity_settings(batch_caps=(32, 64, 128), budgets=(512, 2048), chunked_batch: int = 128) -> list[Setting]:
    """Sarathi-Serve's Fig. 12 line-up: continuous at several batch caps, chunked at several token budgets."""
    out = [Setting(f"continuous B={b}", "continuous", {"batch_size": b}) for b in batch_caps]
    out += [Setting(f"chunked T={t}", "chunked", {"batch_size": chunked_batch, "chunk_size": t, "max_batch_tokens": t})
            for t in budgets]
    return out


@dataclass
class CapacityCurve:
    """One setting's P99 gap and median queueing delay at each rate tried (rates stop once past every target)."""

    label: str
    rates: list[float]
    p99_gap_ms: list[float]
    queue_s: list[float]
    top_rate: float = math.inf  # the highest rate of the grid: a capacity equal to it means "at least"

    def capacity(self, target_ms: float, max_queue_s: float = MAX_QUEUE_S) -> float | None:
        """Highest rate such that it and every lower rate tried meet the target; None if the lowest fails."""
        best = None
        for r, g, q in zip(self.rates, self.p99_gap_ms, self.queue_s):
            if g > target_ms or q > max_queue_s:
                break
            best = r
        return best


def capacity_sweep(settings: list[Setting], rates=(1, 2, 3, 4, 6, 8, 10, 12, 16, 20), targets_ms=(50, 100, 200, 400),
                   n: int = 150, seed: int = 0, hardware: str | None = None,
                   max_queue_s: float = MAX_QUEUE_S) -> list[CapacityCurve]:
    """P99 inter-token gap vs request rate for each setting on chapter-7.2-longtail (n requests per rate)."""
    if not targets_ms or any(not (isinstance(ms, (int, float)) and ms > 0) for ms in targets_ms):
        raise ValueError(t("engine.sweep.targets", value=targets_ms))
    loosest = max(targets_ms)
    curves = []
    for s in settings:
        c = CapacityCurve(s.label, [], [], [], top_rate=float(max(rates)))
        for rate in sorted(rates):
            tr = run(get_workload("chapter-7.2-longtail", seed=seed, n=n, rate=float(rate)), s, hardware)
            c.rates.append(float(rate))
            c.p99_gap_ms.append(p99_gap_ms(tr))
            c.queue_s.append(median_queue_s(tr))
            if c.p99_gap_ms[-1] > loosest or c.queue_s[-1] > max_queue_s:
                break  # past every target: higher rates cannot count
        curves.append(c)
    return curves


def capacity_table(curves: list[CapacityCurve], targets_ms, max_queue_s: float = MAX_QUEUE_S) -> str:
    """Capacity per setting and target as text; a setting that misses a target at every rate says so in words."""
    caps = {id(c): [c.capacity(x, max_queue_s) for x in targets_ms] for c in curves}
    cells = {id(c): [t("figures.cap.none") if x is None else
                     t("figures.cap.rate", rate=(">=" if x == c.top_rate else "") + format(x, "g")) for x in caps[id(c)]]
             for c in curves}
    # labels and cells come in the reader's language: the columns are as wide as their widest entry
    col = max([17] + [width(c.label) + 1 for c in curves])
    cw = max([12] + [width(x) + 1 for row in cells.values() for x in row])
    lines = [ljust(t("figures.cap.head"), col) + "".join(rjust(f"{x:g} ms", cw) for x in targets_ms)]
    notes = [t("figures.cap.at_least")] if any(
        x == c.top_rate for c in curves for x in caps[id(c)]) else []
    for c in curves:
        lines.append(ljust(c.label, col) + "".join(rjust(x, cw) for x in cells[id(c)]))
        missed = [x for x, cap in zip(targets_ms, caps[id(c)]) if cap is None]
        if missed:
            why = (t("figures.cap.why_gap", ms=c.p99_gap_ms[0]) if c.p99_gap_ms[0] > min(missed)
                   else t("figures.cap.why_queue", s=c.queue_s[0]))
            notes.append(t("figures.cap.missed", label=c.label, targets=", ".join(f"{x:g}" for x in missed),
                           rate=c.rates[0], why=why))
    return "\n".join(lines + notes)


# ------------------------------------------------------------------------------------------------ stall bound
def stall_bound_s(max_batch_tokens: int, max_context: int, batch_size: int | None = None,
                  hardware: str | None = None) -> float:
    """Modeled time of one full-budget step: the longest any step under chunked prefill can take.

    A step holds at most max_batch_tokens tokens, no position beyond max_context and (with batch_size) at
    most that many requests. The cost grows with tokens, keys attended and KV read, so the worst step packs
    the budget at the deepest positions: we take the slowest of all decodes, one deep chunk, and a full batch
    of decodes beside one deep chunk. Under chunked prefill every in-flight request decodes in every step, so
    each of its inter-token gaps is one step: no gap can exceed this bound (tests/analysis/test_stall_bound.py).
    """
    from ..cost.clock import make_clock
    from ..core.request import decode_works
    from .prefill import mixed_works

    clock = make_clock("modeled", hardware)
    t, ctx = max_batch_tokens, max_context
    b = min(batch_size or t, t)
    chunk = min(t - (b - 1), ctx)
    lone = min(t, ctx)
    shapes = [decode_works([ctx] * t), mixed_works(0, ctx, lone, ctx - lone), mixed_works(b - 1, ctx, chunk, ctx - chunk)]
    return max(clock.step_time(w) for w in shapes)


# ------------------------------------------------------------------------------------------------ ablation
def ablation_settings(budget: int = 1024, batch_size: int = 128) -> list[Setting]:
    """Mixing alone, chunking alone, both: the three rows of Sarathi-Serve's Table 4, in our policies.

    mixing alone    continuous, prefill-first: a newcomer's WHOLE prompt runs in the next step beside the decodes
    chunking alone  ChunkOnly: prompts cut into chunks of <= budget tokens, but a step carries chunks or decodes,
                    never both; while both wait, chunk steps and decode steps alternate
    both            chunked: every decode, then chunks filling the rest of the same step's budget
    """
    return [Setting(t("figures.abl.mixing"), "continuous", {"batch_size": batch_size, "max_waiting_steps": 0}),
            Setting(t("figures.abl.chunking"), ChunkOnly, {"batch_size": batch_size, "chunk_size": budget,
                                                  "max_batch_tokens": budget}),
            Setting(t("figures.abl.both"), "chunked", {"batch_size": batch_size, "chunk_size": budget, "max_batch_tokens": budget})]


def ablation(rate: float = 8.0, n: int = 200, budget: int = 1024, seed: int = 0,
             hardware: str | None = None) -> dict[str, dict[str, float]]:
    """{label: {'p50_ttft_ms', 'p99_gap_ms'}} for the three ablation settings on chapter-7.2-longtail."""
    reqs = get_workload("chapter-7.2-longtail", seed=seed, n=n, rate=float(rate))
    out = {}
    for s in ablation_settings(budget):
        m = run(reqs, s, hardware).metrics()
        out[s.label] = {"p50_ttft_ms": m["ttft_ms"]["p50"], "p99_gap_ms": m["itl_ms"]["p99"]}
    return out


# ------------------------------------------------------------------------------------------------ CDFs
def spread_workload(n: int = 200, rate: float = 4.0, spread: float = 1.0, output_median: int = 100,
                    prompt_median: int = 200, seed: int = 0) -> list[Request]:
    """Poisson arrivals; output lengths lognormal around output_median with sigma = spread (0: all equal).

    Prompts: lognormal(median prompt_median, sigma 0.5) clipped to 8..1,500. Outputs clipped to 1..1,000, so
    prompt + output stays inside the 4,096-token context. Lengths are fixed (ignore_eos) for dry runs.
    """
    if not (isinstance(spread, (int, float)) and math.isfinite(spread) and spread >= 0):
        raise ValueError(t("engine.knob.finite_nonneg", name="spread", value=spread))  # words: ok (the knob's name)
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise ValueError(t("engine.knob.positive_finite", name="rate", value=rate))  # words: ok (the knob's name)
    rng, at, out = random.Random(seed), 0.0, []
    for i in range(n):
        at += -math.log(1.0 - rng.random()) / rate
        p = min(1500, max(8, round(rng.lognormvariate(math.log(prompt_median), 0.5))))
        o = min(1000, max(1, round(output_median * math.exp(spread * rng.gauss(0.0, 1.0)))))
        out.append(Request(f"r{i}", make_prompt(p, seed=seed * 1_000_003 + i), o, round(at, 6), ignore_eos=True))
    return out


def cdf_settings(batch_size: int = 32) -> list[Setting]:
    """Request-level batching (dynamic: batch of B or 100 ms), continuous, chunked (512-token budget)."""
    return [Setting(f"dynamic B={batch_size}", "dynamic", {"batch_size": batch_size}),
            Setting(f"continuous B={batch_size}", "continuous", {"batch_size": batch_size}),
            Setting(f"chunked B={batch_size}", "chunked", {"batch_size": batch_size, "chunk_size": 512,
                                                           "max_batch_tokens": 512 + batch_size})]


def cdfs(loads=(2.0, 6.0), spread: float = 1.0, n: int = 200, seed: int = 0, settings: list[Setting] | None = None,
         hardware: str | None = None) -> dict[tuple[float, str], dict[str, np.ndarray]]:
    """{(load, label): {'ttft_s': sorted, 'e2e_s': sorted}} for each load (req/s) and setting."""
    out = {}
    for load in loads:
        reqs = spread_workload(n=n, rate=load, spread=spread, seed=seed)
        for s in settings or cdf_settings():
            t = run(reqs, s, hardware)
            done = [r for r in t.requests if r.status == FINISHED]
            out[(load, s.label)] = {"ttft_s": np.sort([ttft_s(r) for r in done]),
                                    "e2e_s": np.sort([e2e_s(r) for r in done])}
    return out


def cdf_table(result: dict[tuple[float, str], dict[str, np.ndarray]]) -> str:
    """P50 and P99 of TTFT and end-to-end latency per load and setting, in modeled seconds."""
    col = max([16] + [width(label) for _, label in result])  # labels come in the reader's language
    lines = [t("figures.cdf.head", load=t("figures.cdf.load"), setting=ljust(t("figures.cdf.setting"), col),
               ttft=t("figures.cdf.ttft"), p99="p99", e2e=t("figures.cdf.e2e"))]
    for (load, label), d in result.items():
        q = {k: np.percentile(v, [50, 99]) for k, v in d.items()}
        lines.append(f"{load:>5g} {ljust(label, col)} {q['ttft_s'][0]:>9.2f} {q['ttft_s'][1]:>7.2f} "
                     f"{q['e2e_s'][0]:>9.2f} {q['e2e_s'][1]:>7.2f}")
    return "\n".join(lines)
