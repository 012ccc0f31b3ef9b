"""Disaggregated deployments (dry runs) on hand-made requests: TTFT ends at the prefill instance, the K/V cross the
link in latency + bytes / bandwidth (bytes and seconds counted by hand from the presets' JSON numbers), one
transfer at a time per prefill instance, the decode instance starts only once they landed, and only decodes."""
from __future__ import annotations

import json

import pytest
from deploy_cases import req

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine

# h200-70b-fp8.json: kv_bytes_per_token 327,680 (2 x 80 layers x 8 KV heads x 128 x 2 bytes)
# nvlink-h200.json: 450e9 B/s, 5 us; ib-ndr.json: 50e9 B/s, 10 us
BPT = 327_680
LINKS = {"nvlink-h200": (450e9, 5e-6), "ib-ndr": (50e9, 1e-5)}


def requests() -> list:
    """a and b prefill together at t=0 (their K/V leave at the same moment); c makes one token; d comes later."""
    return [req("a", 100, 5), req("b", 200, 4, seed=1), req("c", 50, 1, seed=2), req("d", 64, 6, 0.5, seed=3)]


def disagg(policy: str = "continuous", link: str = "nvlink-h200", p: int = 1, d: int = 1, reqs=None, **knobs):
    dc = DeploymentConfig("disaggregated", prefill_instances=p, decode_instances=d, link=link)
    return run_deployment(Engine(), reqs or requests(), RunConfig(policy, dry_run=True, **knobs), dc)


def by_id(rs) -> dict:
    return {r.id: r for r in rs}


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
@pytest.mark.parametrize("link", sorted(LINKS))
def test_one_prefill_one_decode_by_hand(policy, link):
    dep = disagg(policy, link)
    assert dep.roles == ["prefill", "decode"] and dep.num_gpus == 2
    pre, dec = dep.instances
    pre_r, dec_r, out = by_id(pre.requests), by_id(dec.requests), by_id(dep.requests)
    # the prefill instance computes prompts only, with one token each; the decode instance only decodes
    assert {w.phase for s in pre.steps for w in s.works} == {"prefill"}
    assert {w.phase for s in dec.steps for w in s.works} == {"decode"}
    assert all(r.output_len == 1 for r in pre.requests)
    # TTFT ends at the prefill instance; the same first tokens as a plain run of one-token copies (another path)
    ones = Engine().run([req(r.id, r.prompt_len, 1, r.arrival_s, seed=s) for s, r in enumerate(requests())],
                        policy, dry_run=True)
    for r in ones.requests:
        assert out[r.id].first_token_s == pre_r[r.id].first_token_s == r.first_token_s
        assert out[r.id].first_token_s - out[r.id].arrival_s == pytest.approx(r.first_token_s - r.arrival_s)
    # c makes one token: done at the prefill instance, no transfer, never on the decode instance
    assert dep.routes["c"] == [0] and "c" not in dec_r and out["c"].status == FINISHED
    assert [x.request_id for x in dep.transfers] in (["a", "b", "d"], ["b", "a", "d"])
    bw, lat = LINKS[link]
    for x in dep.transfers:
        r = out[x.request_id]
        assert dep.routes[r.id] == [0, 1] and (x.src, x.dst, x.link) == (0, 1, link)
        assert x.bytes == r.prompt_len * BPT  # a: 32,768,000; b: 65,536,000; d: 20,971,520
        assert x.real_bytes is None  # a dry run copies nothing
        assert x.ready_s == pre_r[r.id].finish_s == r.first_token_s
        assert x.end_s == pytest.approx(x.start_s + lat + r.prompt_len * BPT / bw, rel=1e-12)
        # the decode instance takes it up once it landed: its first decode step starts no earlier
        first = min(s.start_s for s in dec.steps for w in s.works if w.request_id == r.id)
        assert first >= x.end_s
        assert r.token_times[1] > x.end_s and r.token_times[0] == dec_r[r.id].token_times[0]
    # a and b leave together: the second waits for the first (one transfer at a time, first come first served)
    x1, x2, xd = dep.transfers
    assert x1.ready_s == x2.ready_s == x1.start_s and x2.start_s == x1.end_s
    assert xd.start_s == xd.ready_s  # d leaves alone, long after
    # a decode instance idle until a lands starts its step at the landing, not before and not later
    assert min(s.start_s for s in dec.steps) == x1.end_s
    for r in requests():  # every client gets exactly max_new_tokens, in the order made
        got = out[r.id]
        assert got.status == FINISHED and got.output_len == r.max_new_tokens == len(got.token_times)
        assert got.token_times == sorted(got.token_times)


def test_nvlink_times_counted_by_hand():
    dep = disagg()
    x = {t.request_id: t for t in dep.transfers}
    # a: 100 x 327,680 = 32,768,000 B / 450e9 B/s = 72.818 us, + 5 us = 77.818 us
    assert x["a"].bytes == 32_768_000
    assert x["a"].end_s - x["a"].start_s == pytest.approx(77.8178e-6, rel=1e-5)
    # b: 65,536,000 B / 450e9 = 145.636 us + 5 = 150.636 us
    assert x["b"].end_s - x["b"].start_s == pytest.approx(150.636e-6, rel=1e-5)
    m = dep.metrics()  # a, b, d moved (100 + 200 + 64 = 364 tokens' K/V); c had nothing to move
    assert (m["transfers"], m["transfer_bytes"], m["num_gpus"]) == (3, 119_275_520, 2)
    doc = json.loads(json.dumps(dep.summary()))  # the JSON document: routes per request, every transfer
    assert [r["instances"] for r in doc["requests"]] == [[0, 1], [0, 1], [0], [0, 1]]
    assert [t["request_id"] for t in doc["transfers"]] == [t.request_id for t in dep.transfers]
    assert [i["role"] for i in doc["instances"]] == ["prefill", "decode"]


