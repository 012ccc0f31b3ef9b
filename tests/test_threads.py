"""threads.py: the CPUs a process may use (affinity, cgroup v1/v2 quota) and when tinyserve sizes torch's threads.

Fake /proc/self and cgroup trees under tmp_path; expected CPU counts are worked out by hand from the files.
The environment rules run in fresh interpreters, since OpenMP reads its variables once, when torch loads.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinyserve import threads

LIB = str(Path(__file__).resolve().parents[1] / "lib")


def fake_proc(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    return proc


def write(path: Path, text: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for line in text.split(";"):
        name, value = line.split("=")
        (path / name).write_text(value + "\n")


V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNT = ("34 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
            "35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory\n")


def test_v2_quota_of_the_group_and_the_tighter_parent(tmp_path):
    proc = fake_proc(tmp_path, "0::/kubepods/pod1/c1\n", V2_MOUNT)
    root = tmp_path / "sys/fs/cgroup"
    write(root / "kubepods", "cpu.max=max 100000")
    write(root / "kubepods/pod1", "cpu.max=150000 100000")   # 1.5 CPUs: the tightest
    write(root / "kubepods/pod1/c1", "cpu.max=400000 100000")  # 4 CPUs asked, the parent caps it
    assert threads.cgroup_cpu_limit(proc, tmp_path) == 1.5


def test_v2_unlimited_is_none(tmp_path):
    proc = fake_proc(tmp_path, "0::/\n", V2_MOUNT)
    write(tmp_path / "sys/fs/cgroup", "cpu.max=max 100000")
    assert threads.cgroup_cpu_limit(proc, tmp_path) is None


def test_v1_cfs_quota_in_a_container_seeing_its_own_root(tmp_path):
    # inside a container the cgroup path is "/" and the mount shows the container's own group
    proc = fake_proc(tmp_path, "4:memory:/\n3:cpu,cpuacct:/\n0::/\n", V1_MOUNT)
    write(tmp_path / "sys/fs/cgroup/cpu,cpuacct", "cpu.cfs_quota_us=200000;cpu.cfs_period_us=100000")
    assert threads.cgroup_cpu_limit(proc, tmp_path) == 2.0


def test_v1_no_quota(tmp_path):
    proc = fake_proc(tmp_path, "3:cpu,cpuacct:/\n", V1_MOUNT)
    write(tmp_path / "sys/fs/cgroup/cpu,cpuacct", "cpu.cfs_quota_us=-1;cpu.cfs_period_us=100000")
    assert threads.cgroup_cpu_limit(proc, tmp_path) is None


def test_unreadable_proc_is_no_limit(tmp_path):
    assert threads.cgroup_cpu_limit(tmp_path / "missing", tmp_path) is None


@pytest.mark.parametrize("affinity, quota, expected", [
    ({0, 1, 2, 3, 4, 5, 6, 7}, 2.0, 2),  # a container on an 8-core host with a 2-CPU quota
    ({0, 1, 2, 3, 4, 5, 6, 7}, 1.5, 1),  # 1.5 CPUs cannot keep 2 threads busy: rounded down
    ({0, 1, 2, 3, 4, 5, 6, 7}, 0.5, 1),  # never below one
    ({3}, None, 1),                      # pinned to one core, no quota
    ({0, 1, 2, 3, 4, 5}, None, 6),
])
def test_usable_cpus_is_affinity_capped_by_quota(monkeypatch, affinity, quota, expected):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: affinity, raising=False)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: quota)
    assert threads.usable_cpus() == expected


def test_recommended_threads_capped_for_the_tiny_model(monkeypatch):
    monkeypatch.setattr(threads, "usable_cpus", lambda: 64)
    assert threads.recommended_threads() == threads.MAX_USEFUL_THREADS


def fresh(code: str, **env: str) -> dict:
    """Run code in a new interpreter with only the given thread variables set; it prints a JSON dict."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "TINYSERVE_THREADS")}
    e.update(env)
    e["PYTHONPATH"] = LIB + os.pathsep + e.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# A quota of one CPU, whatever this machine has: tinyserve must use 1 thread where torch alone starts with
# one per CPU in the affinity mask.
ONE_CPU = ("import json, os, tinyserve.threads as t; t.cgroup_cpu_limit = lambda: 1.0\n"
           "import tinyserve.model, torch\n"
           "print(json.dumps({'threads': torch.get_num_threads(), 'wait': os.environ.get('OMP_WAIT_POLICY'),"
           " 'cpus': len(os.sched_getaffinity(0))}))")


def test_import_sets_passive_wait_and_fits_threads_to_the_quota():
    r = fresh(ONE_CPU)
    assert r == {"threads": 1, "wait": "PASSIVE", "cpus": r["cpus"]}


def test_users_choices_win():
    assert fresh(ONE_CPU, OMP_WAIT_POLICY="ACTIVE")["wait"] == "ACTIVE"
    two = fresh(ONE_CPU, OMP_NUM_THREADS="2")
    assert two["threads"] == 2  # the user's OMP_NUM_THREADS, not the quota's 1
    off = fresh(ONE_CPU, TINYSERVE_THREADS="off")
    assert off["wait"] is None and off["threads"] == off["cpus"]  # torch as it starts: one per CPU


def test_torch_set_num_threads_before_tinyserve_is_kept():
    # cpu_count + 1 is never torch's own start value, so it can only come from the user
    r = fresh("import os, torch; torch.set_num_threads(os.cpu_count() + 1)\n" + ONE_CPU)
    assert r["threads"] == os.cpu_count() + 1
    assert r["wait"] is None  # torch was loaded first: too late for the wait policy, so none is claimed
