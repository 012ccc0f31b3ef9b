"""A trace's exports: the contract's JSON (summary, full trace), Perfetto's Chrome-trace JSON, and reading JSON back."""
from __future__ import annotations

from ..core.blocks import BLOCK_FIELDS
from ..core.config import pool_class
from ..core.request import Request, SlotWork
from .fields import TraceFields
from .metrics import latency_ms, metrics
from .step import StepRecord


def request_dict(tr: TraceFields, r: Request, tokens: bool = False) -> dict:
    """One request as the contract's JSON object."""
    d = {
        "id": r.id, "status": r.status, "finish_reason": r.finish_reason,
        "prompt_len": r.prompt_len, "output_len": r.output_len, "max_new_tokens": r.max_new_tokens,
        "arrival_s": r.arrival_s, "admitted_s": r.admitted_s, "first_token_s": r.first_token_s,
        "finish_s": r.finish_s,
        "ttft_ms": latency_ms(r)[0], "e2el_ms": latency_ms(r)[1],
        "slot": r.slot if r.slot >= 0 else None,
        "prefill_computed_tokens": r.prefill_computed_tokens,
        "decode_computed_tokens": r.decode_computed_tokens,
    }
    d.update(tr.kv.json_request(r))
    if tokens:
        d["tokens"] = None if tr.dry_run else list(r.output)
    return d


def summary(tr: TraceFields, tokens: bool = False) -> dict:
    """The `tinyserve run --json` document."""
    return {"policy": tr.policy, "workload": tr.workload, "workload_knobs": tr.workload_knobs,
            "clock": tr.clock, "hardware": tr.hardware, **({"gpus": tr.gpus} if tr.gpus is not None else {}),
            "num_slots": tr.num_slots, "knobs": tr.knobs, "dry_run": tr.dry_run, "kv_units": tr.kv_units,
            "kv": {"units": tr.kv_units, "dtype": tr.kv_dtype, "bytes_per_token": tr.kv_bytes_per_token,
                   "capacity_bytes": tr.kv_capacity_bytes, "slab_bytes": tr.slab_bytes,
                   "slab_tokens": tr.slab_tokens, "slab_rule": tr.slab_rule,
                   "tensor_positions": tr.kv_tensor_positions, **tr.kv.json_kv()},
            "metrics": metrics(tr), "requests": [request_dict(tr, r, tokens) for r in tr.requests]}


def to_dict(tr: TraceFields) -> dict:
    """Everything, steps included (`--trace`)."""
    d = summary(tr, tokens=True)
    d["steps"] = [{"index": s.index, "start_s": s.start_s, "duration_s": s.duration_s,
                   "measured_s": s.measured_s, "kv_reserved_bytes": s.kv_reserved_bytes,
                   "kv_used_bytes": s.kv_used_bytes, "num_waiting": s.num_waiting,
                   "works": [w._asdict() for w in s.works], **tr.kv.json_step(s)}
                  for s in tr.steps]
    d.update(tr.kv.json_trace())
    for rd, r in zip(d["requests"], tr.requests):
        rd["token_times_s"] = list(r.token_times)
    return d


