"""How fast the widgets answer: a knob change (the engine's dry run + redrawing every view, Python side) and the
first draw of an explorer, for each chapter workload at its default scale.

    OMP_NUM_THREADS=1 python benchmarks/widgets_speed.py [--repeats 5]

Prints a Markdown table (medians). The Python side only: the browser's repaint is measured by the Playwright
test. Knob moves alternate between two values so every move really re-runs the engine (no cache is involved).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

CASES = [  # (workload, policy, the knob moved and its two values)
    ("chapter-7.1-padding", "static", "batch_size", (2, 4)),
    ("chapter-7.1-finisher", "static", "batch_size", (32, 16)),
    ("chapter-7.1-finisher", "continuous", "batch_size", (32, 16)),
    ("chapter-7.2-longtail", "dynamic", "batch_size", (32, 16)),
    ("chapter-7.2-longtail", "continuous", "batch_size", (32, 16)),
    ("chapter-7.2-longtail", "chunked", "chunk_size", (512, 256)),
    ("chapter-7.3-long-prompt", "continuous", "batch_size", (32, 16)),
    ("chapter-7.3-long-prompt", "chunked", "chunk_size", (512, 256)),
]


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
    for workload, policy, knob, values in CASES:
        t0 = time.perf_counter()
        ex = tw.Explorer(workload, policy=policy, **{knob: values[0]})
        first = time.perf_counter() - t0
        totals, dry, draw = [], [], []
        for i in range(args.repeats):
            t0 = time.perf_counter()
            ex.set(**{knob: values[(i + 1) % 2]})
            totals.append(time.perf_counter() - t0)
            dry.append(ex.timing["dry_run_ms"])
            draw.append(ex.timing["draw_ms"])
        t0 = time.perf_counter()
        ex.board.set_cursor(len(ex.trace.steps) // 2)
        cursor = time.perf_counter() - t0
        rows.append((workload, policy, f"{knob} {values[0]}↔{values[1]}", len(ex.trace.steps), ex.trace.num_slots,
                     statistics.median(dry), statistics.median(draw), statistics.median(totals) * 1e3,
                     first * 1e3, cursor * 1e3))
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores reported, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; import {t_import:.2f} s, first FigureWidget "
          f"{t_first_fig:.2f} s (once per kernel)\n")
    print("| workload | policy | knob moved | steps | slots | dry run ms | redraw ms | knob → figures ms | "
          "first draw ms | cursor move ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:,} | {r[4]} | {r[5]:.0f} | {r[6]:.0f} | {r[7]:.0f} | "
              f"{r[8]:.0f} | {r[9]:.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
