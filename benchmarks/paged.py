"""What pages cost the real engine: paged steps and runs against slab ones, measured in one process (issue 51).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/paged.py                 # the decode grid (~1 min), printed
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/paged.py --runs --points # + whole runs, other paged points (~5 min)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/paged.py --runs --points --write    # the committed table
    PYTHONPATH=/tmp/old/lib ... benchmarks/paged.py --json before.json     # the same on an older tree
    ... --write --before before.json                                        # kept beside it as "before"
    ... benchmarks/paged.py --points --against /tmp/old   # + an older tree's paged steps, in this same process

Decode steps at the grid of issue 51 (batch 1, 16, 64 x context 256, 1,024, 2,048), blocks of 16 against slabs,
timed as the calibration times its points (tools/calibrate._time_steps: the thread's CPU time on one thread, warm,
the fastest of its repeats, a fresh KV cache per point), slab and paged alternating, the fastest of --rounds rounds
each. --points: the calibration's other paged points (prefills, chunks, ragged and mixed steps) the same way.
--against TREE: an older tree's engine too (imported beside today's as `tinyserve_before`: the package's imports
are relative), its paged step timed in the same rounds, alternating with today's slab and paged steps; each row
gains before_s and to_before (today's paged / the older tree's paged), the issue's "ratio to today's" for prefill
and mixed steps. It needs only the older tree's tools/calibrate (SLABS, PagedPoint, _time_steps) and its model.
--runs: the validation's chapter workloads (tools/validate.SCALED) under continuous and chunked batching, each run
with slabs and then pages (validate.measure), the fastest of --rounds repeats of each step summed. Every figure is a
ratio of two times taken side by side; the load average is recorded with them, since other processes on a 2-core
machine move both times far more than noise.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import os
import platform
import statistics
import sys
from pathlib import Path

import torch

from tinyserve.core.request import decode_works
from tinyserve.model.runner import load_model
from tinyserve.tools import validate
from tinyserve.tools.calibrate import FULL_PLAN, SLABS, PagedPoint, _points, _time_steps

try:  # the committed table's path; an older tree run under this script (its --json) may predate it
    from tinyserve.analysis.paged_cost import TABLE_FILE as TABLE
except ImportError:
    TABLE = None

BATCHES, CONTEXTS, BLOCK_SIZE = (1, 16, 64), (256, 1024, 2048), 16


class Before:
    """An older tree's engine beside today's in this process: its tinyserve imported as tinyserve_before (every
    import inside the package is relative, so its modules are its own), its model and its paged calibration point."""

    def __init__(self, tree: str, device: str):
        lib = Path(tree) / "lib" if (Path(tree) / "lib" / "tinyserve").is_dir() else Path(tree)
        spec = importlib.util.spec_from_file_location("tinyserve_before", lib / "tinyserve" / "__init__.py",
                                                      submodule_search_locations=[str(lib / "tinyserve")])
        if spec is None or not (lib / "tinyserve" / "__init__.py").is_file():
            raise SystemExit(f"{tree}: no lib/tinyserve there")
        sys.modules["tinyserve_before"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cal = importlib.import_module("tinyserve_before.tools.calibrate")
        self.time_steps, self.paged_point = cal._time_steps, cal.PagedPoint(BLOCK_SIZE)
        self.work = importlib.import_module("tinyserve_before.core.request").Work
        self.model = importlib.import_module("tinyserve_before.model.checkpoint").load_model(device=device,
                                                                                              dtype="float32")
        self.tree = str(tree)

    def paged(self, works) -> float:
        """One round of works' paged step on the older tree (the same works, as its own Work records)."""
        old = [self.work(w.slot, None, w.phase, w.start, w.tokens, padding=w.padding) for w in works]
        return self.time_steps(self.model, [(old, self.paged_point)], 3)[0]


def side_by_side(model, works, rounds: int, before: Before | None = None) -> tuple[float, ...]:
    """(slab s, paged s[, the older tree's paged s]) of one step's works: each the fastest of rounds, slab, paged
    (and the older tree's paged) alternating."""
    best = [float("inf")] * (2 if before is None else 3)
    for _ in range(rounds):
        got = _time_steps(model, [(works, SLABS), (works, PagedPoint(BLOCK_SIZE))], 3)
        if before is not None:
            got.append(before.paged(works))
        best = [min(b, g) for b, g in zip(best, got)]
    return tuple(best)


