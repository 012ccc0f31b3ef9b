"""Every error a user can meet, in both languages: the English word for word as the code said it before these
messages moved into the table (each expected string below was written from that code), the 繁體中文 a real
translation with the same fields. The bad-input tests in tests/core and tests/tools check many more English
messages through the engine and the CLI; these are the ones they do not reach."""
from __future__ import annotations

import argparse
import inspect
import json
import re
import string
from pathlib import Path

import pytest

import tinyserve
from tinyserve import lang
from tinyserve.errors import TinyserveError

# the areas and key prefixes of the words that used to be f-strings in the code (and the CLI's new words)
NEW = ("cli.", "engine.jsonl.", "engine.hardware.", "engine.summary.", "engine.model.", "engine.device.",
       "engine.dtype.", "engine.checkpoint.", "engine.trace.", "engine.sweep.", "engine.workload.about.",
       "engine.knob.waiting_contradicts", "engine.knob.dtype", "engine.knob.on_object", "engine.knob.positive_finite",
       "engine.knob.finite_nonneg", "engine.policy.busy", "engine.threads", "engine.workload.prompt_length",
       "engine.workload.padding_too_long")
PERCENT = re.compile(r"%(\([a-z_]+\))?[sr]")


@pytest.fixture
def zh():
    tinyserve.set_language("zh-TW", figures=False)
    yield
    tinyserve.set_language("en", figures=False)


def message(fn, *args, **kwargs) -> str:
    """The message of the TinyserveError (or ValueError, IndexError) fn raises."""
    with pytest.raises((TinyserveError, ValueError, IndexError)) as e:
        fn(*args, **kwargs)
    return str(e.value)


def fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


def test_every_new_word_is_translated_with_the_same_fields():
    keys = [k for k in lang.table() if k.startswith(NEW)]
    assert len(keys) > 200
    for key in keys:
        entry = lang.table()[key]
        zh = entry.get("zh-TW")
        assert zh and zh != entry["en"] and re.search(r"[\u4e00-\u9fff（］：]", zh), key
        assert fields(zh) == fields(entry["en"]), key
        assert not fields(zh) & {"key", "lang"}, key  # t(key, lang=None, **fields) takes those two itself
        assert sorted(PERCENT.findall(zh)) == sorted(PERCENT.findall(entry["en"])), key


def test_argparse_words_are_argparse_own_msgids():
    """tools/speak.py hands argparse these by its English: a Python whose argparse says it otherwise shows."""
    source = inspect.getsource(argparse)
    for key in [k for k in lang.table() if k.startswith("cli.argparse.")]:
        assert repr(lang.t(key, lang="en")) in source or json.dumps(lang.t(key, lang="en")) in source, key


def test_the_classroom_commands_describe_themselves_as_their_docstrings_do():
    from tinyserve.classroom import check, grade

    assert lang.t("cli.check.description", lang="en") == check.__doc__.split("\n")[0]
    assert lang.t("cli.grade.description", lang="en") == grade.__doc__.split("\n")[0]


def test_knob_and_workload_errors_word_for_word():
    from tinyserve.core.config import GPTConfig, RunConfig, check_dtype
    from tinyserve.core.scheduling.continuous import waiting_steps
    from tinyserve.core.workloads import get_workload, list_workloads, make_prompt

    assert message(waiting_steps, True, 5) == ("max_waiting_steps: 5 contradicts prefill_first=True (prefill-first is "
                                               "max_waiting_steps=0; give one of the two)")
    assert message(check_dtype, "float16") == "dtype: unknown 'float16' (choose float32, float64, bfloat16)"
    assert message(RunConfig.for_object, "MyPolicy", {"timeout": 1.0}) == (
        "timeout: set it on the MyPolicy object (knobs apply to a policy given by name)")
    assert message(GPTConfig, n_layer=0) == "n_layer must be a positive integer, got 0"
    assert message(GPTConfig, n_head=3) == "n_embd 128 is not divisible by n_head 3"
    assert message(GPTConfig, layer_norm_eps=2) == "layer_norm_eps must be a number in (0, 1), got 2"
    assert message(make_prompt, 0) == "prompt length: must be an integer >= 1, got 0"
    assert message(get_workload, "chapter-7.1-padding", long_prompt=4090) == (
        "workload chapter-7.1-padding: the longer prompt + max_new_tokens must be <= 4096")
    assert dict(list_workloads())["chapter-7.1-finisher"] == (
        "63 requests at once: one 2,000-token output (r0), 62 of 20; 32 slots, so 31 queue (F3, F4, F6)")


