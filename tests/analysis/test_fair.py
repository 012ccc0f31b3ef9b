"""analysis/fair.py: the fair search's grid, and reading a study (goodput per seed, each side's best, what holds on
every seed) on hand-made studies whose answers are worked out in the comments."""
from __future__ import annotations

import pytest

from tinyserve.analysis import fair
from tinyserve.analysis.goodput import parse_spec


@pytest.mark.parametrize("gpus", [2, 3, 4])
def test_every_candidate_uses_exactly_the_gpus_and_both_sides_search_the_same_chunks_and_batches(gpus):
    c = fair.candidates(gpus)
    for side, specs in c.items():
        for spec in specs:
            dc, own = parse_spec(spec)
            n = dc.replicas if dc.kind == "colocated" else dc.prefill_instances + dc.decode_instances
            assert n == gpus and "gpus" not in own and dc.prefill_gpus is None and dc.decode_gpus is None
    shapes = {parse_spec(s)[0].prefill_instances for s in c["split"]}
    assert shapes == set(range(1, gpus))  # every P:D with P + D = gpus
    chunks = {str(parse_spec(s)[0].prefill_chunk_size) for s in c["split"]}
    own = {str(parse_spec(s)[1].get("chunk_size") or "none") for s in c["replicas"]}
    assert chunks == own == {str(x) for x in fair.CHUNKS}  # the same grid, whole prompts included
    split_batches = {parse_spec(s)[0].decode_batch_size for s in c["split"]}
    replica_batches = {parse_spec(s)[1]["batch_size"] for s in c["replicas"]}
    assert split_batches == replica_batches and len(split_batches) >= 2  # both sides search the batch, alike
    assert len(c["split"]) == (gpus - 1) * len(fair.CHUNKS) * len(split_batches)


def _instances(spec: str, run_knobs: dict | None = None) -> list[tuple]:
    """What each instance of a deployment runs with, as the run reports it: (role, slots, its policy's knobs)."""
    dt, _ = fair.run_one(spec, 0, 1.0, {"n": 3}, run_knobs)
    return [(role, tr.num_slots, tuple(sorted(tr.knobs.items()))) for role, tr in zip(dt.roles, dt.instances)]


@pytest.mark.parametrize("study", ["fair-2", "scarce-2", "tp-4"])
def test_no_two_candidates_run_the_same_and_each_runs_the_batch_its_label_says(study):
    """Memory caps a batch at the slabs it holds (38 on h200-70b-fp8, 8 in the scarce study): a candidate asking for
    more would run what a smaller one runs. Each candidate's label is what its run reports, and no two alike."""
    s = fair.studies()[study]
    seen = {}
    for side, specs in s["specs"].items():
        for spec in specs:
            dc, own = parse_spec(spec)
            runs = _instances(spec, s.get("run_knobs"))
            asked = own.get("batch_size") if dc.kind == "colocated" else dc.decode_batch_size
            slots = [n for role, n, _ in runs if role in ("replica", "decode")]
            assert slots and all(n == asked for n in slots), (spec, runs)
            assert tuple(runs) not in seen, (spec, seen.get(tuple(runs)))
            seen[tuple(runs)] = spec


def test_the_scarce_study_searches_the_one_batch_its_memory_holds():
    few = fair.studies()["scarce-2"]["run_knobs"]
    assert fair.memory_slots(1, few) == 8 and fair.batches(1, few) == [8]
    assert fair.memory_slots(1) < max(fair.BATCHES)  # on the plain preset memory caps the largest batch too
    assert fair.batches(1) == sorted({min(b, fair.memory_slots(1)) for b in fair.BATCHES})


def _study(curves: dict) -> dict:
    """A study of 2 GPUs, rates 2, 4, 6, 8 (1-4 per GPU), 10 requests a run: curves {(side, label): {seed: [met
    both at each rate run]}} (a curve may stop early, as sweep_one stops past saturation); the TTFT-only and
    TPOT-only counts are 10 (everyone meets each alone); a saturation of 20 req/s."""
    s = {"gpus": 2, "seeds": [0, 1], "rates": [2.0, 4.0, 6.0, 8.0], "pairs": list(fair.PAIRS), "sides": {}}
    for (side, label), per_seed in curves.items():
        met = {str(seed): [[[[m, 10, 10] for _ in fair.CONVENTIONS] for _ in fair.PAIRS] for m in ms]
               for seed, ms in per_seed.items()}
        s["sides"].setdefault(side, {})[label] = {
            "num_gpus": 2, "requests": {str(seed): [10] * len(ms) for seed, ms in per_seed.items()}, "met": met,
            "saturation": {str(seed): {"rps": 20.0} for seed in per_seed}}
    return s


