"""The one step loop. Each step: the policy plans, the model runs ONE forward over every token of the plan,
greedy tokens are sampled, requests advance, slots are freed, the clock moves, the step is recorded."""
from __future__ import annotations

import contextlib
import gc
import math
import numbers
import sys
import time
from collections import deque
from pathlib import Path

from typing import TYPE_CHECKING

from .cache import SlotPool, kv_bytes_per_token, num_slots_for, too_big_for
from . import threads
from .errors import TinyserveError
from .config import DTYPE_BYTES, GPTConfig
from .policies import Policy, make_policy
from .requests import ABORTED, FINISHED, REJECTED, RUNNING, Request
from .tokenizer import EOS
from .trace import SlotWork, StepRecord, Trace, snapshot_requests

if TYPE_CHECKING:  # torch and the model load only when a real run needs them: dry runs never import torch
    import torch

    from .model import TinyGPT

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
    from .workloads import get_workload, load_jsonl

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TinyserveError(f"seed: must be an integer, got {seed!r}")
    if workload_knobs is not None and not isinstance(workload_knobs, dict):
        raise TinyserveError(f"workload_knobs: must be a dict of knob -> value, got {workload_knobs!r}")
    knobs = dict(workload_knobs or {})
    if knobs and (isinstance(workload, (list, tuple, Path)) or str(workload).endswith(".jsonl")):
        raise TinyserveError(f"workload_knobs: apply to a named workload only, not to "
                             f"{'a list of requests' if isinstance(workload, (list, tuple)) else 'a JSONL file'} "
                             f"(got {', '.join(map(str, knobs))})")
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


def make_clock(clock: str, hardware: str | None):
    """'modeled' (under a hardware preset) or 'wall' (measured); hardware applies to the modeled clock only."""
    from . import clock as clocks

    if clock == "wall" and hardware is not None:
        raise TinyserveError("hardware: applies to the modeled clock only (drop --hardware or use --clock modeled)")
    return clocks.make_clock(clock, hardware)


def check_requests(requests: list[Request], vocab: int, limit: int, limit_name: str, dry_run: bool) -> None:
    """Raise on malformed requests; mark those that can never fit as rejected (the others still run)."""
    ids = set()
    for r in requests:
        if r.id in ids:
            raise TinyserveError(f"requests: duplicate id {r.id!r}")
        ids.add(r.id)
        if not (isinstance(r.arrival_s, (int, float)) and math.isfinite(r.arrival_s) and r.arrival_s >= 0):
            raise TinyserveError(f"arrival_s: request {r.id!r} must be a finite number >= 0, got {r.arrival_s!r}")
        if not _valid_ids(r.prompt, vocab):
            raise TinyserveError(f"prompt: request {r.id!r} must hold integer token ids in 0..{vocab - 1}")
        if isinstance(r.max_new_tokens, bool) or not isinstance(r.max_new_tokens, numbers.Integral):
            raise TinyserveError(f"max_new_tokens: request {r.id!r} must be an integer >= 1, got {r.max_new_tokens!r}")
        hint = r.output_len_hint
        if hint is not None and (isinstance(hint, bool) or not isinstance(hint, numbers.Integral)):
            raise TinyserveError(f"output_len_hint: request {r.id!r} must be an integer in 1..max_new_tokens or None, "
                                 f"got {hint!r}")
        reason = None
        if r.prompt_len < 1:
            reason = "empty prompt"
        elif r.max_new_tokens < 1:
            reason = f"max_new_tokens must be >= 1, got {r.max_new_tokens}"
        elif r.prompt_len + r.max_new_tokens > limit:
            reason = f"prompt {r.prompt_len} tokens + max_new_tokens {r.max_new_tokens} exceeds {limit_name} of {limit}"
        elif hint is not None and not 1 <= hint <= r.max_new_tokens:  # a replay cannot outrun its own limit
            reason = f"output_len_hint {hint} must be in 1..max_new_tokens ({r.max_new_tokens})"
        if reason:
            r.status, r.finish_reason = REJECTED, reason
        elif dry_run and r.known_output_len() is None:
            raise TinyserveError(f"dry_run: request {r.id!r} has no known output length "
                                 "(set ignore_eos, or output_len_hint from an earlier real run)")


