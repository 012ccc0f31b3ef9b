"""The paged KV layout (issue #24): a block pool, block tables, admission by free blocks, recompute preemption of
the most recently admitted. Every expected schedule is counted by hand in a comment; tokens are checked against
each request run alone (float64)."""
from __future__ import annotations

import json
import random

import pytest
import torch
from helpers import greedy_alone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyserve.core.blocks import PagedPool
from tinyserve.core.config import GPTConfig, RunConfig
from tinyserve.core.scheduling.variants import ChunkOnly, SeparatePrefill, WholePromptBudget
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.model.gpt import TinyGPT
from tinyserve.trace.record import Trace

BPT = 327_680  # the H200 preset's KV bytes per token: budgets below are positions x BPT


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    torch.manual_seed(1)
    return TinyGPT(GPTConfig(n_positions=96, n_layer=2, n_head=2, n_embd=32)).double().eval()


def same(n: int, prompt: int = 4, out: int = 8) -> list[Request]:
    return [Request(f"r{i}", [BOS] + [65 + i] * (prompt - 1), out, 0.0, ignore_eos=True) for i in range(n)]


def test_the_block_pool_hands_out_the_lowest_blocks_and_takes_them_back():
    pool = PagedPool(num_slots=2, num_blocks=4, block_size=4, bytes_per_token=10)
    a, b = same(2)
    assert pool.allocate(a, 5) and a.block_table == [0, 1]  # 5 positions: 2 blocks
    assert pool.allocate(b, 4) and b.block_table == [2]
    assert pool.allocate(a, 8) and a.block_table == [0, 1]  # still 2 blocks: nothing taken
    assert not pool.allocate(a, 13) and a.block_table == [0, 1]  # 4 blocks: 2 more, 1 free: nothing taken
    assert (pool.held, pool.free_blocks, pool.reserved_bytes()) == (3, 1, 3 * 4 * 10)
    pool.free(a)
    assert a.block_table == [] and pool.free_blocks == 3
    assert pool.allocate(b, 12) and b.block_table == [2, 0, 1]  # lowest first, wherever they lie
    assert [s[:3] for s in pool.closed_spans(0)] == [(0, "r0", 0), (1, "r0", 1), (2, "r1", 0), (0, "r1", 1), (1, "r1", 2)]


def run_two(model, dry: bool):
    # a pool of 4 blocks x 4 positions; two requests of 4 + 8 (3 blocks each at most), continuous B=2
    return Engine(model).run(same(2), "continuous", batch_size=2, kv_layout="paged", block_size=4,
                             kv_budget=16 * BPT, dry_run=dry)


@pytest.mark.parametrize("dry", [True, False], ids=["dry", "real"])
def test_the_most_recently_admitted_is_preempted_and_recomputed(model, dry):
    tr = run_two(model, dry)
    # step 0: both prefill 4 (blocks [0], [1]); steps 1-4: both decode, each taking a 2nd block at step 1 (pool full);
    # step 5: r0 needs a 3rd block for position 8: r1, admitted last, is preempted (its 8 stored positions lost) and
    # nobody is admitted that step; steps 5-7: r0 decodes alone to its 8th token; step 8: r1 re-enters and prefills
    # its prompt + 5 tokens (9 positions: 8 recomputed, 1 new), sampling token 6; steps 9-10: its tokens 7, 8
    works = [[(w.request_id, w.phase, w.start, w.tokens) for w in s.works] for s in tr.steps]
    assert works[0] == [("r0", "prefill", 0, 4), ("r1", "prefill", 0, 4)]
    assert works[4] == [("r0", "decode", 7, 1), ("r1", "decode", 7, 1)]
    assert works[5:8] == [[("r0", "decode", p, 1)] for p in (8, 9, 10)]
    assert works[8] == [("r1", "prefill", 0, 9)]
    assert works[9:] == [[("r1", "decode", 9, 1)], [("r1", "decode", 10, 1)]]
    assert [s.preempted for s in tr.steps].index(("r1",)) == 5 and sum(map(len, (s.preempted for s in tr.steps))) == 1
    assert [s.resumed for s in tr.steps][8] == ("r1",)
    assert [s.recomputed_tokens for s in tr.steps] == [0] * 8 + [8, 0, 0]
    assert [s.blocks_used for s in tr.steps] == [2, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3]
    assert [s.block_waste for s in tr.steps][:2] == [0, 6]  # step 1: 2 x 8 positions held, 2 x 5 filled
    m = tr.metrics()
    assert (m["preemptions"], m["recomputed_tokens"], m["blocks_used_peak"]) == (1, 8, 4)
    assert tr.request("r1").preemptions == 1 and tr.request("r1").output_len == 8
    assert int(tr.works_table().token.sum()) == 16  # the recompute's sample counts as r1's 6th token, no more
    if not dry:
        assert all(r.output == greedy_alone(model, r) for r in tr.requests)


