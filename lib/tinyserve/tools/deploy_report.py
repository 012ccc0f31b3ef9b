"""Plain-text reports for the terminal (in the current language): a deployment's run (`tinyserve run --deployment`),
an SLO's attainment, and a goodput sweep's table (`tinyserve goodput`). `--json` prints the data instead."""
from __future__ import annotations

from collections.abc import Sequence

from ..deploy import DeploymentTrace
from ..analysis import steady
from ..lang import ljust, rjust, t, width
from ..trace.report import latency_lines, throughput_line


def _bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def slo_line(slo: dict) -> str:
    """One line: the targets and the share of requests meeting both (and each)."""
    return t("cli.slo.line", **slo)


def per_instance(dt: DeploymentTrace) -> str:
    """GPUs per instance in words: one number for replicas, each role's for a split."""
    g = dt.gpus_per_instance
    return (t("cli.deploy.per_replica", n=g["replica"]) if "replica" in g
            else t("cli.deploy.per_role", prefill=g["prefill"], decode=g["decode"]))


def format_deployment(dt: DeploymentTrace, slo: dict | None = None, ttft_at: str = "prefill") -> str:
    """The deployment, its request-level metrics (TTFT counted where `ttft_at` says), a line per instance, the
    transfers and the SLO attainment."""
    m = dt.metrics(ttft_at)
    first = dt.instances[0]

    def policy(tr) -> str:
        return t("cli.deploy.policy", policy=tr.policy, knobs=", ".join(f"{k}={v}" for k, v in tr.knobs.items()
                                                                     if v is not None))

    said = policy(first)
    if dt.kind == "disaggregated":  # each role may run its own policy and knobs (per-role options)
        dec = dt.instances[dt.roles.index("decode")]
        if policy(dec) != said:
            said = t("cli.deploy.roles_policy", prefill=said, decode=policy(dec))
    c = dt.config
    shape = (t("cli.deploy.colocated", replicas=c["replicas"]) if dt.kind == "colocated" else
             t("cli.deploy.disaggregated", prefill=c["prefill_instances"], decode=c["decode_instances"], link=dt.link))
    lines = [t("cli.deploy.head", shape=shape, policy=said, workload=dt.workload, gpus=dt.num_gpus,
               per=per_instance(dt), hardware=dt.hardware,
               dry_run=t("engine.summary.dry_run") if first.dry_run else ""),
             t("cli.deploy.requests", finished=m["num_finished"], total=m["num_requests"],
               rejected=m["num_rejected"], duration=m["duration_s"]),
             throughput_line(m), *latency_lines(m)]
    routed = [0] * len(dt.instances)
    for path in dt.routes.values():
        for i in path:
            routed[i] += 1
    for i, (role, tr) in enumerate(zip(dt.roles, dt.instances)):
        im = tr.metrics()
        lines.append(t("cli.deploy.instance", index=i, role=t(f"cli.deploy.role.{role}"), requests=routed[i],
                       steps=im["num_steps"], busy=im["busy_time_fraction"]))
        given = tr.knobs.get("batch_size")
        if given is not None and tr.num_slots < given:  # a capped knob runs at its effective value: said, not refused
            lines.append(t("cli.deploy.capped", given=given, slots=tr.num_slots))
    if dt.transfers:
        wait = m["transfer_ms"]
        lines.append(t("cli.deploy.transfers", count=m["transfers"], p50=wait["p50"], p99=wait["p99"],
                       bytes=_bytes(m["transfer_bytes"]), hardware=dt.hardware, link=dt.link))
        real = [x.real_bytes for x in dt.transfers if x.real_bytes is not None]
        if real:
            lines.append(t("cli.deploy.real_bytes", bytes=_bytes(sum(real))))
    if slo is not None:
        lines.append(slo_line(slo))
    return "\n".join(lines)


def goodput_words(g: dict) -> str:
    """A goodput per GPU as read (analysis.goodput.goodput_per_gpu): the value, >= the highest rate swept, or < the
    lowest; * when the attainment curve climbs back above the goal after it first fell below."""
    if g["read"] == "below":
        text = t("cli.goodput.below", value=g["lowest_rate"] / g["num_gpus"])
    elif g["read"] == "saturation":
        text = t("cli.goodput.saturation", value=g["goodput_per_gpu"])
    else:
        text = t("cli.goodput.at_least" if g["read"] == "at_least" else "cli.goodput.value", value=g["goodput_per_gpu"])
    text = text if g["monotone"] else text + " *"
    return text + " ~" if g.get("burst") else text


def format_seeds(per_seed: Sequence[dict], seeds: Sequence[int]) -> str:
    """The lines under several seeds' tables: per deployment, the median goodput per GPU and its range."""
    lines = [t("cli.goodput.seeds_head", n=len(seeds), seeds=", ".join(map(str, seeds)))]
    for g in per_seed:
        lines.append(t("cli.goodput.seeds_row", deployment=g["deployment"], median=goodput_words(g["median"]),
                       low=goodput_words(g["min"]), high=goodput_words(g["max"])))
    return "\n".join(lines)


def format_goodput(rows: Sequence[dict], best: Sequence[dict], workload: str, policy: str, ttft_ms: float,
                   tpot_ms: float) -> str:
    """A table: per deployment its GPUs, the attainment at each rate swept, and its goodput per GPU."""
    rates = sorted({r["rate"] for r in rows})
    share = {(r["deployment"], r["rate"]): r["attainment"] for r in rows}
    head = [t("cli.goodput.col.deployment"), t("cli.goodput.col.gpus"),
            *(t("cli.goodput.col.rate", rate=r) for r in rates), t("cli.goodput.col.saturation"),
            t("cli.goodput.col.goodput")]
    table = [head]
    for g in best:
        sat = g.get("saturation_per_gpu")
        table.append([g["deployment"], str(g["num_gpus"]),
                      *(f"{share[g['deployment'], r]:.1%}" for r in rates),
                      "" if sat is None else t("cli.goodput.value", value=sat), goodput_words(g)])
    cols = [max(width(row[j]) for row in table) for j in range(len(head))]
    body = ["  ".join(ljust(cell, cols[j]) if j == 0 else rjust(cell, cols[j]) for j, cell in enumerate(row))
            for row in table]
    return "\n".join([t("cli.goodput.head", workload=workload, policy=policy, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                        hardware=rows[0]["hardware"]), *body,
                      t("cli.goodput.foot", goal=best[0]["goal"]),
                      t("cli.goodput.steady", min=steady.MIN_REQUESTS, span=steady.SPAN_S,
                        n=steady.SATURATION_REQUESTS),
                      *([t("cli.goodput.burst", min=steady.MIN_REQUESTS, span=steady.SPAN_S)]
                        if any(g.get("burst") for g in best) else [])])
