"""A fair fight at equal GPU count: each side searches its own knobs over the same grid, on several seeds.

  replicas  colocated:N, a replica's chunk in CHUNKS (none: whole prompts, continuous batching)
  split     disaggregated:P:D for every P + D = N, the prefill chunk in CHUNKS (none: whole prompts under a token
            budget), the decode instances' batch size in DECODE_BATCHES

Every (deployment, seed, rate) runs once, a dry run on the modeled clock; its requests are scored against each SLO
pair of PAIRS, under both TTFT conventions (DeploymentTrace.as_seen), for both targets and for each alone (the
TTFT-only and TPOT-only curves DistServe draws beside the joint one). Goodput per GPU is read off each seed's curve
(trace.slo.reading); a side's best deployment is the one with the highest median over the seeds, and a comparison
says what holds on every seed (`compare`). The search the lessons rest on is expensive, so
benchmarks/deployments.py runs STUDIES once and writes lib/tinyserve/data/deployments.json (`load`); a slow test
recomputes one seed of it.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from ..core.knobs import DEFAULT_BATCH_SIZE
from ..deploy import run_deployment
from ..engine import Engine
from ..lang import t
from ..trace.slo import attainment, reading
from ..deploy.config import WHOLE
from . import steady
from .goodput import GOAL, deployment_label, parse_spec, run_config
from .goodput import sustained as measure_saturation

CHUNKS = (128, 256, 512, 1024, WHOLE)
BATCHES = (32, 64, 128)  # a replica's and a decode instance's batch, each capped by what its KV memory holds
# P:D at each GPU count (one GPU per instance)
SHAPES = {2: ((1, 1),), 3: ((2, 1), (1, 2)), 4: ((3, 1), (2, 2), (1, 3))}
# the SLO pairs scored (TTFT ms, TPOT ms): DistServe's paper (OSDI '24, Figure 8's chatbot targets for OPT-66B,
# from its plotting notebook); its artifact-evaluation script (evaluation/ae-scripts/e2e/_plot.py, the comparison
# with vLLM only), whose 400 ms some of the longest prompts miss even alone (alone()); and "tight", ours: the
# artifact's TTFT with a TPOT near one plain decode step (a step carrying a long chunk misses it), the one pair
# where TPOT binds (tests/analysis/test_fair_data.py holds each pair to what its name says)
PAIRS = {"paper": (2500.0, 150.0), "artifact": (400.0, 100.0), "tight": (400.0, 25.0)}
CONVENTIONS = ("prefill", "decode")
KINDS = ("both", "ttft", "tpot")  # the share meeting both targets, the TTFT target alone, the TPOT target alone
# past every deployment's saturation (at most ~10 req/s per GPU here): each curve runs until it is past its own
RATES_PER_GPU = (0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15)
PAST = 1.25  # a curve stops at the first rate at least this far past the deployment's saturation where it fails
# The doubling check of every goodput the lessons quote (doubled()): each quoted deployment runs again with every
# run DOUBLED times as long, and a reading (a median, a seed's low or high) that moves by more than SETTLED of
# itself is said to be unsettled, with its second reading beside it
DOUBLED, SETTLED = 2, 0.10
SEEDS = (0, 1, 2, 3, 4)
WORKLOAD = "chapter-7.3-mixed"
LINKS = ("nvlink-h200", "ib-ndr")
DATA = Path(__file__).parents[1] / "data" / "deployments.json"


def memory_slots(gpus: int = 1, run_knobs: dict | None = None) -> int:
    """How many slabs an instance of `gpus` GPUs holds (its KV memory, or the run's kv_budget), read off a run's
    own slots: the cap on any batch size (core/kv.num_slots_for)."""
    dc, own = parse_spec(f"colocated:1,batch_size={max(BATCHES) * 64},gpus={gpus}")
    rc = run_config("chunked", {"dry_run": True, **(run_knobs or {})}, own, {"rate": 1.0, "n": 1})
    return run_deployment(Engine(), WORKLOAD, rc, dc).instances[0].num_slots


def batches(gpus: int = 1, run_knobs: dict | None = None) -> list[int]:
    """The batch sizes a search tries on an instance of `gpus` GPUs: BATCHES, each capped by what memory holds, once
    each (two sizes memory caps to the same slots are one configuration: searched once, named by what runs)."""
    cap = memory_slots(gpus, run_knobs)
    return sorted({min(b, cap) for b in BATCHES})


def candidates(gpus: int, chunks: Sequence = CHUNKS, link: str = "nvlink-h200",
               shapes: Sequence[tuple[int, int]] | None = None, run_knobs: dict | None = None) -> dict[str, list[str]]:
    """Each side's deployments at `gpus` GPUs, as spec strings (analysis.goodput's syntax): both sides search the
    chunk and the batch (a replica's, a decode instance's), over the same options."""
    sizes = batches(1, run_knobs)
    split = [f"disaggregated:{p}:{d}:{link},prefill_chunk_size={c},decode_batch_size={b}"
             for p, d in (SHAPES[gpus] if shapes is None else shapes) for c in chunks for b in sizes]
    return {"replicas": [f"colocated:{gpus},chunk_size={c},batch_size={b}" for c in chunks for b in sizes],
            "split": split}


def score(dt, pairs: dict = PAIRS) -> dict:
    """A run's requests against each pair: {pair: {convention: [met both, met TTFT, met TPOT]}} (counts)."""
    out: dict = {}
    for conv in CONVENTIONS:
        seen = dt.as_seen(conv)
        for name, (ttft, tpot) in pairs.items():
            a = attainment(seen, ttft, tpot)
            n = a["requests"]
            out.setdefault(name, {})[conv] = [a["met"], round(a["met_ttft"] * n), round(a["met_tpot"] * n)]
    return out


