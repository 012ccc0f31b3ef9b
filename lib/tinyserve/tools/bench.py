"""`tinyserve bench`: our engine against transformers on the same model and workload, each as a user runs it.

The workload is one long-tailed batch: 64 requests (seeded), most prompts 16-64 tokens with ~15% of
256-512, most outputs 16-64 tokens with ~10% of 256, EOS ignored (lengths are fixed), all arriving at t=0.
Every system generates greedily with the shipped checkpoint in float32 (ours: TinyGPT; transformers: its
lossless export to GPT2LMHeadModel) and reports output tokens / wall seconds of the whole run. Each system runs
in its own process with its own default thread settings, as a user would run it: ours with tinyserve's
(threads.py; the governor: model/runner.py), transformers' with torch's own (TINYSERVE_THREADS=off, so
loading our checkpoint to export it leaves torch's threads alone); the environment this command was started with applies to both. Each process
runs the workload once untimed (warm-up), then times one run. Repeats are interleaved (for each repeat, every
system once) so drift in the machine hits every system alike.

Systems:
  ours static / dynamic B=16      Engine.run(..., clock="wall"): padded batches of 16, run to the longest
  ours continuous B=16/32/64      iteration-level scheduling (prefill-first)
  ours chunked B=32               continuous with a per-step token budget (chunked prefill)
  hf generate static B=16         model.generate on batches of 16 in arrival order, left-padded, each batch
                                  runs to its longest output (EOS disabled), rows truncated to their length
  hf generate static B=16 sorted  the same, requests sorted by their true output length (an oracle no real
                                  server has: it removes most of static batching's waste)
  hf continuous                   transformers' continuous batching (paged cache, FIFO scheduler), sized
                                  explicitly, one add_request per request with its own max_new_tokens

Tokens are checked: every system's output for every request is compared with the reference (transformers
`generate`, arrival order); mismatches are counted and described, never fatal (float32 sums in a different
order can flip a near-tied greedy argmax). transformers is imported lazily (the CLI checks it is installed).
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..engine import Engine
from ..model.runner import ModelRunner, configured_threads, load_model
from ..core.request import Request
from ..core.tokenizer import BOS, EOS
from ..core.workloads import make_prompt

STATIC_B = 16  # batch size of every static-like system (ours and transformers')
CONT_B = 32  # the headline continuous batch size (decoding slots)
CHUNK_SIZE, CHUNK_BUDGET = 256, 288  # chunked prefill: chunk and per-step token budget (256 + 32 decodes)
HF_PAGE, HF_MAX_BATCH_TOKENS = 32, 256  # transformers continuous batching: page size, tokens per step
DECODE_BATCHES = (1, 8, 32, 64)
DECODE_CONTEXT = 128
GOAL_VS_HF_CONTINUOUS, GOAL_VS_HF_ORACLE = 3.0, 1.0
HEADLINE = f"ours continuous B={CONT_B}"
HF_CONT, HF_ORACLE, REFERENCE = "hf continuous", "hf generate static B=16 sorted", "hf generate static B=16"


# ------------------------------------------------------------------------------------------------ workload
@dataclass
class Spec:
    id: str
    prompt: list[int]
    output_len: int


def make_workload(quick: bool = False, seed: int = 0) -> list[Spec]:
    """The long-tail batch (64 requests), or the --quick one (12 short requests); deterministic in seed."""
    rng = random.Random(seed)
    n, short_p, long_p, short_o, long_o = (12, (8, 24), (48, 96), (4, 16), 32) if quick else \
        (64, (16, 64), (256, 512), (16, 64), 256)
    specs = []
    for i in range(n):
        p = rng.randint(*long_p) if rng.random() < 0.15 else rng.randint(*short_p)
        o = long_o if rng.random() < 0.10 else rng.randint(*short_o)
        specs.append(Spec(f"r{i}", make_prompt(p, seed=seed * 100_003 + i), o))
    if quick:  # make sure the smoke test sees the long tail
        specs[0].output_len, specs[1].prompt = long_o, make_prompt(long_p[1], seed=seed * 100_003 + 1)
    return specs


def requests_for(specs: list[Spec]) -> list[Request]:
    return [Request(s.id, list(s.prompt), s.output_len, 0.0, ignore_eos=True) for s in specs]


# ----------------------------------------------------------------------------------------------- systems
@dataclass
class System:
    name: str
    kind: str  # "ours" | "hf"
    description: str
    run: Callable[[list[Spec]], dict[str, list[int]]]  # specs -> {id: tokens}; the caller times it


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ours_system(engine: Engine, policy: str, batch_size: int, **knobs) -> System:
    label = f"ours {policy} B={batch_size}"
    desc = f"Engine.run(policy={policy!r}, batch_size={batch_size}" + "".join(
        f", {k}={v!r}" for k, v in knobs.items()) + ', clock="wall")'

    def run(specs: list[Spec]) -> dict[str, list[int]]:
        tr = engine.run(requests_for(specs), policy, clock="wall", batch_size=batch_size, progress=False, **knobs)
        return {r.id: list(r.output) for r in tr.requests}

    return System(label, "ours", desc, run)


def _hf_generation_config(hf):
    gc = hf.generation_config.__class__(do_sample=False, bos_token_id=BOS, pad_token_id=EOS, eos_token_id=None)
    return gc


def hf_static_system(hf, batch_size: int, sort_by_output: bool) -> System:
    name = REFERENCE + (" sorted" if sort_by_output else "")
    desc = (f"model.generate, batches of {batch_size} "
            + ("sorted by true output length (oracle)" if sort_by_output else "in arrival order")
            + ", left padding, greedy, EOS disabled; each batch runs to its longest output")

    @torch.inference_mode()
    def run(specs: list[Spec]) -> dict[str, list[int]]:
        order = sorted(specs, key=lambda s: s.output_len) if sort_by_output else list(specs)
        gc = _hf_generation_config(hf)
        out: dict[str, list[int]] = {}
        for b in range(0, len(order), batch_size):
            batch = order[b:b + batch_size]
            L = max(len(s.prompt) for s in batch)
            ids = torch.tensor([[EOS] * (L - len(s.prompt)) + s.prompt for s in batch], device=hf.device)
            mask = torch.tensor([[0] * (L - len(s.prompt)) + [1] * len(s.prompt) for s in batch], device=hf.device)
            gen = hf.generate(input_ids=ids, attention_mask=mask, generation_config=gc,
                              max_new_tokens=max(s.output_len for s in batch), min_new_tokens=None)
            rows = gen[:, L:].tolist()
            for s, row in zip(batch, rows):
                out[s.id] = row[:s.output_len]
        return out

    return System(name, "hf", desc, run)


def hf_cb_config(specs: list[Spec]):
    """ContinuousBatchingConfig sized for these requests: every one fits at once (no eviction), nothing more."""
    from transformers import ContinuousBatchingConfig

    blocks = sum(-(-(len(s.prompt) + s.output_len) // HF_PAGE) for s in specs) + 8
    return ContinuousBatchingConfig(page_size=HF_PAGE, num_blocks=blocks, max_batch_tokens=HF_MAX_BATCH_TOKENS,
                                    scheduler_type="fifo")


class HFContinuous:
    """transformers' continuous batching; setup (manager, cache, thread) is outside the timed call."""

    name = HF_CONT

    def __init__(self, hf):
        self.hf, self.mgr, self.setup_s, self.config = hf, None, [], None

    def setup(self, specs: list[Spec]) -> None:
        t0 = time.perf_counter()
        gc = _hf_generation_config(self.hf)
        gc.eos_token_id = -1  # what init_continuous_batching turns None into ("disabled"), said explicitly
        self.mgr = self.hf.init_continuous_batching(generation_config=gc, continuous_batching_config=hf_cb_config(specs))
        self.mgr.warmup()  # builds the batch processor and its paged cache (and CUDA graphs on a GPU)
        self.mgr.start()
        self.config = self.mgr.continuous_batching_config
        self.setup_s.append(time.perf_counter() - t0)

    def teardown(self) -> None:
        if self.mgr is not None:
            self.mgr.stop(block=True, timeout=30)
            self.mgr.destroy()
            self.mgr = None

    def run(self, specs: list[Spec]) -> dict[str, list[int]]:
        mgr = self.mgr
        for s in specs:
            mgr.add_request(list(s.prompt), request_id=s.id, max_new_tokens=s.output_len)
        out: dict[str, list[int]] = {}
        while len(out) < len(specs):
            r = mgr.get_result(timeout=120)
            if r is None:
                raise RuntimeError(f"hf continuous: no result within 120 s ({len(out)}/{len(specs)} done)")
            if r.is_finished():
                if r.error is not None:
                    raise RuntimeError(f"hf continuous: request {r.request_id} failed: {r.error}")
                out[r.request_id] = list(r.generated_tokens)
        return out

    def system(self, specs: list[Spec]) -> System:
        cfg = hf_cb_config(specs)
        desc = (f"init_continuous_batching + add_request(max_new_tokens=n) per request; ContinuousBatchingConfig("
                f"page_size={cfg.page_size}, num_blocks={cfg.num_blocks}, max_batch_tokens={cfg.max_batch_tokens}, "
                f"scheduler_type='fifo'); setup (cache, thread) not timed")
        return System(self.name, "hf", desc, self.run)


