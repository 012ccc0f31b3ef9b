"""Knobs that re-run the engine (its dry run: the same step loop, no model) and redraw every view; a button that
runs the real tiny GPT with a progress bar; two settings side by side. A bad setting shows a message inside
the widget and the previous figures stay."""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import replace

import ipywidgets as W

from tinyserve.analysis.figures import policy_name
from tinyserve.core.blocks import DEFAULT_BLOCK_SIZE
from tinyserve.core.config import LAYOUTS as ENGINE_LAYOUTS, RUN_FIELDS, RunConfig, policy_classes, pool_class, takes
from tinyserve.core.knobs import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK, DEFAULT_MAX_WAITING_STEPS, POLICY_KNOBS
from tinyserve.core.request import REJECTED
from tinyserve.core.workloads import WORKLOADS, get_workload
from tinyserve.cost.presets import DEFAULT_HARDWARE, list_presets
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.lang import t
from tinyserve.loop import StepHook
from tinyserve.trace.record import Trace

from .board import BOARD_WIDTH_PX, VIEWS, Cursor, TraceView
from .views import LatencyView, follow_language
from .words import layout_name, workload_label

HISTORY = 8  # traces an Explorer keeps (Explorer.traces)


class _ProgressBar(StepHook):
    """The real run's progress in the widget's bar and status line, a few times a second (the run is watched)."""

    def __init__(self, progress: W.FloatProgress, status: W.HTML):
        self.progress, self.status, self.total, self.last = progress, status, 1, 0.0

    def recorded(self, run, plan, record) -> None:
        if time.perf_counter() - self.last > 0.25:  # a few updates a second is enough for the bar
            self.last = time.perf_counter()
            self.progress.value = run.num_done
            self.status.value = _small(t("explorer.real.running", done=run.num_done, total=self.total,
                                         steps=len(run.steps)))

BATCH = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
CHUNKS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
# option labels given as word keys ("opt.*"); _opts() looks them up when a slider is built
BUDGETS = [("opt.auto", "auto"), 32, 64, 128, 256, 544, 1024, 2048, 4096, 8192]
TIMEOUTS = [("opt.full_batch", "full"), 0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0]
WAITS = [1, 5, 20, 100, ("opt.unbounded", math.inf)]
KV_BUDGETS = [("opt.no_cap", "none")] + [(f"{gb:g} GB", int(gb * 10**9)) for gb in (0.1, 1, 4, 16, 64)]
RATES = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
SLABS = [("opt.preset_len", "preset"), 256, 512, 1024, 2048, 3072, 4096]  # max_model_len: every slot's slab
ORDERS = [("knob.prefill_first", True), ("knob.decode_first", False)]
AXES = [("knob.x.steps", "steps"), ("knob.x.time", "time")]
LAYOUTS = list(ENGINE_LAYOUTS)  # kv_layout (code names: the engine's own)
BLOCK_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]  # positions per block (paged); vLLM's default 16
KV_KNOBS = ("kv_layout", "block_size")  # shown where the views include the block map or the KV view
# per knob, the word key of each named option's value (a language change relabels the options from it)
_KEYED = {name: {v: key for key, v in (o for o in base if isinstance(o, tuple)) if key.startswith(("opt.", "knob."))}
          for name, base in (("max_batch_tokens", BUDGETS), ("timeout", TIMEOUTS), ("max_waiting_steps", WAITS),
                             ("kv_budget", KV_BUDGETS), ("max_model_len", SLABS), ("order", ORDERS), ("x", AXES))}
def _workload_option(name: str) -> str:
    return t("widgets.workload.custom") if name == "custom" else name


_NAMED = {"policy": policy_name, "kv_layout": layout_name,  # options named in the reader's language by a function
          "workload": _workload_option}
REAL_LIMIT_TOKENS = 200_000  # prompt + output tokens a real CPU run may take here (about a minute)
REAL_LIMIT_S = 10.0  # a real run is offered when the cpu-tiny cost model (fitted to a one-thread CPU run) says
# the same steps compute for at most this long (real_seconds: idle gaps between arrivals are jumped, not waited):
# a knob moved far (chunks of 1 token) can make a short workload slow
CONTROLS = ("policy", "batch_size", "chunk_size", "max_batch_tokens", "timeout", "order", "max_waiting_steps",
            "workload", "n", "rate", "hardware", "kv_budget", "max_model_len", "kv_layout", "block_size", "x")


