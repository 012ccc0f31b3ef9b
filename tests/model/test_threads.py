"""threads.py: the CPUs a process may use (affinity, cgroup v1/v2 quota) and when tinyserve sizes torch's threads;
model/runner.py's Governor, which adapts them before every step.

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
from tinyserve.model import runner

LIB = str(Path(__file__).resolve().parents[2] / "lib")


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
         if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "TINYSERVE_THREADS", "GOMP_SPINCOUNT")}
    e.update(env)
    e["PYTHONPATH"] = LIB + os.pathsep + e.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# A quota of one CPU, whatever this machine has: tinyserve must use 1 thread where torch alone starts with
# one per CPU in the affinity mask.
ONE_CPU = ("import json, os, tinyserve.threads as t; t.cgroup_cpu_limit = lambda: 1.0\n"
           "import tinyserve.model.gpt, torch\n"
           "print(json.dumps({'threads': torch.get_num_threads(), 'wait': os.environ.get('OMP_WAIT_POLICY'),"
           " 'spin': os.environ.get('GOMP_SPINCOUNT'), 'governor': t.governed is not None,"
           " 'cpus': len(os.sched_getaffinity(0))}))")
# Three CPUs' quota: three threads and the governor (unless the user chose)
THREE_CPUS = ONE_CPU.replace("lambda: 1.0", "lambda: 3.0").replace("t.cgroup_cpu_limit", "t.os.sched_getaffinity = "
                                                                   "lambda pid: set(range(8)); t.cgroup_cpu_limit")


def test_import_fits_threads_to_the_quota_and_leaves_openmp_env_alone():
    r = fresh(ONE_CPU)
    assert r == {"threads": 1, "wait": None, "spin": None, "governor": False, "cpus": r["cpus"]}
    r = fresh(THREE_CPUS)
    assert (r["threads"], r["wait"], r["spin"], r["governor"]) == (3, None, None, True)


def test_users_choices_win():
    assert fresh(ONE_CPU, OMP_WAIT_POLICY="ACTIVE")["wait"] == "ACTIVE"
    two = fresh(ONE_CPU, OMP_NUM_THREADS="2")
    assert two["threads"] == 2 and not two["governor"]  # the user's OMP_NUM_THREADS, not the quota's 1
    off = fresh(ONE_CPU, TINYSERVE_THREADS="off")
    assert off["threads"] == off["cpus"] and not off["governor"]  # torch as it starts: one per CPU
    assert fresh(ONE_CPU, TINYSERVE_THREADS="No")["threads"] == off["cpus"]
    fixed = fresh(THREE_CPUS, TINYSERVE_THREADS="2")
    assert fixed["threads"] == 2 and not fixed["governor"]  # a number: that many, no governor


def test_torch_set_num_threads_before_tinyserve_is_kept():
    # cpu_count + 1 is never torch's own start value, so it can only come from the user
    r = fresh("import os, torch; torch.set_num_threads(os.cpu_count() + 1)\n" + ONE_CPU)
    assert r["threads"] == os.cpu_count() + 1 and not r["governor"]


@pytest.mark.parametrize("value", ["many", "-1", "2.5", "auto-ish"])
def test_bad_tinyserve_threads_is_one_clear_line(value):
    env = {k: v for k, v in os.environ.items() if k != "TINYSERVE_THREADS"}
    env.update(TINYSERVE_THREADS=value, PYTHONPATH=LIB)
    out = subprocess.run([sys.executable, "-m", "tinyserve", "workloads"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"tinyserve: error: TINYSERVE_THREADS: must be auto, off (or 0, no, false) or a positive integer, got {value!r}"]
    code = "import tinyserve\ntry:\n    tinyserve.run('chapter-7.1-padding', 'static', dry_run=True)\nexcept ValueError as e:\n    print(e)"
    py = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert py.stdout.startswith("TINYSERVE_THREADS: must be auto, off")


class FakeMachine:
    """A clock, the main thread's run-queue wait and the other runnable threads, all set by the test."""

    def __init__(self, others: int = 0):
        self.t, self.wait, self.others, self.threads, self.sets = 0.0, 0, others, None, []

    def set(self, n):
        self.threads = n
        self.sets.append(n)

    def governor(self, threads=2, cpus=2):
        self.threads = threads
        return runner.Governor(threads, cpus, self.set, lambda: self.threads, clock=lambda: self.t,
                                    wait_ns=lambda: self.wait, others=lambda: self.others)

    def run(self, g, seconds, wait_share, step_s=0.005):
        """Steps of step_s for `seconds`, the main thread waiting `wait_share` of the time."""
        for _ in range(round(seconds / step_s)):
            g.before_step()
            self.t += step_s
            self.wait += int(wait_share * step_s * 1e9)


