"""Replay a workload against a real OpenAI-compatible server and measure it from the client side.

Each request is sent at its arrival time to POST /v1/completions with "stream": true; the server answers with
server-sent events (SSE), one per token or a few tokens. We record, on our wall clock, when each request was
sent, when each token arrived and when the stream finished. The result is a Trace without step composition
(steps=[], clock "server"): the server's scheduler is invisible from outside, its latencies are not.

    tr = replay("http://127.0.0.1:8000", "chapter-7.1-finisher")   # a Trace; tr.metrics() as for `run`

Tokens: with `token_unit="byte"` (our exported model, tinyserve.core.tokenizer) the streamed text's UTF-8 bytes *are*
the token ids, so the server's tokens can be compared with the engine's exactly. With "event" (any other model,
e.g. on vLLM) each SSE event carrying text counts as one token, ids unknown (-1). The usage the server reports
at the end cross-checks the count; the EOS token, which streams no text, is recovered from it.

Failures are per request (status "aborted", finish_reason says why): refused, HTTP errors, timeouts, a dropped
connection, a stream of garbage. A finish_reason is data (the trace's JSON, `--json`), so it stays English. Problems that make the whole command pointless (unreachable URL, not an
OpenAI server, unknown model) raise TinyserveError before anything is sent.
Not httpx-sse: a new runtime dependency for every learner (requirements.txt) to replace SSEParser's ~55 tested lines.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import TinyserveError
from ..lang import t
from ..core.request import ABORTED, FINISHED, REJECTED, Request
from ..core.tokenizer import BOS, EOS, decode
from ..trace.record import Trace
from ..trace.report import latency_lines, throughput_line

# ------------------------------------------------------------------------------------------------------ SSE
@dataclass
class SSEEvent:
    """One dispatched server-sent event."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEParser:
    """Incremental text/event-stream parser (WHATWG HTML, "server-sent events"): feed bytes, get events.

    Lines end in CRLF, LF or CR (a CR at a chunk's end may be half of a CRLF); "data:" lines of one event join
    with newlines; a blank line dispatches; ":" lines are comments; an unfinished event at EOF is dropped.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False  # the previous chunk ended in CR: a leading LF belongs to it
        self._first = True  # strip a UTF-8 BOM at the very start of the stream
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse a chunk of the response body; the events it completed."""
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = False
        self._buf += chunk
        out: list[SSEEvent] = []
        while True:
            cut = min((i for i in (self._buf.find(b"\r"), self._buf.find(b"\n")) if i >= 0), default=-1)
            if cut < 0:
                return out
            line, sep = self._buf[:cut], self._buf[cut:cut + 1]
            if sep == b"\r" and cut + 1 == len(self._buf):
                self._skip_lf = True  # CR last in this chunk: maybe CRLF split across chunks
                self._buf = b""
            elif sep == b"\r" and self._buf[cut + 1:cut + 2] == b"\n":
                self._buf = self._buf[cut + 2:]
            else:
                self._buf = self._buf[cut + 1:]
            ev = self._line(line)
            if ev is not None:
                out.append(ev)

    def _line(self, raw: bytes) -> SSEEvent | None:
        text = raw.decode("utf-8", errors="replace")
        if self._first:
            text, self._first = text.removeprefix("\ufeff"), False
        if not text:  # blank line: dispatch
            data, event = self._data, self._event or "message"
            self._data, self._event = [], ""
            return SSEEvent("\n".join(data), event, self._id) if data else None
        if text.startswith(":"):
            return None
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields: nothing to do for a one-shot stream


# --------------------------------------------------------------------------------------------- the client
@dataclass
class ServerInfo:
    """What the preflight learned: the model to ask for, how to switch EOS off, the context if known."""

    url: str
    model: str
    api: str  # "transformers" (generation_config JSON) | "vllm" (ignore_eos field)
    max_model_len: int | None


@dataclass
class _Outcome:
    """What one streamed request produced."""

    sent_s: float | None = None
    token_times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None
    usage: dict | None = None
    finished_s: float | None = None


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as e:
        raise TinyserveError(t("cli.replay.httpx")) from e
    return httpx