def test_transfers_from_two_prefill_instances_do_not_wait_for_each_other():
    # a -> prefill 0, b -> prefill 1 (least loaded), same prompt length: ready together, each on its own link
    reqs = [req("a", 300, 4), req("b", 300, 4, seed=1)]
    dep = disagg(p=2, d=1, reqs=reqs)
    xa, xb = sorted(dep.transfers, key=lambda x: x.src)
    assert (xa.request_id, xa.src, xb.request_id, xb.src) == ("a", 0, "b", 1)
    assert xa.dst == xb.dst == 2 and dep.roles == ["prefill", "prefill", "decode"]
    assert xa.start_s == xb.start_s == xa.ready_s == xb.ready_s and xa.end_s == xb.end_s


def test_one_token_requests_never_transfer():
    reqs = [req(f"r{i}", 40 + i, 1, 0.01 * i, seed=i) for i in range(5)]
    dep = disagg(reqs=reqs)
    assert dep.transfers == [] and all(v == [0] for v in dep.routes.values())
    assert dep.instances[1].steps == [] and all(r.output_len == 1 and r.status == FINISHED for r in dep.requests)


def test_two_decode_instances_share_the_work_each_request_once():
    reqs = [req(f"r{i}", 30 + 7 * i, 3 + i % 5, 0.005 * i, seed=i) for i in range(16)]
    dep = disagg("chunked", p=1, d=2, reqs=reqs, batch_size=4)
    assert dep.roles == ["prefill", "decode", "decode"]
    assert {x.dst for x in dep.transfers} == {1, 2}
    assert sorted(x.request_id for x in dep.transfers) == sorted(r.id for r in reqs)
    for i in (1, 2):
        mine = {x.request_id for x in dep.transfers if x.dst == i}
        assert {r.id for r in dep.instances[i].requests} == mine
    for r in reqs:
        got = by_id(dep.requests)[r.id]
        assert got.status == FINISHED and got.output_len == r.max_new_tokens
        assert dep.routes[r.id][0] == 0 and dep.routes[r.id][1] in (1, 2) and len(dep.routes[r.id]) == 2


def test_gpus_per_instance_come_from_the_hardware_preset():
    dep = disagg(hardware="4xh100-70b-bf16", p=1, d=2)  # 4 GPUs an instance (tensor parallel), 3 instances
    assert dep.gpus_per_instance == {"prefill": 4, "decode": 4} and dep.num_gpus == 12
    assert all(x.bytes == by_id(dep.requests)[x.request_id].prompt_len * BPT for x in dep.transfers)


def test_kv_leaving_together_goes_to_the_least_loaded_decode_instance():
    # a and b finish their prefill in the same step: a -> decode 1 (0 vs 0, lowest index), b -> decode 2 (a is on
    # its way to 1: 1 vs 0); c, later, once both are done: 0 vs 0 -> 1
    reqs = [req("a", 100, 3), req("b", 100, 3, seed=1), req("c", 100, 3, 2.0, seed=2)]
    dep = disagg(p=1, d=2, reqs=reqs)
    assert dep.routes == {"a": [0, 1], "b": [0, 2], "c": [0, 1]}
    xa, xb, _ = dep.transfers  # to two decode instances, but over the one prefill instance's link: one at a time
    assert xa.ready_s == xb.ready_s and xb.start_s == xa.end_s


def test_a_replayed_one_token_answer_ends_as_the_plain_run_says():
    # dry-run replays (output_len_hint, EOS not ignored): a hint below max_new_tokens means the answer stopped on
    # its own (EOS). h1's single token is made at the prefill instance, whose copy asked for one token only: the
    # client still asked for 50 and got 1, so it ended by EOS, as a plain run of the same requests says
    from tinyserve.core.request import Request
    from tinyserve.core.workloads import make_prompt

    def reqs():
        return [Request("h1", make_prompt(30), 50, 0.0, False, 1), Request("h5", make_prompt(30, seed=1), 50, 0.0,
                                                                          False, 5)]
    plain = Engine().run(reqs(), "continuous", dry_run=True)
    dep = disagg(reqs=reqs())
    assert [(r.output_len, r.finish_reason) for r in plain.requests] == [(1, "eos"), (5, "eos")]  # the premise
    assert [(r.output_len, r.finish_reason, r.max_new_tokens) for r in dep.requests] == [(1, "eos", 50),
                                                                                          (5, "eos", 50)]


def test_the_decode_instance_is_chosen_as_the_pool_is_when_the_prefill_ends():
    # a (400 tokens) -> decode 1, b (10 tokens) -> decode 2: b is done at ~0.2 s (9 decode steps of ~20 ms after
    # ~20 ms of prefill). x's 3,000-token prompt starts its prefill at 0.1 s and ends at ~0.45 s: by then decode 2
    # has been empty for a quarter of a second, decode 1 still holds a -> x goes to decode 2
    reqs = [req("a", 50, 400), req("b", 50, 10, seed=1), req("x", 3000, 5, 0.1, seed=2)]
    dep = disagg(p=1, d=2, reqs=reqs)
    out = by_id(dep.requests)
    ready_x = next(t.ready_s for t in dep.transfers if t.request_id == "x")
    assert 0.1 < out["b"].finish_s < ready_x < out["a"].finish_s  # the premise of the hand count
    assert dep.routes == {"a": [0, 1], "b": [0, 2], "x": [0, 2]}
