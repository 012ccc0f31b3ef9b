"""Grade a folder of submitted exercise notebooks with nbval.

    python -m tinyserve.classroom.grade SUBMISSIONS_DIR [--out scores.csv] [--chapters chapters]
                                        [--timeout 300] [--cell-timeout 120]

SUBMISSIONS_DIR holds one folder per student (the folder's name is the student) with that student's notebooks,
named as handed out (7.1-exercises.ipynb, ...); a notebook with another name is matched by its check cells.
For each submission: every check cell is put back from the reference solution by cell id (an edited or
deleted check counts as the original), the cells the student wrote are scanned for answers that hand the work
to the built-in policies or the engine, or that disarm the checks, then nbval runs the notebook in its own
kernel process under a time limit. The score table (CSV: student, notebook, exercise, result, message) has a
row per graded check; result is passed, failed, integrity (not passed: the answer bypasses the exercise) or
invalid (the file is not a notebook: one row, the others are still graded). A line per student is printed.
Not a sandbox: student code runs with your permissions; grade inside a container.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CHECK_TAG, SOLUTION_TAG = "check", "solution"
FIELDS = ("student", "notebook", "exercise", "result", "message")
ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*[A-Za-z]")
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")
# anywhere in what the student wrote: disarming the checks (rebinding, swallowing, replacing the checker)
DISARM = [
    (re.compile(r"\bAssertionError\s*=(?!=)"), "rebinds AssertionError"),
    (re.compile(r"\bbuiltins\b|__builtins__"), "touches builtins"),
    (re.compile(r"\bset_custom_exc\b|\bsys\.excepthook\b"), "installs an exception handler"),
    (re.compile(r"\bsys\.modules\b|\bimportlib\b|\b__import__\b"), "manipulates imports"),
    (re.compile(r"\bclassroom\b"), "touches the checker (tinyserve.classroom)"),
    (re.compile(r"(?<![\w.])(?:exec|eval|compile)\s*\(|__file__"), "runs generated code or reaches for source files"),
    (re.compile(r"\bimport\s+inspect\b|\binspect\.|\b(?:currentframe|_getframe|f_back|f_locals|f_globals)\b"
                r"|\bgc\.get_"), "inspects the checker's frames or objects"),
    (re.compile(r"\bsetattr\s*\(|\bdelattr\s*\("), "patches objects with setattr/delattr"),
    (re.compile(r"^\s*(?:tinyserve|engine|Engine|Run|Trace|policies|checks)\.[\w.]+\s*=(?!=)", re.M),
     "patches the engine"),
]
# in an answer cell: naming the built-in policies (the engine itself is booby-trapped at check time instead, so
# a cell of the student's own that runs the engine to explore is not flagged)
DELEGATE = re.compile(r"\b(StaticBatching|DynamicBatching|ContinuousBatching|ChunkedPrefill|make_policy)\b"
                      r"|from\s+tinyserve\.policies\s+import\s+\*")


@dataclass
class Row:
    """One line of the score table."""

    student: str
    notebook: str
    exercise: str
    result: str
    message: str


# --------------------------------------------------------------------------------------------- references
@dataclass
class Reference:
    """A solution notebook (its check cells are the graded ones) and the exercise handed out for it."""

    name: str
    solution: object  # nbformat node
    handed_out: dict[str, str]  # cell id -> source as handed out (stubs in answer cells)

    @property
    def checks(self) -> list:
        return [c for c in self.solution.cells if CHECK_TAG in c.get("metadata", {}).get("tags", [])]

    def label(self, cell) -> str:
        return cell.get("metadata", {}).get("tinyserve", {}).get("exercise", cell.get("id"))


def load_references(chapters: Path) -> dict[str, Reference]:
    """The reference notebooks by file name."""
    import nbformat

    from .generate import make_exercise

    refs = {}
    for p in sorted((chapters / "solutions").glob("*.ipynb")):
        sol = nbformat.read(p, as_version=4)
        ex = make_exercise(sol)
        refs[p.name] = Reference(p.name, sol, {c.get("id"): c.source for c in ex.cells})
    if not refs:
        raise SystemExit(f"grade: no reference notebooks in {chapters / 'solutions'}")
    return refs


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def read_submission(path: Path):
    """The notebook, or a message saying why the file is not one."""
    import nbformat

    try:
        raw = path.read_bytes()
    except OSError as e:
        return None, f"cannot read the file ({e.strerror})"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text"
    except json.JSONDecodeError as e:
        return None, f"not a notebook: invalid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
    if not isinstance(data, dict) or "cells" not in data or not isinstance(data.get("cells"), list):
        return None, "not a notebook: valid JSON, but not a Jupyter notebook (no list of cells)"
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
        nbformat.validate(nb)
    except Exception as e:  # noqa: BLE001 - any schema problem is the same answer for the student
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, f"not a valid notebook: {first[:200]}"
    return nb, None


def match_reference(name: str, nb, refs: dict[str, Reference]) -> Reference | None:
    """By file name, else the reference sharing the most check cell ids."""
    if name in refs:
        return refs[name]
    ids = {c.get("id") for c in nb.cells}
    best = max(refs.values(), key=lambda r: len(ids & {c.get("id") for c in r.checks}))
    return best if ids & {c.get("id") for c in best.checks} else None


def restore_checks(nb, ref: Reference):
    """A copy of the submission whose check cells are the reference's (edited ones replaced, deleted ones back)."""
    import copy

    import nbformat

    out = copy.deepcopy(nb)
    check_ids = {c.get("id") for c in ref.checks}
    seen = set()
    for cell in out.cells:  # duplicated ids (a copied cell): only the first keeps the id
        cid = cell.get("id")
        if cid in seen:
            cell["id"] = f"dup-{len(seen)}-{abs(hash((cid, len(seen)))) % 10**8}"
        seen.add(cell.get("id"))
        if CHECK_TAG in _tags(cell) and cell.get("id") not in check_ids:
            cell.metadata["tags"] = [t for t in _tags(cell) if t != CHECK_TAG]  # a student's own "check": not graded
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
    answer_ids = {c.get("id") for c in ref.solution.cells if SOLUTION_TAG in _tags(c)}
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
        # the student's lines, comments dropped (a word in a comment runs nothing)
        written = "\n".join(line.split("#", 1)[0] for line in cell.source.split("\n") if line not in given)
        for pat, why in DISARM:
            if pat.search(written):
                disarm.append(f"code cell {k + 1} {why}")
        m = DELEGATE.search(written)
        if m and cid in answer_ids:
            pending.append(f"the answer hands the work to the library ({m.group(0)} in cell {k + 1}); "
                           "write it yourself")
    if disarm:
        return {cid: f"the submission disarms the checks: {disarm[0]}" for cid in check_ids}
    return flags


