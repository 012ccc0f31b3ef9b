"""Reading a handed-back notebook: one reason when it is not one, and old files (no cell ids) made gradable.

Shared by the self-check and the grader, so a learner sees the same verdict on a file that the grader gives.
"""
from __future__ import annotations

import copy
import difflib
import json
import re
from pathlib import Path

from .text import say

CHECK_TAG, SOLUTION_TAG, SELF_CHECK_TAG, OPEN_TAG = "check", "solution", "self-check", "open"
# the one line of code that differs between editions of a notebook (chapters/build.py's SETUP)
SETUP_LINE = re.compile(r'^\s*tinyserve\.set_language\("([A-Za-z_-]+)"\)\s*$', re.M)


def tags(cell) -> list[str]:
    """A cell's tags."""
    return cell.get("metadata", {}).get("tags", [])


def read_notebook(path: Path):
    """(notebook, None), or (None, why the file is not a notebook we can read)."""
    import nbformat

    try:
        raw = path.read_bytes()
    except OSError as e:
        return None, say("unreadable", err=e.strerror)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, say("not_utf8")
    except json.JSONDecodeError as e:
        return None, say("bad_json", msg=e.msg, line=e.lineno, col=e.colno)
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, say("no_cells")
    lang = (data.get("metadata") or {}).get("kernelspec", {}) or {}
    language = str(lang.get("language") or (data.get("metadata") or {}).get("language_info", {}).get("name")
                   or "python")
    if language.lower() != "python":
        return None, say("other_language", lang=language, kernel=lang.get("name", "?"))
    if any(isinstance(c, dict) and "id" not in c for c in data["cells"]) and data.get("nbformat") == 4:
        data["nbformat_minor"] = min(4, data.get("nbformat_minor", 4))  # no ids: read it as 4.4, ids come later
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
        for cell in nb.cells:  # outputs of any kernel are thrown away: the grader runs the code itself
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.validate(nb)
    except Exception as e:  # noqa: BLE001 - any schema problem is the same answer for the student
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, say("bad_schema", err=first[:200])
    return nb, None


def give_ids(nb, handed_out) -> object:
    """A copy whose cells all have ids: a cell without one (nbformat 4.4) takes the id of the handed-out cell it
    lines up with (same type, in order, same source first), else a fresh one. Nothing is rejected."""
    import nbformat

    out = copy.deepcopy(nb)
    if all(c.get("id") for c in out.cells):
        return out
    ref = list(handed_out.cells)
    key = lambda c: (c.cell_type, c.source.strip())  # noqa: E731
    sm = difflib.SequenceMatcher(a=[key(c) for c in ref], b=[key(c) for c in out.cells], autojunk=False)
    taken = {c.get("id") for c in out.cells if c.get("id")}
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "insert" or op == "delete":
            continue
        pool = [r for r in ref[a0:a1]]
        for cell in out.cells[b0:b1]:  # equal: one to one; replace: the next of the same type, in order
            if cell.get("id"):
                continue
            match = next((r for r in pool if r.cell_type == cell.cell_type and r.get("id") not in taken), None)
            if match is not None:
                pool.remove(match)
                cell["id"] = match.get("id")
                taken.add(match.get("id"))
    n = 0
    for cell in out.cells:
        while not cell.get("id"):
            n += 1
            if f"added-{n}" not in taken:
                cell["id"] = f"added-{n}"
                taken.add(cell["id"])
    out.nbformat, out.nbformat_minor = 4, max(out.nbformat_minor, 5)
    nbformat.validate(out)
    return out


def edition(nb) -> str:
    """The language a notebook's setup line picks (its first `tinyserve.set_language("...")`), else "en"."""
    from ..lang import normalize

    for cell in nb.cells:
        m = SETUP_LINE.search(cell.source) if cell.cell_type == "code" else None
        if m:
            try:
                return normalize(m.group(1))
            except ValueError:
                break
    return "en"


def check_cells(nb) -> list:
    """The graded check cells of a notebook."""
    return [c for c in nb.cells if CHECK_TAG in tags(c)]


def points_of(cell) -> float:
    """The points a graded cell is worth (nbgrader's metadata first, as an instructor would change it there)."""
    md = cell.get("metadata", {})
    return float(md.get("nbgrader", {}).get("points", md.get("tinyserve", {}).get("points", 1)))


def label_of(cell) -> str:
    """The exercise a graded cell checks, as the score table names it."""
    return cell.get("metadata", {}).get("tinyserve", {}).get("exercise", cell.get("id"))
