"""Fixtures of the widget tests."""
from __future__ import annotations

import pytest

import tinyserve


@pytest.fixture
def zh():
    """The test runs in 繁體中文; English comes back after it, whatever happens."""
    tinyserve.set_language("zh-TW")
    try:
        yield
    finally:
        tinyserve.set_language("en")


@pytest.fixture(autouse=True)
def fresh_questions():
    """Each test asks its questions afresh: a kernel keeps one per question (predict.py), a test is no kernel."""
    from tinyserve_widgets import predict

    predict.forget()
    yield
    predict.forget()
