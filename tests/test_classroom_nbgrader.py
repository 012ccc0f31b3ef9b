"""nbgrader itself takes chapters/solutions/ as they are: generate_assignment, then autograde three students.

A course folder is made in a temporary directory with the solutions as `source/ch7`; nbgrader's own command
line releases the assignment (with ClearSolutions.code_stub set to our stub, as chapters/README.md tells
instructors), and the released notebooks must have the cells of chapters/exercises/. Then nbgrader autogrades
three submissions, each running every notebook in a real kernel: the solutions (full points), the exercises as
handed out (zero), and the solutions with one wrong answer (all points but that answer's). Slow: twelve kernels.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbgrader")
nbformat = pytest.importorskip("nbformat")

from tinyserve.classroom.generate import STUB  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOL, EX = ROOT / "chapters" / "solutions", ROOT / "chapters" / "exercises"
NAMES = sorted(p.name for p in SOL.glob("*.ipynb"))
WRONG = ("7.4-exercises.ipynb", "m-answer", "def kv_bytes_used(prompt_len, generated, bytes_per_token):\n"
         "    return (prompt_len + generated) * bytes_per_token\n")


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE", JUPYTER_CONFIG_DIR=str(course / ".jupyter"),
               JUPYTER_DATA_DIR=str(course / ".data"), PYTHONPATH=os.pathsep.join(
                   [str(ROOT / "lib"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    r = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--force"], cwd=course, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    return r


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    (root / "source" / "ch7").mkdir(parents=True)
    for name in NAMES:
        shutil.copy(SOL / name, root / "source" / "ch7")
    (root / "nbgrader_config.py").write_text(f"""
c = get_config()
c.CourseDirectory.root = {str(root)!r}
c.CourseDirectory.course_id = "batching-lab"
c.CourseDirectory.db_assignments = [dict(name="ch7")]
c.CourseDirectory.db_students = [dict(id="sol"), dict(id="blank"), dict(id="onewrong")]
c.ClearSolutions.code_stub = {{"python": {STUB!r}}}
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
""")
    nbgrader(root, "generate_assignment", "ch7")
    for student in ("sol", "blank", "onewrong"):
        dest = root / "submitted" / student / "ch7"
        dest.mkdir(parents=True)
        for name in NAMES:
            src = root / ("source" if student != "blank" else "release") / "ch7" / name
            nb = nbformat.read(src, as_version=4)
            if student == "onewrong" and name == WRONG[0]:
                next(c for c in nb.cells if c.get("id") == WRONG[1]).source = WRONG[2]
            nbformat.write(nb, dest / name)
        (dest / "timestamp.txt").write_text("2026-12-01 09:00:00.000000 UTC")
    nbgrader(root, "autograde", "ch7")
    return root


def test_released_notebooks_have_the_cells_of_our_exercises(course):
    for name in NAMES:
        released = nbformat.read(course / "release" / "ch7" / name, as_version=4)
        ours = nbformat.read(EX / name, as_version=4)
        assert [(c.get("id"), c.cell_type, c.source) for c in released.cells] == \
               [(c.get("id"), c.cell_type, c.source) for c in ours.cells], name


def scores(course: Path) -> dict[str, dict[str, float]]:
    """student -> grade cell id -> (auto) score, read from nbgrader's gradebook."""
    db = sqlite3.connect(course / "gradebook.db")
    rows = db.execute("""
        SELECT student.id, grade_cell.name, grade.auto_score, grade_cell.max_score, grade.needs_manual_grade
        FROM grade JOIN grade_cell ON grade.cell_id = grade_cell.id
        JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id
        JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id
        JOIN student ON submitted_assignment.student_id = student.id""").fetchall()
    out: dict[str, dict[str, tuple]] = {}
    for student, cell, auto, max_score, manual in rows:
        out.setdefault(student, {})[cell] = (auto, max_score, manual)
    return out


def test_autograde_gives_full_zero_and_partial_points(course):
    got = scores(course)
    checks = {cid: pts for name in NAMES for c in nbformat.read(SOL / name, as_version=4).cells
              if "check" in c.metadata.get("tags", []) for cid, pts in [(c.get("id"), c.metadata["nbgrader"]["points"])]}
    assert len(checks) == 13
    for cid, pts in checks.items():
        assert got["sol"][cid][:2] == (pts, pts), cid
        assert got["blank"][cid][0] == 0, cid
        assert got["onewrong"][cid][0] == (0 if cid == "m-check" else pts), cid
    # the open questions are left for the instructor, by their rubric
    for student in ("sol", "blank", "onewrong"):
        assert got[student]["g-answer"][2] and got[student]["k-answer"][2]


def test_browser_tests_start_jupyterlab_without_nbgraders_extensions(tmp_path):
    """nbgrader installs lab and server extensions; the browser tests' JupyterLab config switches them off."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("browser_conftest", ROOT / "tests" / "browser" / "conftest.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    conf.lab_config(tmp_path)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path))
    lab = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], env=env, capture_output=True,
                         text=True, timeout=120)
    server = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"], env=env,
                            capture_output=True, text=True, timeout=120)
    lab_lines = [ln for ln in (lab.stdout + lab.stderr).splitlines() if "@jupyter/nbgrader" in ln]
    assert lab_lines and all("disabled" in ln for ln in lab_lines), lab.stdout + lab.stderr
    server_lines = [ln for ln in (server.stdout + server.stderr).splitlines()
                    if ln.strip().startswith("nbgrader.server_extensions.") and ("enabled" in ln or "disabled" in ln)]
    assert server_lines and all("disabled" in ln for ln in server_lines), server.stdout + server.stderr