# ------------------------------------------------------------------------------------------------ running
def _descendants(pid: int) -> list[int]:
    """Process ids below pid (from /proc: the kernel runs in its own session, so a group kill misses it)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def run_nbval(nb_path: Path, timeout: float, cell_timeout: float) -> tuple[dict[int, tuple[str, str]], str | None]:
    """Run nbval on one notebook in its own pytest and kernel processes; code cell index -> (status, message)."""
    work = nb_path.parent
    report = work / "cells.jsonl"
    (work / "pytest.ini").write_text("[pytest]\n")  # no project config, no conftest from elsewhere
    cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
           f"--nbval-cell-timeout={cell_timeout}", "-p", "no:cacheprovider", "-p", "tinyserve.classroom.report_plugin",
           "-q", "--color=no", "-c", str(work / "pytest.ini"), "--rootdir", str(work), str(nb_path)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE", PYTHONDONTWRITEBYTECODE="1",
               TINYSERVE_GRADE_REPORT=str(report))
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    note = None
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid] + _descendants(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate()
        note = f"not run: the notebook ran past the grader's limit of {timeout:g} s and was stopped"
    cells: dict[int, tuple[str, str]] = {}
    if report.is_file():
        for line in report.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            m = re.search(r"Cell (\d+)", d["cell"])
            if m:
                ok = d["outcome"] == "passed"
                cells[int(m.group(1))] = ("passed", "") if ok else ("failed", _message(d["text"]))
    return cells, note


def _message(text: str) -> str:
    """The learner-facing line of a failed cell: its exception, or nbval's timeout."""
    text = ANSI.sub("", text)
    if "Timeout of" in text:
        m = re.search(r"Timeout of [\d.]+ seconds exceeded[^\n]*", text)
        return (m.group(0) if m else "timed out") + " (an endless loop?)"
    last = None
    for line in text.splitlines():
        m = EXC_LINE.match(line.strip())
        if m:
            last = f"{m.group(1)}: {m.group(2)}".strip()
    if last:
        return last
    if "Kernel dead" in text or "kernel died" in text.lower():
        return "the kernel died (killed by an earlier cell's time limit?)"
    return text.strip().splitlines()[-1][:300] if text.strip() else "failed"


