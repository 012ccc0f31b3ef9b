"""Engine: the shipped model (or yours) and the settings to run it; each run is a Run (loop.py) with a ModelRunner.

The wiring between the layers: core/ plans, loop.py steps and records without torch, model/ executes steps. A dry
run never loads the model (nor torch). One way in: start(workload, policy, config, hooks=..., **knobs), whose knobs
are RunConfig's fields; run() is start() and finish().
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .core.config import FROM_CONFIG, GPTConfig, RunConfig, check_device, check_dtype, threads_setting
from .core.scheduling import Policy
from .core.workloads import Workload, resolve_workload
from .cost.clock import make_clock
from .loop import ModelSide, Run, StepHook
from .trace.record import Trace

if TYPE_CHECKING:  # torch and the model load only when a real run needs them: dry runs never import torch
    from .core.kv import KVPool
    from .model.gpt import TinyGPT
    from .model.runner import ModelRunner


class Engine:
    """A model and the settings to run it; every run() starts from empty queues and slots."""

    def __init__(self, model: TinyGPT | None = None, device: str = "auto", dtype: str = "float32"):
        self._model = model
        self.device, self.dtype = device, dtype
        self._warm = False  # the wall clock's warm-up step has run
        threads_setting()  # a bad TINYSERVE_THREADS is an error for dry runs too
        check_dtype(dtype)
        check_device(device)  # a bad --device is an error for dry runs too, and without torch
        if model is None and device == "cuda":  # whether there is one only torch can say
            from .model.runner import resolve_device

            resolve_device(device)

    @property
    def model(self) -> TinyGPT:
        """The model, loaded on first use (dry runs never load it)."""
        if self._model is None:
            from .model.runner import load_model

            self._model = load_model(device=self.device, dtype=self.dtype)
        return self._model

    def start(self, workload: Workload, policy: str | Policy | None = FROM_CONFIG, config: RunConfig | None = None,
              *, hooks: Sequence[StepHook] = (), **knobs) -> Run:
        """Set up a run without stepping it (for step-by-step use, aborts, notebooks): the one way in.

        policy: a name or a Policy object (left out: the config's, else "continuous"); config: a RunConfig; knobs:
        RunConfig fields on top of it, checked there (batch_size, chunk_size, clock, hardware, dry_run, seed,
        workload_knobs, kv_layout, ...: core/config.py says what each means). Under the wall clock the model
        first runs one unmeasured warm-up step, so one-off start-up costs are not timed as a step. hooks: StepHook
        objects that watch every step (loop.py).
        """
        rc = RunConfig.of(policy, config, knobs)
        requests = resolve_workload(workload, rc.seed, rc.workload_knobs)
        if self._model is None and not rc.dry_run:  # an unknown preset is refused before the model loads
            make_clock(rc.clock, rc.hardware, rc.gpus)
        return Run(rc, requests, self.model_side(rc), hooks)

    def model_side(self, rc: RunConfig) -> ModelSide:
        """What a run of rc needs of the model: the shipped model's shape on a dry run (never loaded, no torch),
        else the model itself, warmed up for the wall clock, and the maker of its runner."""
        if rc.dry_run and self._model is None:
            return ModelSide(GPTConfig(), self.dtype)
        m = self.model
        if rc.clock == "wall" and not rc.dry_run:
            self._warm_up(m)
        return ModelSide(m.config, m.dtype, None if rc.dry_run else self._runner_for)

    def _runner_for(self, pool: KVPool, positions: int) -> ModelRunner:
        """The model's runner with the K/V a run's pool lays out (Run sizes them: `positions` of tensors)."""
        from .model.runner import ModelRunner

        return pool.runner(ModelRunner, self.model, positions)

    def _warm_up(self, model: TinyGPT) -> None:
        """Once per engine, an unmeasured step before the first wall-clock run (ModelRunner.warm_up)."""
        if self._warm:
            return
        from .model.runner import ModelRunner

        ModelRunner.warm_up(model)
        self._warm = True

    def run(self, workload: Workload, policy: str | Policy | None = FROM_CONFIG, config: RunConfig | None = None, *,
            progress: bool | None = None, hooks: Sequence[StepHook] = (), **knobs) -> Trace:
        """start() and finish(): run a workload to the end and return its Trace; progress: None = auto."""
        return self.start(workload, policy, config, hooks=hooks, **knobs).finish(progress)
