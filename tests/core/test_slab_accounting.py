"""KV slabs as a slab server accounts them: every slot reserves the maximum length when the server starts.

Expected bytes are worked out by hand from the H200 preset: 327,680 bytes of bf16 K and V per token
(2 x 80 layers x 8 KV heads x 128 x 2 bytes), a maximum length of 4,096 positions, 51.25e9 bytes of KV memory.
"""
from __future__ import annotations

import json

import pytest

from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.cost.presets import get_preset
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError

BPT = 327_680
SLAB_4096 = 1_342_177_280  # 4,096 x 327,680


def requests(n: int, prompt: int = 4, out: int = 6, spread: float = 0.0) -> list[Request]:
    return [Request(f"r{i}", [BOS] + [65] * (prompt - 1), out, i * spread, ignore_eos=True) for i in range(n)]


def test_the_preset_states_the_maximum_length():
    assert get_preset("h200-70b-fp8").max_model_len == 4096
    assert get_preset("4xh100-70b-bf16").max_model_len == 4096


def test_every_slot_reserves_a_max_length_slab_from_step_0():
    # 3 requests arrive 1 s apart into 4 slots: at step 0 one slot is busy, yet all 4 slabs are reserved
    tr = Engine().run(requests(3, spread=1.0), "continuous", batch_size=4, dry_run=True, progress=False)
    assert tr.num_slots == 4 and tr.slab_tokens == 4096 and tr.slab_bytes == SLAB_4096
    assert len(tr.steps[0].works) == 1
    assert tr.steps[0].kv_reserved_bytes == 5_368_709_120  # 4 x 1,342,177,280
    assert {s.kv_reserved_bytes for s in tr.steps} == {5_368_709_120}
    assert tr.steps[0].kv_used_bytes == 4 * BPT  # the one prompt's 4 positions
    assert tr.slab_rule.startswith("max_model_len: the preset h200-70b-fp8")
    assert tr.metrics()["kv_reserved_bytes_peak"] == 5_368_709_120


def test_max_length_slabs_cap_the_slots_by_the_preset_memory():
    # 51,250,000,000 // 1,342,177,280 = 38 slabs, whatever the batch size asks for
    tr = Engine().run(requests(2), "continuous", batch_size=64, dry_run=True, progress=False)
    assert tr.num_slots == 38 and tr.steps[0].kv_reserved_bytes == 38 * SLAB_4096


def test_the_runs_longest_is_a_named_what_if():
    tr = Engine().run(requests(3), "continuous", batch_size=3, dry_run=True, progress=False, slab="longest")
    assert tr.slab_tokens == 10 and tr.steps[0].kv_reserved_bytes == 9_830_400  # 3 x 10 x 327,680
    assert tr.slab_rule.startswith("longest") and "what-if" in tr.slab_rule
    kv = json.loads(json.dumps(tr.summary()))["kv"]
    assert kv["slab_rule"] == tr.slab_rule and kv["slab_tokens"] == 10 and kv["tensor_positions"] is None


def test_a_given_max_model_len_sizes_the_slab():
    tr = Engine().run(requests(2), "static", batch_size=2, dry_run=True, progress=False, max_model_len=100)
    assert tr.slab_rule == "max_model_len: given to the run"
    assert tr.steps[0].kv_reserved_bytes == 65_536_000  # 2 x 100 x 327,680


def test_a_budget_below_one_max_length_slab_rejects_with_the_reason():
    tr = Engine().run(requests(2), "continuous", batch_size=2, dry_run=True, progress=False, kv_budget=SLAB_4096 - 1)
    assert [r.status for r in tr.requests] == ["rejected", "rejected"]
    assert "1,342,177,280 bytes of KV (4096 positions" in tr.requests[0].finish_reason


def test_the_real_models_tensors_keep_the_runs_longest(random_model):
    # the modeled bytes speak for the 70B server (maximum length: 4,096 capped by this model's 512 positions);
    # the tiny GPT's own tensors stay sized to the run's longest (Binder's memory)
    run = Engine(random_model).start(requests(2), "continuous", batch_size=2)
    assert run.trace().slab_tokens == 512 and run.kv_tensor_positions == 10
    assert run.trace().kv_tensor_positions == 10


def test_an_unknown_slab_rule_is_one_clear_error():
    with pytest.raises(TinyserveError, match="slab: must be one of max_model_len, longest, got 'huge'"):
        Engine().run(requests(1), "continuous", batch_size=1, dry_run=True, slab="huge")


def test_a_saved_trace_keeps_what_sized_its_slabs_and_its_workload_knobs(tmp_path):
    from tinyserve.trace.record import Trace

    tr = Engine().run("chapter-7.1-finisher", "continuous", batch_size=4, dry_run=True, progress=False,
                      slab="longest", workload_knobs={"n": 3, "long_output": 5})
    tr.save(tmp_path / "t.json")
    back = Trace.load(tmp_path / "t.json")
    assert (back.slab_rule, back.slab_tokens, back.kv_tensor_positions) == (tr.slab_rule, tr.slab_tokens, None)
    assert back.workload_knobs == {"n": 3, "long_output": 5}
    assert back.workload_label() == "chapter-7.1-finisher (n=3, long_output=5)"
