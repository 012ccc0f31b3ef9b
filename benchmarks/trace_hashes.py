"""Same outputs before and after a change: the sha256 of every record a run exports, for dry runs of every named
workload under every policy and both KV layouts (with and without scarce memory), the papers' variants, and
deployments of every shape. Run it on the old tree and the new one and compare (`--compare OLD.json`):

    python benchmarks/trace_hashes.py > /tmp/new.json
    python benchmarks/trace_hashes.py --compare /tmp/old.json

Each case hashes Trace.to_dict(), summary(tokens=True) and the Perfetto export (deployments: their to_dict,
summary under both TTFT conventions and Perfetto). The real engine's tokens are compared by the float64 parity
tests instead (tests/model, tests/core/test_fidelity.py)."""
from __future__ import annotations

import argparse
import hashlib
import json
import sys

from tinyserve.engine import Engine
from tinyserve.core.config import RunConfig
from tinyserve.core.scheduling.variants import ChunkOnly, SeparatePrefill, WholePromptBudget
from tinyserve.deploy import DeploymentConfig, run_deployment
from tinyserve.trace.export import summary, to_dict, to_perfetto

SMALL = {"chapter-7.1-finisher": {"n": 24}, "chapter-7.2-longtail": {"n": 60},
         "chapter-7.3-mixed": {"n": 40}, "chapter-7.3-long-prompt": {"n": 12}, "chapter-7.1-padding": {}}
POLICIES = {"static": {"batch_size": 8, "timeout": 0.05}, "dynamic": {"batch_size": 8, "timeout": 0.05},
            "continuous": {"batch_size": 8}, "chunked": {"batch_size": 8, "chunk_size": 256}}


def _h(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def run_cases() -> dict[str, str]:
    """Every case's hash, by name."""
    eng = Engine()
    out = {}
    for wl, wk in SMALL.items():
        for pol, knobs in POLICIES.items():
            for layout, extra in (("slab", {}), ("paged", {}), ("paged-scarce", {"kv_budget": 2 * 10 ** 9}),
                                  ("slab-budget", {"kv_budget": 3 * 10 ** 9})):
                kv = {"kv_layout": "paged"} if layout.startswith("paged") else {}
                tr = eng.run(wl, pol, dry_run=True, workload_knobs=wk, progress=False, **knobs, **kv, **extra)
                out[f"{wl}|{pol}|{layout}"] = _h([to_dict(tr), summary(tr, tokens=True), to_perfetto(tr)])
    out["continuous-decode-first"] = _h(to_dict(eng.run("chapter-7.2-longtail", "continuous", dry_run=True,
                                                        workload_knobs={"n": 60}, prefill_first=False,
                                                        progress=False)))
    for p in (SeparatePrefill(8), WholePromptBudget(8), ChunkOnly(8, 128)):
        tr = eng.run("chapter-7.3-mixed", p, dry_run=True, workload_knobs={"n": 40}, progress=False)
        out[f"variant|{p.name}"] = _h(to_dict(tr))
    deploys = [
        ("colocated", {"replicas": 2}, "continuous", {}),
        ("colocated", {"replicas": 3}, "chunked", {"chunk_size": 128}),
        ("colocated", {"replicas": 2}, "static", {"timeout": 0.05}),
        ("colocated", {"replicas": 2}, "continuous", {"kv_layout": "paged"}),
        ("colocated", {"replicas": 2}, "chunked", {"gpus": 2}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1}, "continuous", {}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1}, "chunked", {}),
        ("disaggregated", {"prefill_instances": 2, "decode_instances": 1}, "chunked", {}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 2}, "chunked", {}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1}, "chunked", {"kv_layout": "paged"}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1, "decode_kv_layout": "paged"}, "chunked", {}),
        ("disaggregated", {"prefill_instances": 2, "decode_instances": 1}, "chunked", {"kv_budget": 10737418240}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 2}, "chunked",
         {"kv_budget": 10737418240, "kv_layout": "paged"}),
        ("disaggregated", {"prefill_instances": 2, "decode_instances": 1, "prefill_chunk_size": "none",
                           "decode_batch_size": 64}, "chunked", {"kv_budget": 10737418240}),
        ("disaggregated", {"prefill_instances": 3, "decode_instances": 1, "prefill_chunk_size": "none",
                           "decode_batch_size": 64}, "chunked", {}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1, "prefill_gpus": 2, "decode_gpus": 1},
         "chunked", {}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1, "prefill_chunk_size": 128,
                           "decode_batch_size": 16}, "continuous", {}),
        ("disaggregated", {"prefill_instances": 2, "decode_instances": 2}, "continuous", {"kv_layout": "paged",
                                                                                          "kv_budget": 10737418240}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1}, "chunked", {"hardware": "h200-70b-fp8"}),
        ("colocated", {"replicas": 1}, "chunked", {"hardware": "h200-70b-fp8"}),
        ("disaggregated", {"prefill_instances": 1, "decode_instances": 1, "decode_gpus": 2}, "chunked",
         {"hardware": "h200-70b-fp8"}),
    ]
    for seed in (0, 1):
        for i, (kind, shape, pol, knobs) in enumerate(deploys):
            rc = RunConfig(pol, dry_run=True, seed=seed, workload_knobs={"n": 80, "rate": 8.0}, **knobs)
            dt = run_deployment(eng, "chapter-7.3-mixed", rc, DeploymentConfig(kind, **shape))
            out[f"deploy{i}|seed{seed}|{kind}|{shape}|{pol}|{knobs}"] = _h(
                [dt.to_dict(), dt.summary(tokens=True), dt.summary(ttft_at="decode"), dt.to_perfetto()])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", help="a JSON file of hashes from the old tree")
    a = ap.parse_args()
    new = run_cases()
    if not a.compare:
        json.dump(new, sys.stdout, indent=0)
        return
    old = json.load(open(a.compare))
    diff = [k for k in old if old[k] != new.get(k)]
    print(f"{len(old)} cases, {len(old) - len(diff)} identical")
    for k in diff:
        print("DIFFERS:", k)
    sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
