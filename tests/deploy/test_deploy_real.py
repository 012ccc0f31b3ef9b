"""Real runs (the shipped model in float64): the K/V really cross from one ModelRunner to another, and every
request's tokens are those of the model running it alone (model.generate), whatever instance made which token."""
from __future__ import annotations

import pytest
from deploy_cases import req
from helpers import DEVICES, HAS_CHECKPOINT

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine

pytestmark = [pytest.mark.usefixtures("torch_one_thread"),
              pytest.mark.skipif(not HAS_CHECKPOINT, reason="no shipped checkpoint")]
BPT = 327_680  # h200-70b-fp8.json kv_bytes_per_token: the modeled bytes a transfer is priced by
REAL_BPT = 2 * 4 * 128 * 8  # the shipped GPT's K and V: 4 layers x 128 wide x 8 bytes (float64) = 8,192 per token


def requests() -> list:
    """Ten short requests in two bursts: queues form, prompts end mid-block, one makes a single token."""
    shape = [(9, 6), (23, 4), (17, 9), (40, 5), (5, 1), (31, 7), (12, 8), (26, 3), (19, 10), (8, 5)]
    return [req(f"r{i}", p, n, 0.0 if i < 5 else 0.05, seed=10 + i) for i, (p, n) in enumerate(shape)]


def tight() -> list:
    """Four at once, 30 + 20 positions each (4 blocks of 16), for a decode pool of 5 blocks: each is admitted with 2
    blocks (31 positions), so two or more grow past 32 together and the later ones are preempted."""
    return [req(f"t{i}", 30, 20, seed=20 + i) for i in range(4)]


@pytest.fixture(scope="module")
def alone(get_model) -> dict:
    """Each request's tokens from the model running it alone."""
    model = get_model("checkpoint")
    return {r.id: model.generate(r.prompt, r.max_new_tokens, stop_at_eos=False) for r in requests() + tight()}


def check_tokens(dep, alone: dict) -> None:
    assert dep.requests
    for r in dep.requests:
        assert r.status == FINISHED and r.output == alone[r.id], r.id


@pytest.mark.parametrize("knobs", [
    {},  # slab
    {"kv_layout": "paged"},
], ids=["slab", "paged"])
@pytest.mark.parametrize("policy,d", [("continuous", 1), ("chunked", 2)])
@pytest.mark.parametrize("device", DEVICES)
def test_disaggregated_tokens_are_those_of_running_alone(get_model, alone, knobs, policy, d, device):
    eng = Engine(get_model("checkpoint", device))
    extra = {"chunk_size": 16} if policy == "chunked" else {}  # the 40-token prompt in three chunks
    dep = run_deployment(eng, requests(), RunConfig(policy, **knobs, **extra),
                         DeploymentConfig("disaggregated", prefill_instances=1, decode_instances=d))
    check_tokens(dep, alone)
    out = {r.id: r for r in dep.requests}
    assert len(dep.transfers) == 9  # all but the one-token request
    for x in dep.transfers:
        p = out[x.request_id].prompt_len
        assert x.real_bytes == p * REAL_BPT > 0 and x.bytes == p * BPT
    if d == 2:
        assert {x.dst for x in dep.transfers} == {1, 2}
    for tr in dep.instances[1:]:  # a decode instance never saw a prompt: the tokens came through the copied K/V
        assert {w.phase for s in tr.steps for w in s.works} == {"decode"}


@pytest.mark.parametrize("policy,d", [("continuous", 1), ("chunked", 2)])
def test_a_decode_pool_short_of_blocks_preempts_and_still_gives_the_alone_tokens(get_model, alone, policy, d):
    eng = Engine(get_model("checkpoint"))
    dep = run_deployment(eng, tight(), RunConfig(policy, kv_layout="paged", kv_budget=5 * 16 * BPT),
                         DeploymentConfig("disaggregated", decode_instances=d))
    check_tokens(dep, alone)
    assert len(dep.requests) == 4
    # the premise: a decode instance really ran short and recomputed a preempted request's prompt and output
    assert sum(len(s.preempted) for tr in dep.instances[1:] for s in tr.steps) > 0