SLAB_RULES = ("max_model_len", "longest")


def slab_rule(slab: str, max_model_len: int | None, hw, server_len: int | None) -> str:
    """What sizes every slot's slab, in words the trace keeps (Trace.slab_rule)."""
    if slab == "longest":
        return "longest: the run's longest request (a what-if: no server knows it in advance)"
    if max_model_len is not None:
        return "max_model_len: given to the run"
    if hw is not None:
        return (f"max_model_len: the preset {hw.name}'s" if hw.max_model_len == server_len
                else "max_model_len: the model's context")
    return "longest: the real model's tensors, sized to the run's longest request"


class Run:
    """One workload under one policy, advanced a step at a time (Engine.run loops over it)."""

    def __init__(self, model: TinyGPT | None, cfg: GPTConfig, requests: list[Request], policy: Policy, clock,
                 workload_name: str, dtype: torch.dtype | str, device: torch.device | str, kv_budget: int | None,
                 max_model_len: int | None, dry_run: bool, slab: str = "max_model_len"):
        self.model, self.policy, self.clock, self.dry_run = model, policy, clock, dry_run
        self.requests = requests
        self.device = device
        self.now = 0.0
        self.num_done = 0  # finished by the engine (aborts not counted)
        self.kv_used_tokens = 0  # K/V tokens held by the slot holders: tallied by _advance, re-summed when one leaves
        self.steps: list[StepRecord] = []
        self.forward_s = 0.0  # wall time inside build_step + forward + sampling
        self.loop_s = 0.0  # wall time of whole steps (the rest is bookkeeping)
        if slab not in SLAB_RULES:
            raise TinyserveError(f"slab: must be one of {', '.join(SLAB_RULES)}, got {slab!r}")
        limit = cfg.n_positions
        if max_model_len is not None:
            if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or not 1 <= max_model_len <= limit:
                raise TinyserveError(f"max_model_len: must be an integer in 1..{limit}, got {max_model_len!r}")
            limit = max_model_len
        check_requests(requests, cfg.vocab_size, limit, 'max_model_len' if max_model_len else 'the context', dry_run)
        # KV in the bytes of the model the clock speaks for: the preset's model (modeled), the tiny GPT (wall)
        hw = getattr(clock, "hardware", None)
        if hw is not None:
            self.kv_units, self.kv_dtype, bpt = "modeled", hw.kv_dtype, int(hw.kv_bytes_per_token)
            memory = None if hw.kv_memory_bytes is None else int(hw.kv_memory_bytes)
        else:
            self.kv_units, self.kv_dtype, memory = "real", str(dtype).removeprefix("torch."), None
            size = DTYPE_BYTES[dtype] if isinstance(dtype, str) else dtype.itemsize  # a name on dry runs
            bpt = kv_bytes_per_token(cfg.n_layer, cfg.n_embd, size)
        caps = [(c, n) for c, n in ((kv_budget, "kv_budget"), (memory, f"{hw.name if hw else ''} KV memory"))
                if c is not None]
        self.kv_capacity, cap_name = min(caps) if caps else (None, None)
        # a server admits at most its model's context: the preset's maximum length is capped by the model run
        server_len = (None if slab == "longest" else
                      max_model_len or (min(hw.max_model_len or cfg.n_positions, cfg.n_positions) if hw else None))
        for r in requests:  # a sequence whose slab can never fit is rejected alone
            if r.status != REJECTED:
                reason = too_big_for(server_len or r.prompt_len + r.max_new_tokens, bpt, self.kv_capacity, cap_name)
                if reason:
                    r.status, r.finish_reason = REJECTED, reason
        accepted = [r for r in requests if r.status != REJECTED]
        longest = max((r.prompt_len + r.max_new_tokens for r in accepted), default=1)
        self.slab_rule = slab_rule(slab, max_model_len, hw, server_len)
        slab_tokens = server_len or longest
        self.pool = SlotPool(num_slots_for(policy.batch_size, self.kv_capacity, slab_tokens * bpt), slab_tokens, bpt)
        if dry_run or not accepted:
            self.kv, self.kv_tensor_positions = None, None
        else:  # the real model's tensors: max_model_len if given, else the run's longest (a 4,096-position slab per
            from .model import KVCache  # slot in float64 would not fit Binder's memory); the modeled bytes are apart

            self.kv_tensor_positions = max_model_len or longest
            self.kv = KVCache(cfg, self.pool.num_slots, self.kv_tensor_positions, dtype, device)
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
            raise TinyserveError(f"request_id: unknown {request_id!r}")
        if r.done:
            raise TinyserveError(f"request_id: {request_id!r} is already {r.status}")
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
            sampled = self._forward(works)
            measured = time.perf_counter() - t0
            self.forward_s += measured
        start = self.now
        self.now += self.clock.step_time(works, measured)
        newly_done = self._advance(works, sampled, start)
        new = tuple.__new__  # SlotWork(...) without the namedtuple's Python-level __new__: runs per slot per step
        rec = StepRecord(len(self.steps), start, self.now - start,
                         [w.record or new(SlotWork, (w.slot, w.request.id, w.phase, w.start, w.tokens, w.padding))
                          for w in works],
                         self.pool.reserved_bytes(), self.kv_used_tokens * self.pool.bytes_per_token, measured,
                         len(self.policy.waiting))
        self.steps.append(rec)
        for r in newly_done:
            self.policy.finished(r)
        if newly_done:  # a request may have left its slot (static: the whole batch at its last finisher)
            self.kv_used_tokens = self._running_context()
        self.num_done += len(newly_done)
        self.loop_s += time.perf_counter() - t_loop
        return rec

    def _forward(self, works) -> list[int]:
        segments, sample = [], []
        for w in works:
            r = w.request
            if w.phase == "prefill":
                segments.append((w.slot, w.start, r.prompt[w.start:w.start + w.tokens]))
                sample.append(w.start + w.tokens == r.prompt_len)
                if w.padding:  # really computed, attends only to itself, thrown away
                    segments.append((-1, 0, [EOS] * w.padding))
                    sample.append(False)
            else:
                segments.append((w.slot, w.start, [r.output[-1]]))
                sample.append(w.phase == "decode")
        from .model import build_step  # loaded already with the model; a dict lookup per step

        logits = self.model.forward_step(build_step(segments, sample, self.device), self.kv)
        return logits.argmax(-1).tolist()

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
                if r.num_prefilled < r.prompt_len:
                    continue
            else:
                r.decode_computed_tokens += 1
                grown += 1  # the K/V of the token it fed
            tok = -1 if dry else next(it)
            out = r.output
            out.append(tok)
            r.token_times.append(now)
            if len(out) >= (r.known_output_len() if dry else r.max_new_tokens) or (tok == EOS and not r.ignore_eos):
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
                     kv_tensor_positions=self.kv_tensor_positions, workload_knobs=dict(self.workload_knobs))


