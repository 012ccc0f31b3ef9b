"""Long runs show progress where someone is watching, and stay quiet elsewhere."""
from __future__ import annotations

import sys

import pytest

from tinyserve import loop
from tinyserve.engine import Engine


@pytest.fixture
def no_delay(monkeypatch):
    monkeypatch.setattr(loop, "PROGRESS_DELAY_S", 0.0)  # as if the run had lasted longer than the delay


def test_progress_bar_counts_finished_requests_when_asked(no_delay, capsys):
    Engine().run("chapter-7.1-finisher", "continuous", dry_run=True, progress=True)
    err = capsys.readouterr().err
    assert "63/63" in err and "req" in err  # the default finisher: 63 requests


def test_no_progress_when_not_asked_or_not_watched(no_delay, capsys, monkeypatch):
    Engine().run("chapter-7.1-finisher", "continuous", dry_run=True, progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    Engine().run("chapter-7.1-finisher", "continuous", dry_run=True)  # stderr is captured: not a terminal
    assert capsys.readouterr().err == ""


def test_a_notebook_kernel_gets_progress_by_default(no_delay, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", sys)  # any module: only its presence is checked
    Engine().run("chapter-7.1-finisher", "continuous", dry_run=True)
    assert "63/63" in capsys.readouterr().err


def test_the_cli_is_quiet_under_json_unless_asked(no_delay, capsys):
    from tinyserve.tools.cli import main

    assert main(["run", "--workload", "chapter-7.1-padding", "--policy", "static", "--dry-run", "--json"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["run", "--workload", "chapter-7.1-padding", "--policy", "static", "--dry-run", "--json",
                 "--progress"]) == 0
    assert "2/2" in capsys.readouterr().err
