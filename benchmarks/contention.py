"""Real-model runs alone and beside another CPU-heavy process, under tinyserve's thread settings and the others.

    python benchmarks/contention.py                  # ~75 min on 2 quiet cores; table to stdout
    python benchmarks/contention.py --quick --json   # 1 repeat alone, 1 beside, no Jupyter kernels

Alone: one child process per setting, each with the model loaded once; every workload is run once by each (not
timed), then in each of --repeats (30) rounds every workload is run by every setting back to back, the settings in
balanced orders (real runs, wall clock: the sum of the measured steps, as `tinyserve run --clock wall` reports
`duration_s`). Each run starts only once the 1-minute load average is below --max-load (0.5): the script waits and
prints how long it waited and the load it started at. Medians of the rounds, and the median of each round's ratio
to the best setting's run of that round, with a 95% interval (bootstrap); each run's host steal time (the VM's CPU
its host took) is recorded. Beside: a fresh child with a neighbour running (a pure-Python busy loop, or a second
engine with the same settings: what two notebook kernels are); the ratio is beside ÷ alone for the same setting.
Then two real Jupyter kernels running at once.

Settings, set in the child's environment (whatever this shell exports is scrubbed first):
  tinyserve      tinyserve's default (threads.py: usable CPUs, OpenMP spinning; model/runner.py: the governor)
  1 thread       OMP_NUM_THREADS=1
  all spinning   TINYSERVE_THREADS=off: torch as it starts (one thread per CPU, libgomp's default spin)
  passive        OMP_WAIT_POLICY=PASSIVE with the usable CPUs (tinyserve's previous default), for reference
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRUB = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "TINYSERVE_THREADS", "GOMP_SPINCOUNT")
CONFIGS = {
    "tinyserve": {},
    "1 thread": {"OMP_NUM_THREADS": "1"},
    "all spinning": {"TINYSERVE_THREADS": "off"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE", "TINYSERVE_THREADS": "auto"},  # fixed count set in child_env
}
WORKLOADS = {  # name: (workload, policy, knobs) — each chapter workload under the policy its lesson shows, scaled
    # as tinyserve.tools.validate scales them where a full run takes long (finisher: 600-token long output instead of
    # 2,000; long tail: 40 requests instead of 300), so that 30 rounds x 3 settings, load-gated, fit about an hour
    "7.1-padding static": ("chapter-7.1-padding", "static", {}),
    "7.1-finisher static": ("chapter-7.1-finisher", "static", {"batch_size": 32,
                                                               "workload_knobs": {"long_output": 600}}),
    "7.2-longtail continuous": ("chapter-7.2-longtail", "continuous", {"batch_size": 32,
                                                                       "workload_knobs": {"n": 40}}),
    "7.3-long-prompt chunked": ("chapter-7.3-long-prompt", "chunked", {"chunk_size": 512}),
    "longtail-64 continuous": (str(ROOT / "benchmarks/longtail-64.jsonl"), "continuous", {"batch_size": 64}),
}

# What a child process (and each Jupyter kernel) runs: real runs on the shared engine, wall clock.
RUN_CODE = """
import tinyserve
def real_run(workload, policy, knobs):
    return tinyserve.shared_engine("cpu", "float32").run(workload, policy, clock="wall", progress=False,
                                                         **knobs).metrics()["duration_s"]
"""


TOUCH_MIB = 2048  # what each child writes and frees before each run (--touch-mib; touch_memory says why)


def child_env(config: str) -> dict[str, str]:
    """This environment without thread settings, plus the setting's."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUB}
    env.update(CONFIGS[config])
    if config == "passive":
        env["TINYSERVE_THREADS"] = str(_usable())  # a fixed count: no governor, as before
    env["PYTHONPATH"] = str(ROOT / "lib") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def child_main(a) -> None:
    """--child: run the workloads once each; --serve: run each workload named on stdin, one per line, and
    answer each with a JSON line; --neighbour: run them for ever after saying 'ready'."""
    ns: dict = {}
    exec(RUN_CODE, ns)
    import torch

    names = a.workloads.split(",")
    ns["real_run"](*WORKLOADS[names[0]][:2], {"batch_size": 4})  # warm-up: model load, allocator, thread pool
    if a.neighbour:
        print("ready", flush=True)
        while True:
            for n in names:
                ns["real_run"](*WORKLOADS[n])

    def timed(n: str) -> tuple[float, float | None]:
        touch_memory(a.touch_mib)
        s0, t0 = _steal_ticks(), time.perf_counter()
        return ns["real_run"](*WORKLOADS[n]), _steal_share(s0, t0)

    if a.serve:
        print(json.dumps({"threads": torch.get_num_threads()}), flush=True)
        for line in sys.stdin:
            d, x = timed(line.strip())
            print(json.dumps({"seconds": d, "steal": x, "threads": torch.get_num_threads()}), flush=True)
        return
    out = {n: timed(n)[0] for n in names}
    print(json.dumps({"seconds": out, "threads": torch.get_num_threads()}), flush=True)


