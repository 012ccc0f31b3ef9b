"""Grade a folder of submitted exercise notebooks, in parallel, each notebook boxed in its own process.

    python -m tinyserve.classroom.grade SUBMISSIONS_DIR [--out scores.csv] [--details details.csv]
        [--chapters chapters] [--workers N] [--cpu-seconds 60] [--cell-cpu-seconds 30] [--memory-gib 3]
        [--max-procs 32] [--wall-seconds 600] [--lang en]

SUBMISSIONS_DIR holds one folder per student (the folder's name is the student) with that student's notebooks,
named as handed out (7.1-exercises.ipynb, ...); a notebook with another name is matched by its check cells.
For each notebook: it is read (a file that is not one gets a row saying why), given cell ids if it has none
(nbformat 4.4), every check cell is put back from the reference solution by cell id (an edited or deleted
check counts as the original), the cells the student wrote are scanned for answers that hand the work to the
built-in policies or disarm the checks, and it runs in a child process boxed by sandbox.py (CPU seconds,
memory, process count, an unprivileged user when run as root) against the worker's own read-only copy of the
tinyserve package; a copy found changed after a run is renewed and the notebook run again alone (as root a
submission can reach another worker's copy: a neighbour's change is never blamed on it); a submission that
changes its copy even then gets zero with the reason.

Two CSV files: --out, one row per student for a learning-management system (student, the points of every
answer, total, flags), and --details, one row per graded answer (student, notebook, exercise, result, points,
max_points, message) with result passed, failed, blank, integrity, manual (an open answer to grade by its
rubric) or invalid (the file is not a gradable notebook). A line per student is printed.

Language: the printed lines and every message in the CSV files (the checks' too: the boxed runner sets it before
each check cell) are in --lang (en, the default, or zh-TW), whichever edition a student handed in. Both editions
grade alike: the same file names, cell ids and code, the setup line `tinyserve.set_language(...)` aside (not
counted as the student's own code). The CSV's columns, exercise names and result codes are data: always English.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import hashlib
import json
import os
import queue
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..lang import LANGUAGES, normalize, set_language, t
from . import sandbox
from .notebooks import (CHECK_TAG, OPEN_TAG, SELF_CHECK_TAG, SETUP_LINE, SOLUTION_TAG, check_cells, give_ids,
                        label_of, points_of, read_notebook, tags)
from .text import say

DETAIL_FIELDS = ("student", "notebook", "exercise", "result", "points", "max_points", "message")
# anywhere in what the student wrote: disarming the checks (rebinding, swallowing, replacing the checker);
# the reasons are keys of the classroom catalog, lib/tinyserve/locale/classroom.pot ("classroom.scan.<reason>")
DISARM = [
    (re.compile(r"\bAssertionError\s*=(?!=)"), "rebinds"),
    (re.compile(r"\bbuiltins\b|__builtins__"), "builtins"),
    (re.compile(r"\bset_custom_exc\b|\bsys\.excepthook\b"), "handler"),
    (re.compile(r"\bsys\.modules\b|\bimportlib\b|\b__import__\b"), "imports"),
    (re.compile(r"\bclassroom\b"), "checker"),
    (re.compile(r"(?<![\w.])(?:exec|eval|compile)\s*\(|__file__|__path__"), "exec"),
    (re.compile(r"\bos\.(?:fork|forkpty|system|popen|exec\w*|spawn\w*|posix_spawn\w*)\b|\bsubprocess\b"
                r"|\bmultiprocessing\b|\bpty\b"), "processes"),
    (re.compile(r"\bimport\s+inspect\b|\binspect\.|\b(?:currentframe|_getframe|f_back|f_locals|f_globals)\b"
                r"|\bgc\.get_"), "frames"),
    (re.compile(r"\bsetattr\s*\(|\bdelattr\s*\("), "setattr"),
    (re.compile(r"^\s*(?:tinyserve|engine|Engine|Run|Trace|policies|checks)\.[\w.]+\s*=(?!=)", re.M), "engine"),
    (re.compile(r"\bos\.(?:write|dup2?|fdopen|kill|killpg)\b|/proc/"), "channels"),
]
# a setup line of any edition is handed out, not written by the student
SETUP_LINES = {f'tinyserve.set_language("{code}")' for code in LANGUAGES}
# in an answer cell: naming the built-in policies (the engine itself is booby-trapped at check time instead, so
# a cell of the student's own that runs the engine to explore is not flagged)
DELEGATE = re.compile(r"\b(StaticBatching|DynamicBatching|ContinuousBatching|ChunkedPrefill|make_policy)\b"
                      r"|from\s+tinyserve\.policies\s+import\s+\*")


@dataclass
class Row:
    """One graded answer (or one file that could not be graded)."""

    student: str
    notebook: str
    exercise: str
    result: str
    points: float | None
    max_points: float
    message: str = ""


# --------------------------------------------------------------------------------------------- references
@dataclass
class Reference:
    """A solution notebook (its check cells are the graded ones) and the exercise handed out for it."""

    name: str
    solution: object  # nbformat node
    exercise: object  # the handed-out notebook
    handed_out: dict[str, str] = field(default_factory=dict)  # cell id -> source as handed out

    @property
    def checks(self) -> list:
        return check_cells(self.solution)

    @property
    def open_answers(self) -> list:
        return [c for c in self.solution.cells if OPEN_TAG in tags(c)]

    def label(self, cell) -> str:
        return label_of(cell)


def load_references(chapters: Path) -> dict[str, Reference]:
    """The reference notebooks by file name."""
    import nbformat

    from .generate import make_exercise

    refs = {}
    for p in sorted((chapters / "solutions").glob("*.ipynb")):
        sol = nbformat.read(p, as_version=4)
        ex = make_exercise(sol)
        refs[p.name] = Reference(p.name, sol, ex, {c.get("id"): c.source for c in ex.cells})
    if not refs:
        raise SystemExit(say("no_references", path=chapters / "solutions"))
    return refs


def read_submission(path: Path):
    """The notebook, or a message saying why the file is not one."""
    return read_notebook(path)


def match_reference(name: str, nb, refs: dict[str, Reference]) -> Reference | None:
    """By file name, else the reference sharing the most check cell ids (or, without ids, the most sources)."""
    if name in refs:
        return refs[name]
    ids = {c.get("id") for c in nb.cells if c.get("id")}
    sources = {c.source.strip() for c in nb.cells}

    def shared(r: Reference) -> int:
        return len(ids & {c.get("id") for c in r.checks}) + len(sources & {c.source.strip() for c in r.checks})

    best = max(refs.values(), key=shared)
    return best if shared(best) else None


def restore_checks(nb, ref: Reference):
    """A copy of the submission whose check cells are the reference's (edited ones replaced, deleted ones back)."""
    import nbformat

    out = copy.deepcopy(nb)
    check_ids = {c.get("id") for c in ref.checks}
    out.cells = [c for c in out.cells if SELF_CHECK_TAG not in tags(c)]  # not graded; its checks run anyway
    seen = set()
    for cell in out.cells:  # duplicated ids (a copied cell): only the first keeps the id
        cid = cell.get("id")
        if cid in seen:
            cell["id"] = f"dup-{len(seen)}-{abs(hash((cid, len(seen)))) % 10**8}"
        seen.add(cell.get("id"))
        if CHECK_TAG in tags(cell) and cell.get("id") not in check_ids:
            cell.metadata["tags"] = [t for t in tags(cell) if t != CHECK_TAG]  # a student's own "check": not graded
    ref_ids = [c.get("id") for c in ref.solution.cells]
    for i, rc in enumerate(ref.solution.cells):
        if rc.get("id") not in check_ids:
            continue
        fresh = nbformat.v4.new_code_cell(rc.source)
        fresh["id"] = rc.get("id")
        fresh.metadata = copy.deepcopy(rc.metadata)
        pos = next((j for j, c in enumerate(out.cells) if c.get("id") == rc.get("id")), None)
        if pos is not None:
            out.cells[pos] = fresh
            continue
        # deleted: put it back after the nearest reference cell before it that the submission still has
        at = 0
        for prev in reversed(ref_ids[:i]):
            j = next((j for j, c in enumerate(out.cells) if c.get("id") == prev), None)
            if j is not None:
                at = j + 1
                break
        out.cells.insert(at, fresh)
    return out


