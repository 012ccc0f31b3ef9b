"""Workloads: the chapter's scenarios, the long-tail mix, prompts, and the JSONL reader's every error."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyserve.core.request import Request, Work
from tinyserve.core.tokenizer import BOS, decode, encode
from tinyserve.core.workloads import PROMPTS_FILE, get_workload, list_workloads, load_jsonl, make_prompt
from tinyserve.cost.clock import ModeledClock
from tinyserve.errors import TinyserveError

NAMES = ["chapter-7.1-padding", "chapter-7.1-finisher", "chapter-7.2-longtail", "chapter-7.3-long-prompt",
         "chapter-7.3-mixed"]


def shape(reqs: list[Request]) -> list[tuple]:
    return [(r.id, tuple(r.prompt), r.max_new_tokens, r.arrival_s, r.ignore_eos) for r in reqs]


def test_list_workloads_names_the_chapter_scenarios():
    listed = list_workloads()
    assert [n for n, _ in listed] == NAMES
    assert all(isinstance(d, str) and d and "\n" not in d for _, d in listed)


@pytest.mark.parametrize("name", NAMES)
def test_workloads_are_seeded_fresh_and_well_formed(name):
    a, b, c = get_workload(name, seed=1), get_workload(name, seed=1), get_workload(name, seed=2)
    assert shape(a) == shape(b) and shape(a) != shape(c)
    assert all(x is not y for x, y in zip(a, b))
    a[0].output.append(5)
    a[0].prompt.append(7)
    assert get_workload(name, seed=1)[0].output == [] and shape(get_workload(name, seed=1)) == shape(b)
    arrivals = [r.arrival_s for r in a]
    assert arrivals == sorted(arrivals)
    assert len({r.id for r in a}) == len(a)
    for r in a:
        assert r.ignore_eos and r.prompt[0] == BOS and all(0 <= t < 256 for t in r.prompt[1:])
        assert r.prompt_len + r.max_new_tokens <= 4096


def test_padding_scenario():
    r = get_workload("chapter-7.1-padding")
    assert [(x.id, x.prompt_len, x.max_new_tokens, x.arrival_s) for x in r] == [
        ("r0", 50, 16, 0.0), ("r1", 4000, 16, 0.0)]


def test_finisher_scenario():
    r = get_workload("chapter-7.1-finisher")
    # 32 fill the slots; 31 more queue: as many as the first batch's short requests free (issue #10)
    assert len(r) == 63 and [x.id for x in r] == [f"r{i}" for i in range(63)]
    assert r[0].max_new_tokens == 2000 and all(x.max_new_tokens == 20 for x in r[1:])
    assert all(16 <= x.prompt_len <= 32 and x.arrival_s == 0 for x in r)


def test_long_prompt_scenario_arrives_mid_decode_on_the_default_preset():
    r = get_workload("chapter-7.3-long-prompt")
    short, long = r[:30], r[30]
    assert [x.id for x in short] == [f"r{i}" for i in range(30)] and long.id == "long"
    assert all((x.prompt_len, x.max_new_tokens, x.arrival_s) == (32, 300, 0.0) for x in short)
    assert (long.prompt_len, long.max_new_tokens, long.arrival_s) == (4000, 32, 0.5)
    # under continuous batching on h200-70b-fp8: one prefill step for the 30, then 300 decode steps
    clock = ModeledClock()
    t = clock.step_time([Work(i, None, "prefill", 0, 32) for i in range(30)])
    end = t + sum(clock.decode_step_time(30, 33 + k) for k in range(299))
    assert t + 5 * clock.decode_step_time(30, 40) < long.arrival_s < end / 2
    assert get_workload("chapter-7.3-long-prompt", arrival_s=2.0, n=3)[-1].arrival_s == 2.0


def test_longtail_is_long_tailed_with_poisson_arrivals():
    r = get_workload("chapter-7.2-longtail", n=2000, rate=4.0)
    out = np.array([x.max_new_tokens for x in r])
    prompt = np.array([x.prompt_len for x in r])
    assert np.percentile(out, 99) / np.percentile(out, 50) >= 4
    assert np.mean(prompt >= 800) == pytest.approx(0.2, abs=0.03)  # the RAG share
    assert prompt.min() >= 8 and out.min() >= 4 and (prompt + out).max() <= 4096
    gaps = np.diff([0.0] + [x.arrival_s for x in r])
    assert gaps.mean() == pytest.approx(1 / 4.0, rel=0.1)
    assert np.std(gaps) / gaps.mean() == pytest.approx(1.0, abs=0.1)  # exponential: cv = 1
    assert [x.id for x in r[:3]] == ["r0", "r1", "r2"]
    default = get_workload("chapter-7.2-longtail")
    assert len(default) == 300 and default[:5] == get_workload("chapter-7.2-longtail", n=5, rate=8.0)


def test_knobs_change_what_they_name():
    assert len(get_workload("chapter-7.2-longtail", n=5, rate=1.0)) == 5
    slow = get_workload("chapter-7.2-longtail", n=50, rate=0.5)
    fast = get_workload("chapter-7.2-longtail", n=50, rate=50.0)
    assert slow[-1].arrival_s > 10 * fast[-1].arrival_s
    assert len(get_workload("chapter-7.1-finisher", n=4)) == 4
    r = get_workload("chapter-7.1-padding", short_prompt=10, long_prompt=100, max_new_tokens=3)
    assert [(x.prompt_len, x.max_new_tokens) for x in r] == [(10, 3), (100, 3)]


@pytest.mark.parametrize("name, knobs, match", [
    ("chapter-7.2-longtail", {"n": 0}, r"n must be an integer in 1\.\.100000, got 0"),
    ("chapter-7.2-longtail", {"n": True}, r"n must be an integer"),
    ("chapter-7.2-longtail", {"n": 2.0}, r"n must be an integer"),
    ("chapter-7.2-longtail", {"rate": 0}, r"rate must be a finite number > 0, got 0"),
    ("chapter-7.2-longtail", {"rate": -1.0}, r"rate must be a finite number > 0"),
    ("chapter-7.2-longtail", {"rate": float("nan")}, r"rate must be a finite number > 0, got nan"),
    ("chapter-7.2-longtail", {"rate": float("inf")}, r"rate must be a finite number > 0"),
    ("chapter-7.2-longtail", {"rate": "4"}, r"rate must be"),
    ("chapter-7.2-longtail", {"speed": 3}, r"unknown knob 'speed' \(knobs: n, rate\)"),
    ("chapter-7.3-long-prompt", {"arrival_s": -0.1}, r"arrival_s must be a finite number >= 0"),
    ("chapter-7.1-padding", {"long_prompt": 5000}, r"long_prompt must be an integer in 1\.\.4095"),
])
def test_bad_knobs_name_the_knob_and_its_range(name, knobs, match):
    with pytest.raises(TinyserveError, match=match):
        get_workload(name, **knobs)


def test_unknown_workload_lists_the_choices():
    with pytest.raises(TinyserveError, match=r"workload: unknown 'x' \(choose chapter-7\.1-padding, .*FILE\.jsonl\)"):
        get_workload("x")


def test_make_prompt_is_exact_real_and_deterministic():
    text = PROMPTS_FILE.read_bytes()
    assert 64_000 <= len(text) <= 131_072
    header = text.split(b"\n", 1)[0].decode()
    assert header.startswith("#") and "Python Software Foundation" in header
    for n in (1, 2, 50, 4000, 300_000):  # longer than the corpus: wraps around
        p = make_prompt(n, seed=3)
        assert len(p) == n and p[0] == BOS and all(0 <= t < 256 for t in p[1:])
    assert make_prompt(80, 3) == make_prompt(80, 3) != make_prompt(80, 4)
    assert bytes(make_prompt(200, 9)[1:]) in text.split(b"\n", 1)[1] * 2
    for bad in (0, -1, True, 2.5):
        with pytest.raises(TinyserveError, match="prompt length"):
            make_prompt(bad)


# ------------------------------------------------------------------------------------------------ JSONL
def write(tmp_path: Path, content: str | bytes, name: str = "w.jsonl") -> Path:
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    return f


def test_jsonl_reads_requests_sorted_by_arrival(tmp_path):
    f = write(tmp_path, '{"id": "a", "prompt": "hi", "max_new_tokens": 3, "arrival_s": 2}\n'
                        '\n'
                        '{"prompt_len": 7, "max_new_tokens": 1, "arrival_s": 0.5, "ignore_eos": true}\r\n'
                        '{"prompt": "é", "max_new_tokens": 2, "arrival_s": 0.5}\n')
    r = load_jsonl(f)
    assert [x.id for x in r] == ["3", "4", "a"]  # default ids: 1-based line numbers (blank lines count)
    assert r[0].prompt_len == 7 and r[0].prompt[0] == BOS and r[0].ignore_eos
    assert r[1].prompt == encode("é") and r[1].ignore_eos is False and decode(r[1].prompt) == "é"
    assert (r[2].prompt, r[2].max_new_tokens, r[2].arrival_s) == (encode("hi"), 3, 2.0)
    assert [x.id for x in get_workload(str(f))] == ["3", "4", "a"]
    assert shape(load_jsonl(f)) == shape(r)


def test_jsonl_ids_round_trip_and_long_prompts_are_kept(tmp_path):
    ids = ["r-1", "用戶 7", " spaced ", "0", "a\"b"]
    lines = [json.dumps({"id": i, "prompt_len": 5, "max_new_tokens": 1}) for i in ids]
    lines.append(json.dumps({"id": "huge", "prompt_len": 6000, "max_new_tokens": 10}))
    r = load_jsonl(write(tmp_path, "\n".join(lines)))
    assert [x.id for x in r] == ids + ["huge"] and r[-1].prompt_len == 6000  # the engine rejects it, not us


def test_jsonl_accepts_a_bom(tmp_path):
    assert load_jsonl(write(tmp_path, b'\xef\xbb\xbf{"prompt": "x", "max_new_tokens": 1}\n'))[0].id == "1"


OK = '"prompt": "x", "max_new_tokens": 1'
BAD = [
    (b'{"prompt": "x", "max_new_tokens": 1}\n\xff\xfe\n', r"line 2: not UTF-8"),
    (f'{{{OK}}}\n{{"prompt": "x",', r"line 2: malformed JSON"),
    ('[1, 2]', r"line 1: expected a JSON object, got list"),
    ('"text"', r"line 1: expected a JSON object, got str"),
    (f'{{{OK}, "temperature": 0.7}}', r"line 1: unknown field 'temperature'"),
    ('{"prompt": "x"}', r"line 1: missing field 'max_new_tokens'"),
    ('{"max_new_tokens": 1}', r"line 1: give exactly one of the fields 'prompt' .* and 'prompt_len'"),
    ('{"prompt": "x", "prompt_len": 3, "max_new_tokens": 1}', r"give exactly one of the fields"),
    ('{"prompt": 5, "max_new_tokens": 1}', r"field 'prompt' must be a string, got int"),
    ('{"prompt": "", "max_new_tokens": 1}', r"field 'prompt' is empty"),
    ('{"prompt": "\\ud800", "max_new_tokens": 1}', r"field 'prompt' holds a lone surrogate"),
    ('{"prompt_len": 0, "max_new_tokens": 1}', r"field 'prompt_len' must be an integer in 1\.\.1000000, got 0"),
    ('{"prompt_len": true, "max_new_tokens": 1}', r"field 'prompt_len' must be an integer .*got True"),
    ('{"prompt_len": 4.0, "max_new_tokens": 1}', r"field 'prompt_len' must be an integer"),
    ('{"prompt": "x", "max_new_tokens": 0}', r"field 'max_new_tokens' must be an integer >= 1, got 0"),
    ('{"prompt": "x", "max_new_tokens": true}', r"field 'max_new_tokens' must be an integer >= 1, got True"),
    ('{"prompt": "x", "max_new_tokens": "3"}', r"field 'max_new_tokens' must be an integer >= 1, got '3'"),
    (f'{{{OK}, "arrival_s": -1}}', r"field 'arrival_s' must be a finite number >= 0, got -1"),
    (f'{{{OK}, "arrival_s": NaN}}', r"field 'arrival_s' must be a finite number >= 0, got nan"),
    (f'{{{OK}, "arrival_s": Infinity}}', r"field 'arrival_s' must be a finite number >= 0, got inf"),
    (f'{{{OK}, "arrival_s": 1e400}}', r"field 'arrival_s' must be a finite number"),
    (f'{{{OK}, "arrival_s": {10 ** 400}}}', r"field 'arrival_s' must be a finite number"),
    (f'{{{OK}, "arrival_s": "0"}}', r"field 'arrival_s' must be a finite number"),
    (f'{{{OK}, "arrival_s": false}}', r"field 'arrival_s' must be a finite number"),
    (f'{{{OK}, "ignore_eos": "yes"}}', r"field 'ignore_eos' must be true or false, got 'yes'"),
    (f'{{{OK}, "ignore_eos": 1}}', r"field 'ignore_eos' must be true or false"),
    (f'{{{OK}, "id": 5}}', r"field 'id' must be a non-empty string"),
    (f'{{{OK}, "id": ""}}', r"field 'id' must be a non-empty string"),
    (f'{{{OK}, "id": "a"}}\n{{{OK}, "id": "a"}}', r"line 2: duplicate id 'a' \(first on line 1\)"),
    (f'{{{OK}, "id": "2"}}\n{{{OK}}}', r"line 2: duplicate id '2' \(first on line 1\)"),
    ('', r"no requests \(the file is empty\)"),
    ('\n  \n\t\n', r"no requests"),
    ('[' * 100_000, r"line 1: malformed JSON"),
]


@pytest.mark.parametrize("content, match", BAD)
def test_jsonl_errors_name_file_line_and_field(tmp_path, content, match):
    f = write(tmp_path, content, "bad.jsonl")
    with pytest.raises(TinyserveError, match=match) as e:
        load_jsonl(f)
    assert str(f) in str(e.value) and len(str(e.value)) < 400 and "\n" not in str(e.value)


def test_jsonl_missing_file_and_directory(tmp_path):
    with pytest.raises(TinyserveError, match=r"nope\.jsonl: no such file"):
        load_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(TinyserveError, match=r"no such file \(a directory\)"):
        load_jsonl(tmp_path)
    with pytest.raises(TinyserveError, match="no such file"):
        get_workload(str(tmp_path / "nope.jsonl"))
    with pytest.raises(TinyserveError, match="takes no knobs"):
        get_workload(str(tmp_path / "nope.jsonl"), n=3)


def _check_result(f: Path) -> None:
    try:
        reqs = load_jsonl(f)
    except TinyserveError:
        return
    assert reqs and all(isinstance(r, Request) for r in reqs)
    for r in reqs:
        assert isinstance(r.id, str) and r.id and r.prompt and r.prompt[0] == BOS
        assert isinstance(r.max_new_tokens, int) and r.max_new_tokens >= 1
        assert math.isfinite(r.arrival_s) and r.arrival_s >= 0 and isinstance(r.ignore_eos, bool)
    assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)
    assert len({r.id for r in reqs}) == len(reqs)


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_jsonl_random_bytes(tmp_path, data):
    _check_result(write(tmp_path, data, "fuzz.jsonl"))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)
field_values = st.one_of(json_values, st.integers(-2, 50), st.floats(-1, 10), st.text(max_size=10))
request_like = st.dictionaries(
    st.sampled_from(["id", "prompt", "prompt_len", "max_new_tokens", "arrival_s", "ignore_eos", "extra"]),
    field_values, max_size=6)


@FUZZ
@given(st.lists(st.one_of(request_like, json_values), min_size=0, max_size=5))
def test_fuzz_jsonl_random_json(tmp_path, rows):
    text = "\n".join(json.dumps(r) for r in rows)
    _check_result(write(tmp_path, text, "fuzz.jsonl"))


def test_padding_knobs_keep_prompt_plus_output_in_context():
    with pytest.raises(TinyserveError, match=r"max_new_tokens must be <= 4096"):
        get_workload("chapter-7.1-padding", long_prompt=4090, max_new_tokens=16)


# ---- chapter-7.3-mixed (issue 34): chat turns with long prompts among them, Poisson arrivals at `rate`
def test_mixed_is_seeded_and_rate_moves_only_the_arrivals():
    a, b = get_workload("chapter-7.3-mixed", seed=3), get_workload("chapter-7.3-mixed", seed=3)
    assert shape(a) == shape(b) and len(a) == 200 and a[0].arrival_s > 0
    fast = get_workload("chapter-7.3-mixed", seed=3, rate=12.0)
    assert [(r.id, r.prompt, r.max_new_tokens) for r in fast] == [(r.id, r.prompt, r.max_new_tokens) for r in a]
    # the same exponential draws divided by twice the rate (arrivals are rounded to the microsecond)
    assert [r.arrival_s for r in fast] == pytest.approx([r.arrival_s / 2 for r in a], abs=2e-6)


def test_mixed_lengths_stay_in_their_bounds_and_the_long_share_holds():
    r = get_workload("chapter-7.3-mixed", n=3000, rate=5.0)
    prompt = np.array([x.prompt_len for x in r])
    out = np.array([x.max_new_tokens for x in r])
    long = prompt >= 2000
    assert np.mean(long) == pytest.approx(0.2, abs=0.025)
    assert 2000 <= prompt[long].min() and prompt[long].max() <= 3500 and set(out[long]) <= set(range(32, 129))
    assert 16 <= prompt[~long].min() and prompt[~long].max() <= 1024 and 8 <= out.min() and out.max() <= 512
    assert (prompt + out).max() <= 4096 and all(x.ignore_eos for x in r)
    assert np.median(prompt[~long]) == pytest.approx(150, rel=0.1)
    assert np.median(out[~long]) == pytest.approx(120, rel=0.1)
    gaps = np.diff([0.0] + [x.arrival_s for x in r])
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.06)
    assert np.std(gaps) / gaps.mean() == pytest.approx(1.0, abs=0.08)  # exponential: cv = 1


def test_mixed_long_share_zero_and_one():
    assert max(x.prompt_len for x in get_workload("chapter-7.3-mixed", n=300, long_share=0)) <= 1024
    assert min(x.prompt_len for x in get_workload("chapter-7.3-mixed", n=50, long_share=1.0)) >= 2000


@pytest.mark.parametrize("knobs, match", [
    ({"long_share": 1.5}, r"long_share must be a finite number in 0\.\.1, got 1\.5$"),
    ({"long_share": -0.1}, r"long_share must be a finite number in 0\.\.1, got -0\.1$"),
    ({"long_share": float("nan")}, r"long_share must be a finite number in 0\.\.1, got nan$"),
    ({"rate": 0}, r"rate must be a finite number > 0, got 0$"),
    ({"n": 0}, r"n must be an integer in 1\.\.100000, got 0$"),
])
def test_mixed_knobs_are_checked(knobs, match):
    with pytest.raises(TinyserveError, match=r"^workload chapter-7\.3-mixed: " + match):
        get_workload("chapter-7.3-mixed", **knobs)


def test_mixed_unknown_knob_lists_its_knobs():
    with pytest.raises(TinyserveError, match=r"unknown knob 'long_prompt' \(knobs: n, rate, long_share\)"):
        get_workload("chapter-7.3-mixed", long_prompt=3000)

