"""A deployment's record: each instance's trace, the routes, every K/V transfer, and the requests as clients saw
them (a disaggregated request's prefill and decode parts joined); its metrics and SLO attainment."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..core.request import FINISHED, Request
from ..core.scheduling.scheduler import stop_reason
from ..trace import export
from ..trace.metrics import _stats, request_metrics
from ..trace.record import Trace, snapshot_requests


def joined_requests(requests: list[Request], prefill_side: dict[str, Request], decode_side: dict[str, Request],
                    dry_run: bool) -> list[Request]:
    """One request per request given, as a client saw it: prefill and decode instances' parts joined."""
    out = []
    for r in requests:
        d, p = decode_side.get(r.id), prefill_side.get(r.id)
        # each a copy of its own (snapshot_requests), the record's: filled in here, no run's request changed
        if d is not None:
            (c,) = snapshot_requests([d])
            c.prefill_computed_tokens, c.admitted_s = p.prefill_computed_tokens, p.admitted_s
        elif p is not None:  # ended at its prefill instance (a 1-token answer, EOS first), or never ran
            (c,) = snapshot_requests([p])
            c.max_new_tokens = r.max_new_tokens
            if c.status == FINISHED:  # its stop reason against the client's own limit, not the stand-in's
                c.finish_reason = stop_reason(c, c.output[-1] if c.output else -1, dry_run)
        else:
            (c,) = snapshot_requests([r])
        out.append(c)
    return out


@dataclass(frozen=True)
class Transfer:
    """One request's K/V sent from a prefill instance to a decode instance (times in the modeled clock)."""

    request_id: str
    src: int  # instance index (DeploymentTrace.instances)
    dst: int
    link: str
    bytes: int  # K/V bytes of the model the clock speaks for (the preset's): what the link is priced by
    real_bytes: int | None  # bytes really copied between the tiny GPT's runners (None on a dry run)
    ready_s: float  # the prefill made its first token: the K/V could leave
    start_s: float  # the link was free (one transfer at a time per link)
    end_s: float  # landed: the decode instance may admit it


