"""A request's latencies, defined once: time to first token, time per output token and end-to-end (metrics, arrays,
sweeps and SLOs use these)."""
from __future__ import annotations

from ..core.request import FINISHED, Request


def ttft_s(r: Request) -> float | None:
    """Time to first token (s): from arrival to the first token; None if it got none."""
    return r.first_token_s - r.arrival_s if r.first_token_s is not None else None


def e2e_s(r: Request) -> float | None:
    """End-to-end latency (s): from arrival to the last token; None unless it finished."""
    return r.finish_s - r.arrival_s if r.finish_s is not None and r.status == FINISHED else None


def tpot_s(r: Request) -> float | None:
    """Time per output token (s), vLLM's meaning: (finish - first token) / (output_len - 1); None unless it
    finished with two tokens or more (a one-token output has no TPOT)."""
    if r.status != FINISHED or r.finish_s is None or r.first_token_s is None or r.output_len < 2:
        return None
    ms = tpot_ms(r)
    return None if ms is None else ms / 1e3


def tpot_ms(r: Request) -> float | None:
    """tpot_s in ms, computed in this order (the metrics' numbers, to the last bit)."""
    if r.status != FINISHED or r.finish_s is None or r.first_token_s is None or r.output_len < 2:
        return None
    return (r.finish_s - r.first_token_s) * 1e3 / (r.output_len - 1)
