"""Seeded workloads: the chapter's scenarios, a long-tailed traffic mix, and requests read from JSONL.

Every call returns fresh Request objects (the engine mutates them). All named workloads set ignore_eos, so
output lengths, and with them every count and modeled time, are the same on any machine. Randomness comes
only from random.Random(seed) objects created here, never from global state.

Prompts are real text: [BOS] + bytes of Python standard-library source (data/prompts.txt, committed so every
machine and Python version sees the same bytes) taken at a seeded offset. The tiny GPT was trained on that
kind of text, so its continuations are plausible, but nothing here depends on what it generates.

chapter-7.2-longtail, the distributions and why:
  * 80% short chat turns: prompt ~ lognormal(median 60, sigma 0.8) clipped to 8..400 tokens, output ~
    lognormal(median 40, sigma 1.0) clipped to 4..400.
  * 20% long RAG completions: prompt uniform 800..2,500 tokens (retrieved passages), output uniform 150..600.
  Real chat/RAG traffic is long-tailed: the evaluations of Orca and vLLM replayed ShareGPT-style
  conversations whose output lengths span two orders of magnitude with a small mean; the mixture reproduces
  that (output p99/p50 is about 10) while keeping prompt + output <= 3,100 < the 4,096-token context.
  Arrivals are Poisson (exponential gaps) at `rate` requests/s. Defaults: 300 requests at 8 req/s, chosen on
  the default h200-70b-fp8 preset so that `tinyserve run --workload chapter-7.2-longtail` shows the chapter's
  picture (F7): the mean request has ~395 prompt and ~125 output tokens, so 8 req/s asks for ~3,200 prefill
  and ~1,000 output tokens/s. Continuous batching serves that with ~20-25 of its 32 slots busy (utilisation
  ~70%); static batching cannot keep up (each batch decodes for as long as its longest member, up to 600
  steps, while most members stop after ~40), so its utilisation stays ~20% and its queue, and p99 latency,
  grow for as long as requests keep coming. 300 requests make the run mostly steady state, not the final
  drain (100 at 4 req/s left continuous at ~28%). Lower `rate` to see where the gap closes.

chapter-7.3-mixed, the traffic 7.3 leaves to Chapter 12 (DistServe's disaggregated prefill and decode):
  * chat turns (share 1 - long_share): prompt ~ lognormal(median 150, sigma 0.8) clipped to 16..1,024 tokens,
    output ~ lognormal(median 120, sigma 0.7) clipped to 8..512.
  * long prompts (share long_share, default 20%): RAG or summarisation, prompt uniform 2,000..3,500 tokens,
    a short answer uniform 32..128. prompt + output <= 3,628 < the 4,096-token context.
  Why the mixture: on one GPU every long prompt's prefill lands in the steps of the chat turns decoding beside
  it, so their time per output token (TPOT) jumps while it runs; chunked prefill spreads it thin but still pays
  it, step by step. This is where prefill and decode fight over one GPU, the case for putting them on separate
  GPUs. Arrivals are Poisson at `rate` requests/s for the whole deployment; the lengths come from their own
  generator (seeded from the first), so changing `rate` moves the arrivals and leaves every request as it was,
  which is what a rate sweep (goodput) needs. Defaults: 200 requests at 6 req/s, ~34 s of arrivals; seed 0 draws
  51 long prompts, a mean of ~850 prompt and ~130 output tokens a request. On h200-70b-fp8, one GPU under
  chunked prefill serves 3 req/s with p90 TPOT ~32 ms (~22 ms with no long prompts at all) and saturates near
  6 req/s (p90 TTFT 1.4 s, and growing): two GPUs at 4-8 req/s are loaded but not overloaded, and the default
  6 req/s on one GPU is the edge.
"""
from __future__ import annotations

import json
import math
import random
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..errors import TinyserveError
from ..lang import t
from .request import Request
from .tokenizer import BOS, encode

PROMPTS_FILE = Path(__file__).parents[1] / "data" / "prompts.txt"
CONTEXT = 4096  # the shipped model's n_positions; named workloads keep prompt + output within it
MAX_PROMPT_LEN = 1_000_000  # JSONL prompt_len sanity bound (far beyond any context; the engine rejects > CONTEXT)


@lru_cache(maxsize=1)
def _text() -> bytes:
    """The prompt corpus without its one-line provenance header."""
    return PROMPTS_FILE.read_bytes().split(b"\n", 1)[1]


def _prompt(n_tokens: int, rng: random.Random) -> list[int]:
    text = _text()
    off = rng.randrange(len(text))
    need = n_tokens - 1
    reps = (off + need) // len(text) + 1  # wrap around for prompts longer than the corpus
    return [BOS] + list((text * reps)[off:off + need])