def check_url(url: str) -> str:
    """The server's base URL without a trailing slash or /v1; refuses what is not an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TinyserveError(t("cli.replay.url", url=url))
    base = url.rstrip("/")
    return base.removesuffix("/v1")


def _detail(resp: Any) -> str:
    """The server's own words for an HTTP error: FastAPI's "detail", OpenAI's error.message, else the body."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        for key in ("detail", "message", "error"):
            if body.get(key):
                return str(body[key])[:300]
    return (resp.text or "").strip().replace("\n", " ")[:300] or resp.reason_phrase


def preflight(url: str, model: str | None = None, api: str = "auto", max_model_len: int | None = None,
              timeout_s: float = 10.0) -> ServerInfo:
    """Ask GET /v1/models; one clear TinyserveError if the server is unreachable, not OpenAI-style, or lacks model."""
    httpx = _httpx()
    base = check_url(url)
    try:
        resp = httpx.get(f"{base}/v1/models", timeout=timeout_s)
    except httpx.ConnectError as e:
        raise TinyserveError(t("cli.replay.unreachable", base=base, why=_why(e))) from None
    except httpx.TimeoutException:
        raise TinyserveError(t("cli.replay.no_answer", base=base, seconds=timeout_s)) from None
    except httpx.HTTPError as e:
        raise TinyserveError(t("cli.replay.http", base=base, why=_why(e))) from None
    try:
        listing = resp.json() if resp.status_code == 200 else None
        ids = [m["id"] for m in listing["data"]] if isinstance(listing, dict) else None
    except (ValueError, KeyError, TypeError):
        ids = None
    if ids is None:
        raise TinyserveError(t("cli.replay.not_openai", base=base, status=resp.status_code,
                               ctype=str(resp.headers.get("content-type", ""))))
    if model is None:
        if len(ids) != 1:
            raise TinyserveError(t("cli.replay.many_models", base=base, n=len(ids),
                                   ids=", ".join(ids) or t("engine.workload.none")))
        model = ids[0]
    elif model not in ids:
        raise TinyserveError(t("cli.replay.no_model", base=base, model=model, ids=", ".join(ids) or t("cli.replay.nothing")))
    entry = next(m for m in listing["data"] if m["id"] == model)
    if api == "auto":  # vLLM (and SGLang) take "ignore_eos"; transformers serve refuses unknown fields with 422
        api = "vllm" if entry.get("owned_by") in ("vllm", "sglang") or "max_model_len" in entry else "transformers"
    if api not in ("transformers", "vllm"):
        raise TinyserveError(t("cli.replay.api", api=api))
    if max_model_len is None and isinstance(entry.get("max_model_len"), int):
        max_model_len = entry["max_model_len"]
    return ServerInfo(base, model, api, max_model_len)


