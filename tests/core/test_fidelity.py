"""Engine fidelity (issue #8): decode-first with a bound, KV in the modeled hardware's bytes, utilisation two
ways, and the loose ends a review found. Every expected number is counted by hand in a comment."""
from __future__ import annotations

import math

import pytest
import torch

from tinyserve.core.config import GPTConfig
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.model.gpt import TinyGPT


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    torch.manual_seed(1)
    return TinyGPT(GPTConfig(n_positions=64, n_layer=2, n_head=2, n_embd=32)).double().eval()


def admitted_step(tr, rid: str) -> int:
    return min(s.index for s in tr.steps for w in s.works if w.request_id == rid)


# ------------------------------------------------------------------------------- 1. decode-first with a bound
def two_requests() -> list[Request]:
    # a: 10 tokens from t=0; b arrives a hair later, so step 0 holds a alone (its prefill makes token 1)
    return [Request("a", [BOS, 5], 10, 0.0, ignore_eos=True), Request("b", [BOS, 6], 3, 1e-9, ignore_eos=True)]


@pytest.mark.parametrize("bound,expected", [
    (0, 1),  # prefill-first: b's prefill joins a's first decode, step 1
    (3, 4),  # b waits through a's decode steps 1, 2, 3 (a slot was free each time) and is forced in at step 4
    (8, 9),  # steps 1..8 waited; step 9 is a's last decode (token 10), b rides along
    (9, 10),  # a's decodes are steps 1..9: b would be forced in at 10, but a is gone by then: same as unbounded
    (math.inf, 10),  # drain, then refill: b enters the step after a's last decode
])
def test_a_newcomer_is_forced_in_after_max_waiting_steps_decode_steps(model, bound, expected):
    tr = Engine(model).run(two_requests(), "continuous", batch_size=2, max_waiting_steps=bound, dry_run=True)
    assert admitted_step(tr, "b") == expected
    assert tr.knobs["max_waiting_steps"] == (None if bound == math.inf else bound)
    assert tr.knobs["prefill_first"] == (bound == 0)


def test_waiting_for_a_slot_is_not_counted_as_waiting_by_choice(model):
    # one slot: b waits for capacity, not for the bound; it enters when a frees the slot (after step 9)
    tr = Engine(model).run(two_requests(), "continuous", batch_size=1, max_waiting_steps=2, dry_run=True)
    assert admitted_step(tr, "b") == 10


def test_prefill_first_and_decode_first_map_onto_the_bound(model):
    eng = Engine(model)
    assert eng.start(two_requests(), "continuous").policy.max_waiting_steps == 0  # the default: prefill-first
    assert eng.start(two_requests(), "continuous", prefill_first=True).policy.max_waiting_steps == 0
    assert eng.start(two_requests(), "continuous", prefill_first=False).policy.max_waiting_steps == 20  # TGI's
    assert eng.start(two_requests(), "continuous", prefill_first=False,
                     max_waiting_steps=math.inf).policy.max_waiting_steps == math.inf


@pytest.mark.parametrize("knobs,match", [
    ({"policy": "static", "max_waiting_steps": 3}, r"max_waiting_steps: does not apply to the static policy"),
    ({"policy": "chunked", "max_waiting_steps": 3}, r"max_waiting_steps: does not apply to the chunked policy"),
    ({"max_waiting_steps": -1}, r"max_waiting_steps: must be an integer >= 0"),
    ({"max_waiting_steps": 2.5}, r"max_waiting_steps: must be an integer >= 0 .* got 2.5"),
    ({"max_waiting_steps": True}, r"max_waiting_steps: must be an integer"),
    ({"max_waiting_steps": "20"}, r"max_waiting_steps: must be an integer"),
    ({"max_waiting_steps": math.nan}, r"max_waiting_steps: must be an integer"),
    ({"prefill_first": True, "max_waiting_steps": 5}, r"max_waiting_steps: 5 contradicts prefill_first=True"),
    ({"prefill_first": False, "max_waiting_steps": 0}, r"max_waiting_steps: 0 contradicts prefill_first=False"),
    ({"prefill_first": "yes"}, r"prefill_first: must be True or False"),
])
def test_bad_max_waiting_steps_are_named(model, knobs, match):
    knobs = {"policy": "continuous", **knobs}
    with pytest.raises(TinyserveError, match=match):
        Engine(model).run(two_requests(), dry_run=True, **knobs)


def test_the_cli_takes_max_waiting_steps_and_records_it(capsys):
    import json

    from tinyserve.tools.cli import main

    for arg, want in (("7", 7), ("unbounded", None)):
        assert main(["run", "--workload", "chapter-7.1-padding", "--policy", "continuous", "--dry-run", "--json",
                     "--max-waiting-steps", arg]) == 0
        assert json.loads(capsys.readouterr().out)["knobs"]["max_waiting_steps"] == want