def to_perfetto(tr: TraceFields) -> dict:
    """Chrome-trace JSON (ui.perfetto.dev, chrome://tracing): a track per slot, a slice per request phase,
    counters for busy slots, tokens per step and KV bytes."""
    us = 1e6
    ev: list[dict] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": f"tinyserve {tr.policy}"}},
                      {"ph": "M", "pid": 1, "tid": 0, "name": "thread_name", "args": {"name": "steps"}}]
    for slot in range(tr.num_slots):
        ev.append({"ph": "M", "pid": 1, "tid": slot + 1, "name": "thread_name", "args": {"name": f"slot {slot}"}})
        ev.append({"ph": "M", "pid": 1, "tid": slot + 1, "name": "thread_sort_index", "args": {"sort_index": slot + 1}})
    open_: dict[int, dict] = {}  # slot -> the slice being extended

    def close(slot: int) -> None:
        e = open_.pop(slot, None)
        if e:
            ev.append(e)

    for s in tr.steps:
        ev.append({"ph": "X", "pid": 1, "tid": 0, "name": f"step {s.index}", "ts": s.start_s * us,
                   "dur": s.duration_s * us, "args": {"tokens": s.tokens, "busy_slots": len(s.works)}})
        busy = set()
        for w in s.works:
            busy.add(w.slot)
            name = f"{w.request_id} {w.phase}"
            e = open_.get(w.slot)
            if e and e["name"] == name and abs(e["ts"] + e["dur"] - s.start_s * us) < 1e-3:
                e["dur"] += s.duration_s * us
                e["args"]["tokens"] += w.tokens
                e["args"]["padding"] += w.padding
                continue
            close(w.slot)
            open_[w.slot] = {"ph": "X", "pid": 1, "tid": w.slot + 1, "name": name, "cat": w.phase,
                             "ts": s.start_s * us, "dur": s.duration_s * us,
                             "args": {"request": w.request_id, "tokens": w.tokens, "padding": w.padding}}
        for slot in list(open_):
            if slot not in busy:
                close(slot)
        ev.append({"ph": "C", "pid": 1, "name": "batch", "ts": s.start_s * us,
                   "args": {"busy_slots": len(s.works), "tokens": s.tokens}})
        ev.append({"ph": "C", "pid": 1, "name": "kv_bytes", "ts": s.start_s * us,
                   "args": {"reserved": s.kv_reserved_bytes, "used": s.kv_used_bytes}})
        ev += tr.kv.perfetto_counters(s, s.start_s * us)
    for slot in list(open_):
        close(slot)
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"workload": tr.workload, "clock": tr.clock, "hardware": tr.hardware}}


def trace_from_dict(cls: type[TraceFields], d: dict) -> TraceFields:
    """The inverse of to_dict() (summary() documents too: no steps)."""
    reqs = []
    for rd in d["requests"]:
        out = rd.get("tokens") or [-1] * rd["output_len"]
        times = rd.get("token_times_s")
        if times is None:  # a summary: only the first token's time is known
            times = [] if rd.get("first_token_s") is None else [rd["first_token_s"]]
        r = Request(rd["id"], [-1] * rd["prompt_len"], rd["max_new_tokens"], rd["arrival_s"],
                    status=rd["status"], slot=-1 if rd.get("slot") is None else rd["slot"],
                    output=list(out), token_times=list(times), admitted_s=rd.get("admitted_s"),
                    finish_s=rd.get("finish_s"), finish_reason=rd.get("finish_reason"),
                    prefill_computed_tokens=rd.get("prefill_computed_tokens", 0),
                    decode_computed_tokens=rd.get("decode_computed_tokens", 0), preemptions=rd.get("preemptions", 0),
                    num_prefilled=rd["prompt_len"] if times else 0)
        reqs.append(r)
    steps = [StepRecord(sd["index"], sd["start_s"], sd["duration_s"], [SlotWork(**w) for w in sd["works"]],
                        sd["kv_reserved_bytes"], sd["kv_used_bytes"], sd.get("measured_s"),
                        sd.get("num_waiting", 0),
                        **{k: tuple(sd[k]) if isinstance(sd[k], list) else sd[k] for k in BLOCK_FIELDS if k in sd})
             for sd in d.get("steps", [])]
    kv = d.get("kv", {})
    return cls(d["policy"], d["workload"], d["clock"], d.get("hardware"), d["num_slots"], dict(d.get("knobs", {})),
               d.get("dry_run", False), steps, reqs, kv_units=kv.get("units", d.get("kv_units", "real")),
               kv_dtype=kv.get("dtype"), kv_bytes_per_token=kv.get("bytes_per_token", 0),
               kv_capacity_bytes=kv.get("capacity_bytes"), slab_bytes=kv.get("slab_bytes", 0),
               slab_tokens=kv.get("slab_tokens", 0), slab_rule=kv.get("slab_rule", ""),
               kv_tensor_positions=kv.get("tensor_positions"), workload_knobs=dict(d.get("workload_knobs", {})),
               gpus=d.get("gpus"), kv=pool_class(kv.get("layout", "slab")).record.from_json(kv, d))
