"""A plan the engine cannot read gets the checks' words, not the engine's error: the harness's step hook sees every
plan a learner's policy returns before the engine reads it (forgetting `return` is the classic first mistake)."""
from __future__ import annotations

import itertools

import pytest

from tinyserve.classroom import checks, harness
from tinyserve.core.scheduling import Plan, Policy


@pytest.fixture(autouse=True)
def fixed_seeds(monkeypatch, torch_one_thread):
    counter = itertools.count(1)
    monkeypatch.setattr(harness, "fresh_seed", lambda: next(counter))


def _message(cls) -> str:
    with pytest.raises(AssertionError) as e:
        checks.continuous_policy(cls)
    return str(e.value)


def test_a_plan_that_forgets_return():
    class Forgot(Policy):
        def plan(self, now, more_coming):
            Plan([])

    assert _message(Forgot).endswith("] step 0: plan() must return Plan(works), got NoneType")


def test_an_empty_plan_whose_works_are_not_a_list():
    class Tuple(Policy):
        def plan(self, now, more_coming):
            return Plan(())

    assert _message(Tuple).endswith("] step 0: Plan.works must be a list of Work, got ()")
