"""The coordinator: instances (each a Run with its own clock), the requests' routes and the K/V transfers.

One event loop, in time order: the next arrival is routed, a finished prompt's K/V is put on its link, the next
transfer lands on its decode instance, or the instance whose clock is earliest runs one step (a step is never cut:
what arrives during it waits for the next one, as on a real server). An idle instance jumps its clock to its own
next event, but never past the deployment's next event, which may bring it work. Under the modeled clock that is
the instances running in parallel.

Routing: the least-loaded instance of the pool (requests queued, running, holding K/V or on their way to it; ties:
the lowest index), counted at the moment of the arrival.

Memory pushes back, as in DistServe (its prefill instance keeps a prompt's blocks until the decode side takes them):
a prompt's K/V stay on its prefill instance, counted in its KV, after its first token is made. Each prefill instance
sends over its own link, one transfer at a time, in the order its prompts finished; the head of its queue is ready
once its prompt is done and its link is free. The router serves first come first served across the prefill
instances, as a real server does (vLLM's disaggregated proxy hands a request to the decode side when its prefill
returns, and the decode scheduler serves its queue in that order): when a decode instance has room (a free slot and
the prompt's K/V, with nobody preempted there still waiting for room), the ready head that has waited longest and
fits leaves (ties: the earlier arrival, then the lower instance index), whichever prefill instance holds it; a head
that does not fit holds back no other instance's. The least loaded decode instance with room reserves the slot and
K/V as the transfer starts. In flight, the K/V count on both instances; on landing the prefill instance frees them
and the decode instance admits the request at its next step (the reservation goes ahead of its queue). A prefill
instance whose KV is full admits no new prompt until some K/V leave. An instance of several GPUs (tensor parallel:
each holds a share of the KV heads) sends the shares in parallel, one link per GPU. Modeled simplification (stated):
a transfer shares its link with no other traffic.
"""
from __future__ import annotations

import contextlib
import heapq
import math
from collections import deque
from typing import TYPE_CHECKING

from ..core.config import RunConfig
from ..core.request import REJECTED, Request, check_prompts
from ..core.scheduling.scheduler import reject
from ..core.workloads import Workload, ids_known, resolve_workload
from ..cost.links import get_link, transfer_s
from ..loop import gc_paused
from .config import DeploymentConfig
from .instance import Handoff, Instance
from .record import DeploymentTrace, Transfer, joined_requests

if TYPE_CHECKING:
    from ..engine import Engine


def _least_loaded(pool: list[Instance], t: float) -> Instance:
    return min(pool, key=lambda x: (x.load(t), x.index))


