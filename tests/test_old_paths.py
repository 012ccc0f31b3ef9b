"""One import path per name: the flat layout's module paths (`tinyserve.policies`, ...) are gone, and every import
takes a name from the module that defines it.

Before the package was split into layers its modules sat side by side (`from tinyserve.policies import Plan`); an
import hook kept those paths importable as aliases, `tinyserve.model` handed out its modules' names on first use
(a module __getattr__), and `tinyserve.trace` re-exported its record with a star. All three are gone: a name has
one path, the module that defines it (README, "Layout"). The exceptions are the public faces, which import their
names explicitly (FACES). Here: the old paths no longer import, nothing first-party (package, widgets, notebooks
and their sources, exercises, tests, benchmarks, docs, README) imports or documents one, and every import statement
names a module that defines what it imports.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"}
PACKAGES = {"tinyserve": ROOT / "lib" / "tinyserve", "tinyserve_widgets": ROOT / "widgets" / "tinyserve_widgets"}

MOVED = {  # old name under tinyserve -> where its module lives now (the only path)
    "requests": "core.request", "config": "core.config", "cache": "core.kv", "policies": "core.scheduling",
    "variants": "core.scheduling.variants", "workloads": "core.workloads",
    "tokenizer": "core.tokenizer", "clock": "cost.clock", "report": "trace.report",
    "sweeps": "analysis.sweeps", "figures": "analysis.figures",
    "cli": "tools.cli", "bench": "tools.bench", "replay": "tools.replay", "hf": "tools.hf", "train": "tools.train",
    "calibration": "tools.calibrate", "validation": "tools.validate",
    "core.run": "loop",  # the step loop left core/ (it needs the clock and the record, which sit above core)
    # issue 48's way to the first forward: the step's tensors beside the model, the weights and the thread governor
    # in the runner, what every policy shares beside the Scheduler
    "model.step": "model.gpt", "model.checkpoint": "model.runner", "core.scheduling.base": "core.scheduling.scheduler",
}

OLD_NAMES = {  # what notebooks, exercises and the README imported from the old paths
    "tinyserve.policies": ["Plan", "Policy", "decode_work", "StaticBatching", "make_policy"],
    "tinyserve.requests": ["Request", "Work", "FINISHED", "REJECTED"],
    "tinyserve.workloads": ["get_workload", "make_prompt", "load_jsonl"],
    "tinyserve.tokenizer": ["BOS", "EOS", "encode", "decode"],
    "tinyserve.clock": ["ModeledClock", "PRESET_DIR", "get_preset"],
    "tinyserve.cache": ["sequences_that_fit", "SlotPool"],
    "tinyserve.variants": ["ChunkOnly"],
    "tinyserve.sweeps": ["stall_bound_s"],
    "tinyserve.figures": ["frames"],
    "tinyserve.validation": ["load_table"],
    "tinyserve.calibration": ["calibrate"],
    "tinyserve.cli": ["main"],
}
# names that modules which still exist handed out for another module (a re-export, a __getattr__, a star)
REEXPORTED = {
    "tinyserve.model": ["TinyGPT", "GPTConfig", "load_model", "CHECKPOINT_DIR", "KVCache", "build_step"],
    "tinyserve.trace": ["Trace", "GRID_PHASES", "REQUEST_STATES", "DECODE", "PADDING", "StepRecord"],
    "tinyserve.trace.record": ["GRID_PHASES", "DECODE", "SlotWork", "_WORK_CODE"],
    "tinyserve.engine": ["check_requests", "PROGRESS_DELAY_S", "gc_paused"],
    "tinyserve.cost.clock": ["kv_hit_fraction", "PRESET_DIR", "list_presets", "save_preset"],
    "tinyserve.model.runner": ["DecodeGroup"],
    "tinyserve_widgets.words": ["set_language", "policy_name"],
}

# The public faces: packages (and the check cells' one module) that import their names explicitly for their
# readers. A name may be imported from one of these as well as from the module that defines it.
FACES = {
    "tinyserve": "the public API (__all__)",
    "tinyserve.core.scheduling": "Plan, Policy, the four policies, make_policy: what the exercises import",
    "tinyserve.deploy": "DeploymentConfig, run_deployment, ...: what the lessons import",
    "tinyserve.classroom.checks": "the module every check cell imports (and reloads)",
    "tinyserve_widgets": "the widgets' API (__all__)",
}

PROBE = """
import importlib, json, sys
import tinyserve
gone, kept = [], []
for old in %r:
    for how in ("module", "from"):
        try:
            if how == "module":
                importlib.import_module("tinyserve." + old)
            else:
                pkg, _, leaf = ("tinyserve." + old).rpartition(".")
                exec(f"from {pkg} import {leaf}", {})
        except ModuleNotFoundError as e:
            gone.append([old, how, "ModuleNotFoundError", e.name])
        except ImportError as e:
            gone.append([old, how, "ImportError", None])
        else:
            kept.append([old, how])
