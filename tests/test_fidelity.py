"""Engine fidelity (issue #8): decode-first with a bound, KV in the modeled hardware's bytes, utilisation two
ways, and the loose ends a review found. Every expected number is counted by hand in a comment."""
from __future__ import annotations

import math

import pytest
import torch

from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.model import GPTConfig, TinyGPT
from tinyserve.requests import Request
from tinyserve.tokenizer import BOS


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    torch.manual_seed(1)
    return TinyGPT(GPTConfig(n_positions=64, n_layer=2, n_head=2, n_embd=32)).double().eval()


def admitted_step(tr, rid: str) -> int:
    return min(s.index for s in tr.steps for w in s.works if w.request_id == rid)


# ------------------------------------------------------------------------------- 1. decode-first with a bound
def two_requests() -> list[Request]:
    # a: 10 tokens from t=0; b arrives a hair later, so step 0 holds a alone (its prefill makes token 1)
    return [Request("a", [BOS, 5], 10, 0.0, ignore_eos=True), Request("b", [BOS, 6], 3, 1e-9, ignore_eos=True)]


@pytest.mark.parametrize("bound,expected", [
    (0, 1),  # prefill-first: b's prefill joins a's first decode, step 1
    (3, 4),  # b waits through a's decode steps 1, 2, 3 (a slot was free each time) and is forced in at step 4
    (8, 9),  # steps 1..8 waited; step 9 is a's last decode (token 10), b rides along
    (9, 10),  # a's decodes are steps 1..9: b would be forced in at 10, but a is gone by then: same as unbounded
    (math.inf, 10),  # drain, then refill: b enters the step after a's last decode
])
def test_a_newcomer_is_forced_in_after_max_waiting_steps_decode_steps(model, bound, expected):
    tr = Engine(model).run(two_requests(), "continuous", batch_size=2, max_waiting_steps=bound, dry_run=True)
    assert admitted_step(tr, "b") == expected
    assert tr.knobs["max_waiting_steps"] == (None if bound == math.inf else bound)
    assert tr.knobs["prefill_first"] == (bound == 0)


def test_waiting_for_a_slot_is_not_counted_as_waiting_by_choice(model):
    # one slot: b waits for capacity, not for the bound; it enters when a frees the slot (after step 9)
    tr = Engine(model).run(two_requests(), "continuous", batch_size=1, max_waiting_steps=2, dry_run=True)
    assert admitted_step(tr, "b") == 10


def test_prefill_first_and_decode_first_map_onto_the_bound(model):
    eng = Engine(model)
    assert eng.start(two_requests(), "continuous").policy.max_waiting_steps == 0  # the default: prefill-first
    assert eng.start(two_requests(), "continuous", prefill_first=True).policy.max_waiting_steps == 0
    assert eng.start(two_requests(), "continuous", prefill_first=False).policy.max_waiting_steps == 20  # TGI's
    assert eng.start(two_requests(), "continuous", prefill_first=False,
                     max_waiting_steps=math.inf).policy.max_waiting_steps == math.inf


@pytest.mark.parametrize("knobs,match", [
    ({"policy": "static", "max_waiting_steps": 3}, r"max_waiting_steps: does not apply to the static policy"),
    ({"policy": "chunked", "max_waiting_steps": 3}, r"max_waiting_steps: does not apply to the chunked policy"),
    ({"max_waiting_steps": -1}, r"max_waiting_steps: must be an integer >= 0"),
    ({"max_waiting_steps": 2.5}, r"max_waiting_steps: must be an integer >= 0 .* got 2.5"),
    ({"max_waiting_steps": True}, r"max_waiting_steps: must be an integer"),
    ({"max_waiting_steps": "20"}, r"max_waiting_steps: must be an integer"),
    ({"max_waiting_steps": math.nan}, r"max_waiting_steps: must be an integer"),
    ({"prefill_first": True, "max_waiting_steps": 5}, r"max_waiting_steps: 5 contradicts prefill_first=True"),
    ({"prefill_first": False, "max_waiting_steps": 0}, r"max_waiting_steps: 0 contradicts prefill_first=False"),
    ({"prefill_first": "yes"}, r"prefill_first: must be True or False"),
])
def test_bad_max_waiting_steps_are_named(model, knobs, match):
    knobs = {"policy": "continuous", **knobs}
    with pytest.raises(TinyserveError, match=match):
        Engine(model).run(two_requests(), dry_run=True, **knobs)


def test_the_cli_takes_max_waiting_steps_and_records_it(capsys):
    import json

    from tinyserve.cli import main

    for arg, want in (("7", 7), ("unbounded", None)):
        assert main(["run", "--workload", "chapter-7.1-padding", "--policy", "continuous", "--dry-run", "--json",
                     "--max-waiting-steps", arg]) == 0
        assert json.loads(capsys.readouterr().out)["knobs"]["max_waiting_steps"] == want
