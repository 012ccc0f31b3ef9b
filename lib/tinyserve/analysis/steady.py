"""Goodput at steady state: how many requests a rate's run needs, and the rate a deployment can sustain at all.

A short run at a rate above what a deployment sustains measures its queue filling, not a server: 200 requests
arriving at twice the sustainable rate mostly still meet a 2.5 s TTFT, because the queue has not had time to grow.
So every run of a sweep sends `requests_at(rate)` requests: SPAN_S seconds of arrivals and at least MIN_REQUESTS,
long enough that near and past saturation the queue's wait outgrows any TTFT target scored here. The cost goes where
the readings need it: a run at low load is many steps per request (each decodes nearly alone); near saturation a
step serves dozens, and the span grows the count. Where a curve runs flat just above the goal (the 400 ms TTFT
targets, which 3-9% of the requests miss even alone), no affordable count pins the crossing: each quoted
deployment runs again twice as long (analysis/fair.doubled), and a reading that moves by more than a tenth is
said to be unsettled.

`saturation` is the other half: the completions per second while a run is overloaded (the middle 80% of its
completions, so neither the empty start nor the draining end counts), measured on SATURATION_REQUESTS requests
offered at SATURATION_RATE_PER_GPU per GPU, at least 1.5 times what any deployment here sustains. No steady
goodput can be above it: a deployment cannot meet targets for more requests a second than it completes.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

MIN_REQUESTS = 300
SPAN_S = 90.0  # seconds of arrivals
SATURATION_REQUESTS = 1000
SATURATION_RATE_PER_GPU = 20.0
MIDDLE = (0.1, 0.9)  # the share of completions the saturation is read between


def requests_at(rate: float, scale: float = 1) -> int:
    """Requests a run at `rate` req/s sends to read a steady attainment (scale: times as many, as the doubling check
    runs)."""
    return max(math.ceil(MIN_REQUESTS * scale), math.ceil(rate * SPAN_S * scale))


def is_burst(n: int, rate: float) -> bool:
    """Whether a run of n requests at `rate` is too short to be read as a steady state (requests_at)."""
    return n < requests_at(rate)


def saturation(finish_s: Sequence[float]) -> float:
    """Completions per second over the middle of an overloaded run's completions (MIDDLE), from their finish times."""
    f = sorted(finish_s)
    lo, hi = int(len(f) * MIDDLE[0]), int(len(f) * MIDDLE[1])
    if hi <= lo or f[hi] <= f[lo]:
        return math.inf  # too few completions to tell: nothing caps
    return (hi - lo) / (f[hi] - f[lo])