# the knobs' controls (names as RunConfig's, but "order": prefill_first), and where each starts unless given
STARTS = {"batch_size": DEFAULT_BATCH_SIZE, "chunk_size": DEFAULT_CHUNK, "max_batch_tokens": None, "timeout": None,
          "prefill_first": True, "max_waiting_steps": DEFAULT_MAX_WAITING_STEPS, "hardware": DEFAULT_HARDWARE,
          "kv_budget": None, "max_model_len": None, "kv_layout": "slab", "block_size": DEFAULT_BLOCK_SIZE}
# a policy's knobs by the control that sets each; which ones a policy takes, its class says (takes)
POLICY_CONTROLS = {("order" if knob == "prefill_first" else knob): knob for knob in POLICY_KNOBS}
ORDER = ("prefill_first", "max_waiting_steps")  # two ways of saying one thing: the order buttons and a bound
NOT_KNOBS = ("policy", "policy_object")  # RunConfig fields no keyword sets (the policy is its own argument)
# the explorer's own settings beside a RunConfig's (Explorer's docstring)
OWN = {"n": None, "rate": None, "x": "steps", "policies": None, "real_knobs": None, "k": 0}
NONE = {"auto": None, "full": None, "none": None, "preset": None}  # slider values meaning "not set" (a SelectionSlider needs a value)


def _unset(v):
    return None if isinstance(v, str) and v in NONE else v


def _opts(base: list, value) -> list[tuple[str, object]]:
    """(label, value) slider options with value among them (a caller's own value is inserted in order)."""
    named = [(t(label) if label.startswith("opt.") else label, v)
             for label, v in (o for o in base if isinstance(o, tuple))]
    plain = sorted({o for o in base if not isinstance(o, tuple)} | (
        set() if value in [v for _, v in named] or value is None else {value}))
    return named + [(f"{v:g}" if isinstance(v, float) else str(v), v) for v in plain]


def _slider(key: str, base: list, value, width: str = "300px") -> W.SelectionSlider:
    if value is None:
        value = next(o[1] for o in base if isinstance(o, tuple) and o[1] in NONE)
    return W.SelectionSlider(options=_opts(base, value), value=value, description=t(f"knob.{key}"),
                             continuous_update=False, style={"description_width": "initial"},
                             layout=W.Layout(width=width))


def set_knobs(owner, values: dict, prepare=lambda name, w, v: v) -> None:
    """Set several of an explorer's knobs with its redraws held (prepare(name, widget, value) may widen a
    slider's options for the value); an unknown knob name raises, naming the known ones."""
    unknown = set(values) - set(owner.knobs)
    if unknown:
        raise ValueError(t("widgets.error.knobs", unknown=sorted(unknown), choices=", ".join(owner.knobs)))
    owner._hold = True
    try:
        for name, v in values.items():
            w = owner.knobs[name]
            w.value = prepare(name, w, v)
    finally:
        owner._hold = False