threads_mod = runner  # the governor's home


def test_governor_keeps_all_threads_alone():
    m = FakeMachine()
    g = m.governor()
    m.run(g, 5.0, wait_share=0.01)
    assert m.sets == [] and g.current == 2


def test_governor_drops_to_one_thread_beside_a_neighbour_and_comes_back_when_it_leaves():
    m = FakeMachine()
    g = m.governor()
    m.run(g, 0.2, wait_share=0.0)
    m.others = 1
    m.run(g, 0.1, wait_share=0.45)  # two threads beside a busy loop: the main thread waits 45% of the time
    assert m.sets == [1]
    m.run(g, 3.0, wait_share=0.0)  # one thread: no waiting, but the neighbour is still runnable
    assert m.sets == [1] and g.current == 1
    m.others = 0
    m.run(g, 0.1, wait_share=0.0)
    assert m.sets == [1, 2]


def test_governor_starts_with_one_thread_on_a_busy_machine_and_waits_out_its_hold():
    m = FakeMachine(others=1)
    g = m.governor()
    assert m.sets == [1]
    m.others = 0
    m.run(g, 0.1, wait_share=0.0)
    assert m.sets == [1, 2]
    m.run(g, 0.1, wait_share=0.3)
    assert m.sets == [1, 2, 1]
    m.run(g, threads_mod.RETRY_S * 0.8, wait_share=0.0)  # held at one thread for RETRY_S after contention
    assert m.sets == [1, 2, 1]
    m.run(g, threads_mod.RETRY_S * 0.4, wait_share=0.0)
    assert m.sets == [1, 2, 1, 2]


def test_governor_ignores_a_pause_and_yields_to_the_user():
    m = FakeMachine()
    g = m.governor()
    m.run(g, 0.1, wait_share=0.0)
    m.t += 60.0  # a notebook left idle between cells: the wait of that minute says nothing about contention
    m.wait += int(10e9)
    m.run(g, 0.1, wait_share=0.0)
    assert m.sets == []
    m.threads = 7  # the user called torch.set_num_threads(7)
    m.run(g, 0.1, wait_share=0.9)
    assert m.sets == [] and not g.active


def test_governor_takes_only_the_free_cpus_on_a_bigger_machine():
    m = FakeMachine(others=1)
    g = m.governor(threads=4, cpus=4)
    assert m.sets == [1]
    m.run(g, 0.1, wait_share=0.0)
    assert m.sets == [1, 3]  # three CPUs are free


class CountingGovernor:
    def __init__(self):
        self.calls = 0

    def before_step(self):
        self.calls += 1


def test_the_runner_asks_the_governor_before_every_step_and_the_model_never_does(monkeypatch):
    from helpers import make_random_model

    from tinyserve.core.tokenizer import EOS
    from tinyserve.engine import Engine

    g = CountingGovernor()
    monkeypatch.setattr(runner, "_governor", g)
    model = make_random_model(n_positions=64)
    trace = Engine(model).run("chapter-7.2-longtail", "continuous", workload_knobs={"n": 3}, max_model_len=64,
                              progress=False)
    assert trace.metrics()["num_steps"] > 1 and g.calls == trace.metrics()["num_steps"]
    g.calls = 0
    model.generate([EOS] * 4, 3, stop_at_eos=False)  # the model alone only computes
    assert g.calls == 0
