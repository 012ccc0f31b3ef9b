"""Integration: `transformers serve` (a real server, continuous batching on CPU) runs our export; `tinyserve
replay` streams a small workload from it; the tokens equal our engine's and the metrics follow from the
recorded token times. Both sides compute in float64, so greedy argmax cannot flip on rounding.

The server is started once on 127.0.0.1 (a free port, HF_HUB_OFFLINE=1, one thread) and killed at the end."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tinyserve.engine import Engine
from tinyserve.model.runner import load_model
from tinyserve.tools.hf import export_hf, serve_command
from tinyserve.tools.replay import replay, wait_ready

ROWS = [
    {"id": "add", "prompt": "def add(a, b):", "max_new_tokens": 24, "ignore_eos": True},
    {"id": "synthetic", "prompt_len": 40, "max_new_tokens": 16, "arrival_s": 0.05, "ignore_eos": True},
    {"id": "unicode", "prompt": "# 連續批次 🚀\n", "max_new_tokens": 12, "arrival_s": 0.1, "ignore_eos": True},
    # These two end with EOS on their own (37 and 31 bytes, then EOS; found with `tinyserve generate`), so
    # the server's stop and our EOS token are compared too.
    {"id": "eos-newline", "prompt": "\n", "max_new_tokens": 60, "arrival_s": 0.1},
    {"id": "eos-main", "prompt": 'if __name__ == "__main__":\n    unittest.main()\n', "max_new_tokens": 60,
     "arrival_s": 0.15},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    folder = export_hf(load_model(device="cpu", dtype="float64"), tmp_path_factory.mktemp("export") / "tiny")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_VERBOSITY": "error"}
    log = (tmp_path_factory.getbasetemp() / "serve.log").open("w")
    proc = subprocess.Popen(serve_command(folder, port, num_blocks=64), env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, timeout_s=120, proc=proc)
        yield url, folder
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and anything it started
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_replay_matches_our_engine(server, tmp_path: Path) -> None:
    url, folder = server
    wl = tmp_path / "small.jsonl"
    wl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    tr = replay(url, wl, max_model_len=4096, timeout_s=60, idle_timeout_s=30)
    ours = Engine(device="cpu", dtype="float64").run(wl, "continuous", progress=False)

    by, want = {r.id: r for r in tr.requests}, {r.id: r for r in ours.requests}
    assert tr.knobs["model"] == str(folder) and tr.steps == [] and tr.clock == "server"
    for rid, r in by.items():
        # finished also means the server's usage agreed: as many prompt tokens as our byte ids (its tokenizer is
        # ours, Chinese and emoji included) and as many completion tokens as bytes streamed (+1 for EOS)
        assert r.status == "finished", (rid, r.finish_reason)
        assert r.output == want[rid].output, rid  # greedy, float64 on both sides: identical tokens
        assert r.finish_reason == want[rid].finish_reason, rid
    assert by["eos-newline"].finish_reason == "eos" and by["eos-main"].finish_reason == "eos"
    assert [len(by[i].output) for i in ("add", "synthetic", "unicode")] == [24, 16, 12]

    # The metrics are the recorded times, nothing else: recompute them by hand from arrival and token times.
    m = tr.metrics()
    for r in tr.requests:
        t = r.token_times
        assert r.arrival_s <= t[0] and all(a <= b for a, b in zip(t, t[1:])) and t[-1] <= r.finish_s
    ttft = [(r.token_times[0] - r.arrival_s) * 1e3 for r in tr.requests]
    e2el = [(r.finish_s - r.arrival_s) * 1e3 for r in tr.requests]
    itl = [(b - a) * 1e3 for r in tr.requests for a, b in zip(r.token_times, r.token_times[1:])]
    assert m["ttft_ms"]["mean"] == pytest.approx(np.mean(ttft)) and m["ttft_ms"]["max"] == pytest.approx(max(ttft))
    assert m["e2el_ms"]["p50"] == pytest.approx(np.median(e2el))
    assert m["itl_ms"]["max"] == pytest.approx(max(itl))
    assert len(itl) == sum(len(r.output) - 1 for r in tr.requests)
    n_out = sum(len(r.output) for r in tr.requests)
    assert m["output_tokens"] == n_out
    span = max(r.finish_s for r in tr.requests) - min(r.arrival_s for r in tr.requests)
    assert m["output_throughput"] == pytest.approx(n_out / span)
