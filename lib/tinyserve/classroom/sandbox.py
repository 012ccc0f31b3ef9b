"""The box one submission runs in: its own process with CPU seconds, memory and a process count that hold.

    CPU        RLIMIT_CPU (CPU seconds, not wall time: a busy neighbour on 2 cores makes nobody time out);
               SIGXCPU at the limit, SIGKILL 5 s later. Per cell: a CPU-time timer (runner.py).
    memory     RLIMIT_AS, and the cgroup's memory limit when there is one (it also counts forked children).
    processes  a cgroup of its own with pids.max (cgroup v2, or v1's pids hierarchy): holds for root too. The
               cgroup's CPU accounting also holds the CPU seconds of the whole box (forked children included).
               Without a writable cgroup: as root, an unprivileged user per worker with RLIMIT_NPROC; as
               another user, RLIMIT_NPROC of that user (shared by the workers), with a warning.
    files      as root, the submission runs as an unprivileged user (uid per worker, no login needed), so the
               package copy it imports (read-only) and everything else of yours stays unwritable to it. That
               needs a Python other users can read (a container's is; one under /root is not): without it the
               grader says so and checks each package copy after every notebook instead.
The parent (grade.py) makes the cgroup, starts `python -m tinyserve.classroom.runner`, keeps a wall-clock
backstop (for a submission that sleeps), and kills everything in the cgroup when the notebook is done.
A container is still the right place for a class (chapters/README.md): this box does not hide the network.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .text import say

CGROUP_ROOT = Path("/sys/fs/cgroup")
UID_BASE = 61000  # worker k's unprivileged user; unused ids on an ordinary system


@dataclass
class Limits:
    """What one submission may use; the parent fills in where its cgroup and user are."""

    cpu_s: float = 60.0
    cell_cpu_s: float = 30.0
    memory_bytes: int = 3 << 30
    max_procs: int = 32
    cgroup_procs: list[str] = field(default_factory=list)  # cgroup.procs files to join (v2: one; v1: pids, memory)
    uid: int | None = None  # drop to this user (as root)
    home: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def enter(limits: Limits) -> None:
    """In the child, before the submission's code: join the cgroup, set the rlimits, drop root."""
    for procs in limits.cgroup_procs:
        Path(procs).write_text(str(os.getpid()))
    cpu = max(1, int(limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.uid is not None:
        if not limits.cgroup_procs:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_procs, limits.max_procs))
        os.setgroups([])
        os.setgid(limits.uid)
        os.setuid(limits.uid)
    elif not limits.cgroup_procs and os.geteuid() != 0:
        n = limits.max_procs + _user_processes()
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    if limits.home:
        os.environ.update(HOME=limits.home, IPYTHONDIR=os.path.join(limits.home, ".ipython"),
                          MPLCONFIGDIR=os.path.join(limits.home, ".mpl"), TMPDIR=limits.home)
        os.chdir(limits.home)


def _user_processes() -> int:
    uid, n = os.getuid(), 0
    for d in Path("/proc").glob("[0-9]*"):
        try:
            n += d.stat().st_uid == uid
        except OSError:
            pass
    return n


# ---------------------------------------------------------------------------------------------- the parent
def _v2_ok() -> bool:
    try:
        ctl = (CGROUP_ROOT / "cgroup.controllers").read_text().split()
        sub = (CGROUP_ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False
    return "pids" in ctl and "pids" in sub and os.access(CGROUP_ROOT, os.W_OK)


def cgroup_kind() -> str | None:
    """'v2', 'v1' or None: which per-submission cgroups this machine lets us make."""
    if _v2_ok():
        return "v2"
    pids = CGROUP_ROOT / "pids"
    if (pids / "cgroup.procs").is_file() and os.access(pids, os.W_OK):
        probe = pids / f"tinyserve-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
            return "v1"
        except OSError:
            return None
    return None


class Box:
    """One submission's cgroup(s): made before the child starts, emptied and removed after."""

    def __init__(self, name: str, limits: Limits, kind: str | None):
        self.dirs: list[Path] = []
        self.kind = kind
        if kind == "v2":
            d = CGROUP_ROOT / name
            d.mkdir()
            (d / "pids.max").write_text(str(limits.max_procs))
            if (d / "memory.max").exists():
                (d / "memory.max").write_text(str(limits.memory_bytes))
                (d / "memory.swap.max").exists() and (d / "memory.swap.max").write_text("0")
            self.dirs = [d]
        elif kind == "v1":
            d = CGROUP_ROOT / "pids" / name
            d.mkdir()
            (d / "pids.max").write_text(str(limits.max_procs))
            self.dirs = [d]
            m = CGROUP_ROOT / "memory" / name
            try:
                m.mkdir()
                (m / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                self.dirs.append(m)
            except OSError:
                pass  # RLIMIT_AS still holds the process itself
            a = CGROUP_ROOT / "cpuacct" / name
            try:
                a.mkdir()
                self.dirs.append(a)
            except OSError:
                pass  # RLIMIT_CPU still holds each process
        limits.cgroup_procs = [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        out = set()
        for d in self.dirs:
            try:
                out |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return out

    def kill(self) -> None:
        """Every process left in the box (a fork bomb's children too)."""
        if self.kind == "v2" and self.dirs and (self.dirs[0] / "cgroup.kill").exists():
            (self.dirs[0] / "cgroup.kill").write_text("1")
        for _ in range(200):
            left = self.pids()
            if not left:
                return
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def cpu_s(self) -> float | None:
        """CPU seconds used by every process of the box together (None: no CPU accounting here)."""
        for d in self.dirs:
            try:
                if (d / "cpuacct.usage").exists():
                    return int((d / "cpuacct.usage").read_text()) / 1e9
                if (d / "cpu.stat").exists():
                    stat = dict(line.split() for line in (d / "cpu.stat").read_text().splitlines())
                    return int(stat["usage_usec"]) / 1e6
            except (OSError, ValueError, KeyError):
                return None
        return None

    def memory_hit(self) -> bool:
        """The cgroup's memory limit was reached (the kernel OOM-killed in it)."""
        for d in self.dirs:
            for f, key in (("memory.events", "oom_kill"), ("memory.failcnt", None)):
                try:
                    text = (d / f).read_text()
                except OSError:
                    continue
                if key is None:
                    if int(text.strip() or 0) > 0:
                        return True
                elif any(line.split()[0] == key and int(line.split()[1]) > 0 for line in text.splitlines()):
                    return True
        return False

    def close(self) -> None:
        self.kill()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


def readable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can reach and read path (every folder above it searchable)."""
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        try:
            mode = d.stat().st_mode
        except OSError:
            return False
        if not mode & (0o001 if d.is_dir() else 0o004):
            return False
    return True


def python_readable_by_others() -> bool:
    """Whether an unprivileged user could run this Python (its standard library and site-packages)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return all(readable_by_others(Path(paths[k])) for k in ("stdlib", "purelib"))


def process_guard(kind: str | None) -> tuple[bool, list[str]]:
    """(drop to a per-worker user, warnings about what cannot be made to hold on this machine)."""
    root = os.geteuid() == 0
    drop = root and python_readable_by_others()
    warnings = []
    if root and not drop:
        warnings.append(say("warn_root"))
    if kind is None and not drop:
        warnings.append(say("warn_nproc"))
    return drop, warnings


def scratch_dir(base: Path, uid: int | None) -> Path:
    """A fresh working folder for one submission, owned by the user it runs as."""
    d = Path(base)
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    if uid is not None:
        os.chown(d, uid, uid)
    return d