def run_one(spec: str, seed: int, rate: float, workload_knobs: dict | None = None, run_knobs: dict | None = None,
            engine: Engine | None = None, pairs: dict = PAIRS):
    """One dry run of a deployment at one rate and seed: (the DeploymentTrace, its score)."""
    dc, own = parse_spec(spec)
    knobs = {"dry_run": True, "seed": seed, **(run_knobs or {})}
    rc = run_config("chunked", knobs, own, {**(workload_knobs or {}), "rate": rate})
    dt = run_deployment(engine or Engine(), WORKLOAD, rc, dc)
    return dt, score(dt, pairs)


def sustained(spec: str, seed: int, workload_knobs: dict | None = None, run_knobs: dict | None = None,
              engine: Engine | None = None) -> dict:
    """A deployment's saturation throughput on one seed, as `tinyserve goodput` measures it (goodput.sustained)."""
    dc, own = parse_spec(spec)

    def config(rate: float, n: int):
        return run_config("chunked", {"dry_run": True, "seed": seed, **(run_knobs or {})}, own,
                          {**(workload_knobs or {}), "rate": rate, "n": n})
    return measure_saturation(engine or Engine(), WORKLOAD, dc, config)


def _failing(met: list, requests: int) -> bool:
    """Whether every pair under every convention misses the goal (both targets) in one run's compact score."""
    return all(m[0] < GOAL * requests for per_pair in met for m in per_pair)


def sweep_one(job: tuple) -> dict:
    """One deployment on one seed: its saturation, then the rates ascending, each run long enough for a steady
    reading (steady.requests_at), until a rate at least PAST x its saturation where it fails every pair: past
    that, each curve only falls (no steady state exists there), so the rest are not run."""
    spec, seed, rates, workload_knobs, run_knobs, pairs, scale = job
    sat = sustained(spec, seed, workload_knobs, run_knobs)
    met, counts = [], []
    for rate in rates:
        n = steady.requests_at(rate, scale)
        dt, sc = run_one(spec, seed, rate, {**(workload_knobs or {}), "n": n}, run_knobs, pairs=pairs)
        counts.append(len(dt.requests))
        # compact: per pair (the study's "pairs" order), per convention: [both, ttft, tpot]
        met.append([[sc[pair][conv] for conv in CONVENTIONS] for pair in pairs])
        if rate >= PAST * sat["rps"] and _failing(met[-1], counts[-1]):
            break
    return {"num_gpus": dt.num_gpus, "saturation": sat, "requests": counts, "met": met}