def scan(nb, ref: Reference) -> dict[str, str]:
    """check id -> why its answer is not graded, from the text the student wrote (cells unlike the handed-out)."""
    flags: dict[str, str] = {}
    check_ids = [c.get("id") for c in ref.checks]
    answer_ids = {c.get("id") for c in ref.solution.cells if SOLUTION_TAG in tags(c)}
    disarm = []
    pending: list[str] = []  # delegations seen since the last check cell
    for k, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if cid in check_ids:
            if pending:
                flags[cid] = pending[0]
            pending = []
            continue
        if cell.cell_type != "code" or ref.handed_out.get(cid) == cell.source:
            continue
        given = set(ref.handed_out.get(cid, "").split("\n"))
        if any(SETUP_LINE.match(line) for line in given):  # the other edition's setup line is given too
            given |= SETUP_LINES
        # the student's lines, comments dropped (a word in a comment runs nothing)
        written = "\n".join(line.split("#", 1)[0] for line in cell.source.split("\n") if line not in given)
        for pat, why in DISARM:
            if pat.search(written):
                disarm.append(say("scan_cell", k=k + 1, why=say(f"scan.{why}")))
        m = DELEGATE.search(written)
        if m and cid in answer_ids:
            pending.append(say("delegates", what=m.group(0), cell=k + 1))
    if disarm:
        return {cid: say("disarms", why=disarm[0]) for cid in check_ids}
    return flags


