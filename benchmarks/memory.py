"""Peak memory and wall time of a 1,000-request run: does the engine stay bounded on a long workload?

    python benchmarks/memory.py                      # real run and dry run, each in its own process
    python benchmarks/memory.py --mode real --json   # one mode in this process (what the parent calls)
    python benchmarks/memory.py --n 1000 --rate 40 --max-output 64   # cheaper: busier, shorter outputs
    python benchmarks/memory.py --kv-layout paged    # the paged layout (its reused gather buffer: issue 51)

Workload: chapter-7.2-longtail (n=1000 by default) from tinyserve.core.workloads.get_workload, on the shipped
model, policy continuous, batch size 32, float32 on the CPU, modeled clock. Peak RSS is
resource.getrusage(RUSAGE_SELF).ru_maxrss of a fresh process per mode, so the two modes do not mix; the
"after import" figure is the same process's peak before the run starts (torch + model loaded).
Not part of the test suite (tests/core/test_reliability.py has a cheap tracemalloc check of a dry run instead).

Measured on the 2-core dev machine (shared with other jobs, torch 2 threads), defaults (rate 4/s, n=1000):
  dry   0.4 s wall, peak RSS 259 MiB (222 MiB of it is the interpreter + torch before the run); 10,823 steps
  real  402 s wall, peak RSS 709 MiB (239 MiB before the run; the rest is mostly the 32 KV slabs); 129,598 tokens
Cheaper variant (--rate 40 --max-output 64, 1,467 steps): real 44 s, peak RSS 676 MiB; dry 0.1 s, 238 MiB.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def peak_rss_mib() -> float:
    """This process's peak resident set size, MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if sys.platform == "darwin" else r / 1024


def run_one(mode: str, n: int, rate: float, batch_size: int, threads: int | None, max_output: int | None,
            kv_layout: str = "slab") -> dict:
    import torch

    from tinyserve.core.workloads import get_workload
    from tinyserve.engine import Engine

    if threads:
        torch.set_num_threads(threads)
    reqs = get_workload("chapter-7.2-longtail", n=n, rate=rate)
    if max_output:  # the custom, cheaper variant: same prompts and arrivals, outputs capped
        for r in reqs:
            r.max_new_tokens = min(r.max_new_tokens, max_output)
    engine = Engine(device="cpu", dtype="float32")
    if mode == "real":
        engine.model  # load the weights before the clock starts
    base = peak_rss_mib()
    t0 = time.perf_counter()
    tr = engine.run(reqs, "continuous", batch_size=batch_size, dry_run=(mode == "dry"), progress=False,
                    kv_layout=kv_layout)
    wall = time.perf_counter() - t0
    m = tr.metrics()
    return {"mode": mode, "kv_layout": kv_layout, "n": n, "rate": rate, "max_output": max_output, "batch_size": batch_size, "threads": torch.get_num_threads(),
            "wall_s": round(wall, 2), "peak_rss_mib": round(peak_rss_mib(), 1),
            "rss_after_import_mib": round(base, 1), "num_steps": m["num_steps"],
            "num_finished": m["num_finished"], "output_tokens": m["output_tokens"],
            "prefill_tokens": m["prefill_tokens"], "kv_reserved_mib": round(m["kv_reserved_bytes_peak"] / 2**20, 1),
            "modeled_duration_s": round(m["duration_s"], 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("real", "dry", "both"), default="both")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rate", type=float, default=4.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-output", type=int, default=None, help="cap every request's max_new_tokens (cheaper)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--kv-layout", choices=("slab", "paged"), default="slab",
                   help="paged: its gather buffer must not raise the peak (issue 51)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.mode != "both":
        res = run_one(a.mode, a.n, a.rate, a.batch_size, a.threads, a.max_output, a.kv_layout)
        print(json.dumps(res) if a.json else res)
        return
    rows = []
    for mode in ("dry", "real"):  # a fresh process each, so ru_maxrss is that mode's own peak
        cmd = [sys.executable, __file__, "--mode", mode, "--n", str(a.n), "--rate", str(a.rate),
               "--batch-size", str(a.batch_size), "--kv-layout", a.kv_layout, "--json"] + (["--threads", str(a.threads)] if a.threads else []) \
            + (["--max-output", str(a.max_output)] if a.max_output else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    if a.json:
        print(json.dumps(rows))
        return
    cap = f", outputs capped at {a.max_output}" if a.max_output else ""
    print(f"chapter-7.2-longtail n={a.n} rate={a.rate}/s{cap}, continuous B={a.batch_size}, {a.kv_layout}, float32 cpu")
    for r in rows:
        print(f"  {r['mode']:4s}  wall {r['wall_s']:8.1f} s  peak RSS {r['peak_rss_mib']:7.1f} MiB "
              f"(after import {r['rss_after_import_mib']:.1f})  steps {r['num_steps']}  "
              f"finished {r['num_finished']}  output tokens {r['output_tokens']}  KV reserved {r['kv_reserved_mib']} MiB")


if __name__ == "__main__":
    main()