def test_goodput_per_seed_is_read_off_each_curve_and_per_gpu():
    s = _study({("split", "a"): {0: [10, 10, 8, 5], 1: [10, 9, 9, 9]},
                ("replicas", "b"): {0: [8, 7, 6, 5], 1: [10, 10, 10, 10]}})
    g = fair.goodput(s, "split", "a", "paper")
    # seed 0: 100% at 4, 80% at 6: crosses 90% (1.0 - 0.9) / (1.0 - 0.8) = half way: 5 req/s, 2.5 per GPU
    # seed 1: every rate meets 90%: at least 8 req/s, 4 per GPU
    assert g["per_seed"][0]["value"] == pytest.approx(2.5) and g["per_seed"][0]["read"] == "crossing"
    assert g["per_seed"][1]["value"] == 4.0 and g["per_seed"][1]["read"] == "at_least"
    assert g["median"] == pytest.approx(2.5) and g["min"] == pytest.approx(2.5) and g["max"] == 4.0  # lower middle
    b = fair.goodput(s, "replicas", "b", "paper")
    assert b["per_seed"][0]["value"] is None and b["per_seed"][0]["read"] == "below"  # 80% at the lowest rate
    assert b["min"] is None and b["max"] == 4.0
    assert fair.curve(s, "split", "a", 0, "paper", "decode", "ttft") == [1.0] * 4
    assert g["per_seed"][0]["saturation"] == 10.0  # 20 req/s for 2 GPUs


def test_a_curve_that_stopped_past_saturation_is_read_over_the_rates_it_ran():
    # seed 0 ran 2 and 4 only: 100% then 50%: crossing at 2 + 2 * 0.1 / 0.5 = 2.4 req/s, 1.2 per GPU
    s = _study({("split", "a"): {0: [10, 5], 1: [10, 10, 10, 10]}})
    g = fair.goodput(s, "split", "a", "paper")
    assert g["per_seed"][0]["value"] == pytest.approx(1.2) and g["per_seed"][0]["read"] == "crossing"
    assert fair.curve(s, "split", "a", 0, "paper") == [1.0, 0.5]


def test_a_side_wins_only_where_it_wins_on_every_seed():
    # a: 2.5 per GPU on seed 0 (as above), at least 4 on seed 1
    s = _study({("split", "a"): {0: [10, 10, 8, 5], 1: [10, 10, 10, 10]},
                ("replicas", "b"): {0: [10, 10, 9, 5], 1: [10, 10, 10, 8]}})
    c = fair.compare(s, "paper")
    # b seed 0: 90% at 6 is not below the goal; 50% at 8: crossing between 6 and 8 at 6 + 2 * 0 / 0.4 = 6 -> 3 per GPU
    # b seed 1: 100% at 6, 80% at 8: 6 + 2 * 0.1 / 0.2 = 7 -> 3.5 per GPU
    assert c["replicas"][1]["per_seed"][0]["value"] == pytest.approx(3.0)
    assert c["replicas"][1]["per_seed"][1]["value"] == pytest.approx(3.5)
    assert c["verdict"] == "mixed"  # a behind on seed 0 (2.5 < 3), ahead on seed 1 (4 > 3.5)
    s2 = _study({("split", "a"): {0: [10, 10, 10, 10], 1: [10, 10, 10, 10]},
                 ("replicas", "b"): {0: [10, 10, 9, 5], 1: [10, 10, 10, 8]}})
    assert fair.compare(s2, "paper")["verdict"] == "ahead"
    assert fair.compare(s2, "paper", a="replicas", b="split")["verdict"] == "behind"


def test_a_sides_best_is_its_highest_median():
    s = _study({("split", "low"): {0: [10, 10, 8, 5], 1: [10, 10, 8, 5]},
                ("split", "high"): {0: [10, 10, 10, 5], 1: [10, 10, 10, 5]},
                ("replicas", "b"): {0: [10, 10, 10, 10], 1: [10, 10, 10, 10]}})
    label, g = fair.best(s, "split", "paper")
    # high: 100% at 6, 50% at 8: crossing at 6 + 2 * (1.0 - 0.9) / (1.0 - 0.5) = 6.4 req/s, 3.2 per GPU; low: 2.5
    assert label == "high" and g["median"] == pytest.approx(3.2)


