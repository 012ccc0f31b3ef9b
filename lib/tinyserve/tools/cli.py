"""The `tinyserve` command. Bad input: one line on stderr, exit 2, no traceback."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import threads
from ..errors import TinyserveError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        raise TinyserveError(f"{self.prog}: {message}")


def _positive_int(name: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {s!r}")
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {v}")
        return v
    return parse


def _nonneg_float(name: str):
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {s!r}")
        if not v >= 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number >= 0, got {s}")
        return v
    return parse


def _workload_knob(s: str) -> tuple[str, int | float]:
    key, eq, value = s.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"--workload-knob must be NAME=VALUE (e.g. rate=6), got {s!r}")
    for cast in (int, float):
        try:
            return key.strip(), cast(value)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"--workload-knob {key}: must be a number, got {value!r}")


def _waiting_steps(s: str) -> int | float:
    if s.strip().lower() in ("unbounded", "inf", "none"):
        return float("inf")
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-waiting-steps must be an integer >= 0 or 'unbounded', got {s!r}")
    if v < 0:
        raise argparse.ArgumentTypeError(f"--max-waiting-steps must be >= 0, got {v}")
    return v


def _positive_float(name: str):
    def parse(s: str) -> float:
        v = _nonneg_float(name)(s)
        if v == 0:
            raise argparse.ArgumentTypeError(f"{name} must be > 0, got {s}")
        return v
    return parse


def _run_parser(r: argparse.ArgumentParser) -> None:
    """`tinyserve run`'s options."""
    r.add_argument("--workload", required=True, help="a name from `tinyserve workloads`, or FILE.jsonl")
    r.add_argument("--policy", required=True, help="static | dynamic | continuous | chunked")
    r.add_argument("--batch-size", type=_positive_int("--batch-size"))
    r.add_argument("--timeout", type=_nonneg_float("--timeout"), help="seconds (static, dynamic)")
    r.add_argument("--chunk-size", type=_positive_int("--chunk-size"))
    r.add_argument("--max-batch-tokens", type=_positive_int("--max-batch-tokens"))
    order = r.add_mutually_exclusive_group()
    order.add_argument("--prefill-first", dest="prefill_first", action="store_true", default=None)
    order.add_argument("--decode-first", dest="prefill_first", action="store_false",
                       help="continuous: newcomers wait while decodes run (for --max-waiting-steps, default 20)")
    r.add_argument("--max-waiting-steps", type=_waiting_steps, metavar="N|unbounded",
                   help="continuous: decode steps a newcomer waits before its prefill is forced in (0 = prefill-first)")
    r.add_argument("--clock", default="modeled", help="modeled (default) | wall")
    r.add_argument("--hardware", help="cost-model preset for the modeled clock (see --help of calibrate)")
    r.add_argument("--kv-budget", type=_positive_int("--kv-budget"), help="bytes of KV slabs")
    r.add_argument("--max-model-len", type=_positive_int("--max-model-len"), help="positions per slab")
    r.add_argument("--slab", choices=("max_model_len", "longest"), default="max_model_len",
                   help="slab size: the server's maximum length (default) or, as a what-if, the run's longest request")
    r.add_argument("--kv-layout", default="slab", help="slab (default: one max-length slab per slot) | paged (blocks)")
    r.add_argument("--block-size", type=_positive_int("--block-size"), help="positions per KV block (paged; default 16)")
    r.add_argument("--seed", type=int, default=0, help="a named workload's seed, and a JSONL file's synthetic prompts'")
    r.add_argument("--workload-knob", type=_workload_knob, action="append", default=[], metavar="NAME=VALUE",
                   help="a named workload's parameter, e.g. n=100 or rate=6 (repeatable; see `tinyserve workloads`)")
    r.add_argument("--dtype", default="float32")
    r.add_argument("--device", default="auto")
    r.add_argument("--dry-run", action="store_true", help="known output lengths: simulate without the model")
    r.add_argument("--json", action="store_true")
    r.add_argument("--tokens", action="store_true", help="include generated tokens in --json")
    r.add_argument("--trace", type=Path, metavar="OUT.json", help="write the full trace")
    r.add_argument("--perfetto", type=Path, metavar="OUT.json", help="write a Chrome-trace/Perfetto file")
    r.add_argument("--progress", action="store_true", default=None, help="show progress even when not a terminal")


