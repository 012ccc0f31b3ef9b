"""The gallery's scenarios (chapters/workloads/gallery-*.jsonl) against the published figures' frames.

Each expected frame below is read off the figure (or its text) by hand and written out per iteration:
'id:pN' = N prompt tokens computed, 'id:d' = one decode, 'id:w' = a decode computed for a request that is
already done (wasted), '+padM' = M padding tokens. Dry runs on the modeled clock: counts, not timings.
"""
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyserve.analysis.figures import frames, iterations, paused, story, token_iterations, waiting
from tinyserve.core.scheduling.variants import ChunkOnly, SeparatePrefill, WholePromptBudget
from tinyserve.core.workloads import load_jsonl
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError

W = Path(__file__).resolve().parents[2] / "chapters" / "workloads"


def run(name, policy, **knobs):
    return Engine().run(W / name, policy, dry_run=True, progress=False, **knobs)


def test_every_gallery_workload_is_valid_jsonl():
    names = sorted(p.name for p in W.glob("gallery-*.jsonl"))
    assert names == ["gallery-anyscale-grid.jsonl", "gallery-orca-early-finish.jsonl", "gallery-sarathi-stalls.jsonl",
                     "gallery-trtllm-budget.jsonl", "gallery-vllm-reservation.jsonl"]
    for n in names:
        reqs = load_jsonl(W / n)
        assert reqs and all(r.ignore_eos for r in reqs)  # fixed lengths: every count is machine-independent


def test_a_broken_gallery_line_is_reported_like_any_jsonl(tmp_path):
    bad = tmp_path / "g.jsonl"
    bad.write_text((W / "gallery-orca-early-finish.jsonl").read_text().replace('"max_new_tokens": 2', '"max_new_tokens": 0'))
    with pytest.raises(TinyserveError, match=r"line 2: field 'max_new_tokens' must be an integer >= 1"):
        load_jsonl(bad)


# ---- Anyscale: S1-S4 in a batch of 4; S3 stops after 2 generation iterations, S2 after 6 -----------------
def test_anyscale_static_grid():
    # prompts 3,2,4,2 padded to 4; outputs S1 5, S2 6, S3 2, S4 4: the batch runs until S2's 6th token,
    # so S3 computes thrown-away tokens in iterations 3-6, S4 in 5-6, S1 in 6; S5-S7 start only at iteration 7
    got = frames(run("gallery-anyscale-grid.jsonl", "static", batch_size=4))
    assert got[:7] == [
        ["S1:p3+pad1", "S2:p2+pad2", "S3:p4", "S4:p2+pad2"],
        ["S1:d", "S2:d", "S3:d", "S4:d"],
        ["S1:d", "S2:d", "S3:w", "S4:d"],
        ["S1:d", "S2:d", "S3:w", "S4:d"],
        ["S1:d", "S2:d", "S3:w", "S4:w"],
        ["S1:w", "S2:d", "S3:w", "S4:w"],
        ["S5:p3", "S6:p2+pad1", "S7:p3"],
    ]


def test_anyscale_continuous_grid():
    # the slot S3 frees after iteration 2 takes S5 at iteration 3; S4 (done at 4) hands over to S6 at 5;
    # S1 (done at 5) to S7 at 6. No padding, no wasted token.
    t = run("gallery-anyscale-grid.jsonl", "continuous", batch_size=4)
    assert frames(t) == [
        ["S1:p3", "S2:p2", "S3:p4", "S4:p2"],
        ["S1:d", "S2:d", "S3:d", "S4:d"],
        ["S1:d", "S2:d", "S4:d", "S5:p3"],
        ["S1:d", "S2:d", "S4:d", "S5:d"],
        ["S1:d", "S2:d", "S5:d", "S6:p2"],
        ["S2:d", "S6:d", "S7:p3"],
        ["S6:d", "S7:d"],
    ]
    slot = {w.request_id: w.slot for s in t.steps for w in s.works}
    assert (slot["S5"], slot["S6"], slot["S7"]) == (slot["S3"], slot["S4"], slot["S1"])
    assert t.metrics()["wasted_decode_tokens"] == 0


# ---- TensorRT-LLM: batch cap 4, 12-token budget -----------------------------------------------------------
def test_trtllm_frames_without_context_chunking():
    # frame 2: R1, R2 prompts (5 + 5 = 10); R3's 4-token prompt does not fit the 2 left -> blocked by the budget
    # frame 3: R1, R2 decode (2) + R3 (4) + R4 (6) = 12; R5 fits the budget? no: 4 slots busy -> batch cap
    # frame 4: R1 stopped after its 2nd token and left; R5 takes its place
    t = run("gallery-trtllm-budget.jsonl", WholePromptBudget(batch_size=4, max_batch_tokens=12))
    assert frames(t)[:3] == [["R1:p5", "R2:p5"], ["R1:d", "R2:d", "R3:p4", "R4:p6"],
                             ["R2:d", "R3:d", "R4:d", "R5:p3"]]
    assert [s.tokens for s in t.steps[:3]] == [10, 12, 6]
    assert dict(waiting(t, 0))["R3"].startswith("token budget")
    assert dict(waiting(t, 1))["R5"].startswith("batch cap")
    assert t.request("R1").finish_s == t.steps[1].start_s + t.steps[1].duration_s  # evicted before frame 4