names = []
for path, ns in %r.items():
    for name in ns:
        try:
            exec(f"from {path} import {name}", {})
        except ModuleNotFoundError as e:
            names.append([path, name, "ModuleNotFoundError"])
        except ImportError:
            names.append([path, name, "ImportError"])
        else:
            names.append([path, name, "imported"])
sys.path.insert(0, %r)
for path, ns in %r.items():
    mod = importlib.import_module(path)
    for name in ns:
        names.append([path, name, "attribute" if hasattr(mod, name) else "absent"])
print(json.dumps({"gone": gone, "kept": kept, "names": names}))
""" % (list(MOVED), OLD_NAMES, str(ROOT / "widgets"), REEXPORTED)


def test_the_old_paths_are_gone():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert got["kept"] == [], f"old module paths still import: {got['kept']}"
    by_module = {(old, how): (kind, name) for old, how, kind, name in got["gone"]}
    for old in MOVED:
        assert by_module[(old, "module")] == ("ModuleNotFoundError", f"tinyserve.{old}")
        # `from tinyserve import cli`: no module, and the package has no attribute of that name either
        assert by_module[(old, "from")][0] in ("ModuleNotFoundError", "ImportError")
    old_names = [(path, name) for path, ns in OLD_NAMES.items() for name in ns]
    assert [(p_, n) for p_, n, how in got["names"] if how == "ModuleNotFoundError"] == old_names
    # a name a module only passed on is no longer there, by import or by attribute
    passed_on = [(p_, n, how) for p_, n, how in got["names"] if p_ in REEXPORTED]
    assert passed_on and all(how in ("ImportError", "absent") for _, _, how in passed_on), passed_on


def test_the_moved_modules_and_the_train_command_have_their_one_path():
    code = "import importlib\n" + "".join(f"importlib.import_module('tinyserve.{new}')\n" for new in MOVED.values())
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    # the documented command (lib/tinyserve/checkpoints/README.md, the missing-checkpoint message)
    new = subprocess.run([sys.executable, "-m", "tinyserve.tools.train", "--help"], capture_output=True,
                         text=True, env=ENV, timeout=120)
    assert new.returncode == 0 and "python -m tinyserve.tools.train" in new.stdout, new.stderr[-2000:]
    old = subprocess.run([sys.executable, "-m", "tinyserve.train", "--help"], capture_output=True, text=True,
                         env=ENV, timeout=120)
    assert old.returncode != 0 and "No module named tinyserve.train" in old.stderr


# ---- no first-party file imports or documents an old path -----------------------------------------------------

_OLD = "|".join(re.escape(o) for o in sorted(MOVED, key=len, reverse=True))
# `from tinyserve.policies import X`, `import tinyserve.policies`: in code, in strings (`python -c`, a submission's
# cell) and in code examples
_IMPORT = re.compile(rf"\bfrom\s+tinyserve\.(?:{_OLD})(?![\w])[\w.]*\s+import\b"
                     rf"|\bimport\s+(?:[\w.]+(?:\s+as\s+\w+)?\s*,\s*)*tinyserve\.(?:{_OLD})(?!\w)")
# `from tinyserve import sweeps`, `from tinyserve.core import run`: a moved module as an attribute
_FROM_PACKAGE = re.compile(r"""\bfrom\s+(tinyserve(?:\.\w+)*)\s+import\s+(?:\(([^)]*)\)|([^\n#;\\"']*))""")
# "tinyserve.cli" as a whole string: `-m` targets, import_module, monkeypatch targets, __import__
_QUOTED = re.compile(rf"""["']tinyserve\.(?:{_OLD})(?:\.\w+)*["']""")
# `python -m tinyserve.train`: a command under an old path, in prose or code
_COMMAND = re.compile(rf"-m\s+tinyserve\.(?:{_OLD})(?![\w.])")


def old_path_imports(text: str) -> list[str]:
    """The old-path imports and commands written in a text (source, a cell, markdown), each as it is written."""
    found = [m.group(0) for m in _IMPORT.finditer(text)] + [m.group(0) for m in _QUOTED.finditer(text)]
    found += [m.group(0) for m in _COMMAND.finditer(text)]
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
    """What we write, and the notebooks built from it: code, notebooks (every edition), docs."""
    files = [p for p in (ROOT / "lib" / "tinyserve").rglob("*") if p.suffix in (".py", ".md", ".pot", ".po")]
    for folder, suffixes in [("widgets", (".py", ".md", ".ipynb")), ("chapters", (".py", ".ipynb", ".md")),
                             ("benchmarks", (".py", ".sh", ".md")), ("tests", (".py",)), ("docs", (".md",)),
                             ("binder", (".py", ".md", ".txt"))]:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes and ".ipynb_checkpoints" not in p.parts]
    files += [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "conftest.py"]
    return sorted(p for p in files if p.is_file() and p != Path(__file__).resolve())


def test_the_scan_finds_old_path_imports_and_nothing_else():
    text = ("from tinyserve.policies import Plan\nimport tinyserve.cli as cli\nfrom tinyserve import lang, sweeps\n"
            "from tinyserve.core import run\nfrom tinyserve import (\n    engine,\n    validation,\n)\n"
            "import os, tinyserve.engine as e, tinyserve.core.run\n"
            'importlib.import_module("tinyserve.clock")\n[sys.executable, "-m", "tinyserve.cli"]\n'
            'monkeypatch.setattr("tinyserve.clock.make_clock", f)\n'
            '"d-answer": "from tinyserve.variants import ChunkOnly\\n"\n'
            "(retrain with `python -m tinyserve.train`)\n")
    assert old_path_imports(text) == [
        "from tinyserve.policies import", "import tinyserve.cli",
        "import os, tinyserve.engine as e, tinyserve.core.run", "from tinyserve.variants import",
        '"tinyserve.clock"', '"tinyserve.cli"', '"tinyserve.clock.make_clock"', "-m tinyserve.train",
        "from tinyserve import sweeps", "from tinyserve.core import run", "from tinyserve import validation"]
    fine = ("from tinyserve.core.scheduling import Plan\nfrom tinyserve.cost.clock import ModeledClock\n"
            "from tinyserve.core.runner import x\nimport tinyserve.configs\nfrom tinyserve import lang, engine\n"
            "from tinyserve.analysis import sweeps\nfrom tinyserve.loop import Run\n"
            "from tinyserve import lang\nfrom x import a, sweeps\n"
            '"expected a class that subclasses tinyserve.policies.Policy"\n'
            "(retrain with `python -m tinyserve.tools.train`)\n`tinyserve.policies` is gone\n")
    assert old_path_imports(fine) == []
    src = "from ..policies import Plan\nfrom .. import sweeps\nfrom . import run, kv\nfrom ..cost.clock import x\n"
    assert relative_old_imports(src, ("tinyserve", "core")) == [
        "from ..policies import ... (tinyserve.policies)", "from .. import ... (tinyserve.sweeps)",
        "from . import ... (tinyserve.core.run)"]
    assert relative_old_imports("from .policies import Plan\n", ("tinyserve", "core")) == []


def test_no_first_party_file_imports_an_old_path():
    files = first_party_files()
    assert len(files) > 100 and ROOT / "widgets" / "tinyserve_widgets" / "explorer.py" in files
    assert ROOT / "chapters" / "zh-TW" / "exercises" / "7.1-exercises.ipynb" in files
    bad = []
    for p in files:
        text = _cell_sources(p) if p.suffix == ".ipynb" else p.read_text(encoding="utf-8")
        found = old_path_imports(text)
        if p.suffix == ".py" and (ROOT / "lib") in p.parents:
            found += relative_old_imports(text, p.parent.relative_to(ROOT / "lib").parts)
        bad += [f"{p.relative_to(ROOT)}: {f}" for f in found]
    assert bad == [], "old module paths imported or documented:\n" + "\n".join(bad)


# ---- every import takes a name from the module that defines it ----------------------------------------------

def module_file(module: str) -> Path | None:
    top, *rest = module.split(".")
    if top not in PACKAGES:
        return None
    p = PACKAGES[top].joinpath(*rest)
    for f in (p / "__init__.py", p.with_suffix(".py")):
        if f.is_file():
            return f
    return None


_bound: dict[str, tuple[set[str], set[str]]] = {}


def bound_names(module: str) -> tuple[set[str], set[str]]:
    """(names the module defines at its top level, names it imports there): if/try blocks included."""
    if module not in _bound:
        defined, imported = set(), set()

        def visit(body):
            for n in body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined.add(n.name)
                elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
                    targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None)] + [
                        i.optional_vars for i in getattr(n, "items", [])]
                    defined.update(x.id for t in targets if t is not None
                                   for x in ast.walk(t) if isinstance(x, ast.Name))
                    if isinstance(n, (ast.For, ast.With)):
                        visit(n.body)
                elif isinstance(n, (ast.Import, ast.ImportFrom)):
                    imported.update((a.asname or a.name).split(".")[0] for a in n.names)
                elif isinstance(n, (ast.If, ast.Try)):
                    visit(n.body)
                    visit(n.orelse)
                    for h in getattr(n, "handlers", []):
                        visit(h.body)
                    visit(getattr(n, "finalbody", []))
        visit(ast.parse(module_file(module).read_text(encoding="utf-8")).body)
        _bound[module] = (defined, imported)
    return _bound[module]


