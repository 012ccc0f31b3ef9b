"""The committed table of what pages cost the real engine (benchmarks/paged.py, issue 51) and the lessons that cite
it: the table covers the grid and keeps the engine before the change, and 7.4, 7.6 and 7.7, as built in both
editions, say its numbers (glued from it, so a new table fails here until they are rebuilt). No timing is asserted:
the ratios are measurements, taken and kept by the benchmark."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinyserve.analysis.paged_cost import decode_ratios, load_paged_cost

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"


def glued(stem: str, sub: str) -> dict[str, str]:
    """A built notebook's glued values (name -> the text a reader sees), as chapters/build.py keeps them."""
    nb = json.loads((CHAPTERS / sub / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return {k: v["text"] for k, v in nb["metadata"]["tinyserve"]["glue"].items()}


def test_the_table_covers_the_grid_before_and_after_with_the_load():
    table = load_paged_cost()
    for t in (table, table["before"]):
        assert {(r["batch"], r["context"]) for r in t["decode"]} == {(b, c) for b in (1, 16, 64)
                                                                    for c in (256, 1024, 2048)}
        # the ratio is of the unrounded times, kept to 3 decimals; the times are kept to the microsecond, which on a
        # 1.2 ms step moves their quotient by up to ~1e-3 more
        assert all(r["ratio"] == pytest.approx(r["paged_s"] / r["slab_s"], abs=2.5e-3) for r in t["decode"])
        assert "load_start" in t and "load_end" in t and t["threads"] == 1 and t["block_size"] == 16


@pytest.mark.parametrize("sub", ["", "zh-TW"])
def test_the_lessons_say_what_the_table_holds(sub):
    now, before = decode_ratios(load_paged_cost()), decode_ratios(load_paged_cost()["before"])
    g74, g76, g77 = (glued(s, sub) for s in ("7.4-kv-bill", "7.6-appendix-evidence", "7.7-reading-the-engine"))
    assert (g74["paged_step_median"], g74["paged_step_max"]) == (f"{now['median']:.2f}", f"{now['max']:.2f}")
    assert (g74["paged_step_max_batch"], g74["paged_step_max_context"]) == (
        str(now["max_batch"]), f"{now['max_context']:,}")
    for g in (g76, g77):
        assert (g["paged_step_max"], g["paged_step_before"]) == (f"{now['max']:.1f}", f"{before['max']:.0f}")
