"""Memory pushes back: a prompt's K/V stay on its prefill instance until a decode instance has room; the decode
instance reserves it when the transfer starts; in flight the K/V count on both; on landing the prefill instance
frees them and the decode instance admits the request at its next step. Checked at every event of scarce-memory
runs: each instance's K/V within its budget, none on neither instance's books."""
from __future__ import annotations

import pytest

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.cost.presets import get_preset
from tinyserve.deploy import DeploymentConfig, start_deployment
from tinyserve.engine import Engine

BPT = int(get_preset("h200-70b-fp8").kv_bytes_per_token)
FEW = 8 * 4096 * BPT  # KV for 8 slabs of 4,096 positions a GPU: 7.3's scarce-KV case


def _books(dep) -> None:
    """Every instance within its budget; every handed-off request's K/V on some instance's books."""
    for x in dep.instances:
        run = x.port.run
        assert run.pool.held_bytes() <= run.kv_capacity, (x.role, x.index)
        assert run.scheduler.kv_used_tokens * BPT <= run.kv_capacity
    for tr in dep.transfers:
        d = dep.decode_side[tr.request_id]
        src, dst = dep.instances[tr.src], dep.instances[tr.dst]
        landed = any(r is d for r in dst.port.run.requests) or any(e[2] is d for e in dst.port.inbox)
        if not landed:  # in flight: on both instances' books
            assert tr.request_id in src.handover.kept and tr.request_id in dst.handover.reserved
        else:
            assert tr.request_id not in src.handover.kept
    sent = {tr.request_id for tr in dep.transfers}
    for rid, d in dep.decode_side.items():  # done prompts not yet sent: held where they were computed
        if rid not in sent:
            (src,) = [x for x in dep.instances if x.handover is not None and rid in x.handover.kept]
            assert src.role == "prefill"


@pytest.mark.parametrize("layout", ["slab", "paged"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 1), (1, 2)])
def test_scarce_memory_every_instance_within_budget_at_every_event(layout, shape):
    rc = RunConfig("chunked", chunk_size=512, dry_run=True, kv_budget=FEW, kv_layout=layout,
                   workload_knobs={"rate": 8 * sum(shape) / 2, "n": 60})
    dep = start_deployment(Engine(), "chapter-7.3-mixed", rc,
                           DeploymentConfig("disaggregated", prefill_instances=shape[0], decode_instances=shape[1]))
    events = 0
    while dep.step():
        events += 1
        _books(dep)
    trace = dep.trace()
    assert events > 100
    for x in trace.instances:  # and as the record keeps it, step by step
        assert all(s.kv_used_bytes <= x.kv_capacity_bytes for s in x.steps)
    assert all(r.status == FINISHED for r in trace.requests)  # every accepted request completes, once
    assert sorted(r.id for r in trace.requests) == sorted({r.id for r in trace.requests})
    if layout == "slab":  # with 8 slabs a GPU the decode side really pushed back on the prefill side
        assert any(tr.start_s > tr.ready_s for tr in trace.transfers)
        pre = [x for x, role in zip(trace.instances, trace.roles) if role == "prefill"]
        assert any(s.num_waiting > 0 for x in pre for s in x.steps)


def test_a_landed_transfer_is_admitted_at_the_decode_instances_next_step():
    rc = RunConfig("chunked", chunk_size=512, dry_run=True, kv_budget=FEW, workload_knobs={"rate": 8, "n": 60})
    dep = start_deployment(Engine(), "chapter-7.3-mixed", rc, DeploymentConfig("disaggregated"))
    trace = dep.finish()
    assert trace.transfers
    for tr in trace.transfers:
        steps = trace.instances[tr.dst].steps
        first = next(s for s in steps if s.start_s >= tr.end_s)
        assert tr.request_id in {w.request_id for w in first.works}


def test_a_full_prefill_instance_admits_nothing_until_kv_leave():
    """Two slabs on each side, six long prompts at once: the prefill instance holds two prompts' K/V while the
    decode side is full, and its third prompt starts only after a transfer has landed."""
    from deploy_cases import req

    burst = [req(f"r{i}", 1000, 40, 0.001 * i, seed=i) for i in range(6)]
    rc = RunConfig("continuous", dry_run=True, kv_budget=2 * 4096 * BPT)
    dep = start_deployment(Engine(), burst, rc, DeploymentConfig("disaggregated"))
    trace = dep.finish()
    pre = trace.instances[0]
    started = {}  # request -> when its prefill began
    for s in pre.steps:
        for w in s.works:
            started.setdefault(w.request_id, s.start_s)
    landed = sorted(tr.end_s for tr in trace.transfers)
    order = sorted(started, key=started.get)
    # slots 1 and 2 hold the first two prompts, then the next two wait for the first landings
    assert started[order[2]] >= landed[0] and started[order[3]] >= landed[1]
    # prompts 3 and 4 are then held until the decode side frees a slot: the fifth starts after a decode ended
    ended = sorted(r.finish_s for r in trace.requests)
    assert started[order[4]] >= ended[0]
    assert all(r.status == FINISHED and r.output_len == 40 for r in trace.requests)
