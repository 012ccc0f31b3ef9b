"""The engine's contract: batching never changes the answer, and each policy schedules as the chapter says."""
from __future__ import annotations

import random

import pytest
import torch
from helpers import greedy_alone, make_random_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyserve.core.config import GPTConfig
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS, EOS
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.model.gpt import TinyGPT

CTX = 96


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    torch.manual_seed(1)
    return TinyGPT(GPTConfig(n_positions=CTX, n_layer=2, n_head=2, n_embd=32)).double().eval()


def make_requests(seed: int, n: int, max_prompt: int = 30, max_out: int = 12, spread: float = 0.05,
                  ignore_eos: bool = True) -> list[Request]:
    rng = random.Random(seed)
    return [Request(f"q{i}", [BOS] + [rng.randrange(256) for _ in range(rng.randint(0, max_prompt - 1))],
                    rng.randint(1, max_out), arrival_s=round(rng.random() * spread, 4), ignore_eos=ignore_eos)
            for i in range(n)]


POLICY_KNOBS = [
    ("static", {"batch_size": 3}),
    ("dynamic", {"batch_size": 4, "timeout": 0.01}),
    ("continuous", {"batch_size": 3}),
    ("continuous", {"batch_size": 4, "prefill_first": False}),
    ("chunked", {"batch_size": 3, "chunk_size": 5, "max_batch_tokens": 8}),
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 7), b=st.integers(1, 5), chunk=st.integers(1, 40),
       extra=st.integers(0, 20), timeout=st.floats(0, 0.05), spread=st.sampled_from([0.0, 0.01, 0.2]))
def test_every_policy_returns_the_tokens_of_running_each_request_alone(model, seed, n, b, chunk, extra, timeout,
                                                                        spread):
    reqs = make_requests(seed, n, spread=spread, ignore_eos=bool(seed % 2))
    expected = {r.id: greedy_alone(model, r) for r in reqs}
    eng = Engine(model)
    for policy, knobs in [("static", {}), ("dynamic", {"timeout": timeout}), ("continuous", {}),
                          ("continuous", {"prefill_first": False}),
                          ("chunked", {"chunk_size": chunk, "max_batch_tokens": b + extra})]:
        tr = eng.run(reqs, policy, batch_size=b, **knobs)
        assert sorted(r.id for r in tr.requests) == sorted(expected)
        for r in tr.requests:
            assert r.status == "finished", (policy, r.id, r.status)
            assert r.output == expected[r.id], (policy, knobs, r.id)
            assert len(r.token_times) == r.output_len
            assert r.output_len == r.max_new_tokens or (not r.ignore_eos and r.output[-1] == EOS)
        # each request's tokens were produced in distinct steps, exactly once
        produced = {}
        for s in tr.steps:
            for w in s.works:
                if w.phase == "decode" or (w.phase == "prefill" and w.start + w.tokens == tr.request(w.request_id).prompt_len):
                    produced[w.request_id] = produced.get(w.request_id, 0) + 1
        assert produced == {r.id: r.output_len for r in tr.requests}


def batches(tr):
    """Static/dynamic: the prefill steps (launches) and who was in each."""
    return [(s, [w for w in s.works]) for s in tr.steps if s.works and s.works[0].phase == "prefill"]


def test_static_pads_to_the_longest_prompt_and_runs_to_the_last_finisher(model):
    reqs = make_requests(3, 9, spread=0.0)
    tr = Engine(model).run(reqs, "static", batch_size=4)
    launches = batches(tr)
    assert [len(ws) for _, ws in launches] == [4, 4, 1]
    for step, ws in launches:
        members = [tr.request(w.request_id) for w in ws]
        s_max = max(r.prompt_len for r in members)
        for w, r in zip(ws, members):
            assert w.tokens == r.prompt_len and w.padding == s_max - r.prompt_len
            assert r.prefill_computed_tokens == s_max
        longest = max(r.output_len for r in members)
        # decode steps until the longest is done; a finished member's slot computes wasted tokens meanwhile
        following = tr.steps[step.index + 1: step.index + longest]
        assert all(len(s.works) == len(members) for s in following)
        for r in members:
            assert r.decode_computed_tokens == longest - 1
            wasted = sum(1 for s in following for w in s.works if w.request_id == r.id and w.phase == "wasted")
            assert wasted == longest - r.output_len
    m = tr.metrics()
    assert m["padding_tokens"] == sum(w.padding for _, ws in launches for w in ws) > 0


