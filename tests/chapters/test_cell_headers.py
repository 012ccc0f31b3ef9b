"""The cell headers of a chapter source: `# %% [reveal]` stores a cell's outputs collapsed, `# %% [hide-code]` folds
its source (metadata.jupyter, which JupyterLab honours); a header build.py cannot read stops the build."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
sys.path.insert(0, str(CHAPTERS))
try:
    import build
finally:
    sys.path.remove(str(CHAPTERS))

SRC = """# %% [markdown]
# Predict first.

# %%
x = 1

# %% [reveal]
print(x)

# %% [hide-code]
y = 2

# %% [reveal, hide-code]
print(y)
"""


def test_headers_fold_outputs_or_source_and_nothing_else():
    cells = build.parse(SRC)
    assert [c.cell_type for c in cells] == ["markdown", "code", "code", "code", "code"]
    assert [c.metadata.get("jupyter") for c in cells] == [
        None, None, {"outputs_hidden": True}, {"source_hidden": True},
        {"outputs_hidden": True, "source_hidden": True}]
    assert [c.source for c in cells[1:]] == ["x = 1", "print(x)", "y = 2", "print(y)"]


@pytest.mark.parametrize("header", ["# %% [revael]", "# %% [markdown, reveal]", "# %% reveal"])
def test_a_header_build_cannot_read_stops_the_build_naming_it(header):
    with pytest.raises(build.EditionError, match="cell header"):
        build.parse(f"# %%\nx = 1\n\n{header}\nprint(x)\n")


def test_a_reveal_cell_of_the_built_notebooks_is_stored_collapsed_in_both_editions():
    """What the source asks for is what the committed notebooks hold (a stale build fails here)."""
    for src in sorted((CHAPTERS / "src").glob("7.*.py")):
        want = [c.metadata.get("jupyter", {}) for c in build.parse(src.read_text(encoding="utf-8"))]
        for folder in (CHAPTERS, CHAPTERS / "zh-TW"):
            nb = json.loads((folder / f"{src.stem}.ipynb").read_text(encoding="utf-8"))
            got = [c.get("metadata", {}).get("jupyter", {}) for c in nb["cells"]]
            assert got == want, f"{folder.name}/{src.stem}.ipynb: rebuild it (python chapters/build.py)"
