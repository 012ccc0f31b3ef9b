"""The instructor's grader, end to end: restored checks, bad files, an endless loop, answers that bypass the work.

One grading run over a crafted class (each submission is a real nbval run in its own kernel, so this is the
slow part: one to two minutes on 2 cores). Plain nbval over every solution notebook is part of the project's
test run already (pyproject's testpaths hold chapters/, where solutions/ is collected and exercises/ is not).
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbval")

from tinyserve.classroom import grade  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")


def edit(src: Path, dest: Path, changes: dict[str, str | None]) -> None:
    """Copy a notebook, replacing cell sources by id (None deletes the cell)."""
    nb = nbformat.read(src, as_version=4)
    for cid, new in changes.items():
        assert any(c.get("id") == cid for c in nb.cells), cid
    nb.cells = [c for c in nb.cells if changes.get(c.get("id"), "") is not None]
    for c in nb.cells:
        if c.get("id") in changes:
            c.source = changes[c.get("id")]
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("submissions")
    sol, ex = CHAPTERS / "solutions", CHAPTERS / "exercises"
    # alice: the reference answers
    (subs / "alice").mkdir()
    shutil.copy(sol / "7.2-exercises.ipynb", subs / "alice")
    # bob: handed back blank
    (subs / "bob").mkdir()
    shutil.copy(ex / "7.4-exercises.ipynb", subs / "bob")
    # carol: a KV count that ignores the prompt, its check edited to pass, the other check deleted
    edit(sol / "7.4-exercises.ipynb", subs / "carol" / "7.4-exercises.ipynb", {
        "f-answer2": "def kv_bytes_used(prompt_len, generated, bytes_per_token):\n    return generated * bytes_per_token",
        "f-check2": "print('all good')",
        "f-check1": None})
    # dave: broken files, then an endless loop in one answer (the next answer is right)
    (subs / "dave").mkdir()
    (subs / "dave" / "7.1-exercises.ipynb").write_text('{"cells": [', encoding="utf-8")
    (subs / "dave" / "notes.ipynb").write_text('{"hello": "world"}', encoding="utf-8")
    edit(sol / "7.4-exercises.ipynb", subs / "dave" / "7.4-exercises.ipynb", {
        "f-answer1": "def slabs_that_fit(memory_bytes, max_len, bytes_per_token):\n    while True:\n        pass"})
    # erin: hands the policy to the built-in one, and disarms the checks in another notebook
    edit(sol / "7.2-exercises.ipynb", subs / "erin" / "7.2-exercises.ipynb", {
        "d-answer": "from tinyserve.policies import ContinuousBatching\n\n\n"
                    "class MyContinuous(ContinuousBatching):\n    pass"})
    edit(sol / "7.4-exercises.ipynb", subs / "erin" / "7.4-exercises.ipynb", {
        "f-answer1": "import builtins\nbuiltins.AssertionError = Exception\n\n\n"
                     "def slabs_that_fit(memory_bytes, max_len, bytes_per_token):\n    return 0"})
    lines = []
    with pytest.MonkeyPatch.context() as mp:
        # a source tree being edited while this runs must not stop the grading; the digest has its own test
        mp.setattr(grade, "package_digest", lambda: "unchanged")
        rows = grade.grade(subs, CHAPTERS, timeout=240, cell_timeout=20, log=lambda m, file=None: lines.append(m))
    return rows, lines


def results(rows, student, notebook=None):
    return {r.exercise: (r.result, r.message) for r in rows
            if r.student == student and (notebook is None or r.notebook == notebook)}


def test_reference_answers_pass(graded):
    got = results(graded[0], "alice")
    assert len(got) == 3 and all(res == "passed" for res, _ in got.values()), got


def test_blank_exercise_fails_every_check(graded):
    got = results(graded[0], "bob")
    assert len(got) == 2
    for res, msg in got.values():
        assert res == "failed" and "not written yet" in msg


def test_tampered_and_deleted_checks_are_restored(graded):
    got = results(graded[0], "carol")
    assert got["7.4 (f) slabs that fit"] == ("passed", "")  # deleted, put back, and the answer is right
    res, msg = got["7.4 (f) KV bytes a sequence holds"]
    assert res == "failed" and "your kv_bytes_used" in msg and "-token prompt" in msg


def test_bad_files_get_a_row_and_do_not_stop_the_others(graded):
    got = {r.notebook: r for r in graded[0] if r.student == "dave" and r.result == "invalid"}
    assert "invalid JSON" in got["7.1-exercises.ipynb"].message
    assert "not a Jupyter notebook" in got["notes.ipynb"].message
    after = results(graded[0], "dave", "7.4-exercises.ipynb")
    res, msg = after["7.4 (f) slabs that fit"]
    assert res == "failed" and "Timeout" in msg  # the endless loop was stopped...
    assert after["7.4 (f) KV bytes a sequence holds"][0] == "passed"  # ...and the next answer still graded


def test_bypassing_answers_are_reported_not_passed(graded):
    d = results(graded[0], "erin", "7.2-exercises.ipynb")
    res, msg = d["7.2 (d) continuous batching policy"]
    assert res == "integrity" and "ContinuousBatching" in msg
    assert d["7.2 (g) first step of a request"][0] == "passed"  # the other answers still count
    for res, msg in results(graded[0], "erin", "7.4-exercises.ipynb").values():
        assert res == "integrity" and "disarms the checks" in msg


def test_score_table_and_summaries(graded):
    rows, lines = graded
    out = io.StringIO()
    grade.write_csv(rows, out)
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(table[0]) == ["student", "notebook", "exercise", "result", "message"]
    assert len(table) == len(rows)
    summaries = [ln for ln in lines if ":" in ln and "graded in" not in ln]
    assert [s.split(":")[0] for s in summaries] == ["alice", "bob", "carol", "dave", "erin"]
    assert summaries[0].startswith("alice: 3/10 passed (7 not submitted)")
    assert "2 file(s) not gradable" in summaries[3]


def test_command_line_reports_a_missing_folder(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tinyserve.classroom.grade", str(tmp_path / "nope")],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is not a folder" in r.stderr


# ------------------------------------------------------------------------------ fast: restore and scan alone
@pytest.fixture(scope="module")
def refs():
    return grade.load_references(CHAPTERS)


def exercise(name: str, changes: dict[str, str | None], tmp_path: Path):
    edit(CHAPTERS / "exercises" / name, tmp_path / name, changes)
    nb, why = grade.read_submission(tmp_path / name)
    assert why is None
    return nb


def test_restore_puts_deleted_checks_back_after_their_answer(refs, tmp_path):
    nb = exercise("7.2-exercises.ipynb", {"d-check": None, "g-check2": "pass"}, tmp_path)
    ref = refs["7.2-exercises.ipynb"]
    ids = [c.get("id") for c in grade.restore_checks(nb, ref).cells]
    assert ids == [c.get("id") for c in ref.solution.cells]
    restored = {c.get("id"): c.source for c in grade.restore_checks(nb, ref).cells}
    assert all(restored[c.get("id")] == c.source for c in ref.checks)


def test_scan_ignores_edited_given_lines_and_flags_what_the_student_added(refs, tmp_path):
    ref = refs["7.3-exercises.ipynb"]
    # changing the demo's seed keeps its given import of the checker's scenario: not flagged
    demo = ref.handed_out["h-demo"].replace("seed=7", "seed=8")
    assert grade.scan(exercise("7.3-exercises.ipynb", {"h-demo": demo}, tmp_path), ref) == {}
    # a cell of the student's own that runs the engine to explore is fine (delegation is caught at check time)
    nb = exercise("7.3-exercises.ipynb", {}, tmp_path)
    nb.cells.insert(3, nbformat.v4.new_code_cell("from tinyserve.engine import Engine\nEngine(dtype='float64')"))
    assert grade.scan(nb, ref) == {}
    # a student's own line reaching for importlib disarms every check of the notebook
    flags = grade.scan(exercise("7.3-exercises.ipynb", {"h-demo": demo + "\nimport importlib"}, tmp_path), ref)
    assert set(flags) == {"e-check", "h-check"} and all("manipulates imports" in f for f in flags.values())
    # an answer that builds the library's policy is flagged for its own check only
    answer = ref.handed_out["e-answer"].replace('raise NotImplementedError("write your answer here")',
                                                'return make_policy("chunked").plan(now, more_coming)')
    flags = grade.scan(exercise("7.3-exercises.ipynb", {"e-answer": answer}, tmp_path), ref)
    assert set(flags) == {"e-check"} and "make_policy" in flags["e-check"]


def test_a_submission_that_rewrites_the_package_stops_grading(refs, tmp_path, monkeypatch):
    for s in ("ann", "ben"):
        shutil.copy(CHAPTERS / "exercises" / "7.4-exercises.ipynb", (tmp_path / s).mkdir() or tmp_path / s)
    digests = iter(["before", "before", "after"])  # ann's run leaves the package as it was; ben's changes it
    monkeypatch.setattr(grade, "package_digest", lambda: next(digests))
    monkeypatch.setattr(grade, "grade_notebook", lambda student, path, *a: [
        grade.Row(student, path.name, "x", "passed", "")])
    with pytest.raises(grade.GradingStopped) as e:
        grade.grade(tmp_path, CHAPTERS, log=lambda *a, **k: None)
    assert [(r.student, r.result) for r in e.value.rows] == [("ann", "passed"), ("ben", "integrity")]