def make_prompt(n_tokens: int, seed: int = 0) -> list[int]:
    """Exactly n_tokens ids: BOS then n_tokens-1 bytes of real text from a seeded offset of prompts.txt."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise TinyserveError(t("engine.workload.prompt_length", value=n_tokens))
    return _prompt(n_tokens, random.Random(seed))


# ------------------------------------------------------------------------------------------ named workloads
def _padding(rng: random.Random, short_prompt: int, long_prompt: int, max_new_tokens: int) -> list[Request]:
    if max(short_prompt, long_prompt) + max_new_tokens > CONTEXT:
        raise TinyserveError(t("engine.workload.padding_too_long", context=CONTEXT))
    return [Request(f"r{i}", _prompt(p, rng), max_new_tokens, 0.0, ignore_eos=True)
            for i, p in enumerate((short_prompt, long_prompt))]


def _finisher(rng: random.Random, n: int, long_output: int, short_output: int) -> list[Request]:
    # r0 is the long one; with n > batch size the rest queue behind the first batch (F3 there, F4/F6 for the queue).
    # The default 63 = 32 slots + the 31 that the first batch's short requests free after ~20 steps
    return [Request(f"r{i}", _prompt(rng.randint(16, 32), rng), long_output if i == 0 else short_output, 0.0,
                    ignore_eos=True) for i in range(n)]


def _longtail(rng: random.Random, n: int, rate: float) -> list[Request]:
    out, t = [], 0.0
    for i in range(n):
        t += -math.log(1.0 - rng.random()) / rate  # exponential gap: Poisson arrivals
        if rng.random() < 0.8:  # short chat turn
            p = min(400, max(8, round(rng.lognormvariate(math.log(60), 0.8))))
            o = min(400, max(4, round(rng.lognormvariate(math.log(40), 1.0))))
        else:  # long RAG completion
            p, o = rng.randint(800, 2500), rng.randint(150, 600)
        out.append(Request(f"r{i}", _prompt(p, rng), o, round(t, 6), ignore_eos=True))
    return out


def _long_prompt(rng: random.Random, n: int, arrival_s: float, long_prompt: int) -> list[Request]:
    reqs = [Request(f"r{i}", _prompt(32, rng), 300, 0.0, ignore_eos=True) for i in range(n)]
    return reqs + [Request("long", _prompt(long_prompt, rng), 32, float(arrival_s), ignore_eos=True)]


def _mixed(rng: random.Random, n: int, rate: float, long_share: float) -> list[Request]:
    # the lengths are drawn apart from the arrivals (a second generator seeded from the first), so that `rate`
    # moves the arrivals and nothing else: the same requests, sooner or later
    lengths = random.Random(rng.getrandbits(64))
    out, t = [], 0.0
    for i in range(n):
        t += -math.log(1.0 - rng.random()) / rate  # exponential gap: Poisson arrivals
        if lengths.random() < long_share:  # a long RAG / summarisation prompt, a short answer
            p, o = lengths.randint(2000, 3500), lengths.randint(32, 128)
        else:  # a chat turn
            p = min(1024, max(16, round(lengths.lognormvariate(math.log(150), 0.8))))
            o = min(512, max(8, round(lengths.lognormvariate(math.log(120), 0.7))))
        out.append(Request(f"r{i}", _prompt(p, lengths), o, round(t, 6), ignore_eos=True))
    return out


# name -> (its description's key in tinyserve.lang, builder, {knob: (default, kind, lo, hi)}); kind "int" (lo..hi),
# "float>" or "float>=" (above lo; and at most hi where hi is not None)
WORKLOADS: dict[str, tuple[str, Callable[..., list[Request]], dict[str, tuple[Any, str, float, float | None]]]] = {
    "chapter-7.1-padding": (
        "engine.workload.about.chapter-7.1-padding", _padding,
        {"short_prompt": (50, "int", 1, CONTEXT - 1), "long_prompt": (4000, "int", 1, CONTEXT - 1),
         "max_new_tokens": (16, "int", 1, CONTEXT - 1)}),
    "chapter-7.1-finisher": (
        "engine.workload.about.chapter-7.1-finisher", _finisher,
        {"n": (63, "int", 1, 100_000), "long_output": (2000, "int", 1, CONTEXT - 32),
         "short_output": (20, "int", 1, CONTEXT - 32)}),
    "chapter-7.2-longtail": (
        "engine.workload.about.chapter-7.2-longtail", _longtail,
        {"n": (300, "int", 1, 100_000), "rate": (8.0, "float>", 0.0, None)}),
    "chapter-7.3-long-prompt": (
        "engine.workload.about.chapter-7.3-long-prompt", _long_prompt,
        {"n": (30, "int", 1, 100_000), "arrival_s": (0.5, "float>=", 0.0, None),
         "long_prompt": (4000, "int", 1, CONTEXT - 32)}),
    "chapter-7.3-mixed": (
        "engine.workload.about.chapter-7.3-mixed", _mixed,
        {"n": (200, "int", 1, 100_000), "rate": (6.0, "float>", 0.0, None),
         "long_share": (0.2, "float>=", 0.0, 1.0)}),
}


def list_workloads() -> list[tuple[str, str]]:
    """(name, one-line description in the current language) of every named workload."""
    return [(name, t(spec[0])) for name, spec in WORKLOADS.items()]


def _check_knob(workload: str, knob: str, value: Any, kind: str, lo: float, hi: float | None) -> int | float:
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
            value > lo if kind == "float>" else value >= lo) and (hi is None or value <= hi)
    if ok:  # the range's words only for the error: a good knob loads no catalog
        return value
    rng = (t("engine.workload.int_range", lo=lo, hi=hi) if kind == "int" else
           t("engine.workload.float_range", op=kind[5:], lo=lo) if hi is None else
           t("engine.workload.float_interval", lo=lo, hi=hi))
    raise TinyserveError(t("engine.workload.knob_value", workload=workload, knob=knob, rng=rng, value=_show(value)))


def ids_known(name: str, vocab: int) -> bool:
    """Whether a workload's prompts need no token-id scan for a model of `vocab` ids: a named workload's are BOS and
    bytes of prompts.txt (_prompt), all below it when vocab > BOS. (The scan costs ~6 ms a run: 116,000 ids in
    chapter-7.2-longtail, and a widget's knob move re-runs it.)"""
    return name in WORKLOADS and vocab > BOS  # BOS (256) is the largest id _prompt makes


def get_workload(name: str, seed: int = 0, **knobs: Any) -> list[Request]:
    """Fresh requests of a named workload (or a FILE.jsonl), seeded; knobs override the defaults."""
    if name not in WORKLOADS:
        if isinstance(name, str) and name.endswith(".jsonl"):
            if knobs:
                raise TinyserveError(t("engine.workload.jsonl_knobs", name=name, knobs=", ".join(knobs)))
            return load_jsonl(name, seed=seed)
        raise TinyserveError(t("engine.workload.unknown", name=name, choices=", ".join(WORKLOADS)))
    _, build, spec = WORKLOADS[name]
    for k in knobs:
        if k not in spec:
            raise TinyserveError(t("engine.workload.unknown_knob", name=name, knob=k,
                                   knobs=", ".join(spec) or t("engine.workload.none")))
    args = {k: _check_knob(name, k, knobs.get(k, d), kind, lo, hi) for k, (d, kind, lo, hi) in spec.items()}
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TinyserveError(t("engine.knob.seed", value=seed))
    return [r.fresh() for r in _built(name, seed, tuple(args.items()))]


@lru_cache(maxsize=8)
def _built(name: str, seed: int, args: tuple) -> tuple[Request, ...]:
    """A named workload's requests, built once per (name, seed, knobs): a widget's knob change re-runs the engine on
    the same workload (building the long tail's 300 prompts took ~5 ms a move). Only fresh() copies leave here."""
    _, build, _spec = WORKLOADS[name]
    return tuple(build(random.Random(seed), **dict(args)))


# ------------------------------------------------------------------------------------------------- JSONL
FIELDS = ("id", "prompt", "prompt_len", "max_new_tokens", "arrival_s", "ignore_eos")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # JSON true is not 1


def _show(v: Any) -> str:
    """A value for an error message, cut short (a bad field may hold a megabyte)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _unicode(s: str) -> bool:
    """False for strings holding lone surrogates (JSON "\\ud800" escapes decode to them; they are not text)."""
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _parse_line(obj: Any, where: str, lineno: int, seed: int) -> Request:
    if not isinstance(obj, dict):
        raise TinyserveError(t("engine.jsonl.not_object", where=where, type=type(obj).__name__))
    unknown = [k for k in obj if k not in FIELDS]
    if unknown:
        raise TinyserveError(t("engine.jsonl.unknown_field", where=where, field=unknown[0], fields=", ".join(FIELDS)))
    rid = obj.get("id", str(lineno))
    if not isinstance(rid, str) or not rid or not _unicode(rid):
        raise TinyserveError(t("engine.jsonl.id", where=where, value=_show(rid)))
    if ("prompt" in obj) == ("prompt_len" in obj):
        raise TinyserveError(t("engine.jsonl.one_prompt", where=where))
    if "prompt" in obj:
        text = obj["prompt"]
        if not isinstance(text, str):
            raise TinyserveError(t("engine.jsonl.prompt_type", where=where, type=type(text).__name__))
        if not text:
            raise TinyserveError(t("engine.jsonl.prompt_empty", where=where))
        if not _unicode(text):
            raise TinyserveError(t("engine.jsonl.surrogate", where=where))
        prompt = encode(text)
    else:
        n = obj["prompt_len"]
        if not _is_int(n) or not 1 <= n <= MAX_PROMPT_LEN:
            raise TinyserveError(t("engine.jsonl.prompt_len", where=where, top=MAX_PROMPT_LEN, value=_show(n)))
        prompt = _prompt(n, random.Random(seed * 1_000_003 + lineno))  # per line: editing one line moves no other
    if "max_new_tokens" not in obj:
        raise TinyserveError(t("engine.jsonl.no_max_new_tokens", where=where))
    m = obj["max_new_tokens"]
    if not _is_int(m) or m < 1:
        raise TinyserveError(t("engine.jsonl.max_new_tokens", where=where, value=_show(m)))
    a = obj.get("arrival_s", 0.0)
    try:
        ok = isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(float(a)) and a >= 0
    except OverflowError:  # an integer too big for a float
        ok = False
    if not ok:
        raise TinyserveError(t("engine.jsonl.arrival", where=where, value=_show(a)))
    eos = obj.get("ignore_eos", False)
    if not isinstance(eos, bool):
        raise TinyserveError(t("engine.jsonl.ignore_eos", where=where, value=_show(eos)))
    return Request(rid, prompt, m, float(a), ignore_eos=eos)


def load_jsonl(path: str | Path, seed: int = 0) -> list[Request]:
    """Requests from a JSONL file, one JSON object a line, sorted stably by arrival_s.

    Fields: id (str, default: the 1-based line number in the file), prompt (text, encoded with BOS) or
    prompt_len (int; synthetic text, seeded per line), max_new_tokens (int >= 1), arrival_s (default 0),
    ignore_eos (default false). Blank lines are skipped but still counted. Any problem raises TinyserveError
    naming the file, the line and the field. Prompts too long for the model are kept: the engine rejects
    them one by one while the rest run.
    """
    path = Path(path)
    if not path.is_file():
        raise TinyserveError(t("engine.jsonl.a_directory" if path.is_dir() else "engine.jsonl.no_file", path=path))
    try:
        data = path.read_bytes().decode("utf-8-sig")  # tolerate a BOM, nothing else
    except UnicodeDecodeError as e:
        line = e.object[:e.start].count(b"\n") + 1
        raise TinyserveError(t("engine.jsonl.not_utf8", path=path, line=line, byte=e.object[e.start])) from None
    except OSError as e:
        raise TinyserveError(t("engine.jsonl.cannot_read", path=path, reason=e.strerror)) from None
    reqs: list[Request] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(data.split("\n"), start=1):  # not splitlines(): JSON may hold U+2028 raw
        if not line.strip(" \t\r"):
            continue
        where = t("engine.jsonl.where", path=path, line=lineno)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TinyserveError(t("engine.jsonl.malformed", where=where, msg=e.msg, column=e.colno)) from None
        except (ValueError, RecursionError) as e:  # e.g. an integer with too many digits, absurd nesting
            raise TinyserveError(t("engine.jsonl.malformed_kind", where=where, kind=type(e).__name__)) from None
        req = _parse_line(obj, where, lineno, seed)
        if req.id in first_line:
            raise TinyserveError(t("engine.jsonl.duplicate", where=where, id=req.id, first=first_line[req.id]))
        first_line[req.id] = lineno
        reqs.append(req)
    if not reqs:
        raise TinyserveError(t("engine.jsonl.empty", path=path))
    return sorted(reqs, key=lambda r: r.arrival_s)


Workload = str | Path | list[Request]  # a name, a JSONL file or the requests themselves


def resolve_workload(workload: Workload, seed: int = 0, workload_knobs: dict | None = None
                     ) -> tuple[str, list[Request]]:
    """(name, fresh requests) from a workload name (with its knobs, e.g. n, rate), a JSONL path or a list of requests;
    seed drives a named workload and a JSONL file's synthetic (prompt_len) prompts."""
    knobs = dict(workload_knobs or {})
    if knobs and (isinstance(workload, (list, tuple, Path)) or str(workload).endswith(".jsonl")):
        what = t("engine.workload.a_list" if isinstance(workload, (list, tuple)) else "engine.workload.a_jsonl")
        raise TinyserveError(t("engine.knob.workload_knobs_named", what=what, knobs=", ".join(map(str, knobs))))
    if isinstance(workload, (list, tuple)):
        return "custom", [r.fresh() for r in workload]
    if isinstance(workload, Path) or str(workload).endswith(".jsonl"):
        return str(workload), load_jsonl(workload, seed=seed)
    return str(workload), get_workload(str(workload), seed=seed, **knobs)