def misplaced_imports(source: str, package: str | None = None) -> list[str]:
    """Each `from M import name` of a first-party module M that does not define name (nor has it as a submodule),
    unless M is a face; each import of a first-party module that does not exist; each star import."""
    tree = ast.parse("\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [f"line {node.lineno}: import {a.name} (no such module)" for a in node.names
                    if a.name.split(".")[0] in PACKAGES and module_file(a.name) is None]
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if package is None:
                continue
            parts = package.split(".")
            module = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
        else:
            module = node.module
        if module.split(".")[0] not in PACKAGES:
            continue
        if module_file(module) is None:
            bad.append(f"line {node.lineno}: from {module} (no such module)")
            continue
        defined, imported = bound_names(module)
        for a in node.names:
            if a.name == "*":
                bad.append(f"line {node.lineno}: from {module} import * (a star)")
            elif not (a.name in defined or module_file(f"{module}.{a.name}") is not None
                      or (module in FACES and a.name in imported)):
                bad.append(f"line {node.lineno}: from {module} import {a.name} (defined elsewhere)")
    return bad


def test_the_import_check_sees_a_name_taken_from_a_module_that_only_passes_it_on():
    assert misplaced_imports("from tinyserve.engine import Engine\nfrom tinyserve.loop import Run\n"
                             "from tinyserve.core.scheduling import Policy, StaticBatching\n"
                             "from tinyserve.model import gpt\nfrom tinyserve import run, set_language\n") == []
    assert misplaced_imports("from tinyserve.engine import Run\nfrom tinyserve.trace import Trace\n"
                             "from tinyserve.trace.record import *\nimport tinyserve.clock\n"
                             "from tinyserve.policies import Plan\n") == [
        "line 1: from tinyserve.engine import Run (defined elsewhere)",
        "line 2: from tinyserve.trace import Trace (defined elsewhere)",
        "line 3: from tinyserve.trace.record import * (a star)",
        "line 4: import tinyserve.clock (no such module)",
        "line 5: from tinyserve.policies (no such module)"]
    assert misplaced_imports("from .record import Trace\nfrom ..core import request\n", "tinyserve.trace") == []