# ------------------------------------------------------------------------------------------------ workers
def package_dir() -> Path:
    """The tinyserve package the grader itself runs (copied, never run in place)."""
    return Path(__file__).resolve().parents[1]


def digest(root: Path) -> str:
    """A hash of every file under root (names, bytes and modes): a copy a submission changed is caught."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(root)).encode() + b"\0")
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
        h.update(str(stat.S_IMODE(p.lstat().st_mode)).encode())
    return h.hexdigest()


def package_digest() -> str:
    """The grader's own package source, hashed."""
    return digest(package_dir())


class Worker:
    """One parallel lane: its own read-only package copy, scratch folder and (as root) unprivileged user."""

    def __init__(self, k: int, base: Path, drop_user: bool):
        self.k = k
        self.base = base / f"worker-{k}"
        self.uid = sandbox.UID_BASE + k if drop_user else None
        self.lib = self.base / "lib"
        self.fresh_copy()

    def fresh_copy(self) -> None:
        """A clean read-only copy of the package (again, after a submission changed it)."""
        if self.lib.exists():
            for p in [self.lib, *self.lib.rglob("*")]:
                if not p.is_symlink():
                    os.chmod(p, 0o755 if p.is_dir() else 0o644)
            shutil.rmtree(self.lib)
        self.lib.mkdir(parents=True)
        shutil.copytree(package_dir(), self.lib / "tinyserve", ignore=shutil.ignore_patterns("__pycache__"))
        for p in sorted(self.lib.rglob("*"), reverse=True):
            os.chmod(p, 0o555 if p.is_dir() else 0o444)
        os.chmod(self.lib, 0o555)
        self.digest = digest(self.lib)

    def changed(self) -> bool:
        return digest(self.lib) != self.digest