def test_a_dry_run_schedules_the_paged_layout_as_the_real_run_does(model):
    real, dry = run_two(model, False), run_two(model, True)
    assert real.metrics() == dry.metrics() and real.block_spans == dry.block_spans
    assert [s.works for s in real.steps] == [s.works for s in dry.steps]


def random_requests(seed: int, n: int = 8) -> list[Request]:
    rng = random.Random(seed)
    return [Request(f"q{i}", [BOS] + [rng.randrange(256) for _ in range(rng.randint(0, 29))], rng.randint(1, 30),
                    arrival_s=round(rng.random() * 0.01, 4), ignore_eos=bool(seed % 2)) for i in range(n)]


POLICIES = [("static", {}), ("dynamic", {"timeout": 0.001}), ("continuous", {}),
            ("continuous", {"prefill_first": False}), ("chunked", {"chunk_size": 5, "max_batch_tokens": 8})]


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_every_policy_with_pages_returns_the_tokens_of_running_each_request_alone(model, seed, block_size):
    reqs = random_requests(seed)
    expected = {r.id: greedy_alone(model, r) for r in reqs}
    preempted = 0
    for policy, knobs in POLICIES:  # 64 positions for 4 slots: the continuous policies must preempt
        tr = Engine(model).run(reqs, policy, batch_size=4, kv_layout="paged", block_size=block_size,
                               kv_budget=64 * BPT, **knobs)
        assert {r.id: r.output for r in tr.requests} == expected, (policy, knobs)
        assert int(tr.works_table().token.sum()) == sum(r.output_len for r in tr.requests)
        for s in tr.steps:
            assert s.blocks_used + s.blocks_free == tr.num_blocks and s.block_waste >= 0
        preempted += tr.metrics()["preemptions"]
        if policy in ("static", "dynamic"):  # a static batch reserves its members' worst case: never preempts
            assert tr.metrics()["preemptions"] == 0
        replay = Engine(model).run(tr.replay_requests(), policy, batch_size=4, kv_layout="paged",
                                   block_size=block_size, kv_budget=64 * BPT, dry_run=True, **knobs)
        assert [s.works for s in replay.steps] == [s.works for s in tr.steps]
    assert preempted > 0


@pytest.mark.parametrize("make", [lambda: SeparatePrefill(3), lambda: WholePromptBudget(3, 20),
                                  lambda: ChunkOnly(3, 5, 8)], ids=["separate", "whole-prompt", "chunk-only"])
def test_the_papers_variants_run_on_pages_too(model, make):
    reqs = random_requests(5)
    tr = Engine(model).run(reqs, make(), kv_layout="paged", block_size=4, kv_budget=64 * BPT)
    assert all(r.output == greedy_alone(model, r) for r in tr.requests)


def test_a_static_batch_admits_only_what_its_worst_case_leaves_room_for(model):
    # 4 blocks of 4; each request may reach 4 + 8 = 12 positions = 3 blocks: one member per batch
    tr = Engine(model).run(same(3), "static", batch_size=3, kv_layout="paged", block_size=4, kv_budget=16 * BPT,
                           dry_run=True)
    launches = [[w.request_id for w in s.works] for s in tr.steps if s.works[0].phase == "prefill"]
    assert launches == [["r0"], ["r1"], ["r2"]]


