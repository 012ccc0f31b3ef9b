"""The package's layers as tests: imports run one way (every import counts: module level, inside functions, under
TYPE_CHECKING), no import cycle between files, core/cost/trace/loop free of torch, a dry run under every preset with
torch made unimportable (one import path per name, the old flat module paths gone: test_old_paths.py)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "lib" / "tinyserve"
WIDGETS = ROOT / "widgets" / "tinyserve_widgets"
# The order, lowest first (README, "Layout"): a module imports only from its own layer or lower ones.
LAYERS = (
    ("tinyserve.errors", "tinyserve.lang"),  # the error type and the words
    ("tinyserve.core",),  # requests, RunConfig, KV slots and blocks, policies, workloads: what a plan needs
    ("tinyserve.cost",),  # presets, the price of a step, clocks
    ("tinyserve.trace",),  # the record of a run
    ("tinyserve.loop", "tinyserve.port"),  # the step loop: plan -> runner -> clock -> record; the port a deployment drives it through
    ("tinyserve.model", "tinyserve.threads"),  # torch: the tiny GPT, its runner, torch's threads
    ("tinyserve.engine", "tinyserve.deploy"),  # the wiring: a model for the loop; deployments of several runs
    ("tinyserve.analysis",),  # what lessons compute from traces
    ("tinyserve.tools", "tinyserve.classroom"),
    ("tinyserve", "tinyserve.__main__"),  # the public API and the command
    ("tinyserve_widgets",),
)
LOWER = ("core", "cost", "trace", "loop.py")  # what a dry run imports
FORBIDDEN_IN_LOWER = ("tinyserve.model", "tinyserve.tools", "tinyserve.engine", "torch", "transformers")


def layer_of(module: str) -> int:
    """The rank of a first-party module in LAYERS (the longest matching prefix)."""
    best, rank = "", None
    for i, names in enumerate(LAYERS):
        for n in names:
            if (module == n or module.startswith(n + ".")) and len(n) > len(best):
                best, rank = n, i
    if rank is None:
        raise KeyError(f"{module}: in no layer (add it to LAYERS)")
    return rank


def module_name(path: Path) -> str:
    root = PKG.parent if path.is_relative_to(PKG) else WIDGETS.parent
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module this file imports: at the top, inside a function or under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
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
    """First-party module -> the first-party modules it imports (package and widgets)."""
    mods = {module_name(p): p for root in (PKG, WIDGETS) for p in root.rglob("*.py")}
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


def test_the_graph_sees_function_level_relative_and_type_checking_imports():
    # a check that found nothing because it parsed nothing would pass: make sure it sees known edges
    g = graph()
    assert "tinyserve.core.scheduling" in g["tinyserve.loop"]
    assert "tinyserve.model.runner" in g["tinyserve.engine"]  # imported inside Engine._runner_for
    assert "tinyserve.model.runner" in g["tinyserve.tools.cli"]  # inside cmd_generate
    assert "tinyserve.model.gpt" in g["tinyserve.engine"]  # under TYPE_CHECKING


def test_every_module_has_a_layer():
    assert [m for m in graph() if not _has_layer(m)] == []


def _has_layer(m: str) -> bool:
    try:
        layer_of(m)
    except KeyError:
        return False
    return True


def against_the_order(g: dict[str, set[str]]) -> list[str]:
    """Every arrow from a lower layer to a higher one."""
    return sorted(f"{a} -> {b}" for a, deps in g.items() for b in deps if layer_of(b) > layer_of(a))


def test_imports_run_down_the_layers():
    assert against_the_order(graph()) == []


def test_the_order_check_fails_on_an_upward_arrow():
    g = {"tinyserve.core.kv": {"tinyserve.cost.presets"}, "tinyserve.cost.clock": {"tinyserve.core.kv"}}
    assert against_the_order(g) == ["tinyserve.core.kv -> tinyserve.cost.presets"]


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
        for path in sorted((PKG / layer).rglob("*.py")) if layer != "loop.py" else [PKG / layer]:
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

