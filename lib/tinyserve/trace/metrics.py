"""The contract's metrics of a trace (docs/contract.md): computed here, once; Trace.metrics() and the exports read it."""
from __future__ import annotations

import numpy as np

from ..core.request import FINISHED, REJECTED, Request
from .arrays import _step_column
from .fields import TraceFields
from .latency import e2e_s, tpot_ms, ttft_s


def _stats(xs: list[float]) -> dict:
    if len(xs) == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    a = np.asarray(xs, dtype=np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}


def latency_ms(r: Request) -> tuple[float | None, float | None]:
    """(TTFT, end-to-end latency) of one request in ms: None where it never had a first token / never finished."""
    ttft, e2el = ttft_s(r), e2e_s(r)
    return (None if ttft is None else ttft * 1e3), (None if e2el is None else e2el * 1e3)


def latency_stats(requests: list[Request]) -> dict:
    """The finished requests' TTFT and end-to-end latency in ms ({"ttft_ms": stats, "e2el_ms": stats}), as
    metrics() has them: cheap enough for a view to ask on every redraw."""
    done = [r for r in requests if r.status == FINISHED]
    ttft, e2el = zip(*map(latency_ms, done)) if done else ((), ())
    return {"ttft_ms": _stats(ttft), "e2el_ms": _stats(e2el)}


def request_metrics(requests: list[Request]) -> dict:
    """What clients saw: throughput, duration and the latencies (a run's requests, or a deployment's as joined)."""
    done = [r for r in requests if r.status == FINISHED]
    accepted = [r for r in requests if r.status != REJECTED]
    t0 = min((r.arrival_s for r in accepted), default=0.0)
    t1 = max((r.finish_s for r in done), default=t0)
    duration = t1 - t0
    out_tokens = sum(r.output_len for r in done)
    latency = latency_stats(requests)
    tpot = [tpot_ms(r) for r in done if r.output_len > 1]
    # every gap in one array (the same float64 products, in the same order, as a list of each np.diff's items)
    gaps = [np.diff(r.token_times) for r in done if len(r.token_times) > 1]
    itl = np.concatenate(gaps) * 1e3 if gaps else []
    return {"output_throughput": out_tokens / duration if duration > 0 else 0.0,
            "request_throughput": len(done) / duration if duration > 0 else 0.0,
            "duration_s": duration, "num_requests": len(requests), "num_finished": len(done),
            "num_rejected": sum(r.status == "rejected" for r in requests),
            "num_aborted": sum(r.status == "aborted" for r in requests), "output_tokens": out_tokens,
            "ttft_ms": latency["ttft_ms"], "tpot_ms": _stats(tpot), "itl_ms": _stats(itl),
            "e2el_ms": latency["e2el_ms"]}


def metrics(tr: TraceFields) -> dict:
    """The contract's metrics (times in this run's clock; vLLM's meanings).

    Utilisation two ways (useful = slot-steps that computed a token a request keeps, a padded prefill's
    padding share excluded): slot_utilization = useful / (slots x steps), per step, blind to the time
    between steps; time_utilization = useful slot-seconds / (slots x duration_s), where idle gaps (waiting
    for arrivals or a timeout) and short or long steps count for their length: the "GPU utilisation" of
    the chapter. busy_time_fraction = time inside steps / duration_s.
    """
    rm = request_metrics(tr.requests)
    duration = rm["duration_s"]
    ss = tr.slot_steps()
    total = tr.num_slots * len(tr.steps)
    return {
        **{k: rm[k] for k in ("output_throughput", "request_throughput", "duration_s")},
        "num_steps": len(tr.steps),
        **{k: rm[k] for k in ("num_requests", "num_finished", "num_rejected", "num_aborted", "output_tokens",
                              "ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")},
        "slot_utilization": ss["useful"] / total if total else 0.0,
        "time_utilization": (useful_slot_seconds(tr) / (tr.num_slots * duration)
                             if duration > 0 and tr.num_slots else 0.0),  # 0 slots: a server replay
        "busy_time_fraction": sum(s.duration_s for s in tr.steps) / duration if duration > 0 else 0.0,
        "slot_steps": ss,
        "padding_tokens": sum(w.padding for s in tr.steps for w in s.works),
        "prefill_tokens": sum(w.tokens for s in tr.steps for w in s.works if w.phase == "prefill"),
        "decode_tokens": sum(w.tokens for s in tr.steps for w in s.works if w.phase == "decode"),
        "wasted_decode_tokens": sum(w.tokens for s in tr.steps for w in s.works if w.phase == "wasted"),
        "idle_slot_steps": int(ss["idle"]),
        "kv_reserved_bytes_peak": max((s.kv_reserved_bytes for s in tr.steps), default=0),
        "kv_used_bytes_peak": max((s.kv_used_bytes for s in tr.steps), default=0),
        "kv_units": tr.kv_units,
        "kv_capacity_bytes": tr.kv_capacity_bytes,
        **kv_fit(tr),
        **tr.kv.metrics(tr.steps),
    }


def useful_slot_seconds(tr: TraceFields) -> float:
    """Each step's useful slots (as slot_steps counts them) times its duration, summed."""
    return sum(s.duration_s * sum(w.tokens / (w.tokens + w.padding) for w in s.works if w.phase != "wasted")
               for s in tr.steps)


def kv_fit(tr: TraceFields) -> dict:
    """Sequences the KV capacity holds as slabs, and as exact allocation of what sequences really held."""
    cap, slab = tr.kv_capacity_bytes, tr.slab_bytes
    held = tr.slots_held() if tr.steps else np.zeros(0, dtype=np.int64)
    has_kv = _step_column(tr, "kv_used_bytes", np.int64) > 0
    seqs, used = int(held[has_kv].sum()), int(_step_column(tr, "kv_used_bytes", np.int64)[has_kv].sum())
    return {"kv_fit_slabs": cap // slab if cap is not None and slab else None,
            # capacity / the bytes a sequence held on average over the run's steps (sequence-weighted)
            "kv_fit_exact": cap * seqs // used if cap is not None and used else None}
