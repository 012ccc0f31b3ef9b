"""The flat layout's module paths (`tinyserve.policies`, ...): they still import, for submitted notebooks only.

Every test of an old path lives here. Old paths are aliases (`tinyserve._moved`): the same module object as the
new path, so classes and monkeypatching behave the same. First-party code imports only the new paths: the scan at
the bottom fails on any old-path import in the package, widgets, chapters, benchmarks, tests, docs or README.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from tinyserve._moved import MOVED

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"}

OLD_NAMES = {  # what notebooks, exercises, students' solutions and the README imported from the old paths
    "tinyserve.policies": ["Plan", "Policy", "decode_work", "KNOBS", "POLICIES", "DONE", "StaticBatching",
                           "DynamicBatching", "ContinuousBatching", "ChunkedPrefill", "make_policy"],
    "tinyserve.requests": ["Request", "Work", "FINISHED", "REJECTED"],
    "tinyserve.workloads": ["get_workload", "make_prompt", "load_jsonl", "WORKLOADS", "PROMPTS_FILE",
                            "list_workloads"],
    "tinyserve.tokenizer": ["BOS", "EOS", "VOCAB_SIZE", "encode", "decode"],
    "tinyserve.clock": ["ModeledClock", "PRESET_DIR", "DEFAULT_HARDWARE", "HardwarePreset", "get_preset",
                        "list_presets", "save_preset"],
    "tinyserve.cache": ["sequences_that_fit", "SlotPool"],
    "tinyserve.variants": ["ChunkOnly", "SeparatePrefill", "WholePromptBudget"],
    "tinyserve.sweeps": ["stall_bound_s", "median_queue_s", "MAX_QUEUE_S", "CapacityCurve", "Setting"],
    "tinyserve.figures": ["frames", "iterations", "story", "token_iterations", "waiting_on"],
    "tinyserve.validation": ["format_table", "goals_met", "load_table"],
    "tinyserve.calibration": ["FULL_PLAN", "calibrate"],
    "tinyserve.bench": ["format_table"],
    "tinyserve.hf": ["export_hf", "serve_command", "to_hf_model"],
    "tinyserve.replay": ["replay", "wait_ready"],
    "tinyserve.cli": ["main"],
    # paths that did not move, whose names the same notebooks import
    "tinyserve.engine": ["Engine", "Run"],
    "tinyserve.trace": ["Trace", "GRID_PHASES", "REQUEST_STATES", "DECODE", "IDLE", "PADDING", "PREFILL", "WASTED"],
    "tinyserve.model": ["TinyGPT", "GPTConfig", "load_model", "CHECKPOINT_DIR", "KVCache", "build_step"],
    "tinyserve.errors": ["TinyserveError"],
    "tinyserve.threads": ["usable_cpus"],
}

# Run in a fresh interpreter: each old path is imported before its new one, as a submitted notebook does.
IMPORT_EVERY_OLD_PATH = """
import importlib, json, sys
import tinyserve
from tinyserve._moved import MOVED
out = {}
for old, new in MOVED.items():
    fresh = "tinyserve." + new not in sys.modules
    by_name = importlib.import_module("tinyserve." + old)
    ns = {}
    exec(f"import tinyserve.{old}", ns)  # the statement form; the old name is then an attribute path
    by_statement = eval(f"tinyserve.{old}", ns)
    pkg, _, leaf = ("tinyserve." + old).rpartition(".")
    exec(f"from {pkg} import {leaf} as m", ns)
    new_mod = importlib.import_module("tinyserve." + new)
    out[old] = {"fresh": fresh, "name": by_name.__name__,
                "same": by_name is by_statement is ns["m"] is new_mod is sys.modules["tinyserve." + old]}
