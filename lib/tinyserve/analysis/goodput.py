"""Goodput as DistServe defines it (Zhong et al., OSDI '24): the highest request rate at which at least 90% of the
requests meet both a TTFT and a TPOT target, divided by the GPUs serving it; read off a sweep over the workload's
`rate` knob, for any deployment (`tinyserve goodput` prints the same rows).

A deployment is a DeploymentConfig or a spec string, the command line's syntax:
  colocated[:N]                   N replicas (default 1), each request routed to the least-loaded one
  disaggregated[:P:D[:LINK]]      P prefill + D decode instances (default 1 + 1) over LINK (default nvlink-h200)
either followed by its own knobs, `,name=value` each (SPEC_KNOBS): a replica's chunk_size (N, or none: whole
prompts, continuous batching), batch_size and gpus; a split's prefill_chunk_size (N or none), decode_batch_size, prefill_gpus
and decode_gpus (DeploymentConfig). So each side of a comparison can run its own best settings (analysis/fair.py).
Every run is on the modeled clock (a deployment's instances run in parallel only there), a dry run by default; a
workload's `rate` is requests/s for the whole deployment, so the per-GPU figure divides by the deployment's GPUs.

Steady state (analysis/steady.py): unless the workload's `n` is given, each rate's run sends steady.requests_at(rate)
requests; a given `n` below that is run as asked and its rows say they read a burst. Each deployment's saturation
throughput is measured too (sustained), and a goodput read between two rates swept is never above it: a crossing
interpolated past it is read as the saturation itself ("saturation").
"""
from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Iterable, Sequence

from ..core.config import RunConfig
from ..core.workloads import WORKLOADS, Workload, resolve_workload
from ..deploy import DeploymentConfig, run_deployment
from ..deploy.config import DEFAULT_LINK, WHOLE  # WHOLE: chunk_size=none / prefill_chunk_size=none, whole prompts
from ..engine import Engine
from ..errors import TinyserveError
from ..lang import t
from ..trace.slo import check_targets, check_ttft_at, reading
from . import steady

GOAL = 0.9  # DistServe's attainment goal


SPEC_KNOBS = {"colocated": ("chunk_size", "batch_size", "gpus"),
              "disaggregated": ("prefill_chunk_size", "decode_batch_size", "prefill_gpus", "decode_gpus")}


def parse_spec(spec: str | DeploymentConfig) -> tuple[DeploymentConfig, dict]:
    """(the deployment, the run knobs it sets for itself) from a spec string (module docstring); a
    DeploymentConfig passes through with none of its own."""
    if isinstance(spec, DeploymentConfig):
        return spec, {}
    head, *extra = str(spec).split(",")
    parts = head.split(":")
    kind, rest = parts[0], parts[1:]
    if kind == "colocated" and len(rest) <= 1:
        counts, link = rest, None
    elif kind == "disaggregated" and len(rest) in (0, 2, 3):
        counts, link = rest[:2], (rest[2] if len(rest) == 3 else None)
    elif kind in ("colocated", "disaggregated"):
        raise TinyserveError(t("cli.goodput.spec", spec=spec))
    else:
        DeploymentConfig(kind)  # an unknown kind: DeploymentConfig's line names the kinds
        raise AssertionError(kind)  # words: ok (a bug: DeploymentConfig took a kind it does not know)
    given: dict = {}
    for item in extra:
        name, eq, value = item.partition("=")
        if not eq or name not in SPEC_KNOBS[kind] or name in given:
            raise TinyserveError(t("cli.goodput.spec_knob", spec=spec, item=item, knobs=", ".join(SPEC_KNOBS[kind])))
        try:
            given[name] = value if value == WHOLE and name.endswith("chunk_size") else int(value)
        except ValueError:
            raise TinyserveError(t("cli.goodput.spec_knob", spec=spec, item=item,
                                   knobs=", ".join(SPEC_KNOBS[kind]))) from None
    try:
        numbers = [int(c) for c in counts]
    except ValueError:
        raise TinyserveError(t("cli.goodput.spec", spec=spec)) from None
    try:
        if kind == "colocated":
            own = {}
            if "chunk_size" in given:  # a replica's own chunk: chunked prefill of that length, or whole prompts
                c = given["chunk_size"]
                own = {"policy": "continuous", "chunk_size": None} if c == WHOLE else {"policy": "chunked",
                                                                                      "chunk_size": c}
            for knob in ("batch_size", "gpus"):
                if knob in given:
                    own[knob] = given[knob]
            return DeploymentConfig(kind, replicas=numbers[0] if numbers else None), own
        p, d = numbers if numbers else (None, None)
        return DeploymentConfig(kind, prefill_instances=p, decode_instances=d, link=link, **given), {}
    except TinyserveError as e:  # DeploymentConfig names the option of `tinyserve run`: say which spec it was
        raise TinyserveError(t("cli.goodput.in_spec", spec=spec, message=e)) from None


