"""Properties of the engine over random workloads, policies and knobs (hypothesis, bounded).

Nothing is ever lost: every accepted request completes exactly once with the tokens of running it alone; budgets
hold at every step; the trace's totals agree with its metrics; a dry run is the real run without the model;
over-long requests are rejected alone; an abort frees its slot and changes nobody else's tokens.

The model is a tiny random float64 TinyGPT whose EOS embedding is pushed towards a direction every final hidden
state shares, so greedy decoding ends with EOS early for some prompts and never for others: both ways a
request can end are exercised.
"""
from __future__ import annotations

import random

import pytest
import torch
from helpers import greedy_alone as reference
from helpers import make_random_model
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS, EOS
from tinyserve.engine import Engine

CTX = 96
# runs use the modeled clock, so KV is counted in the default preset's model: 2 (K, V) x 80 layers x 8 KV heads x
# 128 x 2 bytes (bf16) = 327,680 bytes per token
BYTES_PER_TOKEN = 327_680


def bounded(n: int) -> settings:
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
POLICIES = ["static", "dynamic", "continuous-prefill-first", "continuous-decode-first", "chunked"]


@pytest.fixture(scope="module", autouse=True)
def one_thread(torch_one_thread):
    """Tiny matmuls: one thread (conftest's torch_one_thread), for every test of this module."""


@pytest.fixture(scope="module")
def model():
    m = make_random_model(n_positions=CTX, seed=3, n_layer=2, n_head=2, n_embd=32)
    with torch.no_grad():
        m.wte.weight[EOS] += 1.5 * m.ln_f.bias / m.ln_f.bias.norm()
    return m


_REF: dict = {}


def greedy_alone(model, r: Request) -> list[int]:
    """conftest's full-recompute reference, memoised per prompt/length/eos rule."""
    key = (tuple(r.prompt), r.max_new_tokens, r.ignore_eos)
    if key not in _REF:
        _REF[key] = reference(model, r)
    return _REF[key]


def test_the_model_ends_some_requests_with_eos_and_not_others(model):
    rng = random.Random(0)
    reqs = [Request(f"e{i}", [BOS] + [rng.randrange(256) for _ in range(rng.randint(0, 30))], 12) for i in range(30)]
    ends = [greedy_alone(model, r)[-1] == EOS for r in reqs]
    assert 3 <= sum(ends) <= 27, ends  # the EOS path is really exercised by the properties below


# ------------------------------------------------------------------------------------------------ strategies
arrivals = st.one_of(st.sampled_from([0.0, 0.0, 0.001, 0.001, 0.01]), st.floats(0.0, 0.05, allow_subnormal=False))
request_specs = st.tuples(st.integers(1, 40), st.integers(1, 12), arrivals, st.booleans())
over_long_specs = st.tuples(st.integers(0, 40), st.integers(1, 20), arrivals)  # prompt = CTX - out + 1 + extra


def build(seed: int, specs, over_long=()) -> list[Request]:
    rng = random.Random(seed)
    reqs = [Request(f"q{i}", [BOS] + [rng.randrange(256) for _ in range(p - 1)], m, a, ignore_eos=eos)
            for i, (p, m, a, eos) in enumerate(specs)]
    reqs += [Request(f"big{i}", [BOS] + [rng.randrange(256) for _ in range(CTX - m + extra)], m, a, ignore_eos=True)
             for i, (extra, m, a) in enumerate(over_long)]
    rng.shuffle(reqs)  # the engine must not depend on list order
    return reqs


def policy_args(name: str, b: int, timeout: float, chunk: int, extra: int) -> tuple[str, dict]:
    return {
        "static": ("static", {"batch_size": b}),
        "dynamic": ("dynamic", {"batch_size": b, "timeout": timeout}),
        "continuous-prefill-first": ("continuous", {"batch_size": b, "prefill_first": True}),
        "continuous-decode-first": ("continuous", {"batch_size": b, "prefill_first": False}),
        "chunked": ("chunked", {"batch_size": b, "chunk_size": chunk, "max_batch_tokens": b + extra}),
    }[name]