class Deployment:
    """Instances serving one workload; step() advances the earliest event, finish() runs to the end."""

    def __init__(self, engine: Engine, workload: Workload, rc: RunConfig, dc: DeploymentConfig):
        dc.check_run(rc)
        self.rc, self.dc = rc, dc
        name, self.requests = resolve_workload(workload, rc.seed, rc.workload_knobs)
        self.name = name
        self.link = get_link(dc.link) if dc.kind == "disaggregated" else None
        self.instances: list[Instance] = []
        self.transfers: list[Transfer] = []
        self.routes: dict[str, list[int]] = {r.id: [] for r in self.requests}
        self._queues: list[deque] = []  # per prefill instance: (decode request, prefill request, blob), not yet sent
        self._landing: list = []  # (end_s, order, Transfer, decode request, blob): transfers on the wire
        self._order = 0  # ties in the event heaps: first pushed, first handled
        self._link_free: list[float] = []  # per prefill instance: when its link is free again
        self.prefill_side: dict[str, Request] = {}  # disaggregated: the prefill instance's copy of each request
        self.decode_side: dict[str, Request] = {}
        self._by_id = {r.id: r for r in self.requests}
        model = engine.model_side(rc)
        if not ids_known(name, model.config.vocab_size):
            check_prompts(self.requests, model.config.vocab_size)  # once: every instance shares the prompts
        if dc.kind == "colocated":
            for i in range(dc.replicas):  # every replica sized for every request; each is admitted to one
                self.instances.append(Instance("replica", i, rc, name, model, self.requests))
            self.front = self.instances
        else:
            pre = [Request(r.id, r.prompt, 1, r.arrival_s, r.ignore_eos, 1 if r.known_output_len() is not None
                           else None) for r in self.requests]
            # stand-ins: the decode runs are laid out (and reject) by these; like `pre`, they share the client's
            # prompt (Request.fresh would copy 200 prompts of 2,000-3,500 tokens on every dry run of a sweep)
            dec = [Request(r.id, r.prompt, r.max_new_tokens, r.arrival_s, r.ignore_eos, r.output_len_hint)
                   for r in self.requests]
            for i in range(dc.prefill_instances):  # each its own config: a policy object is one instance's
                self.instances.append(Instance("prefill", i, dc.prefill_config(rc), name, model, pre,
                                               (Handoff(self, i),)))
                self._link_free.append(0.0)
                self._queues.append(deque())
            rc_dec = dc.decode_config(rc)
            for j in range(dc.decode_instances):
                self.instances.append(Instance("decode", dc.prefill_instances + j, rc_dec, name, model, dec))
            self.front = self.instances[:dc.prefill_instances]
            for r, p, d in zip(self.requests, pre, dec):
                why = d if d.status == REJECTED else p if p.status == REJECTED else None  # d: the client's own limits
                if why is not None:  # rejected alone, with the reason of the instance that can never hold it
                    reject([(r, why.finish_reason)])
                else:
                    self.prefill_side[r.id] = p
        self.decoders = [x for x in self.instances if x.role == "decode"]
        # each role's GPUs per instance, as its instances' clocks price them (--gpus, --prefill-gpus, --decode-gpus)
        self.gpus = {x.role: x.port.hardware.num_gpus for x in self.instances}
        self.arrivals = deque(sorted((r for r in self.requests if r.status != REJECTED), key=lambda r: r.arrival_s))
        self._set_expecting()

    # ---- the event loop -------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Nothing left to arrive, transfer, wait or run."""
        return (not self.arrivals and not any(self._queues) and not self._landing
                and all(x.done for x in self.instances))

    def step(self) -> bool:
        """Advance the earliest event (an arrival, a prompt ready to send, a landing transfer or one instance's
        step); False when done."""
        ta = self.arrivals[0].arrival_s if self.arrivals else math.inf
        th, src = self._next_send() if any(self._queues) else (math.inf, None)
        tx = self._landing[0][0] if self._landing else math.inf
        ti, inst = math.inf, None
        for x in self.instances:  # the earliest clock of those with work (ties: the lower index)
            if not x.blocked and (t := x.port.next_step_s()) < ti:
                ti, inst = t, x
        if ta == th == tx == ti == math.inf:
            if not self.done:
                raise RuntimeError("deployment stalled with requests left")  # words: ok (a bug)
            return False
        if ta <= min(th, tx, ti):  # arrivals first: one arriving as a step starts joins it, as in a single run
            r = self.arrivals.popleft()
            target = _least_loaded(self.front, ta)
            self._admit(target, self.prefill_side.get(r.id, r), ta)
            if not self.arrivals:
                self._set_expecting()
        elif th <= min(tx, ti):
            self._send(src, th)
        elif tx <= ti:
            end, _, tr, req, blob = heapq.heappop(self._landing)
            dst = self.instances[tr.dst]
            dst.incoming -= 1
            self._admit(dst, req, end, blob)
            self.instances[tr.src].let_go(self.prefill_side[req.id], end)
            self._set_expecting()
        else:
            before, done_before = inst.port.now, inst.port.num_done
            rec = inst.step(until=min(ta, th, tx))
            if rec is None and inst.port.now == before:
                inst.blocked = True  # nothing to do until a request is admitted here
            elif rec is not None:
                inst.last_step = (inst.port.now, inst.port.num_done - done_before)
            if inst.role == "prefill":
                if inst.done:  # the decode side may wait for it no longer
                    self._set_expecting()
                elif inst.expecting != (bool(self.arrivals) or bool(inst.kept)):
                    inst.expecting, inst.blocked = not inst.expecting, False
        return True

    def finish(self) -> DeploymentTrace:
        """Run every instance to the end; the deployment's record (a dry run pauses the garbage collector, as
        Run.finish does: a rate sweep of dry runs spends a quarter of its time re-scanning long-lived records)."""
        with gc_paused() if self.rc.dry_run else contextlib.nullcontext():
            while self.step():
                pass
            return self.trace()

    def _admit(self, inst: Instance, r: Request, t: float, kv: object = None) -> None:
        inst.admit(r, t, kv)
        self.routes[r.id].append(inst.index)

    def _set_expecting(self) -> None:
        """Tell each instance whether more may still be admitted (a static batch waits for more only then)."""
        more = bool(self.arrivals)
        feeding = (more or any(self._queues) or bool(self._landing)
                   or any(not x.done for x in self.front if x.role == "prefill"))
        for x in self.instances:
            # a prefill instance holding K/V to send will have room again: waiting for it is no stall
            now = feeding if x.role == "decode" else more or bool(x.kept)
            if x.expecting != now:
                x.expecting = now
                x.blocked = False

    def hand_off(self, src: int, p: Request, blob: object) -> None:
        """A prefill instance made request p's first token: unless that ended it, its K/V (kept there) join the
        instance's queue to be sent; else they are freed."""
        orig = self._by_id[p.id]
        n_out = orig.known_output_len()
        if p.finish_reason == "eos" or orig.max_new_tokens == 1 or n_out == 1:
            self.instances[src].let_go(p, p.finish_s)  # done at the prefill instance: nothing to decode
            return
        d = orig.prefilled(p.output, p.token_times)
        self.decode_side[p.id] = d
        self._queues[src].append((d, p, blob))

    def _next_send(self) -> tuple[float, int | None]:
        """When the next transfer can start, and from which prefill instance: the head of a queue leaves once its
        prompt is done, its link is free (then it is ready) and a decode instance has room for it (now, or when a
        step there ends). Of the heads that can leave earliest, the one ready longest (ties: the earlier arrival,
        then the lower index): first come first served across the instances."""
        best, best_src, best_key = math.inf, None, None
        for src, q in enumerate(self._queues):
            if not q:
                continue
            d, p, _ = q[0]
            t0 = max(p.finish_s, self._link_free[src])
            t = math.inf
            for x in self.decoders:
                if x.room(d, t0):
                    t = t0
                    break
                if x.last_step[0] > t0 and x.room(d, t0, later=True):
                    t = min(t, x.last_step[0])
            if t < best or (t == best < math.inf and (t0, d.arrival_s) < best_key):
                best, best_src, best_key = t, src, (t0, d.arrival_s)
        return best, best_src

    def _send(self, src: int, start: float) -> None:
        """The head of src's queue leaves at `start`: the least-loaded decode instance with room reserves its slot
        and K/V, and the K/V go on src's link."""
        d, p, blob = self._queues[src].popleft()
        dst = _least_loaded([x for x in self.decoders if x.room(d, start)], start)
        dst.reserve(d)
        nbytes = p.prompt_len * self.instances[src].port.bytes_per_token
        # tensor parallel: each GPU holds its share of the KV heads and sends it over its own link; between
        # instances of different GPU counts, as many links as the smaller has GPUs carry it at once
        end = start + transfer_s(self.link, nbytes / min(self.gpus["prefill"], self.gpus["decode"]))
        self._link_free[src] = end
        tr = Transfer(p.id, src, dst.index, self.link.name, nbytes, getattr(blob, "nbytes", None), p.finish_s,
                      start, end)
        self.transfers.append(tr)
        self._order += 1
        heapq.heappush(self._landing, (end, self._order, tr, d, blob))

    # ---- the record -----------------------------------------------------------------------------------------
    def trace(self) -> DeploymentTrace:
        """The record so far: every instance's trace, the routes, the transfers, the requests as clients saw them."""
        hw = self.instances[0].port.hardware
        final = joined_requests(self.requests, self.prefill_side, self.decode_side, self.rc.dry_run)
        return DeploymentTrace(self.dc.kind, self.dc.to_dict(), self.name, self.rc.policy, hw.name, dict(self.gpus),
                               [x.role for x in self.instances], [x.port.trace() for x in self.instances],
                               {k: list(v) for k, v in self.routes.items()}, list(self.transfers), final,
                               self.link.name if self.link else None)


def start_deployment(engine: Engine, workload: Workload, rc: RunConfig, dc: DeploymentConfig) -> Deployment:
    """A deployment set up, not yet stepped."""
    return Deployment(engine, workload, rc, dc)


def run_deployment(engine: Engine, workload: Workload, rc: RunConfig, dc: DeploymentConfig) -> DeploymentTrace:
    """Serve a workload with a deployment to the end (modeled clock only)."""
    return Deployment(engine, workload, rc, dc).finish()
