"""The one step loop (torch-free). Each step: the policy plans, the runner executes ONE forward over every token
of the plan and samples greedy tokens, requests advance, slots are freed, the clock moves, the step is recorded.
A dry run is the same loop without a runner."""
from __future__ import annotations

import contextlib
import gc
import math
import numbers
import time
from collections import deque
from pathlib import Path

from typing import TYPE_CHECKING, Callable

from ..cost import clock as clocks
from ..errors import TinyserveError
from ..lang import t
from ..trace.record import StepRecord, Trace, snapshot_requests
from .blocks import step_blocks
from .config import DEFAULT_BLOCK_SIZE, GPTConfig
from .layout import layout_kv
from .policies import Policy
from .request import ABORTED, FINISHED, REJECTED, RUNNING, Request, SlotWork
from .tokenizer import EOS
from .workloads import get_workload, load_jsonl

if TYPE_CHECKING:
    from ..model.runner import ModelRunner

Workload = str | Path | list[Request]
PROGRESS_DELAY_S = 1.0  # a progress bar appears only for runs longer than this


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


def resolve_workload(workload: Workload, seed: int = 0, workload_knobs: dict | None = None
                     ) -> tuple[str, list[Request]]:
    """(name, fresh requests) from a workload name (with its knobs, e.g. n, rate), a JSONL path or a list of requests;
    seed drives a named workload and a JSONL file's synthetic (prompt_len) prompts."""
    knobs = dict(workload_knobs or {})
    if knobs and (isinstance(workload, (list, tuple, Path)) or str(workload).endswith(".jsonl")):
        what = t("engine.workload.a_list" if isinstance(workload, (list, tuple)) else "engine.workload.a_jsonl")
        raise TinyserveError(t("engine.knob.workload_knobs_named", what=what, knobs=", ".join(map(str, knobs))))
    if isinstance(workload, (list, tuple)):
        return "custom", [r.fresh() for r in workload]
    if isinstance(workload, Path) or str(workload).endswith(".jsonl"):
        return str(workload), load_jsonl(workload, seed=seed)
    return str(workload), get_workload(str(workload), seed=seed, **knobs)


def _valid_ids(ids: list, vocab: int) -> bool:
    """Token ids are integers (not bools) in 0..vocab-1; plain ints first (in C: a dry run checks ~100,000 ids on
    every knob change), the slow ABC check only if needed."""
    if set(map(type, ids)) == {int}:
        return 0 <= min(ids) and max(ids) < vocab
    return all(isinstance(t, numbers.Integral) and not isinstance(t, bool) and 0 <= t < vocab for t in ids)


make_clock = clocks.make_clock  # the old engine.make_clock (RunConfig checks --clock and --hardware together)


def check_requests(requests: list[Request], vocab: int, limit: int, limit_name: str, dry_run: bool) -> None:
    """Raise on malformed requests; mark those that can never fit as rejected (the others still run)."""
    ids = set()
    for r in requests:
        if r.id in ids:
            raise TinyserveError(t("engine.request.duplicate", id=r.id))
        ids.add(r.id)
        if not (isinstance(r.arrival_s, (int, float)) and math.isfinite(r.arrival_s) and r.arrival_s >= 0):
            raise TinyserveError(t("engine.request.arrival", id=r.id, value=r.arrival_s))
        if not _valid_ids(r.prompt, vocab):
            raise TinyserveError(t("engine.request.token_ids", id=r.id, top=vocab - 1))
        if isinstance(r.max_new_tokens, bool) or not isinstance(r.max_new_tokens, numbers.Integral):
            raise TinyserveError(t("engine.request.max_new_tokens", id=r.id, value=r.max_new_tokens))
        hint = r.output_len_hint
        if hint is not None and (isinstance(hint, bool) or not isinstance(hint, numbers.Integral)):
            raise TinyserveError(t("engine.request.hint", id=r.id, value=hint))
        reason = None
        if r.prompt_len < 1:
            reason = t("engine.reject.empty")
        elif r.max_new_tokens < 1:
            reason = t("engine.reject.max_new_tokens", value=r.max_new_tokens)
        elif r.prompt_len + r.max_new_tokens > limit:
            key = "max_model_len" if limit_name == "max_model_len" else "context"  # limit_name: the one or 'the context'
            reason = t(f"engine.reject.too_long.{key}", prompt=r.prompt_len, new=r.max_new_tokens, limit=limit)
        elif hint is not None and not 1 <= hint <= r.max_new_tokens:  # a replay cannot outrun its own limit
            reason = t("engine.reject.hint", hint=hint, max_new=r.max_new_tokens)
        if reason:
            r.status, r.finish_reason = REJECTED, reason
        elif dry_run and r.known_output_len() is None:
            raise TinyserveError(t("engine.request.dry_run_length", id=r.id))


