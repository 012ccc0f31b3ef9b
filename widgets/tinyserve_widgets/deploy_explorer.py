"""Knobs of a deployment (colocated replicas, or P prefill + D decode instances over a link), its SLO targets and
its traffic; each change re-runs the deployment as a dry run (tinyserve.deploy.run_deployment, modeled clock) and
redraws the stacked timeline (DeploymentView) and a line of numbers: SLO attainment, TTFT and TPOT p50/p99, GPUs,
and, where KV memory caps a batch (a decode batch of 128 runs 38 slots on h200-70b-fp8), the slots that ran.
Moving a target only recounts the attainment (the run does not depend on it). A bad setting shows a message and
the previous figures stay.

    tw.DeploymentExplorer(ttft_ms=1000, tpot_ms=50)        # chapter-7.3-mixed on h200-70b-fp8, chunked prefill
"""
from __future__ import annotations

from time import perf_counter

import ipywidgets as W

from tinyserve.analysis.figures import policy_name
from tinyserve.core.config import RUN_FIELDS, RunConfig, takes
from tinyserve.core.knobs import DEFAULT_CHUNK, POLICY_KNOBS
from tinyserve.core.request import REJECTED
from tinyserve.core.workloads import WORKLOADS
from tinyserve.cost.links import get_link, list_links
from tinyserve.cost.presets import DEFAULT_HARDWARE, list_presets
from tinyserve.deploy import DeploymentConfig, DeploymentTrace, run_deployment
from tinyserve.core.scheduling.registry import DECODE_POLICIES
# WHOLE: a prefill instance's chunk, whole prompts
from tinyserve.deploy.config import DEFAULT_LINK, WHOLE
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.lang import t

from .deployment import WIDTH_PX, DeploymentView, deployment_name
from .explorer import CHUNKS, _box, _esc, _opts, _small, set_knobs
from .views import follow_language

WORKLOAD = "chapter-7.3-mixed" if "chapter-7.3-mixed" in WORKLOADS else "chapter-7.2-longtail"
KINDS = ("colocated", "disaggregated")
TTFTS = [100, 200, 250, 500, 1000, 2000, 2500, 4000]  # ms
TPOTS = [10, 20, 25, 30, 40, 50, 75, 100, 150, 200]  # ms
RATES = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 16.0]  # requests/s, the whole deployment's
MAX_INSTANCES = 8  # replicas; prefill and decode instances each up to half of it
GPUS = [1, 2, 4, 8]  # GPUs of one instance, the model split over them (tensor parallel: they share its 8 KV heads)
DECODE_BATCHES = [8, 16, 32, 64, 128]
CONTROLS = ("deployment", "replicas", "prefill_instances", "decode_instances", "link", "gpus", "prefill_chunk_size",
            "decode_batch_size", "prefill_gpus", "decode_gpus", "ttft_ms", "tpot_ms", "ttft_at", "rate", "chunk_size")
EXTRA = ("policy", "hardware", "n")  # offered with controls=... (not shown by default)
TARGETS = ("ttft_ms", "tpot_ms", "ttft_at")  # they recount the attainment; the rest re-run the deployment
ROLES = ("prefill_chunk_size", "decode_batch_size", "prefill_gpus", "decode_gpus")  # a split's own (DeploymentConfig)
# where each control (and a config's field with no control) starts unless a config or a keyword says otherwise
STARTS = {"deployment": "disaggregated", "replicas": 2, "prefill_instances": 1, "decode_instances": 1,
          "link": DEFAULT_LINK, "gpus": 1, "prefill_chunk_size": None, "decode_batch_size": None, "prefill_gpus": 1,
          "decode_gpus": 1, "chunk_size": DEFAULT_CHUNK, "hardware": DEFAULT_HARDWARE}
