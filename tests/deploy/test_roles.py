"""A split's per-role knobs: each role runs its own chunk, batch size and GPUs (DeploymentConfig), and the JSON
counts each role's GPUs."""
from __future__ import annotations

import pytest
from deploy_cases import req

from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED
from tinyserve.cost.links import get_link
from tinyserve.cost.presets import get_preset
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.deploy.config import WHOLE_PROMPT_BUDGET
from tinyserve.engine import Engine

BPT = int(get_preset("h200-70b-fp8").kv_bytes_per_token)


def mixed() -> list:
    """Long and short prompts arriving together: prefill steps have several prompts to batch."""
    lens = [3000, 200, 2500, 150, 1800, 900, 3500, 400]
    return [req(f"r{i}", n, 6, 0.01 * (i // 3), seed=i) for i, n in enumerate(lens)]


def test_a_prefill_chunk_of_its_own_cuts_only_the_prefill_side():
    dep = run_deployment(Engine(), mixed(), RunConfig("chunked", chunk_size=512, dry_run=True),
                         DeploymentConfig("disaggregated", prefill_chunk_size=256))
    pre, dec = dep.instances
    assert pre.knobs["chunk_size"] == 256 and dec.knobs["chunk_size"] == 512
    assert max(w.tokens for s in pre.steps for w in s.works) == 256


def test_whole_prompts_on_the_prefill_side_under_a_token_budget():
    dep = run_deployment(Engine(), mixed(), RunConfig("chunked", chunk_size=512, dry_run=True),
                         DeploymentConfig("disaggregated", prefill_chunk_size="none"))
    pre = dep.instances[0]
    lens = {r.id: r.prompt_len for r in dep.requests}
    assert pre.policy == "whole-prompt" and pre.knobs["max_batch_tokens"] == WHOLE_PROMPT_BUDGET
    for s in pre.steps:
        assert all(w.start == 0 and w.tokens == lens[w.request_id] for w in s.works)  # never cut
        tokens = sum(w.tokens for w in s.works)
        assert tokens <= WHOLE_PROMPT_BUDGET or len(s.works) == 1  # within budget, or one prompt alone
    assert any(len(s.works) > 1 for s in pre.steps)  # and it does batch prompts
    assert all(r.status == FINISHED for r in dep.requests)


def test_the_decode_side_gets_its_own_batch_size():
    dep = run_deployment(Engine(), mixed(), RunConfig("chunked", batch_size=32, dry_run=True),
                         DeploymentConfig("disaggregated", decode_batch_size=3))
    pre, dec = dep.instances
    assert pre.num_slots == 32 and dec.num_slots == 3
    assert max(len(s.works) for s in dec.steps) <= 3


@pytest.mark.parametrize("p_gpus,d_gpus", [(2, 1), (1, 4), (2, 2), (4, 2)])
def test_each_roles_gpus_are_counted_and_a_transfer_uses_the_smaller_sides_links(p_gpus, d_gpus):
    dep = run_deployment(Engine(), mixed()[:3], RunConfig("chunked", dry_run=True),
                         DeploymentConfig("disaggregated", prefill_instances=2, decode_instances=1,
                                          prefill_gpus=p_gpus, decode_gpus=d_gpus))
    assert dep.gpus_per_instance == {"prefill": p_gpus, "decode": d_gpus}
    assert dep.num_gpus == 2 * p_gpus + d_gpus
    assert dep.summary()["deployment"]["gpus_per_instance"] == {"prefill": p_gpus, "decode": d_gpus}
    link = get_link("nvlink-h200")
    for tr in dep.transfers:  # by hand: the KV heads' shares cross in parallel, one link per GPU of the smaller side
        lanes = min(p_gpus, d_gpus)
        assert tr.end_s - tr.start_s == pytest.approx(link.latency_s + tr.bytes / lanes / link.bandwidth_Bps)


def test_replicas_take_gpus_the_same_way():
    dep = run_deployment(Engine(), mixed(), RunConfig("chunked", dry_run=True, gpus=2),
                         DeploymentConfig("colocated", replicas=3))
    assert dep.gpus_per_instance == {"replica": 2} and dep.num_gpus == 6


def test_a_bigger_prefill_instance_makes_prompts_faster():
    """Two GPUs on the prefill side halve its weights' and flops' share per GPU: every prompt's TTFT drops."""
    one, two = (run_deployment(Engine(), mixed(), RunConfig("chunked", dry_run=True),
                               DeploymentConfig("disaggregated", prefill_gpus=n)) for n in (1, 2))
    for a, b in zip(one.requests, two.requests):
        assert b.first_token_s - b.arrival_s < a.first_token_s - a.arrival_s


def _held_at_once(tr) -> int:
    """The most requests one instance held in a step (prefilling or decoding): its slots at work."""
    return max(len({w.request_id for w in s.works}) for s in tr.steps)


def test_a_batch_memory_caps_runs_capped_and_every_document_says_what_ran():
    """h200-70b-fp8's KV memory holds 38 slabs of 4,096 positions: a decode batch of 128 is accepted, runs 38
    slots, and the JSON, the text report and the runs themselves agree (a batch of 64 runs the very same)."""
    import json
    import subprocess
    import sys

    many = [req(f"r{i}", 100, 40, 0.0, seed=i) for i in range(60)]  # 60 at once: more than memory holds
    runs = {}
    for batch in (64, 128):
        dep = run_deployment(Engine(), many, RunConfig("chunked", chunk_size=512, dry_run=True),
                             DeploymentConfig("disaggregated", decode_batch_size=batch))
        dec = dep.summary()["instances"][1]
        memory_holds = int(get_preset("h200-70b-fp8").kv_memory_bytes // (4096 * BPT))
        assert dec["num_slots"] == memory_holds == 38 and dec["knobs"]["batch_size"] == batch
        assert _held_at_once(dep.instances[1]) == 38  # what the decode GPU really held at once
        runs[batch] = [(s.start_s, s.duration_s) for s in dep.instances[1].steps]
    assert runs[64] == runs[128]
    out = subprocess.run([sys.executable, "-m", "tinyserve", "run", "--workload", "chapter-7.3-mixed", "--policy",
                          "chunked", "--dry-run", "--deployment", "disaggregated", "--decode-batch-size", "128",
                          "--workload-knob", "n=20", "--json"], capture_output=True, text=True, check=True)
    inst = json.loads(out.stdout)["instances"]
    assert [(i["role"], i["num_slots"], i["knobs"]["batch_size"]) for i in inst] == [("prefill", 32, 32),
                                                                                      ("decode", 38, 128)]
    # the token budget as the policy holds it, built from the batch as given (a decode instance never fills it)
    assert inst[1]["knobs"]["max_batch_tokens"] == inst[1]["knobs"]["chunk_size"] + 128
    text = subprocess.run([sys.executable, "-m", "tinyserve", "run", "--workload", "chapter-7.3-mixed", "--policy",
                           "chunked", "--dry-run", "--deployment", "disaggregated", "--decode-batch-size", "128",
                           "--workload-knob", "n=20"], capture_output=True, text=True, check=True).stdout
    assert "batch size 128 given: its KV memory holds 38 slabs, so it runs 38 slots" in text