def row(label: str, slab: float, paged: float, before: float | None = None, **more) -> dict:
    """One table row: both times (s) and their ratio (and the older tree's paged time, today's paged over it)."""
    out = {"label": label, **more, "slab_s": round(slab, 6), "paged_s": round(paged, 6),
           "ratio": round(paged / slab, 3)}
    if before is not None:
        out.update(before_s=round(before, 6), to_before=round(paged / before, 3))
    return out


def said(r: dict) -> str:
    """A row's ratios, as the log prints them."""
    return f"{r['label']}: x{r['ratio']:.2f}" + (f" (to the older tree's x{r['to_before']:.3f})" if "to_before" in r else "")


def decode_grid(model, rounds: int, log, before: Before | None = None) -> list[dict]:
    """Paged against slab decode steps at the grid's points."""
    out = []
    for b in BATCHES:
        for c in CONTEXTS:
            out.append(row(f"decode B={b} ctx={c}", *side_by_side(model, decode_works([c] * b), rounds, before),
                           batch=b, context=c))
            log(said(out[-1]))
    return out


def other_points(model, rounds: int, log, before: Before | None = None) -> list[dict]:
    """The calibration's paged points that are not plain decodes: prefills, chunks, ragged and mixed steps."""
    out = []
    for label, works in _points(FULL_PLAN["paged"], model.config.n_positions):
        if not label.startswith("decode B="):
            out.append(row(label, *side_by_side(model, works, rounds, before)))
            log(said(out[-1]))
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


def summary(rows: list[dict], key: str = "ratio") -> dict:
    """Median and largest ratio of rows (key: paged / slab, or to_before: today's paged / the older tree's)."""
    return {"median": round(statistics.median(r[key] for r in rows), 3), "max": max(r[key] for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", action="store_true", help="also the validation's whole runs, paged against slabs")
    ap.add_argument("--points", action="store_true", help="also the calibration's other paged points")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", help="write the table to this file")
    ap.add_argument("--write", action="store_true", help="write the table to lib/tinyserve/data/paged-cost.json")
    ap.add_argument("--before", help="a table this script wrote on an older tree, kept in the written one as before")
    ap.add_argument("--against", metavar="TREE", help="an older tree (its root or lib/): its paged steps too, timed "
                    "in the same process, alternating; rows gain to_before (today's paged / its paged)")
    a = ap.parse_args()
    if a.write and TABLE is None:
        ap.error("this tree has no committed table (analysis/paged_cost): write an older tree's with --json")
    torch.set_num_threads(1)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    model = load_model(device=a.device, dtype="float32")
    before = Before(a.against, a.device) if a.against else None
    table = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
             "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu", "threads": 1,
             "block_size": BLOCK_SIZE, "load_start": round(os.getloadavg()[0], 2)}
    if before is not None:
        table["against"] = before.tree
    table["decode"] = decode_grid(model, a.rounds, log, before)
    table["decode_summary"] = summary(table["decode"])
    if a.points:
        table["points"] = other_points(model, a.rounds, log, before)
        if before is not None:  # the bar for prefill and mixed steps: median <= 1.0, none above 1.05
            table["points_to_before"] = summary(table["points"], "to_before")
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
                 + (f", {by[b, c]['to_before']:.2f}x the older tree's" if "to_before" in by[b, c] else "")
                 for c in CONTEXTS]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines.append(f"decode: median {table['decode_summary']['median']:.2f}x, max {table['decode_summary']['max']:.2f}x")
    for key in ("points", "runs"):
        for r in table.get(key, []):
            lines.append(f"{r['label']}: {r['ratio']:.2f}x ({r['paged_s'] * 1e3:.1f} / {r['slab_s'] * 1e3:.1f} ms)"
                         + (f"; paged {r['to_before']:.3f}x the older tree's ({r['before_s'] * 1e3:.1f} ms)"
                            if "to_before" in r else ""))
    if "points_to_before" in table:
        tb = table["points_to_before"]
        lines.append(f"other points, today's paged / {table['against']}'s: median {tb['median']:.3f}x, "
                     f"max {tb['max']:.3f}x")
    if "runs_summary" in table:
        lines.append(f"runs: median {table['runs_summary']['median']:.2f}x, max {table['runs_summary']['max']:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
