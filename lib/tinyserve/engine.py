"""Engine: the shipped model (or yours) and the settings to run it; each run is a Run (loop.py) with a ModelRunner.

The wiring between the layers: core/ plans, loop.py steps and records without torch, model/ executes steps. A dry
run never loads the model (nor torch). The names of the step loop (Run, StepHook, resolve_workload, ...) are
re-exported here, the module path the notebooks and exercises import.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import threads
from .core.config import GPTConfig, RunConfig, check_device, check_dtype
from .core.scheduling import Policy, policy_for
from .core.request import Request, check_requests  # noqa: F401  check_requests: re-exported (an old engine name)
from .core.workloads import Workload, resolve_workload
from .cost.clock import make_clock
from .loop import PROGRESS_DELAY_S, Run, StepHook, gc_paused  # noqa: F401  (re-exported)
from .trace.record import Trace

if TYPE_CHECKING:  # torch and the model load only when a real run needs them: dry runs never import torch
    from .model.gpt import TinyGPT
    from .model.runner import ModelRunner


class Engine:
    """A model and the settings to run it; every run() starts from empty queues and slots."""

    def __init__(self, model: TinyGPT | None = None, device: str = "auto", dtype: str = "float32"):
        self._model = model
        self.device, self.dtype = device, dtype
        self._warm = False  # the wall clock's warm-up step has run
        threads.setting()  # a bad TINYSERVE_THREADS is an error for dry runs too
        check_dtype(dtype)
        check_device(device)  # a bad --device is an error for dry runs too, and without torch
        if model is None and device == "cuda":  # whether there is one only torch can say
            from .model.checkpoint import resolve_device

            resolve_device(device)

    @property
    def model(self) -> TinyGPT:
        """The model, loaded on first use (dry runs never load it)."""
        if self._model is None:
            from .model.checkpoint import load_model

            self._model = load_model(device=self.device, dtype=self.dtype)
        return self._model

    def start(self, workload: Workload, policy: str | Policy = "continuous", *, batch_size: int | None = None,
              timeout: float | None = None, chunk_size: int | None = None, max_batch_tokens: int | None = None,
              prefill_first: bool | None = None, max_waiting_steps: int | float | None = None,
              clock: str = "modeled", hardware: str | None = None,
              kv_budget: int | None = None, max_model_len: int | None = None, dry_run: bool = False,
              seed: int = 0, workload_knobs: dict | None = None, slab: str = "max_model_len",
              kv_layout: str = "slab", block_size: int | None = None, hooks: Sequence[StepHook] = ()) -> Run:
        """Set up a run without stepping it (for step-by-step use, aborts, notebooks).

        workload_knobs: a named workload's parameters (e.g. {"n": 100, "rate": 6.0}; `tinyserve workloads`);
        seed: its randomness, and that of a JSONL file's synthetic prompts. slab: "max_model_len" (a slab server:
        every slot reserves the maximum length from step 0) or "longest" (a what-if: slabs of the run's longest
        request, which no server knows in advance). kv_layout: "slab" or "paged" (a pool of block_size-position
        blocks, default 16, sized to the preset's KV memory, --kv-budget, or the slabs' bytes). Under the wall clock the model
        first runs one unmeasured warm-up step, so one-off start-up costs are not timed as a step. hooks: StepHook
        objects that watch every step (loop.py).
        """
        knobs = {"batch_size": batch_size, "timeout": timeout, "chunk_size": chunk_size,
                 "max_batch_tokens": max_batch_tokens, "prefill_first": prefill_first,
                 "max_waiting_steps": max_waiting_steps}
        run_knobs = {"clock": clock, "hardware": hardware, "kv_budget": kv_budget, "max_model_len": max_model_len,
                     "dry_run": dry_run, "seed": seed, "workload_knobs": workload_knobs, "slab": slab,
                     "kv_layout": kv_layout, "block_size": block_size}
        rc = (RunConfig.for_object(type(policy).__name__, knobs, **run_knobs) if isinstance(policy, Policy)
              else RunConfig(policy, **knobs, **run_knobs))
        return self.start_config(workload, rc, policy if isinstance(policy, Policy) else None, hooks)

    def start_config(self, workload: Workload, rc: RunConfig, policy: Policy | None = None,
                     hooks: Sequence[StepHook] = ()) -> Run:
        """start() from a checked RunConfig (policy: the object when rc.policy is POLICY_OBJECT)."""
        name, requests = resolve_workload(workload, rc.seed, rc.workload_knobs)
        return self.start_requests(name, requests, rc, policy, hooks)

    def start_requests(self, name: str, requests: list[Request], rc: RunConfig, policy: Policy | None = None,
                       hooks: Sequence[StepHook] = (), later: Sequence[Request] = (),
                       prompts_checked: bool = False) -> Run:
        """A run of these requests (fresh ones: the run fills them in); later: requests a deployment may admit
        (Run.admit), laid out for but not queued; prompts_checked: their token ids were checked by an earlier run."""
        policy = policy if policy is not None else policy_for(rc)
        clk = make_clock(rc.clock, rc.hardware)
        dry_run = rc.dry_run
        if dry_run and self._model is None:  # the shipped model's shape, never loaded
            cfg, dt = GPTConfig(), self.dtype  # names only: no torch for a dry run
        else:
            m = self.model
            cfg, dt = m.config, m.dtype
            if clk.name == "wall" and not dry_run:
                self._warm_up(m)
        return Run(rc, requests, policy, clk, model=cfg, dtype=dt, make_runner=None if dry_run else self._runner_for,
                   workload_name=name, hooks=hooks, later=later, prompts_checked=prompts_checked)

    def _runner_for(self, num_slots: int, slab_positions: int, block_size: int | None = None) -> ModelRunner:
        """The model's runner with KV slabs for a run, or a block pool (Run sizes them: slots and positions)."""
        from .model.runner import ModelRunner

        return ModelRunner(self.model, num_slots, slab_positions, block_size)

    def _warm_up(self, model: TinyGPT) -> None:
        """Once per engine, an unmeasured step before the first wall-clock run (ModelRunner.warm_up)."""
        if self._warm:
            return
        from .model.runner import ModelRunner

        ModelRunner.warm_up(model)
        self._warm = True

    def run(self, workload: Workload, policy: str | Policy = "continuous", *, progress: bool | None = None,
            **knobs) -> Trace:
        """Run a workload to the end and return its Trace (knobs as in start()); progress: None = auto."""
        return self.start(workload, policy, **knobs).finish(progress)
