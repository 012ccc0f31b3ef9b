"""Plain-text summary of a trace, for the terminal."""
from __future__ import annotations

from .record import Trace


def format_summary(tr: Trace) -> str:
    """A few lines: settings, throughput, latency percentiles, slot and KV accounting."""
    m = tr.metrics()
    unit = "modeled" if tr.clock == "modeled" else "wall"
    hw = f" on {tr.hardware}" if tr.hardware else ""
    knobs = ", ".join(f"{k}={v}" for k, v in tr.knobs.items() if v is not None)
    lines = [
        f"{tr.policy} ({knobs}) on {tr.workload}: {tr.num_slots} slots, {unit} clock{hw}"
        + (" [dry run]" if tr.dry_run else ""),
        f"  requests  {m['num_finished']} finished, {m['num_rejected']} rejected, {m['num_aborted']} aborted;"
        f" {m['num_steps']} steps in {m['duration_s']:.3f} s",
        f"  throughput  {m['output_throughput']:.1f} tok/s, {m['request_throughput']:.2f} req/s",
    ]
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        s = m[key]
        if s["mean"] is None:
            continue
        lines.append(f"  {key:8s} mean {s['mean']:9.2f}  p50 {s['p50']:9.2f}  p90 {s['p90']:9.2f}"
                     f"  p99 {s['p99']:9.2f}  max {s['max']:9.2f}")
    ss = m["slot_steps"]
    lines += [
        f"  slots  utilization {m['slot_utilization']:.1%} per step, {m['time_utilization']:.1%} over time"
        f" (idle gaps counted); slot-steps useful {ss['useful']:.1f}, padding "
        f"{ss['padding']:.1f}, wasted {ss['wasted']:.0f}, idle {ss['idle']:.0f}",
        f"  tokens  prefill {m['prefill_tokens']}, padding {m['padding_tokens']}, decode {m['decode_tokens']},"
        f" wasted {m['wasted_decode_tokens']}",
        f"  kv ({_kv_units(tr)})  reserved peak {_bytes(m['kv_reserved_bytes_peak'])}, used peak "
        f"{_bytes(m['kv_used_bytes_peak'])}",
    ]
    if tr.kv_layout == "paged":
        lines.append(f"  kv blocks  {tr.num_blocks:,} of {tr.block_size} positions, peak {m['blocks_used_peak']:,} held;"
                     f" {m['preemptions']} preemptions, {m['recomputed_tokens']:,} tokens recomputed")
    elif m["kv_capacity_bytes"] is not None:
        lines.append(f"  kv capacity {_bytes(m['kv_capacity_bytes'])}: {m['kv_fit_slabs']} sequences as max-length "
                     f"slabs, ~{m['kv_fit_exact']} with exact allocation of what they held")
    return "\n".join(lines)


def _kv_units(tr: Trace) -> str:
    if tr.kv_units == "modeled":
        return f"modeled: {tr.hardware}'s model, {tr.kv_dtype}, {tr.kv_bytes_per_token:,} B/token"
    return f"this tiny GPT, {tr.kv_dtype}" if tr.kv_dtype else "this tiny GPT"


def _bytes(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