def _steal_ticks() -> int | None:
    """The host's steal time so far, in clock ticks summed over CPUs (/proc/stat; None where Linux does not say)."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8])
    except (OSError, ValueError, IndexError):
        return None


def _steal_share(s0: int | None, t0: float) -> float | None:
    """The share of this machine's CPU time since (s0, t0) that its host took for others (VM steal time)."""
    s1, dt = _steal_ticks(), time.perf_counter() - t0
    if s0 is None or s1 is None or dt <= 0:
        return None
    return (s1 - s0) / os.sysconf("SC_CLK_TCK") / (dt * (os.cpu_count() or 1))


def touch_memory(mib: int) -> None:
    """Write `mib` MiB and free them, just before a run. A VM may hand memory that stayed free for ~2 s back to its
    host (virtio-balloon free page reporting: this one does), and the first touch of such memory then costs host
    page faults: the 7.3 run's first three steps (they write its whole KV) took 807-1,034 ms after a 12-s idle and
    115-612 ms back to back. Every alone run here starts after the load gate's idle wait, so that cost, which has
    nothing to do with the thread setting, landed on whichever run the host had just taken memory from."""
    if mib > 0:
        import numpy as np

        np.ones(mib << 20, dtype=np.uint8)  # written (every page touched), then freed at once


def wait_for_quiet(max_load: float, limit_s: float) -> tuple[float, float]:
    """Sleep until the 1-minute load average is below max_load; (seconds waited, load at start)."""
    t0 = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - t0 < limit_s:
        time.sleep(2)
    return time.monotonic() - t0, os.getloadavg()[0]