def parse_deployment(spec: str | DeploymentConfig) -> DeploymentConfig:
    """A DeploymentConfig from `colocated[:N]` or `disaggregated[:P:D[:LINK]]` and a split's own knobs (a
    DeploymentConfig passes through)."""
    return parse_spec(spec)[0]


def deployment_label(dc: DeploymentConfig, own: dict | None = None) -> str:
    """The spec string of a deployment, every field spelled out (colocated:2, disaggregated:1:1:nvlink-h200), then
    the knobs it sets for itself (own: a replica's, as parse_spec returns them)."""
    if dc.kind == "colocated":
        own = own or {}
        extra = [f"chunk_size={WHOLE if own['policy'] == 'continuous' else own['chunk_size']}"] if "policy" in own else []
        extra += [f"{k}={own[k]}" for k in ("batch_size", "gpus") if k in own]
        return ",".join([f"colocated:{dc.replicas}", *extra])
    extra = [f"{k}={getattr(dc, k)}" for k in SPEC_KNOBS["disaggregated"] if getattr(dc, k) is not None]
    return ",".join([f"disaggregated:{dc.prefill_instances}:{dc.decode_instances}:{dc.link or DEFAULT_LINK}", *extra])


def check_rates(rates: Iterable[float]) -> list[float]:
    """The rates as sorted distinct floats, each finite and > 0; one clear line otherwise."""
    out = []
    for r in rates:
        ok = isinstance(r, (int, float)) and not isinstance(r, bool)
        if not (ok and math.isfinite(r) and r > 0):
            raise TinyserveError(t("cli.goodput.rate", value=r))
        out.append(float(r))
    if not out:
        raise TinyserveError(t("cli.goodput.no_rates"))
    return sorted(set(out))


def check_workload(workload: Workload, workload_knobs: dict | None) -> None:
    """The sweep needs a named workload with a `rate` knob, and sets that knob itself."""
    if isinstance(workload, str) and not workload.endswith(".jsonl") and workload not in WORKLOADS:
        resolve_workload(workload)  # an unknown name: the workloads' own message, with the names
    if not isinstance(workload, str) or "rate" not in WORKLOADS.get(workload, ("", "", {}))[2]:
        with_rate = ", ".join(n for n, w in WORKLOADS.items() if "rate" in w[2])
        raise TinyserveError(t("cli.goodput.no_rate", workload=str(workload) if isinstance(workload, str)
                               else type(workload).__name__, choices=with_rate))
    if workload_knobs and "rate" in workload_knobs:
        raise TinyserveError(t("cli.goodput.rate_knob"))


def sweep(deployments: Sequence[str | DeploymentConfig], workload: str, rates: Iterable[float], ttft_ms: float,
          tpot_ms: float, *, engine: Engine | None = None, policy: str = "chunked",
          workload_knobs: dict | None = None, ttft_at: str = "prefill", roles: dict | None = None,
          **run_knobs) -> list[dict]:
    """One row per deployment and rate: the SLO attainment of a run at that rate (run_knobs: RunConfig's, e.g.
    chunk_size, batch_size, hardware, kv_layout, seed; dry_run defaults to True; a spec's own knobs win), TTFT
    counted where `ttft_at` says (DeploymentTrace.as_seen). roles: a split's per-role knobs (SPEC_KNOBS) for every
    disaggregated deployment that does not set them itself."""
    check_targets(ttft_ms, tpot_ms)
    check_ttft_at(ttft_at)
    specs = [parse_spec(d) for d in deployments]
    if not specs:
        raise TinyserveError(t("cli.goodput.no_deployment"))
    roles = {k: v for k, v in (roles or {}).items() if v is not None}
    if roles:
        if not any(dc.kind == "disaggregated" for dc, _ in specs):
            raise TinyserveError(t("cli.goodput.roles_split", option="--" + next(iter(roles)).replace("_", "-")))
        specs = [(replace(dc, **{k: v for k, v in roles.items() if getattr(dc, k) is None})
                  if dc.kind == "disaggregated" else dc, own) for dc, own in specs]
    dcs = [dc for dc, _ in specs]
    labels = [deployment_label(dc, own) for dc, own in specs]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise TinyserveError(t("cli.goodput.twice", deployment=label))
    rates = check_rates(rates)
    check_workload(workload, workload_knobs)
    run_knobs.setdefault("dry_run", True)
    knobs = dict(workload_knobs or {})
    for dc, own in specs:  # every deployment's refusals before anything runs
        dc.check_run(run_config(policy, run_knobs, own, {**knobs, "rate": rates[0]}))
    engine = engine or Engine()
    rows = []
    for (dc, own), label in zip(specs, labels):
        def config(rate: float, n: int | None = None) -> RunConfig:
            given = {**knobs, "rate": rate}
            if n is not None:  # the saturation's own count, whatever n the sweep was given
                given["n"] = n
            given.setdefault("n", steady.requests_at(rate))
            return run_config(policy, run_knobs, own, given)

        sat = sustained(engine, workload, dc, config)
        for rate in rates:
            dt = run_deployment(engine, workload, config(rate), dc)
            m, slo = dt.metrics(ttft_at), dt.slo(ttft_ms, tpot_ms, ttft_at)
            rows.append({"deployment": label, "kind": dc.kind, "num_gpus": dt.num_gpus, "hardware": dt.hardware,
                         "rate": rate, "rate_per_gpu": rate / dt.num_gpus, "requests": slo["requests"],
                         "burst": steady.is_burst(slo["requests"], rate), "saturation_rps": sat["rps"],
                         "met": slo["met"], "attainment": slo["attainment"], "met_ttft": slo["met_ttft"],
                         "met_tpot": slo["met_tpot"], "num_rejected": m["num_rejected"],
                         "ttft_p90_ms": m["ttft_ms"]["p90"], "tpot_p90_ms": m["tpot_ms"]["p90"]})
    return rows


