"""The README's one test command (`python -m pytest -q`) runs, in this order: the fast unit tests (tests/),
the notebooks under nbval in lax mode (chapters/, widgets/demo.ipynb; chapters/exercises/ is left out by
chapters/conftest.py), then the real-browser tests (tests/browser/, marker `browser`), the slowest."""
from __future__ import annotations

collect_ignore = ["tests/browser/placeholder.ipynb"]  # the browser harness's control page, not a lesson


def _stage(item) -> int:
    if item.get_closest_marker("browser"):
        return 2
    return 1 if item.path.suffix == ".ipynb" else 0


def pytest_collection_modifyitems(config, items) -> None:
    """Unit tests first, notebooks next, browser last (a stable sort keeps each notebook's cells in order)."""
    items.sort(key=_stage)