DC_FIELDS = sorted({f for kind in KINDS for f in DeploymentConfig.options(kind)})  # each kind's (DeploymentConfig)
# RunConfig fields not taken from the config as they are: the policy, and those the controls set
NOT_BASE = ("policy", "policy_object", "chunk_size", "hardware", "gpus", "dry_run")
OWN = {"ttft_ms": 1000, "tpot_ms": 50, "ttft_at": "prefill", "rate": None, "n": None}  # the explorer's own
OWN_WORDS = ("deployment", "replicas", "prefill_instances", "decode_instances", "link", "gpus") + ROLES + TARGETS
# the others: the single-run explorer's words (knob.rate, knob.chunk_size, ...)
# a role's "as the run's" option (no knob of its own: None in the DeploymentConfig). A Dropdown whose value is None
# has nothing selected (ipywidgets: label and index None) and the browser draws an empty box, so the option's
# value is this word, turned back into None where the config is built (configs) and from a caller's None (set)
SAME = "same"
SAME_AS = ("prefill_chunk_size", "decode_batch_size")


def _link_label(name: str) -> str:
    return t("widgets.deploy.link_option", name=name, gbps=get_link(name).bandwidth_Bps / 1e9)


def _ms(v: float | None) -> str:
    return t("unit.none") if v is None else t("unit.ms", v=v)


