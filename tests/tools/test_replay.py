"""Replay against a fake OpenAI-style server on 127.0.0.1: the SSE parser, the client's per-request errors
(bad JSON, dropped connection, slow stream, HTTP 500), and the `tinyserve replay` command's bad input.

The fake server is a real HTTP server (http.server, chunked streaming) in a thread; what it streams for a
request is chosen by the request's prompt text, so one workload exercises every behaviour at once."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import default_sigint
from tinyserve.core.request import Request
from tinyserve.core.tokenizer import BOS, EOS
from tinyserve.errors import TinyserveError
from tinyserve.tools.replay import SSEEvent, SSEParser, preflight, replay
from tinyserve.trace.record import Trace

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}


# ------------------------------------------------------------------------------------------------ SSE parser
STREAM = (b"\xef\xbb\xbf: a comment\r\n"
          b"data: {\"a\": 1}\r\n\r\n"
          b"event: note\ndata: line one\ndata: line two\nid: 7\n\n"
          b"data:no-space\r\rdata: \xe9\x80\xa3\n\n"
          b"retry: 10\nunknown field\n\n"
          b"data: unfinished")
# By hand from the spec: the BOM and the comment vanish; CRLF, LF and CR all end lines; two data lines join with
# "\n"; "data:x" has no space to strip; a block without data dispatches nothing; the last event never ended.
WANT = [SSEEvent('{"a": 1}'), SSEEvent("line one\nline two", "note", "7"), SSEEvent("no-space", "message", "7"),
        SSEEvent("連", "message", "7")]


def test_sse_parser_all_at_once() -> None:
    assert SSEParser().feed(STREAM) == WANT


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_sse_parser_in_small_chunks(size: int) -> None:
    """Chunk borders anywhere (inside a CRLF, inside a UTF-8 character) give the same events."""
    p = SSEParser()
    got = [ev for i in range(0, len(STREAM), size) for ev in p.feed(STREAM[i:i + size])]
    assert got == WANT


# ----------------------------------------------------------------------------------------------- fake server
MODEL = "tiny"
TEXT = "ab連"  # streamed one character per event: 'a', 'b', then 3 bytes at once


def chunk(text: str = "", finish: str | None = None, usage: dict | None = None) -> bytes:
    obj: dict = {"id": "x", "object": "text_completion", "model": MODEL,
                 "choices": [{"index": 0, "text": text, **({"finish_reason": finish} if finish else {})}]}
    if usage:
        obj["usage"] = usage
    return f"data: {json.dumps(obj)}\n\n".encode()


class Fake(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: list[dict] = []
    max_model_len: int | None = None
    broken = False  # True: even the warm-up request gets HTTP 500
    finished: list[str] = []  # kinds whose whole answer was sent

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _json(self, code: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, data: bytes) -> None:  # one HTTP chunk
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        entry = {"id": MODEL, "object": "model", "owned_by": "local"}
        if self.max_model_len:
            entry = {**entry, "owned_by": "vllm", "max_model_len": self.max_model_len}
        self._json(200, {"object": "list", "data": [entry]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Fake.bodies.append(body)
        kind = str(body["prompt"]).split()[0] if isinstance(body["prompt"], str) else "ids"
        kind = "warm" if "warm_up" in str(body["prompt"]) else kind  # replay's warm-up request
        if kind == "http500" or (kind == "warm" and Fake.broken):
            return self._json(500, {"detail": "the GPU caught fire"})
        if kind == "plainjson":  # 200, but a JSON document instead of an event stream
            return self._json(200, {"choices": [{"text": "abc"}]})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if kind in ("ok", "ids", "warm"):
            for ch in TEXT:
                self._send(chunk(ch))
                time.sleep(0.01)
            self._send(chunk(finish="length", usage={"completion_tokens": 5}) + b"data: [DONE]\n\n")
        elif kind == "eos":  # two text tokens, then EOS: no text, but counted by the usage
            self._send(chunk("hi"))
            self._send(chunk(finish="stop", usage={"completion_tokens": 3}))
        elif kind == "badjson":
            self._send(chunk("a") + b"data: {this is not json\n\n")
        elif kind == "errorevent":
            self._send(chunk("a") + b'data: {"error": "index out of range in self"}\n\n')
        elif kind == "drop":  # half a chunked body, then the connection closes
            self._send(chunk("a") + chunk("b"))
            self.wfile.write(b"ff\r\ndata: {\"trunc")
            self.wfile.flush()
            self.close_connection = True
            return self.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "slow":  # one token, then silence longer than the idle timeout
            self._send(chunk("a"))
            time.sleep(8)
        elif kind == "trickle":  # a token every 0.2 s, never finishing: only the total timeout stops it
            for _ in range(40):
                self._send(chunk("a"))
                time.sleep(0.2)
        elif kind == "otherprompt":  # a server whose tokenizer is not ours: 2 prompt tokens for 13 bytes
            self._send(chunk("a", finish="length", usage={"completion_tokens": 1, "prompt_tokens": 2}))
        elif kind == "miscount":  # the usage disagrees with what was streamed
            self._send(chunk("abc", finish="length", usage={"completion_tokens": 2}))
        self._send(b"")  # the last chunk
        Fake.finished.append(kind)


@pytest.fixture()
def server():
    Fake.bodies, Fake.max_model_len, Fake.broken, Fake.finished = [], None, False, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def req(rid: str, text: str, n: int = 5, arrival: float = 0.0, ignore_eos: bool = True) -> Request:
    return Request(rid, [BOS] + list(text.encode()), n, arrival, ignore_eos=ignore_eos)


def test_client_records_tokens_and_per_request_errors(server: str) -> None:
    reqs = [req("ok", "ok go"), req("late", "ok later", arrival=0.3), req("eos", "eos", 10, ignore_eos=False),
            req("badjson", "badjson"), req("errorevent", "errorevent"), req("drop", "drop"),
            req("slow", "slow"), req("http500", "http500"), req("miscount", "miscount"), req("otherprompt", "otherprompt"), req("plainjson", "plainjson"),
            Request("ids", [BOS, 0xFF], 5, 0.0, ignore_eos=True)]
    tr = replay(server, reqs, idle_timeout_s=2, timeout_s=20)  # 'slow' then sleeps 8 s: cut by the idle timeout
    by = {r.id: r for r in tr.requests}
    # 'ab連' is a, b and the three UTF-8 bytes of 連 (e9 80 a3): 5 byte tokens, the last three arrive together.
    for rid in ("ok", "late", "ids"):
        r = by[rid]
        assert (r.status, r.finish_reason, r.output) == ("finished", "length", [97, 98, 0xE9, 0x80, 0xA3]), rid
        assert r.token_times[2] == r.token_times[3] == r.token_times[4] and r.finish_s >= r.token_times[-1]
    assert by["late"].arrival_s >= 0.3  # sent at its arrival time, not at once
    assert by["eos"].output == [ord("h"), ord("i"), EOS] and by["eos"].finish_reason == "eos"
    want_errors = {"badjson": "garbage in stream: not JSON", "errorevent": "server error in stream: index out of range",
                   "drop": "connection dropped after 2 tokens", "slow": "timed out", "http500": "HTTP 500: the GPU caught fire",
                   "miscount": "token count mismatch: 3 counted from the stream, the server reports 2",
                   # BOS + 11 bytes of "otherprompt" = 12 tokens sent
                   "otherprompt": "the server counts 2 prompt tokens, we sent 12 byte tokens",
                   "plainjson": "not an SSE stream (Content-Type application/json)"}
    for rid, msg in want_errors.items():
        assert by[rid].status == "aborted" and msg in by[rid].finish_reason, (rid, by[rid].finish_reason)
    assert by["slow"].output == [97] and by["drop"].output == [97, 98]  # what arrived before the failure is kept
    m = tr.metrics()
    assert (m["num_finished"], m["num_aborted"], m["num_steps"]) == (4, 8, 0) and tr.steps == []
    assert tr.clock == "server" and tr.knobs["url"] == server
    # the prompt travels as text when it round-trips, as token ids when it cannot (a lone 0xff byte)
    sent = {b["prompt"] if isinstance(b["prompt"], str) else tuple(b["prompt"]) for b in Fake.bodies}
    assert "ok go" in sent and (BOS, 0xFF) in sent
    ok = next(b for b in Fake.bodies if b["prompt"] == "ok go")
    assert ok["stream"] is True and ok["temperature"] == 0 and ok["max_tokens"] == 5
    assert json.loads(ok["generation_config"])["eos_token_id"] == -1 and "ignore_eos" not in ok
    assert "generation_config" not in next(b for b in Fake.bodies if b["prompt"] == "eos")


def test_metrics_come_from_the_recorded_token_times(server: str) -> None:
    tr = replay(server, [req("a", "ok"), req("b", "ok", arrival=0.05)], warmup=0)
    m = tr.metrics()
    a, b = tr.requests
    # TTFT: first token time - send time; ITL: gaps between consecutive token times (vLLM's definitions).
    ttft = sorted((r.token_times[0] - r.arrival_s) * 1e3 for r in (a, b))
    assert m["ttft_ms"]["max"] == pytest.approx(ttft[1]) and m["ttft_ms"]["mean"] == pytest.approx(sum(ttft) / 2)
    gaps = [(y - x) * 1e3 for r in (a, b) for x, y in zip(r.token_times, r.token_times[1:])]
    assert m["itl_ms"]["max"] == pytest.approx(max(gaps)) and len(gaps) == 8
    assert m["output_tokens"] == 10
    assert m["duration_s"] == pytest.approx(max(r.finish_s for r in (a, b)) - min(r.arrival_s for r in (a, b)))


def test_total_timeout_stops_a_stream_that_never_ends(server: str) -> None:
    tr = replay(server, [req("t", "trickle")], timeout_s=1.0, idle_timeout_s=5, warmup=0)
    r = tr.requests[0]  # 40 tokens 0.2 s apart would take 8 s: the 1 s limit cut it, keeping what had arrived
    assert r.status == "aborted" and "not finished within 1 s" in r.finish_reason and 1 <= r.output_len < 40


def test_context_check_and_vllm_style_eos(server: str) -> None:
    """A server that reports max_model_len: longer requests are rejected before sending, EOS off via ignore_eos."""
    Fake.max_model_len = 12
    tr = replay(server, [req("fits", "ok", 5), req("long", "ok too long", 5)], warmup=0)
    by = {r.id: r for r in tr.requests}
    assert by["fits"].status == "finished"  # 1 + 2 + 5 = 8 <= 12
    assert by["long"].status == "rejected"
    assert "prompt 12 + max_new_tokens 5 = 17 > server context 12" == by["long"].finish_reason
    body = Fake.bodies[0]
    assert body["ignore_eos"] is True and "generation_config" not in body


def test_unpublished_context_defaults_to_our_models(server: str) -> None:
    """transformers serve publishes no max_model_len; in byte mode the shipped model's 4,096 positions apply."""
    long = Request("long", [BOS] + [97] * 4089, 10, ignore_eos=True)  # 4,090 + 10 = 4,100 > 4,096
    tr = replay(server, [req("fits", "ok"), long], warmup=0)
    assert tr.request("long").finish_reason == "prompt 4090 + max_new_tokens 10 = 4100 > server context 4096"
    assert tr.request("fits").status == "finished" and len(Fake.bodies) == 1  # the long one was never sent
    tr = replay(server, [long], warmup=0, token_unit="event")  # another model's tokens: its server decides
    assert tr.request("long").status != "rejected" and len(Fake.bodies) == 2