@pytest.mark.parametrize("layout", ["slab", "paged"])
def test_two_colocated_replicas_give_the_tokens_of_running_alone(get_model, alone, layout):
    eng = Engine(get_model("checkpoint"))
    dep = run_deployment(eng, requests(), RunConfig("chunked", chunk_size=16, kv_layout=layout),
                         DeploymentConfig("colocated", replicas=2))
    check_tokens(dep, alone)
    assert {v[0] for v in dep.routes.values()} == {0, 1} and dep.transfers == []


def eos_requests() -> list:
    """EOS honoured; prompts found by a search with model.generate: (25, seed 7) gives EOS as its first token (at
    the prefill instance), (24, 7) as its second (the decode's first step), (24, 35) as its 7th, (16, 15) its 19th."""
    from tinyserve.core.request import Request
    from tinyserve.core.workloads import make_prompt

    shape = [(25, 7), (24, 7), (24, 35), (16, 15), (12, 3)]
    return [Request(f"e{i}", make_prompt(n, seed=s), 30, 0.002 * i) for i, (n, s) in enumerate(shape)]


@pytest.mark.parametrize("layout", ["slab", "paged"])
def test_eos_ends_a_request_where_it_is_made(get_model, layout):
    model = get_model("checkpoint")
    want = {r.id: model.generate(r.prompt, r.max_new_tokens) for r in eos_requests()}
    assert [len(want[f"e{i}"]) for i in range(4)] == [1, 2, 7, 19] and len(want["e4"]) == 30  # the premise
    dep = run_deployment(Engine(model), eos_requests(), RunConfig("continuous", kv_layout=layout),
                         DeploymentConfig("disaggregated"))
    out = {r.id: r for r in dep.requests}
    for rid, tokens in want.items():
        assert out[rid].status == FINISHED and out[rid].output == tokens, rid
        assert out[rid].finish_reason == ("length" if rid == "e4" else "eos")
    assert out["e0"].max_new_tokens == 30  # the client's request, not the prefill instance's one-token copy
    assert dep.routes["e0"] == [0] and "e0" not in {x.request_id for x in dep.transfers}  # done at prefill
    assert all(dep.routes[f"e{i}"] == [0, 1] for i in range(1, 5))


@pytest.mark.parametrize("prefill_layout,decode_layout", [("slab", "paged"), ("paged", "slab")])
def test_the_kv_changes_shape_between_a_slab_prefill_and_a_paged_decode_and_back(get_model, alone, prefill_layout,
                                                                                decode_layout):
    eng = Engine(get_model("checkpoint"))
    dep = run_deployment(eng, requests(), RunConfig("continuous", kv_layout=prefill_layout),
                         DeploymentConfig("disaggregated", decode_instances=2, decode_kv_layout=decode_layout))
    check_tokens(dep, alone)
    assert len(dep.transfers) == 9
    # the premise: each side really ran its own layout (a paged run has a block pool, a slab run none)
    assert [tr.kv_layout for tr in dep.instances] == [prefill_layout, decode_layout, decode_layout]
    assert all((tr.num_blocks > 0) == (tr.kv_layout == "paged") for tr in dep.instances)


@pytest.mark.parametrize("rc,dc", [
    (RunConfig("chunked", chunk_size=16), DeploymentConfig("disaggregated", prefill_chunk_size="none",
                                                           decode_batch_size=2)),
    (RunConfig("chunked", chunk_size=16), DeploymentConfig("disaggregated", prefill_chunk_size=5, decode_batch_size=3,
                                                           decode_kv_layout="paged")),
    # two slabs on each side: the decode side pushes back, prompts' K/V wait on the prefill instance
    (RunConfig("continuous", kv_budget=2 * 4096 * BPT), DeploymentConfig("disaggregated")),
    # six blocks of 16 on each side: the longest request (50 positions) takes four of them
    (RunConfig("continuous", kv_layout="paged", kv_budget=6 * 16 * BPT), DeploymentConfig("disaggregated")),
], ids=["whole-prompts", "chunk-5-paged-decode", "slab-backpressure", "paged-backpressure"])
def test_each_roles_own_knobs_and_memory_that_pushes_back_keep_the_alone_tokens(get_model, alone, rc, dc):
    dep = run_deployment(Engine(get_model("checkpoint")), requests(), rc, dc)
    check_tokens(dep, alone)
    assert len(dep.requests) == 10
    if rc.kv_budget is not None:  # the premise: K/V really waited on the prefill instance for room
        assert any(tr.start_s > tr.ready_s for tr in dep.transfers)
