"""Shared fixtures: the devices to run on, a seeded random TinyGPT and the shipped checkpoint.

Device- and model-parametrized tests are always *collected* for every variant; a variant this machine cannot
run (CUDA without a GPU, the checkpoint before it is trained) shows up as a skip with its reason, never as a
silently missing test. Plain helpers live in helpers.py.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from helpers import DEVICES, MODEL_KINDS, _base_model, model_copy
from tinyserve.model.gpt import TinyGPT


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each device this suite targets (cuda is skipped, with a reason, where there is no GPU)."""
    return torch.device(request.param)


@pytest.fixture(params=MODEL_KINDS)
def model_kind(request: pytest.FixtureRequest) -> str:
    """'random' always; 'checkpoint' when the shipped weights exist."""
    return request.param


@pytest.fixture(scope="session")
def random_model() -> TinyGPT:
    """The seeded random model, float64 on CPU (n_positions 512: room for a 300-token prompt)."""
    return _base_model("random")


@pytest.fixture(scope="session")
def checkpoint_model() -> TinyGPT:
    """The shipped checkpoint in float64 on CPU (skipped, with a reason, before it is trained)."""
    return _base_model("checkpoint")


@pytest.fixture(scope="session")
def get_model() -> Callable[..., TinyGPT]:
    """get_model(kind, device="cpu", dtype=torch.float64) -> a cached model copy; do not modify it."""
    return model_copy


@pytest.fixture(scope="module")
def torch_one_thread():
    """Run a module's tiny tensor ops on one intra-op thread, then restore the setting.

    The parity tests push a few hundred tokens through a 128-wide model: threads gain nothing there, and on a
    busy 2-core machine OpenMP's spinning made them 10-50x slower (measured: 6 s on one thread vs 45-60 s on
    two while other jobs ran). Results do not depend on it: every comparison has a tolerance or is float64.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
