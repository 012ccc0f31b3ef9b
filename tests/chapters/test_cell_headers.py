"""The cell headers of a chapter source: `# %% [reveal]` tags a cell that settles a prediction (its code one
`with QUESTION.after_prediction():` block, or the build stops), `# %% [hide-code]` folds its source
(metadata.jupyter, which JupyterLab honours); a header build.py cannot read stops the build."""
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
# NBVAL_CHECK_OUTPUT
with p.after_prediction():
    print(x)

    print(x + 1)

# %% [hide-code]
y = 2

# %% [reveal, hide-code]
with p.after_prediction():
    print(y)
"""


def test_headers_tag_reveal_cells_and_fold_code_but_never_an_output():
    cells = build.parse(SRC)
    assert [c.cell_type for c in cells] == ["markdown", "code", "code", "code", "code"]
    assert [c.metadata.get("jupyter") for c in cells] == [None, None, None, {"source_hidden": True},
                                                          {"source_hidden": True}]
    assert [c.metadata.get("tags") for c in cells] == [None, None, ["reveal"], None, ["reveal"]]
    assert cells[2].source.startswith("# NBVAL_CHECK_OUTPUT\nwith p.after_prediction():\n    print(x)")


@pytest.mark.parametrize("body", ["print(x)",  # not in the block: Run All would show it
                                  "with p.after_prediction():\n    print(x)\nprint(x)",  # a line after the block
                                  "y = 1\nwith p.after_prediction():\n    print(x)",  # a line before it
                                  "with open('f'):\n    print(x)"])
def test_a_reveal_cell_that_is_not_one_after_prediction_block_stops_the_build(body):
    with pytest.raises(build.EditionError, match="after_prediction"):
        build.parse(f"# %% [reveal]\n# NBVAL_CHECK_OUTPUT\n{body}\n")


@pytest.mark.parametrize("header", ["# %% [revael]", "# %% [markdown, reveal]", "# %% reveal"])
def test_a_header_build_cannot_read_stops_the_build_naming_it(header):
    with pytest.raises(build.EditionError, match="cell header"):
        build.parse(f"# %%\nx = 1\n\n{header}\nprint(x)\n")


def test_the_built_notebooks_hold_what_the_headers_ask_in_both_editions():
    """What the source asks for is what the committed notebooks hold (a stale build fails here)."""
    marks = lambda md: (md.get("jupyter", {}), md.get("tags", []))  # noqa: E731
    for src in sorted((CHAPTERS / "src").glob("7.*.py")):
        want = [marks(c.metadata) for c in build.parse(src.read_text(encoding="utf-8"))]
        asks = "Predict(" in src.read_text(encoding="utf-8") or "Choose(" in src.read_text(encoding="utf-8")
        assert any(tags == ["reveal"] for _, tags in want) == asks, src.stem  # every lesson that asks reveals
        for folder in (CHAPTERS, CHAPTERS / "zh-TW"):
            nb = json.loads((folder / f"{src.stem}.ipynb").read_text(encoding="utf-8"))
            got = [marks(c.get("metadata", {})) for c in nb["cells"]]
            assert got == want, f"{folder.name}/{src.stem}.ipynb: rebuild it (python chapters/build.py)"