@dataclass
class Settings:
    """Limits for every submission, and how the grader runs them."""

    cpu_s: float = sandbox.Limits.cpu_s  # the box's own defaults, stated once in sandbox.Limits
    cell_cpu_s: float = sandbox.Limits.cell_cpu_s
    memory_bytes: int = sandbox.Limits.memory_bytes
    max_procs: int = sandbox.Limits.max_procs
    wall_s: float = 600.0
    lang: str = "en"  # of the printed lines and every CSV message, the checks' included


def _parse_report(lines: list[str]) -> tuple[dict, bool]:
    """The runner's report lines: check id -> {status, message} (first report wins), and whether it ended."""
    results, ended = {}, False
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        if d.get("end"):
            ended = True
        elif "id" in d and d["id"] not in results:
            results[d["id"]] = {"status": d.get("status"), "message": d.get("message", "")}
    return results, ended


def _why_killed(rc, cpu: float, tail: str, box, settings: Settings) -> str:
    """Why a runner that did not report its end stopped: the CPU limit, memory, or a signal/exit status."""
    if rc in (-24, -9) and (rc == -24 or cpu >= settings.cpu_s - 1):  # SIGXCPU, or SIGKILL at the hard limit
        return say("cpu_limit", limit=settings.cpu_s)
    if box.memory_hit() or "MemoryError" in tail:
        return say("memory_limit", gib=settings.memory_bytes / 2**30)
    return say("killed", how=say("exit_status", rc=rc))


