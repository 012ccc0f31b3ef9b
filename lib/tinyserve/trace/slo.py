"""Service-level objectives: the share of a run's requests meeting a TTFT and a TPOT target, and goodput.

A request meets the SLO when it finished, its TTFT <= the TTFT target and its TPOT <= the TPOT target (TPOT as
trace/latency.py defines it, vLLM's meaning; a one-token output has no TPOT and meets that target). Rejected,
aborted and unfinished requests meet neither target; every request of the run counts in the denominator.
Goodput is DistServe's (Zhong et al., OSDI '24): the highest request rate at which the attainment stays at or above
a goal (90% in the paper); per GPU when the rates given are per GPU.
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


def goodput(rates: Sequence[float], attainments: Sequence[float], goal: float = 0.9) -> float | None:
    """The highest swept rate up to which every swept rate (ascending) has attainment >= goal; None if the lowest
    has not (DistServe's goodput, read off a sweep: nothing is interpolated between the rates tried)."""
    if len(rates) != len(attainments):
        raise TinyserveError(t("engine.slo.lengths", rates=len(rates), attainments=len(attainments)))
    if isinstance(goal, bool) or not isinstance(goal, (int, float)) or not 0 < goal <= 1:
        raise TinyserveError(t("engine.slo.goal", value=goal))
    best = None
    for rate, share in sorted(zip(rates, attainments), key=lambda p: p[0]):
        if share < goal:
            break
        best = rate
    return best
