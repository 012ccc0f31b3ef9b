"""Sweeps (lib/tinyserve/analysis/sweeps.py): capacity, the TTFT/TBT ablation, latency CDFs. Dry runs, modeled clock."""
import numpy as np
import pytest

from tinyserve.analysis.sweeps import (CapacityCurve, Setting, ablation_settings, capacity_sweep, capacity_table, cdf_table,
                              cdfs, p99_gap_ms, run, spread_workload, stall_bound_s)
from tinyserve.core.workloads import get_workload
from tinyserve.engine import Engine


def test_capacity_is_the_last_rate_before_the_first_violation():
    # rates 1, 2, 4: gaps 10, 30, 20 ms; median queue 0, 0, 3 s
    c = CapacityCurve("x", [1.0, 2.0, 4.0], [10.0, 30.0, 20.0], [0.0, 0.0, 3.0], top_rate=4.0)
    assert c.capacity(25) == 1.0  # rate 2 breaks 25 ms; rate 4 meeting it again does not count
    assert c.capacity(40) == 2.0  # rate 4 meets 40 ms but its queue (3 s) is past the 2 s rule
    assert c.capacity(40, max_queue_s=5) == 4.0
    assert c.capacity(5) is None


def test_a_target_no_rate_meets_is_said_in_words():
    c = CapacityCurve("chunked T=512", [1.0, 2.0], [73.0, 74.0], [0.0, 0.0], top_rate=2.0)
    text = capacity_table([c], [50, 100])
    assert "none" in text.splitlines()[1]
    assert "chunked T=512 meets no rate under 50 ms: even at the lowest rate tried (1 req/s) its P99 gap is already 73 ms" in text
    assert ">=2 r/s" in text  # 100 ms is met up to the top of the grid: at least 2


def test_capacity_sweep_points_are_the_runs_p99_gaps():
    s = Setting("continuous B=8", "continuous", {"batch_size": 8})
    (curve,) = capacity_sweep([s], rates=(2, 4), targets_ms=(1e9,), n=20)
    for rate, got in zip(curve.rates, curve.p99_gap_ms):
        t = Engine().run(get_workload("chapter-7.2-longtail", n=20, rate=rate), "continuous", batch_size=8,
                         dry_run=True, progress=False)
        gaps = [b - a for r in t.requests for a, b in zip(r.token_times, r.token_times[1:])]
        assert got == pytest.approx(np.percentile(gaps, 99) * 1e3)  # recomputed from token times, not metrics()


def test_capacity_sweep_stops_past_the_loosest_target():
    # a 1 ms target is below any step (the weights alone take ~18 ms to stream): the first rate ends the sweep
    (curve,) = capacity_sweep([Setting("c", "continuous", {"batch_size": 8})], rates=(1, 2, 3), targets_ms=(1,), n=10)
    assert curve.rates == [1.0] and curve.capacity(1) is None


def test_chunked_p99_gap_obeys_the_stall_bound_at_every_rate():
    s = Setting("chunked T=512", "chunked", {"batch_size": 64, "chunk_size": 512, "max_batch_tokens": 512})
    (curve,) = capacity_sweep([s], rates=(2, 8), targets_ms=(1e9,), n=40)
    reqs = get_workload("chapter-7.2-longtail", n=40)  # lengths do not depend on the rate
    bound_ms = stall_bound_s(512, max(r.prompt_len + r.max_new_tokens for r in reqs), batch_size=64) * 1e3
    assert all(g <= bound_ms for g in curve.p99_gap_ms)


def test_bad_targets_are_refused():
    with pytest.raises(ValueError, match="targets_ms"):
        capacity_sweep([], targets_ms=(0,))


def test_ablation_settings_do_what_their_names_say():
    reqs = get_workload("chapter-7.3-long-prompt")
    mixing, chunking, both = (run(reqs, s) for s in ablation_settings(budget=1024, batch_size=32))
    long = next(r for r in reqs if r.id == "long")
    # mixing alone: the 4,000-token prompt runs whole, in one step, beside decodes
    (step,) = [s for s in mixing.steps if any(w.request_id == "long" and w.phase == "prefill" for w in s.works)]
    assert any(w.phase == "decode" for w in step.works) and step.tokens == long.prompt_len + 30
    # chunking alone: no step mixes phases; the prompt is cut into chunks of at most 1,024 tokens
    assert all(len({w.phase for w in s.works}) == 1 for s in chunking.steps)
    assert max(w.tokens for s in chunking.steps for w in s.works) <= 1024
    # both: chunks ride beside decodes, every step within the budget
    assert any({w.phase for w in s.works} == {"prefill", "decode"} for s in both.steps)
    assert max(s.tokens for s in both.steps) <= 1024
    # the in-flight requests' worst gap: a 4,030-token step (mixing) outlasts any <= 1,024-token step (both)
    worst = {n: max(b - a for r in t.requests if r.id != "long" for a, b in zip(r.token_times, r.token_times[1:]))
             for n, t in (("mixing", mixing), ("both", both))}
    assert worst["mixing"] > worst["both"]


def test_spread_zero_gives_every_request_the_median_output():
    reqs = spread_workload(n=30, spread=0.0, output_median=77)
    assert {r.max_new_tokens for r in reqs} == {77}
    wide = spread_workload(n=200, spread=1.5, output_median=77)
    outs = sorted(r.max_new_tokens for r in wide)
    assert outs[0] < 77 < outs[-1] and min(outs) >= 1 and max(outs) <= 1000
    assert [r.arrival_s for r in wide] == sorted(r.arrival_s for r in wide)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1"])
def test_spread_must_be_a_finite_non_negative_number(bad):
    with pytest.raises(ValueError, match="spread"):
        spread_workload(spread=bad)


def test_cdfs_cover_every_finished_request_sorted():
    res = cdfs(loads=(1.0, 3.0), spread=0.5, n=12)
    assert sorted({k[0] for k in res}) == [1.0, 3.0] and len(res) == 6
    for d in res.values():
        for v in d.values():
            assert len(v) == 12 and np.all(np.diff(v) >= 0)
        assert np.all(d["e2e_s"][-1] >= d["ttft_s"][-1])
    assert cdf_table(res).count("\n") == 6


def test_p99_gap_of_a_run_without_gaps_is_zero():
    reqs = get_workload("chapter-7.1-padding", max_new_tokens=1)  # one token each: no inter-token gap
    assert p99_gap_ms(run(reqs, Setting("c", "continuous", {"batch_size": 2}))) == 0.0
