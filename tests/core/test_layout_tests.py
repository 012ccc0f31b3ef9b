"""Layouts do their own indexing (issue 48, item 3): outside the layout's own modules nobody asks which KV layout a
run has. This reads every file of lib/tinyserve and widgets/tinyserve_widgets (AST) for the ways of asking: a name
compared (`kv_layout == "paged"`, a layout string in a comparison), a flag (`block_size is None`, `if block_size:`,
`paged=`), a probe (`getattr` / `hasattr` of a paged-only attribute), a type test (`isinstance(x, PagedPool)`).
The layouts' own modules (core/kv.py, core/blocks.py) are where the answer lives, so they are not
read. At most MAX_TESTS such tests may remain, each with a comment on its line saying why."""
from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
DIRS = (ROOT / "lib" / "tinyserve", ROOT / "widgets" / "tinyserve_widgets")
OWN = {"lib/tinyserve/core/blocks.py"}  # the paged layout's own module
# core/kv.py is the slab layout's module and the pool interface, model/gpt.py the model and both layouts' K/V
# (SlabKV, PagedKV): read too, so a test there would count
MAX_TESTS = 3
LAYOUT_NAMES = {"slab", "paged"}
FLAGS = {"block_size", "bs", "paged", "kv_layout"}  # names whose truth or None-ness tells the layout
PROBED = {"free_blocks", "block_size", "num_blocks", "block_table", "for_layout", "slab_tokens", "block_spans"}
POOL_TYPES = {"PagedPool", "SlotPool", "KVPool", "SlabKV", "PagedKV"}


def _name(node: ast.AST) -> str | None:
    """The last name of x, a.b.x or a["x"]."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _is_layout_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value in LAYOUT_NAMES:
        return True
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_is_layout_name(e) for e in node.elts)


def layout_tests_in(tree: ast.AST) -> list[int]:
    """Line numbers where the code asks which layout it has."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_layout_name(s) for s in sides) or any(_name(s) == "kv_layout" for s in sides):
                lines.append(node.lineno)  # a layout's name compared
            elif (any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
                  and any(_name(s) in FLAGS for s in sides)):
                lines.append(node.lineno)  # block_size is None
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)) and _name(node.test) in FLAGS:
            lines.append(node.lineno)  # if block_size:
        elif isinstance(node, ast.BoolOp) and any(_name(v) in FLAGS for v in node.values[:-1]):
            lines.append(node.lineno)  # block_size and ...
        elif isinstance(node, ast.Call):
            fn = _name(node.func)
            if fn in ("getattr", "hasattr") and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and node.args[1].value in PROBED:
                lines.append(node.lineno)
            elif fn == "isinstance" and len(node.args) == 2 and (
                    _name(node.args[1]) in POOL_TYPES or isinstance(node.args[1], ast.Tuple)
                    and any(_name(e) in POOL_TYPES for e in node.args[1].elts)):
                lines.append(node.lineno)
            elif any(k.arg == "paged" for k in node.keywords):
                lines.append(node.lineno)
    return sorted(set(lines))


def layout_tests() -> list[tuple[str, int, str]]:
    """(file, line, source line) of every layout test outside the layouts' own modules."""
    out = []
    for d in DIRS:
        for path in sorted(d.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in OWN:
                continue
            text = path.read_text(encoding="utf-8")
            src = text.splitlines()
            out += [(rel, n, src[n - 1].strip()) for n in layout_tests_in(ast.parse(text))]
    return out


def test_the_reader_finds_each_kind_of_test():
    code = '''
if tr.kv_layout == "paged": pass
x = 1 if pool.block_size is None else 2
if self.block_size: pass
n = getattr(pool, "free_blocks", 0)
ok = isinstance(pool, PagedPool)
kv = KVCache(cfg, 1, 2, paged=True)
y = "paged" if layout in ("paged",) else "slab"
'''
    assert layout_tests_in(ast.parse(code)) == [2, 3, 4, 5, 6, 7, 8]
    assert layout_tests_in(ast.parse("pool.holds(n, free)\nlayout = config.kv_layout\n")) == []


def test_at_most_three_layout_tests_remain_each_saying_why():
    found = layout_tests()
    listing = "\n".join(f"{f}:{n}: {s}" for f, n, s in found)
    assert len(found) <= MAX_TESTS, f"{len(found)} layout tests:\n{listing}"
    assert all("#" in s or _comment_above(f, n) for f, n, s in found), listing


def test_the_model_runner_loop_and_deployments_never_ask():
    """What is done: the model side, the run loop, the engine, the port, the deployments and the pools ask no layout
    (the one choice, core/config's POOLS table, aside: layout_kv and RunConfig ask it through pool_class)."""
    zones = ("lib/tinyserve/model/", "lib/tinyserve/loop.py", "lib/tinyserve/engine.py", "lib/tinyserve/port.py",
             "lib/tinyserve/deploy/coordinator.py", "lib/tinyserve/deploy/handover.py",
             "lib/tinyserve/deploy/instance.py", "lib/tinyserve/core/scheduling/", "lib/tinyserve/core/kv.py",
             "lib/tinyserve/core/config.py")
    found = [(f, n, s) for f, n, s in layout_tests() if f.startswith(zones)]
    # the one choice is a table (config.POOLS), which this reader does not see: none of its tests remain here
    assert found == [], found
    assert all("#" in s or _comment_above(f, n) for f, n, s in found)


def _comment_above(rel: str, line: int) -> bool:
    """The line before `line` is a comment (a why too long to share the line)."""
    return (ROOT / rel).read_text(encoding="utf-8").splitlines()[line - 2].strip().startswith("#")


def _function_at(rel: str, line: int) -> str:
    """The name of the top-level function or class whose body holds `line`."""
    for node in ast.parse((ROOT / rel).read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.lineno <= line <= node.end_lineno:
            return node.name
    return ""
