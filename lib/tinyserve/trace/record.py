"""The Trace: every step and every request of a run. Its views (trace/arrays.py), metrics (trace/metrics.py) and
exports (trace/export.py) are computed from it; this module hands those out, cached. They read a trace's fields
(trace/fields.py, which this class extends), so none of them imports this module."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..core.request import FINISHED, Request
from . import arrays, export
from .fields import TraceFields
from .arrays import BlockUsage, RequestArrays, RequestTimeline, SlotGrid, StepArrays, WorkTable
from .metrics import metrics
from .step import StepRecord

_V = TypeVar("_V")


@dataclass
class Trace(TraceFields):
    """A run: its settings, steps and requests (TraceFields), and the views of them everything downstream
    (metrics, widgets, exports) reads, computed once each."""

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

    def slot_steps(self) -> dict[str, float]:
        """Slots x steps split into useful, padding, wasted and idle (a padded prefill is split by tokens)."""
        return {k: float(v.sum()) for k, v in self.slot_step_shares().items()}

    def slot_step_shares(self) -> dict[str, np.ndarray]:
        """Per step: slot-steps that were useful / padding / wasted / idle (a padded prefill split by tokens)."""
        return self.cached("shares", lambda: arrays._slot_step_shares(self))

    # ---- arrays for views (computed once per trace; a trace from Run.trace() never changes) ------------------
    def cached(self, key: str, build: Callable[[], _V]) -> _V:
        """The memo of views derived from this trace: build() once, then its result while the trace has as many steps
        and requests (a growing trace builds again). Keys are shared: the trace's own views use short names
        (works, steps, reqs, ...), so a caller names its own after what it holds (e.g. "waste_totals")."""
        stamp = (len(self.steps), len(self.requests))
        hit = self._views.get(key)
        if hit is None or hit[0] != stamp:
            hit = (stamp, build())
            self._views[key] = hit
        return hit[1]

    def works_table(self) -> WorkTable:
        """Every slot-step's work as columns (one row per SlotWork, in step order)."""
        return self.cached("works", lambda: arrays._works_table(self))

    def step_arrays(self) -> StepArrays:
        """Per-step numpy arrays: times, tokens by phase, busy slots, queue, KV, inter-token gaps."""
        return self.cached("steps", lambda: arrays._step_arrays(self))

    def phase_grid(self) -> SlotGrid:
        """Slots x steps as numbers: phase codes (GRID_PHASES, padding shown) and what each cell computed."""
        return self.cached("grid", lambda: arrays._slot_grid(self))

    def block_usage(self) -> BlockUsage:
        """The paged layout's block spans, each sequence's partly filled last block per step, held and wasted per
        step (empty for a slab run): what a block map draws."""
        return self.cached("blocks", lambda: arrays._block_usage(self))

    def request_arrays(self) -> RequestArrays:
        """Per-request arrays: arrival, slot, first/first-token/finish/last step, TTFT and end-to-end latency."""
        return self.cached("reqs", lambda: arrays._request_arrays(self))

    def request_timelines(self) -> list[RequestTimeline]:
        """Each request's life: arrival, slot claimed, prefill chunks, first token, finish."""
        return self.cached("timelines", lambda: arrays._request_timelines(self))

    def timeline(self, request_id: str) -> RequestTimeline:
        """One request's life (request_timelines() by id): its first step, prefill chunks, first token, finish."""
        for tl in self.request_timelines():
            if tl.id == request_id:
                return tl
        raise KeyError(request_id)

    def slot_phases(self) -> np.ndarray:
        """(num_slots, num_steps) array of phase names ('idle' where a slot did nothing)."""
        return arrays.slot_phases(self)

    def slots_held(self) -> np.ndarray:
        """Per step: slots holding a request (claimed at its first step, held through its last, wasted included)."""
        return arrays.slots_held(self)

    def request_states(self, k: int) -> np.ndarray:
        """Each request's state (REQUEST_STATES code) at the end of step k."""
        return arrays.request_states(self, k)

    # ---- metrics and exports (trace/metrics.py, trace/export.py) ---------------------------------------------
    def metrics(self) -> dict:
        """The contract's metrics (times in this run's clock; vLLM's meanings): trace.metrics.metrics."""
        return metrics(self)

    def request_dict(self, r: Request, tokens: bool = False) -> dict:
        """One request as the contract's JSON object."""
        return export.request_dict(self, r, tokens)

    def summary(self, tokens: bool = False) -> dict:
        """The `tinyserve run --json` document."""
        return export.summary(self, tokens)

    def to_dict(self) -> dict:
        """Everything, steps included (`--trace`)."""
        return export.to_dict(self)

    def to_perfetto(self) -> dict:
        """Chrome-trace JSON (ui.perfetto.dev, chrome://tracing): a track per slot, a slice per request phase."""
        return export.to_perfetto(self)

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
        from ..lang import t

        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(d)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TinyserveError(t("engine.trace.cannot_read", path=path, kind=type(e).__name__, error=e)) from None

    @classmethod
    def from_dict(cls, d: dict) -> Trace:
        """The inverse of to_dict() (summary() documents too: no steps)."""
        return export.trace_from_dict(cls, d)


def snapshot_requests(requests: list[Request]) -> list[Request]:
    """Copies that later steps of a run do not change (outputs and token times are copied, prompts shared)."""
    out = []
    for r in requests:
        c = copy.copy(r)
        c.output, c.token_times = list(r.output), list(r.token_times)
        out.append(c)
    return out
