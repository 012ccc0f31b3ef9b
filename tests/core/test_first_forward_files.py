"""The way to the first forward pass: how many of lib/tinyserve's files a real run's code runs through from
`Engine().run(...)` to its first `TinyGPT.forward_step` (sys.setprofile in a fresh interpreter), and that it loads
no catalog on the way (words a run may never show are kept as data and looked up when shown: core.kv.words).

What counts: a file whose functions (methods, comprehensions) run during the call. Imports do not: the probe
first imports every module of the layers a run uses (core, cost, trace, model, the loop and the engine), as a
kernel has them after its first run, so a module's import-time code counts nowhere, whether a run imports it
lazily (the model, a dry run never loads torch) or at the top; the functions it calls at import time (torch's
thread count) are then not counted either. Loading the weights is counted: `Engine()` loads them on first use."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LIB = str(Path(__file__).resolve().parents[2] / "lib")
# Issue 48's 12 (nano-vllm reaches its model in 3 files; we were at 22, 21 counted this way): engine, loop, config
# (RunConfig and every knob's rule; knobs.py is data), workloads, request, scheduler (the Scheduler and the Policy
# base), the policy, the slab pool, the clock and its presets, the runner (the weights, the thread governor) and the
# model (with the step's tensors and each layout's K/V). Words stay data until shown (no lang/)
LIMIT = 12
PROBE = """
import importlib, json, os, pkgutil, sys
import tinyserve
from tinyserve import lang
from tinyserve.engine import Engine

for sub in ("core", "cost", "trace", "model"):  # imports are not the run's code (the module docstring)
    pkg = importlib.import_module("tinyserve." + sub)
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
importlib.import_module("tinyserve.loop")

PKG = os.path.dirname(tinyserve.__file__) + os.sep
GPT = os.path.join(PKG, "model", "gpt.py")
files, reached = [], []


class First(Exception):
    pass


def watch(frame, event, arg):
    if event != "call":
        return
    f = frame.f_code.co_filename
    if f.startswith(PKG) and f[len(PKG):] not in files:
        files.append(f[len(PKG):])
    if f == GPT and frame.f_code.co_name == "forward_step":
        reached.append(True)
        sys.setprofile(None)
        raise First  # stop there: the rest of the run is not the way in


sys.setprofile(watch)
try:  # a real run under the modeled clock (no warm-up step): its own first step is the first forward
    Engine().run("chapter-7.1-padding", "continuous", progress=False)
except First:
    pass
finally:
    sys.setprofile(None)
print(json.dumps({"files": files, "reached": bool(reached), "catalog": lang._english is not None or
                  bool(lang._translated)}))
"""


@pytest.fixture(scope="module")
def way_in() -> dict:
    env = dict(os.environ, PYTHONPATH=LIB + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["reached"], r["files"]
    return r


def test_the_first_forward_loads_no_catalog(way_in):
    assert not way_in["catalog"]
    assert not [f for f in way_in["files"] if f.startswith("lang/") and f != "lang/__init__.py"], way_in["files"]


def test_a_run_reaches_its_first_forward_through_few_files(way_in):
    files = way_in["files"]
    assert len(files) <= LIMIT, f"{len(files)} files on the way to the first forward:\n" + "\n".join(files)