class DeploymentExplorer:
    """Deployment knobs -> a dry run of the deployment -> the stacked timeline and its SLO numbers redrawn."""

    def __init__(self, workload: str = WORKLOAD, policy: str | None = None, *, config: RunConfig | None = None,
                 deployment: DeploymentConfig | str = "disaggregated", controls: tuple[str, ...] = CONTROLS,
                 time: float | None = None, width: int = WIDTH_PX, **knobs):
        """workload: a named workload with a `rate` knob; policy: the run's (None: the config's, else chunked);
        config: the run's other settings (a RunConfig: batch_size, chunk_size, hardware, seed, gpus, workload_knobs:
        its fixed knobs); deployment: a DeploymentConfig, or its kind (colocated, disaggregated); knobs: a field of
        either config (replicas=2, prefill_chunk_size="none", chunk_size=512, ...) or one of the explorer's own
        (OWN: ttft_ms, tpot_ms, the SLO targets; ttft_at, where the first token counts: prefill, DistServe's, or
        decode, vLLM's and Dynamo's; rate, n: the workload's knobs, None: its default); gpus (RunConfig's): each
        replica's GPUs; time: the cursor's first moment in seconds (None: mid-run); controls: the knobs shown (CONTROLS, and any
        of EXTRA)."""
        dc = deployment if isinstance(deployment, DeploymentConfig) else None
        unknown = [name for name in knobs if name not in OWN and name not in DC_FIELDS and (
            name not in RUN_FIELDS or name in ("policy", "policy_object"))]
        if unknown:  # as Python says it of any function
            raise TypeError("DeploymentExplorer() got an unexpected keyword argument " + repr(unknown[0]))  # words: ok
        config = config or RunConfig("chunked")
        policy = policy or config.policy
        given = {f: getattr(c, f) for c in (config, dc) if c is not None for f in STARTS
                 if getattr(c, f, None) is not None}
        start = {**STARTS, **given, **OWN, **knobs, "deployment": dc.kind if dc is not None else deployment}
        # the run's settings that are no control (kv_layout, slab, max_batch_tokens, ...): the config's, or given
        self.base = {f: start.get(f, getattr(config, f)) for f in RUN_FIELDS if f not in NOT_BASE}
        self.decode_kv_layout = start.get("decode_kv_layout")  # no control: as given
        self.engine = Engine()  # dry runs never load the model
        self.workload, self.seed = workload, self.base["seed"]
        self.fixed_knobs, self.n_given = dict(self.base["workload_knobs"] or {}), start["n"] is not None
        spec = WORKLOADS.get(workload, ("", None, {}))[2]
        self._hold = False
        def slider():
            return dict(continuous_update=False, style={"description_width": "initial"}, layout=W.Layout(width="300px"))

        def choose(name: str, options: list) -> W.SelectionSlider:  # a slider of these options, at its start
            return W.SelectionSlider(options=_opts(options, start[name]), value=start[name], **slider())

        for name in SAME_AS:
            start[name] = SAME if start[name] is None else start[name]
        chunk = start["prefill_chunk_size"]
        k = self.knobs = {
            "deployment": W.ToggleButtons(options=[(t(f"widgets.deploy.kind.{x}"), x) for x in KINDS],
                                          value=start["deployment"], style={"button_width": "auto"}),
            "replicas": W.IntSlider(value=start["replicas"], min=1, max=MAX_INSTANCES, **slider()),
            "prefill_instances": W.IntSlider(value=start["prefill_instances"], min=1, max=MAX_INSTANCES // 2,
                                             **slider()),
            "decode_instances": W.IntSlider(value=start["decode_instances"], min=1, max=MAX_INSTANCES // 2, **slider()),
            "link": W.Dropdown(options=[(_link_label(x), x) for x in list_links()], value=start["link"],
                               style={"description_width": "initial"}, layout=W.Layout(width="360px")),
            "ttft_ms": choose("ttft_ms", TTFTS),
            "tpot_ms": choose("tpot_ms", TPOTS),
            "rate": W.SelectionSlider(options=_opts(RATES, start["rate"] or spec.get("rate", (4.0,))[0]),
                                      value=float(start["rate"] or spec.get("rate", (4.0,))[0]), **slider()),
            "chunk_size": choose("chunk_size", CHUNKS),
            "gpus": choose("gpus", GPUS),
            "prefill_chunk_size": W.Dropdown(
                options=[(t("widgets.deploy.same_chunk"), SAME), (t("widgets.deploy.whole"), WHOLE)]
                + _opts(CHUNKS, chunk if isinstance(chunk, int) else CHUNKS[0]), value=chunk, style={"description_width": "initial"}, layout=W.Layout(width="300px")),
            "decode_batch_size": W.Dropdown(
                options=[(t("widgets.deploy.same_batch"), SAME)] + _opts(
                    DECODE_BATCHES, start["decode_batch_size"] if start["decode_batch_size"] != SAME else None),
                value=start["decode_batch_size"], style={"description_width": "initial"},
                layout=W.Layout(width="260px")),
            "prefill_gpus": choose("prefill_gpus", GPUS),
            "decode_gpus": choose("decode_gpus", GPUS),
            "ttft_at": W.ToggleButtons(options=[(t(f"widgets.deploy.ttft_at.{x}"), x) for x in ("prefill", "decode")],
                                       value=start["ttft_at"], style={"button_width": "auto"}),
            "policy": W.ToggleButtons(options=[(policy_name(p), p) for p in DECODE_POLICIES], value=policy,
                                      style={"button_width": "auto"}),
            "hardware": W.Dropdown(options=list_presets(), value=start["hardware"],
                                   style={"description_width": "initial"},
                                   layout=W.Layout(width="320px")),
            "n": W.IntSlider(value=spec.get("n", (200,))[0] if start["n"] is None else start["n"], min=1,
                             max=max(1000, start["n"] or 0),
                             **slider()),
        }
        unknown = set(controls) - set(k)
        if unknown:
            raise ValueError(t("widgets.error.knobs", unknown=sorted(unknown), choices=", ".join(k)))
        self.controls = tuple(controls)
        for name in self.controls:
            k[name].observe(self._changed, names="value")
        self.message, self.status, self.numbers_line = W.HTML(), W.HTML(), W.HTML()
        self.trace: DeploymentTrace | None = None
        self.numbers: dict = {}
        self._enable()
        t0 = perf_counter()
        first = self._run()  # bad opening settings: their one clear line, raised (there is nothing to draw)
        self._status(first, (perf_counter() - t0) * 1e3)
        self.view = DeploymentView(first, time, width=width)
        self.trace = first
        self._numbers()
        rows = [W.HBox([k[c] for c in row if c in self.controls], layout=W.Layout(flex_flow="row wrap"))
                for row in (("deployment", "policy"), ("replicas", "gpus", "prefill_instances", "decode_instances", "link"),
                            ("prefill_chunk_size", "prefill_gpus", "decode_batch_size", "decode_gpus"),
                            ("ttft_ms", "tpot_ms", "ttft_at"), ("rate", "n", "chunk_size", "hardware"))]
        self.widget = W.VBox(rows + [self.message, self.numbers_line, self.status, self.view.widget],
                             layout=W.Layout(width="100%"))
        self.relabel()
        follow_language(self)

    # ---- settings --------------------------------------------------------------------------------------------
    def relabel(self) -> None:
        """Knob names, named options and the numbers in the current language (the view relabels itself)."""
        self._hold = True
        try:
            for name, w in self.knobs.items():
                w.description = t(f"widgets.deploy.knob.{name}" if name in OWN_WORDS else f"knob.{name}")
            named = {"deployment": lambda x: t(f"widgets.deploy.kind.{x}"), "link": _link_label,
                     "policy": policy_name, "ttft_at": lambda x: t(f"widgets.deploy.ttft_at.{x}"),
                     "prefill_chunk_size": lambda x: (t("widgets.deploy.same_chunk") if x == SAME else
                                                      t("widgets.deploy.whole") if x == WHOLE else str(x)),
                     "decode_batch_size": lambda x: t("widgets.deploy.same_batch") if x == SAME else str(x)}
            for name, fn in named.items():
                w = self.knobs[name]
                value = w.value
                w.options = [(fn(v), v) for _, v in w.options]
                w.value = value
        finally:
            self._hold = False
        if self.trace is not None:
            self._numbers()

    def _enable(self) -> None:
        """Grey out the knobs the chosen deployment or policy does not take (as the configs declare them)."""
        k = self.knobs
        own = DeploymentConfig.options(k["deployment"].value)
        for name in DC_FIELDS:
            if name in k:
                k[name].disabled = name not in own
        k["ttft_at"].disabled = "decode_instances" not in own  # a first token counts apart only where roles split
        k["gpus"].disabled = "prefill_gpus" in own  # a split sets each role's GPUs instead
        k["chunk_size"].disabled = "chunk_size" not in takes(k["policy"].value)
        spec = WORKLOADS.get(self.workload, ("", None, {}))[2]
        k["rate"].disabled, k["n"].disabled = "rate" not in spec, "n" not in spec

    def configs(self) -> tuple[dict, RunConfig, DeploymentConfig]:
        """(workload knobs, RunConfig, DeploymentConfig) the knobs now say (TinyserveError for a bad mix)."""
        k = {name: w.value for name, w in self.knobs.items()}
        spec = WORKLOADS.get(self.workload, ("", None, {}))[2]
        wl_knobs = {**self.fixed_knobs, **({"rate": k["rate"]} if "rate" in spec else {})}
        if "n" in spec and ("n" in self.controls or self.n_given):  # else the workload's own, as the CLI's
            wl_knobs["n"] = k["n"]
        policy_knobs = takes(k["policy"])
        base = {f: v for f, v in self.base.items() if f not in POLICY_KNOBS or f in policy_knobs}
        if "chunk_size" in policy_knobs:
            base["chunk_size"] = k["chunk_size"]
        options = DeploymentConfig.options(k["deployment"])
        gpus = None if "prefill_gpus" in options or k["gpus"] == 1 else k["gpus"]  # 1: the preset as it is
        rc = RunConfig.of(k["policy"], None, {**base, "dry_run": True, "hardware": k["hardware"],
                                              "workload_knobs": wl_knobs, "gpus": gpus})
        shape = {}
        for name in options:  # the kind's own (decode_kv_layout has no control: as given)
            v = k[name] if name in k else self.decode_kv_layout
            shape[name] = None if name.endswith("_gpus") and v == 1 or v == SAME else v  # 1 GPU: the preset
        return wl_knobs, rc, DeploymentConfig(k["deployment"], **shape)

    def set(self, **values) -> DeploymentTrace | None:
        """Set several knobs (names as in the knobs dict) and re-run once; the new trace (None: a message)."""
        def prepare(name, w, v):
            v = SAME if name in SAME_AS and v is None else v
            if not isinstance(w, (W.SelectionSlider, W.Dropdown)) or v in w._options_values:
                return v
            if isinstance(w, W.SelectionSlider):
                w.options = _opts([o[1] for o in w.options], v)
            elif name in SAME_AS and isinstance(v, int):  # a caller's own number among the named options
                named = [o for o in w.options if isinstance(o[1], str)]
                w.options = named + _opts([o[1] for o in w.options if not isinstance(o[1], str)], v)
            return v

        set_knobs(self, values, prepare)
        if set(values) <= set(TARGETS):
            self._numbers()
            return self.trace
        return self.simulate()

    def _changed(self, change) -> None:
        if self._hold:
            return
        if any(change["owner"] is self.knobs[name] for name in TARGETS):
            self._numbers()
            return
        self.simulate()

    # ---- runs ------------------------------------------------------------------------------------------------
    def simulate(self) -> DeploymentTrace | None:
        """Dry-run the deployment the knobs say and draw it; a bad setting shows a message, the figures stay."""
        self._enable()
        t0 = perf_counter()
        try:
            dt = self._run()
        except TinyserveError as e:
            self.message.value = _box(t("explorer.error", message=_esc(str(e))))
            return None
        ms = (perf_counter() - t0) * 1e3
        self.message.value = ""
        self._status(dt, ms)
        t1 = perf_counter()
        self.trace = dt
        self.view.set_trace(dt)
        self._numbers()
        self.timing = {"dry_run_ms": ms, "draw_ms": (perf_counter() - t1) * 1e3}
        return dt

    def _status(self, dt: DeploymentTrace, ms: float) -> None:
        ok = t("widgets.deploy.ok", deployment=deployment_name(dt), steps=sum(len(x.steps) for x in dt.instances),
               ms=ms)
        rejected = [r.finish_reason for r in dt.requests if r.status == REJECTED]
        if rejected:
            ok = t("widgets.ok_rejected", ok=ok, rejected=t("explorer.rejected", n=len(rejected),
                                                              total=len(dt.requests), first=_esc(rejected[0])))
        self.status.value = _small(ok)

    def _run(self) -> DeploymentTrace:
        _, rc, dc = self.configs()
        return run_deployment(self.engine, self.workload, rc, dc)

    def _numbers(self) -> None:
        """The line of numbers: SLO attainment at the targets, TTFT and TPOT p50/p99, GPUs, transfers."""
        dt = self.trace
        ttft, tpot = self.knobs["ttft_ms"].value, self.knobs["tpot_ms"].value
        at = self.knobs["ttft_at"].value
        slo, m = dt.slo(ttft, tpot, at), dt.metrics(at)
        self.numbers = {"attainment": slo["attainment"], "met": slo["met"], "requests": slo["requests"],
                        "ttft_ms": ttft, "tpot_ms": tpot, "ttft_p50": m["ttft_ms"]["p50"],
                        "ttft_p99": m["ttft_ms"]["p99"], "tpot_p50": m["tpot_ms"]["p50"], "tpot_p99": m["tpot_ms"]["p99"], "gpus": dt.num_gpus,
                        "transfers": m["transfers"], "transfer_p50": m["transfer_ms"]["p50"]}
        n = self.numbers
        line = t("widgets.deploy.numbers", pct=100 * n["attainment"], met=n["met"], requests=n["requests"], ttft=ttft,
                 tpot=tpot, ttft_p50=_ms(n["ttft_p50"]), ttft_p99=_ms(n["ttft_p99"]), tpot_p50=_ms(n["tpot_p50"]),
                 tpot_p99=_ms(n["tpot_p99"]), gpus=n["gpus"])
        if dt.kind == "disaggregated":
            line = t("widgets.join.sentences", a=line, b=t("widgets.deploy.numbers.transfers", n=n["transfers"],
                                                           p50=_ms(n["transfer_p50"])))
        for capped in self._capped():
            line = t("widgets.join.sentences", a=line, b=capped)
        self.numbers_line.value = f"<b>{_esc(line)}</b>"

    def slots(self) -> list[dict]:
        """Per instance, what it ran with (DeploymentTrace.effective): its role, the batch size asked (None: its
        policy takes none) and the slots it ran, the batch capped by the slabs its KV memory holds."""
        dt = self.trace
        return [{"role": role, "asked": e["knobs"].get("batch_size"), "slots": e["num_slots"]}
                for role, e in zip(dt.roles, (dt.effective(i) for i in range(len(dt.instances))))]

    def _capped(self) -> list[str]:
        """A sentence per role whose batch memory capped: the slots that ran, of the batch asked (each once)."""
        seen = []
        for s in self.slots():
            key = (s["role"], s["asked"], s["slots"])
            if s["asked"] is not None and s["slots"] < s["asked"] and key not in seen:
                seen.append(key)
        return [t("widgets.deploy.capped", role=t(f"widgets.deploy.role.{role}"), asked=asked, slots=slots)
                for role, asked, slots in seen]

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        from .static import STATIC_FALLBACK, png_bytes

        if STATIC_FALLBACK["on"] and isinstance(bundle, dict):  # GitHub/nbviewer show this picture
            bundle["image/png"] = png_bytes(self.view.static())
        return bundle
