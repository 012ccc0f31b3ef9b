"""A request's latencies, defined once: time to first token and end-to-end (metrics, arrays and sweeps use these)."""
from __future__ import annotations

from ..core.request import FINISHED, Request


def ttft_s(r: Request) -> float | None:
    """Time to first token (s): from arrival to the first token; None if it got none."""
    return r.first_token_s - r.arrival_s if r.first_token_s is not None else None


def e2e_s(r: Request) -> float | None:
    """End-to-end latency (s): from arrival to the last token; None unless it finished."""
    return r.finish_s - r.arrival_s if r.finish_s is not None and r.status == FINISHED else None
