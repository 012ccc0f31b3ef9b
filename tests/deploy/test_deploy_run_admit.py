"""A deployment's instance (deploy/instance.Instance) around a plain Run, driven through its port (port.Port):
requests laid out at start but handed to it later (admit, its port's inbox), a run that waits for them without
calling it a stall (expecting), an idle jump bounded by `until`."""
from __future__ import annotations

import dataclasses

import pytest
from deploy_cases import req

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED, REJECTED
from tinyserve.deploy.instance import Instance
from tinyserve.engine import Engine


def start(later, rc=None):
    rc = rc or RunConfig("continuous", dry_run=True)
    return Instance("replica", 0, rc, "custom", Engine().model_side(rc), later)


def test_a_request_admitted_at_t_runs_as_one_that_arrives_at_t():
    plain = Engine().run([req("a", 80, 6, 0.5)], "continuous", dry_run=True)
    a = req("a", 80, 6)  # arrival 0: admit() says when it comes
    inst = start([a])
    assert inst.done and not inst.port.run.requests  # laid out, not queued
    inst.admit(a, 0.5)
    while not inst.done:
        inst.step(None)
    tr = inst.port.run.trace()
    assert [dataclasses.asdict(s) for s in tr.steps] == [dataclasses.asdict(s) for s in plain.steps]
    assert a.status == FINISHED and a.token_times == plain.requests[0].token_times


def test_expecting_waits_without_a_stall_and_until_bounds_the_idle_jump():
    a = req("a", 80, 6)
    inst = start([a])
    run = inst.port.run
    inst.expecting = True
    assert inst.step(None) is None and run.now == 0.0  # nothing here yet, more may come: no error, no jump
    inst.admit(a, 2.0)
    assert inst.step(until=1.25) is None and run.now == 1.25  # idle until 2.0, not past the next event elsewhere
    assert inst.step(None) is None and run.now == 2.0
    assert inst.step(None) is not None and a.num_prefilled == 80


def test_later_requests_are_laid_out_and_the_hopeless_ones_rejected_alone():
    small, big = req("s", 50, 20), req("big", 50, 200, seed=1)
    inst = start([small, big], RunConfig("continuous", dry_run=True, slab="longest", kv_budget=100 * 327_680))
    assert big.status == REJECTED and small.status != REJECTED
    with pytest.raises(RuntimeError):
        inst.admit(big, 0.0)
    inst.admit(small, 0.0)
    while not inst.done:
        inst.step(None)
    assert inst.port.run.trace().requests[0].status == FINISHED
