"""Old tree against new, side by side: two persistent worker processes, one per tree, alternating run by run; CPU
time of the run (time.process_time), OMP_NUM_THREADS=1, median of N runs each. Dry runs of every named workload
under every policy (and the paged layout), and, with --real, real-engine runs under the wall clock.

    git worktree add /tmp/old <old commit>
    OMP_NUM_THREADS=1 python benchmarks/old_vs_new.py --old /tmp/old --repeats 9 [--real] [--warm 10]

--warm N runs each case N times in both workers before timing it: a run of a millisecond or two (7.1's padding
example) takes a few runs to reach its steady time in a fresh interpreter (CPython's specializing interpreter,
first-use caches), and one warm-up leaves that in the first timed runs of whichever tree warms slower.
Check `uptime` first: other processes on a 2-core machine move these numbers far more than any change does."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import json, sys, time
from tinyserve.engine import Engine
eng = Engine()
for line in sys.stdin:
    case = json.loads(line)
    t0 = time.process_time()
    eng.run(case["workload"], case["policy"], progress=False, **case["knobs"])
    print(json.dumps(time.process_time() - t0), flush=True)
"""

WORKLOADS = ("chapter-7.1-padding", "chapter-7.1-finisher", "chapter-7.2-longtail", "chapter-7.3-long-prompt",
             "chapter-7.3-mixed")
POLICIES = ("static", "dynamic", "continuous", "chunked")


def cases(real: bool) -> list[dict]:
    """The dry-run pairs (both layouts for continuous and chunked), or the real engine's runs at their defaults."""
    if real:
        small = {"chapter-7.1-padding": {}, "chapter-7.1-finisher": {"n": 8, "long_output": 200},
                 "chapter-7.2-longtail": {"n": 24}, "chapter-7.3-long-prompt": {"n": 6, "long_prompt": 1000}}
        return [{"workload": w, "policy": p, "knobs": {"clock": "wall", "workload_knobs": k}}
                for w, k in small.items() for p in ("continuous", "chunked")]
    out = [{"workload": w, "policy": p, "knobs": {"dry_run": True}} for w in WORKLOADS for p in POLICIES]
    out += [{"workload": w, "policy": p, "knobs": {"dry_run": True, "kv_layout": "paged"}}
            for w in WORKLOADS for p in ("continuous", "chunked")]
    return out


def worker(tree: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{tree}/lib:{tree}/widgets")
    return subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True, cwd=tree)


def ask(p: subprocess.Popen, case: dict) -> float:
    p.stdin.write(json.dumps(case) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old tree (a git worktree)")
    ap.add_argument("--new", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--real", action="store_true", help="real-engine runs under the wall clock")
    ap.add_argument("--warm", type=int, default=1, help="untimed runs of each case in each worker first")
    a = ap.parse_args()
    old, new = worker(Path(a.old)), worker(Path(a.new))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(f"{'case':<52} {'old ms':>8} {'new ms':>8} {'median':>7} {'fastest':>7}  (new/old)")
    ratios, fastest = [], []
    for c in cases(a.real):
        for _ in range(a.warm):  # warm both
            ask(old, c), ask(new, c)
        to, tn = [], []
        for i in range(a.repeats):
            pair = [(old, to), (new, tn)] if i % 2 == 0 else [(new, tn), (old, to)]
            for p, acc in pair:
                acc.append(ask(p, c))
        mo, mn = statistics.median(to), statistics.median(tn)
        ratios.append(mn / mo)
        fastest.append(min(tn) / min(to))
        name = f"{c['workload']} / {c['policy']}" + (" paged" if c["knobs"].get("kv_layout") else "")
        print(f"{name:<52} {mo * 1e3:8.1f} {mn * 1e3:8.1f} {mn / mo:7.3f} {fastest[-1]:7.3f}", flush=True)
    print(f"median new/old {statistics.median(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} cases "
          f"(fastest against fastest: median {statistics.median(fastest):.3f}, max {max(fastest):.3f}); "
          f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