# ------------------------------------------------------------------------------------------- measurements
def time_system(sys_: System, specs: list[Spec], device: torch.device, hf_cont: HFContinuous | None):
    if hf_cont is not None and sys_.name == HF_CONT:
        hf_cont.setup(specs)
    try:
        _sync(device)
        t0 = time.perf_counter()
        tokens = sys_.run(specs)
        _sync(device)
        wall = time.perf_counter() - t0
    finally:
        if hf_cont is not None and sys_.name == HF_CONT:
            hf_cont.teardown()
    return tokens, wall


def compare(tokens: dict[str, list[int]], ref: dict[str, list[int]], specs: list[Spec]) -> dict:
    """How many requests match the reference exactly, and where the others first differ."""
    mism = []
    for s in specs:
        a, b = tokens.get(s.id), ref[s.id]
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a or [], b)) if x != y), min(len(a or []), len(b)))
            mism.append({"id": s.id, "prompt_len": len(s.prompt), "output_len": s.output_len,
                         "got_len": None if a is None else len(a), "first_diff": first,
                         "got": None if a is None or first >= len(a) else a[first],
                         "want": b[first] if first < len(b) else None})
    return {"identical": len(specs) - len(mism), "total": len(specs), "mismatches": mism}


def bookkeeping_share(engine: Engine, specs: list[Spec], batch_size: int = CONT_B) -> dict:
    """Continuous at batch_size, stepped by hand: how much of the loop is not the forward (incl. build + sampling)."""
    run = engine.start(requests_for(specs), "continuous", batch_size=batch_size, clock="wall")
    t0 = time.perf_counter()
    run.finish(progress=False)
    total = time.perf_counter() - t0
    steps = len(run.steps)
    return {"batch_size": batch_size, "steps": steps, "wall_s": total, "loop_s": run.loop_s,
            "forward_s": run.forward_s, "bookkeeping_s": run.loop_s - run.forward_s,
            "bookkeeping_share": (run.loop_s - run.forward_s) / run.loop_s if run.loop_s else 0.0,
            "outside_loop_share": (total - run.loop_s) / total if total else 0.0}


