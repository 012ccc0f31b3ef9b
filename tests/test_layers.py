"""The package's layers as tests: no import cycle, core/cost/trace free of torch, the model and the tools, a dry run
under every preset with torch made unimportable, and the old flat module paths still importable."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "lib" / "tinyserve"
LOWER = ("core", "cost", "trace")  # what a dry run imports
FORBIDDEN_IN_LOWER = ("tinyserve.model", "tinyserve.tools", "tinyserve.engine", "torch", "transformers")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(path: Path) -> set[str]:
    """Every module this file imports, at the top or inside a function (not under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}  # `from . import threads` names a module
    return out


def graph() -> dict[str, set[str]]:
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    g = {}
    for name, path in mods.items():
        deps = set()
        for imp in imports_of(path):
            # an import of a.b.c depends on the longest existing module prefix of it
            parts = imp.split(".")
            while parts and ".".join(parts) not in mods:
                parts.pop()
            dep = ".".join(parts)
            # a module's own packages are imported before it whatever it says (`from . import x` names one)
            if dep and dep != name and not name.startswith(dep + "."):
                deps.add(dep)
        g[name] = deps
    return g


def test_the_graph_sees_function_level_and_relative_imports():
    # a check that found nothing because it parsed nothing would pass: make sure it sees known edges
    g = graph()
    assert "tinyserve.core.policies" in g["tinyserve.core.run"]
    assert "tinyserve.model.runner" in g["tinyserve.engine"]  # imported inside Engine._runner_for
    assert "tinyserve.model.checkpoint" in g["tinyserve.tools.cli"]  # inside cmd_generate


def test_no_import_cycle():
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)


def test_core_cost_and_trace_import_no_model_tool_or_torch():
    bad = []
    for layer in LOWER:
        for path in sorted((PKG / layer).rglob("*.py")):
            for imp in sorted(imports_of(path)):
                if imp.startswith(FORBIDDEN_IN_LOWER):
                    bad.append(f"{path.relative_to(PKG)} imports {imp}")
    assert bad == []


BLOCK_TORCH = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"{name} is blocked: a dry run must not need it")
sys.meta_path.insert(0, Block())
"""


def test_dry_runs_under_every_preset_without_torch():
    from tinyserve.cost.presets import list_presets

    code = BLOCK_TORCH + """
import json, tinyserve
from tinyserve.cost.presets import list_presets
out = {}
for preset in list_presets():
    for policy in ("static", "dynamic", "continuous", "chunked"):
        tr = tinyserve.run("chapter-7.3-long-prompt", policy, dry_run=True, hardware=preset)
        out[f"{preset} {policy}"] = tr.metrics()["num_steps"]
print(json.dumps(out))
"""
    env = {"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    steps = json.loads(p.stdout)
    assert len(steps) == 4 * len(list_presets()) and all(n > 0 for n in steps.values())


OLD_PATHS = {  # what notebooks, exercises, solutions and the README import today
    "tinyserve.engine": ["Engine", "Run"],
    "tinyserve.policies": ["Plan", "Policy", "decode_work", "KNOBS", "POLICIES", "DONE", "StaticBatching",
                           "DynamicBatching", "ContinuousBatching", "ChunkedPrefill", "make_policy"],
    "tinyserve.requests": ["Request", "Work", "FINISHED", "REJECTED"],
    "tinyserve.workloads": ["get_workload", "make_prompt", "load_jsonl", "WORKLOADS", "PROMPTS_FILE",
                            "list_workloads"],
    "tinyserve.trace": ["Trace", "GRID_PHASES", "REQUEST_STATES", "DECODE", "IDLE", "PADDING", "PREFILL", "WASTED"],
    "tinyserve.tokenizer": ["BOS", "EOS", "VOCAB_SIZE", "encode", "decode"],
    "tinyserve.model": ["TinyGPT", "GPTConfig", "load_model", "CHECKPOINT_DIR", "KVCache", "build_step"],
    "tinyserve.clock": ["ModeledClock", "PRESET_DIR", "HardwarePreset", "get_preset"],
    "tinyserve.cache": ["sequences_that_fit", "SlotPool"],
    "tinyserve.variants": ["ChunkOnly", "SeparatePrefill", "WholePromptBudget"],
    "tinyserve.sweeps": ["stall_bound_s", "MAX_QUEUE_S", "CapacityCurve", "Setting"],
    "tinyserve.figures": ["story"],
    "tinyserve.validation": ["format_table", "goals_met", "load_table"],
    "tinyserve.hf": ["export_hf", "to_hf_model"],
    "tinyserve.replay": ["replay"],
    "tinyserve.cli": ["main"],
    "tinyserve.errors": ["TinyserveError"],
    "tinyserve.threads": ["usable_cpus"],
}


def test_old_module_paths_still_import_the_same_objects():
    code = f"""
import importlib, json
old = {OLD_PATHS!r}
missing = [f"{{m}}.{{n}}" for m, names in old.items() for n in names if not hasattr(importlib.import_module(m), n)]
import tinyserve.engine, tinyserve.core.run, tinyserve.policies, tinyserve.core.policies
same = tinyserve.engine.Run is tinyserve.core.run.Run and tinyserve.policies is tinyserve.core.policies
print(json.dumps({{"missing": missing, "same": same}}))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout) == {"missing": [], "same": True}


def test_python_m_with_an_old_module_path_runs_the_moved_module():
    p = subprocess.run([sys.executable, "-m", "tinyserve.cli", "workloads"], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "chapter-7.1-padding" in p.stdout


def test_the_package_itself_imports_moved_modules_by_their_new_paths():
    # the old paths are for notebooks and students; inside the package an old path would hide an edge from the
    # graph above (it resolves only when imported)
    from tinyserve._moved import MOVED

    bad = [f"{p.relative_to(PKG)} imports {imp}" for p in sorted(PKG.rglob("*.py")) if p.name != "_moved.py"
           for imp in sorted(imports_of(p))
           if imp.startswith("tinyserve.") and imp.split(".")[1] in MOVED]
    assert bad == []
