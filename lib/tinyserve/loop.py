"""The one step loop (torch-free): above core/ (what a plan needs), cost/ (the clock) and trace/ (the record), below
the model, which it reaches only through a runner it is handed. Each step: the policy plans, the runner executes
ONE forward over every token of the plan and samples greedy tokens, requests advance, slots are freed, the clock
moves, the step is recorded. A dry run is the same loop without a runner. Hooks watch the steps (StepHook)."""
from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from .core.config import POLICY_OBJECT, GPTConfig, RunConfig, check_policy_object, layout_kv
from .core.kv import KVPool, words
from .core.request import REJECTED, Request, SlotWork, Work, check_requests
from .core.scheduling import Plan, Scheduler
from .core.scheduling.scheduler import reject
from .core.workloads import ids_known
from .cost.clock import make_clock
from .errors import TinyserveError
from .lang import t
from .trace.record import Trace, snapshot_requests
from .trace.step import StepRecord

PROGRESS_DELAY_S = 1.0  # a progress bar appears only for runs longer than this


class Runner(Protocol):
    """What the loop needs of the model's side (model.runner.ModelRunner): execute a step's works, return the
    sampled tokens (one per work that samples, in order)."""

    def execute(self, works: list[Work]) -> list[int]: ...

    def import_kv(self, request: Request, kv: object) -> None: ...


@dataclass
class ModelSide:
    """What a run needs of the model: its shape (GPTConfig: a dry run needs no torch), its dtype (a torch dtype or
    its name: the KV bytes under the wall clock), and make_runner(pool, tensor_positions), the model's runner with
    the K/V the pool's layout needs (None on a dry run)."""

    config: GPTConfig
    dtype: object
    make_runner: Callable[[KVPool, int], Runner] | None = None