def _median_time(fn: Callable[[], object], device: torch.device, n: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def decode_curve_ours(model, batches=DECODE_BATCHES, context: int = DECODE_CONTEXT, n: int = 30) -> list[dict]:
    """Median time of one decode-only step (every sequence at `context` keys) vs batch size."""
    dev, out = model.device, []
    for B in batches:
        runner = ModelRunner.with_slabs(model, B, context + 1)
        segs = [(i, context, [65 + i % 26]) for i in range(B)]
        step = runner.build(segs, [True] * B)
        fwd = _median_time(lambda: runner.forward(step), dev, n)
        build = _median_time(lambda: runner.build(segs, [True] * B), dev, n)
        full = _median_time(lambda: runner.forward(runner.build(segs, [True] * B)), dev, n)
        out.append({"batch": B, "context": context, "forward_ms": fwd * 1e3, "build_step_ms": build * 1e3,
                    "step_ms": full * 1e3, "tokens_per_s": B / full})
    return out


def decode_curve_hf(hf, batches=DECODE_BATCHES, context: int = DECODE_CONTEXT, n: int = 30) -> list[dict]:
    """One GPT2LMHeadModel decode step (past_key_values of `context` tokens) vs batch size."""
    dev, out = hf.device, []
    with torch.inference_mode():
        for B in batches:
            ids = torch.randint(0, 256, (B, context), generator=torch.Generator().manual_seed(B)).to(dev)
            first = hf(input_ids=ids, use_cache=True)
            # transformers 5.24 calls it `cache` (`past_key_values` is deprecated); older 5.x only knows the latter
            name = "cache" if getattr(first, "cache", None) is not None else "past_key_values"
            cache = getattr(first, name)
            nxt = ids[:, -1:]
            pos = torch.full((B, 1), context, device=dev)

            def step():
                logits = hf(input_ids=nxt, position_ids=pos, use_cache=True, **{name: cache}).logits
                cache.crop(-1)  # drop the key just appended: back to `context` keys for the next repeat
                return logits[:, -1].argmax(-1).tolist()

            t = _median_time(step, dev, n)
            out.append({"batch": B, "context": context, "step_ms": t * 1e3, "tokens_per_s": B / t})
    return out


# ----------------------------------------------------------------------------------------------- the run
def machine_info(device: torch.device) -> dict:
    import transformers

    from .calibrate import _cpu_name

    info = {"cpu": _cpu_name(), "cpu_count": os.cpu_count(),
            "device": str(device), "python": platform.python_version(), "platform": platform.platform(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    if hasattr(os, "getloadavg"):  # other work on the machine skews wall-clock numbers: record it
        info["loadavg_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    return info


def run_bench(repeats: int = 3, quick: bool = False, device: str = "auto", seed: int = 0,
              log: Callable[[str], None] | None = None) -> dict:
    """Run every system `repeats` times (interleaved), each time in a fresh process (--quick: one process per kind,
    ours and transformers', each with its threads: a smoke run, not a measurement); return the JSON-able result."""
    from ..model.runner import resolve_device

    log = log or (lambda msg: None)
    dev = resolve_device(device)
    load_before = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    specs = make_workload(quick, seed)
    out_tokens = sum(s.output_len for s in specs)
    walls: dict[str, list[float]] = {name: [] for name in SYSTEM_NAMES}
    outputs: dict[str, list[dict[str, list[int]]]] = {name: [] for name in SYSTEM_NAMES}
    info: dict[str, dict] = {}
    job = {"quick": quick, "seed": seed, "device": str(dev)}
    extra_names, done = ["extras ours", "extras hf"], {}
    for r in range(repeats):
        # --quick: the last repeat's two processes measure the extras too, after the systems (two fewer imports of
        # torch and transformers); a full bench gives them processes of their own, as every system has
        done = _children(SYSTEM_NAMES + (extra_names if quick and r == repeats - 1 else []), job)
        for name in SYSTEM_NAMES:
            got = done[name]
            walls[name].append(got["wall_s"])
            outputs[name].append(got["tokens"])
            info[name] = got
            log(f"repeat {r + 1}/{repeats}  {name:32s} {out_tokens / got['wall_s']:9.1f} tok/s  "
                f"({got['wall_s']:.3f} s, {got['threads']} threads)")
    ref = outputs[REFERENCE][0]
    results = []
    for name in SYSTEM_NAMES:
        tps = [out_tokens / w for w in walls[name]]
        checks = [compare(t, ref, specs) for t in outputs[name]]
        worst = min(checks, key=lambda c: c["identical"])
        results.append({"system": name, "kind": info[name]["kind"], "description": info[name]["description"],
                        "threads": info[name]["threads"],
                        "tokens_per_s": statistics.median(tps), "tokens_per_s_min": min(tps),
                        "tokens_per_s_max": max(tps), "tokens_per_s_all": tps, "wall_s_all": walls[name],
                        "identical": worst["identical"], "total": worst["total"],
                        "tokens_identical": all(c["identical"] == c["total"] for c in checks),
                        "mismatches": worst["mismatches"]})
    by = {x["system"]: x for x in results}
    for x in results:
        x["vs_hf_continuous"] = x["tokens_per_s"] / by[HF_CONT]["tokens_per_s"]
        x["vs_hf_oracle_static"] = x["tokens_per_s"] / by[HF_ORACLE]["tokens_per_s"]
    if extra_names[0] not in done:
        log("bookkeeping share and decode step curves ...")
        done = _children(extra_names, job)
    ours, theirs = done["extras ours"], done["extras hf"]
    head = by[HEADLINE]
    return {
        "workload": _workload_info(specs, quick, seed),
        "settings": {"repeats": repeats, "quick": quick, "dtype": "float32", "static_batch_size": STATIC_B,
                     "continuous_batch_size": CONT_B, "chunk_size": CHUNK_SIZE, "chunk_max_batch_tokens": CHUNK_BUDGET,
                     "processes": "one per kind (ours, transformers') and repeat, each kind with its own default "
                                  "thread settings" if quick else
                                  "one per system and repeat, each with its own default thread settings",
                     "hf_continuous": {**info[HF_CONT]["hf_continuous"], "setup_s": info[HF_CONT]["setup_s"]},
                     "reference": REFERENCE, "headline": HEADLINE},
        "machine": {**theirs["machine"], "torch_threads": {k: v["threads"] for k, v in info.items()},
                    "loadavg_at_start": load_before},
        "systems": results,
        "goals": {"ours_continuous_vs_hf_continuous": head["vs_hf_continuous"],
                  "ours_continuous_vs_hf_oracle_static": head["vs_hf_oracle_static"],
                  "continuous_3x_hf_continuous": head["vs_hf_continuous"] >= GOAL_VS_HF_CONTINUOUS,
                  "continuous_1x_hf_oracle_static": head["vs_hf_oracle_static"] >= GOAL_VS_HF_ORACLE},
        "bookkeeping": ours["bookkeeping"],
        "decode_step_ours": ours["decode_step"],
        "decode_step_hf": theirs["decode_step"],
    }


def _workload_info(specs: list[Spec], quick: bool, seed: int) -> dict:
    return {"name": "bench-quick" if quick else "bench-longtail", "seed": seed, "num_requests": len(specs),
            "prompt_tokens": sum(len(s.prompt) for s in specs), "output_tokens": sum(s.output_len for s in specs),
            "arrival": "all at t=0", "ignore_eos": True,
            "prompt_lens": [len(s.prompt) for s in specs], "output_lens": [s.output_len for s in specs]}


SYSTEM_NAMES = ["ours static B=16", "ours dynamic B=16", "ours continuous B=16", f"ours continuous B={CONT_B}",
                "ours continuous B=64", f"ours chunked B={CONT_B}", REFERENCE, HF_ORACLE, HF_CONT]


def _ours(name: str) -> bool:
    return name.startswith(("ours", "extras ours"))


def _children(names: list[str], job: dict) -> dict[str, dict]:
    """child_main's result for each name: each in a fresh process, or under --quick one process per kind (the
    ~3 s of importing torch and transformers paid twice instead of once per system)."""
    if not job["quick"]:
        return {name: _in_child({**job, "system": name}) for name in names}
    out: dict[str, dict] = {}
    for kind in (True, False):
        group = [n for n in names if _ours(n) == kind]
        if group:
            out.update(_in_child({**job, "system": group[0], "systems": group}))
    return out


def _in_child(job: dict) -> dict:
    """Run one job of child_main in a fresh interpreter: ours with tinyserve's threads, transformers' with torch's
    (job["systems"]: several of one kind in turn, a dict of their results)."""
    import subprocess

    env = dict(os.environ)
    if not _ours(job["system"]):
        env["TINYSERVE_THREADS"] = "off"
    out = subprocess.run([sys.executable, "-m", "tinyserve.tools.bench", json.dumps(job)], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"bench child {job['system']!r} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _systems(name: str, dev: torch.device, specs: list[Spec]):
    """(System, HFContinuous or None, model, hf or None) for one system name."""
    model = load_model(device=str(dev), dtype="float32")
    if name.startswith("ours"):
        policy, b = name.split()[1], int(name.split("B=")[1])
        knobs = {"chunk_size": CHUNK_SIZE, "max_batch_tokens": CHUNK_BUDGET} if policy == "chunked" else {}
        return ours_system(Engine(model), policy, b, **knobs), None, model, None
    from .hf import to_hf_model

    hf = to_hf_model(model)
    hf.generation_config.eos_token_id = None  # really disable EOS (DESIGN.md, hard-won facts)
    hf.config.eos_token_id = None
    if name == HF_CONT:
        cont = HFContinuous(hf)
        return cont.system(specs), cont, model, hf
    return hf_static_system(hf, STATIC_B, sort_by_output=name == HF_ORACLE), None, model, hf


def child_main(job: dict) -> dict:
    """One process's job: warm a system up on a few requests, then time one run (or the step measurements)."""
    import transformers

    transformers.utils.logging.set_verbosity_error()  # e.g. generate()'s notes on pad/eos settings: we know
    logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)  # continuous batching's own logger
    dev, quick, seed = torch.device(job["device"]), job["quick"], job["seed"]
    specs = make_workload(quick, seed)
    if job["system"] == "extras ours":
        model = load_model(device=str(dev), dtype="float32")
        batches, n = ((1, 8), 3) if quick else (DECODE_BATCHES, 30)
        return {"bookkeeping": bookkeeping_share(Engine(model), specs),
                "decode_step": decode_curve_ours(model, batches, n=n)}
    if job["system"] == "extras hf":
        from .hf import to_hf_model

        hf = to_hf_model(load_model(device=str(dev), dtype="float32"))
        batches, n = ((1, 8), 3) if quick else (DECODE_BATCHES, 30)
        return {"decode_step": decode_curve_hf(hf, batches, n=n), "machine": machine_info(dev)}
    system, cont, _, _ = _systems(job["system"], dev, specs)
    # warm-up: the whole workload once, untimed (allocator, kernels chosen per shape, threads, lazy imports), as
    # a server's process is warm when its traffic comes; then the timed run
    time_system(system, specs, dev, cont)
    tokens, wall = time_system(system, specs, dev, cont)
    res = {"tokens": tokens, "wall_s": wall, "threads": configured_threads(), "kind": system.kind,
           "description": system.description}
    if cont is not None:
        cfg = cont.config
        res["setup_s"] = cont.setup_s[-1]
        res["hf_continuous"] = {"page_size": cfg.page_size, "num_blocks": cfg.num_blocks,
                                "max_batch_tokens": cfg.max_batch_tokens,
                                "max_requests_per_batch": cfg.max_requests_per_batch,
                                "scheduler_type": cfg.scheduler_type,
                                "attn_implementation": cont.hf.config._attn_implementation}
    return res


def format_table(res: dict) -> str:
    w, m = res["workload"], res["machine"]
    lines = [f"tinyserve bench: {w['num_requests']} requests ({w['prompt_tokens']} prompt, {w['output_tokens']} "
             f"output tokens, all at t=0, EOS ignored), float32, {m['device']} "
             f"({m.get('gpu', m['cpu'])}), {res['settings']['repeats']} repeats, "
             + ("one process per kind (--quick: a smoke run)" if res["settings"]["quick"] else
                "each system in its own process"),
             "",
             f"{'system':34s} {'threads':>7s} {'tok/s':>8s} {'min-max':>15s} {'x hf cont':>9s} {'x oracle':>8s} "
             f"{'tokens':>8s}"]
    for x in res["systems"]:
        same = f"{x['identical']}/{x['total']}" + ("" if x["tokens_identical"] else "!")
        lines.append(f"{x['system']:34s} {x['threads']:>7} {x['tokens_per_s']:8.0f} {x['tokens_per_s_min']:7.0f}-"
                     f"{x['tokens_per_s_max']:<7.0f} {x['vs_hf_continuous']:9.2f} {x['vs_hf_oracle_static']:8.2f} "
                     f"{same:>8s}")
    g = res["goals"]
    lines += ["", f"goals: {HEADLINE} = {g['ours_continuous_vs_hf_continuous']:.2f}x hf continuous "
                  f"(>= {GOAL_VS_HF_CONTINUOUS}: {'met' if g['continuous_3x_hf_continuous'] else 'NOT met'}), "
                  f"{g['ours_continuous_vs_hf_oracle_static']:.2f}x hf oracle-sorted static "
                  f"(>= {GOAL_VS_HF_ORACLE}: {'met' if g['continuous_1x_hf_oracle_static'] else 'NOT met'})"]
    b = res["bookkeeping"]
    lines.append(f"engine bookkeeping (continuous B={b['batch_size']}, {b['steps']} steps): "
                 f"{100 * b['bookkeeping_share']:.1f}% of step time outside build_step+forward+sampling")
    hf_by = {c["batch"]: c for c in res["decode_step_hf"]}
    lines.append(f"decode step at context {DECODE_CONTEXT} (median ms): batch  ours(forward / build_step / whole)"
                 "  hf(whole)")
    for c in res["decode_step_ours"]:
        h = hf_by.get(c["batch"])
        lines.append(f"  {c['batch']:>4d}   {c['forward_ms']:6.2f} / {c['build_step_ms']:5.2f} / {c['step_ms']:6.2f}"
                     f"   {h['step_ms'] if h else float('nan'):6.2f}")
    for x in res["systems"]:
        for mm in x["mismatches"][:3]:
            lines.append(f"mismatch {x['system']}: {mm}")
    return "\n".join(lines)


def main(a) -> None:
    """Entry point of `tinyserve bench` (a: argparse namespace with json, repeats, quick, device)."""
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # progress on stderr; stdout is the result
    res = run_bench(repeats=a.repeats, quick=a.quick, device=getattr(a, "device", "auto"), log=log)
    if a.json:
        print(json.dumps(res))
    else:
        print(format_table(res))


if __name__ == "__main__":  # a child process of run_bench: one job, its result as one JSON line
    _job = json.loads(sys.argv[1])
    print(json.dumps({n: child_main({**_job, "system": n}) for n in _job["systems"]} if "systems" in _job
                     else child_main(_job)))
