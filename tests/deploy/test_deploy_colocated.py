"""Colocated deployments (dry runs): one replica is the plain run, step for step; two replicas route each request
once, to the least-loaded replica, and keep their own clocks."""
from __future__ import annotations

import dataclasses

import pytest
from deploy_cases import req

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine

POLICIES = ["static", "dynamic", "continuous", "chunked"]


def workload() -> list:
    """Twelve requests, arrivals in bursts and gaps (a replica idles, queues, and a static batch waits)."""
    lens = [(40, 9), (300, 3), (12, 30), (800, 5), (60, 14), (25, 2), (500, 20), (90, 7), (33, 11), (7, 40),
            (1500, 4), (64, 16)]
    arrivals = [0.0, 0.0, 0.01, 0.02, 0.02, 0.3, 0.31, 0.31, 0.9, 0.95, 0.95, 2.0]
    return [req(f"r{i}", p, n, a, seed=i) for i, ((p, n), a) in enumerate(zip(lens, arrivals))]


def knobs(policy: str) -> dict:
    """Small batches, so requests queue; chunked with a chunk smaller than the long prompts."""
    extra = {"chunked": {"chunk_size": 256}, "dynamic": {"timeout": 0.05}}.get(policy, {})
    return {"batch_size": 3, **extra}


@pytest.mark.parametrize("layout", ["slab", "paged"])
@pytest.mark.parametrize("policy", POLICIES)
def test_one_replica_is_the_plain_run(policy, layout):
    eng = Engine()
    plain = eng.run(workload(), policy, dry_run=True, kv_layout=layout, **knobs(policy))
    rc = RunConfig(policy, dry_run=True, kv_layout=layout, **knobs(policy))
    dep = run_deployment(eng, workload(), rc, DeploymentConfig("colocated", replicas=1))
    (inst,) = dep.instances
    assert len(inst.steps) == len(plain.steps) > 12
    for a, b in zip(inst.steps, plain.steps):  # every StepRecord field, the works included
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
    times = ("status", "admitted_s", "finish_s", "token_times", "output_len", "finish_reason", "slot")
    for side in (inst.requests, dep.requests):  # the instance's own record and the clients' view
        by_id = {r.id: r for r in side}
        assert sorted(by_id) == sorted(r.id for r in plain.requests)
        for r in plain.requests:
            assert r.status == FINISHED
            assert all(getattr(by_id[r.id], f) == getattr(r, f) for f in times), r.id
    assert dep.metrics()["ttft_ms"] == plain.metrics()["ttft_ms"]
    assert all(route == [0] for route in dep.routes.values())


def test_one_replica_is_the_plain_run_on_a_named_workload():
    eng, wk = Engine(), {"n": 40, "rate": 8.0}
    plain = eng.run("chapter-7.2-longtail", "chunked", dry_run=True, workload_knobs=wk)
    dep = run_deployment(eng, "chapter-7.2-longtail", RunConfig("chunked", dry_run=True, workload_knobs=wk),
                         DeploymentConfig("colocated"))  # replicas default to 1
    assert [dataclasses.asdict(s) for s in dep.instances[0].steps] == [dataclasses.asdict(s) for s in plain.steps]
    assert [r.token_times for r in dep.requests] == [r.token_times for r in plain.requests]


# ---------------------------------------------------------------------------------------------- two replicas
def test_two_replicas_route_every_request_once_and_finish_it_once():
    eng = Engine()
    for policy in POLICIES:
        dep = run_deployment(eng, workload(), RunConfig(policy, dry_run=True, **knobs(policy)),
                             DeploymentConfig("colocated", replicas=2))
        ids = [r.id for r in workload()]
        assert sorted(dep.routes) == sorted(ids)
        assert all(len(v) == 1 and v[0] in (0, 1) for v in dep.routes.values())
        for i, tr in enumerate(dep.instances):  # each replica ran exactly the requests routed to it
            mine = sorted(rid for rid, (dst,) in dep.routes.items() if dst == i)
            assert sorted(r.id for r in tr.requests) == mine, policy
            assert all(r.status == FINISHED for r in tr.requests)
            ran = {w.request_id for s in tr.steps for w in s.works}
            assert ran == set(mine)
        assert [r.id for r in dep.requests] == ids
        assert all(r.status == FINISHED and r.output_len == r.max_new_tokens for r in dep.requests)
        assert dep.metrics()["num_finished"] == 12 and dep.num_gpus == 2


def test_the_least_loaded_replica_takes_each_arrival_ties_to_the_lowest_index():
    # a, b, c at t=0: a -> 0 (0 vs 0: the lowest index), b -> 1 (1 vs 0), c -> 0 (1 vs 1). b makes 2 tokens
    # (done within ~0.1 s); a and c make 400 (~0.02 s a decode step: busy for seconds). At t=1: d finds replica 0
    # with 2 requests and replica 1 empty -> 1; e, at the same t=1 after d: 2 vs 1 -> 1; f: 2 vs 2 -> 0.
    reqs = [req("a", 50, 400), req("b", 50, 2, seed=1), req("c", 50, 400, seed=2),
            req("d", 50, 5, 1.0, seed=3), req("e", 50, 5, 1.0, seed=4), req("f", 50, 5, 1.0, seed=5)]
    dep = run_deployment(Engine(), reqs, RunConfig("continuous", dry_run=True),
                         DeploymentConfig("colocated", replicas=2))
    assert dep.routes == {"a": [0], "b": [1], "c": [0], "d": [1], "e": [1], "f": [0]}
    done = {r.id: r for r in dep.requests}
    assert done["b"].finish_s < 1.0 < done["a"].finish_s  # the premise of the hand count
    assert done["f"].finish_s > done["a"].first_token_s


@pytest.mark.parametrize("policy", POLICIES)
def test_replicas_keep_their_own_clocks(policy):
    # two identical requests at t=0 on two replicas: each is alone on its engine, so each finishes when one alone on
    # a plain engine does; on one engine the two would share steps and finish later
    one = Engine().run([req("x", 200, 20)], policy, dry_run=True)
    (alone,) = one.requests
    dep = run_deployment(Engine(), [req("x", 200, 20), req("y", 200, 20)], RunConfig(policy, dry_run=True),
                         DeploymentConfig("colocated", replicas=2))
    assert dep.routes == {"x": [0], "y": [1]}
    for r in dep.requests:
        assert r.token_times == alone.token_times and r.finish_s == alone.finish_s
    shared = Engine().run([req("x", 200, 20), req("y", 200, 20)], policy, dry_run=True)
    assert max(r.finish_s for r in shared.requests) > alone.finish_s


def test_routing_sees_each_replica_as_it_is_at_the_arrival_not_later():
    # a -> replica 0 (400 tokens: busy for seconds), b -> replica 1 (2 tokens). c arrives while b's last step is
    # still running (between that step's start and end, timed by a plain run of b alone): at that moment both
    # replicas hold one request -> the tie goes to replica 0. A router that looks at replica 1 as it will be after
    # the step (b gone) sends c to 1: it knew the future.
    alone = Engine().run([req("b", 50, 2, seed=1)], "continuous", dry_run=True)
    last = alone.steps[-1]
    t_c = last.start_s + last.duration_s / 2
    assert last.start_s < t_c < alone.requests[0].finish_s
    dep = run_deployment(Engine(), [req("a", 50, 400), req("b", 50, 2, seed=1), req("c", 50, 5, t_c, seed=2)],
                         RunConfig("continuous", dry_run=True), DeploymentConfig("colocated", replicas=2))
    assert dep.routes == {"a": [0], "b": [1], "c": [0]}
