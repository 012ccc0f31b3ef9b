"""How fast the widgets answer: a knob change (the engine's dry run + redrawing every view, Python side) and the
first draw of an explorer, for each chapter workload at its default scale, and of 7.3's deployment explorer.

    OMP_NUM_THREADS=1 python benchmarks/widgets_speed.py [--repeats 5]

Prints a Markdown table (medians). The Python side only: the browser's repaint is measured by the Playwright
test. Knob moves alternate between two values so every move really re-runs the engine (no cache is involved).
Each time is given as wall / CPU: on a machine shared with other processes the wall time stretches with the
load, while the process's CPU time (time.process_time) stays close to what a quiet machine's wall time would be.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

CASES = [  # (workload, policy, the knob moved and its two values[, other knobs, views])
    ("chapter-7.1-padding", "static", "batch_size", (2, 4)),
    ("chapter-7.1-finisher", "static", "batch_size", (32, 16)),
    ("chapter-7.1-finisher", "continuous", "batch_size", (32, 16)),
    ("chapter-7.2-longtail", "dynamic", "batch_size", (32, 16)),
    ("chapter-7.2-longtail", "continuous", "batch_size", (32, 16)),
    ("chapter-7.2-longtail", "chunked", "chunk_size", (512, 256)),
    ("chapter-7.3-long-prompt", "continuous", "batch_size", (32, 16)),
    ("chapter-7.3-long-prompt", "chunked", "chunk_size", (512, 256)),
    # the paged layout with its block map: the board's default views plus "blocks"
    ("chapter-7.2-longtail", "continuous", "batch_size", (32, 16), {"kv_layout": "paged"}, "+blocks"),
    ("chapter-7.2-longtail", "continuous", "block_size", (16, 256), {"kv_layout": "paged"}, "+blocks"),
]

# 7.3's deployment explorer (chapter-7.3-mixed, 200 requests): the knob moved and its two values, other knobs
DEPLOY_CASES = [
    ("disaggregated", "rate", (4.0, 6.0), {}),
    ("colocated", "rate", (4.0, 6.0), {}),
    ("disaggregated", "decode_instances", (1, 2), {"rate": 4.0}),
    # each role's own knobs (issue 44), and the replicas' GPUs
    ("disaggregated", "prefill_chunk_size", (512, 2048), {"rate": 4.0}),
    ("disaggregated", "decode_batch_size", (32, 128), {"rate": 4.0}),
    ("disaggregated", "prefill_gpus", (1, 2), {"rate": 4.0}),
    ("disaggregated", "decode_gpus", (1, 4), {"rate": 4.0}),
    ("colocated", "gpus", (1, 2), {"rate": 4.0}),
    ("colocated", "replicas", (2, 4), {"rate": 4.0, "gpus": 2}),
]


def deployment_rows(repeats: int) -> list[tuple]:
    """Knob -> figures of tw.DeploymentExplorer: each deployment's dry runs, then the stacked timeline redrawn."""
    import tinyserve_widgets as tw

    rows = []
    for kind, knob, values, extra in DEPLOY_CASES:
        t0, c0 = time.perf_counter(), time.process_time()
        ex = tw.DeploymentExplorer("chapter-7.3-mixed", "chunked", deployment=kind, chunk_size=512,
                                   **{**extra, knob: values[0]})
        first = f"{(time.perf_counter() - t0) * 1e3:.0f} / {(time.process_time() - c0) * 1e3:.0f}"
        totals, cpu, dry, draw = [], [], [], []
        for i in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            ex.set(**{knob: values[(i + 1) % 2]})
            totals.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            dry.append(ex.timing["dry_run_ms"])
            draw.append(ex.timing["draw_ms"])
        med = statistics.median
        rows.append((kind + "".join(f" {k}={v:g}" for k, v in extra.items()), f"{knob} {values[0]:g}↔{values[1]:g}",
                     sum(len(x.steps) for x in ex.trace.instances), f"{med(dry):.0f}", f"{med(draw):.0f}",
                     f"{med(totals) * 1e3:.0f} / {med(cpu) * 1e3:.0f}", first))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="knob moves per case (median reported)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    import tinyserve_widgets as tw
    from tinyserve_widgets.views import new_figure

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    new_figure()  # the first FigureWidget of a kernel loads plotly's widget code once
    t_first_fig = time.perf_counter() - t0
    rows = []
    for workload, policy, knob, values, *more in CASES:
        extra, views = (more + [{}, ""])[:2] if more else ({}, "")
        t0, c0 = time.perf_counter(), time.process_time()
        ex = tw.Explorer(workload, policy=policy, **extra, **{knob: values[0]},
                         **({"views": tw.VIEWS + ("blocks",)} if views else {}))
        policy = policy + "".join(f" {k}={v}" for k, v in extra.items()) + (f" {views}" if views else "")
        first = f"{(time.perf_counter() - t0) * 1e3:.0f} / {(time.process_time() - c0) * 1e3:.0f}"
        totals, cpu, dry, draw = [], [], [], []
        for i in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            ex.set(**{knob: values[(i + 1) % 2]})
            totals.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            dry.append((ex.timing["dry_run_ms"], ex.timing["dry_run_cpu_ms"]))
            draw.append((ex.timing["draw_ms"], ex.timing["draw_cpu_ms"]))
        t0 = time.perf_counter()
        ex.board.set_cursor(len(ex.trace.steps) // 2)
        cursor = time.perf_counter() - t0
        med = statistics.median
        rows.append((workload, policy, f"{knob} {values[0]}↔{values[1]}", len(ex.trace.steps), ex.trace.num_slots,
                     f"{med(d[0] for d in dry):.0f} / {med(d[1] for d in dry):.0f}",
                     f"{med(d[0] for d in draw):.0f} / {med(d[1] for d in draw):.0f}",
                     f"{med(totals) * 1e3:.0f} / {med(cpu) * 1e3:.0f}", first, cursor * 1e3))
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores reported, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; import {t_import:.2f} s, first FigureWidget "
          f"{t_first_fig:.2f} s (once per kernel)\n")
    print("| workload | policy | knob moved | steps | slots | dry run ms (wall / CPU) | redraw ms | "
          "knob → figures ms | first draw ms | cursor move ms (wall) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:,} | {r[4]} | {r[5]} | {r[6]} | {r[7]} | {r[8]} | {r[9]:.1f} |")
    print("\nDeployment explorer (7.3), chapter-7.3-mixed, chunked 512, modeled h200-70b-fp8:\n")
    print("| deployment | knob moved | steps (all instances) | dry runs ms (wall) | redraw ms (wall) | "
          "knob → figures ms (wall / CPU) | first draw ms (wall / CPU) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in deployment_rows(args.repeats):
        print(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]} | {r[4]} | {r[5]} | {r[6]} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
