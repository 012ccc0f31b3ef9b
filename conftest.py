"""The README's full run (`python -m pytest -q -n 2`) runs, in this order: the unit tests (tests/), the notebooks
under nbval in lax mode that have no browser page (the exercise solutions; chapters/exercises/ is left out by
chapters/conftest.py), then the real-browser tests (tests/browser/, marker `browser`), the slowest: each chapter
notebook's page and widgets/demo.ipynb's run its cells and check their outputs as nbval would. Without -n the same
order, serially. A run without the pages (`-m "not browser"`, or a notebook named alone) runs them under nbval."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler import LoadFileScheduling

ROOT = Path(__file__).resolve().parent
collect_ignore = ["tests/browser/placeholder.ipynb"]  # the browser harness's control page, not a lesson
# each of these tests is one notebook page in JupyterLab: a work unit of its own under xdist (see below)
BROWSER_PAGES = "tests/browser/test_notebooks_in_browser.py::"


def _stage(item: pytest.Item) -> int:
    if item.get_closest_marker("browser"):
        return 2
    return 1 if item.path.suffix == ".ipynb" else 0


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: only pages that really run count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out nbval's items of a notebook whose browser page runs in this session (the page checks its outputs
    as nbval would: tests/browser/nbval_lax.py); then unit tests first, notebooks next, browser last (a stable
    sort keeps each notebook's cells in order)."""
    pages = {ROOT / item.callspec.params["notebook"] for item in items
             if item.nodeid.startswith(BROWSER_PAGES) and hasattr(item, "callspec")}
    proven = {item for item in items if item.path.suffix == ".ipynb" and item.path in pages}  # nbval's cells
    if proven:
        config.hook.pytest_deselected(items=list(proven))
        items[:] = [item for item in items if item not in proven]
    items.sort(key=_stage)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: ignored where it is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadFileScheduling | None:
    """`-n N --dist loadfile`, with the workers taking files in the order above (not largest first).

    A file stays on one worker (a notebook's cells share one kernel; a module's fixtures are built once), but
    each browser page is a unit of its own: the pages come last, and a single unit of them all would leave
    one worker running them alone. Each worker starts its own JupyterLab (tests/browser/conftest.py: a
    session fixture on a free port, its own copy of the notebooks), so two pages never share a server.
    """
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class PagesApart(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(BROWSER_PAGES) else super()._split_scope(nodeid)

    config.option.loadscopereorder = False  # keep the stage order: unit, notebooks, browser
    return PagesApart(config, log)
