"""The `tinyserve` command. Bad input: one line on stderr, exit 2, no traceback.

It speaks the user's locale (speak.py: TINYSERVE_LANG, else LANGUAGE, LC_ALL, LC_MESSAGES, LANG), argparse's
own messages and --help included. `--json` prints data, the same in every language (docs/contract.md).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from ..errors import TinyserveError
from ..lang import language, set_language, t
from ..core.config import policy_classes, threads_setting, users
from ..core.scheduling.registry import DECODE_POLICIES
from .speak import argparse_words, users_language


# deploy.config.DEFAULT_LINK, named in --help; not imported from there, which would load numpy for every command
# (tests/tools/test_cli_deployments.py checks they agree)
DEFAULT_LINK = "nvlink-h200"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        # options are spelled in full: a new option then never turns an abbreviation someone relied on ambiguous
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, not argparse's usage block
        raise TinyserveError(t("cli.parser_error", prog=self.prog, message=message))


def _positive_int(name: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(t("cli.arg.integer", name=name, value=s))
        if v < 1:
            raise argparse.ArgumentTypeError(t("cli.arg.at_least_one", name=name, value=v))
        return v
    return parse


def _nonneg_float(name: str):
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(t("cli.arg.number", name=name, value=s))
        if not v >= 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(t("cli.arg.finite", name=name, value=s))
        return v
    return parse


def _workload_knob(s: str) -> tuple[str, int | float]:
    key, eq, value = s.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(t("cli.arg.knob_form", value=s))
    for cast in (int, float):
        try:
            return key.strip(), cast(value)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(t("cli.arg.knob_number", knob=key, value=value))


def _waiting_steps(s: str) -> int | float:
    if s.strip().lower() in ("unbounded", "inf", "none"):
        return float("inf")
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(t("cli.arg.waiting", value=s))
    if v < 0:
        raise argparse.ArgumentTypeError(t("cli.arg.waiting_negative", value=v))
    return v


def _positive_float(name: str):
    def parse(s: str) -> float:
        v = _nonneg_float(name)(s)
        if v == 0:
            raise argparse.ArgumentTypeError(t("cli.arg.positive", name=name, value=s))
        return v
    return parse


def _number(name: str):
    def parse(s: str) -> float:
        try:
            return float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(t("cli.arg.number", name=name, value=s))
    return parse


def _whole(name: str):
    def parse(s: str) -> int:
        try:
            return int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(t("cli.arg.integer", name=name, value=s))
    return parse


def _chunk_or_none(s: str) -> int | str:
    """--prefill-chunk-size: a whole number (DeploymentConfig checks >= 1) or `none` (whole prompts)."""
    from ..deploy.config import WHOLE

    return s if s == WHOLE else _whole("--prefill-chunk-size")(s)


def _role_options(p: argparse.ArgumentParser) -> None:
    """A split's per-role knobs (DeploymentConfig): each role's chunk, batch size and GPUs."""
    p.add_argument("--prefill-chunk-size", type=_chunk_or_none, metavar="N|none", help=t("cli.help.prefill_chunk"))
    p.add_argument("--decode-batch-size", type=_whole("--decode-batch-size"), metavar="N",
                   help=t("cli.help.decode_batch"))
    p.add_argument("--prefill-gpus", type=_whole("--prefill-gpus"), metavar="N", help=t("cli.help.prefill_gpus"))
    p.add_argument("--decode-gpus", type=_whole("--decode-gpus"), metavar="N", help=t("cli.help.decode_gpus"))


ROLE_OPTIONS = (("--prefill-chunk-size", "prefill_chunk_size"), ("--decode-batch-size", "decode_batch_size"),
                ("--prefill-gpus", "prefill_gpus"), ("--decode-gpus", "decode_gpus"))


def _rates(s: str) -> list[float]:
    out = []
    for item in s.split(","):
        try:
            v = float(item)
        except ValueError:
            v = None
        if v is None or not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(t("cli.arg.rates", value=item.strip()))
        out.append(v)
    return out


def _seeds(s: str) -> list[int]:
    """--seeds 0,1,2,3,4: whole numbers, each once."""
    try:
        out = [int(item) for item in s.split(",")]
    except ValueError:
        out = []
    if not out or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(t("cli.arg.seeds", value=s))
    return out


def _slo_options(p: argparse.ArgumentParser, required: bool) -> None:
    """--slo-ttft-ms and --slo-tpot-ms (checked by trace.slo.check_targets: finite and > 0)."""
    p.add_argument("--slo-ttft-ms", type=_number("--slo-ttft-ms"), required=required, metavar="MS",
                   help=t("cli.help.slo_ttft_ms"))
    p.add_argument("--slo-tpot-ms", type=_number("--slo-tpot-ms"), required=required, metavar="MS",
                   help=t("cli.help.slo_tpot_ms"))


# the run knobs `goodput` has no option for (a sweep of deployments under the modeled clock)
GOODPUT_SKIPS = ("timeout", "prefill_first", "max_waiting_steps", "clock", "slab")


def _knob_options(p: argparse.ArgumentParser, skip: tuple[str, ...] = (), **defaults) -> None:
    """The run knobs' options, each declared here once (named as its RunConfig field: --batch-size is batch_size),
    in --help's order, but those in skip; defaults: a knob's default where a command has its own."""
    options = {
        "batch_size": dict(type=_positive_int("--batch-size")),
        "timeout": dict(type=_nonneg_float("--timeout"), help=t("cli.help.timeout", policies=users("timeout"))),
        "chunk_size": dict(type=_positive_int("--chunk-size")),
        "max_batch_tokens": dict(type=_positive_int("--max-batch-tokens")),
        "prefill_first": None,  # two options, one knob: below
        "max_waiting_steps": dict(type=_waiting_steps, metavar="N|unbounded", help=t("cli.help.max_waiting_steps")),
        "clock": dict(default="modeled", help=t("cli.help.clock")),
        "hardware": dict(help=t("cli.help.hardware")),
        "gpus": dict(type=_positive_int("--gpus"), metavar="N", help=t("cli.help.gpus")),
        "kv_budget": dict(type=_positive_int("--kv-budget"), help=t("cli.help.kv_budget")),
        "max_model_len": dict(type=_positive_int("--max-model-len"), help=t("cli.help.max_model_len")),
        "slab": dict(choices=("max_model_len", "longest"), default="max_model_len", help=t("cli.help.slab")),
        "kv_layout": dict(default="slab", help=t("cli.help.kv_layout")),
        "block_size": dict(type=_positive_int("--block-size"), help=t("cli.help.block_size")),
        "seed": dict(type=int, help=t("cli.help.seed")),
    }
    for name, kwargs in options.items():
        if name in skip:
            continue
        if name == "prefill_first":
            order = p.add_mutually_exclusive_group()
            order.add_argument("--prefill-first", dest=name, action="store_true", default=None)
            order.add_argument("--decode-first", dest=name, action="store_false", help=t("cli.help.decode_first"))
            continue
        if name in defaults:
            kwargs["default"] = defaults[name]
        p.add_argument("--" + name.replace("_", "-"), **kwargs)


def _run_parser(r: argparse.ArgumentParser) -> None:
    """`tinyserve run`'s options."""
    r.add_argument("--workload", required=True, help=t("cli.help.workload"))
    r.add_argument("--policy", required=True, help=" | ".join(policy_classes()))
    _knob_options(r, seed=0)
    r.add_argument("--workload-knob", type=_workload_knob, action="append", default=[], metavar="NAME=VALUE",
                   help=t("cli.help.workload_knob"))
    r.add_argument("--dtype", default="float32")
    r.add_argument("--device", default="auto")
    r.add_argument("--dry-run", action="store_true", help=t("cli.help.dry_run"))
    r.add_argument("--json", action="store_true")
    r.add_argument("--tokens", action="store_true", help=t("cli.help.tokens"))
    r.add_argument("--trace", type=Path, metavar="OUT.json", help=t("cli.help.trace"))
    r.add_argument("--perfetto", type=Path, metavar="OUT.json", help=t("cli.help.perfetto"))
    r.add_argument("--progress", action="store_true", default=None, help=t("cli.help.progress"))
    # deployments (deploy/): the counts pass through as given (None when absent) so DeploymentConfig's checks speak
    r.add_argument("--deployment", metavar="colocated|disaggregated", help=t("cli.help.deployment"))
    r.add_argument("--replicas", type=_whole("--replicas"), metavar="N", help=t("cli.help.replicas"))
    r.add_argument("--prefill-instances", type=_whole("--prefill-instances"), metavar="P",
                   help=t("cli.help.prefill_instances"))
    r.add_argument("--decode-instances", type=_whole("--decode-instances"), metavar="D",
                   help=t("cli.help.decode_instances"))
    r.add_argument("--link", metavar="NAME|FILE.json", help=t("cli.help.link", default=DEFAULT_LINK))
    r.add_argument("--decode-kv-layout", metavar="slab|paged", help=t("cli.help.decode_kv_layout"))
    _role_options(r)
    _slo_options(r, required=False)
    r.add_argument("--ttft-at", metavar="prefill|decode", help=t("cli.help.ttft_at"))