def test_a_policy_object_still_busy_word_for_word():
    from tinyserve.core.kv import SlotPool
    from tinyserve.core.scheduling import ContinuousBatching
    from tinyserve.core.request import Request

    p = ContinuousBatching(2)
    p.bind(SlotPool(2, 8, 4))
    p.add(Request("r0", [1, 2], 3))
    assert message(p.bind, SlotPool(2, 8, 4)) == (
        "policy: this ContinuousBatching object still holds 1 request(s) of an unfinished run; give each run its own "
        "policy object (or pass the policy by name)")


@pytest.mark.parametrize("line,expected", [
    ({"prompt": 5, "max_new_tokens": 1}, "field 'prompt' must be a string, got int"),
    ({"prompt": "", "max_new_tokens": 1}, "field 'prompt' is empty (needs at least 1 character)"),
    ('{"prompt": "\\ud800", "max_new_tokens": 1}', "field 'prompt' holds a lone surrogate (\\ud800-\\udfff), not valid Unicode"),
    ({"prompt_len": 0, "max_new_tokens": 1}, "field 'prompt_len' must be an integer in 1..1000000, got 0"),
    ({"prompt_len": 3, "max_new_tokens": 1, "arrival_s": -1}, "field 'arrival_s' must be a finite number >= 0, got -1"),
    ({"prompt_len": 3, "max_new_tokens": 1, "ignore_eos": "yes"}, "field 'ignore_eos' must be true or false, got 'yes'"),
    ({"id": "", "prompt_len": 3, "max_new_tokens": 1}, "field 'id' must be a non-empty string of valid Unicode, got ''"),
    ('{"prompt_len": 3,', "malformed JSON (Expecting property name enclosed in double quotes at column 18)"),
])
def test_jsonl_errors_word_for_word(tmp_path, line, expected):
    from tinyserve.core.workloads import load_jsonl

    f = tmp_path / "w.jsonl"
    f.write_text("\n" + (line if isinstance(line, str) else json.dumps(line)) + "\n")
    assert message(load_jsonl, f) == f"workload {f}, line 2: {expected}"


def test_jsonl_file_errors_word_for_word(tmp_path):
    from tinyserve.core.workloads import load_jsonl

    assert message(load_jsonl, tmp_path) == f"workload {tmp_path}: no such file (a directory)"
    (tmp_path / "e.jsonl").write_text("\n")
    assert message(load_jsonl, tmp_path / "e.jsonl") == f"workload {tmp_path / 'e.jsonl'}: no requests (the file is empty)"
    (tmp_path / "b.jsonl").write_bytes(b'{"prompt_len": 3, "max_new_tokens": 1}\n\xff\n')
    assert message(load_jsonl, tmp_path / "b.jsonl") == (
        f"workload {tmp_path / 'b.jsonl'}, line 2: not UTF-8 text (byte 0xff)")


def test_hardware_file_errors_word_for_word(tmp_path):
    from dataclasses import asdict

    from tinyserve.cost.presets import get_preset, load_preset

    f = tmp_path / "hw.json"
    f.write_text("[1]")
    assert message(load_preset, f) == f"hardware: {f} must hold a JSON object"
    good = asdict(get_preset("cpu-tiny"))
    for change, expected in [({"bandwidth_Bps": -1}, "bandwidth_Bps must be a finite number > 0, got -1"),
                             ({"attention": "magic"}, "attention must be one of exact, tinyserve-cpu, tinyserve-cuda, got 'magic'"),
                             ({"kv_cache_ramp": 1}, "kv_cache_ramp must be > 1, got 1.0"),
                             ({"max_model_len": 0}, "max_model_len must be an integer >= 1 or null, got 0"),
                             ({"kv_dtype": 2}, "kv_dtype must be a string, got 2"),
                             ({"sources": [1]}, "name/description must be strings, sources a list of strings")]:
        f.write_text(json.dumps({**good, **change}))
        assert message(load_preset, f) == f"hardware: {f}: {expected}", change


