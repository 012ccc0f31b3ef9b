"""A deployment's bad input: one clear line each, naming the bad value, in English and 繁體中文; a request whose K/V
can never fit a decode instance is rejected alone (with the reason a plain run gives) and the others complete."""
from __future__ import annotations

import re

import pytest
from deploy_cases import req

import tinyserve
from tinyserve.core.config import RunConfig
from tinyserve.core.request import FINISHED, REJECTED
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError

BPT = 327_680  # h200-70b-fp8.json kv_bytes_per_token
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(params=["en", "zh-TW"])
def lang(request):
    tinyserve.set_language(request.param)
    yield request.param
    tinyserve.set_language("en")


def refused(lang: str, make, *names: str, en: str) -> None:
    """make() raises one line naming each of names; English says `en`, zh-TW says it in Chinese."""
    with pytest.raises(TinyserveError) as e:
        make()
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in names), msg
    if lang == "en":
        assert re.search(en, msg) and not HAN.search(msg), msg
    else:
        assert HAN.search(msg), msg


DC = DeploymentConfig
CASES = {  # what is bad -> (how it is made, what the line must name, what the English says)
    "replicas 0": (lambda: DC("colocated", replicas=0), ("--replicas", "0"), r">= 1"),
    "prefill -1": (lambda: DC("disaggregated", prefill_instances=-1), ("--prefill-instances", "-1"), r">= 1"),
    "decode 0": (lambda: DC("disaggregated", decode_instances=0), ("--decode-instances", "0"), r">= 1"),
    "decode 1.5": (lambda: DC("disaggregated", decode_instances=1.5), ("--decode-instances", "1.5"), r">= 1"),
    "replicas True": (lambda: DC("colocated", replicas=True), ("--replicas", "True"), r">= 1"),
    "unknown link": (lambda: DC("disaggregated", link="carrier-pigeon"), ("carrier-pigeon", "nvlink-h200"),
                     r"unknown"),
    "unknown kind": (lambda: DC("sharded"), ("sharded", "colocated", "disaggregated"), r"unknown"),
    "colocated with P": (lambda: DC("colocated", prefill_instances=1), ("--prefill-instances",), r"disaggregated"),
    "colocated with link": (lambda: DC("colocated", link="ib-ndr"), ("--link",), r"disaggregated"),
    "disaggregated with N": (lambda: DC("disaggregated", replicas=2), ("--replicas",), r"colocated"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_deployment_is_one_clear_line(lang, case):
    make, names, en = CASES[case]
    refused(lang, make, *names, en=en)


RUNS = {  # a good deployment, a run knob it cannot take
    "wall clock colocated": ("colocated", dict(clock="wall"), ("--clock wall",), r"modeled"),
    "wall clock disaggregated": ("disaggregated", dict(clock="wall"), ("--clock wall",), r"modeled"),
    "static split": ("disaggregated", dict(policy="static"), ("'static'", "continuous", "chunked"), r"continuous"),
    "dynamic split": ("disaggregated", dict(policy="dynamic"), ("'dynamic'",), r"continuous"),
    "prefill-first split": ("disaggregated", dict(prefill_first=True), ("--prefill-first",), r"nothing"),
    "decode-first split": ("disaggregated", dict(prefill_first=False), ("--decode-first",), r"nothing"),
    "max waiting split": ("disaggregated", dict(max_waiting_steps=3), ("--decode-first",), r"nothing"),
}


@pytest.mark.parametrize("case", RUNS)
def test_a_run_knob_a_deployment_cannot_take_is_refused_before_anything_runs(lang, case):
    kind, knobs, names, en = RUNS[case]
    rc = RunConfig(**{"policy": "continuous", **knobs})
    refused(lang, lambda: run_deployment(Engine(), [req("a", 10, 3)], rc, DC(kind)), *names, en=en)


def test_static_and_dynamic_still_run_colocated():
    for policy in ("static", "dynamic"):
        dep = run_deployment(Engine(), [req("a", 10, 3), req("b", 20, 2, seed=1)], RunConfig(policy, dry_run=True),
                             DC("colocated", replicas=2))
        assert all(r.status == FINISHED for r in dep.requests)


# ------------------------------------------------------------------------------ a request too big for decode
def long_and_short() -> list:
    # "big" prefills fine (51 positions) but its whole sequence, 50 + 200 = 250 positions, fits no decode instance
    return [req("s1", 50, 20), req("big", 50, 200, seed=1), req("s2", 60, 20, 0.01, seed=2),
            req("s3", 40, 30, 0.02, seed=3)]


@pytest.mark.parametrize("knobs", [
    # paged: 10 blocks of 16 = 160 positions; big needs 16 blocks, a short one at most 5
    {"kv_layout": "paged", "kv_budget": 10 * 16 * BPT},
    # slabs of the longest accepted request: 160 positions' bytes hold s1..s3 (at most 80) but not big (250)
    {"slab": "longest", "kv_budget": 160 * BPT},
])
@pytest.mark.parametrize("lang_", ["en", "zh-TW"])
def test_a_request_no_decode_instance_can_hold_is_rejected_alone(knobs, lang_):
    tinyserve.set_language(lang_)
    try:
        rc = RunConfig("chunked", dry_run=True, **knobs)
        dep = run_deployment(Engine(), long_and_short(), rc, DC("disaggregated", decode_instances=2))
        plain = Engine().run(long_and_short(), "chunked", dry_run=True, **knobs)  # the same reason, as today
    finally:
        tinyserve.set_language("en")
    out = {r.id: r for r in dep.requests}
    assert out["big"].status == REJECTED and out["big"].output_len == 0
    (why,) = [r.finish_reason for r in plain.requests if r.id == "big"]
    assert out["big"].finish_reason == why and bool(HAN.search(why)) == (lang_ == "zh-TW")
    assert dep.routes["big"] == [] and "big" not in {x.request_id for x in dep.transfers}
    for tr in dep.instances:  # no instance computed any of it, not even its prompt
        assert "big" not in {w.request_id for s in tr.steps for w in s.works}
    for rid in ("s1", "s2", "s3"):
        assert out[rid].status == FINISHED and out[rid].output_len == {"s1": 20, "s2": 20, "s3": 30}[rid]
    m = dep.metrics()
    assert (m["num_rejected"], m["num_finished"]) == (1, 3)


def test_colocated_rejects_alone_too():
    reqs = long_and_short()
    plain = Engine().run(long_and_short(), "continuous", dry_run=True, slab="longest", kv_budget=160 * BPT)
    dep = run_deployment(Engine(), reqs, RunConfig("continuous", dry_run=True, slab="longest", kv_budget=160 * BPT),
                         DC("colocated", replicas=2))
    assert [(r.id, r.status, r.finish_reason) for r in dep.requests] == [
        (r.id, r.status, r.finish_reason) for r in plain.requests]
    assert [r.status for r in dep.requests] == [FINISHED, REJECTED, FINISHED, FINISHED]
    assert dep.routes["big"] == [] and sorted(sum(dep.routes.values(), [])) == [0, 0, 1]


@pytest.mark.parametrize("prompt", [90, 150])  # 90: only its whole sequence is too long; 150: its prompt already is
def test_a_request_too_long_for_max_model_len_is_rejected_with_its_own_numbers(prompt):
    def reqs():
        return [req("s", 30, 10), req("long", prompt, 20, seed=1)]
    plain = Engine().run(reqs(), "continuous", dry_run=True, max_model_len=100)
    dep = run_deployment(Engine(), reqs(), RunConfig("continuous", dry_run=True, max_model_len=100), DC("disaggregated"))
    (why,) = [r.finish_reason for r in plain.requests if r.id == "long"]
    assert "20" in why  # the premise: the plain run names the request's own max_new_tokens
    got = {r.id: r for r in dep.requests}
    assert got["long"].status == REJECTED and got["long"].finish_reason == why  # what the client asked, not the copy
    assert got["s"].status == FINISHED


TWO_OR_MORE = [DC("colocated", replicas=3), DC("disaggregated", prefill_instances=2, decode_instances=2)]


@pytest.mark.parametrize("dc", TWO_OR_MORE, ids=["colocated", "disaggregated"])
@pytest.mark.parametrize("bad", [-1, 10**9, 2.0, True])
def test_a_bad_token_id_is_refused_with_the_plain_runs_line(dc, bad):
    # the instances share the prompts and only the first scans their ids (the others are told they were checked)
    def reqs():
        r = req("bad", 12, 3, seed=1)
        r.prompt[5] = bad
        return [req("ok", 10, 3), r]
    with pytest.raises(TinyserveError) as plain:
        Engine().run(reqs(), "continuous", dry_run=True)
    with pytest.raises(TinyserveError) as e:
        run_deployment(Engine(), reqs(), RunConfig("continuous", dry_run=True), dc)
    assert str(e.value) == str(plain.value) and "'bad'" in str(e.value)


ROLES = {  # a split's per-role knobs, each bad value -> (how it is made, what the line names, the English)
    "prefill chunk 0": (lambda: DC("disaggregated", prefill_chunk_size=0), ("--prefill-chunk-size", "0"), r"none"),
    "prefill chunk word": (lambda: DC("disaggregated", prefill_chunk_size="whole"), ("--prefill-chunk-size", "whole"),
                           r">= 1"),
    "decode batch 0": (lambda: DC("disaggregated", decode_batch_size=0), ("--decode-batch-size", "0"), r">= 1"),
    "prefill gpus 0": (lambda: DC("disaggregated", prefill_gpus=0), ("--prefill-gpus", "0"), r">= 1"),
    "decode gpus -2": (lambda: DC("disaggregated", decode_gpus=-2), ("--decode-gpus", "-2"), r">= 1"),
    "colocated prefill chunk": (lambda: DC("colocated", prefill_chunk_size=128), ("--prefill-chunk-size",),
                                r"disaggregated"),
    "colocated decode gpus": (lambda: DC("colocated", decode_gpus=2), ("--decode-gpus",), r"disaggregated"),
}


@pytest.mark.parametrize("case", ROLES)
def test_a_bad_per_role_knob_is_one_clear_line(lang, case):
    make, names, en = ROLES[case]
    refused(lang, make, *names, en=en)


@pytest.mark.parametrize("option,field,value,en", [
    ("--prefill-gpus", "prefill_gpus", 9, r"at most 8"),  # beyond the preset's node (and its KV heads)
    ("--decode-gpus", "decode_gpus", 16, r"at most 8"),
])
def test_per_role_gpus_beyond_the_preset_are_refused_before_anything_runs(lang, option, field, value, en):
    rc = RunConfig("chunked", dry_run=True)
    refused(lang, lambda: run_deployment(Engine(), [req("a", 10, 3)], rc, DC("disaggregated", **{field: value})),
            option, str(value), en=en)


def test_per_role_gpus_on_a_preset_that_folds_them_in_are_refused(lang):
    rc = RunConfig("chunked", dry_run=True, hardware="4xh100-70b-bf16")
    refused(lang, lambda: run_deployment(Engine(), [req("a", 10, 3)], rc, DC("disaggregated", prefill_gpus=2)),
            "--prefill-gpus", "4xh100-70b-bf16", en=r"folded")