def test_the_pool_is_the_presets_kv_memory_or_the_slabs_bytes():
    assert Engine().start(same(1), kv_layout="paged", dry_run=True).pool.num_blocks == 9775  # 51.25e9 // (16 x BPT)
    # cpu-tiny states no KV memory: the slabs' bytes for the same batch, 2 x 4,096 positions = 512 blocks of 16
    run = Engine().start(same(1), batch_size=2, kv_layout="paged", hardware="cpu-tiny", dry_run=True)
    assert run.pool.num_blocks == 512 and run.pool.num_slots == 2


def test_the_wall_clock_pool_holds_the_slabs_bytes_by_default(model):
    run = Engine(model).start(same(2, out=12), batch_size=3, clock="wall", kv_layout="paged", block_size=4)
    # slabs of the run's longest (16 positions) for 3 slots = 48 positions = 12 blocks; the tensors need at most
    # every slot's longest: 3 x 4 blocks, the same 48 positions
    assert (run.pool.num_blocks, run.kv_tensor_positions, tuple(run.runner.kv.k.shape[1:3])) == (12, 48, (12, 4))


@pytest.mark.parametrize("kwargs,match", [
    ({"kv_layout": "pages"}, r"kv_layout: unknown 'pages' \(choose slab, paged\)"),
    ({"kv_layout": "paged", "block_size": 0}, "block_size: must be >= 1, got 0"),
    ({"kv_layout": "paged", "block_size": 2.5}, "block_size: must be an integer >= 1"),
    ({"block_size": 16}, "block_size: applies to the paged layout only"),
])
def test_bad_layout_knobs_are_one_clear_error_each(kwargs, match):
    with pytest.raises(TinyserveError, match=match):
        RunConfig(**kwargs)


def test_a_pool_too_small_for_any_prompt_is_an_error_and_a_request_that_never_fits_is_rejected_alone(model):
    with pytest.raises(TinyserveError, match=r"kv_budget: a pool of 0 blocks x 16 positions .* shortest prompt"):
        Engine(model).run(same(2), kv_layout="paged", kv_budget=15 * BPT, dry_run=True)
    reqs = same(2) + [Request("huge", [BOS] * 20, 20, ignore_eos=True)]  # 40 positions: 3 blocks of 16 > 2
    tr = Engine(model).run(reqs, kv_layout="paged", kv_budget=32 * BPT)
    assert tr.request("huge").status == "rejected" and "needs 3 KV blocks" in tr.request("huge").finish_reason
    assert [r.status for r in tr.requests if r.id != "huge"] == ["finished", "finished"]


def test_the_slab_layout_is_unchanged_and_a_paged_trace_round_trips(model, tmp_path):
    slab = Engine(model).run(same(2), dry_run=True).to_dict()
    assert "block_spans" not in slab and "layout" not in slab["kv"] and "blocks_used" not in slab["steps"][0]
    assert "preemptions" not in slab["metrics"]
    tr = run_two(model, False)
    tr.save(tmp_path / "t.json")
    back = Trace.load(tmp_path / "t.json")
    assert back.metrics() == tr.metrics() and back.block_spans == tr.block_spans
    assert [s.preempted for s in back.steps] == [s.preempted for s in tr.steps]
    assert json.loads((tmp_path / "t.json").read_text())["kv"]["num_blocks"] == 4
    counters = {e["name"] for e in tr.to_perfetto()["traceEvents"] if e["ph"] == "C"}
    assert {"kv_blocks", "preemption"} <= counters


