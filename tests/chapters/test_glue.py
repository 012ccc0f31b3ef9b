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


def test_glue_returns_and_prints_nothing_so_a_last_line_shows_nothing(capsys, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert glue("worst", 9.7123, "{:.1f}") is None and glue("word", "low") is None
    assert capsys.readouterr() == ("", "")


def test_the_glue_file_round_trip(tmp_path, monkeypatch):
    path = tmp_path / "glue.json"
    assert recorded(path) == {}  # no file yet: nothing recorded
    monkeypatch.setenv(ENV, str(path))
    glue("a", 1.25, "{:.1f}")
    glue("b", "低估")
    glue("a", 2.25, "{:.1f}")  # a name recorded again keeps the last value
    glue("w", 3.14159, "{:.1f}", measured=True)
    assert recorded(path) == {"a": {"text": "2.2", "measured": False}, "b": {"text": "低估", "measured": False},
                              "w": {"text": "3.1", "measured": True}} == json.loads(path.read_text(encoding="utf-8"))
    assert "低估" in path.read_text(encoding="utf-8")  # readable, not \u escapes
    assert not Path(f"{path}.tmp").exists()


def test_a_glued_word_is_in_the_kernels_language(tmp_path, monkeypatch):
    path = tmp_path / "glue.json"
    monkeypatch.setenv(ENV, str(path))
    try:
        tinyserve.set_language("zh-TW")
        glue("side", t("7.6.worst.low"))
        assert recorded(path)["side"]["text"] == "低估"
    finally:
        tinyserve.set_language("en")
    glue("side", t("7.6.worst.low"))
    assert recorded(path)["side"]["text"] == "low"


def notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else nbformat.v4.new_code_cell(c)
                for c in cells]
    nb.metadata["kernelspec"] = build.KERNEL
    return nb


def rec(text, measured=False):
    return {"text": text, "measured": measured}


def test_fill_puts_each_recorded_value_where_the_markdown_names_it_and_keeps_the_record():
    nb = notebook("md:The worst, {glue}`pct`% {glue}`side`; again {glue}`pct`.", 'print("{glue}`pct`")')
    build.fill_glue(nb, "7.9-demo", {"pct": rec("9.7"), "side": rec("low"), "unused": rec("1"),
                                     "clock": rec("3.4", measured=True)})
    assert nb.cells[0].source == "The worst, 9.7% low; again 9.7."
    assert nb.cells[1].source == 'print("{glue}`pct`")'  # code is never touched
    assert nb.metadata["tinyserve"]["glue"] == {"pct": rec("9.7"), "side": rec("low")}  # what the prose shows


def test_a_wall_clock_measurement_in_prose_stops_the_build_naming_it():
    nb = notebook("md:A 32-wide step took {glue}`ratio`× a 1-wide one.")
    with pytest.raises(build.EditionError, match=r"^7\.9-demo: \{glue\}`ratio` is a wall-clock measurement"):
        build.fill_glue(nb, "7.9-demo", {"ratio": rec("3.4", measured=True)})


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


LESSONS = sorted(CHAPTERS.glob("7.*.ipynb"))


def _numbers(text: str) -> list[str]:
    """The numbers in a glued text, separators dropped ("4,000" and "4000" are one number)."""
    import re

    return re.findall(r"\d+(?:\.\d+)?", text.replace(",", ""))


@pytest.mark.parametrize("lesson", [p.name for p in LESSONS])
def test_every_glued_number_is_the_same_in_both_editions(lesson):
    """The prose of both editions states the same numbers: each glued value with a digit in it is equal across
    the two builds (a glued word is translated, not compared), and none is a wall-clock measurement."""
    en = nbformat.read(CHAPTERS / lesson, as_version=4).metadata.get("tinyserve", {}).get("glue")
    zh = nbformat.read(CHAPTERS / "zh-TW" / lesson, as_version=4).metadata.get("tinyserve", {}).get("glue")
    assert en is not None and zh is not None, f"{lesson}: no glue record: rebuild both editions (chapters/build.py)"
    assert en.keys() == zh.keys(), f"{lesson}: the editions glue different names"
    differ = {n: (en[n]["text"], zh[n]["text"]) for n in en
              if _numbers(en[n]["text"]) and _numbers(en[n]["text"]) != _numbers(zh[n]["text"])}
    assert not differ, f"{lesson}: glued numbers differ between the editions: {differ}"
    assert not [n for n in en if en[n]["measured"] or zh[n]["measured"]]


def test_the_lessons_glue_numbers_at_all():
    """The comparison above has something to compare (a build that glued nothing would pass it emptily)."""
    counts = {p.name: len(nbformat.read(p, as_version=4).metadata.get("tinyserve", {}).get("glue", {}))
              for p in LESSONS}
    assert sum(counts.values()) > 50 and sum(1 for n in counts.values() if n) >= 6, counts
