"""A decode instance short of KV: it never holds more than its KV does (slab: its slots; paged: its blocks); what it
has no room for waits on its prefill instance, K/V held there (memory pushes back), never lost: every request still
finishes."""
from __future__ import annotations

import pytest
from deploy_cases import req

from tinyserve.core.blocks import blocks_for
from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine

BPT = 327_680  # h200-70b-fp8.json kv_bytes_per_token
SLAB = 4096 * BPT  # a slab server's slot: max_model_len 4,096 positions


def burst() -> list:
    # twelve requests within 60 ms, 100-token prompts and 30 new tokens: each needs 130 positions = 9 blocks of 16;
    # prefills take one step, decodes 29: the decode side is the bottleneck and must queue
    return [req(f"r{i:02d}", 100, 30, 0.005 * i, seed=i) for i in range(12)]


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
@pytest.mark.parametrize("layout,knobs,holds", [
    ("slab", {"kv_budget": 2 * SLAB}, 2),  # two slabs: two slots
    ("paged", {"kv_layout": "paged", "kv_budget": 20 * 16 * BPT}, 20),  # 20 blocks: two requests of 9, not three
    # 16 blocks: two requests one step apart need 9 + 8 = 17 at their ends: the later one is preempted, recomputed
    ("paged", {"kv_layout": "paged", "kv_budget": 16 * 16 * BPT}, 16),
])
def test_a_decode_pool_short_of_kv_queues_and_loses_nothing(policy, layout, knobs, holds):
    dep = run_deployment(Engine(), burst(), RunConfig(policy, dry_run=True, **knobs),
                         DeploymentConfig("disaggregated", decode_instances=1))
    pre, dec = dep.instances
    assert pre.steps and any(s.num_waiting > 0 for s in pre.steps)  # the queue really formed, before the prefill
    assert any(tr.start_s > tr.ready_s for tr in dep.transfers)  # and K/V waited for room at the decode side
    # the decode side waits for nothing but room for a request it preempted: a transfer is taken at once
    assert all(s.num_waiting == 0 for s in dec.steps) or holds == 16
    contexts: dict[str, int] = {}
    for s in dec.steps:
        here = {w.request_id for w in s.works if w.phase != "wasted"}
        if layout == "slab":
            assert dec.num_slots == holds and len(here) <= holds
            assert {w.slot for w in s.works} <= set(range(holds))
        else:
            assert dec.num_blocks == holds and s.blocks_used + s.blocks_free == holds
            for w in s.works:  # the blocks the step's requests need for the positions they hold, by hand
                contexts[w.request_id] = w.start + w.tokens
            need = sum(blocks_for(contexts[r], 16) for r in here)
            assert need <= holds and s.blocks_used <= holds
    for r in burst():  # nothing lost, nothing made twice
        (got,) = [x for x in dep.requests if x.id == r.id]
        assert got.status == FINISHED and got.output_len == 30 == len(got.token_times)
        assert dep.routes[r.id] == [0, 1]
    # 29 tokens each after the first: by a decode, or by the recompute that ends a preemption (it samples one)
    decodes = sum(1 for s in dec.steps for w in s.works if w.phase == "decode")
    preempted, resumed = (sum(len(getattr(s, f)) for s in dec.steps) for f in ("preempted", "resumed"))
    assert decodes + resumed == 12 * 29 and preempted == resumed
    assert (preempted > 0) == (holds == 16)


def test_the_same_burst_with_room_does_not_queue_at_decode():
    dep = run_deployment(Engine(), burst(), RunConfig("continuous", dry_run=True, batch_size=16),
                         DeploymentConfig("disaggregated"))
    assert all(s.num_waiting == 0 for s in dep.instances[1].steps)