names = {m: [n for n in ns_ if not hasattr(importlib.import_module(m), n)] for m, ns_ in %r.items()}
print(json.dumps({"modules": out, "missing": {m: n for m, n in names.items() if n}}))
""" % (OLD_NAMES,)


def test_every_old_path_is_the_new_module_object():
    p = subprocess.run([sys.executable, "-c", IMPORT_EVERY_OLD_PATH], capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert set(got["modules"]) == set(MOVED)
    for old, new in MOVED.items():
        r = got["modules"][old]
        assert r["same"], f"tinyserve.{old} is not tinyserve.{new}"
        assert r["name"] == f"tinyserve.{new}", f"tinyserve.{old} loaded a copy named {r['name']}"
    # most old paths are the first import of their module: the alias loads it then, once, under its new name
    assert sum(r["fresh"] for r in got["modules"].values()) >= len(MOVED) // 2
    assert got["missing"] == {}, f"names old notebooks import are gone: {got['missing']}"


def test_python_m_with_an_old_path_runs_the_moved_module():
    old = subprocess.run([sys.executable, "-m", "tinyserve.cli", "--help"], capture_output=True, text=True,
                         env=ENV, timeout=120)
    new = subprocess.run([sys.executable, "-m", "tinyserve", "--help"], capture_output=True, text=True,
                         env=ENV, timeout=120)
    assert old.returncode == 0, old.stderr[-2000:]
    assert old.stdout == new.stdout and "workloads" in old.stdout


# ---- first-party code imports only the new paths -------------------------------------------------------------

_OLD = "|".join(re.escape(o) for o in sorted(MOVED, key=len, reverse=True))
# `from tinyserve.policies import X`, `import tinyserve.policies`: in code, in strings (`python -c`, a submission's
# cell) and in code examples
_IMPORT = re.compile(rf"\bfrom\s+tinyserve\.(?:{_OLD})(?![\w])[\w.]*\s+import\b"
                     rf"|\bimport\s+(?:[\w.]+(?:\s+as\s+\w+)?\s*,\s*)*tinyserve\.(?:{_OLD})(?!\w)")
# `from tinyserve import sweeps`, `from tinyserve.core import run`: a moved module as an attribute
_FROM_PACKAGE = re.compile(r"""\bfrom\s+(tinyserve(?:\.\w+)*)\s+import\s+(?:\(([^)]*)\)|([^\n#;\\"']*))""")
# "tinyserve.cli" as a whole string: `-m` targets, import_module, monkeypatch targets, __import__
_QUOTED = re.compile(rf"""["']tinyserve\.(?:{_OLD})(?:\.\w+)*["']""")


def old_path_imports(text: str) -> list[str]:
    """The old-path imports written in a text (source, a cell, markdown), each as it is written."""
    found = [m.group(0) for m in _IMPORT.finditer(text)] + [m.group(0) for m in _QUOTED.finditer(text)]
    for m in _FROM_PACKAGE.finditer(text):
        pkg = m.group(1)[len("tinyserve."):]
        for name in (m.group(2) or m.group(3)).split(","):
            name = name.split()[0] if name.split() else ""
            if (f"{pkg}.{name}" if pkg else name) in MOVED:
                found.append(f"from {m.group(1)} import {name}")
    return found


def relative_old_imports(source: str, package: tuple[str, ...]) -> list[str]:
    """A package file's relative imports that resolve to an old path (`from ..policies import X` in tinyserve/core/)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package[:len(package) - node.level + 1] + ((node.module,) if node.module else ()))
            for target in [base] + [f"{base}.{a.name}" for a in node.names]:
                if target.startswith("tinyserve.") and target[len("tinyserve."):] in MOVED:
                    found.append(f"from {'.' * node.level}{node.module or ''} import ... ({target})")
    return found


def _cell_sources(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def first_party_files() -> list[Path]:
    """What we write by hand (generated notebooks and the exercises come from these)."""
    files = [p for p in (ROOT / "lib" / "tinyserve").rglob("*") if p.suffix in (".py", ".md")
             and p.name != "_moved.py"]  # _moved.py documents the old paths
    for folder, suffixes in [("widgets", (".py", ".md", ".ipynb")), ("chapters/src", (".py",)),
                             ("chapters/solutions", (".ipynb",)), ("benchmarks", (".py", ".sh", ".md")),
                             ("tests", (".py",)), ("docs", (".md",)), ("binder", (".py", ".md", ".txt"))]:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes and ".ipynb_checkpoints" not in p.parts]
    files.append(ROOT / "README.md")
    return sorted(p for p in files if p.is_file() and p != Path(__file__).resolve())


def test_the_scan_finds_old_path_imports_and_nothing_else():
    text = ("from tinyserve.policies import Plan\nimport tinyserve.cli as cli\nfrom tinyserve import lang, sweeps\n"
            "from tinyserve.core import run\nfrom tinyserve import (\n    engine,\n    validation,\n)\n"
            "import os, tinyserve.engine as e, tinyserve.core.run\n"
            'importlib.import_module("tinyserve.clock")\n[sys.executable, "-m", "tinyserve.cli"]\n'
            'monkeypatch.setattr("tinyserve.clock.make_clock", f)\n'
            '"d-answer": "from tinyserve.variants import ChunkOnly\\n"\n')
    assert old_path_imports(text) == [
        "from tinyserve.policies import", "import tinyserve.cli", "import os, tinyserve.engine as e, tinyserve.core.run",
        "from tinyserve.variants import",
        '"tinyserve.clock"', '"tinyserve.cli"', '"tinyserve.clock.make_clock"',
        "from tinyserve import sweeps", "from tinyserve.core import run", "from tinyserve import validation"]
    fine = ("from tinyserve.core.scheduling import Plan\nfrom tinyserve.cost.clock import ModeledClock\n"
            "from tinyserve.core.runner import x\nimport tinyserve.configs\nfrom tinyserve import lang, engine\n"
            "from tinyserve.analysis import sweeps\nfrom tinyserve.loop import Run\n"
            "from tinyserve import lang\nfrom x import a, sweeps\n"
            '"expected a class that subclasses tinyserve.policies.Policy"\n'
            "(retrain with `python -m tinyserve.train`)\n`tinyserve.policies` still imports, as the same module\n")
    assert old_path_imports(fine) == []
    src = "from ..policies import Plan\nfrom .. import sweeps\nfrom . import run, kv\nfrom ..cost.clock import x\n"
    assert relative_old_imports(src, ("tinyserve", "core")) == [
        "from ..policies import ... (tinyserve.policies)", "from .. import ... (tinyserve.sweeps)",
        "from . import ... (tinyserve.core.run)"]
    assert relative_old_imports("from .policies import Plan\n", ("tinyserve", "core")) == []


def test_first_party_code_imports_only_the_new_paths():
    files = first_party_files()
    assert len(files) > 100 and ROOT / "widgets" / "tinyserve_widgets" / "explorer.py" in files
    bad = []
    for p in files:
        text = _cell_sources(p) if p.suffix == ".ipynb" else p.read_text(encoding="utf-8")
        found = old_path_imports(text)
        if p.suffix == ".py" and (ROOT / "lib") in p.parents:
            found += relative_old_imports(text, p.parent.relative_to(ROOT / "lib").parts)
        bad += [f"{p.relative_to(ROOT)}: {f}" for f in found]
    assert bad == [], "old module paths (tinyserve._moved.MOVED) imported by first-party code:\n" + "\n".join(bad)