def _goodput_parser(g: argparse.ArgumentParser) -> None:
    """`tinyserve goodput`'s options: the sweep (analysis/goodput.py) and the run knobs every instance takes."""
    g.add_argument("--workload", required=True, help=t("cli.help.goodput_workload"))
    g.add_argument("--rates", required=True, type=_rates, metavar="R1,R2,...", help=t("cli.help.rates"))
    _slo_options(g, required=True)
    g.add_argument("--fair", type=_positive_int("--fair"), metavar="N", help=t("cli.help.fair"))
    g.add_argument("--deployment", action="append", metavar="SPEC",
                   help=t("cli.help.goodput_deployment", default=DEFAULT_LINK))
    g.add_argument("--policy", default="chunked",
                   help=t("cli.help.goodput_policy", policies=t("engine.and").join(DECODE_POLICIES)))
    _knob_options(g, skip=GOODPUT_SKIPS, seed=None)
    g.add_argument("--seeds", type=_seeds, metavar="S1,S2,...", help=t("cli.help.seeds"))
    g.add_argument("--workload-knob", type=_workload_knob, action="append", default=[], metavar="NAME=VALUE",
                   help=t("cli.help.goodput_knob"))
    dry = g.add_mutually_exclusive_group()
    dry.add_argument("--dry-run", dest="dry_run", action="store_true", default=True,
                     help=t("cli.help.goodput_dry_run"))
    dry.add_argument("--no-dry-run", dest="dry_run", action="store_false", help=t("cli.help.goodput_real"))
    g.add_argument("--ttft-at", default="prefill", metavar="prefill|decode", help=t("cli.help.ttft_at"))
    _role_options(g)
    g.add_argument("--json", action="store_true", help=t("cli.help.goodput_json"))


