"""The coordinator: instances (each a Run with its own clock), the requests' routes and the K/V transfers.

One event loop, in time order: the next arrival is routed, a finished prompt's K/V is put on its link, the next
transfer lands on its decode instance, or the instance whose clock is earliest runs one step (a step is never cut:
what arrives during it waits for the next one, as on a real server). An idle instance jumps its clock to its own
next event, but never past the deployment's next event, which may bring it work. Under the modeled clock that is
the instances running in parallel.

Routing: the least-loaded instance of the pool (requests queued, running, holding K/V or on their way to it; ties:
the lowest index), counted at the moment of the arrival.

Memory pushes back, as in DistServe (its prefill instance keeps a prompt's blocks until the decode side takes
them): a prompt's K/V stay on its prefill instance, counted in its KV, after its first token is made. Each prefill
instance sends over its own link, one transfer at a time, first come first served; the head of its queue leaves
when the link is free and a decode instance has room for it (a free slot and the prompt's K/V, with nobody
preempted there still waiting for room): the least loaded of those reserves the slot and K/V as the transfer
starts. In flight, the K/V count on both instances; on landing the prefill instance frees them and the decode
instance admits the request at its next step (the reservation goes ahead of its queue). A prefill instance whose
KV is full admits no new prompt until some K/V leave. An instance of several GPUs (tensor parallel: each holds a
share of the KV heads) sends the shares in parallel, one link per GPU. Modeled simplification (stated): a
transfer shares its link with no other traffic.
"""
from __future__ import annotations

import contextlib
import heapq
import math
import weakref
from collections import deque
from typing import TYPE_CHECKING

from ..core.config import RunConfig
from ..core.blocks import blocks_for
from ..core.request import FINISHED, REJECTED, Request, check_prompts
from ..core.scheduling.scheduler import stop_reason
from ..core.workloads import Workload, resolve_workload
from ..cost.links import get_link, transfer_s
from ..loop import ModelSide, Run, StepHook, gc_paused
from ..trace.record import snapshot_requests
from .config import DeploymentConfig
from .record import DeploymentTrace, Transfer

if TYPE_CHECKING:
    from ..engine import Engine


class Instance:
    """One engine of a deployment: its role, its index in the deployment, a plain Run, and what is handed to it:
    an inbox of requests (each arriving at its time) and the K/V those that come prefilled carry."""

    def __init__(self, role: str, index: int, rc: RunConfig, name: str, model: ModelSide, later: list[Request],
                 hooks: tuple = ()):
        self.role, self.index = role, index
        self.inbox: list[tuple[float, int, Request]] = []  # (time, order, request), a heap
        self.carried: dict[str, object] = {}  # request id -> its prompt's K/V from another instance, not yet run
        self.expecting = False  # more may still be handed to it (a static batch waits for more only then)
        self.blocked = False  # idle with nothing of its own to wait for: asleep until something is admitted
        self.incoming = 0  # transfers on their way here (counted as load)
        self.last_step = (0.0, 0)  # (end, requests it finished) of this instance's latest step
        self.planned_free = (0, 0)  # (slots, blocks) free once its latest step was planned: its room until it ends
        self._order = 0
        # only a decode instance is handed K/V (and asked for room mid-step): replicas and prefill instances step
        # without the hook, as fast as a plain run
        self.run = Run(rc, (name, []), model, (*hooks, _Carried(self)) if role == "decode" else hooks, later)
        self.run.pool.keep_finished = role == "prefill"  # a prompt's K/V stay until they have landed elsewhere

    @property
    def done(self) -> bool:
        """Nothing handed to it is left to arrive, wait or run."""
        return not self.inbox and self.run.done

    def admit(self, r: Request, t: float, kv: object = None) -> None:
        """r arrives here at time t. kv: its prompt's K/V computed elsewhere (ModelRunner.export_kv; None on a dry
        run), when it comes prefilled (num_prefilled == prefill_len, its first token in output): it only decodes."""
        if r.status == REJECTED:
            raise RuntimeError(f"{r.id} was rejected: not admitted")  # words: ok (a deployment bug)
        self._order += 1
        heapq.heappush(self.inbox, (t, self._order, r))
        if r.num_prefilled and r.num_prefilled == r.prefill_len:
            self.carried[r.id] = kv
        self.blocked = False

    def step(self, until: float):
        """Hand the run what has arrived by its clock, then run one step of it (Run.step)."""
        run = self.run
        while self.inbox and self.inbox[0][0] <= run.now:
            run.arrive(heapq.heappop(self.inbox)[2])
        return run.step(until, arriving=self.inbox[0][0] if self.inbox else None, expecting=self.expecting)

    def load(self, t: float) -> int:
        """Requests queued, running or coming here at time t. The latest step may end after t: those it finishes
        are still running at t (events are handled in time order, so no earlier step ends after t)."""
        policy = self.run.policy
        end, finished = self.last_step
        return (len(self.run.pending) + len(self.inbox) + len(policy.waiting) + len(policy.running) + self.incoming
                + len(self.run.pool.kept) + (finished if end > t else 0))

    def room(self, r: Request, t: float, later: bool = False) -> bool:
        """A slot and K/V free here at time t for r arriving prefilled, and nobody preempted here waiting for room
        (they come back first). Until its latest step ends, what that step frees is not free yet; later: once it
        has ended."""
        pool = self.run.pool
        if any(w.id not in pool.reserved for w in self.run.policy.waiting):
            return False
        slots, blocks = (self.planned_free if t < self.last_step[0] and not later
                         else (pool.num_free, getattr(pool, "free_blocks", 0)))
        return slots > 0 and (pool.block_size is None or blocks_for(r.prefill_len + 1, pool.block_size) <= blocks)

    def reserve(self, r: Request) -> None:
        """Take a slot and r's K/V here for its transfer, now (room(r, now) held)."""
        pool = self.run.pool
        before = getattr(pool, "free_blocks", 0)
        pool.reserve(r)
        slots, blocks = self.planned_free
        self.planned_free = (slots - 1, blocks - (before - getattr(pool, "free_blocks", 0)))
        self.run.scheduler.recount()
        self.incoming += 1

    def let_go(self, p: Request, t: float) -> None:
        """p's K/V have left this (prefill) instance at time t: freed. Asleep for want of KV, it wakes at t."""
        self.run.pool.let_go(p)
        self.run.scheduler.recount()
        if self.blocked:
            self.blocked = False
            self.run.wait_until(t)