def test_preflight_errors(server: str) -> None:
    with pytest.raises(TinyserveError, match=r"does not serve 'gpt-5' \(it serves tiny\)"):
        preflight(server, "gpt-5")
    assert preflight(server).model == MODEL
    port = _free_port()
    with pytest.raises(TinyserveError, match=r"cannot reach .* \(connection refused\)"):
        preflight(f"http://127.0.0.1:{port}")
    with pytest.raises(TinyserveError, match="not an http"):
        preflight("127.0.0.1:8000")
    with socket.socket() as mute:  # accepts connections, never answers: the preflight must not hang
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        with pytest.raises(TinyserveError, match=r"did not answer GET /v1/models within 0.5 s"):
            preflight(f"http://127.0.0.1:{mute.getsockname()[1]}", timeout_s=0.5)


def test_a_failing_warm_up_stops_before_measuring(server: str) -> None:
    Fake.broken = True
    with pytest.raises(TinyserveError, match=r"warm-up request failed \(HTTP 500: the GPU caught fire\)"):
        replay(server, [req("a", "ok")])
    assert len(Fake.bodies) == 1  # nothing after the warm-up was sent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------------- CLI
def cli(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinyserve", "replay"] + args, cwd=cwd, env=ENV, text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(p: subprocess.CompletedProcess) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_cli_bad_input(server: str, tmp_path: Path) -> None:
    (tmp_path / "w.jsonl").write_text('{"prompt": "ok", "max_new_tokens": 5}\n')
    (tmp_path / "long.jsonl").write_text('{"prompt_len": 40, "max_new_tokens": 5}\n')
    static = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: SimpleHTTPRequestHandler(*a, directory=str(tmp_path)))
    threading.Thread(target=static.serve_forever, daemon=True).start()
    try:
        cases = {
            "unreachable": (["--url", f"http://127.0.0.1:{_free_port()}", "--workload", "w.jsonl"],
                            ["cannot reach", "connection refused"]),
            "not-openai": (["--url", f"http://127.0.0.1:{static.server_address[1]}", "--workload", "w.jsonl"],
                           ["not an openai-compatible server", "404"]),
            "unknown-model": (["--url", server, "--workload", "w.jsonl", "--model", "llama"],
                              ["does not serve 'llama'", "tiny"]),
            "too-long": (["--url", server, "--workload", "long.jsonl", "--max-model-len", "32"],
                         ["every request was rejected"]),
            "bad-url": (["--url", "localhost", "--workload", "w.jsonl"], ["not an http(s) url"]),
            "no-url": (["--workload", "w.jsonl"], ["--url", "required"]),
            "bad-unit": (["--url", server, "--workload", "w.jsonl", "--token-unit", "word"], ["byte", "event"]),
            "unknown-workload": (["--url", server, "--workload", "chapter-9"], ["unknown 'chapter-9'"]),
        }
        for name, (args, words) in cases.items():
            p = cli(args, tmp_path)
            err = p.stderr.lower()
            if name == "too-long":  # the rejection line, then the one error line
                assert p.returncode == 2 and "40 + max_new_tokens 5 = 45 > server context 32" in err, err
            else:
                line = one_line(p).lower()
                assert all(w in line for w in words), (name, line)
    finally:
        static.shutdown()
        static.server_close()


