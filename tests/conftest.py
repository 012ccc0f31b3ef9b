"""Shared fixtures (a seeded random TinyGPT, the shipped checkpoint, one torch thread) and the quick tier's cut.

Torch loads only for the tests that use these fixtures (it is imported inside them, type hints are strings), so
a test of the torch-free layers (lang, core, cost, trace) starts without it. Device- and model-parametrized
tests use helpers.DEVICES and helpers.MODEL_KINDS: every variant is always *collected*; one this machine cannot
run (CUDA without a GPU, the checkpoint before it is trained) shows up as a skip with its reason, never as a
silently missing test. Plain helpers live in helpers.py.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tinyserve.model.gpt import TinyGPT

TESTS = Path(__file__).parent
# the CLI speaks the user's locale (tools/speak.py): the tests read its English word for word whatever LANG the
# developer has (tests/tools/test_cli_locale.py sets the locale it checks itself)
os.environ["TINYSERVE_LANG"] = "en"
# Marked `slow`, so the quick tier (-m "not slow and not browser", README "Tests") leaves them to the full run:
# each took over ~5 s (pytest --durations, one process, 2 busy cores) or starts a server, a grader or nbgrader.
# A key is a file, file::test (every parametrization) or file::fixture (every test that uses it).
SLOW = {
    "classroom/test_classroom_nbgrader.py": "77 s: nbgrader releases, then autogrades in 12 kernels",
    "tools/test_bench.py::quick_result": "75 s: the benchmark against transformers",
    "tools/test_cli.py::bad_results": "every bad input through the CLI (one interpreter)",
    "classroom/test_classroom_grade.py::graded": "25 s: the boxed grader on a class folder",
    "tools/test_hf.py::test_export_hf_command": "17 s: the command in a process, transformers loads the export",
    "core/test_properties.py::test_every_policy_completes_every_request_with_the_alone_tokens": "14 s: hypothesis",
    "tools/test_replay_server.py::server": "11 s: `transformers serve`",
    "tools/test_cli.py::test_real_run_tokens_match_generate_and_over_long_is_rejected_alone": "10 s: CLI processes",
    "model/test_threads.py::test_users_choices_win": "10 s: a process per setting",
    "lang/test_fonts.py::test_a_figure_in_chinese_draws_with_the_fallback_and_fails_without_it": "9 s: processes",
    "classroom/test_classroom.py::test_self_check_command_on_a_saved_notebook": "8 s: the self-check command",
    "classroom/test_classroom_zh.py::test_self_check_command_speaks_the_notebooks_language": "4-10 s: the same",
    "cost/test_clock.py::test_calibration_on_a_small_random_model_is_sane": "7 s: calibration runs the model",
    "core/test_properties.py::test_an_abort_frees_its_slot_and_changes_no_one_elses_tokens": "7 s: hypothesis",
    "tools/test_train.py::test_a_few_training_steps_lower_the_loss_and_write_a_loadable_checkpoint": "7 s: training",
    "classroom/test_classroom_zh.py::graded_zh": "6 s: the boxed grader",
    "tools/test_replay.py::test_cli_bad_input": "6 s: CLI processes",
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects (pytest's own hook)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark SLOW's tests `slow`; a key that names no test or fixture in its file is an error, not a silent no-op."""
    seen: set[str] = set()
    for item in items:
        if TESTS not in item.path.parents:
            continue
        rel = item.path.relative_to(TESTS).as_posix()
        seen.add(rel)
        names = [rel, f"{rel}::{getattr(item, 'originalname', item.name)}"]
        names += [f"{rel}::{f}" for f in getattr(item, "fixturenames", ())]  # fixtures of fixtures included
        if any(n in SLOW for n in names):
            item.add_marker(pytest.mark.slow)
    for key in SLOW:
        rel, _, name = key.partition("::")
        if not (TESTS / rel).is_file() or (
                rel in seen and name and not re.search(rf"^def {name}\(", (TESTS / rel).read_text(), re.M)):
            raise pytest.UsageError(f"tests/conftest.py SLOW: {key} names no file, test or fixture")


@pytest.fixture(scope="session")
def random_model() -> "TinyGPT":
    """The seeded random model, float64 on CPU (n_positions 512: room for a 300-token prompt)."""
    from helpers import _base_model

    return _base_model("random")


@pytest.fixture(scope="session")
def checkpoint_model() -> "TinyGPT":
    """The shipped checkpoint in float64 on CPU (skipped, with a reason, before it is trained)."""
    from helpers import _base_model

    return _base_model("checkpoint")


@pytest.fixture(scope="session")
def get_model() -> Callable[..., "TinyGPT"]:
    """get_model(kind, device="cpu", dtype=torch.float64) -> a cached model copy; do not modify it."""
    from helpers import model_copy

    return model_copy


@pytest.fixture(scope="module")
def torch_one_thread() -> Iterator[None]:
    """Run a module's tiny tensor ops on one intra-op thread, then restore the setting.

    The parity tests push a few hundred tokens through a 128-wide model: threads gain nothing there, and on a
    busy 2-core machine OpenMP's spinning made them 10-50x slower (measured: 6 s on one thread vs 45-60 s on
    two while other jobs ran). Results do not depend on it: every comparison has a tolerance or is float64.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def closed_widgets():
    """The widgets a test made are closed after it. ipywidgets keeps every open widget for good, and with it every
    view tinyserve_widgets relabels on a language change: a later test's set_language then relabelled every
    explorer the earlier tests of its worker made (tests/widgets: 60 s -> 48 s on two workers, 2026-12-06)."""
    mod = sys.modules.get("ipywidgets.widgets.widget")  # not imported yet: no widget is open (none is imported here)
    before = set(mod._instances) if mod else set()
    yield
    mod = sys.modules.get("ipywidgets.widgets.widget")
    if mod:
        for key in set(mod._instances) - before:
            mod._instances[key].close()  # close() takes it out of _instances
