"""A pytest plugin the grader loads into nbval's run: each cell's outcome and failure text, as JSON lines.

nbval marks every cell after a timed-out one as xfail, which a junit report shows as skipped or passed; here an
xfailed cell counts as failed and an xpassed one as passed, each with its own failure text. Lines are appended
as cells finish, so a run killed at the grader's time limit still leaves what it did.
"""
from __future__ import annotations

import json
import os


def pytest_runtest_logreport(report) -> None:
    """Append one line per cell (its call phase, or a setup that did not pass)."""
    path = os.environ.get("TINYSERVE_GRADE_REPORT")
    if not path or not (report.when == "call" or report.outcome != "passed"):
        return
    outcome = report.outcome
    if hasattr(report, "wasxfail"):  # after a timeout: judge the cell by what it did
        outcome = "failed" if report.outcome == "skipped" else "passed"
    line = {"cell": report.nodeid.rsplit("::", 1)[-1], "outcome": outcome,
            "text": str(report.longrepr) if report.longrepr is not None else ""}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