def test_trtllm_chunked_context_frame():
    # with context chunking (our chunked policy), R3's first 2 tokens ride in frame 2, the rest in frame 3
    t = run("gallery-trtllm-budget.jsonl", "chunked", batch_size=4, chunk_size=12, max_batch_tokens=12)
    assert frames(t)[:3] == [["R1:p5", "R2:p5", "R3:p2"], ["R1:d", "R2:d", "R3:p2", "R4:p6"],
                             ["R2:d", "R3:d", "R4:d", "R5:p3"]]
    assert [s.tokens for s in t.steps[:2]] == [12, 10]  # 5 + 5 + 2, then 2 decodes + 2 + 6


# ---- Sarathi-Serve Fig. 7: A, B decoding; C (1,024) and D (1,022) arrive -----------------------------------
def _from_arrival(t):
    """Frames from the iteration before C first computes (the figure starts with one A/B decode iteration)."""
    k = next(i for i, f in enumerate(frames(t)) if any(m.startswith("C:") for m in f))
    assert k == 2  # C and D arrive during the first decode iteration (iteration 2): they enter at 3
    return frames(t)[k - 1:]


def test_sarathi_vllm_panel_pauses_decodes_for_prefills():
    t = run("gallery-sarathi-stalls.jsonl", SeparatePrefill(batch_size=4))
    assert _from_arrival(t)[:3] == [["A:d", "B:d"], ["C:p1024", "D:p1022"], ["A:d", "B:d", "C:d", "D:d"]]
    assert paused(t, 2) == ["A", "B"]


def test_sarathi_orca_panel_mixes_whole_prompts():
    t = run("gallery-sarathi-stalls.jsonl", "continuous", batch_size=4)
    assert _from_arrival(t)[:3] == [["A:d", "B:d"], ["A:d", "B:d", "C:p1024", "D:p1022"], ["A:d", "B:d", "C:d", "D:d"]]


def test_sarathi_fastertransformer_panel_holds_newcomers():
    # request-level batching (our static, batch of 2): C and D start only after A and B's 10th token
    t = run("gallery-sarathi-stalls.jsonl", "static", batch_size=2)
    f = frames(t)
    assert f[1:10] == [["A:d", "B:d"]] * 9 and f[10] == ["C:p1024", "D:p1022+pad2"]
    assert [rid for rid, _ in waiting(t, 2)] == ["C", "D"]


def test_sarathi_panel_is_stall_free():
    # budget 514 = 2 decodes + one 512 chunk: C in two chunks (p0, p1), then D in two of 511 beside 3 decodes
    t = run("gallery-sarathi-stalls.jsonl", "chunked", batch_size=4, chunk_size=512, max_batch_tokens=514)
    assert _from_arrival(t)[:6] == [["A:d", "B:d"], ["A:d", "B:d", "C:p512"], ["A:d", "B:d", "C:p512"],
                                    ["A:d", "B:d", "C:d", "D:p511"], ["A:d", "B:d", "C:d", "D:p511"],
                                    ["A:d", "B:d", "C:d", "D:d"]]
    its = token_iterations(t)
    assert its["A"] == list(range(1, 11))  # one token every iteration: never paused


def test_sarathi_stall_is_longest_under_prefill_first_policies():
    # the gap A waits between two tokens: a prefill step of 2,046 tokens (vLLM, Orca) vs a 514-token step
    def worst_gap(t):
        tt = t.request("A").token_times
        return max(b - a for a, b in zip(tt, tt[1:]))

    knobs = dict(batch_size=4)
    vllm = worst_gap(run("gallery-sarathi-stalls.jsonl", SeparatePrefill(batch_size=4)))
    orca = worst_gap(run("gallery-sarathi-stalls.jsonl", "continuous", **knobs))
    sarathi = worst_gap(run("gallery-sarathi-stalls.jsonl", "chunked", chunk_size=512, max_batch_tokens=514, **knobs))
    # vLLM's gap spans the prefill step AND the next decode step; Orca's is the one mixed step
    assert vllm > orca > 2 * sarathi


# ---- Orca Fig. 3: x2 finishes at iteration 2 but request-level batching keeps computing it ------------------
def test_orca_finished_request_still_computed():
    static = run("gallery-orca-early-finish.jsonl", "static", batch_size=2)
    assert frames(static) == [["x1:p2", "x2:p2"], ["x1:d", "x2:d"], ["x1:d", "x2:w"], ["x1:d", "x2:w"]]
    cont = run("gallery-orca-early-finish.jsonl", "continuous", batch_size=2)
    assert frames(cont) == [["x1:p2", "x2:p2"], ["x1:d", "x2:d"], ["x1:d"], ["x1:d"]]
    assert token_iterations(static)["x2"] == token_iterations(cont)["x2"] == [1, 2]