class _Carried(StepHook):
    """Requests handed over with their K/V start decoding in the step just planned: their K/V go into the slot or
    blocks the policy just gave them, before the runner reads them, and count as held."""

    def __init__(self, instance: Instance):
        # a weak reference: the instance holds its run, which holds this hook; a cycle would keep a whole dry run
        # alive past its end (loop.gc_paused moves its objects to the oldest generation, seldom collected)
        self._instance = weakref.ref(instance)

    @property
    def instance(self) -> Instance:
        return self._instance()

    def planned(self, run: Run, plan) -> None:
        pool = run.pool
        self.instance.planned_free = (pool.num_free, getattr(pool, "free_blocks", 0))
        carried = self.instance.carried
        if not carried:
            return
        arrived = [w.request for w in plan.works if w.request.id in carried]
        for r in arrived:
            kv = carried.pop(r.id)
            if run.runner is not None:
                run.runner.import_kv(r, kv)
        if arrived:
            run.scheduler.recount()


class _Handoff(StepHook):
    """On a prefill instance: copies out the K/V of each prompt the step completes, before the loop frees them
    (executed), then hands each finished request to the coordinator (recorded)."""

    def __init__(self, deployment: Deployment, instance_index: int):
        self._d, self.i = weakref.ref(deployment), instance_index  # weak: no cycle (as _Carried)
        self.blobs: dict[str, object] = {}

    def executed(self, run: Run, plan) -> None:
        for w in plan.works:
            r = w.request
            if w.phase == "prefill" and w.start + w.tokens == r.prefill_len:
                self.blobs[r.id] = run.runner.export_kv(r, r.prompt_len)

    def recorded(self, run: Run, plan, record) -> None:
        for w in plan.works:
            r = w.request
            if w.phase == "prefill" and r.status == FINISHED:
                self._d().hand_off(self.i, r, self.blobs.pop(r.id, None))


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
                                               (_Handoff(self, i),)))
                self._link_free.append(0.0)
                self._queues.append(deque())
            rc_dec = dc.decode_config(rc)
            for j in range(dc.decode_instances):
                self.instances.append(Instance("decode", dc.prefill_instances + j, rc_dec, name, model, dec))
            self.front = self.instances[:dc.prefill_instances]
            for r, p, d in zip(self.requests, pre, dec):
                why = d if d.status == REJECTED else p if p.status == REJECTED else None  # d: the client's own limits
                if why is not None:  # rejected alone, with the reason of the instance that can never hold it
                    r.reject(why.finish_reason)
                else:
                    self.prefill_side[r.id] = p
        self.decoders = [x for x in self.instances if x.role == "decode"]
        # each role's GPUs per instance, as its instances' clocks price them (--gpus, --prefill-gpus, --decode-gpus)
        self.gpus = {x.role: x.run.clock.hardware.num_gpus for x in self.instances}
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
        for x in self.instances:
            if not x.blocked and not x.done and x.run.now < ti:
                ti, inst = x.run.now, x
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
            before, done_before = inst.run.now, inst.run.num_done
            rec = inst.step(until=min(ta, th, tx))
            if rec is None and inst.run.now == before:
                inst.blocked = True  # nothing to do until a request is admitted here
            elif rec is not None:
                inst.last_step = (inst.run.now, inst.run.num_done - done_before)
            if inst.role == "prefill":
                if inst.done:  # the decode side may wait for it no longer
                    self._set_expecting()
                elif inst.expecting != (bool(self.arrivals) or bool(inst.run.pool.kept)):
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
            now = feeding if x.role == "decode" else more or bool(x.run.pool.kept)
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
        d = orig.fresh()
        d.output, d.token_times = list(p.output), list(p.token_times)
        d.num_prefilled = d.prefill_len = p.prompt_len
        self.decode_side[p.id] = d
        self._queues[src].append((d, p, blob))

    def _next_send(self) -> tuple[float, int | None]:
        """When the next transfer can start, and from which prefill instance: the head of a queue leaves once its
        prompt is done, its link is free and a decode instance has room for it (now, or when a step there ends)."""
        best, best_src = math.inf, None
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
            if t < best:
                best, best_src = t, src
        return best, best_src

    def _send(self, src: int, start: float) -> None:
        """The head of src's queue leaves at `start`: the least-loaded decode instance with room reserves its slot
        and K/V, and the K/V go on src's link."""
        d, p, blob = self._queues[src].popleft()
        dst = _least_loaded([x for x in self.decoders if x.room(d, start)], start)
        dst.reserve(d)
        nbytes = p.prompt_len * self.instances[src].run.pool.bytes_per_token
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
    def final_requests(self) -> list[Request]:
        """One request per request given, as a client saw it: prefill and decode instances' parts joined."""
        out = []
        for r in self.requests:
            d, p = self.decode_side.get(r.id), self.prefill_side.get(r.id)
            if d is not None:
                (c,) = snapshot_requests([d])
                c.prefill_computed_tokens = p.prefill_computed_tokens
                c.admitted_s = p.admitted_s
            elif p is not None:  # ended at its prefill instance (a 1-token answer, EOS first), or never ran
                (c,) = snapshot_requests([p])
                c.max_new_tokens = r.max_new_tokens
                if c.status == FINISHED:  # its stop reason against the client's own limit, not the stand-in's
                    c.finish_reason = stop_reason(c, c.output[-1] if c.output else -1, self.rc.dry_run)
            else:
                (c,) = snapshot_requests([r])
            out.append(c)
        return out

    def trace(self) -> DeploymentTrace:
        """The record so far: every instance's trace, the routes, the transfers, the requests as clients saw them."""
        hw = self.instances[0].run.clock.hardware
        return DeploymentTrace(self.dc.kind, self.dc.to_dict(), self.name, self.rc.policy, hw.name,
                               dict(self.gpus), [x.role for x in self.instances], [x.run.trace() for x in self.instances],
                               {k: list(v) for k, v in self.routes.items()}, list(self.transfers),
                               self.final_requests(), self.link.name if self.link else None)


def start_deployment(engine: Engine, workload: Workload, rc: RunConfig, dc: DeploymentConfig) -> Deployment:
    """A deployment set up, not yet stepped."""
    return Deployment(engine, workload, rc, dc)


def run_deployment(engine: Engine, workload: Workload, rc: RunConfig, dc: DeploymentConfig) -> DeploymentTrace:
    """Serve a workload with a deployment to the end (modeled clock only)."""
    return Deployment(engine, workload, rc, dc).finish()
