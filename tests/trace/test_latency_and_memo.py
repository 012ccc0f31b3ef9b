"""TTFT and end-to-end latency are defined once (trace/latency.py): the arrays, the metrics and the JSON say the same
numbers, worked out by hand below; and Trace.cached, the memo of derived views, builds once per trace state."""
from __future__ import annotations

import math

import numpy as np

from tinyserve.core.request import ABORTED, FINISHED, REJECTED, Request
from tinyserve.trace.latency import e2e_s, ttft_s
from tinyserve.trace.metrics import latency_ms
from tinyserve.trace.record import Trace
from tinyserve.trace.step import StepRecord


def requests() -> list[Request]:
    """a finished (first token 0.25 s after arrival, done 0.5 s after); b aborted after one token 0.5 s in; c
    rejected. Binary fractions, so every difference below is exact."""
    a = Request("a", [1, 2], 4, 0.5, status=FINISHED, token_times=[0.75, 1.0], finish_s=1.0, output=[7, 8])
    b = Request("b", [1, 2], 4, 1.0, status=ABORTED, token_times=[1.5], finish_s=2.0, output=[7])
    c = Request("c", [1, 2], 4, 2.0, status=REJECTED)
    return [a, b, c]


def trace(reqs: list[Request]) -> Trace:
    return Trace("continuous", "by-hand", "modeled", None, 2, {}, True, [], reqs)


def test_each_request_latency_by_hand():
    a, b, c = requests()
    assert (ttft_s(a), e2e_s(a)) == (0.25, 0.5)
    assert (ttft_s(b), e2e_s(b)) == (0.5, None)  # a first token, but it never finished
    assert (ttft_s(c), e2e_s(c)) == (None, None)
    assert latency_ms(a) == (250.0, 500.0) and latency_ms(b) == (500.0, None) and latency_ms(c) == (None, None)


def test_the_arrays_metrics_and_json_read_the_one_definition():
    tr = trace(requests())
    ra = tr.request_arrays()
    assert list(ra.ttft_s[:2]) == [0.25, 0.5] and math.isnan(ra.ttft_s[2])
    assert ra.e2e_s[0] == 0.5 and np.isnan(ra.e2e_s[1:]).all()
    assert [tr.request_dict(r)["ttft_ms"] for r in tr.requests] == [250.0, 500.0, None]
    assert [tr.request_dict(r)["e2el_ms"] for r in tr.requests] == [500.0, None, None]
    m = tr.metrics()  # over finished requests only: a
    assert (m["ttft_ms"]["mean"], m["e2el_ms"]["max"]) == (250.0, 500.0)


def test_cached_builds_once_and_again_when_the_trace_grows():
    tr = trace(requests())
    built = []

    def build() -> int:
        built.append(1)
        return len(built)

    assert tr.cached("by-hand", build) == 1
    assert tr.cached("by-hand", build) == 1  # memoised: not built again
    assert tr.cached("other", build) == 2  # each key its own
    tr.steps.append(StepRecord(0, 0.0, 0.01, [], 0, 0))
    assert tr.cached("by-hand", build) == 3  # a step more: a new state, built again