def study(specs: dict[str, list[str]], gpus: int, seeds: Sequence[int] = SEEDS,
          rates_per_gpu: Sequence[float] = RATES_PER_GPU, workload_knobs: dict | None = None,
          run_knobs: dict | None = None, pool=None, pairs: dict = PAIRS, rates: Sequence[float] | None = None,
          scale: float = 1) -> dict:
    """Every deployment of `specs` ({side: [spec]}) at every seed, its rates (rates per GPU x gpus) run until its
    curve is past saturation (sweep_one), scored. pool: an executor's map (a multiprocessing pool) or None. The
    file's layout: per side, per spec, its GPUs, and per seed its saturation, the requests of each rate run and a
    list over those rates of [per pair: [per convention: [met both, met TTFT, met TPOT]]]. scale: each run that many
    times longer (the doubling check: 2)."""
    rates = list(rates) if rates is not None else [r * gpus for r in rates_per_gpu]  # rates: the deployment's
    jobs = [(spec, seed, rates, workload_knobs, run_knobs, pairs, scale) for side in specs.values() for spec in side
            for seed in seeds]
    results = iter((pool or map)(sweep_one, jobs))
    out: dict = {"gpus": gpus, "seeds": list(seeds), "rates": rates, "workload_knobs": dict(workload_knobs or {}),
                 "run_knobs": dict(run_knobs or {}), "pairs": list(pairs), "sides": {}}
    for side, group in specs.items():
        runs = out["sides"].setdefault(side, {})
        for spec in group:
            label = deployment_label(*parse_spec(spec))
            entry = runs[label] = {"num_gpus": None, "saturation": {}, "requests": {}, "met": {}}
            for seed in seeds:
                r = next(results)
                entry["num_gpus"] = r["num_gpus"]
                entry["saturation"][str(seed)] = r["saturation"]
                entry["requests"][str(seed)] = r["requests"]
                entry["met"][str(seed)] = r["met"]
    return out


# ---- reading a study ------------------------------------------------------------------------------------------
def curve(s: dict, side: str, label: str, seed: int, pair: str, conv: str = "prefill", kind: str = "both") -> list:
    """Attainment (0-1) at each rate of one deployment, seed, pair, convention and kind (KINDS)."""
    entry = s["sides"][side][label]
    i, j, k = s["pairs"].index(pair), CONVENTIONS.index(conv), KINDS.index(kind)
    return [m[i][j][k] / n for m, n in zip(entry["met"][str(seed)], entry["requests"][str(seed)])]


