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