def test_best_of_a_goodput_table_picks_each_sides_highest():
    rows = [{"deployment": "colocated:2,chunk_size=128", "kind": "colocated", "goodput_per_gpu": 3.0},
            {"deployment": "colocated:2,chunk_size=none", "kind": "colocated", "goodput_per_gpu": None},
            {"deployment": "disaggregated:1:1", "kind": "disaggregated", "goodput_per_gpu": 2.0}]
    best = fair.best_of(rows)
    assert best["replicas"]["deployment"] == "colocated:2,chunk_size=128"
    assert best["split"]["deployment"] == "disaggregated:1:1"


def _with_doubled(s: dict, curves: dict) -> dict:
    """s with a doubled block (the same layout, runs twice as long: 20 requests a run) holding `curves` (as _study's,
    met counts out of 20)."""
    twice = _study(curves)
    for side in twice["sides"].values():
        for e in side.values():
            e["requests"] = {seed: [20] * len(n) for seed, n in e["requests"].items()}
            for runs in e["met"].values():
                for per_pair in runs:
                    for per_conv in per_pair:
                        for m in per_conv:
                            m[1] = m[2] = 20
    return {**s, "doubled": {**twice, "scale": 2}}


def test_a_reading_that_runs_twice_as_long_move_is_said_to_be_unsettled():
    # runs of 10: seed 0 crosses at 2.5 per GPU, seed 1 at least 4 (as above): median 2.5, range 2.5 to 4
    once = {("split", "a"): {0: [10, 10, 8, 5], 1: [10, 10, 10, 10]}}
    # twice as long, seed 0: 100% at 2, 85% at 4: 2 + 2 * 0.1 / 0.15 = 3.33 req/s, 1.67 per GPU: the median moves a
    # third, so the reading is unsettled and its words carry the second median
    s = _with_doubled(_study(once), {("split", "a"): {0: [20, 17, 16, 10], 1: [20, 20, 20, 20]}})
    g = fair.goodput(s, "split", "a", "paper")
    assert g["median"] == pytest.approx(2.5) and g["doubled"]["median"] == pytest.approx(5 / 3)
    assert g["settled"] is False
    words = fair.number_words(g)
    assert words == "2.5 (seeds: 2.5 to ≥ 4; unsettled: on runs twice as long, 1.67, seeds 1.67 to ≥ 4)"
    # twice as long, seed 0: 100% at 4, 82.5% at 6: 4 + 2 * 0.1 / 0.175 = 5.14 req/s, 2.57 per GPU, 3% from 2.5;
    # seed 1 still at least 4: every reading within a tenth, settled, and said as before
    s = _with_doubled(_study(once), {("split", "a"): {0: [20, 20, 16.5, 10], 1: [20, 20, 20, 20]}})
    g = fair.goodput(s, "split", "a", "paper")
    assert g["settled"] is True and fair.number_words(g) == "2.5 (seeds: 2.5 to ≥ 4)"
    assert "doubled" not in fair.goodput(_study(once), "split", "a", "paper")  # a deployment the lessons do not quote


def test_a_side_wins_only_where_it_wins_on_every_seed_with_runs_twice_as_long_too():
    # a ahead on both seeds with runs of 10 (at least 4 against 3 and 3.5, as above); twice as long, a's seed 0 falls
    # to 2 + 2 * 0.1 / 0.2 = 3 req/s, 1.5 per GPU, behind b's 3: no longer ahead on every seed
    curves = {("split", "a"): {0: [10, 10, 10, 10], 1: [10, 10, 10, 10]},
              ("replicas", "b"): {0: [10, 10, 9, 5], 1: [10, 10, 10, 8]}}
    assert fair.compare(_study(curves), "paper")["verdict"] == "ahead"
    twice = {("split", "a"): {0: [20, 16, 16, 16], 1: [20, 20, 20, 20]},
             ("replicas", "b"): {0: [20, 20, 18, 10], 1: [20, 20, 20, 16]}}
    assert fair.compare(_with_doubled(_study(curves), twice), "paper")["verdict"] == "mixed"
    held = {**twice, ("split", "a"): {0: [20] * 4, 1: [20] * 4}}  # a still at least 4 on both: ahead at both lengths
    assert fair.compare(_with_doubled(_study(curves), held), "paper")["verdict"] == "ahead"
