"""What pages cost the real engine: paged steps and runs against slab ones, measured in one process (issue 51).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/paged.py                 # the decode grid (~1 min), printed
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/paged.py --runs --points # + whole runs, other paged points (~5 min)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/paged.py --runs --points --write    # the committed table
    PYTHONPATH=/tmp/old/lib ... benchmarks/paged.py --json before.json     # the same on an older tree
    ... --write --before before.json                                        # kept beside it as "before"

Decode steps at the grid of issue 51 (batch 1, 16, 64 x context 256, 1,024, 2,048), blocks of 16 against slabs,
timed as the calibration times its points (tools/calibrate._time_steps: the thread's CPU time on one thread, warm,
the fastest of its repeats, a fresh KV cache per point), slab and paged alternating, the fastest of --rounds rounds
each. --points: the calibration's other paged points (prefills, chunks, ragged and mixed steps) the same way.
--runs: the validation's chapter workloads (tools/validate.SCALED) under continuous and chunked batching, each run
with slabs and then pages (validate.measure), the fastest of --rounds repeats of each step summed. Every figure is a
ratio of two times taken side by side; the load average is recorded with them, since other processes on a 2-core
machine move both times far more than noise.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
from pathlib import Path

import torch

from tinyserve.analysis.paged_cost import TABLE_FILE as TABLE
from tinyserve.core.request import decode_works
from tinyserve.model.runner import load_model
from tinyserve.tools import validate
from tinyserve.tools.calibrate import FULL_PLAN, SLABS, PagedPoint, _points, _time_steps

BATCHES, CONTEXTS, BLOCK_SIZE = (1, 16, 64), (256, 1024, 2048), 16


def side_by_side(model, works, rounds: int) -> tuple[float, float]:
    """(slab s, paged s) of one step's works: each the fastest of rounds, slab and paged alternating."""
    slab = paged = float("inf")
    for _ in range(rounds):
        s, p = _time_steps(model, [(works, SLABS), (works, PagedPoint(BLOCK_SIZE))], 3)
        slab, paged = min(slab, s), min(paged, p)
    return slab, paged


def row(label: str, slab: float, paged: float, **more) -> dict:
    """One table row: both times (s) and their ratio."""
    return {"label": label, **more, "slab_s": round(slab, 6), "paged_s": round(paged, 6),
            "ratio": round(paged / slab, 3)}


def decode_grid(model, rounds: int, log) -> list[dict]:
    """Paged against slab decode steps at the grid's points."""
    out = []
    for b in BATCHES:
        for c in CONTEXTS:
            out.append(row(f"decode B={b} ctx={c}", *side_by_side(model, decode_works([c] * b), rounds),
                           batch=b, context=c))
            log(f"{out[-1]['label']}: x{out[-1]['ratio']:.2f}")
    return out


def other_points(model, rounds: int, log) -> list[dict]:
    """The calibration's paged points that are not plain decodes: prefills, chunks, ragged and mixed steps."""
    out = []
    for label, works in _points(FULL_PLAN["paged"], model.config.n_positions):
        if not label.startswith("decode B="):
            out.append(row(label, *side_by_side(model, works, rounds)))
            log(f"{label}: x{out[-1]['ratio']:.2f}")
    return out


def whole_runs(model, rounds: int, log) -> list[dict]:
    """Each validation workload's run with pages against the same with slabs (continuous and chunked)."""
    pols = validate.PAGED_POLICIES
    reps = [validate.measure(model, "cpu-tiny", policies=pols, paged_policies=pols, repeat=r) for r in range(rounds)]
    rows = {(r["workload"], r["policy"], r["kv_layout"]): r["measured_s"] for r in validate.compare(reps, "cpu-tiny")}
    out = [row(f"{wl} {pol}", rows[wl, pol, "slab"], rows[wl, pol, "paged"], workload=wl, policy=pol)
           for wl, pol, layout in rows if layout == "slab"]
    for r in out:
        log(f"{r['label']}: x{r['ratio']:.2f}")
    return out


def summary(rows: list[dict]) -> dict:
    """Median and largest ratio of rows."""
    return {"median": round(statistics.median(r["ratio"] for r in rows), 3), "max": max(r["ratio"] for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", action="store_true", help="also the validation's whole runs, paged against slabs")
    ap.add_argument("--points", action="store_true", help="also the calibration's other paged points")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", help="write the table to this file")
    ap.add_argument("--write", action="store_true", help=f"write the table to {TABLE.relative_to(TABLE.parents[3])}")
    ap.add_argument("--before", help="a table this script wrote on an older tree, kept in the written one as before")
    a = ap.parse_args()
    torch.set_num_threads(1)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    model = load_model(device=a.device, dtype="float32")
    table = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
             "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu", "threads": 1,
             "block_size": BLOCK_SIZE, "load_start": round(os.getloadavg()[0], 2)}
    table["decode"] = decode_grid(model, a.rounds, log)
    table["decode_summary"] = summary(table["decode"])
    if a.points:
        table["points"] = other_points(model, a.rounds, log)
    if a.runs:
        table["runs"] = whole_runs(model, a.rounds, log)
        table["runs_summary"] = summary(table["runs"])
    table["load_end"] = round(os.getloadavg()[0], 2)
    if a.before:
        table["before"] = json.loads(Path(a.before).read_text())
    print(format_table(table))
    for path in [p for p in (a.json, a.write and TABLE) if p]:
        Path(path).write_text(json.dumps(table, indent=1) + "\n")
        log(f"wrote {path}")


def format_table(table: dict) -> str:
    """The decode grid as markdown (paged / slab per batch and context), then the other rows' ratios."""
    by = {(r["batch"], r["context"]): r for r in table["decode"]}
    lines = [f"load {table['load_start']} -> {table['load_end']}",
             "| batch | " + " | ".join(f"context {c:,}" for c in CONTEXTS) + " |", "|---" * (len(CONTEXTS) + 1) + "|"]
    for b in BATCHES:
        cells = [f"{by[b, c]['ratio']:.2f}x ({by[b, c]['paged_s'] * 1e3:.1f} / {by[b, c]['slab_s'] * 1e3:.1f} ms)"
                 for c in CONTEXTS]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines.append(f"decode: median {table['decode_summary']['median']:.2f}x, max {table['decode_summary']['max']:.2f}x")
    for key in ("points", "runs"):
        for r in table.get(key, []):
            lines.append(f"{r['label']}: {r['ratio']:.2f}x ({r['paged_s'] * 1e3:.1f} / {r['slab_s'] * 1e3:.1f} ms)")
    if "runs_summary" in table:
        lines.append(f"runs: median {table['runs_summary']['median']:.2f}x, max {table['runs_summary']['max']:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
