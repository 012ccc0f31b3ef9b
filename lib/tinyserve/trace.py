"""The Trace: every step and every request of a run, the metrics computed from it, and its exports."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .requests import FINISHED, REJECTED, Request

PHASES = ("prefill", "decode", "wasted", "padding", "idle")


class SlotWork(NamedTuple):
    """What one slot did in one step."""

    slot: int
    request_id: str
    phase: str  # prefill | decode | wasted
    start: int  # first position computed
    tokens: int
    padding: int  # padding tokens computed alongside (static prefill)


@dataclass
class StepRecord:
    """One iteration of the engine: one forward pass over all its works."""

    index: int
    start_s: float
    duration_s: float
    works: list[SlotWork]
    kv_reserved_bytes: int
    kv_used_bytes: int
    measured_s: float | None = None  # wall time of the forward, when the model ran

    @property
    def tokens(self) -> int:
        """Tokens computed in this step, padding included."""
        return sum(w.tokens + w.padding for w in self.works)


@dataclass
class Trace:
    """A run: its settings, steps and requests. Everything downstream (metrics, widgets, exports) reads this."""

    policy: str
    workload: str
    clock: str
    hardware: str | None
    num_slots: int
    knobs: dict
    dry_run: bool
    steps: list[StepRecord] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)

    # ---- views -------------------------------------------------------------------------------------------
    def request(self, request_id: str) -> Request:
        """The request with this id."""
        for r in self.requests:
            if r.id == request_id:
                return r
        raise KeyError(request_id)

    def replay_requests(self) -> list[Request]:
        """Fresh copies of the accepted requests with their real output lengths as hints, for dry-run replays."""
        return [r.fresh(output_len_hint=r.output_len) for r in self.requests if r.status == FINISHED]

    def slot_phases(self) -> np.ndarray:
        """(num_slots, num_steps) array of phase names ('idle' where a slot did nothing)."""
        grid = np.full((self.num_slots, len(self.steps)), "idle", dtype=object)
        for j, s in enumerate(self.steps):
            for w in s.works:
                grid[w.slot, j] = w.phase
        return grid

    def slot_steps(self) -> dict[str, float]:
        """Slots x steps split into useful, padding, wasted and idle (a padded prefill is split by tokens)."""
        out = {"useful": 0.0, "padding": 0.0, "wasted": 0.0, "idle": 0.0}
        for s in self.steps:
            out["idle"] += self.num_slots - len(s.works)
            for w in s.works:
                if w.phase == "wasted":
                    out["wasted"] += 1
                else:
                    share = w.padding / (w.tokens + w.padding)
                    out["padding"] += share
                    out["useful"] += 1 - share
        return out

    # ---- metrics ---------------------------------------------------------------------------------------------
    def metrics(self) -> dict:
        """The contract's metrics (times in this run's clock; vLLM's meanings)."""
        done = [r for r in self.requests if r.status == FINISHED]
        accepted = [r for r in self.requests if r.status != REJECTED]
        t0 = min((r.arrival_s for r in accepted), default=0.0)
        t1 = max((r.finish_s for r in done), default=t0)
        duration = t1 - t0
        out_tokens = sum(r.output_len for r in done)
        ttft = [(r.first_token_s - r.arrival_s) * 1e3 for r in done]
        e2el = [(r.finish_s - r.arrival_s) * 1e3 for r in done]
        tpot = [(r.finish_s - r.first_token_s) * 1e3 / (r.output_len - 1) for r in done if r.output_len > 1]
        itl = [d * 1e3 for r in done for d in np.diff(r.token_times)]
        ss = self.slot_steps()
        total = self.num_slots * len(self.steps)
        return {
            "output_throughput": out_tokens / duration if duration > 0 else 0.0,
            "request_throughput": len(done) / duration if duration > 0 else 0.0,
            "duration_s": duration,
            "num_steps": len(self.steps),
            "num_requests": len(self.requests),
            "num_finished": len(done),
            "num_rejected": sum(r.status == "rejected" for r in self.requests),
            "num_aborted": sum(r.status == "aborted" for r in self.requests),
            "output_tokens": out_tokens,
            "ttft_ms": _stats(ttft), "tpot_ms": _stats(tpot), "itl_ms": _stats(itl), "e2el_ms": _stats(e2el),
            "slot_utilization": ss["useful"] / total if total else 0.0,
            "slot_steps": ss,
            "padding_tokens": sum(w.padding for s in self.steps for w in s.works),
            "prefill_tokens": sum(w.tokens for s in self.steps for w in s.works if w.phase == "prefill"),
            "decode_tokens": sum(w.tokens for s in self.steps for w in s.works if w.phase == "decode"),
            "wasted_decode_tokens": sum(w.tokens for s in self.steps for w in s.works if w.phase == "wasted"),
            "idle_slot_steps": int(ss["idle"]),
            "kv_reserved_bytes_peak": max((s.kv_reserved_bytes for s in self.steps), default=0),
            "kv_used_bytes_peak": max((s.kv_used_bytes for s in self.steps), default=0),
        }

    # ---- exports ---------------------------------------------------------------------------------------------
    def request_dict(self, r: Request, tokens: bool = False) -> dict:
        """One request as the contract's JSON object."""
        d = {
            "id": r.id, "status": r.status, "finish_reason": r.finish_reason,
            "prompt_len": r.prompt_len, "output_len": r.output_len, "max_new_tokens": r.max_new_tokens,
            "arrival_s": r.arrival_s, "admitted_s": r.admitted_s, "first_token_s": r.first_token_s,
            "finish_s": r.finish_s,
            "ttft_ms": (r.first_token_s - r.arrival_s) * 1e3 if r.first_token_s is not None else None,
            "e2el_ms": (r.finish_s - r.arrival_s) * 1e3 if r.finish_s is not None and r.status == FINISHED else None,
            "slot": r.slot if r.slot >= 0 else None,
            "prefill_computed_tokens": r.prefill_computed_tokens,
            "decode_computed_tokens": r.decode_computed_tokens,
        }
        if tokens:
            d["tokens"] = None if self.dry_run else list(r.output)
        return d

    def summary(self, tokens: bool = False) -> dict:
        """The `tinyserve run --json` document."""
        return {"policy": self.policy, "workload": self.workload, "clock": self.clock, "hardware": self.hardware,
                "num_slots": self.num_slots, "knobs": self.knobs, "dry_run": self.dry_run,
                "metrics": self.metrics(), "requests": [self.request_dict(r, tokens) for r in self.requests]}

    def to_dict(self) -> dict:
        """Everything, steps included (`--trace`)."""
        d = self.summary(tokens=True)
        d["steps"] = [{"index": s.index, "start_s": s.start_s, "duration_s": s.duration_s,
                       "measured_s": s.measured_s, "kv_reserved_bytes": s.kv_reserved_bytes,
                       "kv_used_bytes": s.kv_used_bytes, "works": [w._asdict() for w in s.works]}
                      for s in self.steps]
        for rd, r in zip(d["requests"], self.requests):
            rd["token_times_s"] = list(r.token_times)
        return d

    def to_perfetto(self) -> dict:
        """Chrome-trace JSON (ui.perfetto.dev, chrome://tracing): a track per slot, a slice per request phase,
        counters for busy slots, tokens per step and KV bytes."""
        us = 1e6
        ev: list[dict] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": f"tinyserve {self.policy}"}},
                          {"ph": "M", "pid": 1, "tid": 0, "name": "thread_name", "args": {"name": "steps"}}]
        for slot in range(self.num_slots):
            ev.append({"ph": "M", "pid": 1, "tid": slot + 1, "name": "thread_name", "args": {"name": f"slot {slot}"}})
            ev.append({"ph": "M", "pid": 1, "tid": slot + 1, "name": "thread_sort_index", "args": {"sort_index": slot + 1}})
        open_: dict[int, dict] = {}  # slot -> the slice being extended

        def close(slot: int) -> None:
            e = open_.pop(slot, None)
            if e:
                ev.append(e)

        for s in self.steps:
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
        for slot in list(open_):
            close(slot)
        return {"traceEvents": ev, "displayTimeUnit": "ms",
                "otherData": {"workload": self.workload, "clock": self.clock, "hardware": self.hardware}}

    def save(self, path: str | Path) -> None:
        """Write the full trace as JSON."""
        Path(path).write_text(json.dumps(self.to_dict()))

    def save_perfetto(self, path: str | Path) -> None:
        """Write the Chrome-trace/Perfetto JSON."""
        Path(path).write_text(json.dumps(self.to_perfetto()))


def _stats(xs: list[float]) -> dict:
    if not xs:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    a = np.asarray(xs, dtype=np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}
