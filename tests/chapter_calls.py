"""The explorer calls of the chapters' sources (chapters/src/*.py), to build them as the notebooks do: each
top-level `tw.*Explorer(...)` call with the statements of the source its arguments need (the imports and the
assignments they name, found by reading the source, in source order)."""
from __future__ import annotations

import ast
from pathlib import Path


def _is_explorer(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "tw"
            and node.func.attr.endswith("Explorer"))


def _needs(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _gives(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def explorer_calls(path: Path) -> list[tuple[str, str]]:
    """(the program that builds what the call's arguments need, the call's source) of each explorer call."""
    text = path.read_text(encoding="utf-8")
    body = ast.parse(text).body
    out = []
    for i, stmt in enumerate(body):
        calls = [n for n in ast.walk(stmt) if _is_explorer(n)]
        for call in calls:
            want, keep = _needs(call) - {"tw"}, []
            for before in reversed(body[:i]):  # the last statement giving a name wins, as when the cells run
                if _gives(before) & want:
                    keep.append(before)
                    want = (want - _gives(before)) | _needs(before)
            program = "import tinyserve_widgets as tw\n" + "\n".join(
                ast.get_source_segment(text, s) for s in reversed(keep))
            out.append((program, ast.get_source_segment(text, call)))
    return out