def budget_for(reqs: list[Request], slabs: int | None, frac: float) -> tuple[int | None, int]:
    """(kv_budget, slab bytes): `slabs` whole slabs plus a fraction of one (None: no budget)."""
    slab = max(r.prompt_len + r.max_new_tokens for r in reqs if r.prompt_len + r.max_new_tokens <= CTX) * BYTES_PER_TOKEN
    return (None if slabs is None else slabs * slab + int(frac * (slab - 1))), slab


# ------------------------------------------------------------------------------------------------ checks
def check_trace(tr, expected: dict[str, list[int]], policy: str, knobs: dict, kv_budget, slab: int,
                aborted: str | None = None) -> None:
    """Everything a correct run must satisfy (expected: the alone-tokens of every accepted request)."""
    where = (policy, knobs, kv_budget)
    b = knobs["batch_size"]
    assert tr.num_slots == (b if kv_budget is None else min(b, kv_budget // slab)), where
    by_id = {r.id: r for r in tr.requests}
    assert len(by_id) == len(tr.requests)
    # every request accounted for: accepted ones finished (or the one aborted), the rest rejected
    for r in tr.requests:
        if r.id not in expected:
            assert r.status == "rejected" and "exceeds the context of 96" in r.finish_reason, (where, r)
            assert r.output == [] and r.prefill_computed_tokens == r.decode_computed_tokens == 0
            continue
        want = expected[r.id]
        if r.id == aborted:
            assert r.status == "aborted" and r.output == want[:r.output_len], where
            continue
        assert r.status == "finished", (where, r.id, r.status)
        assert r.output == want, (where, r.id)
        if r.ignore_eos:
            assert r.output_len == r.max_new_tokens and r.finish_reason == "length"
        else:
            assert EOS not in r.output[:-1]
            assert r.output_len == r.max_new_tokens or (r.output[-1] == EOS and r.finish_reason == "eos"), (where, r)
        assert len(r.token_times) == r.output_len and r.token_times == sorted(r.token_times)
        assert r.finish_s == r.token_times[-1] and r.arrival_s <= r.admitted_s <= r.first_token_s
    # per step: budgets, one work per slot and per request
    held: dict[int, str] = {}  # slot -> last request seen on it
    seen_on: dict[str, int] = {}  # request -> its slot
    finished_slot: set[str] = set()
    prefill_pos: dict[str, int] = {}
    decodes: dict[str, list[int]] = {}
    produced: dict[str, int] = {}
    for s in tr.steps:
        assert s.works, where
        slots = [w.slot for w in s.works]
        rids = [w.request_id for w in s.works]
        assert len(set(slots)) == len(slots) <= tr.num_slots and all(0 <= x < tr.num_slots for x in slots), where
        assert len(set(rids)) == len(rids), where
        assert 0 < s.kv_used_bytes <= s.kv_reserved_bytes <= tr.num_slots * slab, (where, s.index)
        if kv_budget is not None:
            assert s.kv_reserved_bytes <= kv_budget
        if policy == "chunked":
            assert s.tokens <= knobs["max_batch_tokens"], (where, s.index, s.tokens)
            assert all(w.tokens <= knobs["chunk_size"] for w in s.works if w.phase == "prefill")
        if policy not in ("static", "dynamic"):
            assert all(w.padding == 0 and w.phase != "wasted" for w in s.works), where
        for w in s.works:
            r = by_id[w.request_id]
            assert r.id in expected and r.admitted_s <= s.start_s, where
            # a request keeps one slot; a slot serves one request at a time (contiguous runs)
            assert seen_on.setdefault(r.id, w.slot) == w.slot, (where, r.id)
            if held.get(w.slot) != r.id:
                assert r.id not in finished_slot, (where, "request came back to a slot", r.id)
                if w.slot in held:
                    finished_slot.add(held[w.slot])
                held[w.slot] = r.id
            if w.phase == "prefill":  # prompt tokens computed exactly once, in order
                assert w.start == prefill_pos.get(r.id, 0) and w.tokens >= 1, (where, r.id, w)
                prefill_pos[r.id] = w.start + w.tokens
                if prefill_pos[r.id] == r.prompt_len:
                    produced[r.id] = produced.get(r.id, 0) + 1
            elif w.phase == "decode":
                assert prefill_pos.get(r.id) == r.prompt_len
                decodes.setdefault(r.id, []).append(w.start)
                produced[r.id] = produced.get(r.id, 0) + 1
            else:
                assert w.phase == "wasted" and policy in ("static", "dynamic")
    for r in tr.requests:
        if r.id in expected:
            assert produced.get(r.id, 0) == r.output_len, (where, r.id)  # each token produced exactly once
            if r.output_len:
                assert prefill_pos[r.id] == r.prompt_len
            assert decodes.get(r.id, []) == list(range(r.prompt_len, r.prompt_len + max(0, r.output_len - 1)))
            assert r.decode_computed_tokens >= max(0, r.output_len - 1)
    # the trace's totals agree with its metrics
    m = tr.metrics()
    assert m["num_steps"] == len(tr.steps)
    assert sum(r.prefill_computed_tokens for r in tr.requests) == m["prefill_tokens"] + m["padding_tokens"]
    assert sum(r.decode_computed_tokens for r in tr.requests) == m["decode_tokens"] + m["wasted_decode_tokens"]
    assert m["output_tokens"] == sum(r.output_len for r in tr.requests if r.status == "finished")
    assert m["prefill_tokens"] == sum(prefill_pos.values())
    assert m["num_finished"] == sum(r.id in expected and r.id != aborted for r in tr.requests)
    assert m["num_rejected"] == sum(r.id not in expected for r in tr.requests)
    assert m["kv_reserved_bytes_peak"] <= tr.num_slots * slab


def step_view(tr):
    return [(s.start_s, s.duration_s, s.works, s.kv_reserved_bytes, s.kv_used_bytes) for s in tr.steps]


def request_view(tr):
    return [(r.id, r.status, r.output_len, r.admitted_s, r.first_token_s, r.finish_s, r.token_times,
             r.prefill_computed_tokens, r.decode_computed_tokens, r.slot) for r in tr.requests]


# ------------------------------------------------------------------------------------------------ properties
@bounded(200)
@given(seed=st.integers(0, 2**32 - 1), specs=st.lists(request_specs, min_size=1, max_size=7),
       over_long=st.lists(over_long_specs, max_size=2), b=st.integers(1, 6), timeout=st.floats(0.0, 0.05),
       chunk=st.integers(1, 40), extra=st.integers(0, 20),
       slabs=st.one_of(st.none(), st.integers(1, 4)), frac=st.floats(0.0, 1.0))
def test_every_policy_completes_every_request_with_the_alone_tokens(model, seed, specs, over_long, b, timeout, chunk,
                                                                    extra, slabs, frac):
    reqs = build(seed, specs, over_long)
    expected = {r.id: greedy_alone(model, r) for r in reqs if not r.id.startswith("big")}
    kv_budget, slab = budget_for(reqs, slabs, frac)
    eng = Engine(model)
    for name in POLICIES:
        policy, knobs = policy_args(name, b, timeout, chunk, extra)
        tr = eng.run(reqs, policy, kv_budget=kv_budget, slab="longest", **knobs)  # budgets counted in such slabs
        check_trace(tr, expected, policy, knobs, kv_budget, slab)
        # a dry run with the output lengths now known is the same run, step for step
        hinted = [Request(r.id, r.prompt, r.max_new_tokens, r.arrival_s, r.ignore_eos,
                          output_len_hint=len(expected[r.id]) if r.id in expected else None) for r in reqs]
        dry = Engine(model).run(hinted, policy, kv_budget=kv_budget, dry_run=True, slab="longest", **knobs)
        assert dry.metrics() == tr.metrics(), name
        assert step_view(dry) == step_view(tr), name
        assert request_view(dry) == request_view(tr), name
    # the inputs were not touched: the same list runs again to the same result
    assert all(r.output == [] and r.status == "waiting" for r in reqs)


@bounded(60)
@given(seed=st.integers(0, 2**32 - 1),
       specs=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 12), arrivals, st.just(True)),
                      min_size=1, max_size=7),
       b=st.integers(1, 6), timeout=st.floats(0.0, 0.05), chunk=st.integers(1, 40), extra=st.integers(0, 20))
