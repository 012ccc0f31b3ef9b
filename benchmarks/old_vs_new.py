"""Old tree against new, side by side: two persistent worker processes, one per tree, alternating run by run; CPU
time of the run (time.process_time), OMP_NUM_THREADS=1, median of N runs each. Dry runs of every named workload
under every policy (and the paged layout), and, with --real, real-engine runs under the wall clock.

    git worktree add /tmp/old <old commit>
    OMP_NUM_THREADS=1 python benchmarks/old_vs_new.py --old /tmp/old --repeats 9 [--real] [--warm 10]

--warm N runs each case N times in both workers before timing it: a run of a millisecond or two (7.1's padding
example) takes a few runs to reach its steady time in a fresh interpreter (CPython's specializing interpreter,
first-use caches), and one warm-up leaves that in the first timed runs of whichever tree warms slower.

What keeps a pair's ratio steady (issue 48's "no pair above 1.08": a median of 15 single runs of 1 to 30 ms
swung by a third from pass to pass):
- each sample is a batch of runs long enough to time (--sample-ms, the same count of runs for both trees),
- the warm heap is frozen (gc.freeze) and each sample ends with a collection inside its timing, so it pays for
  its own garbage and never for a collection that happens to land in it,
- the ratio is the median of the pairs' ratios (old and new timed back to back, in alternating order), so a slow
  minute moves both sides of a pair alike.
Check `uptime` first: other processes on a 2-core machine move these numbers far more than any change does."""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import gc, json, sys, time
from tinyserve.engine import Engine
eng = Engine()
for line in sys.stdin:
    case = json.loads(line)
    if case.get("freeze"):  # after the warm-up: what is alive now stays, and no timed collection walks it
        gc.collect()
        gc.freeze()
        print("null", flush=True)
        continue
    gc.collect()
    t0 = time.process_time()
    for _ in range(case["times"]):
        eng.run(case["workload"], case["policy"], progress=False, **case["knobs"])
    gc.collect()  # each sample pays for its own garbage, not for whichever run a collection happened to land in
    print(json.dumps((time.process_time() - t0) / case["times"]), flush=True)
"""

WORKLOADS = ("chapter-7.1-padding", "chapter-7.1-finisher", "chapter-7.2-longtail", "chapter-7.3-long-prompt",
             "chapter-7.3-mixed")
POLICIES = ("static", "dynamic", "continuous", "chunked")


def cases(real: bool, clock: str = "wall") -> list[dict]:
    """The dry-run pairs (both layouts for continuous and chunked), or the real engine's runs under clock."""
    if real:
        small = {"chapter-7.1-padding": {}, "chapter-7.1-finisher": {"n": 8, "long_output": 200},
                 "chapter-7.2-longtail": {"n": 24}, "chapter-7.3-long-prompt": {"n": 6, "long_prompt": 1000}}
        return [{"workload": w, "policy": p, "knobs": {"clock": clock, "workload_knobs": k}}
                for w, k in small.items() for p in ("continuous", "chunked")]
    out = [{"workload": w, "policy": p, "knobs": {"dry_run": True}} for w in WORKLOADS for p in POLICIES]
    out += [{"workload": w, "policy": p, "knobs": {"dry_run": True, "kv_layout": "paged"}}
            for w in WORKLOADS for p in ("continuous", "chunked")]
    return out


def name_of(c: dict) -> str:
    """A case as the table names it."""
    return f"{c['workload']} / {c['policy']}" + (" paged" if c["knobs"].get("kv_layout") else "")


def worker(tree: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{tree}/lib:{tree}/widgets")
    return subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True, cwd=tree)


def ask(p: subprocess.Popen, case: dict, times: int = 1) -> float:
    """Seconds of CPU per run of case in worker p, over a sample of `times` runs."""
    p.stdin.write(json.dumps({**case, "times": times}) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old tree (a git worktree)")
    ap.add_argument("--new", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--real", action="store_true", help="real-engine runs under the wall clock")
    ap.add_argument("--warm", type=int, default=3, help="untimed runs of each case in each worker first")
    ap.add_argument("--sample-ms", type=float, default=150.0, help="a sample's least CPU time: short runs are "
                    "timed in batches of this length")
    ap.add_argument("--clock", choices=("wall", "modeled"), default="wall",
                    help="the real runs' clock: under the wall clock a request arrives when the wall clock says, so "
                    "each run's schedule differs (7.2-longtail: 848 to 1,042 steps); modeled: the same real forward "
                    "passes on one fixed schedule")
    ap.add_argument("--only", default="", help="only the cases whose name holds this text")
    a = ap.parse_args()
    old, new = worker(Path(a.old)), worker(Path(a.new))
    todo = [c for c in cases(a.real, a.clock) if a.only in name_of(c)]
    for c in todo:  # warm every case in both, then freeze what the warm-up left alive
        for _ in range(a.warm):
            ask(old, c), ask(new, c)
    for p in (old, new):
        p.stdin.write(json.dumps({"freeze": True}) + "\n")
        p.stdin.flush()
        p.stdout.readline()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(f"{'case':<52} {'runs':>5} {'old ms':>8} {'new ms':>8} {'pairs':>7} {'medians':>7} {'fastest':>7}"
          "  (new/old)")
    ratios, medians, fastest = [], [], []
    for c in todo:
        times = max(1, math.ceil(a.sample_ms / 1e3 / min(ask(old, c), ask(new, c))))
        to, tn = [], []
        for i in range(a.repeats):
            pair = [(old, to), (new, tn)] if i % 2 == 0 else [(new, tn), (old, to)]
            for p, acc in pair:
                acc.append(ask(p, c, times))
        mo, mn = statistics.median(to), statistics.median(tn)
        ratios.append(statistics.median(n / o for o, n in zip(to, tn)))
        medians.append(mn / mo)
        fastest.append(min(tn) / min(to))
        print(f"{name_of(c):<52} {times:5d} {mo * 1e3:8.2f} {mn * 1e3:8.2f} {ratios[-1]:7.3f} {medians[-1]:7.3f} "
              f"{fastest[-1]:7.3f}", flush=True)
    print(f"pairs' median new/old: median {statistics.median(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} "
          f"cases (ratio of medians: median {statistics.median(medians):.3f}, max {max(medians):.3f}; fastest "
          f"against fastest: median {statistics.median(fastest):.3f}, max {max(fastest):.3f}); load average at end: "
          f"{os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
