"""The committed deployment studies (lib/tinyserve/data/deployments.json, written by benchmarks/deployments.py):
the file holds what analysis/fair.py says it should, one seed of it recomputes exactly from the engine, and every
comparison the lessons glue says what holds on every seed of it (or quotes both ranges)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import tinyserve
from tinyserve.analysis import fair
from tinyserve.analysis.goodput import deployment_label, parse_spec

ROOT = Path(__file__).parents[2]
DATA = fair.load()
RECOMPUTED_SEED = 3  # one seed of five, recomputed in full for the deployments the lessons quote


def test_the_file_holds_every_study_of_the_code_with_its_settings():
    todo = fair.studies()
    assert set(DATA["studies"]) == set(todo)
    assert DATA["pairs"] == {k: list(v) for k, v in fair.PAIRS.items()} and DATA["goal"] == fair.GOAL
    for name, s in DATA["studies"].items():
        spec = todo[name]
        assert s["gpus"] == spec["gpus"] and s["seeds"] == list(fair.SEEDS)
        assert s["workload_knobs"] == spec.get("workload_knobs", {}) and s["run_knobs"] == spec.get("run_knobs", {})
        assert s["rates"] == [r * s["gpus"] for r in fair.RATES_PER_GPU] and s["pairs"] == list(fair.PAIRS)
        for side, specs in spec["specs"].items():
            assert sorted(s["sides"][side]) == sorted(deployment_label(*parse_spec(x)) for x in specs)
            for entry in s["sides"][side].values():
                assert entry["num_gpus"] == s["gpus"] and sorted(entry["met"]) == sorted(map(str, s["seeds"]))


@pytest.mark.slow
def test_one_seed_of_the_file_recomputes_exactly():
    """Each study's best deployments (every pair, both conventions) rerun at one seed: the very same counts."""
    for name, s in DATA["studies"].items():
        quoted = {side: sorted({fair.best(s, side, pair, conv)[0] for pair in s["pairs"] for conv in fair.CONVENTIONS})
                  for side in s["sides"]}
        again = fair.study(quoted, s["gpus"], seeds=(RECOMPUTED_SEED,), rates=s["rates"],
                           workload_knobs=s["workload_knobs"], run_knobs=s["run_knobs"],
                           pairs={p: tuple(DATA["pairs"][p]) for p in s["pairs"]})
        for side, labels in quoted.items():
            for label in labels:
                mine, theirs = again["sides"][side][label], s["sides"][side][label]
                assert mine["met"][str(RECOMPUTED_SEED)] == theirs["met"][str(RECOMPUTED_SEED)], (name, label)


def _glued(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb["metadata"].get("tinyserve", {}).get("glue", {})


@pytest.mark.parametrize("lang,folder", [("en", ROOT / "chapters"), ("zh-TW", ROOT / "chapters" / "zh-TW")])
def test_every_glued_comparison_is_what_the_file_holds_on_every_seed(lang, folder):
    used = 0
    tinyserve.set_language(lang)
    try:
        for path in sorted(folder.glob("7.*.ipynb")):
            for key, value in _glued(path).items():
                if not key.startswith("claim_"):
                    continue
                name = key.removeprefix("claim_")
                assert name in fair.CLAIMS, (path.name, key)
                text = value["text"] if isinstance(value, dict) else value
                assert text == fair.claim_words(DATA, name), (path.name, key)
                c = fair.claim(DATA, name)
                if c["verdict"] == "mixed":  # no direction claimed: both ranges quoted
                    assert fair.number_words(c["split"][1]) in text and fair.number_words(c["replicas"][1]) in text
                used += 1
    finally:
        tinyserve.set_language("en")
    assert used >= 4  # the lessons do compare deployments through the file
