"""Reliability from the Python API: bad input gets a ValueError naming the argument and its range, nothing is
lost when the KV budget is full or a run is interrupted, weights load only from safetensors, and a long dry run
keeps its memory bounded. (The CLI side is tests/tools/test_cli.py; engine knob errors already covered by
tests/core/test_engine.py are not repeated here.)

The CLI has no option or environment variable to pick another checkpoint, so corrupt and missing checkpoints
are tested through tinyserve.model.runner.load_model(path).
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from helpers import greedy_alone, make_random_model

import tinyserve
from tinyserve.core.config import RunConfig
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS
from tinyserve.core.workloads import get_workload
from tinyserve.engine import Engine
from tinyserve.errors import TinyserveError
from tinyserve.model.runner import CHECKPOINT_DIR, load_model

LIB = Path(tinyserve.__file__).parent
CTX = 96


@pytest.fixture(scope="module", autouse=True)
def one_thread(torch_one_thread):
    """Tiny matmuls: one thread (conftest's torch_one_thread), for every test of this module."""


@pytest.fixture(scope="module")
def model():
    return make_random_model(n_positions=CTX, seed=5, n_layer=2, n_head=2, n_embd=32)


def small_requests(n: int, out: int = 6) -> list[Request]:
    return [Request(f"s{i}", [BOS] + [(37 * i + 11 * j) % 256 for j in range(3 + i % 7)], out, 0.001 * (i // 3),
                    ignore_eos=True) for i in range(n)]


# ------------------------------------------------------------------------------------------------ bad knobs
@pytest.mark.parametrize("policy,knobs,match", [
    ("static", {"batch_size": True}, r"batch_size: must be an integer >= 1, got True"),
    ("static", {"batch_size": "4"}, r"batch_size: must be an integer >= 1, got '4'"),
    ("continuous", {"batch_size": -2}, r"batch_size: must be >= 1, got -2"),
    ("chunked", {"chunk_size": "8"}, r"chunk_size: must be an integer >= 1, got '8'"),
    ("chunked", {"chunk_size": True}, r"chunk_size: must be an integer >= 1"),
    ("chunked", {"chunk_size": 0.5}, r"chunk_size: must be an integer >= 1, got 0.5"),
    ("chunked", {"max_batch_tokens": False}, r"max_batch_tokens: must be an integer >= 1"),
    ("chunked", {"batch_size": 4, "max_batch_tokens": 0}, r"max_batch_tokens: must be >= 1"),
    ("dynamic", {"timeout": float("inf")}, r"timeout: must be a finite number of seconds >= 0, got inf"),
    ("dynamic", {"timeout": -math.inf}, r"timeout: must be a finite number"),
    ("dynamic", {"timeout": "0.1"}, r"timeout: must be a finite number of seconds >= 0, got '0.1'"),
    ("static", {"timeout": True}, r"timeout: must be a finite number"),
    ("continuous", {"timeout": 0.1}, r"timeout: does not apply to the continuous policy \(only to static and dynamic\)"),
    ("static", {"max_batch_tokens": 8}, r"max_batch_tokens: does not apply to the static policy \(only to chunked\)"),
    ("dynamic", {"prefill_first": False}, r"prefill_first: does not apply to the dynamic policy \(only to continuous\)"),
    ("continuous", {"kv_budget": 1e9}, r"kv_budget: must be a positive integer number of bytes, got 1000000000.0"),
    ("continuous", {"kv_budget": True}, r"kv_budget: must be a positive integer"),
    ("continuous", {"max_model_len": 0}, r"max_model_len: must be an integer in 1\.\.4096, got 0"),
    ("continuous", {"max_model_len": 64.0}, r"max_model_len: must be an integer in 1\.\.4096"),
    ("continuous", {"seed": "x"}, r"seed: must be an integer, got 'x'"),
    ("Static", {}, r"policy: unknown 'Static'"),
])
def test_bad_knobs_name_the_argument_and_range(policy, knobs, match):
    with pytest.raises(ValueError, match=match) as e:
        Engine().run("chapter-7.1-padding", policy, dry_run=True, **knobs)  # what tinyserve.run calls
    assert isinstance(e.value, TinyserveError) and "\n" not in str(e.value)


def test_no_policy_means_the_default_one():
    """Engine.start(w, None), as its signature allows: the config's policy, else continuous (RunConfig.of)."""
    assert Engine().run("chapter-7.1-padding", None, dry_run=True).policy == "continuous"
    assert Engine().run("chapter-7.1-padding", None, RunConfig("static"), dry_run=True).policy == "static"


def test_tinyserve_run_works_more_than_once_in_a_fresh_interpreter(tmp_path):
    """README's `tinyserve.run(...)`, called twice, and again after `from tinyserve.engine import Engine`."""
    code = ("import tinyserve\n"
            "a = tinyserve.run('chapter-7.1-padding', 'static', dry_run=True)\n"
            "b = tinyserve.run('chapter-7.1-padding', 'static', dry_run=True)\n"
            "assert a.metrics() == b.metrics()\n"
            "from tinyserve.engine import Engine\n"
            "c = tinyserve.run('chapter-7.1-padding', 'static', dry_run=True)\n"
            "assert c.metrics() == a.metrics()\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-1500:]


def test_unknown_workload_and_dtype_name_the_choices():
    with pytest.raises(TinyserveError, match=r"workload: unknown 'chapter-7\.9' \(choose chapter-7\.1-padding, "
                                             r"chapter-7\.1-finisher, chapter-7\.2-longtail, chapter-7\.3-long-prompt"):
        Engine().run("chapter-7.9", "static", dry_run=True)
    with pytest.raises(TinyserveError, match="workload notes.jsonl: no such file"):
        Engine().run("notes.jsonl", "static", dry_run=True)
    with pytest.raises(TinyserveError, match=r"dtype: unknown 'float16' \(choose float32, float64"):
        Engine(dtype="float16").run("chapter-7.1-padding", "static", dry_run=True)
    with pytest.raises(TinyserveError, match=r"dtype: unknown 'half'"):
        Engine(dtype="half")


@pytest.mark.parametrize("name,knobs,match", [
    ("chapter-7.2-longtail", {"n": 0}, r"n must be an integer in 1\.\.100000, got 0"),
    ("chapter-7.2-longtail", {"n": 100_001}, r"n must be an integer in 1\.\.100000"),
    ("chapter-7.2-longtail", {"n": True}, r"n must be an integer in 1\.\.100000, got True"),
    ("chapter-7.2-longtail", {"n": 10.0}, r"n must be an integer"),
    ("chapter-7.2-longtail", {"rate": 0}, r"rate must be a finite number > 0, got 0"),
    ("chapter-7.2-longtail", {"rate": -1.0}, r"rate must be a finite number > 0"),
    ("chapter-7.2-longtail", {"rate": float("nan")}, r"rate must be a finite number > 0, got nan"),
    ("chapter-7.2-longtail", {"rate": float("inf")}, r"rate must be a finite number > 0, got inf"),
    ("chapter-7.2-longtail", {"rate": "4"}, r"rate must be a finite number > 0, got '4'"),
    ("chapter-7.2-longtail", {"burst": 3}, r"unknown knob 'burst' \(knobs: n, rate\)"),
    ("chapter-7.3-long-prompt", {"arrival_s": -0.1}, r"arrival_s must be a finite number >= 0"),
    ("chapter-7.3-long-prompt", {"long_prompt": 4096}, r"long_prompt must be an integer in 1\.\.4064, got 4096"),
    ("chapter-7.1-padding", {"long_prompt": 0}, r"long_prompt must be an integer in 1\.\.4095, got 0"),
    ("chapter-7.1-padding", {"long_prompt": 4000, "max_new_tokens": 200}, r"must be <= 4096"),
    ("chapter-7.1-finisher", {"long_output": 5000}, r"long_output must be an integer in 1\.\.4064"),
    ("chapter-7.1-finisher", {"short_output": 0}, r"short_output must be an integer in 1\.\.4064, got 0"),
])
def test_workload_knobs_out_of_range(name, knobs, match):
    with pytest.raises(ValueError, match=match) as e:
        get_workload(name, **knobs)
    assert isinstance(e.value, TinyserveError) and str(e.value).startswith(f"workload {name}")


def test_workload_seed_and_jsonl_knobs_are_checked(tmp_path):
    with pytest.raises(TinyserveError, match=r"seed: must be an integer, got True"):
        get_workload("chapter-7.2-longtail", seed=True)
    f = tmp_path / "w.jsonl"
    f.write_text('{"prompt_len": 4, "max_new_tokens": 2}\n')
    with pytest.raises(TinyserveError, match=r"a JSONL file takes no knobs \(got n\)"):
        get_workload(str(f), n=3)
    assert [r.id for r in get_workload(str(f))] == ["1"]


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("field,request_,match", [
    ("prompt", Request("t", [BOS, 300], 3, ignore_eos=True), r"prompt: request 't' .*0\.\.257"),
    ("prompt", Request("t", [BOS, -1], 3, ignore_eos=True), r"prompt: request 't' .*0\.\.257"),
    ("prompt", Request("t", [BOS, 1.5], 3, ignore_eos=True), r"prompt: request 't'"),
    ("prompt", Request("t", [BOS, "a"], 3, ignore_eos=True), r"prompt: request 't'"),
    ("max_new_tokens", Request("t", [BOS, 5], 2.5, ignore_eos=True), r"max_new_tokens: request 't' .*integer"),
    ("max_new_tokens", Request("t", [BOS, 5], True, ignore_eos=True), r"max_new_tokens: request 't' .*integer"),
])
def test_malformed_request_objects_are_a_clear_error(model, dry_run, field, request_, match):
    """Requests built in Python (notebooks) get the same clear answer as a JSONL file, not a torch IndexError."""
    ok = Request("fine", [BOS, 7], 2, ignore_eos=True)
    with pytest.raises(TinyserveError, match=match):
        Engine(model).run([ok, request_], "continuous", dry_run=dry_run)


def test_errors_happen_before_the_model_is_loaded():
    eng = Engine()
    for workload, bad in [("chapter-7.1-padding", {"batch_size": 0}), ("chapter-7.1-padding", {"clock": "sundial"}),
                          ("chapter-7.1-padding", {"hardware": "abacus"}), ("chapter-7.9", {}),
                          ("chapter-7.2-longtail", {"kv_budget": -1})]:
        with pytest.raises(TinyserveError):
            eng.run(workload, "static", **bad)
    assert eng._model is None  # nothing expensive was done for bad input


# ------------------------------------------------------------------------------------------------ nothing lost
@pytest.mark.parametrize("policy,knobs", [
    ("static", {"batch_size": 4}), ("dynamic", {"batch_size": 4, "timeout": 0.0}),
    ("continuous", {"batch_size": 4}), ("continuous", {"batch_size": 4, "prefill_first": False}),
    ("chunked", {"batch_size": 4, "chunk_size": 3}),
])
def test_a_full_kv_budget_makes_requests_wait_never_vanish(model, policy, knobs):
    reqs = small_requests(12)
    # the modeled clock counts KV in its preset's model: 327,680 bytes per token (bf16 70B, 8 KV heads)
    slab = max(r.prompt_len + r.max_new_tokens for r in reqs) * 327_680
    tr = Engine(model).run(reqs, policy, kv_budget=slab, slab="longest", **knobs)  # the what-if: per-run slabs
    assert tr.num_slots == 1
    assert [r.status for r in tr.requests] == ["finished"] * 12
    assert all(r.output == greedy_alone(model, r) for r in tr.requests)
    assert all(len(s.works) == 1 and s.kv_reserved_bytes == slab for s in tr.steps)
    # one at a time, first come first served: each runs start to end before the next one starts
    spans = sorted((r.admitted_s, r.finish_s, r.arrival_s) for r in tr.requests)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert [s[2] for s in spans] == sorted(s[2] for s in spans)
    # a byte less: the longest requests can never fit and are rejected alone, with a reason; the rest all run
    tr = Engine(model).run(reqs, policy, kv_budget=slab - 1, slab="longest", **knobs)
    longest = max(r.prompt_len + r.max_new_tokens for r in reqs)
    for r in tr.requests:
        if r.prompt_len + r.max_new_tokens == longest:
            assert r.status == "rejected" and f"more than the kv_budget of {slab - 1:,} bytes" in r.finish_reason
        else:
            assert r.status == "finished" and r.output == greedy_alone(model, r)


class Interrupter:
    """Wraps model.forward_step: raises KeyboardInterrupt (as Ctrl-C would) at call number `at`."""

    def __init__(self, model, at: int):
        self.inner, self.at, self.calls = model.forward_step, at, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.inner(*args, **kwargs)


@pytest.mark.parametrize("policy,knobs", [("static", {"batch_size": 3}), ("continuous", {"batch_size": 3}),
                                          ("chunked", {"batch_size": 3, "chunk_size": 4})])
def test_ctrl_c_mid_run_propagates_and_the_engine_runs_again_identically(model, policy, knobs):
    reqs = small_requests(8)
    eng = Engine(model)
    fresh = Engine(model).run(reqs, policy, **knobs)
    model.forward_step = stop = Interrupter(model, at=5)
    try:
        with pytest.raises(KeyboardInterrupt):
            eng.run(reqs, policy, **knobs)
    finally:
        del model.forward_step
    assert stop.calls == 5
    assert all(r.status == "waiting" and r.output == [] for r in reqs)  # the caller's requests are untouched
    again = eng.run(reqs, policy, **knobs)
    assert again.metrics() == fresh.metrics()
    assert [(s.start_s, s.works, s.kv_used_bytes) for s in again.steps] == \
        [(s.start_s, s.works, s.kv_used_bytes) for s in fresh.steps]
    assert {r.id: r.output for r in again.requests} == {r.id: r.output for r in fresh.requests}
    assert all(r.status == "finished" for r in again.requests)


def test_ctrl_c_in_the_shared_engine_of_tinyserve_run(model, monkeypatch):
    reqs = small_requests(5)
    monkeypatch.setitem(tinyserve._engines, ("cpu", "float64"), Engine(model, device="cpu", dtype="float64"))
    want = tinyserve.run(reqs, "continuous", device="cpu", dtype="float64", batch_size=2)
    model.forward_step = Interrupter(model, at=2)
    try:
        with pytest.raises(KeyboardInterrupt):
            tinyserve.run(reqs, "continuous", device="cpu", dtype="float64", batch_size=2)
    finally:
        del model.forward_step
    got = tinyserve.run(reqs, "continuous", device="cpu", dtype="float64", batch_size=2)
    assert got.metrics() == want.metrics() and [r.output for r in got.requests] == [r.output for r in want.requests]


# ------------------------------------------------------------------------------------------------ weights
# the grader's notebook runner executes a student's notebook (exec is its job; it runs in a boxed child process)
ALLOWED = {("classroom/runner.py", "exec(")}
UNSAFE = [
    (r"\btorch\.load\s*\(", "torch.load"),
    (r"\bimport\s+(pickle|cPickle|dill|marshal|shelve|joblib)\b|\bfrom\s+(pickle|dill|marshal|shelve|joblib)\b",
     "a pickle-family module"),
    (r"(?<![\w.])eval\s*\(", "eval("),
    (r"(?<![\w.])exec\s*\(", "exec("),
    (r"allow_pickle\s*=\s*True", "numpy allow_pickle"),
    (r"\byaml\.(unsafe_)?load\s*\(", "yaml.load"),
    (r"(?<![\w.])__import__\s*\(", "__import__"),
]


def test_no_unpickling_or_eval_anywhere_in_the_package():
    files = sorted(LIB.rglob("*.py"))
    assert len(files) >= 10
    found = []
    for f in files:
        for lineno, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            for pat, what in UNSAFE:
                if re.search(pat, code) and (str(f.relative_to(LIB)), what) not in ALLOWED:
                    found.append(f"{f.relative_to(LIB)}:{lineno}: {what}: {line.strip()}")
    assert not found, "\n".join(found)
    # the shipped weights are safetensors and nothing else
    weights = {p.name for p in CHECKPOINT_DIR.iterdir() if p.suffix not in (".json", ".md", ".txt")}
    assert weights == {"model.safetensors"}, weights
    assert "load_file" in (LIB / "model" / "runner.py").read_text()


@pytest.fixture(scope="module")
def checkpoint_files() -> tuple[dict, bytes]:
    if not (CHECKPOINT_DIR / "model.safetensors").is_file():
        pytest.skip(f"no shipped checkpoint in {CHECKPOINT_DIR}")
    return json.loads((CHECKPOINT_DIR / "config.json").read_text()), (CHECKPOINT_DIR / "model.safetensors").read_bytes()


def write_checkpoint(d: Path, config, weights: bytes | None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (d / "config.json").write_bytes(config if isinstance(config, bytes) else json.dumps(config).encode())
    if weights is not None:
        (d / "model.safetensors").write_bytes(weights)
    return d


def test_a_copy_of_the_shipped_checkpoint_loads(tmp_path, checkpoint_files):
    cfg, w = checkpoint_files
    m = load_model(write_checkpoint(tmp_path / "ok", cfg, w), device="cpu")
    assert m.config.n_positions == cfg["n_positions"]


def _bad_checkpoints(cfg: dict, w: bytes) -> dict[str, tuple]:
    return {
        "truncated weights": (cfg, w[: len(w) // 2]),
        "weights cut to 100 bytes": (cfg, w[:100]),
        "empty weights": (cfg, b""),
        "garbage weights": (cfg, b"\x00" * 4096),
        "a pickle instead of safetensors": (cfg, b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94."),
        "absurd header length": (cfg, (2**62).to_bytes(8, "little") + b"{}"),
        "config not JSON": (b"{n_layer: 4", w),
        "config a list": ([1, 2], w),
        "config null": (b"null", w),
        "config not UTF-8": (b'{"n_layer": 4, "note": "\xff"}', w),
        "config unknown field": ({**cfg, "dropout": 0.1}, w),
        "config wrong shape": ({**cfg, "n_embd": 64}, w),
        "config head split": ({**cfg, "n_head": 3}, w),
        "config string size": ({**cfg, "n_layer": "4"}, w),
        "config negative size": ({**cfg, "n_embd": -128}, w),
        "config float size": ({**cfg, "n_layer": 4.0}, w),
        "config bool heads": ({**cfg, "n_head": True}, w),
        "config string eps": ({**cfg, "layer_norm_eps": "tiny"}, w),
        "config negative eps": ({**cfg, "layer_norm_eps": -1.0}, w),
    }


BAD_CHECKPOINTS = list(_bad_checkpoints({}, b""))


@pytest.mark.parametrize("case", BAD_CHECKPOINTS)
def test_a_corrupt_checkpoint_is_a_clear_error(tmp_path, checkpoint_files, case):
    cfg, w = _bad_checkpoints(*checkpoint_files)[case]
    d = write_checkpoint(tmp_path / "ck", cfg, w)
    with pytest.raises(TinyserveError) as e:
        load_model(d, device="cpu")  # and never a model that loads but fails (or silently differs) later
    msg = str(e.value)
    assert msg.startswith("checkpoint: ") and str(d) in msg and "\n" not in msg and len(msg) < 400, msg


def test_a_missing_checkpoint_is_a_clear_error(tmp_path, checkpoint_files):
    cfg, w = checkpoint_files
    with pytest.raises(TinyserveError, match=r"checkpoint: missing .*nowhere.*config\.json"):
        load_model(tmp_path / "nowhere", device="cpu")
    with pytest.raises(TinyserveError, match=r"checkpoint: missing .*model\.safetensors"):
        load_model(write_checkpoint(tmp_path / "no-weights", cfg, None), device="cpu")
    with pytest.raises(TinyserveError, match=r"checkpoint: missing .*config\.json"):
        load_model(write_checkpoint(tmp_path / "no-config", None, w), device="cpu")
    (tmp_path / "dir-weights" / "model.safetensors").mkdir(parents=True)
    with pytest.raises(TinyserveError, match=r"checkpoint: missing"):
        load_model(write_checkpoint(tmp_path / "dir-weights", cfg, None), device="cpu")
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(TinyserveError, match="checkpoint: missing"):
        load_model(f, device="cpu")


# ------------------------------------------------------------------------------------------------ memory
def traced_peak_dry_run(n: int) -> tuple[int, int]:
    """(tracemalloc peak bytes, steps) of building and dry-running n long-tail requests."""
    tracemalloc.start()
    try:
        reqs = get_workload("chapter-7.2-longtail", n=n, rate=4.0)  # the load this test was sized for
        tr = Engine().run(reqs, "continuous", batch_size=32, dry_run=True)
        assert tr.metrics()["num_finished"] == n
        return tracemalloc.get_traced_memory()[1], len(tr.steps)
    finally:
        tracemalloc.stop()


def test_a_1000_request_dry_run_keeps_memory_bounded():
    peak_250, steps_250 = traced_peak_dry_run(250)
    peak_1000, steps_1000 = traced_peak_dry_run(1000)
    assert steps_1000 > 3 * steps_250  # the long run really is ~4x longer
    assert peak_1000 < 300 * 2**20, f"{peak_1000 / 2**20:.0f} MiB traced"  # measured ~25 MiB
    assert peak_1000 < 8 * peak_250, (peak_250, peak_1000)  # grows linearly with the run (~4x), not worse
