"""Torch threads that fit the machine, alone and beside other processes.

As many intra-op threads as the CPUs this process may really use (affinity mask, cgroup v1/v2 CPU quota; at most
MAX_USEFUL_THREADS), spinning as OpenMP does by default, and a governor that drops to one thread while another
process competes for the cores and tries all of them again a second later. This module sizes the threads when
the model package loads (fit_torch_threads) and says what the machine allows; the governor itself runs before every
step, so it lives where steps run: model/runner.py (Governor).

Why: torch's CPU kernels run on GNU OpenMP. The tiny GPT's step is hundreds of parallel regions of a few
microseconds each; between regions a thread spin-waits (libgomp spins ~300k iterations before it sleeps), and
each region ends at a barrier that waits for every thread of the team. Alone, spinning is what makes two
threads pay: a woken thread costs a futex round trip per region. Beside a CPU-heavy neighbour, the same spinning
steals the core our own main thread or the neighbour needs, and a barrier waits a scheduler tick for a
descheduled team member. Measured on this 2-core VM (benchmarks/contention.py has the full table):
- OMP_WAIT_POLICY=PASSIVE (this module's previous fix) was 1.1x beside a busy loop but ~1.35x slower alone on the
  64-request long tail (2.17 s vs 1.61 s for 2 spinning threads; one thread 1.5x slower alone on that run).
- Two spinning threads beside a busy loop: 3.1-3.4x slower; one thread beside it: 1.0-1.5x of two alone.
- With this governor (31 rounds alone, 2026-12-02): 0.98-1.04 of the better of one thread and two spinning on
  every chapter workload (it never switched there); beside a busy loop or a second engine 1.0-1.9x.
- A bounded spin (GOMP_SPINCOUNT 500-5,000) did not give both: short spins lost the alone speed, long ones the
  beside speed (1.4x-3.2x), because any spinning competes with our main thread for the core.
The signal that tells the two cases apart costs nothing to compute: the main thread's run-queue wait
(/proc/thread-self/schedstat, 2nd field): at most 7.5% of any 25-ms window alone (202 windows of a real run),
~45% beside a busy loop with two threads. The governor reads it at most every WINDOW_S (a read costs ~20 us),
drops to one thread after two contended windows in a row (one could be a passing shell command), and switches
the team size with torch.set_num_threads, which is cheap and takes effect at the next parallel region. With one
thread its own waiting says nothing (the neighbour has the other core), so it counts the other runnable threads
(/proc/loadavg) and takes all threads back once CPUs are free, RETRY_S after the last contention at the earliest.

A user's OMP_NUM_THREADS / MKL_NUM_THREADS, or torch.set_num_threads (before or after tinyserve came in), always
wins, and so do OMP_WAIT_POLICY and GOMP_SPINCOUNT (tinyserve sets neither). TINYSERVE_THREADS=off leaves torch
exactly as it starts; TINYSERVE_THREADS=N uses N threads without the governor (the setting is read and checked
by core.config.threads_setting, torch-free, so a dry run refuses a bad one too).
Not loky.cpu_count (not installed): it reads only /sys/fs/cgroup's quota, not our group's parents, and rounds up.
"""
from __future__ import annotations

import os
from pathlib import Path

from .core.config import threads_setting

# The 128-wide, 4-layer GPT's matmuls are small: past a few threads each op's barrier costs more than its
# share of the work. Measured here only up to 2 cores (2 threads beat 1 from ~16 tokens a step: 0.63-0.83x of the
# time); the cap of 4 is a guess to re-take on a bigger machine with benchmarks/contention.py.
MAX_USEFUL_THREADS = 4
_USER_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_fitted = False
# (threads, usable CPUs) the runner's governor moves between once fit_torch_threads chose them (model/runner.py,
# where the governor lives: it runs before every step); None: no governor (one thread, a fixed count, the user's)
governed: tuple[int, int] | None = None


def _mounts(mountinfo: Path) -> list[tuple[str, str, str, set[str]]]:
    """(fstype, root inside the hierarchy, mount point, super options) of every cgroup mount."""
    out = []
    for line in mountinfo.read_text().splitlines():
        pre, _, post = line.partition(" - ")
        f, p = pre.split(), post.split()
        if len(f) >= 5 and len(p) >= 3 and p[0] in ("cgroup", "cgroup2"):
            out.append((p[0], f[3], f[4], set(p[2].split(","))))
    return out


def _quota(directory: Path, v2: bool) -> float | None:
    """CPUs allowed by one cgroup directory's quota, None if unlimited or unreadable."""
    try:
        if v2:
            quota, period = (directory / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def cgroup_cpu_limit(proc: Path = Path("/proc/self"), prefix: Path = Path("/")) -> float | None:
    """The tightest CPU quota (in CPUs) of this process's cgroup and its parents, v1 or v2; None if none."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = _mounts(proc / "mountinfo")
    except OSError:
        return None
    limits = []
    for line in groups:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        v2 = hid == "0" and controllers == ""
        for fstype, root, point, opts in mounts:
            if (fstype == "cgroup2") != v2 or (not v2 and "cpu" not in opts):
                continue
            if not v2 and "cpu" not in controllers.split(","):
                continue
            rel = path[len(root):] if root != "/" and path.startswith(root) else path
            base = prefix / point.lstrip("/")
            d = base / rel.lstrip("/")
            while True:  # the group itself and every parent up to the mount: the smallest quota binds
                q = _quota(d, v2)
                if q is not None:
                    limits.append(q)
                if d == base or base not in d.parents:
                    break
                d = d.parent
    return min(limits) if limits else None


def usable_cpus() -> int:
    """CPUs this process may really use: its affinity mask, capped by the cgroup CPU quota (at least 1)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        n = min(n, max(1, int(limit)))  # a quota of 1.5 CPUs cannot keep 2 threads busy: round down
    return max(1, n)


def recommended_threads() -> int:
    """Intra-op threads for the tiny GPT on this machine."""
    return min(usable_cpus(), MAX_USEFUL_THREADS)


def fit_torch_threads() -> int | None:
    """Once per process: size torch's intra-op threads unless the user already chose; returns what was set."""
    global _fitted, governed
    want = threads_setting()  # an invalid TINYSERVE_THREADS is an error here, the first time a model is loaded
    if _fitted or want == "off" or any(k in os.environ for k in _USER_ENV):
        _fitted = True
        return None
    _fitted = True
    import torch

    now = torch.get_num_threads()
    # torch starts with one thread per CPU in the affinity mask (libgomp's default); anything else was set
    # by the user with torch.set_num_threads before tinyserve came in, and stays.
    try:
        default = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        default = os.cpu_count() or 1
    if now not in (default, os.cpu_count()):
        return None
    n = want if isinstance(want, int) else recommended_threads()
    if n != now:
        torch.set_num_threads(n)
    if want == "auto" and n > 1:
        governed = (n, usable_cpus())
    return n
