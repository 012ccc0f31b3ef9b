"""SLO attainment and goodput on hand-made requests: every expected value worked out by hand below.

Times are multiples of 1/16 s (exact in binary), so a latency exactly at its target is exactly at it."""
from __future__ import annotations

import pytest

import tinyserve
from tinyserve.core.request import ABORTED, FINISHED, REJECTED, RUNNING, Request
from tinyserve.errors import TinyserveError
from tinyserve.trace.latency import tpot_s
from tinyserve.trace.slo import attainment, check_targets, goodput, reading

TTFT, TPOT = 250.0, 62.5  # ms


def req(rid: str, arrival: float, times: list[float], status: str = FINISHED) -> Request:
    r = Request(rid, [1, 2, 3], max(1, len(times)), arrival, ignore_eos=True)
    r.output, r.token_times, r.status = [7] * len(times), list(times), status
    r.finish_s = times[-1] if status == FINISHED else None
    return r


def seven() -> list[Request]:
    return [
        req("a", 0.0, [0.125, 0.1875, 0.25]),  # TTFT 125, TPOT (0.25 - 0.125) / 2 = 62.5: both met (at the target)
        req("b", 1.0, [1.5, 1.5625]),  # TTFT 500: missed; TPOT 62.5: met
        req("c", 0.0, [0.25, 0.5, 0.75]),  # TTFT 250: met (at the target); TPOT 250: missed
        req("d", 0.0, [0.125]),  # one token: no TPOT, so that target is met; TTFT 125: both met
        req("e", 0.0, [], REJECTED),  # never ran
        req("f", 0.0, [0.125, 0.1875], ABORTED),  # fast, but cut off: meets neither
        req("g", 0.0, [0.125], RUNNING),  # not finished when the run ended: meets neither
    ]


def test_tpot_is_the_gap_between_first_and_last_token_per_later_token():
    a, _, _, d, e, f, _ = seven()
    assert tpot_s(a) == 0.0625 and tpot_s(d) is None and tpot_s(e) is None and tpot_s(f) is None


def test_attainment_by_hand():
    got = attainment(seven(), TTFT, TPOT)
    # both: a, d; TTFT alone: a, c, d; TPOT alone: a, b, d; of 7
    assert got == {"ttft_ms": 250.0, "tpot_ms": 62.5, "requests": 7, "met": 2, "attainment": 2 / 7,
                   "met_ttft": 3 / 7, "met_tpot": 3 / 7}
    loose = attainment(seven(), 500.0, 250.0)  # now b and c meet both too
    assert (loose["met"], loose["met_ttft"], loose["met_tpot"]) == (4, 4 / 7, 4 / 7)
    tight = attainment(seven(), 124.0, 62.5)  # nobody's first token within 124 ms
    assert (tight["met"], tight["attainment"], tight["met_tpot"]) == (0, 0.0, 3 / 7)


def test_no_requests_attain_nothing():
    assert attainment([], TTFT, TPOT) == {"ttft_ms": TTFT, "tpot_ms": TPOT, "requests": 0, "met": 0,
                                          "attainment": 0.0, "met_ttft": 0.0, "met_tpot": 0.0}


@pytest.mark.parametrize("ttft, tpot, option, shown", [
    (0, 50, "--slo-ttft-ms", "0"), (-1.0, 50, "--slo-ttft-ms", "-1.0"),
    (float("nan"), 50, "--slo-ttft-ms", "nan"), (200, float("inf"), "--slo-tpot-ms", "inf"),
    (200, True, "--slo-tpot-ms", "True"),
    (200, "50", "--slo-tpot-ms", "'50'"), (200, 10 ** 400, "--slo-tpot-ms", "1000"),
])
def test_bad_targets_name_the_option(ttft, tpot, option, shown):
    with pytest.raises(TinyserveError, match=rf"^{option}: must be a finite number of milliseconds > 0, got {shown}"):
        check_targets(ttft, tpot)
    with pytest.raises(TinyserveError, match=rf"^{option}: "):
        attainment(seven(), ttft, tpot)


def test_target_error_in_chinese():
    tinyserve.set_language("zh-TW")
    try:
        with pytest.raises(TinyserveError, match=r"^--slo-tpot-ms：必須是大於 0 的有限毫秒數，收到的是 0$"):
            check_targets(200, 0)
    finally:
        tinyserve.set_language("en")


def test_goodput_is_read_where_the_curve_first_crosses_the_goal_interpolated():
    # (2, 95%) -> (3, 85%): 90% is half-way, at 2.5; 4 meets the goal again, after the first crossing: not monotone
    assert reading([1, 2, 3, 4], [0.99, 0.95, 0.85, 0.95]) == {"value": pytest.approx(2.5), "read": "crossing",
                                                                "monotone": False}
    assert goodput([4, 2, 1, 3], [0.95, 0.95, 0.99, 0.85]) == pytest.approx(2.5)  # the sweep's order does not matter
    # (1, 99%) -> (5, 81%): (99 - 90) / (99 - 81) = half of the way, at 3.0; monotone
    assert reading([1, 5], [0.99, 0.81]) == {"value": pytest.approx(3.0), "read": "crossing", "monotone": True}
    assert reading([1, 2, 3, 4], [0.99, 0.95, 0.85, 0.95], goal=0.8) == {"value": 4, "read": "at_least",
                                                                          "monotone": True}  # all pass: >= 4
    assert reading([0.5, 1.0], [0.9, 0.9])["value"] == 1.0  # exactly at the goal counts as meeting it
    assert reading([1, 2], [0.89, 1.0]) == {"value": None, "read": "below", "monotone": False}  # < the lowest
    assert goodput([], []) is None


@pytest.mark.parametrize("args, match", [
    (([1, 2], [0.9]), r"^goodput: 2 rates but 1 attainments"),
    (([1], [0.9], 0), r"^goodput: goal must be a share in \(0, 1\], got 0$"),
    (([1], [0.9], 1.5), r"^goodput: goal must be a share in \(0, 1\], got 1\.5$"),
])
def test_goodput_bad_input(args, match):
    with pytest.raises(TinyserveError, match=match):
        goodput(*args)