# ---- vLLM Figs. 2-3: one slab per slot reserves the longest request's room for everyone ---------------------
def test_vllm_reservation_one_slab_per_slot():
    # A: 56 characters + BOS = 57 prompt tokens (+ 1,991 new = 2,048); B: 18 + 1 = 19 (+ 493 new = 512).
    # After iteration 1 the slabs hold 57 + 19 = 76 positions (the first output tokens' K/V are not yet
    # written), while a server of maximum length 2,048 reserves 2,048 for both: reserved / used = 4,096 / 76.
    t = run("gallery-vllm-reservation.jsonl", "continuous", batch_size=2, max_model_len=2048)
    s0 = t.steps[0]
    assert s0.kv_reserved_bytes * 76 == s0.kv_used_bytes * 4096
    # B leaves after 493 tokens; a slab server keeps both slabs reserved (they were reserved when it started)
    after_b = next(s for s in t.steps if len(s.works) == 1)
    assert after_b.kv_reserved_bytes == s0.kv_reserved_bytes


def test_story_names_blocked_requests_and_reasons():
    t = run("gallery-trtllm-budget.jsonl", WholePromptBudget(batch_size=4, max_batch_tokens=12))
    lines = story(t).splitlines()
    assert lines[0].startswith("iter  1: R1:p5 R2:p5 | waiting: R3, R4, R5 (token budget")
    assert "R5 (batch cap: all 4 slots busy)" in lines[1]


def test_chunk_only_never_mixes_and_alternates():
    t = run("gallery-sarathi-stalls.jsonl", ChunkOnly(batch_size=4, chunk_size=512, max_batch_tokens=514))
    kinds = [{w.phase for w in s.works} for s in t.steps]
    assert all(len(k) == 1 for k in kinds)  # a step is all prefill or all decode
    # from C's arrival: chunk C0, decode, chunk C1, decode, chunk D0 (C done, 514 left: D gets 514 > chunk 512)...
    f = _from_arrival(t)
    assert f[:5] == [["A:d", "B:d"], ["C:p512", "D:p2"], ["A:d", "B:d"], ["C:p512", "D:p2"], ["A:d", "B:d", "C:d"]]


def test_decode_first_without_bound_is_named_as_the_reason():
    # continuous, decode-first without a bound: C and D wait while A and B decode, although 2 slots are free
    t = run("gallery-sarathi-stalls.jsonl", "continuous", batch_size=4, max_waiting_steps=float("inf"))
    assert dict(waiting(t, 2)) == {"C": "decode-first: waits until no decode is in flight",
                                   "D": "decode-first: waits until no decode is in flight"}
    assert frames(t)[10] == ["C:p1024", "D:p1022"]  # after A and B's 10 tokens (iterations 1-10), no padding


def test_iterations_of_a_request_by_phase():
    t = run("gallery-orca-early-finish.jsonl", "static", batch_size=2)
    assert iterations(t, "x2") == [1, 2, 3, 4]  # in the batch from start to end ...
    assert iterations(t, "x2", "wasted") == [3, 4]  # ... though done after 2
    assert iterations(t, "x1", "prefill") == [1]


def test_whole_prompt_lets_a_prompt_longer_than_the_budget_run_alone():
    # a 20-token prompt can never fit a 12-token budget: rather than block the queue forever it runs in a step
    # of its own (nothing else in flight), then the 5-token one follows beside its decode
    from tinyserve.core.request import Request
    from tinyserve.core.workloads import make_prompt

    reqs = [Request("big", make_prompt(20), 2, 0.0, ignore_eos=True),
            Request("small", make_prompt(5, seed=1), 2, 0.0, ignore_eos=True)]
    t = Engine().run(reqs, WholePromptBudget(batch_size=4, max_batch_tokens=12), dry_run=True, progress=False)
    assert frames(t) == [["big:p20"], ["big:d", "small:p5"], ["small:d"]]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 12), st.floats(0, 0.2)), min_size=1, max_size=8),
       st.integers(1, 4), st.integers(4, 64))
def test_variants_finish_every_request_with_its_tokens(specs, b, budget):
    from tinyserve.core.request import Request
    from tinyserve.core.workloads import make_prompt

    reqs = [Request(f"r{i}", make_prompt(p, seed=i), o, a, ignore_eos=True) for i, (p, o, a) in enumerate(specs)]
    for policy in (SeparatePrefill(batch_size=b), WholePromptBudget(batch_size=b, max_batch_tokens=budget),
                   ChunkOnly(batch_size=b, chunk_size=budget, max_batch_tokens=max(b, budget))):
        t = Engine().run(reqs, policy, dry_run=True, progress=False)  # a stalled policy raises RuntimeError
        assert all(r.output_len == r.max_new_tokens for r in t.requests)
        assert all(sum(w.tokens for s in t.steps for w in s.works if w.request_id == r.id and w.phase == "prefill")
                   == r.prompt_len for r in t.requests)  # every prompt token computed exactly once