def test_every_import_takes_a_name_from_the_module_that_defines_it():
    files = [p for p in first_party_files() if p.suffix in (".py", ".ipynb")]
    bad = []
    for p in files:
        if p.suffix == ".ipynb":
            source, package = _cell_sources(p), None
        else:
            source = p.read_text(encoding="utf-8")
            home = next((top for top, folder in PACKAGES.items() if folder in p.parents), None)
            package = (".".join((home,) + p.parent.relative_to(PACKAGES[home]).parts) if home else None)
        bad += [f"{p.relative_to(ROOT)} {b}" for b in misplaced_imports(source, package)]
    assert bad == [], "import a name from the module that defines it (or a face, FACES):\n" + "\n".join(bad)


def test_no_module_hands_out_names_by_getattr():
    bad = []
    for folder in PACKAGES.values():
        for p in sorted(folder.rglob("*.py")):
            tree = ast.parse(p.read_text(encoding="utf-8"))
            bad += [f"{p.relative_to(ROOT)}: module __getattr__" for n in tree.body
                    if isinstance(n, ast.FunctionDef) and n.name in ("__getattr__", "__dir__")]
    assert bad == []


def test_the_public_api_is_listed_and_light():
    import tinyserve

    assert tinyserve.__all__ == ["run", "shared_engine", "set_language", "language", "TinyserveError",
                                 "__version__"]
    assert all(hasattr(tinyserve, name) for name in tinyserve.__all__)
    source = module_file("tinyserve").read_text(encoding="utf-8")
    assert "import *" not in source and "__getattr__" not in source


# ---- no word the package says names a moved module by its old path --------------------------------------------

# `tinyserve.tokenizer` in a message ("not as tinyserve.tokenizer does"): a learner told to read a module that is gone
_NAMED = re.compile(rf"\btinyserve\.(?:{_OLD})(?![\w])")


def test_the_scan_for_named_old_modules():
    assert _NAMED.findall("not as tinyserve.tokenizer does; subclasses tinyserve.policies.Policy") == [
        "tinyserve.tokenizer", "tinyserve.policies"]
    assert _NAMED.findall("tinyserve.core.tokenizer, tinyserve.core.scheduling.Policy, tinyserve.configs") == []


def test_no_message_or_catalog_names_an_old_module():
    """Messages are read by people, who would look for the module they name: the catalogs and the package's code
    (its untranslated messages) name every module by the path it has now."""
    files = [p for p in (ROOT / "lib" / "tinyserve").rglob("*") if p.suffix in (".py", ".pot", ".po")]
    assert any(p.name == "cli.pot" for p in files) and any(p.name == "hf.py" for p in files)
    bad = [f"{p.relative_to(ROOT)}:{i}: {m}" for p in files
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) for m in _NAMED.findall(line)]
    assert bad == [], "old module paths named:\n" + "\n".join(bad)
