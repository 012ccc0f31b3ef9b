"""Glue: a value the notebook's code computed, put into its prose by chapters/build.py (both editions)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

import tinyserve
from tinyserve.lang import t
from tinyserve.lang.glue import ENV, glue, recorded

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
sys.path.insert(0, str(CHAPTERS))
try:
    import build
finally:
    sys.path.remove(str(CHAPTERS))


def test_glue_formats_returns_and_prints_nothing(capsys, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert glue("worst", 9.7123, "{:.1f}") == "9.7" and glue("steps", 4000, "{:,}") == "4,000"
    assert glue("word", "low") == "low"
    assert capsys.readouterr() == ("", "")


def test_the_glue_file_round_trip(tmp_path, monkeypatch):
    path = tmp_path / "glue.json"
    assert recorded(path) == {}  # no file yet: nothing recorded
    monkeypatch.setenv(ENV, str(path))
    glue("a", 1.25, "{:.1f}")
    glue("b", "低估")
    glue("a", 2.25, "{:.1f}")  # a name recorded again keeps the last value
    assert recorded(path) == {"a": "2.2", "b": "低估"} == json.loads(path.read_text(encoding="utf-8"))
    assert "低估" in path.read_text(encoding="utf-8")  # readable, not \u escapes
    assert not Path(f"{path}.tmp").exists()


def test_a_glued_word_is_in_the_kernels_language():
    try:
        tinyserve.set_language("zh-TW")
        assert glue("side", t("7.6.worst.low")) == "低估"
    finally:
        tinyserve.set_language("en")
    assert glue("side", t("7.6.worst.low")) == "low"


def notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else nbformat.v4.new_code_cell(c)
                for c in cells]
    nb.metadata["kernelspec"] = build.KERNEL
    return nb


def test_fill_puts_each_recorded_value_where_the_markdown_names_it():
    nb = notebook("md:The worst, {glue}`pct`% {glue}`side`; again {glue}`pct`.", 'print("{glue}`pct`")')
    build.fill_glue(nb, "7.9-demo", {"pct": "9.7", "side": "low", "unused": "1"})
    assert nb.cells[0].source == "The worst, 9.7% low; again 9.7."
    assert nb.cells[1].source == 'print("{glue}`pct`")'  # code is never touched


def test_a_name_no_cell_recorded_stops_the_build_naming_it_and_the_notebook():
    nb = notebook("md:The worst, {glue}`pct`% {glue}`side`.")
    with pytest.raises(build.EditionError, match=r"^7\.9-demo: \{glue\}`pct` is in the text but no cell recorded it "
                                                 r"\(nor side\)"):
        build.fill_glue(nb, "7.9-demo", {})


def test_build_fills_from_the_kernel_it_runs_and_stops_on_an_unrecorded_name(tmp_path, monkeypatch):
    """The kernel build.py starts records into a file of its own; the text is filled from it; --no-exec leaves
    the roles; a name the code did not record writes no notebook."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    code = "from tinyserve.lang.glue import glue\nglue('answer', 6 * 7)\n_ = glue('ratio', 2 / 3, '{:.2f}')"
    build.run_and_write(notebook(code, "md:The answer is {glue}`answer` ({glue}`ratio`)."), "7.9-demo", tmp_path,
                        execute=True)
    nb = nbformat.read(tmp_path / "7.9-demo.ipynb", as_version=4)
    assert nb.cells[1].source == "The answer is 42 (0.67)." and nb.cells[0].outputs == []  # prints nothing
    assert ENV not in os.environ and not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("7.9-demo-glue-*"))

    build.run_and_write(notebook(code, "md:{glue}`answer`"), "7.9-unrun", tmp_path, execute=False)
    assert nbformat.read(tmp_path / "7.9-unrun.ipynb", as_version=4).cells[1].source == "{glue}`answer`"

    with pytest.raises(build.EditionError, match=r"7\.9-missing: \{glue\}`nobody` is in the text but no cell"):
        build.run_and_write(notebook(code, "md:{glue}`answer` and {glue}`nobody`"), "7.9-missing", tmp_path,
                            execute=True)
    assert not (tmp_path / "7.9-missing.ipynb").exists() and ENV not in os.environ
