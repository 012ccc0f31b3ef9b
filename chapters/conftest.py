"""pytest over chapters/: the exercise notebooks are handed out unanswered, so their checks fail by design.

They are skipped when pytest walks chapters/ (the notebook test run), and run when named on the command line
(a learner's self-check: python -m pytest --nbval-lax chapters/exercises/7.1-exercises.ipynb).
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
# each edition's handed-out notebooks; and the zh-TW solutions, which are the English ones' code cell for cell
# (tests/classroom/test_classroom_zh.py runs and grades them): nbval would run the same checks a second time
EXERCISES = [HERE / "exercises", HERE / "zh-TW" / "exercises", HERE / "zh-TW" / "solutions"]


def _inside(path: Path) -> bool:
    return any(path == e or e in path.parents for e in EXERCISES)


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    """Ignore chapters/exercises/ (and zh-TW/exercises/) unless the command line names it (or something inside it)."""
    if not _inside(Path(collection_path).resolve()):
        return None
    named = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    return None if any(_inside(p) for p in named) else True


from nbfonts import pytest_runtest_makereport  # noqa: E402,F401  (a missing glyph fails the cell)