def grade_notebook(student: str, path: Path, refs: dict[str, Reference], timeout: float,
                   cell_timeout: float) -> list[Row]:
    """Rows for one submitted file."""
    import nbformat

    nb, why = read_submission(path)
    if nb is None:
        return [Row(student, path.name, "-", "invalid", why)]
    ref = match_reference(path.name, nb, refs)
    if ref is None:
        return [Row(student, path.name, "-", "invalid", "not one of the exercise notebooks (no known check cells)")]
    restored = restore_checks(nb, ref)
    flags = scan(restored, ref)
    with tempfile.TemporaryDirectory(prefix="tinyserve-grade-") as tmp:
        nb_path = Path(tmp) / "submission.ipynb"
        nbformat.write(restored, nb_path)
        cells, note = run_nbval(nb_path, timeout, cell_timeout)
    code_index = {c.get("id"): i for i, c in enumerate(c for c in restored.cells if c.cell_type == "code")}
    rows = []
    for rc in ref.checks:
        cid = rc.get("id")
        status, msg = cells.get(code_index[cid], ("failed", note or "the check did not run"))
        if status == "failed" and "INTEGRITY:" in msg:
            status = "integrity"
        if cid in flags:
            status, msg = "integrity", flags[cid] + ("" if status == "passed" else f" [its check: {msg}]")
        rows.append(Row(student, path.name, ref.label(rc), status, msg))
    return rows


class GradingStopped(Exception):
    """Grading cannot go on (the package under test was modified); rows holds what was graded."""

    def __init__(self, rows: list[Row], message: str):
        super().__init__(message)
        self.rows = rows


def package_digest() -> str:
    """A hash of the tinyserve package's source: a submission that rewrites the checker is caught."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def grade(submissions: Path, chapters: Path = Path("chapters"), timeout: float = 300.0,
          cell_timeout: float = 120.0, log=print) -> list[Row]:
    """Every student's every file, in name order; one summary line per student through log."""
    refs = load_references(chapters)
    digest = package_digest()
    rows: list[Row] = []
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise SystemExit(f"grade: no student folders in {submissions}")
    for sdir in students:
        mine: list[Row] = []
        files = sorted(p for p in sdir.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts)
        for path in files:
            t0 = time.perf_counter()
            got = grade_notebook(sdir.name, path, refs, timeout, cell_timeout)
            if package_digest() != digest:  # the submission rewrote the engine or the checker on disk
                got = [Row(r.student, r.notebook, r.exercise, "integrity",
                           "the submission changed the tinyserve package's files while it ran") for r in got]
                rows += mine + got
                log(summary(sdir.name, mine + got, sum(len(r.checks) for r in refs.values())))
                raise GradingStopped(rows, f"{sdir.name}/{path.name} modified the tinyserve package; grading "
                                     "stopped (reinstall tinyserve; the rows so far are in the table)")
            mine += got
            log(f"  {sdir.name}/{path.relative_to(sdir)}: graded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        if not files:
            mine.append(Row(sdir.name, "-", "-", "invalid", "no files submitted"))
        rows += mine
        log(summary(sdir.name, mine, sum(len(r.checks) for r in refs.values())))
    return rows


def summary(student: str, rows: list[Row], total: int) -> str:
    """One line: passed out of every graded exercise, and what went wrong elsewhere."""
    n = {k: sum(r.result == k for r in rows) for k in ("passed", "failed", "integrity", "invalid")}
    parts = [f"{student}: {n['passed']}/{total} passed"]
    missing = total - sum(r.exercise != "-" for r in rows)
    if missing > 0:
        parts.append(f"{missing} not submitted")
    if n["failed"]:
        parts.append(f"{n['failed']} failed")
    if n["integrity"]:
        parts.append(f"{n['integrity']} not counted (integrity)")
    if n["invalid"]:
        parts.append(f"{n['invalid']} file(s) not gradable")
    return parts[0] + (" (" + ", ".join(parts[1:]) + ")" if parts[1:] else "")


def write_csv(rows: list[Row], out) -> None:
    """The score table."""
    w = csv.writer(out)
    w.writerow(FIELDS)
    for r in rows:
        w.writerow([r.student, r.notebook, r.exercise, r.result, r.message])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinyserve.classroom.grade", description=__doc__.split("\n")[0])
    ap.add_argument("submissions", type=Path, help="a folder with one folder of notebooks per student")
    ap.add_argument("--out", type=Path, default=Path("scores.csv"), help="the CSV score table (default scores.csv)")
    ap.add_argument("--chapters", type=Path, default=Path("chapters"), help="holds solutions/ (the reference)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per notebook, all cells together")
    ap.add_argument("--cell-timeout", type=float, default=120.0, help="seconds per cell")
    args = ap.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"grade: {args.submissions} is not a folder", file=sys.stderr)
        return 2

    def log(msg, file=sys.stdout):
        print(msg, file=file, flush=True)

    stopped = None
    try:
        rows = grade(args.submissions, args.chapters, args.timeout, args.cell_timeout, log)
    except GradingStopped as e:
        rows, stopped = e.rows, str(e)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        write_csv(rows, f)
    print(f"score table: {args.out} ({len(rows)} rows)")
    if stopped:
        print(f"grade: {stopped}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