class Run:
    """One workload under one policy, advanced a step at a time (Engine.run loops over it)."""

    def __init__(self, make_runner: Callable[..., ModelRunner] | None, cfg: GPTConfig,
                 requests: list[Request], policy: Policy, clock, workload_name: str, dtype, kv_budget: int | None,
                 max_model_len: int | None, dry_run: bool, slab: str = "max_model_len", kv_layout: str = "slab",
                 block_size: int = DEFAULT_BLOCK_SIZE):
        """make_runner(num_slots, slab_positions[, block_size]): the model's runner with its KV slabs, or its block
        pool of slab_positions // block_size blocks (None for a dry run); dtype: the model's (a torch dtype or its
        name) for the KV bytes under the wall clock; kv_layout "slab" or "paged" (core/blocks.py)."""
        self.policy, self.clock, self.dry_run = policy, clock, dry_run
        self.requests = requests
        self.now = 0.0
        self.num_done = 0  # finished by the engine (aborts not counted)
        self.kv_used_tokens = 0  # K/V tokens held by the slot holders: tallied by _advance, re-summed when one leaves
        self.steps: list[StepRecord] = []
        self.forward_s = 0.0  # wall time inside the runner (segments, build_step, forward, sampling)
        self.loop_s = 0.0  # wall time of whole steps (the rest is bookkeeping)
        self.preempted_once = False  # paged: a request has been preempted (so some prefills are recomputes)
        limit = cfg.n_positions
        if max_model_len is not None:
            if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or not 1 <= max_model_len <= limit:
                raise TinyserveError(t("engine.knob.max_model_len", limit=limit, value=max_model_len))
            limit = max_model_len
        check_requests(requests, cfg.vocab_size, limit, 'max_model_len' if max_model_len else 'the context', dry_run)
        self.paged = kv_layout == "paged"
        if self.paged and hasattr(clock, "for_layout"):  # a modeled clock prices what the paged engine computes
            self.clock = clock.for_layout(block_size)
        kv = layout_kv(getattr(clock, "hardware", None), cfg, requests, policy.batch_size, dtype, kv_budget,
                       max_model_len, slab, self.paged, block_size)
        self.pool, accepted, plan = kv.pool, kv.accepted, kv.plan
        self.kv_units, self.kv_dtype, self.kv_capacity, self.slab_rule = plan.units, plan.dtype, plan.capacity, plan.rule
        self.kv_tensor_positions = None if dry_run or not accepted else kv.tensor_positions
        self.runner = None if self.kv_tensor_positions is None else (
            make_runner(self.pool.num_slots, self.kv_tensor_positions, block_size) if self.paged
            else make_runner(self.pool.num_slots, self.kv_tensor_positions))
        self.pending = deque(sorted(accepted, key=lambda r: r.arrival_s))  # not arrived yet
        self.workload_name = workload_name
        self.workload_knobs: dict = {}  # a named workload's knobs (Engine.start sets them), named in the trace
        policy.bind(self.pool)

    @property
    def done(self) -> bool:
        """No request is left to arrive, wait or run."""
        return not self.pending and not self.policy.waiting and not self.policy.running

    def abort(self, request_id: str) -> None:
        """Stop a request; its slot and KV are free for the next step. Unknown or finished ids are errors."""
        r = next((x for x in self.requests if x.id == request_id), None)
        if r is None:
            raise TinyserveError(t("engine.request.unknown_id", id=request_id))
        if r.done:
            raise TinyserveError(t("engine.request.already_done", id=request_id, status=r.status))
        if r in self.pending:
            self.pending.remove(r)
        r.status, r.finish_s, r.finish_reason = ABORTED, self.now, "aborted"
        self.policy.finished(r)
        self.kv_used_tokens = self._running_context()

    def step(self) -> StepRecord | None:
        """Run one step; None when nothing could run now (the clock then jumps to the next event)."""
        t_loop = time.perf_counter()
        while self.pending and self.pending[0].arrival_s <= self.now:
            self.policy.add(self.pending.popleft())
        if self.paged:
            self.pool.begin_step(len(self.steps))
            self.policy.grow()
            if self.pool.preempted:  # who left took their K/V with them
                self.kv_used_tokens = self._running_context()
                self.preempted_once = True
        plan = self.policy.plan(self.now, more_coming=bool(self.pending))
        works = plan.works
        if not works:
            events = [t for t in (self.pending[0].arrival_s if self.pending else None, plan.wake_s) if t is not None]
            if not events:
                if not self.done:
                    raise RuntimeError(f"{self.policy.name} policy stalled with requests queued")  # a bug
                return None
            if min(events) <= self.now:
                raise RuntimeError(f"{self.policy.name} policy asked to wake at {min(events)} <= now {self.now}")
            self.now = min(events)  # idle until the next arrival or timeout: jumped, never slept (either clock)
            return None
        sampled: list[int] = []
        measured = None
        if not self.dry_run:
            t0 = time.perf_counter()
            sampled = self.runner.execute(works)
            measured = time.perf_counter() - t0
            self.forward_s += measured
        start = self.now
        self.now += self.clock.step_time(works, measured)
        newly_done = self._advance(works, sampled, start)
        if self.paged:  # the step's block counts, preemptions and recomputed tokens (after its K/V were stored)
            self._block_fields = step_blocks(self.pool, self.policy.running, works, self.preempted_once)
        new = tuple.__new__  # SlotWork(...) without the namedtuple's Python-level __new__: runs per slot per step
        rec = StepRecord(len(self.steps), start, self.now - start,
                         [w.record or new(SlotWork, (w.slot, w.request.id, w.phase, w.start, w.tokens, w.padding))
                          for w in works],
                         self.pool.reserved_bytes(), self.kv_used_tokens * self.pool.bytes_per_token, measured,
                         len(self.policy.waiting), **self._block_fields)
        self.steps.append(rec)
        for r in newly_done:
            self.policy.finished(r)
        if newly_done:  # a request may have left its slot (static: the whole batch at its last finisher)
            self.kv_used_tokens = self._running_context()
        self.num_done += len(newly_done)
        self.loop_s += time.perf_counter() - t_loop
        return rec

    _block_fields: dict = {}  # the paged layout's StepRecord fields of the step being recorded (none for slabs)

    def _running_context(self) -> int:
        """Tokens whose K/V the slot holders keep (Request.context_len summed over the policy's running)."""
        return sum(r.context_len for r in self.policy.running)

    def _advance(self, works, sampled: list[int], start: float) -> list[Request]:
        """Apply the step's results to its requests; return those that are now done. Also grows
        kv_used_tokens by the K/V this step stored (a tally, not a sum over every slot of every step)."""
        it = iter(sampled)
        done = []
        grown = 0
        now, dry = self.now, self.dry_run  # locals: the loop runs for every slot of every step
        for w in works:
            r = w.request
            phase = w.phase
            if phase == "wasted":  # the commonest work of a static batch: a done request, already admitted
                r.decode_computed_tokens += 1
                continue
            if r.admitted_s is None:  # admitted = first computed
                r.admitted_s, r.status = start, RUNNING
            if phase == "prefill":
                r.num_prefilled += w.tokens
                r.prefill_computed_tokens += w.tokens + w.padding
                grown += w.tokens  # its K/V stored; the first token it samples adds none (context_len)
                if r.num_prefilled < r.prefill_len:
                    continue
                if r.prefill_len != r.prompt_len:  # a recompute after a preemption is done: decoding as before
                    r.num_prefilled = r.prefill_len = r.prompt_len
            else:
                r.decode_computed_tokens += 1
                grown += 1  # the K/V of the token it fed
            out = r.output
            if dry:  # no token: the length alone ends it (known_output_len inlined: a hint, else max_new_tokens,
                tok, hint = -1, r.output_len_hint  # which check_requests made sure of)
                ended = len(out) + 1 >= (r.max_new_tokens if hint is None else hint)
            else:
                tok = next(it)
                ended = len(out) + 1 >= r.max_new_tokens or (tok == EOS and not r.ignore_eos)
            out.append(tok)
            r.token_times.append(now)
            if ended:
                r.status, r.finish_s = FINISHED, now
                # a dry run has no tokens: a replay that stopped short of max_new_tokens stopped at EOS
                eos = tok == EOS if not dry else r.output_len < r.max_new_tokens
                r.finish_reason = "eos" if eos and not r.ignore_eos else "length"
                done.append(r)
        self.kv_used_tokens += grown
        return done

    def trace(self) -> Trace:
        """The record of this run so far, with its KV units: a snapshot that later steps do not change."""
        hw = getattr(getattr(self.clock, "hardware", None), "name", None)
        return Trace(self.policy.name, self.workload_name, self.clock.name, hw, self.pool.num_slots,
                     dict(self.policy.knobs()), self.dry_run, list(self.steps), snapshot_requests(self.requests),
                     kv_units=self.kv_units, kv_dtype=self.kv_dtype, kv_bytes_per_token=self.pool.bytes_per_token,
                     kv_capacity_bytes=self.kv_capacity, slab_bytes=self.pool.slab_bytes,
                     slab_tokens=self.pool.slab_tokens, slab_rule=self.slab_rule,
                     kv_tensor_positions=self.kv_tensor_positions, workload_knobs=dict(self.workload_knobs),
                     **({"kv_layout": "paged", "block_size": self.pool.block_size, "num_blocks": self.pool.num_blocks,
                         "block_spans": self.pool.closed_spans(len(self.steps) - 1)} if self.paged else {}))