def goodput(s: dict, side: str, label: str, pair: str, conv: str = "prefill", kind: str = "both",
            goal: float = GOAL) -> dict:
    """Goodput per GPU of one deployment on each seed ({seed: reading with value per GPU}), and their median,
    lowest and highest (a goodput below the sweep ranks under every number: None)."""
    entry = s["sides"][side][label]
    per = {}
    for seed in s["seeds"]:
        c = curve(s, side, label, seed, pair, conv, kind)
        r = reading(s["rates"][:len(c)], c, goal)  # a curve stops past saturation (sweep_one)
        sat = entry["saturation"][str(seed)]["rps"] / entry["num_gpus"]
        raw = None if r["value"] is None else r["value"] / entry["num_gpus"]
        # no goodput above what the deployment completes per second: a crossing read past it (a rate just above
        # saturation fills its queue too slowly to show in a run, and the interpolation runs on) is read as it
        capped = kind == "both" and raw is not None and raw > sat
        per[seed] = {**r, "value": sat if capped else raw, "raw": raw, "saturation": sat,
                     **({"read": "saturation"} if capped else {})}
    ranked = sorted((v["value"] for v in per.values()), key=lambda v: -math.inf if v is None else v)
    g = {"per_seed": per, "median": ranked[(len(ranked) - 1) // 2], "min": ranked[0], "max": ranked[-1],
         "lowest_per_gpu": min(s["rates"]) / entry["num_gpus"],
         "at_least": any(v["read"] == "at_least" for v in per.values()),
         "monotone": all(v["monotone"] for v in per.values())}
    again = s.get("doubled", {}).get("sides", {}).get(side, {})
    if label in again:  # a quoted deployment: read again off its runs with twice the requests (doubled())
        twice = goodput(s["doubled"], side, label, pair, conv, kind, goal)
        g["doubled"] = twice
        g["settled"] = all(_within(g[k], twice[k]) for k in ("median", "min", "max"))
    return g


def _within(a, b, tolerance: float = SETTLED) -> bool:
    """Whether two readings of one goodput agree within tolerance (relative); two readings below the sweep agree."""
    if a is None or b is None:
        return a is b
    return abs(b - a) <= tolerance * abs(a)


def binds(s: dict, side: str, label: str, pair: str, conv: str = "prefill") -> str:
    """Which target a deployment misses first as the rate grows: "ttft" or "tpot", the one whose goodput alone (the
    median over the seeds, KINDS) is lower; a tie, or neither crossing, is "both"."""
    alone = {kind: _key(goodput(s, side, label, pair, conv, kind)["median"]) for kind in ("ttft", "tpot")}
    return "both" if alone["ttft"] == alone["tpot"] else min(alone, key=alone.get)


def sustains(g: dict) -> float:
    """The median over the seeds of a deployment's saturation throughput per GPU (g: goodput()'s result): what it
    completes per second when overloaded, the ceiling of any goodput it reads."""
    sat = sorted(x["saturation"] for x in g["per_seed"].values())
    return sat[(len(sat) - 1) // 2]


def _key(v) -> float:
    return -math.inf if v is None else v


def best(s: dict, side: str, pair: str, conv: str = "prefill", kind: str = "both",
         having: str | None = None) -> tuple[str, dict]:
    """A side's best deployment at a pair: the highest median goodput per GPU over the seeds (ties: the highest
    lowest, then the first listed); having: only among the deployments whose spec holds that knob ("chunk_size=none":
    the best with whole prompts)."""
    labels = [x for x in s["sides"][side] if having is None or having in x.split(",")]
    scored = [(label, goodput(s, side, label, pair, conv, kind)) for label in labels]
    return max(scored, key=lambda x: (_key(x[1]["median"]), _key(x[1]["min"])))


def quoted(s: dict) -> dict[str, list[str]]:
    """The deployments of a study whose goodputs the lessons quote: each side's best at every pair and convention,
    and the replicas' best with whole prompts (CLAIMS' b_having). {side: [label]}, in the study's order."""
    keep: dict[str, set] = {side: set() for side in s["sides"]}
    for pair in s["pairs"]:
        for conv in CONVENTIONS:
            for side in s["sides"]:
                keep[side].add(best(s, side, pair, conv)[0])
            if "replicas" in s["sides"]:
                keep["replicas"].add(best(s, "replicas", pair, conv, having=f"chunk_size={WHOLE}")[0])
    return {side: [x for x in s["sides"][side] if x in keep[side]] for side in s["sides"]}


def doubled(s: dict, pool=None) -> dict:
    """The doubling check of a study (its runs without one): its quoted deployments, every seed and rate it ran,
    each run DOUBLED times as long (study's scale). goodput() reads each quoted goodput off both."""
    out = study(quoted(s), s["gpus"], seeds=s["seeds"], rates=s["rates"], workload_knobs=s["workload_knobs"],
                run_knobs=s["run_knobs"], pool=pool, pairs={p: PAIRS[p] for p in s["pairs"]}, scale=DOUBLED)
    return {**out, "scale": DOUBLED}


def unsettled(d: dict) -> tuple[int, int]:
    """Of every goodput the studies d can quote (each quoted deployment at every pair, convention and kind), how
    many runs twice as long move by more than SETTLED, and how many there are."""
    flags = [goodput(s, side, label, pair, conv, kind)["settled"] for s in d["studies"].values()
             for side, labels in quoted(s).items() for label in labels for pair in s["pairs"]
             for conv in CONVENTIONS for kind in KINDS]
    return flags.count(False), len(flags)


def compare(s: dict, pair: str, conv: str = "prefill", a: str = "split", b: str = "replicas",
            b_having: str | None = None) -> dict:
    """Each side's best at a pair (b_having: side b's best among the deployments with that knob, best()), and what
    holds on every seed, and again with twice the requests where the file has both sides' doubled runs: "ahead" (a's
    beats b's on every seed), "behind" (on every seed it is beaten), else "mixed"; the ratio of medians."""
    (la, ga) = best(s, a, pair, conv)
    (lb, gb) = best(s, b, pair, conv, having=b_having)
    lengths = [(ga, gb)] + ([(ga["doubled"], gb["doubled"])] if "doubled" in ga and "doubled" in gb else [])
    seen = [(_key(x["per_seed"][seed]["value"]), _key(y["per_seed"][seed]["value"])) for x, y in lengths
            for seed in s["seeds"]]
    wins, loses = [u > v for u, v in seen], [u < v for u, v in seen]
    verdict = "ahead" if all(wins) else "behind" if all(loses) else "mixed"
    ratio = (ga["median"] / gb["median"]) if ga["median"] and gb["median"] else None
    return {a: (la, ga), b: (lb, gb), "verdict": verdict, "ratio": ratio}


def studies() -> dict[str, dict]:
    """The studies behind the lessons (7.3 section 6 and appendix B, 7.5 section 6): each a GPU count, each side's
    deployments, and the workload's and the runs' knobs that differ from the plain case."""
    from ..cost.presets import get_preset

    few = {"kv_budget": int(8 * 4096 * get_preset("h200-70b-fp8").kv_bytes_per_token)}  # 8 slabs of 4,096 a GPU
    # tensor parallelism per phase at 4 GPUs: replicas of 2 or 4 GPUs each, splits with a phase on 2 GPUs; both
    # sides the same chunks, each instance its batch sizes capped by its own GPUs' memory
    tp_chunks = (512, WHOLE)
    tp_replicas = [f"colocated:{n},chunk_size={c},batch_size={b},gpus={4 // n}" for n in (2, 1) for c in tp_chunks
                   for b in batches(4 // n)]
    tp_split = [f"disaggregated:{p}:{d}:nvlink-h200,prefill_chunk_size={c},decode_batch_size={b}{gpus}"
                for p, d, dg, gpus in ((1, 1, 2, ",prefill_gpus=2,decode_gpus=2"), (2, 1, 2, ",decode_gpus=2"),
                                       (1, 2, 1, ",prefill_gpus=2"))
                for c in tp_chunks for b in batches(dg)]
    return {
        "fair-2": {"gpus": 2, "specs": candidates(2)},
        "fair-3": {"gpus": 3, "specs": candidates(3)},
        "fair-4": {"gpus": 4, "specs": candidates(4)},
        "short-2": {"gpus": 2, "specs": candidates(2), "workload_knobs": {"long_share": 0.0}},
        "scarce-2": {"gpus": 2, "specs": candidates(2, run_knobs=few), "run_knobs": few},
        "ib-2": {"gpus": 2, "specs": {"split": candidates(2, link="ib-ndr")["split"]}},
        "tp-4": {"gpus": 4, "specs": {"replicas": tp_replicas, "split": tp_split}},
    }


def best_of(goodputs: Sequence[dict]) -> dict[str, dict]:
    """Each side's best row of `tinyserve goodput`'s goodput list (goodput_per_gpu's rows, or over_seeds' with a
    median): the highest goodput per GPU (a median over seeds when there are several); "replicas" and "split"."""
    out: dict[str, dict] = {}
    for g in goodputs:
        side = "replicas" if g["kind"] == "colocated" else "split"
        if side not in out or _key(_value(g)) > _key(_value(out[side])):
            out[side] = g
    return out


def _value(g: dict):
    return (g["median"] if "median" in g else g)["goodput_per_gpu"]


# The comparisons the lessons state, each read off a study of the file at one pair and convention: the split's
# best against the replicas' best (claim_words says what holds on every seed, or gives both ranges)
CLAIMS = {
    "fair2_paper": ("fair-2", "paper", "prefill"), "fair2_artifact": ("fair-2", "artifact", "prefill"),
    "fair2_tight": ("fair-2", "tight", "prefill"),
    "fair2_tight_decode": ("fair-2", "tight", "decode"),
    "fair3_tight": ("fair-3", "tight", "prefill"), "fair4_tight": ("fair-4", "tight", "prefill"),
    "fair3_paper": ("fair-3", "paper", "prefill"), "fair4_paper": ("fair-4", "paper", "prefill"),
    "short_tight": ("short-2", "tight", "prefill"), "scarce_tight": ("scarce-2", "tight", "prefill"),
    "scarce_paper": ("scarce-2", "paper", "prefill"),
    "tp4_tight": ("tp-4", "tight", "prefill"), "tp4_paper": ("tp-4", "paper", "prefill"),
    # against two replicas of whole prompts at their best batch (continuous batching: 7.5's stand-in for the vLLM
    # DistServe measured)
    "fair2_paper_whole": ("fair-2", "paper", "prefill", "chunk_size=none"),
    "fair2_tight_whole": ("fair-2", "tight", "prefill", "chunk_size=none"),
}


def number_words(g: dict) -> str:
    """A goodput's median and range over the seeds (goodput()), in words: "1.1 (1.0–1.2)", "≥ 10", "< 0.25", "≤ 11.8"
    (a crossing past the saturation, read as it); one that moves by more than SETTLED when every run is twice as
    long says so, with what the longer runs read."""
    def one(x: dict | None, v) -> str:
        if v is None:
            return t("figures.fair.below", value=g["lowest_per_gpu"])
        read = x["read"] if x is not None else "crossing"
        return t({"at_least": "figures.fair.at_least", "saturation": "figures.fair.at_most"}.get(
            read, "figures.fair.value"), value=v)

    def seed_of(v, g=g):  # the seed's reading a median or an end of the range came from
        return next((x for x in g["per_seed"].values() if x["value"] == v), None)
    median = one(seed_of(g["median"]), g["median"])
    ends = {} if g["min"] == g["max"] else {"low": one(seed_of(g["min"]), g["min"]),
                                             "high": one(seed_of(g["max"]), g["max"])}
    if g.get("settled", True):
        words = t("figures.fair.range", median=median, **ends) if ends else median
    else:  # runs twice as long moved it by more than SETTLED: said, with what they read
        twice = g["doubled"]
        again = one(seed_of(twice["median"], twice), twice["median"])
        if twice["min"] != twice["max"]:
            again = t("figures.fair.doubled_range", median=again, low=one(seed_of(twice["min"], twice), twice["min"]),
                      high=one(seed_of(twice["max"], twice), twice["max"]))
        words = t("figures.fair.range_unsettled" if ends else "figures.fair.unsettled", median=median,
                  doubled=again, **ends)
    # a curve that climbs back above the goal after it first fell below: said (its first crossing is the one read)
    return words if g["monotone"] else t("figures.fair.not_monotone", words=words)


def claim(d: dict, name: str) -> dict:
    """One of CLAIMS read off the studies d (load()): compare()'s result."""
    study_name, pair, conv, *having = CLAIMS[name]
    return compare(d["studies"][study_name], pair, conv, b_having=having[0] if having else None)


def claim_words(d: dict, name: str) -> str:
    """What a claim of CLAIMS says, in the learner's language: the split ahead (or behind) on every seed with both
    medians and ranges, or neither ahead on every seed with both ranges. A lesson glues it: the sentence can say
    no more than the file holds on every seed."""
    c = claim(d, name)
    seeds = len(d["studies"][CLAIMS[name][0]]["seeds"])
    return t(f"figures.fair.{c['verdict']}", n=seeds, split=number_words(c["split"][1]),
             replicas=number_words(c["replicas"][1]))


def describe(label: str) -> str:
    """A deployment of a study in a few words of the learner's language: "2 replicas, chunks of 128, batch 38", "1
    prefill + 1 decode, prefill whole prompts, decode batch 38" (a batch as it ran: the search names none memory
    caps)."""
    dc, own = parse_spec(label)
    if dc.kind == "colocated":
        chunk = (t("figures.fair.whole") if own.get("policy") == "continuous"
                 else t("figures.fair.chunks", chunk=own.get("chunk_size")))
        text = t("figures.fair.replica" if dc.replicas == 1 else "figures.fair.replicas", n=dc.replicas, chunk=chunk,
                 batch=own.get("batch_size", DEFAULT_BATCH_SIZE))
        return text + (t("figures.fair.gpus_each", n=own["gpus"]) if "gpus" in own else "")
    c = dc.prefill_chunk_size
    chunk = t("figures.fair.whole") if c == WHOLE else t("figures.fair.chunks", chunk=c)
    text = t("figures.fair.split", p=dc.prefill_instances, d=dc.decode_instances, chunk=chunk,
             batch=dc.decode_batch_size)
    if dc.prefill_gpus or dc.decode_gpus:
        text += t("figures.fair.tp", p=dc.prefill_gpus or 1, d=dc.decode_gpus or 1)
    if dc.link and dc.link != "nvlink-h200":
        text += t("figures.fair.link", link=dc.link)
    return text


def table(d: dict, study_name: str, pairs: Sequence[str] | None = None, conv: str = "prefill") -> list[str]:
    """A study's comparison, a line per pair: each side's best deployment and its goodput per GPU over the seeds."""
    s = d["studies"][study_name]
    lines = []
    for pair in pairs or s["pairs"]:
        ttft, tpot = d["pairs"][pair]
        lines.append(t("figures.fair.pair", name=t(f"figures.fair.pair.{pair}"), ttft=ttft, tpot=tpot))
        for side in s["sides"]:
            label, g = best(s, side, pair, conv)
            lines.append("  " + t("figures.fair.row", setup=describe(label), value=number_words(g)))
    return lines


def load(path: str | Path = DATA) -> dict:
    """The committed studies (benchmarks/deployments.py writes them)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def alone(workload_knobs: dict | None = None, seed: int = 0, link: str = "nvlink-h200", pairs: dict = PAIRS,
          engine: Engine | None = None) -> dict:
    """Each pair's infeasible requests on one seed: those that miss it even alone on an idle GPU (one prefill and
    one decode instance over `link`, whole prompts, arrivals 100 s apart so none overlaps another), the first
    SATURATION_REQUESTS of the seed (every rate's run starts with them). Under the prefill convention a lone
    request's TTFT is its prompt's prefill, as on a replica; under the decode convention the transfer over the link
    and the decode instance's first step come on top. {"requests", "prefill": {pair: miss}, "decode": {pair:
    miss}}."""
    dc, own = parse_spec(f"disaggregated:1:1:{link},prefill_chunk_size=none")
    rc = run_config("chunked", {"dry_run": True, "seed": seed}, own,
                    {**(workload_knobs or {}), "rate": 0.01, "n": steady.SATURATION_REQUESTS})
    dt = run_deployment(engine or Engine(), WORKLOAD, rc, dc)
    out: dict = {"requests": len(dt.requests)}
    for conv in CONVENTIONS:
        seen = dt.as_seen(conv)
        out[conv] = {name: len(seen) - attainment(seen, *p)["met"] for name, p in pairs.items()}
    return out


def infeasible(workload_knobs: dict | None = None, seeds: Sequence[int] = SEEDS, links: Sequence[str] = LINKS) -> dict:
    """alone() per link and seed: {link: {seed: alone()}} (the prefill convention's counts are the same over every
    link)."""
    return {link: {str(seed): alone(workload_knobs, seed, link) for seed in seeds} for link in links}