def wait_ready(url: str, timeout_s: float = 120.0, proc: Any = None) -> None:
    """Poll GET /health (then /v1/models) until the server answers 200; TinyserveError on timeout or exit."""
    httpx = _httpx()
    base = check_url(url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise TinyserveError(t("cli.replay.exited", code=proc.returncode))
        try:
            code = httpx.get(base + "/health", timeout=2).status_code
            if code == 200 or (code == 404 and httpx.get(base + "/v1/models", timeout=2).status_code == 200):
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(0.25)
    raise TinyserveError(t("cli.replay.not_ready", base=base, seconds=timeout_s))


def _why(e: BaseException) -> str:
    """A short reason for a transport error (httpx nests the OS error)."""
    msg = str(e) or type(e).__name__
    low = msg.lower()
    if "refused" in low:
        return "connection refused"  # words: ok (data: the transport's reason, in a finish_reason)
    return msg.splitlines()[0][:200]


def request_body(req: Request, info: ServerInfo) -> dict:
    """The /v1/completions body: greedy, streamed, the request's length; EOS off when it ignores EOS."""
    ids = req.prompt
    text = decode(ids[1:]) if ids and ids[0] == BOS else None
    # Text is what every server takes; it must encode back to exactly these ids (BOS is the tokenizer's job).
    prompt: str | list[int] = text if text is not None and list(text.encode("utf-8")) == ids[1:] else list(ids)
    body: dict[str, Any] = {"model": info.model, "prompt": prompt, "stream": True, "max_tokens": req.max_new_tokens,
                            "temperature": 0.0, "stream_options": {"include_usage": True}}
    if req.ignore_eos:
        if info.api == "vllm":
            body["ignore_eos"] = True
        else:  # transformers serve: a per-request generation config without an EOS (DESIGN.md)
            body["generation_config"] = json.dumps(
                {"max_new_tokens": req.max_new_tokens, "do_sample": False, "eos_token_id": -1})
    return body


async def stream_one(client: Any, info: ServerInfo, req: Request, t0: float, out: _Outcome,
                     token_unit: str = "byte", idle_timeout_s: float = 60.0) -> None:
    """POST one request and record its token arrivals into out (an error string on failure, never raises)."""
    httpx = _httpx()
    parser = SSEParser()
    done = False
    n_events = 0
    try:
        out.sent_s = time.perf_counter() - t0
        async with client.stream("POST", f"{info.url}/v1/completions", json=request_body(req, info),
                                 timeout=httpx.Timeout(idle_timeout_s)) as resp:
            if resp.status_code != 200:
                await resp.aread()
                out.error = f"HTTP {resp.status_code}: {_detail(resp)}"
                return
            ctype = resp.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                out.error = f"not an SSE stream (Content-Type {ctype or 'missing'}): is this an OpenAI-style server?"  # words: ok (data)
                return
            async for chunk in resp.aiter_raw():
                now = time.perf_counter() - t0
                for ev in parser.feed(chunk):
                    n_events += 1
                    if ev.data.strip() == "[DONE]":
                        done = True
                        break
                    err = _take_event(ev.data, out, now, token_unit)
                    if err:
                        out.error = f"{err} (event {n_events})"
                        return
                if done:
                    break
    except httpx.TimeoutException as e:
        out.error = f"timed out: {type(e).__name__} (no data for {idle_timeout_s:g} s)"  # words: ok (data)
        return
    except httpx.ConnectError as e:
        out.error = f"refused: {_why(e)}"
        return
    except (httpx.RemoteProtocolError, httpx.ReadError) as e:
        out.error = f"connection dropped after {len(out.tokens)} tokens ({_why(e)})"  # words: ok (data)
        return
    except httpx.HTTPError as e:
        out.error = f"{type(e).__name__}: {_why(e)}"
        return
    if out.finish_reason is None:
        out.error = f"stream ended without a finish_reason after {len(out.tokens)} tokens"  # words: ok (data)
        return
    _reconcile(out, req, token_unit)


def _take_event(data: str, out: _Outcome, now: float, token_unit: str) -> str | None:
    """Record one event's tokens; an error message for garbage or a server error event."""
    try:
        obj = json.loads(data)
    except ValueError:
        return f"garbage in stream: not JSON ({data[:80]!r})"  # words: ok (data)
    if not isinstance(obj, dict):
        return f"garbage in stream: {type(obj).__name__}, not an object"  # words: ok (data)
    if obj.get("error"):
        err = obj["error"]
        return f"server error in stream: {err.get('message', err) if isinstance(err, dict) else err}"  # words: ok (data)
    if isinstance(obj.get("usage"), dict):
        out.usage = obj["usage"]
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return f"garbage in stream: no 'choices' list ({data[:80]!r})"  # words: ok (data)
    for ch in choices:
        text = ch.get("text") if isinstance(ch, dict) else None
        if not isinstance(text, str):
            return f"garbage in stream: a choice without 'text' ({data[:80]!r})"  # words: ok (data)
        if text:
            new = list(text.encode("utf-8")) if token_unit == "byte" else [-1]
            out.tokens += new
            out.token_times += [now] * len(new)
            out.text += text
        if ch.get("finish_reason"):
            out.finish_reason = ch["finish_reason"]
            out.finished_s = now
    return None


def _reconcile(out: _Outcome, req: Request, token_unit: str) -> None:
    """Check the count against the server's usage; the EOS token streams no text, so add it from the usage."""
    reported = (out.usage or {}).get("completion_tokens")
    if out.finish_reason == "stop" and reported == len(out.tokens) + 1 and not req.ignore_eos:
        out.tokens.append(EOS if token_unit == "byte" else -1)
        out.token_times.append(out.finished_s)
    prompt_tokens = (out.usage or {}).get("prompt_tokens")
    if token_unit == "byte" and isinstance(prompt_tokens, int) and prompt_tokens != req.prompt_len:
        out.error = (f"the server counts {prompt_tokens} prompt tokens, we sent {req.prompt_len} byte tokens: "  # words: ok (data)
                     "its tokenizer is not tinyserve's (use --token-unit event for other models)")
    elif token_unit == "byte" and "\ufffd" in out.text:
        out.error = "the streamed text holds U+FFFD (invalid UTF-8 from the model): its bytes are not the tokens"  # words: ok (data)
    elif isinstance(reported, int) and reported != len(out.tokens):
        out.error = (f"token count mismatch: {len(out.tokens)} counted from the stream, the server reports "  # words: ok (data)
                     f"{reported} (token unit {token_unit!r})")


# --------------------------------------------------------------------------------------------- the replay
def replay(url: str, workload: str | Path | list[Request], model: str | None = None, *, api: str = "auto",
           max_model_len: int | None = None, max_concurrency: int = 256, timeout_s: float = 600.0,
           idle_timeout_s: float = 60.0, warmup: int = 1, token_unit: str = "byte", seed: int = 0,
           on_interrupt: list | None = None) -> Trace:
    """Send the workload's requests at their arrival times, stream the answers, return the measured Trace.

    A KeyboardInterrupt stops sending and streaming; the Trace still holds what was measured (unfinished
    requests aborted), and on_interrupt (a list) gets True appended so the caller can exit 130.
    """
    from ..core.workloads import CONTEXT, get_workload

    if token_unit not in ("byte", "event"):
        raise TinyserveError(t("cli.replay.token_unit", unit=token_unit))
    for name, v in (("max_concurrency", max_concurrency), ("warmup", warmup)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "max_concurrency" else 0):
            raise TinyserveError(t("engine.knob.integer", name=name, lo=1 if name == "max_concurrency" else 0, value=v))
    for name, v in (("timeout_s", timeout_s), ("idle_timeout_s", idle_timeout_s)):
        if not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise TinyserveError(t("engine.knob.positive_finite", name=name, value=v))
    if isinstance(workload, list):
        reqs, label = [r.fresh() for r in workload], "requests"
    else:
        reqs, label = get_workload(str(workload), seed=seed), Path(str(workload)).name if str(workload).endswith(
            ".jsonl") else str(workload)
    info = preflight(url, model, api, max_model_len)
    reqs.sort(key=lambda r: r.arrival_s)
    outcomes = {r.id: _Outcome() for r in reqs}
    if token_unit == "byte" and info.max_model_len is None:
        # transformers serve does not publish its context, and one request past it killed its batching thread
        # (every later request: HTTP 503). Byte tokens mean our model, whose context the workloads assume.
        info.max_model_len = CONTEXT
    refused = {}  # request id -> why it is not sent
    for r in reqs:  # counted in our byte tokens, so only meaningful when the server's tokens are ours
        total = r.prompt_len + r.max_new_tokens
        if token_unit == "byte" and total > info.max_model_len:
            refused[r.id] = (f"prompt {r.prompt_len} + max_new_tokens {r.max_new_tokens} "  # words: ok (data)
                             f"= {total} > server context {info.max_model_len}")  # words: ok (data)
    interrupted = False
    try:
        asyncio.run(_run_all(info, [r for r in reqs if r.id not in refused], outcomes, max_concurrency, timeout_s,
                             idle_timeout_s, warmup, token_unit))
    except KeyboardInterrupt:
        interrupted = True
        if on_interrupt is not None:
            on_interrupt.append(True)
    knobs = {"url": info.url, "model": info.model, "api": info.api, "max_model_len": info.max_model_len,
             "max_concurrency": max_concurrency, "timeout_s": timeout_s, "idle_timeout_s": idle_timeout_s,
             "warmup": warmup, "token_unit": token_unit, "measured": "client-side wall clock, over HTTP"}  # words: ok (data)
    measured = [replace(r, status=REJECTED, finish_reason=refused[r.id]) if r.id in refused
                else _measured(r, outcomes[r.id], interrupted) for r in reqs]
    return Trace(policy="server", workload=label, clock="server", hardware=info.url, num_slots=0, knobs=knobs,
                 dry_run=False, steps=[], requests=measured)


def _measured(r: Request, o: _Outcome, interrupted: bool) -> Request:
    """The Request the Trace reports: r with its outcome, built whole (the server, not our scheduler, ran it)."""
    output = list(o.tokens)
    if o.error is None and o.finish_reason is not None:
        status, reason = FINISHED, ("eos" if output and output[-1] == EOS and o.finish_reason == "stop"
                                    else o.finish_reason)
    else:  # its reason in words, not "aborted": the error, an interrupt, or never sent
        status, reason = ABORTED, o.error or ("interrupted (Ctrl-C)" if interrupted else "not sent")  # words: ok (data)
    # admitted: when it left the client (the server's own queueing is not visible); latencies count from then
    return replace(r, output=output, token_times=list(o.token_times), admitted_s=o.sent_s, status=status,
                   arrival_s=r.arrival_s if o.sent_s is None else o.sent_s, finish_s=o.finished_s, finish_reason=reason)


async def _run_all(info: ServerInfo, reqs: list[Request], outcomes: dict[str, _Outcome],
                   max_concurrency: int, timeout_s: float, idle_timeout_s: float, warmup: int,
                   token_unit: str) -> None:
    httpx = _httpx()
    limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(idle_timeout_s)) as client:
        for i in range(warmup):  # the first request starts the server's batching loop (~125 ms): not measured
            w, o = Request(f"warmup{i}", [BOS] + list(b"def warm_up():"), 4, ignore_eos=True), _Outcome()
            try:
                await asyncio.wait_for(stream_one(client, info, w, time.perf_counter(), o, token_unit,
                                                  idle_timeout_s), timeout_s)
            except asyncio.TimeoutError:
                o.error = f"not finished within {timeout_s:g} s"  # words: ok (data)
            if o.error:  # a server that cannot answer one short request would fail every measured one
                raise TinyserveError(t("cli.replay.warmup_failed", error=o.error))
        gate = asyncio.Semaphore(max_concurrency)
        t0 = time.perf_counter()

        async def one(r: Request) -> None:
            await asyncio.sleep(max(0.0, t0 + r.arrival_s - time.perf_counter()))
            async with gate:  # sent: running on the server (admitted_s is filled from the outcome)
                o = outcomes[r.id]
                try:
                    await asyncio.wait_for(stream_one(client, info, r, t0, o, token_unit, idle_timeout_s), timeout_s)
                except asyncio.TimeoutError:
                    o.error = f"timed out: not finished within {timeout_s:g} s (after {len(o.tokens)} tokens)"  # words: ok (data)

        await asyncio.gather(*(one(r) for r in reqs))


def format_replay(tr: Trace) -> str:
    """A few lines for the terminal: where it was measured, throughput, latency percentiles."""
    m = tr.metrics()
    k = tr.knobs
    return "\n".join([t("cli.replay.head", workload=tr.workload, url=k["url"], model=k["model"]),
                      t("cli.replay.requests", finished=m["num_finished"], rejected=m["num_rejected"],
                        failed=m["num_aborted"], tokens=m["output_tokens"], duration=m["duration_s"]),
                      throughput_line(m), *latency_lines(m)])
