"""Run a notebook's code cells in order, in one namespace, as a kernel would; what each check cell said.

The self-check runs it in the learner's own process; the grader runs it in a boxed child process
(`python -m tinyserve.classroom.runner`, see sandbox.py), which prints one JSON line per cell on a pipe.
Magics work (IPython's shell runs the cells when it is installed); a cell's own output is swallowed.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import time
from dataclasses import dataclass

from .notebooks import CHECK_TAG, SELF_CHECK_TAG, tags


class _Node(dict):
    """A notebook read as plain JSON, with the attribute access nbformat's nodes give (cell.source, nb.cells)."""

    __getattr__ = dict.get

    @classmethod
    def of(cls, data):
        if isinstance(data, dict):
            node = cls({k: cls.of(v) for k, v in data.items()})
            if isinstance(node.get("source"), list):
                node["source"] = "".join(node["source"])
            return node
        if isinstance(data, list):
            return [cls.of(v) for v in data]
        return data


class CellCPULimit(BaseException):
    """A cell used its CPU seconds (a BaseException: `except Exception` in the cell does not swallow it)."""


@dataclass
class Outcome:
    """What one check cell did: passed, failed, blank (not attempted) or integrity, and its message."""

    status: str
    message: str = ""


def classify(err: BaseException | None, cell_cpu: float | None = None) -> Outcome:
    """A check cell's outcome from what it raised."""
    from ..lang import LANGUAGES, t
    from . import checks
    from .text import say

    if err is None:
        return Outcome("passed")
    if isinstance(err, CellCPULimit):
        return Outcome("failed", say("cell_cpu_limit", limit=cell_cpu or 0))
    if isinstance(err, checks.NotWritten):
        return Outcome("blank", str(err))
    text = f"{type(err).__name__}: {err}".strip()
    if isinstance(err, checks.IntegrityError) or any(t("classroom.integrity", c, why="") in str(err)
                                                     for c in LANGUAGES):
        return Outcome("integrity", str(err))
    if isinstance(err, checks._AE):
        return Outcome("failed", str(err))
    if isinstance(err, MemoryError):
        return Outcome("failed", "MemoryError")
    return Outcome("failed", text[:2000])


class _Shell:
    """IPython's shell when there is one (magics, get_ipython), else plain exec."""

    def __init__(self, ns: dict):
        try:
            from IPython.core.interactiveshell import InteractiveShell

            self.ip = InteractiveShell.instance(user_ns=ns)
            self.ip.showtraceback = lambda *a, **k: None  # the outcome is judged from the exception itself
            self.ip.showsyntaxerror = lambda *a, **k: None
        except Exception:  # noqa: BLE001 - no IPython: plain Python cells
            self.ip = None
        self.ns = ns

    def run(self, source: str, name: str) -> BaseException | None:
        if self.ip is not None:
            r = self.ip.run_cell(source, store_history=False)
            return r.error_in_exec or r.error_before_exec
        try:
            exec(compile(source, name, "exec"), self.ns)  # noqa: S102 - running the notebook is the point
        except BaseException as e:  # noqa: BLE001 - recorded, judged by the caller
            return e
        return None


def _on_cpu_limit(signum, frame):
    raise CellCPULimit()


def _pin(lang: str) -> BaseException | None:
    """Set the language a check cell speaks in (inside the cell's limits: a listener the notebook added runs too)."""
    from ..lang import set_language

    try:
        set_language(lang)
    except Exception as e:  # noqa: BLE001 - judged like the cell's own failure
        return e
    return None


def execute(nb, on_cell=None, cell_cpu: float | None = None, skip_self_check: bool = True,
            lang: str | None = None) -> dict[str, Outcome]:
    """Run the code cells; check cell id -> Outcome. on_cell(index, cell, outcome) after every code cell.
    lang: the language every check cell speaks in (set again before each, whatever the notebook set)."""
    ns: dict = {"__name__": "__main__"}
    shell = _Shell(ns)
    results = {}
    if cell_cpu:
        signal.signal(signal.SIGPROF, _on_cpu_limit)
    for k, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or (skip_self_check and SELF_CHECK_TAG in tags(cell)):
            continue
        sink = io.StringIO()
        if cell_cpu:
            signal.setitimer(signal.ITIMER_PROF, cell_cpu)  # CPU time of this process, not wall time
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                err = _pin(lang) if lang and CHECK_TAG in tags(cell) else None
                err = err or shell.run(cell.source, f"cell {k + 1}")
        except CellCPULimit as e:  # raised outside the cell's own frames (e.g. in IPython's bookkeeping)
            err = e
        finally:
            if cell_cpu:
                signal.setitimer(signal.ITIMER_PROF, 0)
        out = classify(err, cell_cpu)
        if CHECK_TAG in tags(cell):
            results[cell.get("id")] = out
        if on_cell is not None:
            on_cell(k, cell, out)
    return results


def main(argv: list[str] | None = None) -> int:
    """The grader's child: enter the box, run the notebook, print one JSON line per check cell on --report-fd."""
    ap = argparse.ArgumentParser(prog="python -m tinyserve.classroom.runner")
    ap.add_argument("notebook")
    ap.add_argument("--report-fd", type=int, required=True)
    ap.add_argument("--box", required=True, help="the limits, as JSON (sandbox.Limits)")  # words: ok (the grader calls it)
    ap.add_argument("--lang", default=None, help="the language of the checks' messages (default: the notebook's)")  # words: ok (the grader calls it)
    args = ap.parse_args(argv)
    from . import sandbox

    sandbox.enter(sandbox.Limits(**json.loads(args.box)))  # before any of the submission's code runs
    me = os.getpid()
    # a process the submission forks from Python ends at once: it would be a copy of this runner (grading
    # itself again, spinning beside it); forks from C still meet the box's process count and CPU accounting
    os.register_at_fork(after_in_child=lambda: os._exit(0))
    report = os.fdopen(args.report_fd, "w", buffering=1)

    def on_cell(k, cell, out):
        if os.getpid() != me:  # a process the submission forked: it does not speak for the notebook
            os._exit(0)
        if CHECK_TAG in tags(cell):
            report.write(json.dumps({"id": cell.get("id"), "status": out.status, "message": out.message,
                                     "cpu_s": round(time.process_time(), 2)}) + "\n")

    with open(args.notebook, encoding="utf-8") as f:  # validated by the grader: plain JSON (nbformat costs 2 s)
        nb = _Node.of(json.load(f))
    limits = json.loads(args.box)
    execute(nb, on_cell, cell_cpu=limits.get("cell_cpu_s"), lang=args.lang)
    if os.getpid() == me:
        report.write(json.dumps({"end": True}) + "\n")
        report.flush()
    os._exit(0)  # no atexit or finalizers the submission may have registered


if __name__ == "__main__":
    sys.exit(main())
