"""The browser pages' nbval check (nbval_lax.py) passes and fails where nbval --nbval-lax with chapters/nbfonts.py
does. No browser: these run in the quick tier."""
from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from .nbval_lax import differs, options, problems


def out(kind: str, **kw) -> dict:
    return new_output(kind, **kw)


def stdout(text: str) -> dict:
    return out("stream", name="stdout", text=text)


def nb_with(tmp_path, cells) -> str:
    nb = new_notebook(cells=cells)
    path = tmp_path / "probe.ipynb"
    path.write_text(nbformat.writes(nb))
    return str(path)


def test_streams_are_merged_and_read_as_the_page_shows_them():
    assert differs([stdout("a\nb\n")], [stdout("a\n"), stdout("b\n")]) == ""
    assert differs([stdout("50%\r100%\n")], [stdout("100%\n")]) == ""  # a progress bar's carriage returns
    assert "differs" in differs([stdout("a\nb\n")], [stdout("a\nc\n")])


def test_what_nbval_skips_is_skipped_and_the_rest_is_compared():
    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "abc"}, "text/plain": "VBox()"}
    other = {"application/vnd.jupyter.widget-view+json": {"model_id": "xyz"}, "text/plain": "VBox()"}
    assert differs([out("display_data", data=widget)], [out("display_data", data=other)]) == ""
    png = [out("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"})]
    assert differs(png, [out("display_data", data={"image/png": "BBBB", "text/plain": "<Figure>"})]) == ""
    assert differs([out("execute_result", data={"text/plain": "3"}, execution_count=1)],
                   [out("execute_result", data={"text/plain": "3"}, execution_count=9)]) == ""
    assert "text/plain" in differs([out("execute_result", data={"text/plain": "3"}, execution_count=1)],
                                   [out("execute_result", data={"text/plain": "4"}, execution_count=1)])
    # a stream more or less: nbval fails on the missing field
    assert "output fields" in differs([stdout("x\n"), out("stream", name="stderr", text="w\n")], [stdout("x\n")])


def test_markers_as_nbval_reads_them():
    assert options(new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)"))["check"]
    assert not options(new_code_cell("print(1)"))["check"]  # lax: unmarked cells are not compared
    assert not options(new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(1)"))["check"]
    assert options(new_code_cell("print(1)", metadata={"tags": ["nbval-check-output"]}))["check"]
    assert options(new_code_cell("# NBVAL_SKIP\nprint(1)"))["skip"]


def test_a_notebook_fails_on_a_changed_checked_output_or_a_missing_glyph_and_passes_as_committed(tmp_path):
    checked = new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)", execution_count=1, outputs=[stdout("1\n")])
    free = new_code_cell("print(2)", execution_count=2, outputs=[stdout("2\n")])
    path = nb_with(tmp_path, [checked, free])
    page = lambda a, b: [{"source": checked.source, "outputs": a}, {"source": free.source, "outputs": b}]  # noqa: E731
    assert problems(path, page([stdout("1\n")], [stdout("anything\n")])) == []
    assert [p.split(":")[0] for p in problems(path, page([stdout("7\n")], [stdout("2\n")]))] == \
        ["Cell 0 (NBVAL_CHECK_OUTPUT)"]
    glyph = out("stream", name="stderr", text="UserWarning: Glyph 20301 (\\N{CJK}) missing from font(s) DejaVu Sans.\n")
    assert [p.split(":")[0] for p in problems(path, page([stdout("1\n")], [stdout("2\n"), glyph]))] == ["Cell 1"]
    assert problems(path, page([stdout("1\n")], [])[:1]) == [f"the page's code cells are not {path}'s"]
