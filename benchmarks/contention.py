"""How much a second CPU-heavy process slows a real-model run, before and after tinyserve fits torch's threads.

    python benchmarks/contention.py                 # ~2-5 min on 2 quiet cores; table to stdout
    python benchmarks/contention.py --quick --json  # fewer steps and repeats

Every cell is a ratio measured side by side in this one run: time of N real engine steps (model forward
passes, not a dry run) beside a neighbour ÷ the same N steps alone, repeated and interleaved (alone, beside,
alone, ...) so a machine that is busy for other reasons moves both. Configurations (set in the child's
environment, whatever this shell exports):
  before     TINYSERVE_THREADS=off, no OMP_* variables: torch as it starts (one thread per CPU, spin-waiting)
  after      tinyserve's defaults (threads.py): OMP_WAIT_POLICY=PASSIVE, threads = usable CPUs (capped)
  1 thread   OMP_NUM_THREADS=1 (what a user could set by hand), for reference
Neighbours: a second engine process with the same configuration (what two notebook kernels are), and a
pure-Python busy loop (any CPU-heavy program). Then two real Jupyter kernels, both running at once.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "before": {"TINYSERVE_THREADS": "off"},
    "after": {},
    "1 thread": {"OMP_NUM_THREADS": "1"},
}
SCRUB = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "TINYSERVE_THREADS", "GOMP_SPINCOUNT")
WORKLOADS = {  # (workload, policy, knobs): decode-heavy, and long prefill chunks riding with decodes
    "7.2-longtail continuous": ("chapter-7.2-longtail", "continuous", {"batch_size": 32}),
    "7.3-long-prompt chunked": ("chapter-7.3-long-prompt", "chunked", {"chunk_size": 512}),
}

# The code a child process (and each Jupyter kernel) runs: warm up, then time `steps` real engine steps.
STEPS_CODE = """
import time, tinyserve, torch
from tinyserve.engine import Engine
def _steps(workload, policy, knobs, steps):
    eng = tinyserve.shared_engine("cpu", "float32")
    done, run = 0, None
    while done < steps:
        if run is None or run.done:
            run = eng.start(workload, policy, **knobs)
        done += run.step() is not None
def timed_steps(workload, policy, knobs, steps):
    _steps(workload, policy, knobs, 20)  # warm-up: model load, allocator, thread pool
    t0 = time.perf_counter()
    _steps(workload, policy, knobs, steps)
    return time.perf_counter() - t0
"""


def child_env(config: str) -> dict[str, str]:
    """This environment without thread settings, plus the configuration's."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUB}
    env.update(CONFIGS[config])
    env["PYTHONPATH"] = str(ROOT / "lib") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def child_main(a) -> None:
    """--child: time steps (or, as a neighbour, loop for ever after saying 'ready')."""
    ns: dict = {}
    exec(STEPS_CODE, ns)
    wl, policy, knobs = WORKLOADS[a.workload]
    import torch

    if a.neighbour:
        ns["_steps"](wl, policy, knobs, 20)
        print("ready", flush=True)
        while True:
            ns["_steps"](wl, policy, knobs, 1000)
    s = ns["timed_steps"](wl, policy, knobs, a.steps)
    print(json.dumps({"seconds": s, "threads": torch.get_num_threads(),
                      "wait_policy": os.environ.get("OMP_WAIT_POLICY", "(libgomp default)")}), flush=True)


