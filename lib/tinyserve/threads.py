"""Torch threads that fit the machine: as many intra-op threads as the CPUs this process may really use, and
no more than the tiny model's steps can use, with OpenMP threads that sleep instead of spinning.

Why a busy machine made runs 10-100x slower: torch's CPU kernels (MKL, ATen) run on GNU OpenMP. After each
parallel region a thread spin-waits for the next one (libgomp spins ~300k iterations before it sleeps), and a
region ends at a barrier that waits for *every* thread of the team. The tiny GPT's forward pass is hundreds of
regions of a few microseconds each. With a second CPU-heavy process on the same cores, one of our threads is
often descheduled: the others spin at the barrier, burning the core the missing thread (or the neighbour)
needs, until the kernel's scheduler hands it a time slice (milliseconds). Each few-microsecond op then costs
a scheduler tick. Two engines (two notebook kernels) do this to each other. Containers make it worse: they
report the host's cores, not their CPU quota, so torch starts more threads than there are CPUs to run them.

The fix at the root: OMP_WAIT_POLICY=PASSIVE (set before torch is imported; libgomp reads it once at load)
and a thread count no larger than the CPUs we may use: affinity mask and cgroup v1/v2 CPU quota. A user's
OMP_NUM_THREADS / MKL_NUM_THREADS / OMP_WAIT_POLICY, or torch.set_num_threads, always wins;
TINYSERVE_THREADS=off leaves torch exactly as it starts (benchmarks/contention.py uses it for "before").
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# The 128-wide, 4-layer GPT's matmuls are small: past a few threads each op's barrier costs more than its
# share of the work. Measured here only up to 2 cores (2 PASSIVE threads beat 1 on every chapter workload, even
# on a busy machine, where 2 threads also get 2 shares of the CPU); the cap of 4 is a guess to re-take on a
# bigger machine with benchmarks/contention.py.
MAX_USEFUL_THREADS = 4
_USER_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_fitted = False


def enabled() -> bool:
    """False when the user asked tinyserve to leave torch's threads alone (TINYSERVE_THREADS=off)."""
    return os.environ.get("TINYSERVE_THREADS", "auto").strip().lower() not in ("off", "0", "no", "false")


def prepare_env() -> None:
    """Before torch is imported: make OpenMP threads sleep, not spin, while they wait (unless the user chose)."""
    if enabled() and "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
    global _fitted
    if _fitted or not enabled() or any(k in os.environ for k in _USER_ENV):
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
    n = recommended_threads()
    if n != now:
        torch.set_num_threads(n)
    return n