class Explorer:
    """Knobs -> the engine's dry run -> every view redrawn under one cursor; plus a real-model run button."""

    def __init__(self, workload: str | list = "chapter-7.2-longtail", policy: str | None = None, *,
                 config: RunConfig | None = None, views: tuple[str, ...] = VIEWS, controls: tuple[str, ...] = CONTROLS,
                 cursor: Cursor | None = None, real_button: bool = True, width: int = BOARD_WIDTH_PX, **knobs):
        """policy: the policy shown first (None: the config's, else continuous); config: the run's other settings
        (a RunConfig; its knobs start the sliders); knobs: a RunConfig field (batch_size=8, chunk_size=64, ...: it
        starts its slider, or is a setting of every run, as workload_knobs: fixed knobs of a named workload that
        are not controls) or one of the explorer's own (OWN: n, rate, x; policies: the policy buttons offered,
        default all; real_knobs: workload knobs the real-model run uses instead, a scaled-down copy said in the
        widget, e.g. {"n": 16}; k: the cursor's first step, negative from the end)."""
        unknown = [name for name in knobs if name not in OWN and (name not in RUN_FIELDS or name in NOT_KNOBS)]
        if unknown:  # as Python says it of any function
            raise TypeError("Explorer() got an unexpected keyword argument " + repr(unknown[0]))  # words: ok
        config = config or RunConfig()
        policy = policy or config.policy
        own = {**OWN, **{name: v for name, v in knobs.items() if name in OWN}}
        start = {**STARTS, **{f: getattr(config, f) for f in STARTS if getattr(config, f) is not None},
                 **{name: v for name, v in knobs.items() if name in STARTS}}
        # the settings of every run that are no control (clock, slab, gpus, ...): the config's, and those given
        self.base = {f: knobs.get(f, getattr(config, f)) for f in RUN_FIELDS if f not in STARTS and f not in NOT_KNOBS}
        seed, workload_knobs = self.base.pop("seed"), self.base.pop("workload_knobs")
        self.engine = Engine()  # dry runs never load the model
        self.real_knobs, self.fixed_knobs = dict(own["real_knobs"] or {}), dict(workload_knobs or {})
        self.seed, self._hold, self.on_trace = seed, False, []
        self.custom = None if isinstance(workload, str) else list(workload)
        names = list(WORKLOADS) + ([workload] if isinstance(workload, str) and workload not in WORKLOADS else []) + (
            ["custom"] if self.custom is not None else [])
        wl = workload if isinstance(workload, str) else "custom"
        spec = WORKLOADS.get(wl, ("", None, {}))[2]
        k = self.knobs = {
            "policy": W.ToggleButtons(options=[(policy_name(p), p) for p in (own["policies"] or policy_classes())],
                                      value=policy, description=t("knob.policy"), style={"button_width": "auto"}),
            "batch_size": _slider("batch_size", BATCH, start["batch_size"]),
            "chunk_size": _slider("chunk_size", CHUNKS, start["chunk_size"]),
            "max_batch_tokens": _slider("max_batch_tokens", BUDGETS, start["max_batch_tokens"], "400px"),
            "timeout": _slider("timeout", TIMEOUTS, start["timeout"]),
            "order": W.ToggleButtons(options=[(t(k), v) for k, v in ORDERS], value=start["prefill_first"],
                                     description=t("knob.order"), style={"button_width": "auto"}),
            "max_waiting_steps": _slider("max_waiting_steps", WAITS, start["max_waiting_steps"]),
            "workload": W.Dropdown(options=[(_workload_option(n), n) for n in names], value=wl,
                                   description=t("knob.workload"),
                                   layout=W.Layout(width="320px")),
            "n": W.IntSlider(value=spec.get("n", (32,))[0] if own["n"] is None else own["n"], min=0, max=400,
                             description=t("knob.n"), continuous_update=False, layout=W.Layout(width="300px")),
            "rate": _slider("rate", RATES, own["rate"] or spec.get("rate", (4.0,))[0]),
            "hardware": W.Dropdown(options=list_presets(), value=start["hardware"], description=t("knob.hardware"),
                                   style={"description_width": "initial"}, layout=W.Layout(width="320px")),
            "kv_budget": _slider("kv_budget", KV_BUDGETS, start["kv_budget"]),
            "max_model_len": _slider("max_model_len", SLABS, start["max_model_len"], "360px"),
            "kv_layout": W.ToggleButtons(options=[(layout_name(v), v) for v in LAYOUTS], value=start["kv_layout"],
                                         description=t("knob.kv_layout"),
                                         style={"button_width": "auto"}),
            "block_size": _slider("block_size", BLOCK_SIZES, start["block_size"]),
            "x": W.ToggleButtons(options=[(t(k), v) for k, v in AXES], value=own["x"],
                                 description=t("knob.x"), style={"button_width": "auto"}),
        }
        self.controls = tuple(c for c in controls if c not in KV_KNOBS or {"blocks", "kv"} & set(views))
        for name in self.controls:
            k[name].observe(self._changed, names="value")
        self.message = W.HTML()
        self.status = W.HTML()
        self.progress = W.FloatProgress(value=0, min=0, max=1, layout=W.Layout(width="300px", visibility="hidden"))
        self.real = W.Button(description=t("explorer.real"), icon="play", layout=W.Layout(width="220px"))
        self.real.on_click(lambda _: self.run_real())
        self.trace: Trace | None = None
        # the last HISTORY traces drawn, in order (the last is self.trace): a long-tail run is ~20 MB, and a
        # learner dragging a slider for a while must not fill Binder's 1-2 GB
        self.traces: deque[Trace] = deque(maxlen=HISTORY)
        self._enable()
        first = self.simulate(draw=False)
        if first is None:  # the starting settings themselves are bad: say so, draw an empty run
            first = Trace(policy, wl, "modeled", start["hardware"], 1, {}, True)
        first_k = own["k"] if own["k"] >= 0 else len(first.steps) + own["k"]
        self.board = TraceView(first, first_k, own["x"], views, cursor=cursor, width=width)
        self._set_trace(first, draw=False)
        rows = [W.HBox([k[c] for c in row if c in self.controls], layout=W.Layout(flex_flow="row wrap"))
                for row in (("policy", "order", "x"), ("batch_size", "chunk_size", "max_batch_tokens", "timeout",
                            "max_waiting_steps", "max_model_len"), ("workload", "n", "rate"),
                            ("hardware", "kv_budget", "kv_layout", "block_size"))]
        real = [W.HBox([self.real, self.progress])] if real_button else []
        self.widget = W.VBox(rows + real + [self.message, self.status, self.board.widget],
                             layout=W.Layout(width="100%"))
        self.opening = {name: k[name].value for name in self.controls}  # what a refusal compares against
        follow_language(self)

    def relabel(self) -> None:
        """The knobs' names and named options in the current language (the board's views relabel themselves;
        the status line speaks the new language from the next run)."""
        self._hold = True
        try:
            for name, w in self.knobs.items():
                w.description = t(f"knob.{name}")
                keys = _KEYED.get(name)
                if keys or name in _NAMED:
                    value = w.value
                    w.options = [(_NAMED[name](v) if name in _NAMED else t(keys[v]) if v in keys else label, v)
                                 for label, v in w.options]
                    w.value = value
            self.real.description = t("explorer.real")
        finally:
            self._hold = False

    # ---- settings ----------------------------------------------------------------------------------------
    def _enable(self) -> None:
        """Grey out the knobs the chosen policy or workload does not take."""
        k, own = self.knobs, takes(self.knobs["policy"].value)  # the knobs the policy's class declares
        for name, knob in POLICY_CONTROLS.items():
            k[name].disabled = knob not in own
        k["max_waiting_steps"].disabled |= k["order"].value  # prefill-first: newcomers wait no step
        spec = WORKLOADS.get(k["workload"].value, ("", None, {}))[2]
        k["n"].disabled, k["rate"].disabled = "n" not in spec, "rate" not in spec
        k["block_size"].disabled = "block_size" not in pool_class(k["kv_layout"].value).knobs  # the layout's own

    def settings(self) -> tuple[str | list, dict, RunConfig]:
        """(workload name or requests, workload knobs, the RunConfig) the knobs now say; a setting the engine
        refuses raises its one clear line (TinyserveError)."""
        k = {name: _unset(w.value) for name, w in self.knobs.items()}
        pol = k["policy"]
        own = takes(pol)
        knobs = {"batch_size": k["batch_size"], "hardware": k["hardware"]}
        if k["kv_budget"] is not None:
            knobs["kv_budget"] = int(k["kv_budget"])
        if k["max_model_len"] is not None and "max_model_len" in self.controls:
            knobs["max_model_len"] = int(k["max_model_len"])
        for knob in pool_class(k["kv_layout"]).knobs:  # a layout with knobs of its own (pages: block_size) is set
            knobs["kv_layout"], knobs[knob] = k["kv_layout"], k[knob]  # even where its knobs are not shown
        for name, knob in POLICY_CONTROLS.items():  # the policy's own knobs, those set (None: its default)
            if knob in own and knob not in ORDER and k[name] is not None:
                knobs[knob] = k[name]
        if ORDER[0] in own:  # one of the two ways of saying it
            if k["order"] or "max_waiting_steps" not in self.controls:
                knobs["prefill_first"] = k["order"]
            else:
                knobs["max_waiting_steps"] = k["max_waiting_steps"]
        wl = k["workload"]
        spec = WORKLOADS.get(wl, ("", None, {}))[2]
        wl_knobs = {**self.fixed_knobs, **{key: k[key] for key in ("n", "rate") if key in spec and key in self.controls}}
        return (self.custom if wl == "custom" else wl), wl_knobs, RunConfig.of(pol, None, {**self.base, **knobs,
                                                                                           "seed": self.seed})

    def _run(self, engine, wl, wl_knobs: dict, rc: RunConfig) -> Trace:
        """engine.run of a named workload with its knobs (the engine builds it), or of the caller's requests."""
        if isinstance(wl, str):
            return engine.run(wl, config=replace(rc, workload_knobs=wl_knobs or None), progress=False)
        return engine.run(self._requests(wl, wl_knobs), config=rc, progress=False)

    def _requests(self, wl, wl_knobs: dict) -> list:
        if isinstance(wl, list):
            return wl
        return get_workload(wl, seed=self.seed, **wl_knobs) if wl in WORKLOADS else wl

    def set(self, **values) -> Trace | None:
        """Set several knobs (names as in CONTROLS) and re-run once; returns the new trace (None: a message)."""
        def prepare(name, w, v):
            if v is None and isinstance(w, W.SelectionSlider):
                v = next(o[1] for o in w.options if isinstance(o, tuple) and o[1] in NONE)
            if isinstance(w, W.SelectionSlider) and v not in [o[1] for o in w.options]:
                keys = _KEYED.get(name, {})
                w.options = _opts([(keys[o[1]], o[1]) if o[1] in keys else o if isinstance(o[1], str) else o[1]
                                   for o in w.options], v)
            return v

        set_knobs(self, values, prepare)
        if "x" in values and "timeline" in self.board.views:
            self.board.views["timeline"].x = values["x"]  # drawn by the re-run below
        return self.simulate()

    def _changed(self, change) -> None:
        if self._hold:
            return
        if change["owner"] is self.knobs["x"]:
            if "timeline" in self.board.views:
                self.board.views["timeline"].set_x(change["new"])
            return
        self.simulate()

    # ---- runs --------------------------------------------------------------------------------------------
    def simulate(self, draw: bool = True) -> Trace | None:
        """Dry-run the current settings and draw them; a bad setting shows a message and keeps the figures."""
        self._enable()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            wl, wl_knobs, rc = self.settings()
            trace = self._run(self.engine, wl, wl_knobs, replace(rc, dry_run=True))
        except TinyserveError as e:
            self.message.value = _box(t("explorer.error", message=_esc(str(e))))
            return None
        if not isinstance(wl, str):
            trace.workload = "custom"
        if not trace.steps:
            rejected = [r.finish_reason for r in trace.requests if r.status == REJECTED]
            reason = t("explorer.rejected", n=len(rejected), total=len(trace.requests),
                       first=rejected[0]) if rejected else t("unit.none")
            self.message.value = _box(t("explorer.empty", reason=_esc(reason)))
            return None
        ms, cpu_ms = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
        self.message.value = ""
        ok = t("explorer.ok", policy=policy_name(rc.policy), workload=workload_label(trace), steps=len(trace.steps),
               slots=trace.num_slots, ms=ms)
        rejected = [r.finish_reason for r in trace.requests if r.status == REJECTED]
        if rejected:
            ok = t("widgets.ok_rejected", ok=ok, rejected=t("explorer.rejected", n=len(rejected),
                                                              total=len(trace.requests), first=_esc(rejected[0])))
        self.status.value = _small(ok)
        t1, c1 = time.perf_counter(), time.process_time()
        if draw:
            self._set_trace(trace)
        self.timing = {"dry_run_ms": ms, "dry_run_cpu_ms": cpu_ms, "draw_ms": (time.perf_counter() - t1) * 1e3,
                       "draw_cpu_ms": (time.process_time() - c1) * 1e3}  # read by the benchmark
        return trace

    def _set_trace(self, trace: Trace, draw: bool = True) -> None:
        self.trace = trace
        self.traces.append(trace)
        if draw:
            self.board.set_trace(trace)
        for fn in self.on_trace:
            fn(trace)

    def run_real(self, device: str = "auto") -> Trace | None:
        """Run the current settings on the real tiny GPT (wall clock) with a progress bar, then draw its trace.
        Interrupt the kernel to stop it: the previous figures stay and the knobs keep working."""
        import tinyserve

        try:
            wl, wl_knobs, rc = self.settings()
        except TinyserveError as e:
            self.message.value = _box(t("explorer.error", message=_esc(str(e))))
            return None
        # the wall clock measures this machine (no preset), and the tiny GPT's real tensors are sized to the run's
        # longest request: 32 slots x 4,096 positions would take half a GB of a Binder's 1-2 GB; the modeled slab
        # accounting is the dry run's
        sized = rc.max_model_len is not None
        rc = replace(rc, hardware=None, max_model_len=None)
        scaled = isinstance(wl, str) and bool(self.real_knobs)
        if scaled:  # a smaller copy, so the real run takes seconds on a laptop's CPU
            wl_knobs = {**wl_knobs, **self.real_knobs}
        try:
            reqs = [r.fresh() for r in self._requests(wl, wl_knobs)]
        except TinyserveError as e:
            self.message.value = _box(t("explorer.error", message=_esc(str(e))))
            return None
        tokens = sum(r.prompt_len + r.max_new_tokens for r in reqs)
        if tokens > REAL_LIMIT_TOKENS:
            self.message.value = _box(t("explorer.real.too_big", tokens=tokens, limit=REAL_LIMIT_TOKENS))
            return None
        try:  # the same steps priced by the CPU's fitted cost model: a dry run, milliseconds
            dry = Engine().run(reqs, config=replace(rc, dry_run=True, hardware="cpu-tiny", slab="longest"),
                               progress=False)
        except TinyserveError as e:
            self.message.value = _box(t("explorer.error", message=_esc(str(e))))
            return None
        est = real_seconds(dry)
        if est > REAL_LIMIT_S:
            self.message.value = _box(self._too_slow(est, len(dry.steps), tokens))
            return None
        self.real.disabled = True
        self.progress.layout.visibility = "visible"
        try:
            bar = _ProgressBar(self.progress, self.status)
            run = tinyserve.shared_engine(device).start(reqs, config=replace(rc, clock="wall"), hooks=(bar,))
            bar.total = max(1, sum(r.status != REJECTED for r in run.requests))
            self.progress.value, self.progress.max = 0, bar.total
            run.finish(progress=False)
        except TinyserveError as e:
            self.message.value = _box(t("explorer.error", message=_esc(str(e))))
            return None
        except KeyboardInterrupt:
            self.message.value = _box(t("explorer.real.interrupted", steps=len(run.steps)))
            return None
        finally:
            self.real.disabled = False
            self.progress.layout.visibility = "hidden"
        trace = run.trace()
        trace.workload = wl if isinstance(wl, str) else "custom"
        if isinstance(wl, str):
            trace.workload_knobs = dict(wl_knobs)
        self.message.value = ""
        done = t("explorer.real.done", steps=len(trace.steps), s=run.loop_s)
        if scaled:
            done = t("widgets.join.sentences", a=done, b=t("explorer.real.scaled", knobs=t("widgets.join.list").join(
                t("explorer.real.scaled_knob", knob=_knob_name(a), value=b) for a, b in self.real_knobs.items())))
        if sized:
            done = t("widgets.join.sentences", a=done, b=t("explorer.real.tensors", slab=trace.slab_tokens))
        self.status.value = _small(done)
        self._set_trace(trace)
        return trace

    def _too_slow(self, est: float, steps: int, tokens: int) -> str:
        """Why a real run is refused, naming what makes it long: its steps and tokens, and the knobs moved since
        the explorer opened (or, where none moved, that its opening settings themselves are too long)."""
        moved = [t("explorer.real.moved_knob", knob=t(f"knob.{name}"), was=self._label(name, was),
                   now=self._label(name, self.knobs[name].value))
                 for name, was in self.opening.items() if self.knobs[name].value != was]
        why = t("explorer.real.too_slow.moved", knobs=t("widgets.join.list").join(moved)) if moved else t(
            "explorer.real.too_slow.opening")
        return t("explorer.real.too_slow", s=est, limit=REAL_LIMIT_S, steps=steps, tokens=tokens, why=why)

    def _label(self, name: str, value) -> str:
        """A knob's value as its slider or buttons show it."""
        w = self.knobs[name]
        for o in getattr(w, "options", ()):
            if isinstance(o, tuple) and o[1] == value:
                return str(o[0])
        return f"{value:g}" if isinstance(value, float) else str(value)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        from .static import STATIC_FALLBACK, board_figure, png_bytes

        if STATIC_FALLBACK["on"] and isinstance(bundle, dict) and self.trace is not None:
            # the timeline and waste meter only: the whole board's PNG costs ~0.8 s, the explorer's first draw
            # has a 1 s budget (these two: ~0.2 s)
            views = tuple(v for v in ("timeline", "waste") if v in self.board.views) or tuple(self.board.views)
            fig = board_figure(self.trace, self.board.k, views=views,
                               x=self.board.views["timeline"].x if "timeline" in self.board.views else "steps")
            bundle["image/png"] = png_bytes(fig)
        return bundle