# ------------------------------------------------------------------------------- 2. KV in the modeled hardware's bytes
H200_BPT = 327_680  # 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 bytes (bf16): Llama-3-70B's KV per token
H200_KV = 51_250_000_000  # 141e9 x 0.9 - 72.65e9 of weights - 3e9 of activations (the preset's derivation)


def equal_requests(n: int, prompt: int, out: int) -> list[Request]:
    return [Request(f"r{i}", [BOS] + [65] * (prompt - 1), out, 0.0, ignore_eos=True) for i in range(n)]


def test_kv_is_counted_in_the_modeled_models_bytes_and_the_tiny_models_under_the_wall_clock(model):
    reqs = equal_requests(3, 4, 6)
    tr = Engine(model).run(reqs, "continuous", batch_size=3, dry_run=True)
    assert (tr.kv_units, tr.kv_dtype, tr.kv_bytes_per_token) == ("modeled", "bfloat16", H200_BPT)
    # 3 slabs of the server's maximum length: the preset's 4,096 capped by this model's 64-position context
    assert tr.metrics()["kv_reserved_bytes_peak"] == 3 * 64 * H200_BPT  # = 62,914,560
    # step 0 prefills 4 positions each; every later step adds one: the last step (token 6) holds 4 + 5 = 9 each
    assert tr.metrics()["kv_used_bytes_peak"] == 3 * 9 * H200_BPT
    assert tr.summary()["kv_units"] == "modeled" and tr.summary()["kv"]["bytes_per_token"] == H200_BPT
    wall = Engine(model).start(reqs, "continuous", batch_size=3, clock="wall")
    # the test model's own tensors: 2 x 2 layers x n_embd 32 x 8 bytes (float64) = 1,024 bytes per token
    assert (wall.kv_units, wall.kv_dtype, wall.pool.bytes_per_token) == ("real", "float64", 1024)
    assert wall.trace().kv_capacity_bytes is None  # no budget, no modeled memory: no cap


def test_the_modeled_gpus_memory_caps_the_slots():
    # a slab is the preset's maximum length: 4,096 x 327,680 = 1,342,177,280 bytes;
    # 51.25e9 / 1.342e9 = 38.2 -> 38 slots, whatever batch size is asked for
    run = Engine().start(equal_requests(200, 500, 500), "continuous", batch_size=200, dry_run=True)
    assert run.pool.num_slots == 38
    assert run.trace().metrics()["kv_fit_slabs"] == 38 and run.trace().kv_capacity_bytes == H200_KV
    # the what-if of slabs sized to the run's longest (1,000 positions): 51.25e9 / 327.68e6 = 156.4 -> 156
    run = Engine().start(equal_requests(200, 500, 500), "continuous", batch_size=200, dry_run=True, slab="longest")
    assert run.pool.num_slots == 156


