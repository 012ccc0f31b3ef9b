"""First come first served across prefill instances (issue 49, item 1): when a decode instance has room, the
transfer that leaves is the prompt ready longest (its prefill done and its own link free), whichever prefill
instance holds it. Checked from the record alone (the transfers and the prefill instances' requests), not from the
coordinator's code: no prompt leaves after one from another instance that became ready after it, when it was ready
at that send and fitted the same room (a slot, and in pages no more blocks than the one that left)."""
from __future__ import annotations

import pytest
from deploy_cases import req

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.cost.presets import get_preset
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine

BPT = int(get_preset("h200-70b-fp8").kv_bytes_per_token)
LENS = (300, 1200, 2500, 800, 3000, 150, 1800, 600)


def _arrivals(n: int) -> list:
    """Bursts of eight prompts of mixed lengths every 0.4 s: every prefill instance holds a queue while the decode
    side is full."""
    return [req(f"r{i}", LENS[i % len(LENS)], 30 + 23 * (i % 5), 0.4 * (i // 8) + 0.001 * (i % 8), seed=i)
            for i in range(n)]


def _out_of_order(trace, layout: str) -> list[tuple[str, str]]:
    """(a, b): b left before a although a, on another prefill instance, was ready first and fitted b's room."""
    prompt = {r.id: r.prompt_len for r in trace.requests}
    arrival = {r.id: r.arrival_s for r in trace.requests}
    done = {}  # the prefill instances' own record of when each prompt finished
    for tr, role in zip(trace.instances, trace.roles):
        if role == "prefill":
            done.update({r.id: r.finish_s for r in tr.requests if r.status == FINISHED})
    ready, link_free = {}, {}
    for x in sorted(trace.transfers, key=lambda x: x.start_s):  # a link sends one at a time, in its queue's order
        assert x.ready_s == done[x.request_id] and x.start_s >= x.ready_s
        ready[x.request_id] = max(done[x.request_id], link_free.get(x.src, 0.0))
        link_free[x.src] = x.end_s
    bad = []
    for a in trace.transfers:
        ka = (ready[a.request_id], arrival[a.request_id])
        for b in trace.transfers:
            if (b.src != a.src and b.start_s < a.start_s and ka[0] <= b.start_s
                    and ka < (ready[b.request_id], arrival[b.request_id])
                    and (layout == "slab" or prompt[a.request_id] <= prompt[b.request_id])):
                bad.append((a.request_id, b.request_id))
    return bad


@pytest.mark.parametrize("memory", ["normal", "scarce"])
@pytest.mark.parametrize("layout", ["slab", "paged"])
@pytest.mark.parametrize("prefill", [2, 3])
def test_no_send_out_of_ready_order_across_prefill_instances(prefill, layout, memory):
    budget = {"scarce": {"kv_budget": 6 * 4096 * BPT}, "normal": {}}[memory]
    rc = RunConfig("chunked", dry_run=True, kv_layout=layout, **budget)
    dc = DeploymentConfig("disaggregated", prefill_instances=prefill, decode_instances=1, prefill_chunk_size="none",
                          decode_batch_size=8)
    reqs = _arrivals(64)
    trace = run_deployment(Engine(), reqs, rc, dc)
    assert all(r.status == FINISHED for r in trace.requests) and len(trace.requests) == len(reqs)
    assert len(trace.transfers) == len(reqs)  # each once
    assert sum(x.start_s > x.ready_s + 1 for x in trace.transfers) > 10  # the decode side really held them back
    assert _out_of_order(trace, layout) == []
    # the record's share of the work, per prefill instance (docs/contract.md)
    entries = [x for x in trace.summary()["instances"] if x["role"] == "prefill"]
    assert sum(x["requests_served"] for x in entries) == len(reqs)
    for x in entries:
        waits = sorted((t.start_s - t.ready_s) * 1e3 for t in trace.transfers if t.src == x["index"])
        assert x["transfer_wait_ms"]["max"] == pytest.approx(waits[-1])
        mid = (waits[(len(waits) - 1) // 2] + waits[len(waits) // 2]) / 2
        assert x["transfer_wait_ms"]["p50"] == pytest.approx(mid)