def start_neighbour(kind: str, config: str, workloads: str) -> subprocess.Popen:
    """A CPU-heavy process, returned once it is busy."""
    if kind == "busy loop":
        cmd = [sys.executable, "-c", "print('ready', flush=True)\nwhile True: pass"]
    else:
        cmd = [sys.executable, __file__, "--child", "--neighbour", "--workloads", workloads,
               "--touch-mib", str(TOUCH_MIB)]
    p = subprocess.Popen(cmd, env=child_env(config), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", f"neighbour {kind} did not start"
    return p


def stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()


def timed_child(config: str, workloads: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", "--workloads", workloads,
                          "--touch-mib", str(TOUCH_MIB)],
                         env=child_env(config), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"child ({config}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of n settings in which each follows every other equally often (a Williams design: n orders for an
    even n, 2n for an odd one). A rotation keeps the cyclic order, so each setting would always run right after
    the same one, and the machine's state after it (how long the load took to fall, how long the CPUs idled: the
    first process after a longer idle ran up to 1.6x slower here) would land on one setting every time."""
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]  # 0, 1, n-1, 2, n-2, ...
    rows = [[(v + i) % n for v in first] for i in range(n)]
    return rows + ([r[::-1] for r in rows] if n % 2 else [])


class Server:
    """A child process with one setting that runs, on request, one workload at a time (model loaded once)."""

    def __init__(self, config: str, workloads: str):
        self.p = subprocess.Popen([sys.executable, __file__, "--child", "--serve", "--workloads", workloads,
                                   "--touch-mib", str(TOUCH_MIB)], env=child_env(config),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.threads = self._answer()["threads"]

    def _answer(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"a {self.p.args} child stopped (exit {self.p.wait()})")
        return json.loads(line)

    def run(self, workload: str) -> dict:
        self.p.stdin.write(workload + "\n")
        self.p.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def alone_rows(configs: list[str], workloads: str, repeats: int, max_load: float, limit_s: float) -> dict:
    """{config: {workload: [seconds...], "steal": {workload: [...]}, "threads": n}}: one server per setting, every
    workload run once by each first (not timed), then `repeats` rounds; in each round every workload is run by every
    setting back to back, in balanced orders (balanced_orders), each run started on a quiet machine. One process per
    setting because a run on this VM varies by itself 15-25% (the host's doing), so a 5% question needs dozens of
    runs, and without a process start per run 30 rounds fit in an hour; back to back so that the settings share
    the same minutes of the host."""
    names = workloads.split(",")
    got: dict = {c: {"steal": {}} for c in configs}
    servers = {}
    try:
        for c in configs:
            servers[c] = Server(c, workloads)
            got[c]["threads"] = servers[c].threads
        for c in configs:
            for w in names:
                servers[c].run(w)  # the first run in a process pays its shapes' first allocation: not timed
        orders = balanced_orders(len(configs))
        k = 0
        for i in range(repeats):
            for w in names:
                cells = []
                for j in orders[k % len(orders)]:
                    c = configs[j]
                    waited, load = wait_for_quiet(max_load, limit_s)
                    r = servers[c].run(w)
                    got[c].setdefault(w, []).append(r["seconds"])
                    got[c]["steal"].setdefault(w, []).append(r["steal"])
                    got[c]["threads"] = r["threads"]
                    cells.append(f"{c} {r['seconds']:.3f} (waited {waited:.0f} s, load {load:.2f})")
                k += 1
                print(f"  alone {i + 1}/{repeats} {w.split()[0]}: " + "; ".join(cells), file=sys.stderr, flush=True)
    finally:
        for srv in servers.values():
            srv.close()
    return got


def beside_rows(configs: list[str], workloads: str, repeats: int) -> dict:
    """{config: {neighbour: {workload: [seconds...]}}}."""
    got: dict = {c: {"busy loop": {}, "engine": {}} for c in configs}
    for i in range(repeats):
        for c in configs:
            for kind in ("busy loop", "engine"):
                p = start_neighbour(kind, c, workloads)
                try:
                    r = timed_child(c, workloads)
                finally:
                    stop(p)
                for w, s in r["seconds"].items():
                    got[c][kind].setdefault(w, []).append(s)
                print(f"  beside {kind} {i + 1}/{repeats} {c:12s}: "
                      + ", ".join(f"{w.split()[0]} {s:.3f}" for w, s in r["seconds"].items()),
                      file=sys.stderr, flush=True)
    return got


def kernel_rows(configs: list[str], workload: str, repeats: int) -> list[dict]:
    """Two real Jupyter kernels (a learner with two notebooks open): one alone, then both at once."""
    from jupyter_client.manager import start_new_kernel

    call = f"real_run(*{WORKLOADS[workload]!r})"
    rows = []
    for config in configs:
        kernels = [start_new_kernel(kernel_name="python3", env=child_env(config)) for _ in range(2)]
        try:
            for _, kc in kernels:
                _execute(kc, RUN_CODE)
                _execute(kc, call)  # warm both
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
        print(f"  two kernels {workload} {config:12s} alone {a:.3f}s both x{b / a:.2f}", file=sys.stderr, flush=True)
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


def bootstrap_ratio(runs: list[float], ref: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% interval for median(runs) / median(ref): the runs resampled with replacement (percentile bootstrap).
    Each run on a VM varies by itself (here 15-25% from one run to the next, the host's doing), so a ratio of medians
    of a dozen runs is only known to within several percent: the interval says how well."""
    rng = random.Random(seed)
    r = sorted(statistics.median(rng.choices(runs, k=len(runs))) / statistics.median(rng.choices(ref, k=len(ref)))
               for _ in range(n))
    return r[int(0.025 * n)], r[int(0.975 * n) - 1]


def table(alone: dict, beside: dict, workloads: list[str]) -> list[dict]:
    """One row per workload and setting: median alone, its ratio to the best of {1 thread, all spinning}, beside."""
    rows = []
    for w in workloads:
        med = {c: statistics.median(v[w]) for c, v in alone.items()}
        ref = min((c for c in ("1 thread", "all spinning") if c in med), key=med.get)
        best = med[ref]
        for c, a in med.items():
            paired = statistics.median(x / y for x, y in zip(alone[c][w], alone[ref][w]))  # same round, same minutes
            row = {"workload": w, "config": c, "threads": alone[c]["threads"], "alone_s": a, "vs_best": a / best,
                   "vs_best_95": bootstrap_ratio(alone[c][w], alone[ref][w]) if c != ref else (1.0, 1.0),
                   "paired_vs_best": paired, "alone_runs": len(alone[c][w])}
            steal = [x for x in alone[c].get("steal", {}).get(w, []) if x is not None]
            if steal:
                row["steal_median"], row["steal_max"] = statistics.median(steal), max(steal)
            for kind, per in beside.get(c, {}).items():
                if per.get(w):
                    b = statistics.median(per[w])
                    row[f"beside_{kind.replace(' ', '_')}_s"] = b
                    row[f"ratio_{kind.replace(' ', '_')}"] = b / a
            rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--touch-mib", type=int, default=2048,
                    help="MiB each child writes and frees before each run (touch_memory; 0: off)")
    ap.add_argument("--neighbour", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--repeats", type=int, default=30, help="alone rounds: runs of each workload per setting")
    ap.add_argument("--beside-repeats", type=int, default=3)
    ap.add_argument("--beside-configs", default="tinyserve,1 thread", help="settings measured beside a neighbour")
    ap.add_argument("--max-load", type=float, default=0.5, help="an alone run starts below this 1-min load average")
    ap.add_argument("--max-wait", type=float, default=900, help="seconds to wait for it at most (then run anyway)")
    ap.add_argument("--quick", action="store_true", help="1 repeat alone and beside, no Jupyter kernels")
    ap.add_argument("--no-kernels", action="store_true", help="skip the two-Jupyter-kernels part")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child_main(a)
    global TOUCH_MIB
    TOUCH_MIB = a.touch_mib
    if a.quick:
        a.repeats, a.beside_repeats, a.no_kernels = 1, 1, True
    configs, names = a.configs.split(","), a.workloads.split(",")
    load, t0 = os.getloadavg(), time.perf_counter()
    alone = alone_rows(configs, a.workloads, a.repeats, a.max_load, a.max_wait)
    beside = beside_rows(a.beside_configs.split(","), a.workloads, a.beside_repeats) if a.beside_repeats else {}
    krows = [] if a.no_kernels else kernel_rows(["tinyserve", "all spinning"], "longtail-64 continuous", 3)
    rows = table(alone, beside, names)
    meta = {"cpus": os.cpu_count(), "usable_cpus": _usable(), "loadavg_before": load, "repeats": a.repeats,
            "beside_repeats": a.beside_repeats, "max_load": a.max_load, "wall_s": time.perf_counter() - t0,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows, "kernels": krows, "alone": alone, "beside": beside}, indent=1))
        return
    steal = [r["steal_max"] for r in rows if "steal_max" in r]
    print(f"{meta['date']}; real runs (wall clock); alone: medians of {a.repeats} runs "
          f"(host steal time at most {max(steal, default=0):.1%} of a run's CPU time), each run started below load "
          f"{a.max_load}; beside: medians of {a.beside_repeats}; host CPUs {meta['cpus']}, usable "
          f"{meta['usable_cpus']}; {meta['wall_s'] / 60:.0f} min\n")
    print("| workload | setting | threads | alone (s) | ÷ best of {1 thread, all spinning} (95% interval) "
          "| paired ÷ best | beside a busy loop (s, ratio) | beside an engine (s, ratio) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        cells = [f"{r[f'beside_{k}_s']:.3f} ({r[f'ratio_{k}']:.2f}x)" if f"ratio_{k}" in r else "—"
                 for k in ("busy_loop", "engine")]
        lo, hi = r["vs_best_95"]
        print(f"| {r['workload']} | {r['config']} | {r['threads']} | {r['alone_s']:.3f} | {r['vs_best']:.3f} "
              f"({lo:.2f}-{hi:.2f}) | {r['paired_vs_best']:.3f} | {cells[0]} | {cells[1]} |")
    if krows:
        print("\n| two Jupyter kernels | setting | one alone (s) | both at once (s) | ratio |")
        print("|---|---|---:|---:|---:|")
        for r in krows:
            print(f"| {r['workload']} | {r['config']} | {r['alone_s']:.3f} | {r['both_s']:.3f} | "
                  f"{r['ratio_two_kernels']:.2f}x |")


def _usable() -> int:
    sys.path.insert(0, str(ROOT / "lib"))
    from tinyserve.threads import usable_cpus

    return usable_cpus()


if __name__ == "__main__":
    main()