def test_cli_json_and_trace(server: str, tmp_path: Path) -> None:
    (tmp_path / "w.jsonl").write_text('{"id": "a", "prompt": "ok", "max_new_tokens": 5, "ignore_eos": true}\n'
                                      '{"id": "b", "prompt": "http500", "max_new_tokens": 5}\n')
    p = cli(["--url", server, "--workload", "w.jsonl", "--json", "--tokens", "--trace", "t.json"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "aborted request b: HTTP 500: the GPU caught fire" in p.stderr
    out = json.loads(p.stdout)
    assert {"policy", "workload", "clock", "hardware", "metrics", "requests"} <= out.keys()
    assert out["measured_on"] == server and out["clock"] == "server" and out["metrics"]["num_finished"] == 1
    a = next(r for r in out["requests"] if r["id"] == "a")
    assert a["tokens"] == [97, 98, 0xE9, 0x80, 0xA3] and a["output_len"] == 5
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved["steps"] == [] and len(saved["requests"][0]["token_times_s"]) == 5
    back = Trace.load(tmp_path / "t.json")  # what the latency views read, beside an engine trace
    assert back.clock == "server" and back.metrics()["ttft_ms"] == out["metrics"]["ttft_ms"]
    assert back.request("a").token_times == saved["requests"][0]["token_times_s"]


def test_ctrl_c_stops_and_still_writes_the_trace(server: str, tmp_path: Path) -> None:
    (tmp_path / "w.jsonl").write_text('{"id": "fast", "prompt": "ok", "max_new_tokens": 5, "ignore_eos": true}\n'
                                      '{"id": "stuck", "prompt": "trickle", "max_new_tokens": 99, "ignore_eos": true}\n')
    p = subprocess.Popen([sys.executable, "-m", "tinyserve", "replay", "--url", server, "--workload", "w.jsonl",
                          "--json", "--trace", "t.json"], cwd=tmp_path, env=ENV, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=default_sigint)
    try:
        deadline = time.time() + 30
        while not ("ok" in Fake.finished and any(b["prompt"] == "trickle" for b in Fake.bodies)):
            assert time.time() < deadline, "the replay never got going"
            time.sleep(0.05)
        time.sleep(0.5)  # 'fast' was sent whole and read by now, 'stuck' is mid-stream
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "interrupted" in err, err
    saved = json.loads((tmp_path / "t.json").read_text())
    by = {r["id"]: r for r in saved["requests"]}
    assert by["fast"]["status"] == "finished" and by["fast"]["output_len"] == 5
    assert by["stuck"]["status"] == "aborted" and "interrupted" in by["stuck"]["finish_reason"]
    assert len(by["stuck"]["token_times_s"]) >= 1  # the tokens it streamed before Ctrl-C are kept