class Engine:
    """A model and the settings to run it; every run() starts from empty queues and slots."""

    def __init__(self, model: TinyGPT | None = None, device: str = "auto", dtype: str = "float32"):
        self._model = model
        self.device, self.dtype = device, dtype
        self._warm = False  # the wall clock's warm-up step has run
        threads.setting()  # a bad TINYSERVE_THREADS is an error for dry runs too
        if dtype not in DTYPE_BYTES:
            raise TinyserveError(f"dtype: unknown {dtype!r} (choose {', '.join(DTYPE_BYTES)})")
        if model is None and device not in ("auto", "cpu"):  # only these are valid without asking torch
            from .model import resolve_device

            resolve_device(device)  # a bad --device is an error for dry runs too

    @property
    def model(self) -> TinyGPT:
        """The model, loaded on first use (dry runs never load it)."""
        if self._model is None:
            from .model import load_model

            self._model = load_model(device=self.device, dtype=self.dtype)
        return self._model

    def start(self, workload: Workload, policy: str | Policy = "continuous", *, batch_size: int | None = None,
              timeout: float | None = None, chunk_size: int | None = None, max_batch_tokens: int | None = None,
              prefill_first: bool | None = None, max_waiting_steps: int | float | None = None,
              clock: str = "modeled", hardware: str | None = None,
              kv_budget: int | None = None, max_model_len: int | None = None, dry_run: bool = False,
              seed: int = 0, workload_knobs: dict | None = None, slab: str = "max_model_len") -> Run:
        """Set up a run without stepping it (for step-by-step use, aborts, notebooks).

        workload_knobs: a named workload's parameters (e.g. {"n": 100, "rate": 6.0}; `tinyserve workloads`);
        seed: its randomness, and that of a JSONL file's synthetic prompts. slab: "max_model_len" (a slab server:
        every slot reserves the maximum length from step 0) or "longest" (a what-if: slabs of the run's longest
        request, which no server knows in advance). Under the wall clock the model
        first runs one unmeasured warm-up step, so one-off start-up costs are not timed as a step.
        """
        knobs = {"batch_size": batch_size, "timeout": timeout, "chunk_size": chunk_size,
                 "max_batch_tokens": max_batch_tokens, "prefill_first": prefill_first,
                 "max_waiting_steps": max_waiting_steps}
        if isinstance(policy, Policy):  # its own fields are its knobs (checked when the run binds it)
            given = [k for k, v in knobs.items() if v is not None]
            if given:
                raise TinyserveError(f"{given[0]}: set it on the {type(policy).__name__} object "
                                     "(knobs apply to a policy given by name)")
        else:
            policy = make_policy(policy, **knobs)
        if kv_budget is not None and (isinstance(kv_budget, bool) or not isinstance(kv_budget, int) or kv_budget < 1):
            raise TinyserveError(f"kv_budget: must be a positive integer number of bytes, got {kv_budget!r}")
        clk = make_clock(clock, hardware)
        if dry_run and clk.name != "modeled":
            raise TinyserveError("dry_run: needs the modeled clock (a wall clock has nothing to measure)")
        name, requests = resolve_workload(workload, seed, workload_knobs)
        if dry_run and self._model is None:  # the shipped model's shape, never loaded
            cfg, dt, dev = GPTConfig(), self.dtype, "cpu"  # names only: no torch for a dry run
        else:
            m = self.model
            cfg, dt, dev = m.config, m.dtype, m.device
            if clk.name == "wall" and not dry_run:
                self._warm_up(m)
        run = Run(None if dry_run else self.model, cfg, requests, policy, clk, name, dt, dev, kv_budget,
                  max_model_len, dry_run, slab)
        run.workload_knobs = dict(workload_knobs or {})
        return run

    def _warm_up(self, model: TinyGPT) -> None:
        """Once per engine, an unmeasured step (two prefills, then two decodes) on scratch KV: the first forward in
        a fresh process pays allocations and kernel choices (measured ~100x a warm step), not a step's cost."""
        if self._warm:
            return
        from .model import KVCache, build_step

        kv = KVCache(model.config, 2, 16, model.dtype, model.device)
        for segments in ([(0, 0, [EOS] * 8), (1, 0, [EOS] * 4)], [(0, 8, [EOS]), (1, 4, [EOS])]):
            model.forward_step(build_step(segments, [True, True], model.device), kv).argmax(-1).tolist()
        self._warm = True

    def run(self, workload: Workload, policy: str | Policy = "continuous", *, progress: bool | None = None,
            **knobs) -> Trace:
        """Run a workload to the end and return its Trace (knobs as in start()); progress: None = auto."""
        run = self.start(workload, policy, **knobs)
        from tqdm import tqdm

        # default: a bar in a terminal or a notebook kernel; tqdm's delay keeps runs under 1 s silent
        show = (sys.stderr.isatty() or "ipykernel" in sys.modules) if progress is None else progress
        accepted = sum(r.status != REJECTED for r in run.requests)
        with tqdm(total=accepted, unit="req", delay=PROGRESS_DELAY_S, disable=not show, desc=run.policy.name) as bar, \
                (gc_paused() if run.dry_run else contextlib.nullcontext()):
            while not run.done:
                run.step()
                bar.update(run.num_done - bar.n)
            return run.trace()  # its copies are made with the collector still paused