def test_trace_and_analysis_errors_word_for_word(tmp_path):
    from tinyserve.analysis.batching import decode_capacity_tok_s, slot_changes
    from tinyserve.analysis.sweeps import capacity_sweep, spread_workload
    from tinyserve.core.workloads import get_workload
    from tinyserve.engine import Engine
    from tinyserve.trace.record import Trace

    (tmp_path / "t.json").write_text("{")
    assert message(Trace.load, tmp_path / "t.json") == (
        f"trace {tmp_path / 't.json'}: cannot read (JSONDecodeError: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1))")
    tr = Engine().run(get_workload("chapter-7.2-longtail", n=4), "continuous", dry_run=True, progress=False)
    assert message(slot_changes, tr, 999) == f"step 999 is outside the trace's {len(tr.steps)} steps"
    tr.clock = "wall"
    assert message(decode_capacity_tok_s, tr) == "decode capacity needs a modeled-clock trace, got clock 'wall'"
    assert message(spread_workload, spread=-1.0) == "spread: must be a finite number >= 0, got -1.0"
    assert message(spread_workload, rate=0) == "rate: must be a finite number > 0, got 0"
    assert message(capacity_sweep, [], targets_ms=[0]) == "targets_ms: give positive numbers of milliseconds, got [0]"


def test_threads_and_replay_errors_word_for_word(monkeypatch):
    from tinyserve.core.config import threads_setting
    from tinyserve.tools.replay import check_url, replay

    monkeypatch.setenv("TINYSERVE_THREADS", "many")
    assert message(threads_setting) == (
        "TINYSERVE_THREADS: must be auto, off (or 0, no, false) or a positive integer, got 'many'")
    assert message(check_url, "ftp://x") == "--url: 'ftp://x' is not an http(s) URL (e.g. http://127.0.0.1:8000)"
    assert message(replay, "http://x", [], token_unit="bit") == "--token-unit: unknown 'bit' (choose byte, event)"
    assert message(replay, "http://x", [], max_concurrency=0) == "max_concurrency: must be an integer >= 1, got 0"
    assert message(replay, "http://x", [], idle_timeout_s=0) == "idle_timeout_s: must be a finite number > 0, got 0"


@pytest.mark.parametrize("argv,expected", [
    (["run", "--workload", "w", "--policy", "static", "--timeout", "abc"],
     "tinyserve run: argument --timeout: --timeout must be a number, got 'abc'"),
    (["run", "--workload", "w", "--policy", "static", "--timeout", "-1"],
     "tinyserve run: argument --timeout: --timeout must be a finite number >= 0, got -1"),
    (["run", "--workload", "w", "--policy", "static", "--workload-knob", "n=x"],
     "tinyserve run: argument --workload-knob: --workload-knob n: must be a number, got 'x'"),
    (["run", "--workload", "w", "--policy", "static", "--max-waiting-steps", "x"],
     "tinyserve run: argument --max-waiting-steps: --max-waiting-steps must be an integer >= 0 or 'unbounded', got 'x'"),
    (["run", "--workload", "w", "--policy", "static", "--max-waiting-steps", "-1"],
     "tinyserve run: argument --max-waiting-steps: --max-waiting-steps must be >= 0, got -1"),
    (["replay", "--url", "u", "--workload", "w", "--timeout", "0"],
     "tinyserve replay: argument --timeout: --timeout must be > 0, got 0"),
])
def test_cli_argument_errors_word_for_word(argv, expected):
    from tinyserve.tools.cli import build_parser

    assert message(build_parser().parse_args, argv) == expected


def test_the_same_errors_in_chinese(zh, tmp_path):
    from tinyserve.core.config import check_dtype
    from tinyserve.core.workloads import load_jsonl
    from tinyserve.tools.cli import build_parser
    from tinyserve.tools.speak import argparse_words

    assert message(check_dtype, "float16") == "dtype：沒有 'float16' 這個選項（可選 float32, float64, bfloat16）"
    f = tmp_path / "w.jsonl"
    f.write_text('{"prompt_len": 3}\n')
    assert message(load_jsonl, f) == f"工作負載 {f}，第 1 行：缺少欄位 'max_new_tokens'"
    with argparse_words():  # argparse's own words too, as the CLI parses
        assert message(build_parser().parse_args, ["run", "--workload", "w", "--policy", "s", "--timeout", "x"]) == (
            "tinyserve run：引數 --timeout：--timeout 必須是數字，收到的是 'x'")