def test_exact_allocation_fit_is_counted_from_what_sequences_really_held(model):
    # 2 requests, prompt 4, 4 tokens each, one batch: slab 64 positions (the model's context). Held after each
    # step (both together): step 0 (prefill) 4+4, step 1: 5+5, step 2: 6+6, step 3: 7+7 -> 44 positions over 8
    # sequence-steps = 5.5; budget 176 positions: slabs 176 / 64 = 2, exact 176 / 5.5 = 32
    tr = Engine(model).run(equal_requests(2, 4, 4), "continuous", batch_size=2, kv_budget=176 * H200_BPT, dry_run=True)
    m = tr.metrics()
    assert [s.kv_used_bytes // H200_BPT for s in tr.steps] == [8, 10, 12, 14]
    assert (m["kv_capacity_bytes"], m["kv_fit_slabs"], m["kv_fit_exact"]) == (176 * H200_BPT, 2, 32)


def test_a_request_no_memory_can_hold_is_rejected_alone_with_a_reason(tmp_path):
    import json

    from tinyserve.cost.presets import PRESET_DIR

    d = json.loads((PRESET_DIR / "h200-70b-fp8.json").read_text())
    d["kv_memory_bytes"] = 1000 * H200_BPT  # room for exactly one 1,000-position slab
    (tmp_path / "small.json").write_text(json.dumps(d))
    reqs = equal_requests(2, 500, 500) + [Request("big", [BOS] * 600, 401, 0.0, ignore_eos=True)]  # 1,001
    # the what-if of per-request slabs (a server's slabs are all 4,096 positions: none would fit this memory)
    tr = Engine().run(reqs, "continuous", hardware=str(tmp_path / "small.json"), dry_run=True, slab="longest")
    assert tr.request("big").status == "rejected"
    assert tr.request("big").finish_reason == ("needs 328,007,680 bytes of KV (1001 positions x 327,680 bytes), "
                                               "more than the h200-70b-fp8 KV memory of 327,680,000 bytes")
    assert [tr.request(r).status for r in ("r0", "r1")] == ["finished", "finished"]
    assert tr.num_slots == 1  # the two others take turns in the one slab that fits


def test_sequences_that_fit_slabs_vs_exact_for_a_70b_on_one_h200():
    from tinyserve.cost.kvfit import sequences_that_fit

    fit = sequences_that_fit("h200-70b-fp8", [1000, 3000], max_len=4096)
    # slabs: 51.25e9 / (4,096 x 327,680 = 1,342,177,280) = 38.2 -> 38; exact: mean 2,000 positions
    # = 655,360,000 bytes -> 78.2 -> 78
    assert (fit.slabs, fit.exact, fit.mean_tokens, fit.bytes_per_token) == (38, 78, 2000.0, H200_BPT)
    assert fit.gain == pytest.approx(78 / 38)
    with pytest.raises(TinyserveError, match="max_len: must be an integer >= the longest length 3000"):
        sequences_that_fit("h200-70b-fp8", [1000, 3000], max_len=2000)
    with pytest.raises(TinyserveError, match="cpu-tiny states no KV memory"):
        sequences_that_fit("cpu-tiny", [10])


def test_the_cli_rejects_what_the_kv_budget_cannot_hold_and_runs_the_rest(tmp_path, capsys):
    from tinyserve.tools.cli import main

    f = tmp_path / "w.jsonl"
    f.write_text('{"id": "small", "prompt_len": 10, "max_new_tokens": 10, "ignore_eos": true}\n'
                 '{"id": "big", "prompt_len": 30, "max_new_tokens": 10, "ignore_eos": true}\n')
    # 20 positions x 327,680 = 6,553,600 bytes: small fits, big (40 positions) does not
    assert main(["run", "--workload", str(f), "--policy", "static", "--dry-run", "--kv-budget", "6553600",
                 "--slab", "longest"]) == 0  # the what-if: each request's own slab (a server's are all 4,096)
    err = capsys.readouterr().err
    assert "rejected request big: needs 13,107,200 bytes of KV" in err and "small" not in err


# ------------------------------------------------------------------------------- 5. loose ends
def test_the_seed_reaches_a_jsonl_files_synthetic_prompts(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text('{"id": "syn", "prompt_len": 40, "max_new_tokens": 2, "ignore_eos": true}\n'
                 '{"id": "txt", "prompt": "def f(x):", "max_new_tokens": 2, "ignore_eos": true}\n')
    eng = Engine()
    prompts = {s: {r.id: r.prompt for r in eng.start(f, "continuous", seed=s, dry_run=True).requests} for s in (0, 0, 7)}
    again = eng.start(f, "continuous", seed=0, dry_run=True).requests
    assert prompts[0]["syn"] != prompts[7]["syn"] and len(prompts[7]["syn"]) == 40
    assert prompts[0]["txt"] == prompts[7]["txt"]  # a written prompt does not depend on the seed
    assert [r.prompt for r in again] == [prompts[0]["syn"], prompts[0]["txt"]]


@pytest.mark.parametrize("hint", [5000, 9, 0, -3])
def test_an_output_len_hint_outside_1_to_max_new_tokens_rejects_that_request_alone(model, hint):
    reqs = [Request("bad", [BOS, 3], 8, ignore_eos=False, output_len_hint=hint),
            Request("ok", [BOS, 4], 8, ignore_eos=False, output_len_hint=3)]
    tr = Engine(model).run(reqs, "continuous", dry_run=True)
    assert tr.request("bad").status == "rejected"
    assert tr.request("bad").finish_reason == f"output_len_hint {hint} must be in 1..max_new_tokens (8)"
    assert tr.request("ok").output_len == 3 and tr.metrics()["kv_used_bytes_peak"] <= tr.metrics()["kv_reserved_bytes_peak"]


def test_a_non_integer_output_len_hint_is_an_error(model):
    with pytest.raises(TinyserveError, match=r"output_len_hint: request 'a' must be an integer .* got 2.5"):
        Engine(model).run([Request("a", [BOS], 4, output_len_hint=2.5)], "continuous", dry_run=True)


def test_a_policy_object_gets_make_policys_checks(model):
    from tinyserve.core.scheduling import ChunkedPrefill, ContinuousBatching, StaticBatching

    reqs = two_requests()
    for policy, match in [(ChunkedPrefill(2, chunk_size=0), r"chunk_size: must be >= 1, got 0"),
                          (ChunkedPrefill(4, 8, max_batch_tokens=2), r"max_batch_tokens: must be >= batch_size \(4\)"),
                          (StaticBatching(0), r"batch_size: must be >= 1"),
                          (StaticBatching(2, timeout=-1.0), r"timeout: must be a finite number"),
                          (ContinuousBatching(2, max_waiting_steps=-4), r"max_waiting_steps: must be an integer >= 0")]:
        with pytest.raises(TinyserveError, match=match):
            Engine(model).start(reqs, policy, dry_run=True)
    with pytest.raises(TinyserveError, match=r"batch_size: set it on the ContinuousBatching object"):
        Engine(model).start(reqs, ContinuousBatching(2), batch_size=4, dry_run=True)


def test_a_policy_object_is_not_silently_taken_from_an_unfinished_run(model):
    from tinyserve.core.scheduling import ContinuousBatching

    eng, policy = Engine(model), ContinuousBatching(2)
    first = eng.start(two_requests(), policy, dry_run=True)
    first.step()
    with pytest.raises(TinyserveError, match=r"policy: this ContinuousBatching object still holds 1 request\(s\)"):
        eng.start(two_requests(), policy, dry_run=True)
    while not first.done:  # the first run is untouched and finishes
        first.step()
    assert [r.output_len for r in first.requests] == [10, 3]
    assert eng.run(two_requests(), policy, dry_run=True).metrics()["num_finished"] == 2  # reusable once done


def test_the_wall_clock_warms_the_model_up_once_before_timing(model, monkeypatch):
    from helpers import greedy_alone

    calls = []
    inner = model.forward_step
    monkeypatch.setattr(model, "forward_step", lambda s, kv: calls.append(kv) or inner(s, kv))
    eng = Engine(model)
    run = eng.start(two_requests(), "continuous", clock="wall")
    assert len(calls) == 2 and all(kv is not run.runner.kv for kv in calls)  # two unmeasured steps on scratch KV
    eng.start(two_requests(), "continuous", clock="wall")
    assert len(calls) == 2  # once per engine
    Engine(model).start(two_requests(), "continuous")
    assert len(calls) == 2  # the modeled clock times nothing: no warm-up
    while not run.done:
        run.step()
    assert all(r.output == greedy_alone(model, r) for r in run.requests)


def test_workload_knobs_reach_the_named_workload_and_are_checked():
    import tinyserve

    eng = Engine()
    tr = eng.run("chapter-7.2-longtail", "continuous", workload_knobs={"n": 5, "rate": 1.0}, seed=3, dry_run=True)
    assert len(tr.requests) == 5
    from tinyserve.core.workloads import get_workload
    assert [r.arrival_s for r in tr.requests] == [r.arrival_s for r in get_workload("chapter-7.2-longtail", 3, n=5,
                                                                                    rate=1.0)]
    with pytest.raises(TinyserveError, match=r"workload chapter-7.2-longtail: rate must be a finite number > 0"):
        tinyserve.run("chapter-7.2-longtail", workload_knobs={"rate": -1.0}, dry_run=True)
    with pytest.raises(TinyserveError, match=r"unknown knob 'speed'"):
        eng.start("chapter-7.2-longtail", workload_knobs={"speed": 2}, dry_run=True)
    with pytest.raises(TinyserveError, match=r"workload_knobs: apply to a named workload only, not to a list"):
        eng.start(two_requests(), workload_knobs={"n": 2}, dry_run=True)
    with pytest.raises(TinyserveError, match=r"seed: must be an integer, got 1.5"):
        eng.start("chapter-7.2-longtail", seed=1.5, dry_run=True)


def test_the_cli_takes_workload_knobs(capsys):
    import json

    from tinyserve.tools.cli import main

    assert main(["run", "--workload", "chapter-7.2-longtail", "--policy", "static", "--dry-run", "--json",
                 "--workload-knob", "n=7", "--workload-knob", "rate=2.5"]) == 0
    assert len(json.loads(capsys.readouterr().out)["requests"]) == 7
    assert main(["run", "--workload", "chapter-7.2-longtail", "--policy", "static", "--dry-run",
                 "--workload-knob", "rate"]) == 2
    assert "--workload-knob must be NAME=VALUE" in capsys.readouterr().err


def test_the_docs_a_user_needs_are_in_the_repository_and_examples_write_under_an_ignored_folder():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in readme  # a user's clone has no such folder
    contract = (root / "docs" / "contract.md").read_text(encoding="utf-8")
    keys = Engine().run(two_requests(), "continuous", dry_run=True).metrics()
    assert [k for k in keys if f"`{k}`" not in contract] == []  # every metric is documented
    assert "prompt_len" in (root / "docs" / "workloads.md").read_text(encoding="utf-8")
    written = re.findall(r"--(?:perfetto|trace) (\S+)|export-hf (\S+)", readme)
    paths = [a or b for a, b in written]
    assert paths and all(p.startswith("out/") for p in paths), paths
    assert "/out/" in (root / ".gitignore").read_text().split()
