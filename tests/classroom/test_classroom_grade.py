"""The instructor's grader, end to end: restored checks, bad files, hostile submissions, points and the LMS table.

One grading run over a crafted class: each notebook runs in its own boxed child process (CPU seconds, memory,
process count, an unprivileged user when the tests run as root), two at a time, so this takes a minute or two
on 2 cores. The class grade benchmark (benchmarks/grading.py) times a class of 40.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from tinyserve.classroom import grade, sandbox  # noqa: E402
from tinyserve.classroom.generate import make_exercise  # noqa: E402
from tinyserve.classroom.notebooks import give_ids  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
SOL, EX = CHAPTERS / "solutions", CHAPTERS / "exercises"
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
# a cell's CPU seconds: the heaviest reference check (7.2 d) takes ~2 s alone, and this host's CPU seconds for the
# same work double in its slow stretches; at 4, CI failed that check once (2026-12-03, its message cut off in the
# log: this limit is the likeliest cause). 10 still stops dave's endless loop
SETTINGS = grade.Settings(cpu_s=60, cell_cpu_s=10, memory_bytes=2 << 30, max_procs=24, wall_s=180)


def edit(src: Path, dest: Path, changes: dict[str, str | None], add: list[tuple[int, str]] = ()) -> None:
    """Copy a notebook, replacing cell sources by id (None deletes the cell); add: (position, code) new cells."""
    nb = nbformat.read(src, as_version=4)
    for cid in changes:
        assert any(c.get("id") == cid for c in nb.cells), cid
    nb.cells = [c for c in nb.cells if changes.get(c.get("id"), "") is not None]
    for c in nb.cells:
        if c.get("id") in changes:
            c.source = changes[c.get("id")]
    for pos, src_code in add:
        nb.cells.insert(pos, nbformat.v4.new_code_cell(src_code))
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)


def old_format(src: Path, dest: Path) -> None:
    """The notebook as an older Jupyter writes it: nbformat 4.4, no cell ids."""
    d = json.loads(src.read_text(encoding="utf-8"))
    d["nbformat_minor"] = 4
    for c in d["cells"]:
        c.pop("id", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(d), encoding="utf-8")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("submissions")
    # alice: the reference answers
    (subs / "alice").mkdir()
    shutil.copy(SOL / "7.2-exercises.ipynb", subs / "alice")
    # bob: handed back blank
    (subs / "bob").mkdir()
    shutil.copy(EX / "7.4-exercises.ipynb", subs / "bob")
    # carol: a KV count that ignores the prompt, its check edited to pass, another check deleted
    edit(SOL / "7.4-exercises.ipynb", subs / "carol" / "7.4-exercises.ipynb", {
        "m-answer": "def kv_bytes_used(prompt_len, generated, bytes_per_token):\n    return generated * bytes_per_token",
        "m-check": "print('all good')",
        "l-check": None})
    # dave: broken files, then an endless loop in one answer (the next answers are right)
    (subs / "dave").mkdir()
    (subs / "dave" / "7.1-exercises.ipynb").write_text('{"cells": [', encoding="utf-8")
    (subs / "dave" / "notes.ipynb").write_text('{"hello": "world"}', encoding="utf-8")
    (subs / "dave" / "latin1.ipynb").write_bytes('{"cells": [], "x": "\xe9"}'.encode("latin-1"))
    r_nb = json.loads((SOL / "7.3-exercises.ipynb").read_text())
    r_nb["metadata"]["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    (subs / "dave" / "7.3-exercises.ipynb").write_text(json.dumps(r_nb), encoding="utf-8")
    edit(SOL / "7.4-exercises.ipynb", subs / "dave" / "7.4-exercises.ipynb", {
        "l-answer": "def slabs_that_fit(memory_bytes, max_len, bytes_per_token):\n    while True:\n        pass"})
    # erin: hands the policy to the built-in one, and disarms the checks in another notebook
    edit(SOL / "7.2-exercises.ipynb", subs / "erin" / "7.2-exercises.ipynb", {
        "d-answer": "from tinyserve.core.scheduling import ContinuousBatching\n\n\n"
                    "class MyContinuous(ContinuousBatching):\n    pass"})
    edit(SOL / "7.4-exercises.ipynb", subs / "erin" / "7.4-exercises.ipynb", {
        "l-answer": "import builtins\nbuiltins.AssertionError = Exception\n\n\n"
                    "def slabs_that_fit(memory_bytes, max_len, bytes_per_token):\n    return 0"})
    # frank: an old Jupyter's file (nbformat 4.4, no cell ids) under another name
    old_format(SOL / "7.1-exercises.ipynb", subs / "frank" / "homework.ipynb")
    # gus: a fork bomb; hana: a memory hog; ivan: deletes the checker, then the right answers
    edit(EX / "7.4-exercises.ipynb", subs / "gus" / "7.4-exercises.ipynb", {}, add=[
        (3, "import os, time\nkids = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30)\n"
            "            os._exit(0)\n        kids += 1\nexcept OSError:\n    pass\nprint(kids)")])
    edit(EX / "7.4-exercises.ipynb", subs / "hana" / "7.4-exercises.ipynb", {
        "l-answer": "def slabs_that_fit(memory_bytes, max_len, bytes_per_token):\n"
                    "    hog = bytearray(6 << 30)\n    return len(hog)"})
    edit(SOL / "7.4-exercises.ipynb", subs / "ivan" / "7.4-exercises.ipynb", {}, add=[
        (3, "import pathlib, tinyserve\nfor p in pathlib.Path(tinyserve.__path__[0]).rglob('*.py'):\n"
            "    try:\n        p.write_text('raise SystemExit')\n    except OSError as e:\n        print(e)")])
    # judy: 7.3 (o) only, the replicas' defaults with the split's share (right form, never measured), its check as
    # handed out (no hidden tests); kim: 7.3 (o) only, the reference answer
    handed = {c.get("id"): c.source for c in nbformat.read(EX / "7.3-exercises.ipynb", as_version=4).cells}
    reference = {c.get("id"): c.source for c in nbformat.read(SOL / "7.3-exercises.ipynb", as_version=4).cells}
    edit(EX / "7.3-exercises.ipynb", subs / "judy" / "7.3-exercises.ipynb", {
        "o-answer": "def my_deployment():\n    return 'colocated:2', 0.94", "o-check": handed["o-check"]})
    edit(EX / "7.3-exercises.ipynb", subs / "kim" / "7.3-exercises.ipynb", {"o-answer": reference["o-answer"]})
    lines = []
    rows = grade.grade(subs, CHAPTERS, SETTINGS, workers=2, log=lambda m, file=None: lines.append(m))
    return rows, lines, subs


def results(rows, student, notebook=None):
    return {r.exercise: (r.result, r.message) for r in rows
            if r.student == student and (notebook is None or r.notebook == notebook)}


def test_reference_answers_pass_with_their_points(graded):
    got = [r for r in graded[0] if r.student == "alice"]
    auto = [r for r in got if r.result != "manual"]
    assert len(auto) == 4 and all(r.result == "passed" and r.points == r.max_points > 0 for r in auto), got
    assert [r.points for r in auto] == [3, 3, 1, 1]
    manual = [r for r in got if r.result == "manual"]
    assert len(manual) == 1 and manual[0].points is None and manual[0].max_points == 3


def test_a_deployment_is_graded_on_its_own_run_by_the_hidden_tests(graded):
    judy, kim = results(graded[0], "judy"), results(graded[0], "kim")
    res, msg = judy["7.3 (o) choose a deployment"]
    assert res == "failed" and "you wrote 0.940 for 'colocated:2'; its run on this traffic measures" in msg, msg
    assert kim["7.3 (o) choose a deployment"] == ("passed", "")
    assert kim["7.3 (o) why that deployment"][0] == judy["7.3 (o) why that deployment"][0] == "manual"
    assert all(res == "blank" for k, (res, _) in judy.items() if "(o)" not in k and res != "manual")  # as handed out
    points = {r.student: r.points for r in graded[0] if r.exercise == "7.3 (o) choose a deployment"}
    assert points == {"judy": 0, "kim": 2}


def test_blank_exercise_is_not_attempted_and_scores_zero(graded):
    got = [r for r in graded[0] if r.student == "bob"]
    assert len(got) == 3
    assert all(r.result == "blank" and r.points == 0 and "not written yet" in r.message for r in got)


def test_tampered_and_deleted_checks_are_restored(graded):
    got = results(graded[0], "carol")
    assert got["7.4 (l) slabs that fit"] == ("passed", "")  # deleted, put back, and the answer is right
    res, msg = got["7.4 (m) KV bytes a sequence holds"]
    assert res == "failed" and "your kv_bytes_used" in msg and "-token prompt" in msg


def test_bad_files_get_a_row_each_and_do_not_stop_the_others(graded):
    got = {r.notebook: r for r in graded[0] if r.student == "dave" and r.result == "invalid"}
    assert "invalid JSON" in got["7.1-exercises.ipynb"].message
    assert "not a Jupyter notebook" in got["notes.ipynb"].message
    assert "not UTF-8" in got["latin1.ipynb"].message
    assert "R kernel" in got["7.3-exercises.ipynb"].message
    after = results(graded[0], "dave", "7.4-exercises.ipynb")
    res, msg = after["7.4 (l) slabs that fit"]
    assert res == "failed" and "CPU seconds" in msg  # the endless loop was stopped by its CPU time...
    assert after["7.4 (m) KV bytes a sequence holds"][0] == "passed"  # ...and the next answers still graded
    assert after["7.4 (n) slab allocator"][0] == "passed"


def test_bypassing_answers_are_reported_not_passed(graded):
    d = results(graded[0], "erin", "7.2-exercises.ipynb")
    res, msg = d["7.2 (d) continuous batching policy"]
    assert res == "integrity" and "ContinuousBatching" in msg
    assert d["7.2 (f) first step of a request"][0] == "passed"  # the other answers still count
    for res, msg in results(graded[0], "erin", "7.4-exercises.ipynb").values():
        assert res == "integrity" and "disarms the checks" in msg


def test_a_notebook_without_cell_ids_is_normalised_and_graded(graded):
    got = results(graded[0], "frank", "homework.ipynb")
    assert set(got) == {"7.1 (a) padding tokens", "7.1 (b) wasted fraction", "7.1 (c) dynamic batching policy"}
    assert all(res == "passed" for res, _ in got.values()), got


def test_hostile_submissions_score_zero_with_a_reason_and_harm_nobody(graded):
    rows = graded[0]
    gus = results(rows, "gus")
    assert all(res == "integrity" and "starts processes" in msg for res, msg in gus.values()), gus
    hana = results(rows, "hana")
    assert hana["7.4 (l) slabs that fit"][0] == "failed" and "MemoryError" in hana["7.4 (l) slabs that fit"][1]
    ivan = results(rows, "ivan")
    assert all(res == "integrity" for res, _ in ivan.values()), ivan  # reaching for the package's files
    assert all(r.points == 0 for r in rows if r.student in ("gus", "hana", "ivan"))
    # ivan's lane copy was checked after him (and renewed if he managed to write it, as root can): those graded
    # after him, in his lane or the other, still passed (alice, frank: every answer right)
    assert sum(r.result == "passed" for r in rows if r.student in ("alice", "frank")) == 7


def test_lms_table_and_summaries(graded):
    rows, lines, _ = graded
    refs = grade.load_references(CHAPTERS)
    out = io.StringIO()
    grade.write_lms(rows, refs, out)
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(table[0])[0] == "student" and list(table[0])[-2:] == ["total", "flags"]
    assert "7.1 (a) padding tokens [1]" in table[0] and "7.4 (n) slab allocator [3]" in table[0]
    assert "7.3 (o) choose a deployment [2]" in table[0] and "7.3 (o) why that deployment [3]" in table[0]
    by = {r["student"]: r for r in table}
    assert by["alice"]["total"] == "8" and by["alice"]["7.2 (g) where continuous batching pays [3]"] == ""
    assert by["bob"]["total"] == "0" and by["bob"]["7.4 (l) slabs that fit [1]"] == "0"
    assert by["frank"]["total"] == "5"
    assert "invalid file notes.ipynb" in by["dave"]["flags"] and by["dave"]["7.4 (m) KV bytes a sequence holds [1]"] == "1"
    assert "integrity: 7.2 (d) continuous batching policy" in by["erin"]["flags"]
    details = io.StringIO()
    grade.write_details(rows, details)
    assert details.getvalue().splitlines()[0] == ",".join(grade.DETAIL_FIELDS)
    summaries = [ln for ln in lines if ": " in ln and "graded in" not in ln and not ln.startswith("grade:")]
    assert [s.split(":")[0] for s in summaries] == ["alice", "bob", "carol", "dave", "erin", "frank", "gus", "hana",
                                                    "ivan", "judy", "kim"]
    assert summaries[0].startswith("alice: 8/"), summaries[0]
    assert "4 file(s) not gradable" in summaries[3]


def test_command_line_reports_a_missing_folder(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tinyserve.classroom.grade", str(tmp_path / "nope")],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is not a folder" in r.stderr


# ------------------------------------------------------------------------------ fast: restore and scan alone
@pytest.fixture(scope="module")
def refs():
    return grade.load_references(CHAPTERS)


def exercise(name: str, changes: dict[str, str | None], tmp_path: Path):
    edit(EX / name, tmp_path / name, changes)
    nb, why = grade.read_submission(tmp_path / name)
    assert why is None
    return nb


def test_restore_puts_deleted_checks_back_after_their_answer(refs, tmp_path):
    nb = exercise("7.2-exercises.ipynb", {"d-check": None, "f-check2": "pass"}, tmp_path)
    ref = refs["7.2-exercises.ipynb"]
    ids = [c.get("id") for c in grade.restore_checks(nb, ref).cells]
    assert ids == [c.get("id") for c in ref.solution.cells if c.get("id") != "self-check"]
    restored = {c.get("id"): c.source for c in grade.restore_checks(nb, ref).cells}
    assert all(restored[c.get("id")] == c.source for c in ref.checks)


def test_cells_without_ids_take_the_ids_of_the_cells_they_line_up_with(refs, tmp_path):
    ref = refs["7.3-exercises.ipynb"]
    sub = make_exercise(ref.solution)
    sub.cells[4].source = "def plan_chunks(p, d, c, b):\n    return []"  # an answer, edited
    sub.cells.insert(6, nbformat.v4.new_code_cell("print('my own cell')"))
    nbformat.write(sub, tmp_path / "x.ipynb")
    old_format(tmp_path / "x.ipynb", tmp_path / "old.ipynb")
    nb, why = grade.read_submission(tmp_path / "old.ipynb")
    assert why is None
    fixed = give_ids(nb, ref.exercise)
    ids = [c.get("id") for c in fixed.cells]
    assert ids[:6] == [c.get("id") for c in ref.exercise.cells[:6]] and ids[6].startswith("added-")
    assert ids[7:] == [c.get("id") for c in ref.exercise.cells[6:]]


def test_scan_ignores_edited_given_lines_and_flags_what_the_student_added(refs, tmp_path):
    ref = refs["7.3-exercises.ipynb"]
    # changing the demo's seed keeps its given import of the checker's scenario: not flagged
    demo = ref.handed_out["j-demo"].replace("seed=7", "seed=8")
    assert grade.scan(exercise("7.3-exercises.ipynb", {"j-demo": demo}, tmp_path), ref) == {}
    # a cell of the student's own that runs the engine to explore is fine (delegation is caught at check time)
    nb = exercise("7.3-exercises.ipynb", {}, tmp_path)
    nb.cells.insert(3, nbformat.v4.new_code_cell("from tinyserve.engine import Engine\nEngine(dtype='float64')"))
    assert grade.scan(nb, ref) == {}
    # a student's own line reaching for importlib disarms every check of the notebook
    flags = grade.scan(exercise("7.3-exercises.ipynb", {"j-demo": demo + "\nimport importlib"}, tmp_path), ref)
    assert set(flags) == {"h-check", "i-check", "j-check", "o-check"} and all("manipulates imports" in f
                                                                           for f in flags.values())
    # an answer that builds the library's policy is flagged for its own check only
    answer = ref.handed_out["i-answer"].replace('raise NotImplementedError("write your answer here")',
                                                'return make_policy("chunked").plan(now, more_coming)')
    flags = grade.scan(exercise("7.3-exercises.ipynb", {"i-answer": answer}, tmp_path), ref)
    assert set(flags) == {"i-check"} and "make_policy" in flags["i-check"]


def test_a_submission_that_changes_its_package_copy_gets_zero_and_the_copy_is_renewed(refs, tmp_path, monkeypatch):
    worker = grade.Worker(0, tmp_path, drop_user=False)
    target = worker.lib / "tinyserve" / "classroom" / "checks.py"
    clean = target.read_bytes()

    def run_boxed(w, nb, settings, cgroups, name):  # a child that rewrote the checker as root could
        os.chmod(target, 0o644)
        target.write_text("# gone")
        return {c.get("id"): {"status": "passed", "message": ""} for c in refs["7.4-exercises.ipynb"].checks}, None
    monkeypatch.setattr(grade, "run_boxed", run_boxed)
    rows = grade.grade_notebook("mallory", SOL / "7.4-exercises.ipynb", refs, worker, SETTINGS, None)
    assert all(r.result == "integrity" and "changed the tinyserve package" in r.message and r.points == 0
               for r in rows)
    assert target.read_bytes() == clean and not worker.changed()


def test_the_process_limit_holds_here():
    """Where this machine offers it: a per-submission cgroup, else a per-worker user (both hold for root)."""
    kind = sandbox.cgroup_kind()
    drop, warnings = sandbox.process_guard(kind)
    if os.geteuid() == 0:
        assert kind is not None or drop
        assert not any("process limit" in w for w in warnings)
        assert drop == sandbox.python_readable_by_others()


def test_a_copy_changed_beside_a_notebook_is_rerun_alone_and_only_a_repeat_offender_gets_zero(monkeypatch):
    """As root, a hostile notebook in one worker can write into another worker's package copy: the notebook graded
    there must not lose its points for it. A change seen after the run is re-run alone; only a change that comes
    back when nothing else runs is the notebook's own."""
    from tinyserve.classroom import grade as G

    refs = G.load_references(ROOT / "chapters")
    path = ROOT / "chapters" / "solutions" / "7.1-exercises.ipynb"
    ref = refs[path.name]
    runs = []

    def fake_run(worker, nb, settings, cgroups, name):
        runs.append(name)
        return {c.get("id"): {"status": "passed", "message": ""} for c in ref.checks}, None

    class FakeWorker:
        def __init__(self, changes):
            self.changes, self.renewed = list(changes), 0

        def changed(self):
            return self.changes.pop(0)

        def fresh_copy(self):
            self.renewed += 1

    monkeypatch.setattr(G, "run_boxed", fake_run)
    neighbour = FakeWorker([True, False])  # changed during the first run only: someone else did it
    rows = G.grade_notebook("ana", path, refs, neighbour, G.Settings(), None)
    assert len(runs) == 2 and neighbour.renewed == 1
    assert rows and all(r.result == "passed" for r in rows if r.result != "manual")
    runs.clear()
    offender = FakeWorker([True, True])  # changed again when it ran alone: its own doing
    rows = G.grade_notebook("bo", path, refs, offender, G.Settings(), None)
    assert len(runs) == 2 and offender.renewed == 2
    graded = [r for r in rows if r.result != "manual"]
    assert graded and all(r.result == "integrity" and r.points == 0 for r in graded)