def start_neighbour(kind: str, config: str, workload: str) -> subprocess.Popen:
    """A CPU-heavy process, returned once it is busy."""
    if kind == "busy loop":
        cmd = [sys.executable, "-c", "print('ready', flush=True)\nwhile True: pass"]
    else:
        cmd = [sys.executable, __file__, "--child", "--neighbour", "--workload", workload]
    p = subprocess.Popen(cmd, env=child_env(config), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", f"neighbour {kind} did not start"
    return p


def stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()


def timed_child(config: str, workload: str, steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", "--workload", workload, "--steps", str(steps)],
                         env=child_env(config), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"child ({config}, {workload}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def process_rows(workload: str, steps: int, repeats: int) -> list[dict]:
    """alone vs beside each neighbour, per configuration, interleaved repeats."""
    rows = []
    for config in CONFIGS:
        alone, beside = [], {"engine": [], "busy loop": []}
        info = {}
        for _ in range(repeats):
            info = timed_child(config, workload, steps)
            alone.append(info["seconds"])
            for kind in beside:
                p = start_neighbour(kind, config, workload)
                try:
                    beside[kind].append(timed_child(config, workload, steps)["seconds"])
                finally:
                    stop(p)
        a = statistics.median(alone)
        rows.append({"workload": workload, "config": config, "threads": info["threads"],
                     "wait_policy": info["wait_policy"], "alone_s": a,
                     **{f"beside_{k.replace(' ', '_')}_s": statistics.median(v) for k, v in beside.items()},
                     **{f"ratio_{k.replace(' ', '_')}": statistics.median(v) / a for k, v in beside.items()}})
        print(f"  {workload:24s} {config:9s} alone {a:.3f}s  "
              + "  ".join(f"beside {k} x{statistics.median(v) / a:.1f}" for k, v in beside.items()),
              file=sys.stderr, flush=True)
    return rows


def kernel_rows(workload: str, steps: int, repeats: int) -> list[dict]:
    """Two real Jupyter kernels (a learner with two notebooks open): one alone, then both at once."""
    from jupyter_client.manager import start_new_kernel

    wl, policy, knobs = WORKLOADS[workload]
    call = f"timed_steps({wl!r}, {policy!r}, {knobs!r}, {steps})"
    rows = []
    for config in ("before", "after"):
        kernels = [start_new_kernel(kernel_name="python3", env=child_env(config)) for _ in range(2)]
        try:
            for _, kc in kernels:
                _execute(kc, STEPS_CODE)
                _execute(kc, f"timed_steps({wl!r}, {policy!r}, {knobs!r}, 5)")  # warm both
            alone, both = [], []
            for _ in range(repeats):
                alone.append(_execute(kernels[0][1], call))
                ids = [kc.execute(call) for _, kc in kernels]  # both start at once
                both.append(max(_result(kc, i) for (_, kc), i in zip(kernels, ids)))
        finally:
            for km, kc in kernels:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
        a, b = statistics.median(alone), statistics.median(both)
        rows.append({"workload": workload, "config": config, "alone_s": a, "both_s": b, "ratio_two_kernels": b / a})
        print(f"  two kernels {workload:24s} {config:9s} alone {a:.3f}s both x{b / a:.1f}", file=sys.stderr, flush=True)
    return rows


def _execute(kc, code: str):
    return _result(kc, kc.execute(code))


def _result(kc, msg_id: str, timeout: float = 1800):
    """The value of the cell's last expression (a float), raising on an error in the kernel."""
    value = None
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        t, c = msg["msg_type"], msg["content"]
        if t == "error":
            raise RuntimeError("\n".join(c["traceback"]))
        if t == "execute_result":
            value = float(c["data"]["text/plain"])
        if t == "status" and c["execution_state"] == "idle":
            return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--neighbour", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", default="7.2-longtail continuous")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="50 steps, 1 repeat, longtail only")
    ap.add_argument("--no-kernels", action="store_true", help="skip the two-Jupyter-kernels part")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child_main(a)
    if a.quick:
        a.steps, a.repeats = 50, 1
    load = os.getloadavg()
    t0 = time.perf_counter()
    rows, krows = [], []
    workloads = [a.workload] if a.quick else list(WORKLOADS)
    for w in workloads:
        rows += process_rows(w, a.steps, a.repeats)
    if not a.no_kernels:
        krows = kernel_rows(workloads[0], a.steps, a.repeats)
    meta = {"cpus": os.cpu_count(), "usable_cpus": _usable(), "loadavg_before": load, "steps": a.steps,
            "repeats": a.repeats, "wall_s": time.perf_counter() - t0}
    if a.json:
        print(json.dumps({"meta": meta, "processes": rows, "kernels": krows}, indent=1))
        return
    print(f"{a.steps} real engine steps; medians of {a.repeats}; host CPUs {meta['cpus']}, usable "
          f"{meta['usable_cpus']}; load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}; "
          f"{meta['wall_s'] / 60:.0f} min\n")
    print("| workload | config | threads | wait policy | alone (s) | beside an engine (s, ratio) "
          "| beside a busy loop (s, ratio) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['config']} | {r['threads']} | {r['wait_policy']} | {r['alone_s']:.3f} "
              f"| {r['beside_engine_s']:.3f} ({r['ratio_engine']:.1f}x) "
              f"| {r['beside_busy_loop_s']:.3f} ({r['ratio_busy_loop']:.1f}x) |")
    if krows:
        print("\n| two Jupyter kernels | config | one alone (s) | both at once (s) | ratio |")
        print("|---|---|---|---|---|")
        for r in krows:
            print(f"| {r['workload']} | {r['config']} | {r['alone_s']:.3f} | {r['both_s']:.3f} | "
                  f"{r['ratio_two_kernels']:.1f}x |")


def _usable() -> int:
    sys.path.insert(0, str(ROOT / "lib"))
    from tinyserve.threads import usable_cpus

    return usable_cpus()


if __name__ == "__main__":
    main()
