"""Goodput as DistServe defines it (Zhong et al., OSDI '24): the highest request rate at which at least 90% of the
requests meet both a TTFT and a TPOT target, divided by the GPUs serving it; read off a sweep over the workload's
`rate` knob, for any deployment (`tinyserve goodput` prints the same rows).

A deployment is a DeploymentConfig or a spec string, the command line's syntax:
  colocated[:N]                   N replicas (default 1), each request routed to the least-loaded one
  disaggregated[:P:D[:LINK]]      P prefill + D decode instances (default 1 + 1) over LINK (default nvlink-h200)
Every run is on the modeled clock (a deployment's instances run in parallel only there), a dry run by default; a
workload's `rate` is requests/s for the whole deployment, so the per-GPU figure divides by the deployment's GPUs.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..core.config import RunConfig
from ..core.workloads import WORKLOADS, Workload, resolve_workload
from ..deploy import DeploymentConfig, run_deployment
from ..deploy.config import DEFAULT_LINK
from ..engine import Engine
from ..errors import TinyserveError
from ..lang import t
from ..trace.slo import check_targets, check_ttft_at, reading

GOAL = 0.9  # DistServe's attainment goal


def parse_deployment(spec: str | DeploymentConfig) -> DeploymentConfig:
    """A DeploymentConfig from `colocated[:N]` or `disaggregated[:P:D[:LINK]]` (a DeploymentConfig passes through)."""
    if isinstance(spec, DeploymentConfig):
        return spec
    parts = str(spec).split(":")
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
    try:
        numbers = [int(c) for c in counts]
    except ValueError:
        raise TinyserveError(t("cli.goodput.spec", spec=spec)) from None
    try:
        if kind == "colocated":
            return DeploymentConfig(kind, replicas=numbers[0] if numbers else None)
        p, d = numbers if numbers else (None, None)
        return DeploymentConfig(kind, prefill_instances=p, decode_instances=d, link=link)
    except TinyserveError as e:  # DeploymentConfig names the option of `tinyserve run`: say which spec it was
        raise TinyserveError(t("cli.goodput.in_spec", spec=spec, message=e)) from None


def deployment_label(dc: DeploymentConfig) -> str:
    """The spec string of a deployment, every field spelled out (colocated:2, disaggregated:1:1:nvlink-h200)."""
    if dc.kind == "colocated":
        return f"colocated:{dc.replicas}"
    return f"disaggregated:{dc.prefill_instances}:{dc.decode_instances}:{dc.link or DEFAULT_LINK}"


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
          workload_knobs: dict | None = None, ttft_at: str = "prefill", **run_knobs) -> list[dict]:
    """One row per deployment and rate: the SLO attainment of a run at that rate (run_knobs: RunConfig's, e.g.
    chunk_size, batch_size, hardware, kv_layout, seed; dry_run defaults to True), TTFT counted where `ttft_at`
    says (DeploymentTrace.as_seen)."""
    check_targets(ttft_ms, tpot_ms)
    check_ttft_at(ttft_at)
    dcs = [parse_deployment(d) for d in deployments]
    if not dcs:
        raise TinyserveError(t("cli.goodput.no_deployment"))
    labels = [deployment_label(dc) for dc in dcs]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise TinyserveError(t("cli.goodput.twice", deployment=label))
    rates = check_rates(rates)
    check_workload(workload, workload_knobs)
    run_knobs.setdefault("dry_run", True)
    knobs = dict(workload_knobs or {})
    for dc in dcs:  # every deployment's refusals before anything runs
        dc.check_run(RunConfig(policy, workload_knobs={**knobs, "rate": rates[0]}, **run_knobs))
    engine = engine or Engine()
    rows = []
    for dc, label in zip(dcs, labels):
        for rate in rates:
            rc = RunConfig(policy, workload_knobs={**knobs, "rate": rate}, **run_knobs)
            dt = run_deployment(engine, workload, rc, dc)
            m, slo = dt.metrics(ttft_at), dt.slo(ttft_ms, tpot_ms, ttft_at)
            rows.append({"deployment": label, "kind": dc.kind, "num_gpus": dt.num_gpus, "hardware": dt.hardware,
                         "rate": rate, "rate_per_gpu": rate / dt.num_gpus, "requests": slo["requests"],
                         "met": slo["met"], "attainment": slo["attainment"], "met_ttft": slo["met_ttft"],
                         "met_tpot": slo["met_tpot"], "num_rejected": m["num_rejected"],
                         "ttft_p90_ms": m["ttft_ms"]["p90"], "tpot_p90_ms": m["tpot_ms"]["p90"]})
    return rows


def goodput_per_gpu(rows: Sequence[dict], goal: float = GOAL) -> list[dict]:
    """Per deployment of a sweep (in its order): goodput in requests/s for the whole deployment and per GPU (None
    when even the lowest rate swept misses the goal: below the sweep), how it was read (trace.slo.reading: an
    interpolated crossing, at least the highest rate, or below the lowest) and whether the curve is monotone."""
    out: dict[str, dict] = {}
    for row in rows:
        g = out.setdefault(row["deployment"], {"deployment": row["deployment"], "kind": row["kind"],
                                               "num_gpus": row["num_gpus"], "rates": [], "attainments": []})
        g["rates"].append(row["rate"])
        g["attainments"].append(row["attainment"])
    result = []
    for g in out.values():
        read = reading(g["rates"], g["attainments"], goal)
        rps = read["value"]
        result.append({"deployment": g["deployment"], "kind": g["kind"], "num_gpus": g["num_gpus"], "goal": goal,
                       "lowest_rate": min(g["rates"]), "highest_rate": max(g["rates"]), "goodput_rps": rps,
                       "goodput_per_gpu": None if rps is None else rps / g["num_gpus"], "read": read["read"],
                       "monotone": read["monotone"]})
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
