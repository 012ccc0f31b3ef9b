"""The Trace: every step and every request of a run, the metrics computed from it, and its exports."""
from __future__ import annotations

import copy
import itertools
import json
import operator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.request import FINISHED, REJECTED, Request, SlotWork  # noqa: F401  SlotWork: also tinyserve.trace's

PHASES = ("prefill", "decode", "wasted", "padding", "idle")
# codes of phase_grid(): a slot-step is one of these; a padded prefill counts as padding when padding > tokens
GRID_PHASES = ("idle", "prefill", "padding", "decode", "wasted")
IDLE, PREFILL, PADDING, DECODE, WASTED = range(5)
_WORK_CODE = {"prefill": PREFILL, "decode": DECODE, "wasted": WASTED}


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
    num_waiting: int = 0  # requests arrived and still without a slot after this step's plan (the queue)

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
    # KV accounting: "modeled" = bytes of the hardware preset's model (e.g. a 70B in bf16), "real" = the tiny GPT's
    kv_units: str = "real"
    kv_dtype: str | None = None
    kv_bytes_per_token: int = 0
    kv_capacity_bytes: int | None = None  # the KV budget or modeled KV memory that capped the slots (None: no cap)
    slab_bytes: int = 0  # one slot's slab: slab_tokens x kv_bytes_per_token
    slab_tokens: int = 0  # positions every slot's slab reserves from step 0
    slab_rule: str = ""  # what sized the slab: "max_model_len: ..." (a slab server) or "longest: ..." (a what-if)
    kv_tensor_positions: int | None = None  # positions per slot of the real model's KV tensors (None: dry run)
    workload_knobs: dict = field(default_factory=dict)  # a named workload's knobs, e.g. {"rate": 2.0}
    _views: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # ---- views -------------------------------------------------------------------------------------------
    def workload_label(self) -> str:
        """The workload's name with the knobs it ran with, e.g. 'chapter-7.2-longtail (rate=2)'."""
        knobs = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.workload_knobs.items())
        return f"{self.workload} ({knobs})" if knobs else self.workload

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

    def slots_held(self) -> np.ndarray:
        """Per step: slots holding a request (claimed at its first step, held through its last, wasted included)."""
        ra, n = self.request_arrays(), len(self.steps)
        ran = ra.first_step >= 0
        edges = np.zeros(n + 1, dtype=np.int64)
        np.add.at(edges, ra.first_step[ran], 1)
        np.add.at(edges, ra.last_step[ran] + 1, -1)
        return np.cumsum(edges[:n])

    def slot_steps(self) -> dict[str, float]:
        """Slots x steps split into useful, padding, wasted and idle (a padded prefill is split by tokens)."""
        return {k: float(v.sum()) for k, v in self.slot_step_shares().items()}

    def slot_step_shares(self) -> dict[str, np.ndarray]:
        """Per step: slot-steps that were useful / padding / wasted / idle (a padded prefill split by tokens)."""
        return self._cached("shares", lambda: _slot_step_shares(self))

    # ---- arrays for views (computed once per trace; a trace from Run.trace() never changes) ------------------
    def _cached(self, key: str, build):
        stamp = (len(self.steps), len(self.requests))
        hit = self._views.get(key)
        if hit is None or hit[0] != stamp:
            hit = (stamp, build())
            self._views[key] = hit
        return hit[1]

    def works_table(self) -> WorkTable:
        """Every slot-step's work as columns (one row per SlotWork, in step order)."""
        return self._cached("works", lambda: _works_table(self))

    def step_arrays(self) -> StepArrays:
        """Per-step numpy arrays: times, tokens by phase, busy slots, queue, KV, inter-token gaps."""
        return self._cached("steps", lambda: _step_arrays(self))

    def phase_grid(self) -> SlotGrid:
        """Slots x steps as numbers: phase codes (GRID_PHASES, padding shown) and what each cell computed."""
        return self._cached("grid", lambda: _slot_grid(self))

    def request_arrays(self) -> RequestArrays:
        """Per-request arrays: arrival, slot, first/first-token/finish/last step, TTFT and end-to-end latency."""
        return self._cached("reqs", lambda: _request_arrays(self))

    def request_timelines(self) -> list[RequestTimeline]:
        """Each request's life: arrival, slot claimed, prefill chunks, first token, finish."""
        return self._cached("timelines", lambda: _request_timelines(self))

    def request_states(self, k: int) -> np.ndarray:
        """Each request's state (REQUEST_STATES code) at the end of step k."""
        ra, sa = self.request_arrays(), self.step_arrays()
        t_end = sa.end_s[k] if len(sa.end_s) else 0.0
        st = np.full(len(ra.ids), WAITING_CODE, dtype=np.int8)
        st[ra.arrival_s > t_end] = NOT_ARRIVED
        st[(ra.first_step >= 0) & (ra.first_step <= k)] = PREFILLING
        st[(ra.first_token_step >= 0) & (ra.first_token_step <= k)] = DECODING
        st[(ra.finish_step >= 0) & (ra.finish_step <= k)] = DONE
        st[ra.status == REJECTED] = REJECTED_CODE
        aborted = (ra.status == "aborted") & (ra.finish_s <= t_end)
        st[aborted] = ABORTED_CODE
        return st

    # ---- metrics ---------------------------------------------------------------------------------------------
    def metrics(self) -> dict:
        """The contract's metrics (times in this run's clock; vLLM's meanings).

        Utilisation two ways (useful = slot-steps that computed a token a request keeps, a padded prefill's
        padding share excluded): slot_utilization = useful / (slots x steps), per step, blind to the time
        between steps; time_utilization = useful slot-seconds / (slots x duration_s), where idle gaps (waiting
        for arrivals or a timeout) and short or long steps count for their length: the "GPU utilisation" of
        the chapter. busy_time_fraction = time inside steps / duration_s.
        """
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
            "time_utilization": (self._useful_slot_seconds() / (self.num_slots * duration)
                                 if duration > 0 and self.num_slots else 0.0),  # 0 slots: a server replay
            "busy_time_fraction": sum(s.duration_s for s in self.steps) / duration if duration > 0 else 0.0,
            "slot_steps": ss,
            "padding_tokens": sum(w.padding for s in self.steps for w in s.works),
            "prefill_tokens": sum(w.tokens for s in self.steps for w in s.works if w.phase == "prefill"),
            "decode_tokens": sum(w.tokens for s in self.steps for w in s.works if w.phase == "decode"),
            "wasted_decode_tokens": sum(w.tokens for s in self.steps for w in s.works if w.phase == "wasted"),
            "idle_slot_steps": int(ss["idle"]),
            "kv_reserved_bytes_peak": max((s.kv_reserved_bytes for s in self.steps), default=0),
            "kv_used_bytes_peak": max((s.kv_used_bytes for s in self.steps), default=0),
            "kv_units": self.kv_units,
            "kv_capacity_bytes": self.kv_capacity_bytes,
            **self._kv_fit(),
        }

    def _useful_slot_seconds(self) -> float:
        """Each step's useful slots (as slot_steps counts them) times its duration, summed."""
        return sum(s.duration_s * sum(w.tokens / (w.tokens + w.padding) for w in s.works if w.phase != "wasted")
                   for s in self.steps)

    def _kv_fit(self) -> dict:
        """Sequences the KV capacity holds as slabs, and as exact allocation of what sequences really held."""
        cap, slab = self.kv_capacity_bytes, self.slab_bytes
        held = self.slots_held() if self.steps else np.zeros(0, dtype=np.int64)
        has_kv = _step_column(self, "kv_used_bytes", np.int64) > 0
        seqs, used = int(held[has_kv].sum()), int(_step_column(self, "kv_used_bytes", np.int64)[has_kv].sum())
        return {"kv_fit_slabs": cap // slab if cap is not None and slab else None,
                # capacity / the bytes a sequence held on average over the run's steps (sequence-weighted)
                "kv_fit_exact": cap * seqs // used if cap is not None and used else None}

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
        return {"policy": self.policy, "workload": self.workload, "workload_knobs": self.workload_knobs,
                "clock": self.clock, "hardware": self.hardware,
                "num_slots": self.num_slots, "knobs": self.knobs, "dry_run": self.dry_run, "kv_units": self.kv_units,
                "kv": {"units": self.kv_units, "dtype": self.kv_dtype, "bytes_per_token": self.kv_bytes_per_token,
                       "capacity_bytes": self.kv_capacity_bytes, "slab_bytes": self.slab_bytes,
                       "slab_tokens": self.slab_tokens, "slab_rule": self.slab_rule,
                       "tensor_positions": self.kv_tensor_positions},
                "metrics": self.metrics(), "requests": [self.request_dict(r, tokens) for r in self.requests]}

    def to_dict(self) -> dict:
        """Everything, steps included (`--trace`)."""
        d = self.summary(tokens=True)
        d["steps"] = [{"index": s.index, "start_s": s.start_s, "duration_s": s.duration_s,
                       "measured_s": s.measured_s, "kv_reserved_bytes": s.kv_reserved_bytes,
                       "kv_used_bytes": s.kv_used_bytes, "num_waiting": s.num_waiting,
                       "works": [w._asdict() for w in s.works]}
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

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a trace saved by save() / `--trace`, or a `--json` summary (then it has no steps).

        Token ids the file does not hold (prompts always; outputs of dry runs) come back as -1, as the dry run
        itself records them; counts, times and metrics are those of the saved run.
        """
        from ..errors import TinyserveError

        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(d)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TinyserveError(f"trace {path}: cannot read ({type(e).__name__}: {e})") from None

    @classmethod
    def from_dict(cls, d: dict) -> Trace:
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
                        decode_computed_tokens=rd.get("decode_computed_tokens", 0))
            r.num_prefilled = r.prompt_len if r.token_times else 0
            reqs.append(r)
        steps = [StepRecord(sd["index"], sd["start_s"], sd["duration_s"], [SlotWork(**w) for w in sd["works"]],
                            sd["kv_reserved_bytes"], sd["kv_used_bytes"], sd.get("measured_s"),
                            sd.get("num_waiting", 0))
                 for sd in d.get("steps", [])]
        kv = d.get("kv", {})
        return cls(d["policy"], d["workload"], d["clock"], d.get("hardware"), d["num_slots"], dict(d.get("knobs", {})),
                   d.get("dry_run", False), steps, reqs, kv_units=kv.get("units", d.get("kv_units", "real")),
                   kv_dtype=kv.get("dtype"), kv_bytes_per_token=kv.get("bytes_per_token", 0),
                   kv_capacity_bytes=kv.get("capacity_bytes"), slab_bytes=kv.get("slab_bytes", 0),
                   slab_tokens=kv.get("slab_tokens", 0), slab_rule=kv.get("slab_rule", ""),
                   kv_tensor_positions=kv.get("tensor_positions"), workload_knobs=dict(d.get("workload_knobs", {})))


def _stats(xs: list[float]) -> dict:
    if not xs:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    a = np.asarray(xs, dtype=np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}


def snapshot_requests(requests: list[Request]) -> list[Request]:
    """Copies that later steps of a run do not change (outputs and token times are copied, prompts shared)."""
    out = []
    for r in requests:
        c = copy.copy(r)
        c.output, c.token_times = list(r.output), list(r.token_times)
        out.append(c)
    return out


# ---------------------------------------------------------------------------------------------- view arrays
REQUEST_STATES = ("not arrived", "waiting", "prefill", "decode", "done", "rejected", "aborted")
NOT_ARRIVED, WAITING_CODE, PREFILLING, DECODING, DONE, REJECTED_CODE, ABORTED_CODE = range(7)


@dataclass
class WorkTable:
    """One row per SlotWork, in step order. token: the work produced a token (a decode, or a prefill's last
    chunk); gap_s: for a token, the time since the request's previous token, or since arrival for the first."""

    step: np.ndarray
    slot: np.ndarray
    request: np.ndarray  # index into Trace.requests
    phase: np.ndarray  # GRID_PHASES code of the work's own phase (prefill, decode, wasted)
    start: np.ndarray
    tokens: np.ndarray
    padding: np.ndarray
    token: np.ndarray
    first_token: np.ndarray
    gap_s: np.ndarray


@dataclass
class StepArrays:
    """Per-step arrays, one entry per step (index = step number)."""

    start_s: np.ndarray
    duration_s: np.ndarray
    end_s: np.ndarray
    measured_s: np.ndarray  # nan for dry runs
    tokens: np.ndarray  # computed, padding included
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray  # useful decodes
    wasted_tokens: np.ndarray
    padding_tokens: np.ndarray
    busy_slots: np.ndarray
    num_waiting: np.ndarray
    kv_reserved_bytes: np.ndarray
    kv_used_bytes: np.ndarray
    prefill_works: np.ndarray  # requests that ran a prefill chunk
    max_itl_s: np.ndarray  # the longest inter-token gap among the decode tokens of this step (nan: none)
    max_ttft_s: np.ndarray  # the longest time-to-first-token among first tokens of this step (nan: none)


@dataclass
class SlotGrid:
    """(num_slots, num_steps) arrays; request is an index into Trace.requests, -1 where idle."""

    phase: np.ndarray  # GRID_PHASES codes: a padded prefill cell is PADDING when its padding > its tokens
    request: np.ndarray
    tokens: np.ndarray
    padding: np.ndarray
    start: np.ndarray


@dataclass
class RequestArrays:
    """One entry per request (Trace.requests order); steps are -1 where they never happened."""

    ids: list[str]
    status: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    arrival_s: np.ndarray
    first_token_s: np.ndarray  # nan if none
    finish_s: np.ndarray  # nan if none
    ttft_s: np.ndarray  # nan unless a first token came
    e2e_s: np.ndarray  # nan unless finished
    slot: np.ndarray
    first_step: np.ndarray  # first computed (its slot was claimed for this step)
    first_token_step: np.ndarray
    finish_step: np.ndarray  # the step that produced its last token
    last_step: np.ndarray  # the last step its slot computed for it (static: wasted decodes after finishing)


@dataclass
class RequestTimeline:
    """One request's life in the trace; chunks are (step, start position, tokens, padding) of its prefills."""

    id: str
    status: str
    prompt_len: int
    output_len: int
    arrival_s: float
    slot: int | None
    claimed_s: float | None  # start of its first computed step: its slot was claimed for that step
    first_step: int | None
    chunks: list[tuple[int, int, int, int]]
    first_token_s: float | None
    finish_s: float | None
    decode_steps: int
    wasted_steps: int
    last_step: int | None


def _step_column(tr: Trace, name: str, dtype) -> np.ndarray:
    """One StepRecord field of every step as an array (a C loop: long runs have ~10,000 steps)."""
    return np.fromiter(map(operator.attrgetter(name), tr.steps), dtype=dtype, count=len(tr.steps))


def _works_table(tr: Trace) -> WorkTable:
    n = len(tr.steps)
    counts = np.fromiter(map(len, map(operator.attrgetter("works"), tr.steps)), dtype=np.int64, count=n)
    m = int(counts.sum())
    step = np.repeat(np.arange(n, dtype=np.int64), counts)
    # every work's six fields in one flat list (C speed, no list of the works first), then a column is every sixth
    flat = list(itertools.chain.from_iterable(itertools.chain.from_iterable(s.works for s in tr.steps)))
    slot, start, tokens, padding = (np.fromiter(flat[i::6], dtype=np.int64, count=m) for i in (0, 3, 4, 5))
    index = {r.id: i for i, r in enumerate(tr.requests)}
    req = np.fromiter(map(index.__getitem__, flat[1::6]), dtype=np.int64, count=m)
    ph = np.fromiter(map(_WORK_CODE.__getitem__, flat[2::6]), dtype=np.int8, count=m)
    prompt_len = np.array([r.prompt_len for r in tr.requests], dtype=np.int64)
    token = (ph == DECODE) | ((ph == PREFILL) & (start + tokens == prompt_len[req] if m else False))
    end = _step_column(tr, "start_s", np.float64) + _step_column(tr, "duration_s", np.float64)
    # gaps: each token's time minus the same request's previous token (or its arrival for the first one)
    gap = np.full(m, np.nan)
    first = np.zeros(m, dtype=bool)
    rows = np.flatnonzero(token)
    if len(rows):
        order = rows[np.argsort(req[rows], kind="stable")]  # per request, in step order
        t = end[step[order]]
        r = req[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = r[1:] != r[:-1]
        prev = np.empty(len(order))
        prev[1:] = t[:-1]
        arrival = np.array([x.arrival_s for x in tr.requests], dtype=np.float64)
        prev[new] = arrival[r[new]]
        gap[order] = t - prev
        first[order[new]] = True
    return WorkTable(step, slot, req, ph, start, tokens, padding, token, first, gap)


def _step_arrays(tr: Trace) -> StepArrays:
    n = len(tr.steps)
    wt = tr.works_table()
    start, dur = _step_column(tr, "start_s", np.float64), _step_column(tr, "duration_s", np.float64)
    meas = np.array([np.nan if s.measured_s is None else s.measured_s for s in tr.steps], dtype=np.float64)

    def per_step(weights, mask=None) -> np.ndarray:
        w = weights if mask is None else np.where(mask, weights, 0)
        return np.bincount(wt.step, weights=w, minlength=n).astype(np.int64)

    def max_per_step(mask) -> np.ndarray:
        out = np.full(n, -np.inf)
        np.maximum.at(out, wt.step[mask], wt.gap_s[mask])
        out[out == -np.inf] = np.nan
        return out

    prefill = wt.phase == PREFILL
    return StepArrays(
        start_s=start, duration_s=dur, end_s=start + dur, measured_s=meas,
        tokens=per_step(wt.tokens + wt.padding), prefill_tokens=per_step(wt.tokens, prefill),
        decode_tokens=per_step(wt.tokens, wt.phase == DECODE), wasted_tokens=per_step(wt.tokens, wt.phase == WASTED),
        padding_tokens=per_step(wt.padding), busy_slots=np.bincount(wt.step, minlength=n).astype(np.int64),
        num_waiting=_step_column(tr, "num_waiting", np.int64),
        kv_reserved_bytes=_step_column(tr, "kv_reserved_bytes", np.int64),
        kv_used_bytes=_step_column(tr, "kv_used_bytes", np.int64),
        prefill_works=per_step(np.ones(len(wt.step), dtype=np.int64), prefill),
        max_itl_s=max_per_step(wt.token & ~wt.first_token), max_ttft_s=max_per_step(wt.first_token))


def _slot_grid(tr: Trace) -> SlotGrid:
    shape = (tr.num_slots, len(tr.steps))
    wt = tr.works_table()
    phase = np.zeros(shape, dtype=np.int8)
    code = np.where((wt.phase == PREFILL) & (wt.padding > wt.tokens), PADDING, wt.phase).astype(np.int8)
    phase[wt.slot, wt.step] = code
    grids = []
    for col, fill in ((wt.request, -1), (wt.tokens, 0), (wt.padding, 0), (wt.start, 0)):
        g = np.full(shape, fill, dtype=np.int64)
        g[wt.slot, wt.step] = col
        grids.append(g)
    return SlotGrid(phase, *grids)


def _request_arrays(tr: Trace) -> RequestArrays:
    m = len(tr.requests)
    wt = tr.works_table()

    def per_request(rows: np.ndarray, values: np.ndarray, how) -> np.ndarray:
        out = np.full(m, -1, dtype=np.int64)
        if how is np.minimum:
            tmp = np.full(m, np.iinfo(np.int64).max)
            np.minimum.at(tmp, wt.request[rows], values[rows])
            out = np.where(tmp == np.iinfo(np.int64).max, -1, tmp)
        else:
            np.maximum.at(out, wt.request[rows], values[rows])
        return out

    every = np.ones(len(wt.step), dtype=bool)
    nan = float("nan")
    arr = np.array([r.arrival_s for r in tr.requests], dtype=np.float64)
    ftok = np.array([nan if r.first_token_s is None else r.first_token_s for r in tr.requests], dtype=np.float64)
    fin = np.array([nan if r.finish_s is None else r.finish_s for r in tr.requests], dtype=np.float64)
    status = np.array([r.status for r in tr.requests], dtype=object)
    return RequestArrays(
        ids=[r.id for r in tr.requests], status=status,
        prompt_len=np.array([r.prompt_len for r in tr.requests], dtype=np.int64),
        output_len=np.array([r.output_len for r in tr.requests], dtype=np.int64),
        arrival_s=arr, first_token_s=ftok, finish_s=fin, ttft_s=ftok - arr,
        e2e_s=np.where(status == FINISHED, fin - arr, nan),
        slot=np.array([r.slot for r in tr.requests], dtype=np.int64),
        first_step=per_request(every, wt.step, np.minimum),
        first_token_step=per_request(wt.first_token, wt.step, np.minimum),
        finish_step=np.where(status == FINISHED, per_request(wt.token, wt.step, np.maximum), -1),
        last_step=per_request(every, wt.step, np.maximum))


def _request_timelines(tr: Trace) -> list[RequestTimeline]:
    wt, ra = tr.works_table(), tr.request_arrays()
    chunks: list[list] = [[] for _ in tr.requests]
    for i in np.flatnonzero(wt.phase == PREFILL):
        chunks[wt.request[i]].append((int(wt.step[i]), int(wt.start[i]), int(wt.tokens[i]), int(wt.padding[i])))
    m = len(tr.requests)
    decodes = np.bincount(wt.request[wt.phase == DECODE], minlength=m)
    wasted = np.bincount(wt.request[wt.phase == WASTED], minlength=m)
    out = []
    for i, r in enumerate(tr.requests):
        fs = int(ra.first_step[i])
        out.append(RequestTimeline(
            r.id, r.status, r.prompt_len, r.output_len, r.arrival_s, r.slot if r.slot >= 0 else None,
            tr.steps[fs].start_s if fs >= 0 else None, fs if fs >= 0 else None, chunks[i], r.first_token_s,
            r.finish_s, int(decodes[i]), int(wasted[i]), int(ra.last_step[i]) if ra.last_step[i] >= 0 else None))
    return out


def _slot_step_shares(tr: Trace) -> dict[str, np.ndarray]:
    wt, n = tr.works_table(), len(tr.steps)
    total = (wt.tokens + wt.padding).astype(np.float64)
    wasted = (wt.phase == WASTED).astype(np.float64)
    pad_share = np.divide(wt.padding, total, out=np.zeros(len(total)), where=total > 0) * (1.0 - wasted)
    busy = np.bincount(wt.step, minlength=n)
    return {"useful": np.bincount(wt.step, weights=1.0 - wasted - pad_share, minlength=n),
            "padding": np.bincount(wt.step, weights=pad_share, minlength=n),
            "wasted": np.bincount(wt.step, weights=wasted, minlength=n),
            "idle": (tr.num_slots - busy).astype(np.float64)}