def run_boxed(worker: Worker, nb, settings: Settings, cgroups: str | None, name: str) -> tuple[dict, str | None]:
    """Run a restored notebook in a boxed child; check id -> {status, message}, and why it stopped early."""
    import nbformat

    home = sandbox.scratch_dir(worker.base / "home", worker.uid)
    nb_path = home / "submission.ipynb"
    nbformat.write(nb, nb_path)
    if worker.uid is not None:
        os.chown(nb_path, worker.uid, worker.uid)
    limits = sandbox.Limits(settings.cpu_s, settings.cell_cpu_s, settings.memory_bytes, settings.max_procs,
                            uid=worker.uid, home=str(home))
    box = sandbox.Box(f"tinyserve-grade-{os.getpid()}-{worker.k}-{name}", limits, cgroups)
    r, w = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER", "VIRTUAL_ENV_PROMPT"))}
    env.update(PYTHONPATH=str(worker.lib), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OMP_WAIT_POLICY="PASSIVE", PYTHONNOUSERSITE="1")
    cmd = [sys.executable, "-m", "tinyserve.classroom.runner", str(nb_path), "--report-fd", str(w),
           "--box", json.dumps(limits.to_json()), "--lang", settings.lang]
    stopped = None
    try:
        proc = subprocess.Popen(cmd, env=env, cwd=home, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        os.close(w)
        w = -1
        lines: list[str] = []
        reader = threading.Thread(target=_read_all, args=(r, lines), daemon=True)
        reader.start()
        err_tail: list[bytes] = []
        err_reader = threading.Thread(target=lambda: err_tail.append(proc.stderr.read()[-4000:]), daemon=True)
        err_reader.start()
        rc, cpu = _wait(proc, settings.wall_s, box, settings.cpu_s + 5)
        if rc is None:
            over = box.cpu_s() or 0.0
            stopped = (say("cpu_limit", limit=settings.cpu_s) if over > settings.cpu_s
                       else say("wall_limit", limit=settings.wall_s))
        box.kill()
        if rc is None:
            proc.kill()
            rc, cpu = _wait(proc, 30)
        reader.join(timeout=10)
        err_reader.join(timeout=10)
        results, ended = _parse_report(lines)
        if stopped is None and not ended:
            tail = (err_tail[0] if err_tail else b"").decode("utf-8", "replace")
            stopped = _why_killed(rc, cpu, tail, box, settings)
        return results, stopped
    finally:
        if w >= 0:
            os.close(w)
        box.close()


def _wait(proc: subprocess.Popen, timeout: float, box: sandbox.Box | None = None,
          box_cpu_s: float | None = None) -> tuple[int | None, float]:
    """(exit status, or None if still running after timeout or past the box's CPU seconds; CPU seconds used)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = rc = os.waitstatus_to_exitcode(status)
            return rc, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline or box is not None and (box.cpu_s() or 0.0) > box_cpu_s:
            return None, 0.0
        time.sleep(0.05)


def _read_all(fd: int, lines: list[str]) -> None:
    with os.fdopen(fd, "rb") as f:
        data = f.read(4 << 20)  # a submission that floods its channel gets cut here
    lines += data.decode("utf-8", "replace").splitlines()


class Gate:
    """Many notebooks run at once (shared); a re-run that must be alone waits for them and holds the others off."""

    def __init__(self):
        self._cv, self._running, self._alone = threading.Condition(), 0, False

    @contextlib.contextmanager
    def shared(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._alone)
            self._running += 1
        try:
            yield
        finally:
            with self._cv:
                self._running -= 1
                self._cv.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._alone)
            self._alone = True
            self._cv.wait_for(lambda: self._running == 0)
        try:
            yield
        finally:
            with self._cv:
                self._alone = False
                self._cv.notify_all()


def grade_notebook(student: str, path: Path, refs: dict[str, Reference], worker: Worker, settings: Settings,
                   cgroups: str | None, gate: Gate | None = None) -> list[Row]:
    """Rows for one submitted file. A package copy found changed after the run is re-run alone (gate): only a
    notebook that changes its copy when nothing else runs gets the zero, never its neighbour in another worker."""
    gate = gate or Gate()
    nb, why = read_submission(path)
    if nb is None:
        return [Row(student, path.name, "-", "invalid", 0, 0, why)]
    ref = match_reference(path.name, nb, refs)
    if ref is None:
        return [Row(student, path.name, "-", "invalid", 0, 0, say("other_assignment"))]
    try:
        nb = give_ids(nb, ref.exercise)
    except Exception as e:  # noqa: BLE001 - a notebook we cannot line up: one row, never a crash
        return [Row(student, path.name, "-", "invalid", 0, 0, say("bad_schema", err=str(e)[:200]))]
    restored = restore_checks(nb, ref)
    flags = scan(restored, ref)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{student}-{path.stem}")[:80]
    with gate.shared():
        results, stopped = run_boxed(worker, restored, settings, cgroups, name)
        changed = worker.changed()  # (as root, a submission can reach any copy; as its own user, it cannot)
    if changed:  # this notebook, or one running beside it in another worker: run it again, alone, to know which
        worker.fresh_copy()
        with gate.exclusive():
            results, stopped = run_boxed(worker, restored, settings, cgroups, name)
            changed = worker.changed()
        if changed:
            worker.fresh_copy()
    rows = []
    for rc in ref.checks:
        cid, pts = rc.get("id"), points_of(rc)
        got = results.get(cid)
        status, msg = (got["status"], got["message"]) if got else ("failed", stopped or say("not_run"))
        if status not in ("passed", "failed", "blank", "integrity"):
            status, msg = "failed", str(msg)
        if cid in flags:
            status, msg = "integrity", flags[cid] + ("" if status == "passed" else say("its_check", msg=msg))
        if changed:
            status, msg = "integrity", say("changed_package")
        rows.append(Row(student, path.name, ref.label(rc), status, pts if status == "passed" else 0, pts, msg))
    for oc in ref.open_answers:
        rows.append(Row(student, path.name, ref.label(oc), "manual", None, points_of(oc), say("manual_row")))
    return rows


# ------------------------------------------------------------------------------------------------- a class
def grade(submissions: Path, chapters: Path = Path("chapters"), settings: Settings | None = None,
          workers: int | None = None, log=print) -> list[Row]:
    """Every student's every file, graded in parallel; rows in name order; one summary line per student."""
    settings = settings or Settings()
    set_language(settings.lang)
    refs = load_references(chapters)
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise SystemExit(say("no_students", path=submissions))
    jobs = []
    for sdir in students:
        files = sorted(p for p in sdir.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts
                       and not any(part.startswith(".") for part in p.relative_to(sdir).parts))
        jobs += [(sdir.name, p) for p in files]
    cgroups = sandbox.cgroup_kind()
    drop_user, warnings = sandbox.process_guard(cgroups)
    for warning in warnings:
        log(warning, file=sys.stderr)
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    results: dict[tuple[str, str], list[Row]] = {}
    with tempfile.TemporaryDirectory(prefix="tinyserve-grade-") as tmp:
        os.chmod(tmp, 0o755)  # the per-worker users reach their folders through it
        lanes: queue.Queue[Worker] = queue.Queue()
        gate = Gate()
        for k in range(n):
            lanes.put(Worker(k, Path(tmp), drop_user))

        def one(job):
            student, path = job
            lane = lanes.get()
            t0 = time.perf_counter()
            try:
                rows = grade_notebook(student, path, refs, lane, settings, cgroups, gate)
            except Exception as e:  # noqa: BLE001 - the grader's own failure on one file: a row, the rest go on
                rows = [Row(student, path.name, "-", "invalid", 0, 0,
                            say("grader_error", exc=type(e).__name__, err=e))]
            finally:
                lanes.put(lane)
            log(say("graded_in", student=student, file=path.relative_to(submissions / student),
                    s=time.perf_counter() - t0), file=sys.stderr)
            return job, rows

        with ThreadPoolExecutor(n) as pool:
            for (student, path), rows in pool.map(one, jobs):
                results[(student, str(path))] = rows
    max_total = sum(points_of(c) for r in refs.values() for c in [*r.checks, *r.open_answers])
    rows: list[Row] = []
    for sdir in students:
        mine = [row for (s, _), rs in sorted(results.items()) if s == sdir.name for row in rs]
        if not mine:
            mine = [Row(sdir.name, "-", "-", "invalid", 0, 0, say("no_files"))]
        rows += mine
        log(summary(sdir.name, mine, refs, max_total))
    return rows


def exercises(refs: dict[str, Reference]) -> list[tuple[str, float]]:
    """Every graded exercise of the assignment, in order, with its points."""
    return [(label_of(c), points_of(c)) for r in refs.values()
            for c in r.solution.cells if CHECK_TAG in tags(c) or OPEN_TAG in tags(c)]


def best(rows: list[Row]) -> dict[str, Row]:
    """A student's row per exercise (the best, if the same notebook was handed in twice)."""
    out: dict[str, Row] = {}
    for r in rows:
        if r.exercise != "-" and (r.exercise not in out or (r.points or 0) > (out[r.exercise].points or 0)):
            out[r.exercise] = r
    return out


def summary(student: str, rows: list[Row], refs: dict[str, Reference], max_total: float) -> str:
    """One line: points, passed answers, and what went wrong elsewhere."""
    per = best(rows)
    graded = [lab for lab, _ in exercises(refs)]
    n = {k: sum(r.result == k for r in per.values()) for k in ("passed", "failed", "integrity", "manual", "blank")}
    auto = sum(1 for r in refs.values() for _ in r.checks)
    parts = []
    missing = sum(lab not in per for lab in graded)
    if missing:
        parts.append(say("n_not_submitted", n=missing))
    if n["failed"]:
        parts.append(say("n_failed", n=n["failed"]))
    if n["blank"]:
        parts.append(say("n_blank", n=n["blank"]))
    if n["integrity"]:
        parts.append(say("n_integrity", n=n["integrity"]))
    invalid = sum(r.result == "invalid" for r in rows)
    if invalid:
        parts.append(say("n_invalid", n=invalid))
    if n["manual"]:
        parts.append(say("n_manual", n=n["manual"]))
    line = say("student_line", student=student, points=sum(r.points or 0 for r in per.values()),
               max_points=max_total, passed=n["passed"], total=auto)
    return line + (say("student_more", parts=say("list_sep").join(parts)) if parts else "")


def write_details(rows: list[Row], out) -> None:
    """One row per graded answer or ungradable file."""
    w = csv.writer(out)
    w.writerow(DETAIL_FIELDS)
    for r in rows:
        w.writerow([r.student, r.notebook, r.exercise, r.result, "" if r.points is None else f"{r.points:g}",
                    f"{r.max_points:g}", r.message])


def _limit_prefixes() -> tuple[str, ...]:
    """How a message saying the whole notebook hit a limit starts, in every language."""
    from ..lang import t

    return tuple(t(f"classroom.{k}", c).split("{")[0] for k in ("cpu_limit", "wall_limit", "memory_limit")
                 for c in LANGUAGES)


def write_lms(rows: list[Row], refs: dict[str, Reference], out) -> None:
    """One row per student: points per answer (empty: open answer to grade by hand), total, flags."""
    cols = exercises(refs)
    w = csv.writer(out)
    w.writerow(["student", *[f"{lab} [{pts:g}]" for lab, pts in cols], "total", "flags"])
    for student in sorted({r.student for r in rows}):
        mine = [r for r in rows if r.student == student]
        per = best(mine)
        cells = []
        for lab, _ in cols:
            r = per.get(lab)
            cells.append("" if r is None or r.points is None else f"{r.points:g}")
        flags = [say("flag_integrity", label=r.exercise) for r in per.values() if r.result == "integrity"]
        flags += [say("flag_invalid", file=r.notebook, why=r.message) for r in mine if r.result == "invalid"]
        flags += sorted({say("flag_limit", file=r.notebook, why=r.message) for r in mine
                         if r.result == "failed" and r.message.startswith(_limit_prefixes())})
        total = sum(r.points or 0 for r in per.values())
        w.writerow([student, *cells, f"{total:g}", "; ".join(flags)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinyserve.classroom.grade", description=t("cli.grade.description"))
    ap.add_argument("submissions", type=Path, help=t("cli.grade.submissions"))
    ap.add_argument("--out", type=Path, default=Path("scores.csv"), help=t("cli.grade.out"))
    ap.add_argument("--details", type=Path, default=None, help=t("cli.grade.details"))
    ap.add_argument("--chapters", type=Path, default=Path("chapters"), help=t("cli.grade.chapters"))
    ap.add_argument("--workers", type=int, default=None, help=t("cli.grade.workers"))
    ap.add_argument("--cpu-seconds", type=float, default=60.0, help=t("cli.grade.cpu_seconds"))
    ap.add_argument("--cell-cpu-seconds", type=float, default=30.0, help=t("cli.grade.cell_cpu_seconds"))
    ap.add_argument("--memory-gib", type=float, default=3.0, help=t("cli.grade.memory_gib"))
    ap.add_argument("--max-procs", type=int, default=32, help=t("cli.grade.max_procs"))
    ap.add_argument("--wall-seconds", type=float, default=600.0, help=t("cli.grade.wall_seconds"))
    ap.add_argument("--lang", type=normalize, default="en", help=t("cli.grade.lang"))
    args = ap.parse_args(argv)
    set_language(args.lang)
    if not args.submissions.is_dir():
        print(say("not_a_folder", path=args.submissions), file=sys.stderr)
        return 2
    settings = Settings(args.cpu_seconds, args.cell_cpu_seconds, int(args.memory_gib * 2**30), args.max_procs,
                        args.wall_seconds, args.lang)

    def log(msg, file=sys.stdout):
        print(msg, file=file, flush=True)

    refs = load_references(args.chapters)
    rows = grade(args.submissions, args.chapters, settings, args.workers, log)
    details = args.details or args.out.with_name(args.out.stem + "-details" + args.out.suffix)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        write_lms(rows, refs, f)
    with open(details, "w", newline="", encoding="utf-8") as f:
        write_details(rows, f)
    print(say("wrote_tables", out=args.out, details=details, n=len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