def test_dry_run_equals_real_run_when_eos_is_ignored(model, seed, specs, b, timeout, chunk, extra):
    """No hint needed: ignore_eos fixes every length before running."""
    reqs = build(seed, specs)
    for name in POLICIES:
        policy, knobs = policy_args(name, b, timeout, chunk, extra)
        real = Engine(model).run(reqs, policy, **knobs)
        dry = Engine(model).run(reqs, policy, dry_run=True, **knobs)
        assert dry.metrics() == real.metrics() and step_view(dry) == step_view(real), name


@bounded(200)
@given(seed=st.integers(0, 2**32 - 1), specs=st.lists(request_specs, min_size=2, max_size=7),
       name=st.sampled_from(POLICIES), b=st.integers(1, 6), timeout=st.floats(0.0, 0.05), chunk=st.integers(1, 40),
       extra=st.integers(0, 20), slabs=st.one_of(st.none(), st.integers(1, 4)), at=st.integers(0, 25),
       pick=st.integers(0, 10**6))
def test_an_abort_frees_its_slot_and_changes_no_one_elses_tokens(model, seed, specs, name, b, timeout, chunk, extra,
                                                                 slabs, at, pick):
    reqs = build(seed, specs)
    expected = {r.id: greedy_alone(model, r) for r in reqs}
    kv_budget, slab = budget_for(reqs, slabs, 0.5)
    policy, knobs = policy_args(name, b, timeout, chunk, extra)
    run = Engine(model).start(reqs, policy, kv_budget=kv_budget, slab="longest", **knobs)  # budgets in such slabs
    while len(run.steps) < at and not run.done:
        run.step()
    assume(not run.done)
    live = [r for r in run.policy.running if not r.done]  # holding a slot, still computing
    victim = live[pick % len(live)] if live else [r for r in run.requests if not r.done][pick % sum(
        not r.done for r in run.requests)]
    slot, was_running = victim.slot, victim in run.policy.running
    free_before = run.pool.num_free
    run.abort(victim.id)
    queued = len(run.policy.waiting) >= run.pool.num_free  # enough waiting to fill every free slot
    if was_running:
        assert run.pool.num_free >= free_before + 1  # its slab is free at once
    else:
        assert run.pool.num_free == free_before
    first = True
    while not run.done:
        n = len(run.steps)
        rec = run.step()
        if rec is None:
            continue
        assert all(w.request_id != victim.id for w in rec.works)  # never computed again
        if first and was_running and queued and name in ("continuous-prefill-first", "chunked"):
            # the freed slot is taken by the next queued request in the very next step
            holders = {w.slot: w.request_id for w in rec.works}
            holders.update({r.slot: r.id for r in run.policy.running})
            assert holders.get(slot) not in (None, victim.id), (name, slot, holders)
        first = first and len(run.steps) == n
    tr = run.trace()
    check_trace(tr, expected, policy, knobs, kv_budget, slab, aborted=victim.id)
    assert tr.metrics()["num_aborted"] == 1