def test_block_spans_draw_who_held_each_block_at_each_step(model):
    tr = run_two(model, True)
    # r1 held blocks 1 and 3 through step 4 (preempted while planning step 5); r0 took block 1 at step 5
    assert (1, "r1", 0, 0, 4) in tr.block_spans and (3, "r1", 1, 1, 4) in tr.block_spans
    assert (1, "r0", 2, 5, 7) in tr.block_spans
    assert sorted(s for s in tr.block_spans if s[1] == "r1" and s[3] >= 8) == [
        (0, "r1", 0, 8, 10), (1, "r1", 1, 8, 10), (2, "r1", 2, 8, 10)]


def test_an_abort_gives_its_blocks_back_and_the_others_are_unaffected(model):
    run = Engine(model).start(same(2), "continuous", batch_size=2, kv_layout="paged", block_size=4,
                              kv_budget=16 * BPT)
    for _ in range(2):
        run.step()
    assert run.pool.held == 4  # both hold 2 blocks after step 1 (see the preemption test)
    run.abort("r0")
    assert run.pool.held == 2 and run.pool.free_blocks == 2
    while not run.done:
        run.step()
    tr = run.trace()
    assert tr.request("r0").status == "aborted" and tr.metrics()["preemptions"] == 0  # r1 alone never runs short
    assert tr.request("r1").output == greedy_alone(model, tr.request("r1"))


def check_spans(tr) -> None:
    """No block has two owners in a step, and every work's positions lie in blocks its request held that step."""
    for k, s in enumerate(tr.steps):
        owners, held = {}, {}
        for b, rid, i, first, last in tr.block_spans:
            if first <= k <= last:
                assert owners.setdefault(b, rid) == rid, (k, b)
                held[rid] = held.get(rid, 0) + 1
        assert sum(held.values()) == s.blocks_used
        for w in s.works:
            assert held.get(w.request_id, 0) * tr.block_size >= w.start + w.tokens, (k, w)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 7), b=st.integers(1, 5), block_size=st.sampled_from([1, 3, 16]),
       positions=st.integers(60, 200), chunk=st.integers(1, 40))
def test_pages_never_change_the_answer_and_blocks_are_never_shared(model, seed, n, b, block_size, positions, chunk):
    reqs = random_requests(seed, n)
    expected = {r.id: greedy_alone(model, r) for r in reqs}
    for policy, knobs in [("static", {}), ("continuous", {}), ("continuous", {"max_waiting_steps": 3}),
                          ("chunked", {"chunk_size": chunk, "max_batch_tokens": b + chunk})]:
        tr = Engine(model).run(reqs, policy, batch_size=b, kv_layout="paged", block_size=block_size,
                               kv_budget=positions * BPT, **knobs)
        blocks = positions // block_size  # a request that could never fit is rejected alone
        never = {r.id for r in reqs if -(-(r.prompt_len + r.max_new_tokens) // block_size) > blocks}
        assert {r.id for r in tr.requests if r.status == "rejected"} == never
        assert {r.id: r.output for r in tr.requests if r.id not in never} == {
            k: v for k, v in expected.items() if k not in never}, (policy, knobs)
        check_spans(tr)


def test_the_text_summary_names_the_blocks_and_the_preemptions(model):
    from tinyserve.trace.report import format_summary

    text = format_summary(run_two(model, True))
    assert "kv blocks  4 of 4 positions, peak 4 held; 1 preemptions, 8 tokens recomputed" in text
    assert "max-length slabs" not in text


def test_internal_waste_is_the_tail_of_the_last_filled_block(model):
    r = Request("c", [BOS] + [70] * 9, 2, ignore_eos=True)  # 10 prompt positions: 3 blocks of 4 at admission
    tr = Engine(model).run([r], "chunked", batch_size=1, chunk_size=4, max_batch_tokens=4, kv_layout="paged",
                           block_size=4, kv_budget=16 * BPT, dry_run=False)
    # chunks fill 4, 8, 10 positions (tails 0, 0, 2; the blocks ahead of the chunks are held, not waste); then the
    # decode fills 11 (tail 1)
    assert [s.block_waste for s in tr.steps] == [0, 0, 2, 1]
    assert [s.blocks_used for s in tr.steps] == [3, 3, 3, 3]
    assert tr.request("c").output == greedy_alone(model, r)