def test_dynamic_launches_on_timeout_and_never_admits_after_launch(model):
    # arrivals every 10 ms; batch of 8 never fills before the 25 ms timeout
    reqs = [Request(f"d{i}", [BOS, 65 + i], 3, arrival_s=0.01 * i, ignore_eos=True) for i in range(7)]
    tr = Engine(model).run(reqs, "dynamic", batch_size=8, timeout=0.025)
    launches = batches(tr)
    assert len(launches) > 1
    prev_end = 0.0
    for step, ws in launches:
        members = [tr.request(w.request_id) for w in ws]
        first = min(r.arrival_s for r in members)
        # the timeout runs from the first waiting request (or the batch waits for the one before it to end)
        assert step.start_s == pytest.approx(max(first + 0.025, prev_end))
        assert len(members) < 8
        prev_end = max(r.finish_s for r in members)
        assert all(r.arrival_s <= step.start_s for r in members)
        # nobody joins this batch after its launch
        end = max(r.finish_s for r in members)
        in_flight = {w.request_id for s in tr.steps if step.start_s <= s.start_s < end for w in s.works}
        assert in_flight == {r.id for r in members}
    # static (no timeout) waits for the end of the stream instead: one batch of all 7
    assert len(batches(Engine(model).run(reqs, "static", batch_size=8))) == 1


def test_continuous_frees_a_slot_the_step_a_request_finishes(model):
    reqs = [Request("long", [BOS, 1, 2], 20, ignore_eos=True)] + [
        Request(f"s{i}", [BOS, 3 + i], 2 + i, ignore_eos=True) for i in range(5)]
    tr = Engine(model).run(reqs, "continuous", batch_size=2)
    for r in tr.requests:
        last = max(s.index for s in tr.steps for w in s.works if w.request_id == r.id)
        assert tr.steps[last].start_s + tr.steps[last].duration_s == r.finish_s
        if last + 1 < len(tr.steps):
            nxt = {w.slot: w.request_id for w in tr.steps[last + 1].works}
            waiting = [q for q in tr.requests if q.admitted_s is not None and q.admitted_s > r.finish_s - 1e-12]
            if waiting:  # the freed slot is taken by the next queued request at once
                assert nxt.get(r.slot) not in (None, r.id)
    assert tr.metrics()["wasted_decode_tokens"] == 0


def test_decode_first_never_delays_decodes_and_prefill_first_runs_them_together(model):
    reqs = [Request("a", [BOS, 5], 10, ignore_eos=True), Request("b", [BOS] + [7] * 40, 3, arrival_s=1e-9,
                                                                  ignore_eos=True)]
    pf = Engine(model).run(reqs, "continuous", batch_size=2, prefill_first=True)
    df = Engine(model).run(reqs, "continuous", batch_size=2, prefill_first=False)
    mixed = [s for s in pf.steps if {w.phase for w in s.works} == {"decode", "prefill"}]
    assert mixed and all(not ({"decode", "prefill"} <= {w.phase for w in s.works}) for s in df.steps)
    assert df.request("b").admitted_s >= df.request("a").finish_s  # b waited for a's decodes
    assert pf.request("b").first_token_s < df.request("b").first_token_s


