"""nbgrader itself takes chapters/solutions/ as they are: generate_assignment, then autograde three students.

A course folder is made in a temporary directory with the solutions as `source/ch7`; nbgrader's own command
line releases the assignment (with ClearSolutions.code_stub set to our stub, as chapters/README.md tells
instructors), and the released notebooks must have the cells of chapters/exercises/. Then nbgrader autogrades
three submissions, each notebook in a real kernel: the solutions (full points), the exercises as handed out
(zero), and the one notebook with a wrong answer (that notebook's points but that answer's; its other notebooks
are the solutions' own, already graded above, so that student hands in only this one). Slow: nine kernels.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbgrader")
nbformat = pytest.importorskip("nbformat")

from tinyserve.classroom.generate import STUB  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOL, EX = ROOT / "chapters" / "solutions", ROOT / "chapters" / "exercises"
NAMES = sorted(p.name for p in SOL.glob("*.ipynb"))
WRONG = ("7.4-exercises.ipynb", "m-answer", "def kv_bytes_used(prompt_len, generated, bytes_per_token):\n"
         "    return (prompt_len + generated) * bytes_per_token\n")
# 7.3 (o) as released (its check without the hidden tests), answered with a share nobody measured: passes the form
LIE = ("7.3-exercises.ipynb", "o-answer", "def my_deployment():\n    return 'colocated:2', 0.94\n")
HANDED_IN = {"sol": NAMES, "blank": NAMES, "onewrong": [WRONG[0]], "lie": [LIE[0]]}


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE", JUPYTER_CONFIG_DIR=str(course / ".jupyter"),
               JUPYTER_DATA_DIR=str(course / ".data"),  # nbgrader runs `alembic` from the interpreter's bin
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]), PYTHONPATH=os.pathsep.join(
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
c.Autograde.create_student = True
c.ClearSolutions.code_stub = {{"python": {STUB!r}}}
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
""")
    nbgrader(root, "generate_assignment", "ch7")
    for student, names in HANDED_IN.items():
        dest = root / "submitted" / student / "ch7"
        dest.mkdir(parents=True)
        for name in names:
            src = root / ("source" if student in ("sol", "onewrong") else "release") / "ch7" / name
            nb = nbformat.read(src, as_version=4)
            for wrong in (WRONG if student == "onewrong" else LIE if student == "lie" else None,):
                if wrong and name == wrong[0]:
                    next(c for c in nb.cells if c.get("id") == wrong[1]).source = wrong[2]
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


ZH_SOL, ZH_EX = ROOT / "chapters" / "zh-TW" / "solutions", ROOT / "chapters" / "zh-TW" / "exercises"


def test_the_zh_tw_edition_released_with_its_stubs_is_our_zh_tw_exercises(tmp_path):
    """The 繁體中文 solutions as an nbgrader source, with the two stubs chapters/instructors/README.zh-TW.md gives
    (the edition's code_stub and text_stub), release exactly chapters/zh-TW/exercises/: every comment Chinese."""
    from tinyserve.lang import t

    (tmp_path / "source" / "ch7").mkdir(parents=True)
    for name in NAMES:
        shutil.copy(ZH_SOL / name, tmp_path / "source" / "ch7")
    code_stub, text_stub = t("classroom.code_stub", "zh-TW"), t("classroom.text_stub", "zh-TW")
    (tmp_path / "nbgrader_config.py").write_text(f"""
c = get_config()
c.CourseDirectory.root = {str(tmp_path)!r}
c.CourseDirectory.course_id = "batching-lab"
c.ClearSolutions.code_stub = {{"python": {code_stub!r}}}
c.ClearSolutions.text_stub = {text_stub!r}
""")
    readme = (ROOT / "chapters" / "instructors" / "README.zh-TW.md").read_text(encoding="utf-8")
    assert f"c.ClearSolutions.code_stub = {{\"python\": {code_stub!r}}}" in readme
    assert f"c.ClearSolutions.text_stub = \"{text_stub}\"" in readme
    nbgrader(tmp_path, "generate_assignment", "ch7")
    for name in NAMES:
        released = nbformat.read(tmp_path / "release" / "ch7" / name, as_version=4)
        ours = nbformat.read(ZH_EX / name, as_version=4)
        assert [(c.get("id"), c.cell_type, c.source) for c in released.cells] == \
               [(c.get("id"), c.cell_type, c.source) for c in ours.cells], name


def scores(course: Path) -> dict[str, dict[str, tuple]]:
    """student -> grade cell id -> (auto score, max score, needs a manual grade), from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, tuple]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, names in HANDED_IN.items():
            for name in names:
                nb = gb.find_submission_notebook(name.removesuffix(".ipynb"), "ch7", student)
                for g in nb.grades:
                    out.setdefault(student, {})[g.name] = (g.auto_score, g.max_score, g.needs_manual_grade)
    return out


def test_autograde_gives_full_zero_and_partial_points(course):
    got = scores(course)
    checks = {cid: pts for name in NAMES for c in nbformat.read(SOL / name, as_version=4).cells
              if "check" in c.metadata.get("tags", []) for cid, pts in [(c.get("id"), c.metadata["nbgrader"]["points"])]}
    assert len(checks) == 14
    handed_in = {c.get("id") for c in nbformat.read(SOL / WRONG[0], as_version=4).cells}
    assert "m-check" in handed_in and len(handed_in & set(checks)) > 1  # the premise: other checks beside it
    for cid, pts in checks.items():
        assert got["sol"][cid][:2] == (pts, pts), cid
        assert got["blank"][cid][0] == 0, cid
        if cid in handed_in:  # one wrong answer costs its own points, not its neighbours'
            assert got["onewrong"][cid][0] == (0 if cid == "m-check" else pts), cid
    # the open questions are left for the instructor, by their rubric; left blank, nbgrader scores them zero
    for cid in ("g-answer", "k-answer", "o-explain"):
        assert got["sol"][cid] == (None, 3, True)
        assert got["blank"][cid] == (0, 3, False)
    # autograde puts the hidden tests back into a released check cell: a share nobody measured scores zero
    released = next(c for c in nbformat.read(course / "release" / "ch7" / LIE[0], as_version=4).cells
                    if c.get("id") == "o-check")
    assert "HIDDEN" not in released.source and got["lie"]["o-check"][0] == 0 and got["sol"]["o-check"][0] == 2


def test_browser_tests_start_jupyterlab_without_nbgraders_extensions(tmp_path):
    """nbgrader installs lab and server extensions; the browser tests' JupyterLab config switches them off."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("browser_conftest", ROOT / "tests" / "browser" / "conftest.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    env = dict(os.environ, **conf.lab_config(tmp_path))
    lab = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], env=env, capture_output=True,
                         text=True, timeout=120)
    lab_lines = [ln for ln in (lab.stdout + lab.stderr).splitlines() if "@jupyter/nbgrader v" in ln]
    assert lab_lines and all("disabled" in ln for ln in lab_lines), lab.stdout + lab.stderr
    server = subprocess.run([sys.executable, "-c", (
        "from jupyter_server.serverapp import ServerApp\n"
        "a = ServerApp(); a.initialize(argv=['--port=0'], find_extensions=True)\n"
        "print(sorted((k, v) for k, v in a.jpserver_extensions.items() if k.startswith('nbgrader')))")],
        env=env, capture_output=True, text=True, timeout=120)
    got = server.stdout.strip().splitlines()[-1]
    assert "True" not in got and got.count("False") == len(conf.DISABLED_SERVER_EXTENSIONS), server.stdout + server.stderr
