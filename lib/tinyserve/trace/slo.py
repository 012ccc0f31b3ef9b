"""Service-level objectives: the share of a run's requests meeting a TTFT and a TPOT target, and goodput.

A request meets the SLO when it finished, its TTFT <= the TTFT target and its TPOT <= the TPOT target (TPOT as
trace/latency.py defines it, vLLM's meaning; a one-token output has no TPOT and meets that target). Rejected,
aborted and unfinished requests meet neither target; every request of the run counts in the denominator.
Goodput is DistServe's (Zhong et al., OSDI '24): the highest request rate at which the attainment stays at or above
a goal (90% in the paper); per GPU when the rates given are per GPU. Read off a sweep as DistServe's plotting
scripts do: where the attainment curve first falls below the goal, interpolated linearly between the two rates
around that crossing (reading()).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..core.request import FINISHED, Request
from ..errors import TinyserveError
from ..lang import t
from .latency import tpot_ms as request_tpot_ms, ttft_s  # aliased: attainment() has a tpot_ms target


TTFT_AT = ("prefill", "decode")  # where a disaggregated request's first token counts (DeploymentTrace.as_seen)


def check_ttft_at(ttft_at: str) -> str:
    """The TTFT convention, or one clear line naming the two there are."""
    if ttft_at not in TTFT_AT:
        raise TinyserveError(t("engine.slo.ttft_at", value=ttft_at))
    return ttft_at


def check_targets(ttft_ms: float, tpot_ms: float) -> None:
    """Raise one clear line unless both targets are finite numbers of milliseconds > 0."""
    for option, v in (("--slo-ttft-ms", ttft_ms), ("--slo-tpot-ms", tpot_ms)):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        try:
            ok = ok and math.isfinite(v) and v > 0
        except OverflowError:  # an int beyond float range
            ok = False
        if not ok:
            raise TinyserveError(t("engine.slo.target", option=option, value=v))


def _meets_ttft(r: Request, ttft_ms: float) -> bool:
    ttft = ttft_s(r)
    return r.status == FINISHED and ttft is not None and ttft * 1e3 <= ttft_ms


def _meets_tpot(r: Request, target: float) -> bool:
    tpot = request_tpot_ms(r)  # the very number trace/metrics.py reports
    return r.status == FINISHED and (tpot is None or tpot <= target)


def attainment(requests: Iterable[Request], ttft_ms: float, tpot_ms: float) -> dict:
    """The targets, how many requests met both, and the shares meeting both, the TTFT target and the TPOT target."""
    check_targets(ttft_ms, tpot_ms)
    reqs = list(requests)
    n = len(reqs)
    ttft_ok = [_meets_ttft(r, ttft_ms) for r in reqs]
    tpot_ok = [_meets_tpot(r, tpot_ms) for r in reqs]
    met = sum(a and b for a, b in zip(ttft_ok, tpot_ok))
    return {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "requests": n, "met": met,
            "attainment": met / n if n else 0.0,
            "met_ttft": sum(ttft_ok) / n if n else 0.0, "met_tpot": sum(tpot_ok) / n if n else 0.0}


def reading(rates: Sequence[float], attainments: Sequence[float], goal: float = 0.9) -> dict:
    """DistServe's goodput read off a sweep: {"value", "read", "monotone"}. read "crossing": the attainment curve
    (rates ascending) first falls below the goal between two rates tried, and value is interpolated linearly
    between them; "at_least": every rate tried meets the goal, value is the highest (goodput is at least that);
    "below": even the lowest misses it, value None (goodput is below the lowest). monotone: False when the curve
    climbs back to the goal after its first crossing (then the first crossing is the one read)."""
    if len(rates) != len(attainments):
        raise TinyserveError(t("engine.slo.lengths", rates=len(rates), attainments=len(attainments)))
    if isinstance(goal, bool) or not isinstance(goal, (int, float)) or not 0 < goal <= 1:
        raise TinyserveError(t("engine.slo.goal", value=goal))
    points = sorted(zip(rates, attainments), key=lambda p: p[0])
    first = next((i for i, (_, share) in enumerate(points) if share < goal), None)
    monotone = first is None or all(share < goal for _, share in points[first:])
    if first is None:
        return {"value": points[-1][0] if points else None, "read": "at_least", "monotone": monotone}
    if first == 0:
        return {"value": None, "read": "below", "monotone": monotone}
    (r0, a0), (r1, a1) = points[first - 1], points[first]
    return {"value": r0 + (a0 - goal) / (a0 - a1) * (r1 - r0), "read": "crossing", "monotone": monotone}


def goodput(rates: Sequence[float], attainments: Sequence[float], goal: float = 0.9) -> float | None:
    """The goodput read off a sweep (reading()'s value): None when even the lowest rate misses the goal."""
    return reading(rates, attainments, goal)["value"]
