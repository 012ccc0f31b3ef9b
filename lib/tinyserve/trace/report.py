"""Plain-text summary of a trace, for the terminal."""
from __future__ import annotations

from ..lang import t
from .record import Trace


def format_summary(tr: Trace) -> str:
    """A few lines: settings, throughput, latency percentiles, slot and KV accounting (in the current language)."""
    m = tr.metrics()
    knobs = ", ".join(f"{k}={v}" for k, v in tr.knobs.items() if v is not None)
    lines = [
        t("engine.summary.head", policy=tr.policy, knobs=knobs, workload=tr.workload, slots=tr.num_slots,
          clock=t("engine.summary.clock.modeled" if tr.clock == "modeled" else "engine.summary.clock.wall"),
          hardware=("" if not tr.hardware else t("engine.summary.on_hardware", hardware=tr.hardware) if tr.gpus is None
                    else t("engine.summary.on_hardware_gpus", hardware=tr.hardware, gpus=tr.gpus)),
          dry_run=t("engine.summary.dry_run") if tr.dry_run else ""),
        t("engine.summary.requests", finished=m["num_finished"], rejected=m["num_rejected"],
          aborted=m["num_aborted"], steps=m["num_steps"], duration=m["duration_s"]),
        throughput_line(m),
        *latency_lines(m),
    ]
    ss = m["slot_steps"]
    lines += [
        t("engine.summary.slots", per_step=m["slot_utilization"], over_time=m["time_utilization"],
          useful=ss["useful"], padding=ss["padding"], wasted=ss["wasted"], idle=ss["idle"]),
        t("engine.summary.tokens", prefill=m["prefill_tokens"], padding=m["padding_tokens"], decode=m["decode_tokens"],
          wasted=m["wasted_decode_tokens"]),
        t("engine.summary.kv", units=_kv_units(tr), reserved=_bytes(m["kv_reserved_bytes_peak"]),
          used=_bytes(m["kv_used_bytes_peak"])),
    ]
    return "\n".join(lines + tr.kv.report_lines(m, _bytes))


def throughput_line(m: dict) -> str:
    """The throughput line of a run's metrics (also replay's)."""
    return t("engine.summary.throughput", tokens=m["output_throughput"], requests=m["request_throughput"])


def latency_lines(m: dict) -> list[str]:
    """One line per latency that has values: mean and percentiles, columns aligned (also replay's)."""
    return [t("engine.summary.latency", name=key, **{q: m[key][q] for q in ("mean", "p50", "p90", "p99", "max")})
            for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms") if m[key]["mean"] is not None]


def _kv_units(tr: Trace) -> str:
    if tr.kv_units == "modeled":
        return t("engine.summary.units.modeled", hardware=tr.hardware, dtype=tr.kv_dtype, bytes=tr.kv_bytes_per_token)
    return t("engine.summary.units.tiny", dtype=tr.kv_dtype) if tr.kv_dtype else t("engine.summary.units.tiny_bare")


def _bytes(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