@dataclass
class DeploymentTrace:
    """Everything a deployment did; metrics() are over its requests as clients saw them."""

    kind: str  # "colocated" | "disaggregated"
    config: dict  # DeploymentConfig.to_dict()
    workload: str
    policy: str
    hardware: str
    gpus_per_instance: dict[str, int]  # by role ("replica", or "prefill" and "decode"): tensor parallel
    roles: list[str]  # per instance: "replica" | "prefill" | "decode"
    instances: list[Trace]
    routes: dict[str, list[int]]  # request id -> the instances it went through, in order
    transfers: list[Transfer] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    link: str | None = None

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment, every instance's counted (goodput is per GPU)."""
        return sum(self.gpus_per_instance[role] for role in self.roles)

    def as_seen(self, ttft_at: str = "prefill") -> list[Request]:
        """The requests as a client sees them, by where the first token counts. "prefill" (DistServe's
        convention): the prefill instance streams the first token. "decode" (vLLM's and Dynamo's P/D): the prefill
        side's token is not sent; the first token comes with the decode instance's first step for the request,
        after the transfer, so TTFT carries the transfer and the first TPOT gap no longer does. A request that
        never reached a decode instance (replicas; an answer done at its prefill) is the same either way."""
        from ..trace.slo import check_ttft_at

        if check_ttft_at(ttft_at) == "prefill" or self.kind != "disaggregated":
            return self.requests
        seen = []
        for r in self.requests:
            if len(self.routes.get(r.id, ())) < 2 or len(r.token_times) < 2:
                seen.append(r)
            else:  # the decode instance's first token is the first the client gets
                seen.append(replace(r, output=r.output[1:], token_times=r.token_times[1:]))
        return seen

    def metrics(self, ttft_at: str = "prefill") -> dict:
        """Request-level metrics of the contract (throughput, TTFT, TPOT, ITL, E2EL) over the whole deployment,
        with TTFT where `ttft_at` says the first token counts (as_seen)."""
        return {**request_metrics(self.as_seen(ttft_at)), "num_instances": len(self.instances),
                "num_gpus": self.num_gpus, "transfers": len(self.transfers),
                "transfer_ms": _stats([(x.end_s - x.ready_s) * 1e3 for x in self.transfers]),
                "transfer_bytes": sum(x.bytes for x in self.transfers)}

    def slo(self, ttft_ms: float, tpot_ms_target: float, ttft_at: str = "prefill") -> dict:
        """Share of requests meeting both targets (trace.slo.attainment), TTFT counted where `ttft_at` says
        (as_seen; the JSON documents name the convention: summary())."""
        from ..trace.slo import attainment

        return attainment(self.as_seen(ttft_at), ttft_ms, tpot_ms_target)

    def summary(self, tokens: bool = False, ttft_at: str = "prefill") -> dict:
        """The `tinyserve run --deployment ... --json` document (docs/contract.md); its metrics count TTFT where
        `ttft_at` says, and it names the convention."""
        first = self.instances[0]
        return {"deployment": {**self.config, "gpus_per_instance": self.gpus_per_instance, "num_gpus": self.num_gpus},
                "policy": self.policy, "workload": self.workload, "workload_knobs": first.workload_knobs,
                "clock": first.clock, "hardware": self.hardware, "dry_run": first.dry_run,
                "knobs": first.knobs, "ttft_at": ttft_at, "metrics": self.metrics(ttft_at),
                "requests": [{**export.request_dict(first, r, tokens), "instances": self.routes.get(r.id, [])}
                             for r in self.requests],
                "instances": [{"index": i, "role": role, **self.effective(i), "metrics": tr.metrics(),
                               **self._served(i, role)}
                              for i, (role, tr) in enumerate(zip(self.roles, self.instances))],
                "transfers": [asdict(x) for x in self.transfers]}

    def effective(self, index: int) -> dict:
        """What an instance ran with, after every cap: its slots (the batch size capped by the slabs its KV memory
        holds; a capped knob is accepted, not refused) and its policy's knobs as the policy holds them (the token
        budget among them, built from the batch size as given)."""
        tr = self.instances[index]
        return {"num_slots": tr.num_slots, "knobs": dict(tr.knobs)}

    def _served(self, index: int, role: str) -> dict:
        """A prefill instance's share of the work: how many requests the router sent it (rejected ones aside) and
        its transfers' waits, from each prompt's end (Transfer.ready_s) to its send's start, in ms: the time its
        K/V waited for the link and for room on the decode side. Nothing for the other roles."""
        if role != "prefill":
            return {}
        waits = _stats([(x.start_s - x.ready_s) * 1e3 for x in self.transfers if x.src == index])
        return {"requests_served": sum(1 for route in self.routes.values() if route and route[0] == index),
                "transfer_wait_ms": {"p50": waits["p50"], "max": waits["max"]}}

    def to_dict(self) -> dict:
        """Everything (`tinyserve run --deployment ... --trace`): summary(tokens=True), each request's token times,
        the routes, and each instance's full Trace.to_dict() under `instances[i]["trace"]`."""
        d = self.summary(tokens=True)
        for rd, r in zip(d["requests"], self.requests):
            rd["token_times_s"] = list(r.token_times)
        for inst, tr in zip(d["instances"], self.instances):
            inst["trace"] = tr.to_dict()
        d["roles"] = list(self.roles)
        d["routes"] = {k: list(v) for k, v in self.routes.items()}
        d["link"] = self.link
        return d

    def to_perfetto(self) -> dict:
        """Chrome-trace JSON: a process per instance (a track per slot), the transfers on a track per link."""
        from .export import to_perfetto

        return to_perfetto(self)

    def save(self, path: str | Path) -> None:
        """Write to_dict() as JSON."""
        Path(path).write_text(json.dumps(self.to_dict()))

    def save_perfetto(self, path: str | Path) -> None:
        """Write to_perfetto() as JSON."""
        Path(path).write_text(json.dumps(self.to_perfetto()))