def _knob_name(name: str) -> str:
    """A knob's name as its slider says it; a workload knob without a slider (long_output) by its code name."""
    from tinyserve.lang import english

    return t(f"knob.{name}") if english(f"knob.{name}") is not None else name


def real_seconds(dry: Trace) -> float:
    """What a real run of a dry run's steps costs in wall-clock seconds: the sum of its steps' modeled
    durations. Idle time (waiting for the next arrival or a timeout) is not counted: the real loop jumps its
    clock over it, it never sleeps (tinyserve.loop), so a slow arrival rate does not make a real run longer."""
    return sum(s.duration_s for s in dry.steps)


class Compare:
    """Two settings of the same workload side by side under one cursor, with both latency distributions."""

    def __init__(self, workload: str | list = "chapter-7.1-finisher", a: dict | None = None, b: dict | None = None,
                 views: tuple[str, ...] = ("timeline", "waste", "composition", "kv"), **common):
        a = {"policy": "static", **common, **(a or {})}
        b = {"policy": "continuous", **common, **(b or {})}
        self.cursor = Cursor(1)
        half = BOARD_WIDTH_PX // 2  # two boards side by side in one notebook column
        self.left = Explorer(workload, views=views, cursor=self.cursor, real_button=False, width=half, **a)
        self.right = Explorer(workload, views=views, cursor=self.cursor, real_button=False, width=half, **b)
        for key in ("workload", "n", "rate", "hardware"):  # the same workload on both sides
            W.link((self.left.knobs[key], "value"), (self.right.knobs[key], "value"))
        self.latency = LatencyView(self._pair())
        self.words = W.HTML()
        for side in (self.left, self.right):
            side.on_trace.append(lambda _tr: self._redraw())
        self.cursor.observe(self.latency.set_cursor)
        self._redraw()
        half = W.Layout(width="50%")
        self.widget = W.VBox([self.cursor.widget, W.HBox([W.VBox([W.HTML(f"<b>{t('compare.left')}</b>"),
                                                                  self.left.widget], layout=half),
                                                          W.VBox([W.HTML(f"<b>{t('compare.right')}</b>"),
                                                                  self.right.widget], layout=half)]),
                              self.words, self.latency.widget], layout=W.Layout(width="100%"))
        follow_language(self)

    def relabel(self) -> None:
        """The comparing sentence in the current language (the explorers and views relabel themselves)."""
        self._redraw()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _pair(self) -> dict[str, Trace]:
        la, lb = (t("compare.label", side=t(f"compare.{s}"), policy=policy_name(e.trace.policy)) for s, e in (("left", self.left), ("right", self.right)))
        return {la: self.left.trace, lb: self.right.trace}

    def _redraw(self) -> None:
        if not hasattr(self, "latency"):
            return
        self.cursor.set_steps(max(len(self.left.trace.steps), len(self.right.trace.steps)))
        pair = self._pair()
        self.latency.set_traces(pair, self.cursor.value)
        (la, ta), (lb, tb) = pair.items()

        def p99(tr: Trace) -> str:
            v = tr.metrics()["ttft_ms"]["p99"]
            return t("unit.none") if v is None else t("unit.ms", v=v)

        def useful(tr: Trace) -> float:
            m = tr.metrics()
            return 100 * m["slot_utilization"]

        self.words.value = t("compare.sentence", a=la, ua=useful(ta), ta=p99(ta), b=lb, ub=useful(tb), tb=p99(tb))


def _esc(s: str) -> str:
    import html

    return html.escape(s)


def _box(text: str) -> str:
    return (f'<div class="tinyserve-message" style="border-left:4px solid #D55E00;background:#fdf0e6;'
            f'padding:6px 10px;margin:4px 0">{text}</div>')


def _small(text: str) -> str:
    return f'<span style="color:#555;font-size:12px">{text}</span>'
