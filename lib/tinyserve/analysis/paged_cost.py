"""What pages cost the real engine on this CPU, for the lessons that cite it (7.4, 7.6, 7.7): the committed table
benchmarks/paged.py writes (issue 51), read here so that their numbers are the benchmark's, not typed.

The table holds paged decode steps against slab ones at a grid of batch sizes and contexts, each a ratio of two
times measured side by side in one process, with the machine's load; "before" is the same benchmark on the engine
that copied each call's K/V into a fresh tensor.
"""
from __future__ import annotations

import json
from pathlib import Path

TABLE_FILE = Path(__file__).parents[1] / "data" / "paged-cost.json"


def load_paged_cost(path: Path = TABLE_FILE) -> dict:
    """The committed table (benchmarks/paged.py --write)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def decode_ratios(table: dict) -> dict:
    """Paged over slab decode step times at the grid: median, max, and the (batch, context) of the max."""
    rows = sorted(table["decode"], key=lambda r: r["ratio"])
    worst = rows[-1]
    mid = len(rows) // 2
    median = rows[mid]["ratio"] if len(rows) % 2 else (rows[mid - 1]["ratio"] + rows[mid]["ratio"]) / 2
    return {"median": median, "max": worst["ratio"], "max_batch": worst["batch"], "max_context": worst["context"]}