def _replay_parser(rp: argparse.ArgumentParser) -> None:
    """`tinyserve replay`'s options."""
    rp.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8000")
    rp.add_argument("--workload", required=True, help="a name from `tinyserve workloads`, or FILE.jsonl")
    rp.add_argument("--model", help="model name on the server (default: the only one it serves)")
    rp.add_argument("--api", default="auto", help="auto | transformers | vllm: how EOS is switched off")
    rp.add_argument("--max-model-len", type=_positive_int("--max-model-len"),
                    help="server context; longer requests are rejected before sending "
                         "(default: from /v1/models, else 4096 with --token-unit byte)")
    rp.add_argument("--max-concurrency", type=_positive_int("--max-concurrency"), default=256)
    rp.add_argument("--timeout", type=_positive_float("--timeout"), default=600.0, help="seconds per request")
    rp.add_argument("--idle-timeout", type=_positive_float("--idle-timeout"), default=60.0,
                    help="seconds without a byte from the server before a request fails")
    rp.add_argument("--warmup", type=int, default=1, help="unmeasured requests first (default 1)")
    rp.add_argument("--token-unit", default="byte", help="byte (our export: bytes are token ids) | event")
    rp.add_argument("--seed", type=int, default=0)
    rp.add_argument("--json", action="store_true")
    rp.add_argument("--tokens", action="store_true", help="include the streamed tokens in --json")
    rp.add_argument("--trace", type=Path, metavar="OUT.json", help="write the measured trace")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (docs/contract.md)."""
    p = _Parser(prog="tinyserve", description="A small but real LLM batching engine on a tiny GPT.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    g = sub.add_parser("generate", help="greedy continuation of one prompt")
    g.add_argument("prompt")
    g.add_argument("--max-new-tokens", type=_positive_int("--max-new-tokens"), default=64)
    g.add_argument("--dtype", default="float32")
    g.add_argument("--device", default="auto")
    g.add_argument("--json", action="store_true", help="print {prompt_tokens, tokens, text}")

    _run_parser(sub.add_parser("run", help="run a workload under a batching policy"))

    sub.add_parser("workloads", help="list workload names")
    e = sub.add_parser("export-hf", help="write a folder transformers (and `transformers serve`) loads, tokenizer too")
    e.add_argument("dir", type=Path)
    e.add_argument("--dtype", default="float32", help="float32 (default) | float64 (exact greedy parity)")
    _replay_parser(sub.add_parser("replay", help="replay a workload against an OpenAI-compatible server, measured at the client"))
    b = sub.add_parser("bench", help="side-by-side benchmark against transformers")
    b.add_argument("--json", action="store_true")
    b.add_argument("--repeats", type=_positive_int("--repeats"), default=3)
    b.add_argument("--quick", action="store_true", help="a small workload (smoke test)")
    b.add_argument("--device", default="auto", help="auto (cuda when present) | cpu | cuda")
    c = sub.add_parser("calibrate", help="fit the cpu cost-model preset to measured step times")
    c.add_argument("--out", type=Path, help="write the preset JSON here")
    c.add_argument("--quick", action="store_true")
    return p


def cmd_generate(a) -> None:
    from ..model.checkpoint import load_model
    from ..core.tokenizer import EOS, decode, encode

    if not a.prompt:
        raise TinyserveError("prompt: empty (give at least one character)")
    model = load_model(device=a.device, dtype=a.dtype)
    ids = encode(a.prompt)
    out = model.generate(ids, a.max_new_tokens, eos=EOS)
    text = decode(out)
    if a.json:
        print(json.dumps({"prompt_tokens": ids, "tokens": out, "text": text}, ensure_ascii=False))
    else:
        print(a.prompt + text)


def cmd_run(a) -> None:
    from ..engine import Engine

    for path in (a.trace, a.perfetto):
        if path is not None and path.is_dir():
            raise TinyserveError(f"output: {path} is a directory (give a file name, e.g. {path / 'trace.json'})")
        if path is not None and not path.parent.is_dir():
            raise TinyserveError(f"output: directory {path.parent} does not exist")
    if a.tokens and a.dry_run:
        raise TinyserveError("--tokens: a dry run computes no tokens (drop --dry-run or --tokens)")
    engine = Engine(device=a.device, dtype=a.dtype)
    progress = a.progress if a.progress is not None else (sys.stderr.isatty() and not a.json)
    workload = Path(a.workload) if a.workload.endswith(".jsonl") else a.workload
    tr = engine.run(workload, a.policy, batch_size=a.batch_size, timeout=a.timeout, chunk_size=a.chunk_size,
                    max_batch_tokens=a.max_batch_tokens, prefill_first=a.prefill_first,
                    max_waiting_steps=a.max_waiting_steps, clock=a.clock,
                    hardware=a.hardware, kv_budget=a.kv_budget, max_model_len=a.max_model_len, slab=a.slab,
                    kv_layout=a.kv_layout, block_size=a.block_size, dry_run=a.dry_run, seed=a.seed, workload_knobs=dict(a.workload_knob), progress=progress)
    rejected = [r for r in tr.requests if r.status == "rejected"]
    for r in rejected:
        print(f"tinyserve: rejected request {r.id}: {r.finish_reason}", file=sys.stderr)
    if rejected and len(rejected) == len(tr.requests):
        raise TinyserveError("workload: every request was rejected (see the lines above)")
    try:
        if a.trace:
            tr.save(a.trace)
        if a.perfetto:
            tr.save_perfetto(a.perfetto)
    except OSError as e:
        raise TinyserveError(f"output: cannot write {e.filename} ({e.strerror})") from None
    if a.json:
        print(json.dumps(tr.summary(tokens=a.tokens)))
    else:
        from ..trace.report import format_summary
        print(format_summary(tr))


def cmd_workloads(a) -> None:
    from ..core.workloads import WORKLOADS, list_workloads

    for name, desc in list_workloads():
        print(f"{name:28s} {desc}")
        knobs = ", ".join(f"{k}={d}" for k, (d, *_) in WORKLOADS[name][2].items())
        print(f"{'':28s}   knobs (--workload-knob NAME=VALUE): {knobs}")
    print(f"{'FILE.jsonl':28s} one request a line: see docs/workloads.md")


def cmd_export_hf(a) -> None:
    from .hf import export_hf
    from ..model.checkpoint import load_model

    out = export_hf(load_model(device="cpu", dtype=a.dtype), a.dir)
    print(f"wrote {out} (AutoModelForCausalLM/AutoTokenizer.from_pretrained, or `transformers serve {out}`)")


def cmd_replay(a) -> None:
    from .replay import format_replay, replay

    if a.trace is not None and (a.trace.is_dir() or not a.trace.parent.is_dir()):
        raise TinyserveError(f"output: {a.trace} is a directory" if a.trace.is_dir()
                             else f"output: directory {a.trace.parent} does not exist")
    interrupted: list = []
    tr = replay(a.url, a.workload, a.model, api=a.api, max_model_len=a.max_model_len,
                max_concurrency=a.max_concurrency, timeout_s=a.timeout, idle_timeout_s=a.idle_timeout,
                warmup=a.warmup, token_unit=a.token_unit, seed=a.seed, on_interrupt=interrupted)
    for r in tr.requests:
        if r.status in ("rejected", "aborted"):
            print(f"tinyserve: {r.status} request {r.id}: {r.finish_reason}", file=sys.stderr)
    if tr.requests and all(r.status == "rejected" for r in tr.requests):
        raise TinyserveError("workload: every request was rejected (see the lines above)")
    try:
        if a.trace:
            tr.save(a.trace)  # written even after Ctrl-C: what was measured is kept
    except OSError as e:
        raise TinyserveError(f"output: cannot write {e.filename} ({e.strerror})") from None
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
        raise TinyserveError("bench: needs transformers — pip install 'transformers==5.24.0' psutil")
    from .bench import main as bench_main

    bench_main(a)


def cmd_calibrate(a) -> None:
    from .calibrate import run_calibration

    preset = run_calibration(quick=a.quick, out=a.out)
    n = preset.details["threads"]
    print(f"tinyserve calibrate: fitted with {n} torch thread{'s' if n != 1 else ''} (held still while timing; "
          "the shipped cpu-tiny preset was fitted with 1: OMP_NUM_THREADS=1 tinyserve calibrate)", file=sys.stderr)
    print(json.dumps(preset.to_dict() if hasattr(preset, "to_dict") else preset.__dict__, indent=2, default=str))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tinyserve` console script."""
    try:
        threads.setting()  # a bad TINYSERVE_THREADS: one line, before anything runs
        a = build_parser().parse_args(argv)
        {"generate": cmd_generate, "run": cmd_run, "workloads": cmd_workloads, "export-hf": cmd_export_hf,
         "replay": cmd_replay, "bench": cmd_bench, "calibrate": cmd_calibrate}[a.cmd](a)
    except TinyserveError as e:
        msg = str(e)
        print(msg if msg.startswith("tinyserve") else f"tinyserve: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tinyserve: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
