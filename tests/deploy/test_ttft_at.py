"""Where a disaggregated request's first token counts (DeploymentTrace.as_seen): DistServe's convention (the prefill
instance streams it) or vLLM's and Dynamo's (the decode instance's first step, after the transfer); and the SLO
targets' boundaries under both."""
from __future__ import annotations

import pytest

from tinyserve.core.config import RunConfig
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.trace.latency import tpot_ms, ttft_s


@pytest.fixture(scope="module")
def dt():
    rc = RunConfig("chunked", dry_run=True, workload_knobs={"n": 40, "rate": 4.0})
    return run_deployment(Engine(), "chapter-7.3-mixed", rc, DeploymentConfig("disaggregated", prefill_instances=1, decode_instances=1))


def test_decode_counts_the_first_token_at_the_decode_instances_first_step(dt):
    moved = {x.request_id: x for x in dt.transfers}
    pre, dec = dt.as_seen("prefill"), dt.as_seen("decode")
    assert pre is dt.requests and len(dec) == len(pre) and moved
    for p, d in zip(pre, dec):
        if p.id not in moved:  # ended at its prefill instance: the same either way
            assert d is p
            continue
        x = moved[p.id]
        assert p.first_token_s == x.ready_s  # DistServe: when the prefill instance made it
        assert d.first_token_s == p.token_times[1] >= x.end_s  # decode: the decode instance's first step, after
        assert d.output_len == p.output_len - 1 and d.finish_s == p.finish_s
        if d.output_len >= 2:  # the first TPOT gap no longer carries the transfer
            assert tpot_ms(d) == (p.finish_s - p.token_times[1]) * 1e3 / (p.output_len - 2)
    assert dt.metrics("decode")["ttft_ms"]["p50"] > dt.metrics("prefill")["ttft_ms"]["p50"]


@pytest.mark.parametrize("ttft_at", ["prefill", "decode"])
def test_a_request_exactly_at_a_target_meets_it_and_one_percent_over_misses(dt, ttft_at):
    r = next(r for r in dt.as_seen(ttft_at) if r.output_len >= 2 and tpot_ms(r) is not None)
    ttft, tpot = ttft_s(r) * 1e3, tpot_ms(r)
    loose = 1e9  # the other target never binds
    for target, other, key in ((ttft, loose, "met_ttft"), (loose, tpot, "met_tpot")):
        at = dt.slo(target, other, ttft_at)
        over = dt.slo(target / 1.01 if key == "met_ttft" else loose, other / 1.01 if key == "met_tpot" else loose,
                      ttft_at)  # the request is now 1% over its target
        ids_at = _meeting(dt, target, other, ttft_at)
        ids_over = _meeting(dt, target / 1.01 if key == "met_ttft" else loose,
                            other / 1.01 if key == "met_tpot" else loose, ttft_at)
        assert r.id in ids_at and r.id not in ids_over, (key, ttft_at)
        assert at[key] >= over[key]


def _meeting(dt, ttft_target: float, tpot_target: float, ttft_at: str) -> set[str]:
    """Ids of the requests meeting both targets, by the SLO's own rule on the requests as seen."""
    from tinyserve.trace.slo import attainment

    seen = dt.as_seen(ttft_at)
    return {r.id for r in seen if attainment([r], ttft_target, tpot_target)["met"] == 1}


def test_an_unknown_convention_is_one_clear_line(dt):
    with pytest.raises(TinyserveError, match=r"--ttft-at: .*prefill.*decode.*'client'"):
        dt.slo(400, 100, "client")