class StepHook:
    """Watches a run step by step (validation, the classroom, the explorer); override what you need: each method
    does nothing here. A hook reads the run; it never assigns to its internals. Raising stops the run."""

    def before_plan(self, run: Run) -> None:
        """Arrivals are queued (run.policy.waiting) and the policy is about to plan."""

    def planned(self, run: Run, plan: Plan) -> None:
        """Every plan the policy returns, empty ones too, before the loop reads it (so a check can refuse a malformed
        one in its own words) and before the runner executes its works."""

    def executed(self, run: Run, plan: Plan) -> None:
        """Right after the runner returned (nothing else ran in between); never on a dry run."""

    def recorded(self, run: Run, plan: Plan, record: StepRecord) -> None:
        """The step is recorded and the requests it finished have left their slots."""


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector: a dry run allocates ~100 small objects per step (works, records)
    and makes no reference cycles, yet each collection re-scans the whole growing trace (widgets' knob changes
    re-run the engine: chapter-7.1-finisher static, 2,000 steps x 32 slots, runs in about half the time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            _promote_young()
            gc.enable()


def _promote_young() -> None:
    """Move every object made since the last collection to the oldest generation without scanning it.

    A dry run's trace (~170,000 records for chapter-7.2-longtail dynamic) is long-lived by nature, yet the first
    young-generation collection after the run re-scanned all of it: 10-20 ms after every knob change, 45 ms when
    it cascaded to the middle generation. gc.freeze() + gc.unfreeze() does the move in constant time; skipped if
    someone else has frozen objects (unfreeze would thaw theirs too)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


class Run:
    """One workload under one policy, advanced a step at a time (step()), or to its end (finish())."""

    def __init__(self, config: RunConfig, workload: tuple[str, list[Request]], model: ModelSide,
                 hooks: Sequence[StepHook] = ()):
        """config: its checked knobs; workload: its name and fresh requests (resolve_workload); model: ModelSide."""
        self._start(config, workload, model, hooks, (), None)

    @classmethod
    def handed(cls, config: RunConfig, name: str, requests: list[Request], model: ModelSide,
               hooks: Sequence[StepHook] = (), pool: Callable | None = None) -> Run:
        """A run laid out for requests handed to it one by one (port.Port), none arriving by itself, each that could
        never fit rejected now, alone (their token ids checked by whoever hands them); pool(pool) wraps its KV pool."""
        return cls.__new__(cls)._start(config, (name, []), model, hooks, requests, pool)

    def _start(self, config: RunConfig, workload: tuple[str, list[Request]], model: ModelSide,
               hooks: Sequence[StepHook], handed: Sequence[Request], wrap: Callable | None) -> Run:
        self.workload_name, requests = workload
        clock = make_clock(config.clock, config.hardware, config.gpus)
        self.config, self.policy, self.dry_run = config, (policy := config.build_policy()), config.dry_run
        self.hooks, self.requests, self.now = tuple(hooks), requests, 0.0
        self.num_done = 0  # finished by the engine (aborts not counted)
        self.steps: list[StepRecord] = []
        self.forward_s = self.loop_s = 0.0  # wall time inside the runner; of whole steps (the rest: bookkeeping)
        self.open = False  # requests may still be handed to it (port.Port): it waits, its driver moves its clock
        self.next_event_s: float | None = None  # an idle run's next arrival or wake-up (None: none)
        shape = model.config
        limit = config.context_limit(shape.n_positions)
        named = 'max_model_len' if config.max_model_len else 'the context'  # words: ok (a name check_requests compares)
        reject(check_requests(requests, shape.vocab_size, limit, named, self.dry_run,
                              prompts_checked=ids_known(self.workload_name, shape.vocab_size)))
        reject(check_requests(handed, shape.vocab_size, limit, named, self.dry_run, prompts_checked=True))
        if config.policy == POLICY_OBJECT:  # a name's knobs were checked by RunConfig; an object's are checked here
            check_policy_object(policy)
        kv = layout_kv(getattr(clock, "hardware", None), shape, [*requests, *handed], policy.batch_size, model.dtype,
                       config)
        self.pool, accepted, plan = kv.pool if wrap is None else wrap(kv.pool), kv.accepted, kv.plan
        self.clock = self.pool.priced(clock)
        self.kv_units, self.kv_dtype, self.kv_capacity, self.slab_rule = plan.units, plan.dtype, plan.capacity, plan.rule
        self.kv_tensor_positions = None if self.dry_run or not accepted else kv.tensor_positions
        self.runner = model.make_runner(self.pool, self.kv_tensor_positions) if self.kv_tensor_positions else None
        self.pending = deque() if handed else deque(sorted(accepted, key=lambda r: r.arrival_s))  # not arrived yet
        self.workload_knobs: dict = dict(config.workload_knobs or {})  # a named workload's knobs, named in the trace
        self.scheduler = Scheduler(policy, self.pool, self.dry_run)
        reject(kv.refused)
        return self

    @property
    def done(self) -> bool:
        """No request of its own is left to arrive, wait or run."""
        return not self.pending and not self.scheduler.busy

    def abort(self, request_id: str) -> None:
        """Stop a request; its slot and KV are free for the next step. Unknown or finished ids are errors."""
        r = next((x for x in self.requests if x.id == request_id), None)
        if r is None:
            raise TinyserveError(t("engine.request.unknown_id", id=request_id))
        if r.done:
            raise TinyserveError(t("engine.request.already_done", id=request_id, status=r.status))
        self.pending = deque(x for x in self.pending if x is not r)  # if it has not arrived yet
        self.scheduler.abort(r, self.now)

    def finish(self, progress: bool | None = None) -> Trace:
        """Step to the end and return the trace (the one loop every caller uses); progress: a bar in a terminal or
        a notebook kernel for runs over PROGRESS_DELAY_S (None: auto); a dry run pauses the garbage collector."""
        from tqdm import tqdm

        show = (sys.stderr.isatty() or "ipykernel" in sys.modules) if progress is None else progress
        accepted = sum(r.status != REJECTED for r in self.requests)
        with tqdm(total=accepted, unit="req", delay=PROGRESS_DELAY_S, disable=not show, desc=self.policy.name) as bar, \
                (gc_paused() if self.dry_run else contextlib.nullcontext()):
            while not self.done:
                self.step()
                bar.update(self.num_done - bar.n)
            return self.trace()  # its copies are made with the collector still paused

    def step(self) -> StepRecord | None:
        """One step as the chapter draws it: arrivals -> schedule -> execute -> clock -> update -> record (None: idle)."""
        t_loop = time.perf_counter()
        self._arrivals()
        plan = self._schedule()
        if not plan.works:
            self._idle(plan)
            return None
        tokens, measured = self._execute(plan)
        start = self.now
        self.now += self.clock.step_time(plan.works, measured)
        finished = self.scheduler.update(plan, tokens, start, self.now)
        return self._record(plan, start, measured, len(finished), t_loop)

    def _arrivals(self) -> None:  # requests whose arrival time has come join the queue
        while self.pending and self.pending[0].arrival_s <= self.now:
            self.scheduler.add(self.pending.popleft())

    def _schedule(self) -> Plan:
        """The scheduler's plan for this step (hooks see the queue before it and the plan after it)."""
        self.scheduler.begin_step(len(self.steps))
        for h in self.hooks:
            h.before_plan(self)
        plan = self.scheduler.schedule(self.now, more_coming=bool(self.pending) or self.open)
        for h in self.hooks:
            h.planned(self, plan)
        return plan

    def _idle(self, plan: Plan) -> None:
        """Nothing to compute: jump the clock to the next arrival or timeout (either clock: jumped, never slept). An
        open run stays: whoever hands it requests may hand one sooner (Port.step moves it)."""
        events = [t for t in (self.pending[0].arrival_s if self.pending else None, plan.wake_s) if t is not None]
        self.next_event_s = wake = min(events, default=None)
        if wake is not None and wake <= self.now:
            raise RuntimeError(f"{self.policy.name} policy asked to wake at {wake} <= now {self.now}")  # words: ok (a bug)
        if wake is not None and not self.open:
            self.now = wake
        elif wake is None and not (self.open or self.done):
            raise RuntimeError(f"{self.policy.name} policy stalled with requests queued")  # words: ok (a bug)

    def _execute(self, plan: Plan) -> tuple[list[int], float | None]:
        """The runner's one forward over the plan's works: the sampled tokens and its wall time (a dry run: none)."""
        if self.dry_run:
            return [], None
        t0 = time.perf_counter()
        tokens = self.runner.execute(plan.works)
        self.forward_s += (measured := time.perf_counter() - t0)
        for h in self.hooks:
            h.executed(self, plan)
        return tokens, measured

    def _record(self, plan: Plan, start: float, measured: float | None, finished: int, t_loop: float) -> StepRecord:
        """The step as the trace keeps it: what each slot did, its times, the KV it held (hooks see it recorded)."""
        reserved, used, blocks = self.scheduler.step_kv
        new = tuple.__new__  # SlotWork(...) without the namedtuple's __new__: dry runs 7-15% faster (2026-12-04)
        rec = StepRecord(len(self.steps), start, self.now - start,
                         [w.record or new(SlotWork, (w.slot, w.request.id, w.phase, w.start, w.tokens, w.padding))
                          for w in plan.works],
                         reserved, used, measured, len(self.policy.waiting), **blocks)
        self.steps.append(rec)
        self.num_done += finished
        self.loop_s += time.perf_counter() - t_loop
        for h in self.hooks:
            h.recorded(self, plan, rec)
        return rec

    def trace(self) -> Trace:
        """The record of this run so far, with its KV units: a snapshot that later steps do not change."""
        hw = getattr(getattr(self.clock, "hardware", None), "name", None)
        return Trace(self.policy.name, self.workload_name, self.clock.name, hw, self.pool.num_slots,
                     dict(self.policy.knobs()), self.dry_run, list(self.steps), snapshot_requests(self.requests),
                     kv_units=self.kv_units, kv_dtype=self.kv_dtype, kv_bytes_per_token=self.pool.bytes_per_token,
                     kv_capacity_bytes=self.kv_capacity, slab_rule=words(self.slab_rule),
                     kv_tensor_positions=self.kv_tensor_positions, workload_knobs=dict(self.workload_knobs),
                     gpus=self.config.gpus, **self.pool.trace_fields(len(self.steps) - 1))