def test_chunked_respects_the_budget_and_never_skips_a_decode(model):
    reqs = make_requests(11, 10, max_prompt=60, spread=0.02)
    tr = Engine(model).run(reqs, "chunked", batch_size=4, chunk_size=16, max_batch_tokens=20)
    assert max(s.tokens for s in tr.steps) <= 20
    assert any(w.tokens == 16 for s in tr.steps for w in s.works if w.phase == "prefill")
    for r in tr.requests:
        decode_steps = [s.index for s in tr.steps for w in s.works if w.request_id == r.id and w.phase == "decode"]
        # once decoding, a request decodes in every step until it finishes
        assert decode_steps == list(range(decode_steps[0], decode_steps[0] + len(decode_steps))) if decode_steps else True
        assert len(decode_steps) == r.output_len - 1


@pytest.mark.parametrize("policy,knobs", POLICY_KNOBS)
def test_fifo_admission_and_kv_accounting(model, policy, knobs):
    reqs = make_requests(5, 12, spread=0.03)
    budget_slabs = 2
    eng = Engine(model)
    probe = eng.start(reqs, policy, **knobs)
    slab = probe.pool.slab_bytes
    tr = eng.run(reqs, policy, kv_budget=budget_slabs * slab + slab // 2, **knobs)
    assert tr.num_slots == min(knobs["batch_size"], budget_slabs)
    by_arrival = sorted(tr.requests, key=lambda r: (r.arrival_s, int(r.id[1:])))
    admitted = [r.admitted_s for r in by_arrival]
    assert admitted == sorted(admitted)  # FIFO: nobody is served before an earlier arrival
    for s in tr.steps:
        assert 0 < s.kv_used_bytes <= s.kv_reserved_bytes <= budget_slabs * slab
        assert len({w.slot for w in s.works}) == len(s.works) <= tr.num_slots
    assert all(r.status == "finished" for r in tr.requests)


# the paged layout in a pool of 48 positions (327,680 bytes each under the default preset): blocks bind, some preempt
LAYOUTS = [{}, {"kv_layout": "paged", "block_size": 4, "kv_budget": 48 * 327_680}]


@pytest.mark.parametrize("layout", LAYOUTS, ids=["slab", "paged"])
@pytest.mark.parametrize("policy,knobs", POLICY_KNOBS)
def test_dry_run_equals_the_real_run(model, policy, knobs, layout):
    reqs = make_requests(8, 10, spread=0.05)
    eng = Engine(model)
    real = eng.run(reqs, policy, **knobs, **layout)
    dry = Engine(model).run(reqs, policy, dry_run=True, **knobs, **layout)
    assert dry.metrics() == real.metrics()
    assert [(s.start_s, s.duration_s, s.works, s.kv_reserved_bytes, s.kv_used_bytes) for s in dry.steps] == \
        [(s.start_s, s.duration_s, s.works, s.kv_reserved_bytes, s.kv_used_bytes) for s in real.steps]
    assert dry.block_spans == real.block_spans and [(s.preempted, s.recomputed_tokens) for s in dry.steps] == \
        [(s.preempted, s.recomputed_tokens) for s in real.steps]
    assert all(r.output == [-1] * r.output_len for r in dry.requests)


def test_an_over_long_request_is_rejected_alone(model):
    reqs = make_requests(2, 4) + [Request("huge", [BOS] * (CTX - 2), 5, ignore_eos=True)]
    tr = Engine(model).run(reqs, "continuous", batch_size=2)
    assert tr.request("huge").status == "rejected" and "exceeds the context of 96" in tr.request("huge").finish_reason
    assert all(r.status == "finished" for r in tr.requests if r.id != "huge")
    assert tr.metrics()["num_rejected"] == 1


def test_abort_frees_the_slot_next_step_and_others_are_unaffected(model):
    reqs = [Request(f"a{i}", [BOS, 10 + i], 15, ignore_eos=True) for i in range(3)]
    expected = {r.id: greedy_alone(model, r) for r in reqs}
    run = Engine(model).start(reqs, "continuous", batch_size=2)
    for _ in range(4):
        run.step()
    slot = run.requests[0].slot
    run.abort("a0")
    rec = run.step()
    assert {w.slot: w.request_id for w in rec.works}[slot] == "a2"  # the queued request took the freed slot
    while not run.done:
        run.step()
    tr = run.trace()
    assert tr.request("a0").status == "aborted" and tr.request("a0").output_len == 4
    for rid in ("a1", "a2"):
        assert tr.request(rid).output == expected[rid]
    with pytest.raises(TinyserveError, match="request_id"):
        run.abort("a1")


def test_an_interrupted_run_leaves_the_engine_usable(model):
    eng = Engine(model)
    reqs = make_requests(4, 5)
    run = eng.start(reqs, "continuous", batch_size=2)
    run.step()  # then abandoned, as after Ctrl-C
    tr = eng.run(reqs, "continuous", batch_size=2)
    assert all(r.status == "finished" for r in tr.requests)
    assert tr.metrics() == Engine(model).run(reqs, "continuous", batch_size=2).metrics()


@pytest.mark.parametrize("kwargs,match", [
    ({"policy": "greedy"}, "policy: unknown 'greedy'"),
    ({"batch_size": 0}, "batch_size: must be >= 1"),
    ({"batch_size": 2.5}, "batch_size: must be an integer"),
    ({"policy": "dynamic", "timeout": -1.0}, "timeout: must be a finite number"),
    ({"policy": "dynamic", "timeout": float("nan")}, "timeout"),
    ({"policy": "chunked", "chunk_size": 0}, "chunk_size: must be >= 1"),
    ({"policy": "chunked", "batch_size": 8, "max_batch_tokens": 4}, "max_batch_tokens: must be >= batch_size"),
    ({"policy": "continuous", "chunk_size": 4}, "chunk_size: does not apply to the continuous policy"),
    ({"kv_budget": -5}, "kv_budget: must be a positive integer"),
    ({"clock": "sundial"}, "clock: unknown 'sundial'"),
    ({"hardware": "abacus"}, "hardware: unknown 'abacus'"),
    ({"clock": "wall", "dry_run": True}, "dry_run: needs the modeled clock"),
    ({"max_model_len": 10**6}, "max_model_len: must be an integer in 1..96"),
])
def test_bad_knobs_raise_a_value_error_naming_the_argument(model, kwargs, match):
    kwargs = {"policy": "continuous", **kwargs}
    with pytest.raises(ValueError, match=match):
        Engine(model).run(make_requests(1, 2), **kwargs)


def test_dry_run_needs_known_output_lengths(model):
    reqs = make_requests(1, 2, ignore_eos=False)
    with pytest.raises(TinyserveError, match="dry_run: request 'q0' has no known output length"):
        Engine(model).run(reqs, "continuous", dry_run=True)
    for r in reqs:
        r.output_len_hint = 1  # within every request's max_new_tokens (>= 1)
    assert Engine(model).run(reqs, "continuous", dry_run=True).metrics()["output_tokens"] == 2


def test_a_real_run_replays_as_a_dry_run_even_when_eos_decided_the_lengths():
    m = make_random_model(n_positions=CTX, seed=3, n_layer=2, n_head=2, n_embd=32)
    with torch.no_grad():  # push EOS towards what every final hidden state shares: some requests end by EOS
        m.wte.weight[EOS] += 1.5 * m.ln_f.bias / m.ln_f.bias.norm()
    reqs = make_requests(12, 8, max_out=30, ignore_eos=False)
    real = Engine(m).run(reqs, "chunked", batch_size=3, chunk_size=4)
    assert {r.finish_reason for r in real.requests} == {"eos", "length"}
    replay = real.replay_requests()
    assert [r.output_len_hint for r in replay] == [r.output_len for r in real.requests]
    dry = Engine(m).run(replay, "chunked", batch_size=3, chunk_size=4, dry_run=True)
    assert dry.metrics() == real.metrics()
    assert [r.finish_reason for r in dry.requests] == [r.finish_reason for r in real.requests]  # "eos" kept
    assert [s.works for s in dry.steps] == [s.works for s in real.steps]
