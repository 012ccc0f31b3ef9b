"""The same workload on a real server (`transformers serve`, continuous batching on CPU) and on our engine.

    python benchmarks/replay.py                                   # chapter-7.2-longtail, 32 requests (~2 min)
    python benchmarks/replay.py --n 64 --rate 8 --threads 2       # a quiet machine: more load, both on 2 threads
    python benchmarks/replay.py --url http://gpu-box:8000 --token-unit event --no-engine   # vLLM (README)

Steps: export the shipped model (float64 by default, so greedy tokens cannot differ by rounding) with its
tokenizer; start `transformers serve` on it; replay the workload with `tinyserve.tools.replay` (requests sent at
their arrival times, one warm-up request first); stop the server; run the same requests through our engine
(continuous batching, wall clock); print tokens identical per request, TTFT/ITL/TPOT/E2E percentiles and
throughput side by side, as a Markdown table (and --json OUT for everything).

Both sides run with the same number of torch threads (--threads), one at a time: the server is stopped before
our engine starts, so they never share the cores. Latencies are measured differently on purpose: the server's
at the client over HTTP (what a user sees), ours inside the engine (what the scheduler does); see README.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from tinyserve.core.workloads import get_workload
from tinyserve.engine import Engine
from tinyserve.model.runner import load_model
from tinyserve.tools.hf import export_hf, serve_command
from tinyserve.tools.replay import replay, wait_ready
from tinyserve.trace.record import Trace


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_server(args: argparse.Namespace, requests: list, folder: Path) -> Trace:
    """Start `transformers serve` on folder, replay the requests, stop it (always)."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_VERBOSITY": "error"}
    log = open(folder.parent / "serve.log", "w")
    cmd = serve_command(folder, port, num_blocks=args.num_blocks, max_batch_tokens=args.max_batch_tokens)
    print("server:", " ".join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, timeout_s=180, proc=proc)
        return replay(url, requests, max_model_len=4096, warmup=args.warmup, timeout_s=args.timeout)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def row(name: str, tr: Trace) -> dict:
    """The numbers of one side."""
    m = tr.metrics()
    out = {"system": name, "finished": m["num_finished"], "output_tokens": m["output_tokens"],
           "duration_s": m["duration_s"], "output_throughput": m["output_throughput"]}
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2el_ms"):
        out.update({f"{key}_{q}": m[key][q] for q in ("p50", "p90", "p99")})
    return out


def markdown(rows: list[dict]) -> str:
    cols = ["output_throughput", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p90",
            "itl_ms_p99", "tpot_ms_p50", "e2el_ms_p50", "e2el_ms_p99", "duration_s"]
    head = "| system | " + " | ".join(c.replace("output_throughput", "tok/s").replace("_ms_", " ms ") for c in cols) + " |"
    lines = [head, "| --- |" + " ---: |" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:,.1f}" if r[c] is not None and c != "duration_s" else
                 (f"{r[c]:.2f}" if r[c] is not None else "–") for c in cols]
        lines.append(f"| {r['system']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="chapter-7.2-longtail")
    p.add_argument("--n", type=int, default=32, help="requests (chapter-7.2-longtail)")
    p.add_argument("--rate", type=float, default=4.0, help="arrivals per second (chapter-7.2-longtail)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="float64", help="float64 (identical greedy tokens) | float32 (faster)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for the server and for our engine")
    p.add_argument("--batch-size", type=int, default=32, help="our engine's slots (continuous)")
    p.add_argument("--num-blocks", type=int, default=256, help="server KV blocks of 32 tokens (--cb-num-blocks)")
    p.add_argument("--max-batch-tokens", type=int, default=512, help="server tokens per step (--cb-max-batch-tokens)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--url", help="replay against this running server instead of starting transformers serve")
    p.add_argument("--token-unit", default="byte", help="byte (our export) | event (any other model)")
    p.add_argument("--no-engine", action="store_true", help="only the server side (e.g. vLLM on a GPU box)")
    p.add_argument("--json", type=Path, help="write both traces' summaries and the comparison here")
    args = p.parse_args()

    knobs = {"n": args.n, "rate": args.rate} if args.workload == "chapter-7.2-longtail" else {}
    requests = get_workload(args.workload, seed=args.seed, **knobs)
    print(f"workload {args.workload} {knobs}: {len(requests)} requests, "
          f"{sum(r.prompt_len for r in requests):,} prompt tokens, up to "
          f"{sum(r.max_new_tokens for r in requests):,} output tokens", file=sys.stderr)
    t = time.perf_counter()
    if args.url:
        server = replay(args.url, requests, max_model_len=None, warmup=args.warmup, timeout_s=args.timeout,
                        token_unit=args.token_unit)
        name = f"server at {args.url}"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            folder = export_hf(load_model(device="cpu", dtype=args.dtype), Path(tmp) / "tiny")
            server = run_server(args, requests, folder)
        name = f"transformers serve (CB, {args.threads} thr)"
    print(f"server side: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    rows = [row(name, server)]
    result: dict = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                    "server": server.summary(tokens=True)}
    if not args.no_engine:
        torch.set_num_threads(args.threads)
        t = time.perf_counter()
        ours = Engine(device="cpu", dtype=args.dtype).run(requests, "continuous", batch_size=args.batch_size,
                                                          clock="wall", progress=False)
        print(f"engine side: {time.perf_counter() - t:.1f} s", file=sys.stderr)
        rows.append(row(f"tinyserve continuous B={args.batch_size} ({args.threads} thr)", ours))
        want = {r.id: r.output for r in ours.requests}
        same = sum(r.status == "finished" and r.output == want[r.id] for r in server.requests)
        result["engine"] = ours.summary(tokens=True)
        result["tokens_identical"] = f"{same}/{len(requests)}"
        print(f"tokens identical (greedy, {args.dtype}): {same}/{len(requests)} requests")
    for r in server.requests:
        if r.status != "finished":
            print(f"server request {r.id}: {r.status}: {r.finish_reason}", file=sys.stderr)
    result["rows"] = rows
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