def sustained(engine: Engine, workload: str, dc: DeploymentConfig, config) -> dict:
    """A deployment's saturation throughput (steady.saturation): its completions per second on
    steady.SATURATION_REQUESTS requests offered at least 1.5 times that fast (config(rate, n): the RunConfig of a
    run). {"offered", "requests", "rps"}, requests/s of the whole deployment."""
    gpus = run_deployment(engine, workload, config(1.0, 1), dc).num_gpus
    offered = steady.SATURATION_RATE_PER_GPU * gpus
    while True:
        dt = run_deployment(engine, workload, config(offered, steady.SATURATION_REQUESTS), dc)
        rps = steady.saturation([r.finish_s for r in dt.requests if r.finish_s is not None])
        if offered >= 1.5 * rps:
            return {"offered": offered, "requests": len(dt.requests), "rps": rps}
        offered = 2 * rps


def run_config(policy: str, run_knobs: dict, own: dict, workload_knobs: dict) -> RunConfig:
    """The RunConfig of one run of a sweep: the sweep's knobs, a spec's own on top (a replica's chunk sets its
    policy too: chunked, or continuous for whole prompts)."""
    knobs = {**run_knobs, **own}
    policy = knobs.pop("policy", policy)
    if own.get("policy") == "continuous":  # whole prompts: no chunk, no token budget
        knobs.pop("chunk_size", None)
        knobs.pop("max_batch_tokens", None)
    return RunConfig(policy, workload_knobs=workload_knobs, **knobs)


def goodput_per_gpu(rows: Sequence[dict], goal: float = GOAL) -> list[dict]:
    """Per deployment of a sweep (in its order): goodput in requests/s for the whole deployment and per GPU (None
    when even the lowest rate swept misses the goal: below the sweep), how it was read (trace.slo.reading: an
    interpolated crossing, at least the highest rate, or below the lowest; "saturation": a crossing past the
    saturation throughput, capped at it), whether the curve is monotone, whether any of its runs was a burst
    (steady.is_burst) and its saturation throughput."""
    out: dict[str, dict] = {}
    for row in rows:
        g = out.setdefault(row["deployment"], {"deployment": row["deployment"], "kind": row["kind"],
                                               "num_gpus": row["num_gpus"], "rates": [], "attainments": [],
                                               "burst": False, "saturation": row.get("saturation_rps")})
        g["rates"].append(row["rate"])
        g["attainments"].append(row["attainment"])
        g["burst"] = g["burst"] or row.get("burst", False)
    result = []
    for g in out.values():
        read = reading(g["rates"], g["attainments"], goal)
        rps, how = read["value"], read["read"]
        sat = g["saturation"]
        if rps is not None and sat is not None and rps > sat:  # interpolated past what it sustains: capped there
            rps, how = sat, "saturation"
        result.append({"deployment": g["deployment"], "kind": g["kind"], "num_gpus": g["num_gpus"], "goal": goal,
                       "lowest_rate": min(g["rates"]), "highest_rate": max(g["rates"]), "goodput_rps": rps,
                       "goodput_per_gpu": None if rps is None else rps / g["num_gpus"], "read": how,
                       "monotone": read["monotone"], "burst": g["burst"],
                       "saturation_rps": sat, "saturation_per_gpu": None if sat is None else sat / g["num_gpus"]})
    return result


def over_seeds(per_seed: dict[int, Sequence[dict]]) -> list[dict]:
    """Per deployment, its goodput over several seeds' sweeps ({seed: goodput_per_gpu(rows)}): every seed's, the
    median (the lower middle one for an even count) and the lowest and highest, each as goodput_per_gpu gives it. A
    goodput below the sweep ranks under every number; "at least" ranks as its value."""
    seeds = list(per_seed)
    out = []
    for i, first in enumerate(per_seed[seeds[0]]):
        each = [per_seed[s][i] for s in seeds]
        ranked = sorted(each, key=lambda g: -math.inf if g["goodput_per_gpu"] is None else g["goodput_per_gpu"])
        out.append({"deployment": first["deployment"], "kind": first["kind"], "num_gpus": first["num_gpus"],
                    "goal": first["goal"], "seeds": seeds, "per_seed": each, "median": ranked[(len(ranked) - 1) // 2],
                    "min": ranked[0], "max": ranked[-1]})
    return out
