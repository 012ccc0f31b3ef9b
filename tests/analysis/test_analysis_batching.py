"""tinyserve.analysis.batching on runs small enough to work out by hand (dry runs: lengths are fixed).

Two requests arrive together: a (4-token prompt, 2 output tokens) and b (2-token prompt, 5 output tokens).
Static, B=2: step 0 prefills both (b padded by 2) and samples each one's first token; step 1 decodes both (a is
done: 2 tokens); steps 2-4 decode b (tokens 3-5) while a's slot computes wasted decodes. 5 steps.
"""
from __future__ import annotations

import math

import pytest

from tinyserve.analysis import batching as ab
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.engine import Engine

BPT = 327_680  # the H200 preset's bf16 K and V per token


def two() -> list[Request]:
    return [Request("a", [BOS, 65, 65, 65], 2, 0.0, ignore_eos=True),
            Request("b", [BOS, 66], 5, 0.0, ignore_eos=True)]


def run(policy: str, **knobs):
    return Engine().run(two(), policy, dry_run=True, progress=False, **knobs)


@pytest.fixture(scope="module")
def static():
    return run("static", batch_size=2)


def test_static_waste_and_iterations(static):
    assert len(static.steps) == 5
    assert ab.wasted_share(static) == 3 / 8  # decodes: a 1 + b 4 useful, a 3 wasted
    assert list(ab.iterations_computed(static, ["a", "b"])) == [5, 5]
    assert list(ab.steps_until_done(static, ["a", "b"])) == [2, 5]
    assert list(ab.group_longest_output(static)) == [5, 5]


def test_padded_prefill_counts_only_its_own_tokens_as_useful(static):
    # step 0: a's 4 tokens are all its own (1 slot), b computed 2 own + 2 padding (half a slot)
    assert list(ab.useful_slots_per_step(static)) == [1.5, 2.0, 1.0, 1.0, 1.0]


def test_latencies_are_finish_or_first_token_minus_arrival(static):
    ends = [s.start_s + s.duration_s for s in static.steps]
    assert list(ab.e2e_s(static, ["a", "b"])) == pytest.approx([ends[1], ends[4]], rel=1e-12)  # arrival 0
    assert list(ab.ttft_s(static)) == pytest.approx([ends[0], ends[0]], rel=1e-12)


def test_slot_changes_hands_between_steps():
    one = run("continuous", batch_size=1)  # a: steps 0-1; b: prefill at step 2, decodes 3-6
    assert len(one.steps) == 7
    assert ab.slot_changes(one, 0) == [(0, None, "a")]
    assert ab.slot_changes(one, 1) == []
    assert ab.slot_changes(one, 2) == [(0, "a", "b")]
    with pytest.raises(IndexError):
        ab.slot_changes(one, 7)
    # queue: a waits 0, b waits until step 2 starts; the median of two waits is their mean
    assert ab.queue_wait_s(one) == one.steps[2].start_s / 2


def test_kv_helpers_under_the_what_if_slab():
    tr = run("continuous", batch_size=2, slab="longest")  # slab = b's 2 + 5 = 7 positions
    assert ab.kv_bytes_per_position(tr) == BPT
    # held positions after each step: 4 + 2, then +1 each (a leaves after step 1), then b alone: 3, 4, 5, 6
    held = [6, 8, 4, 5, 6]
    assert [s.kv_used_bytes for s in tr.steps] == [BPT * h for h in held]
    d = [s.duration_s for s in tr.steps]
    want = sum(h * x for h, x in zip(held, d)) / sum(14 * x for x in d)
    assert ab.kv_used_share(tr) == pytest.approx(want, rel=1e-12)


def test_paged_positions_round_up_to_whole_blocks():
    assert ab.paged_positions([1, 16, 17], 16) == 64  # 1 + 1 + 2 blocks
    assert ab.paged_positions([], 16) == 0


def test_decode_capacity_of_the_h200_preset(static):
    # mean context = mean(4 + 2/2, 2 + 5/2) = 4.75 -> 5 keys; step = 2 ms + 70.55e9 B / 3.84e12 B/s (18.373 ms)
    # + KV reads 2 x 5 x 327,680 B and writes 2 x 327,680 B at 3.84e12 B/s (~1 us) = 20.374 ms for 2 tokens
    assert ab.decode_capacity_tok_s(static) == pytest.approx(2 / 0.020374, rel=1e-3)
    assert ab.capacity_share(static) == pytest.approx(
        static.metrics()["output_throughput"] / (2 / 0.020374), rel=1e-3)
    assert math.isfinite(ab.decode_capacity_tok_s(static, batch=32))


def test_decode_capacity_needs_a_modeled_trace(static):
    static.clock = "wall"
    try:
        with pytest.raises(ValueError, match="modeled-clock"):
            ab.decode_capacity_tok_s(static)
    finally:
        static.clock = "modeled"


def test_module_is_torch_free():
    import subprocess
    import sys

    code = "import sys, tinyserve.analysis.batching; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_block_pool_per_step_worked_out_by_hand():
    # continuous, B=2, blocks of 4. Step 0 prefills a (4 positions: 1 block, full) and b (2: 1 block, 2 empty);
    # step 1 decodes both: a holds 5 (2 blocks, 3 empty), b 3 (1 block, 1 empty), then a is done and gives its
    # blocks back; steps 2-4 decode b alone: 4, 5, 6 positions (1, 2, 2 blocks; 0, 3, 2 empty).
    tr = run("continuous", batch_size=2, kv_layout="paged", block_size=4)
    used, free, waste = ab.block_columns(tr)
    assert used.tolist() == [2, 3, 1, 2, 2] and waste.tolist() == [2, 4, 0, 3, 2]
    assert (used + free).tolist() == [tr.num_blocks] * 5
    d = tr.step_arrays().duration_s
    assert ab.block_waste_share(tr) == pytest.approx((d @ [2, 4, 0, 3, 2]) / (4 * (d @ [2, 3, 1, 2, 2])), rel=1e-12)
    assert ab.table_entries_per_sequence(tr) == pytest.approx((d @ [2, 3, 1, 2, 2]) / (d @ [2, 2, 1, 1, 1]),
                                                              rel=1e-12)
    ones = run("continuous", batch_size=2, kv_layout="paged", block_size=1)
    assert ab.block_waste_share(ones) == 0.0  # a block of one position is never partly filled


def test_the_layout_summary_of_slabs_and_pages():
    pages = ab.layout_summary(run("continuous", batch_size=2, kv_layout="paged", block_size=4))
    slabs = ab.layout_summary(run("continuous", batch_size=2))
    assert pages["peak"] == slabs["peak"] == 2 and pages["preemptions"] == slabs["preemptions"] == 0
    # slabs hold 2 x 4,096 positions from step 0; pages at most 3 blocks of 4 (step 1); both used at most 5 + 3
    assert slabs["held_gb"] == pytest.approx(2 * 4096 * BPT / 1e9)
    assert pages["held_gb"] == pytest.approx(3 * 4 * BPT / 1e9)
    assert pages["used_gb"] == slabs["used_gb"] == pytest.approx(8 * BPT / 1e9)
    assert pages["tok_s"] == pytest.approx(slabs["tok_s"], rel=1e-3)  # the same schedule, priced alike