def _replay_parser(rp: argparse.ArgumentParser) -> None:
    """`tinyserve replay`'s options."""
    rp.add_argument("--url", required=True, help=t("cli.help.url"))
    rp.add_argument("--workload", required=True, help=t("cli.help.workload"))
    rp.add_argument("--model", help=t("cli.help.model"))
    rp.add_argument("--api", default="auto", help=t("cli.help.api"))
    rp.add_argument("--max-model-len", type=_positive_int("--max-model-len"), help=t("cli.help.server_len"))
    rp.add_argument("--max-concurrency", type=_positive_int("--max-concurrency"), default=256)
    rp.add_argument("--timeout", type=_positive_float("--timeout"), default=600.0, help=t("cli.help.request_timeout"))
    rp.add_argument("--idle-timeout", type=_positive_float("--idle-timeout"), default=60.0,
                    help=t("cli.help.idle_timeout"))
    rp.add_argument("--warmup", type=int, default=1, help=t("cli.help.warmup"))
    rp.add_argument("--token-unit", default="byte", help=t("cli.help.token_unit"))
    rp.add_argument("--seed", type=int, default=0)
    rp.add_argument("--json", action="store_true")
    rp.add_argument("--tokens", action="store_true", help=t("cli.help.stream_tokens"))
    rp.add_argument("--trace", type=Path, metavar="OUT.json", help=t("cli.help.measured_trace"))


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (docs/contract.md), its help in the current language."""
    p = _Parser(prog="tinyserve", description=t("cli.description"))
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    g = sub.add_parser("generate", help=t("cli.help.generate"))
    g.add_argument("prompt")
    g.add_argument("--max-new-tokens", type=_positive_int("--max-new-tokens"), default=64)
    g.add_argument("--dtype", default="float32")
    g.add_argument("--device", default="auto")
    g.add_argument("--json", action="store_true", help=t("cli.help.generate_json", keys="{prompt_tokens, tokens, text}"))

    _run_parser(sub.add_parser("run", help=t("cli.help.run")))
    _goodput_parser(sub.add_parser("goodput", help=t("cli.help.goodput")))

    sub.add_parser("workloads", help=t("cli.help.workloads"))
    e = sub.add_parser("export-hf", help=t("cli.help.export_hf"))
    e.add_argument("dir", type=Path)
    e.add_argument("--dtype", default="float32", help=t("cli.help.export_dtype"))
    _replay_parser(sub.add_parser("replay", help=t("cli.help.replay")))
    b = sub.add_parser("bench", help=t("cli.help.bench"))
    b.add_argument("--json", action="store_true")
    b.add_argument("--repeats", type=_positive_int("--repeats"), default=3)
    b.add_argument("--quick", action="store_true", help=t("cli.help.quick"))
    b.add_argument("--device", default="auto", help=t("cli.help.bench_device"))
    c = sub.add_parser("calibrate", help=t("cli.help.calibrate"))
    c.add_argument("--out", type=Path, help=t("cli.help.calibrate_out"))
    c.add_argument("--quick", action="store_true")
    return p


def cmd_generate(a) -> None:
    from ..core.config import GPTConfig, check_device, check_load_dtype
    from ..core.request import check_length
    from ..core.tokenizer import EOS, decode, encode

    if not a.prompt:
        raise TinyserveError(t("cli.prompt_empty"))
    # what can be wrong is said before torch and the weights load (2 s), in the order load_model would say it
    check_device(a.device)
    check_load_dtype(a.dtype)
    ids = encode(a.prompt)
    check_length(len(ids), a.max_new_tokens, GPTConfig().n_positions)  # the shipped model's context

    from ..model.runner import load_model

    model = load_model(device=a.device, dtype=a.dtype)
    out = model.generate(ids, a.max_new_tokens, eos=EOS)
    text = decode(out)
    if a.json:
        print(json.dumps({"prompt_tokens": ids, "tokens": out, "text": text}, ensure_ascii=False))
    else:
        print(a.prompt + text)


@contextlib.contextmanager
def _english_data(json_out: bool):
    """Within: English when the output is --json (a run records words as data: a rejected request's
    finish_reason, the slab rule; the contract's values never change with the language)."""
    lang = language()
    if not json_out or lang == "en":
        yield
        return
    set_language("en", figures=False)
    try:
        yield
    finally:
        set_language(lang, figures=False)


def _set_up(json_out: bool, start):
    """start() (a run's set-up) under _english_data; a TinyserveError is raised again in the user's language:
    a set-up is deterministic and has run nothing, so a second call fails the same way."""
    try:
        with _english_data(json_out):
            return start()
    except TinyserveError as english:
        if not json_out or language() == "en":
            raise
        start()
        raise english from None  # start() did not fail again in the user's language: the English message then


def _run_config(a):
    """The run's RunConfig from the options: each RunConfig field that `run` has an option of the same name for
    (--batch-size is batch_size, ...), and its --workload-knob pairs; checked there, as the API's are."""
    from ..core.config import RUN_FIELDS, RunConfig

    knobs = {f: getattr(a, f) for f in RUN_FIELDS if f not in ("policy", "policy_object", "workload_knobs")}
    return RunConfig.of(a.policy, None, {**knobs, "workload_knobs": dict(a.workload_knob)})


def _slo_targets(a) -> tuple[float, float] | None:
    """The two SLO targets, both or neither, checked before anything runs."""
    from ..trace.slo import check_targets

    if (a.slo_ttft_ms is None) != (a.slo_tpot_ms is None):
        given, missing = (("--slo-ttft-ms", "--slo-tpot-ms") if a.slo_ttft_ms is not None
                          else ("--slo-tpot-ms", "--slo-ttft-ms"))
        raise TinyserveError(t("cli.slo.both", given=given, missing=missing))
    if a.slo_ttft_ms is None:
        return None
    check_targets(a.slo_ttft_ms, a.slo_tpot_ms)
    return a.slo_ttft_ms, a.slo_tpot_ms


def _finish_output(a, tr, doc: dict | None, text: str | None) -> None:
    """Rejections on stderr (all rejected: exit 2), the files asked for, then the JSON or the text."""
    rejected = [r for r in tr.requests if r.status == "rejected"]
    for r in rejected:
        print(t("cli.rejected", id=r.id, reason=r.finish_reason), file=sys.stderr)
    if rejected and len(rejected) == len(tr.requests):
        raise TinyserveError(t("cli.all_rejected"))
    try:
        if a.trace:
            tr.save(a.trace)
        if a.perfetto:
            tr.save_perfetto(a.perfetto)
    except OSError as e:
        raise TinyserveError(t("cli.output.cannot_write", file=e.filename, reason=e.strerror)) from None
    print(json.dumps(doc) if a.json else text)


def cmd_run(a) -> None:
    from ..engine import Engine
    from ..trace.slo import check_ttft_at

    for path in (a.trace, a.perfetto):
        if path is not None and path.is_dir():
            raise TinyserveError(t("cli.output.is_dir_hint", path=path, example=path / "trace.json"))
        if path is not None and not path.parent.is_dir():
            raise TinyserveError(t("cli.output.no_dir", path=path.parent))
    if a.tokens and a.dry_run:
        raise TinyserveError(t("cli.tokens_dry_run"))
    targets = _slo_targets(a)
    if a.ttft_at is not None:
        check_ttft_at(a.ttft_at)
    if a.deployment is None:
        for option, v in (("--replicas", a.replicas), ("--prefill-instances", a.prefill_instances),
                          ("--decode-instances", a.decode_instances), ("--link", a.link),
                          ("--decode-kv-layout", a.decode_kv_layout), ("--ttft-at", a.ttft_at),
                          *((o, getattr(a, f)) for o, f in ROLE_OPTIONS)):
            if v is not None:
                raise TinyserveError(t("cli.deploy.needs", option=option))
    engine = Engine(device=a.device, dtype=a.dtype)
    workload = Path(a.workload) if a.workload.endswith(".jsonl") else a.workload
    if a.deployment is not None:
        _run_deployment(a, engine, workload, targets)
        return
    progress = a.progress if a.progress is not None else (sys.stderr.isatty() and not a.json)
    run = _set_up(a.json, lambda: engine.start(workload, config=_run_config(a)))
    with _english_data(a.json):
        tr = run.finish(progress)
    doc = text = slo = None
    if targets is not None:
        from ..trace.slo import attainment

        slo = attainment(tr.requests, *targets)
    if a.json:
        doc = {**tr.summary(tokens=a.tokens), **({"slo": slo} if slo else {})}
    else:
        from ..trace.report import format_summary
        from .deploy_report import slo_line

        text = format_summary(tr) + ("\n" + slo_line(slo) if slo else "")
    _finish_output(a, tr, doc, text)


def _run_deployment(a, engine, workload, targets: tuple[float, float] | None) -> None:
    """`tinyserve run --deployment ...`: the deployment's record, as JSON or text."""
    from ..deploy import DeploymentConfig, start_deployment

    def start():
        dc = DeploymentConfig(a.deployment, replicas=a.replicas, prefill_instances=a.prefill_instances,
                              decode_instances=a.decode_instances, link=a.link,
                              decode_kv_layout=a.decode_kv_layout, **{f: getattr(a, f) for _, f in ROLE_OPTIONS})
        rc = _run_config(a)
        dc.check_run(rc)
        return start_deployment(engine, workload, rc, dc)

    deployment = _set_up(a.json, start)
    with _english_data(a.json):
        dt = deployment.finish()
    ttft_at = a.ttft_at or "prefill"
    slo = dt.slo(*targets, ttft_at) if targets is not None else None
    doc = text = None
    if a.json:
        doc = {**dt.summary(tokens=a.tokens, ttft_at=ttft_at), **({"slo": slo} if slo else {})}
    else:
        from .deploy_report import format_deployment

        text = format_deployment(dt, slo, ttft_at)
    _finish_output(a, dt, doc, text)


def cmd_goodput(a) -> None:
    from ..analysis.goodput import goodput_per_gpu, over_seeds, sweep

    from ..analysis.fair import best_of, candidates

    if a.seeds is not None and a.seed is not None:
        raise TinyserveError(t("cli.goodput.seeds_and_seed"))
    if (a.fair is None) == (a.deployment is None):  # one or the other: a fair search makes its own deployments
        raise TinyserveError(t("cli.goodput.fair_or_deployment"))
    if a.fair is not None and a.fair not in (2, 3, 4):
        raise TinyserveError(t("cli.goodput.fair_gpus", value=a.fair))
    if a.fair is not None and (a.chunk_size is not None or any(getattr(a, f) is not None for _, f in ROLE_OPTIONS)):
        raise TinyserveError(t("cli.goodput.fair_knobs"))  # the search sets each side's chunk and batch itself
    deployments = a.deployment if a.fair is None else [x for side in candidates(a.fair).values() for x in side]
    seeds = a.seeds or [0 if a.seed is None else a.seed]
    runs = {}
    for seed in seeds:
        rows = sweep(deployments, a.workload, a.rates, a.slo_ttft_ms, a.slo_tpot_ms, policy=a.policy,
                     workload_knobs=dict(a.workload_knob), batch_size=a.batch_size, chunk_size=a.chunk_size,
                     max_batch_tokens=a.max_batch_tokens, hardware=a.hardware, gpus=a.gpus, kv_budget=a.kv_budget,
                     max_model_len=a.max_model_len, kv_layout=a.kv_layout, block_size=a.block_size, seed=seed,
                     dry_run=a.dry_run, ttft_at=a.ttft_at, roles={f: getattr(a, f) for _, f in ROLE_OPTIONS})
        runs[seed] = (rows, goodput_per_gpu(rows))
    rows, best = runs[seeds[0]]
    if a.json:
        doc = {"workload": a.workload, "workload_knobs": dict(a.workload_knob), "policy": a.policy,
               "hardware": rows[0]["hardware"], "dry_run": a.dry_run,
               "slo": {"ttft_ms": a.slo_ttft_ms, "tpot_ms": a.slo_tpot_ms, "goal": best[0]["goal"],
                       "ttft_at": a.ttft_at},
               "rates": sorted({r["rate"] for r in rows})}
        if a.seeds is None:
            doc.update(rows=rows, goodput=best)
        else:  # a sweep per seed, and per deployment the median and the range
            doc.update(seeds=seeds, runs=[{"seed": s, "rows": r, "goodput": b} for s, (r, b) in runs.items()],
                       goodput=over_seeds({s: b for s, (_, b) in runs.items()}))
        if a.fair is not None:
            doc["fair"] = {"gpus": a.fair, "best": best_of(doc["goodput"])}
        print(json.dumps(doc))
    else:
        from .deploy_report import format_goodput, format_seeds, goodput_words

        print("\n\n".join((t("cli.goodput.seed", seed=seed) + "\n" if a.seeds is not None else "")
                           + format_goodput(r, b, a.workload, a.policy, a.slo_ttft_ms, a.slo_tpot_ms)
                           for seed, (r, b) in runs.items()))
        if a.seeds is not None:
            print("\n" + format_seeds(over_seeds({s: b for s, (_, b) in runs.items()}), seeds))
        if a.fair is not None:
            goodputs = over_seeds({s: b for s, (_, b) in runs.items()}) if a.seeds is not None else best
            print("\n" + "\n".join(t("cli.goodput.fair_best", gpus=a.fair, side=t(f"cli.goodput.side.{side}"),
                                     deployment=g["deployment"], value=goodput_words(g.get("median", g)))
                                   for side, g in best_of(goodputs).items()))


def cmd_workloads(a) -> None:
    from ..core.workloads import WORKLOADS, list_workloads

    for name, desc in list_workloads():
        print(f"{name:28s} {desc}")
        knobs = ", ".join(f"{k}={d}" for k, (d, *_) in WORKLOADS[name][2].items())
        print(f"{'':28s}   " + t("cli.workloads.knobs", knobs=knobs))
    print(f"{'FILE.jsonl':28s} " + t("cli.workloads.file"))


def cmd_export_hf(a) -> None:
    from .hf import export_hf
    from ..model.runner import load_model

    out = export_hf(load_model(device="cpu", dtype=a.dtype), a.dir)
    print(t("cli.export.wrote", out=out))


def cmd_replay(a) -> None:
    from .replay import format_replay, replay

    if a.trace is not None and (a.trace.is_dir() or not a.trace.parent.is_dir()):
        raise TinyserveError(t("cli.output.is_dir", path=a.trace) if a.trace.is_dir()
                             else t("cli.output.no_dir", path=a.trace.parent))
    interrupted: list = []
    tr = replay(a.url, a.workload, a.model, api=a.api, max_model_len=a.max_model_len,
                max_concurrency=a.max_concurrency, timeout_s=a.timeout, idle_timeout_s=a.idle_timeout,
                warmup=a.warmup, token_unit=a.token_unit, seed=a.seed, on_interrupt=interrupted)
    for r in tr.requests:
        if r.status in ("rejected", "aborted"):
            print(t(f"cli.{r.status}", id=r.id, reason=r.finish_reason), file=sys.stderr)
    if tr.requests and all(r.status == "rejected" for r in tr.requests):
        raise TinyserveError(t("cli.all_rejected"))
    try:
        if a.trace:
            tr.save(a.trace)  # written even after Ctrl-C: what was measured is kept
    except OSError as e:
        raise TinyserveError(t("cli.output.cannot_write", file=e.filename, reason=e.strerror)) from None
    if a.json:
        print(json.dumps({**tr.summary(tokens=a.tokens), "measured_on": tr.knobs["url"]}))
    else:
        print(format_replay(tr))
    if interrupted:
        raise KeyboardInterrupt


def cmd_bench(a) -> None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise TinyserveError(t("cli.bench.needs"))
    from .bench import main as bench_main

    bench_main(a)


def cmd_calibrate(a) -> None:
    from .calibrate import run_calibration

    preset = run_calibration(quick=a.quick, out=a.out)
    n = preset.details["threads"]
    print(t("cli.calibrate.fitted", n=n, threads=t("cli.calibrate.thread" if n == 1 else "cli.calibrate.threads")),
          file=sys.stderr)
    print(json.dumps(preset.to_dict() if hasattr(preset, "to_dict") else preset.__dict__, indent=2, default=str))


COMMANDS = {"generate": cmd_generate, "run": cmd_run, "goodput": cmd_goodput, "workloads": cmd_workloads,
            "export-hf": cmd_export_hf, "replay": cmd_replay, "bench": cmd_bench, "calibrate": cmd_calibrate}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tinyserve` console script (in the user's language; the caller's is put back after)."""
    before = language()
    try:
        set_language(users_language(), figures=False)  # before parsing: argparse's errors and --help speak it too
        threads_setting()  # a bad TINYSERVE_THREADS: one line, before anything runs
        with argparse_words():
            a = build_parser().parse_args(argv)
        COMMANDS[a.cmd](a)
    except TinyserveError as e:
        msg = str(e)
        print(msg if msg.startswith("tinyserve") else t("cli.error", message=msg), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(t("cli.interrupted"), file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        if language() != before:
            set_language(before, figures=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
