"""Writes lib/tinyserve/data/deployments.json: the deployment studies the lessons read (7.3 section 6 and its
appendix B, 7.5 section 6), each deployment at every rate and seed of analysis/fair.py, scored against every SLO
pair under both TTFT conventions. Dry runs on the modeled clock: the same numbers on every machine. Each run is
long enough for a steady reading (analysis/steady.py), and each curve runs until it is past its deployment's
saturation (fair.sweep_one). Then each study's quoted deployments (fair.quoted) run again with every run twice as
long (fair.doubled): the doubling check its quoted goodputs are read against.

    python benchmarks/deployments.py                 # every study (about 45 minutes on 2 cores)
    python benchmarks/deployments.py --only tp-4     # one study, merged into the file
    python benchmarks/deployments.py --doubled-only  # only the doubling check, of the studies in the file

tests/analysis/test_fair_data.py (slow) recomputes one seed of the file and compares.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "lib"))

from tinyserve.analysis import fair, steady  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", help="studies to run (default: all), merged into the file")
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", type=Path, default=fair.DATA)
    p.add_argument("--doubled-only", action="store_true",
                   help="keep the studies' runs; run only their quoted deployments twice as long")
    a = p.parse_args()
    todo = fair.studies()
    names = a.only or list(todo)
    doc = fair.load(a.out) if a.out.exists() and (a.only or a.doubled_only) else {}
    doc.update({"workload": fair.WORKLOAD, "hardware": "h200-70b-fp8", "pairs": fair.PAIRS,
                "conventions": list(fair.CONVENTIONS), "kinds": list(fair.KINDS), "goal": fair.GOAL,
                "steady": {"min_requests": steady.MIN_REQUESTS, "span_s": steady.SPAN_S, "past": fair.PAST,
                           "saturation_requests": steady.SATURATION_REQUESTS,
                           "saturation_rate_per_gpu": steady.SATURATION_RATE_PER_GPU,
                           "doubled": fair.DOUBLED, "settled": fair.SETTLED},
                "infeasible": {"plain": fair.infeasible(), "short": fair.infeasible({"long_share": 0.0})}})
    doc.pop("alone", None)
    doc.setdefault("studies", {})
    doc["studies"] = {k: v for k, v in doc["studies"].items() if k in todo}
    # a fresh worker every few deployments: a long regeneration's workers otherwise grow past 10 GB each
    with multiprocessing.Pool(a.processes, maxtasksperchild=4) as pool:
        for name in names:
            spec = todo[name]
            t0 = time.perf_counter()
            run = lambda f, jobs: pool.map(f, jobs, 1)  # noqa: E731
            if not a.doubled_only:
                doc["studies"][name] = fair.study(spec["specs"], spec["gpus"], run_knobs=spec.get("run_knobs"),
                                                  workload_knobs=spec.get("workload_knobs"), pool=run)
            doc["studies"][name]["doubled"] = fair.doubled(doc["studies"][name], pool=run)
            print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
            # written after each study: a long regeneration keeps what it has done
            a.out.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {a.out} ({a.out.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
