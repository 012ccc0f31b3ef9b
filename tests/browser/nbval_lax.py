"""nbval's `--nbval-lax` check, applied to the outputs a notebook made in its browser page.

The full run opens every chapter notebook (both editions) and widgets/demo.ipynb in JupyterLab, whose kernel runs
every cell; a second run of the same cells under nbval proved nothing the page could not. So the page hands its
cells' outputs back and they are checked here as nbval checks them: each cell marked NBVAL_CHECK_OUTPUT (comment
or metadata tag) against the committed notebook's outputs, by nbval's own rules (its stream coalescing and marker
parsing are called, not copied), and every cell for a glyph its font lacked (chapters/nbfonts.py). The root
conftest.py deselects the nbval items of a notebook whose page runs in the same session.
"""
from __future__ import annotations

import difflib
import importlib.util
from collections import defaultdict
from pathlib import Path

import nbformat
from nbval.plugin import coalesce_streams, find_comment_markers, find_metadata_tags, transform_streams_for_comparison

ROOT = Path(__file__).resolve().parents[2]

# the keys nbval leaves out of a comparison (IPyNbFile.skip_compare without --nbdime: images too)
SKIP = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
        "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}

# every code cell of the page's notebook: its source and its outputs as nbformat JSON, images left out (nbval
# does not compare them; they are most of the bytes)
OUTPUTS_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(c => c.model.type === 'code')
  .map(c => ({source: c.model.sharedModel.getSource(), outputs: c.model.outputs.toJSON().map(o => {
    if (o.data) { o.data = {...o.data}; delete o.data['image/png']; delete o.data['image/jpeg']; }
    return o;
  })}))"""


def _nbfonts():
    """chapters/nbfonts.py, the nbval run's glyph check (chapters/ is not on the tests' import path)."""
    spec = importlib.util.spec_from_file_location("nbfonts", ROOT / "chapters" / "nbfonts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nbfonts = _nbfonts()


def options(cell) -> dict:
    """nbval's options of a code cell under --nbval-lax: metadata tags, then comment markers (which win)."""
    opts = defaultdict(bool, find_metadata_tags(cell.metadata))
    opts.update(dict(find_comment_markers(cell.source)))
    opts.setdefault("check", False)  # lax: only marked cells are compared
    return opts


def _by_key(outputs) -> dict[str, list]:
    """Outputs as nbval compares them: streams merged and keyed by their name, data flattened, SKIP left out."""
    flat = defaultdict(list)
    for out in transform_streams_for_comparison(coalesce_streams(outputs)):
        for key, value in out.items():
            if key == "data":
                for mime, v in value.items():
                    if mime not in SKIP:
                        flat[mime].append(v)
            elif key not in SKIP:
                flat[key].append(value)
    return flat


def differs(ref: list, test: list) -> str:
    """Why outputs `test` fail nbval's comparison with the committed `ref` ('' if they pass)."""
    r, t = (_by_key([nbformat.from_dict(o) for o in outs]) for outs in (ref, test))  # copies: merging edits them
    if set(r) != set(t):
        return f"output fields {sorted(t)}, committed {sorted(r)}"
    for key in r:
        if r[key] != t[key]:
            a = "\n".join(map(str, r[key])).splitlines()
            b = "\n".join(map(str, t[key])).splitlines()
            diff = list(difflib.unified_diff(a, b, "committed", "this run", lineterm="", n=1))
            return f"{key!r} differs:\n" + "\n".join(diff[:40])
    return ""


def problems(notebook: str, cells: list[dict]) -> list[str]:
    """What nbval --nbval-lax (with chapters/nbfonts.py) would fail in `notebook`, given the page's code cells."""
    ref = [c for c in nbformat.read(ROOT / notebook, as_version=4).cells if c.cell_type == "code"]
    if [c.source for c in ref] != [c["source"] for c in cells]:
        return [f"the page's code cells are not {notebook}'s"]
    found = []
    for i, (cell, page) in enumerate(zip(ref, cells)):
        test = page["outputs"]
        opts = options(cell)
        if opts["skip"]:
            continue
        glyphs = nbfonts.missing_glyphs(test)
        if glyphs:
            found.append(f"Cell {i}: {nbfonts.glyph_failure(glyphs)}")
        if cell.execution_count is None:
            if cell.outputs:
                found.append(f"Cell {i}: unrun reference cell has outputs")
            continue
        why = differs(cell.outputs, test) if opts["check"] else ""
        if why:
            found.append(f"Cell {i} (NBVAL_CHECK_OUTPUT): {why}")
    return found
