"""The server, the request/answer model and the routing to each API's module."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

INPUT_TOKENS = 120
OUTPUT_TOKENS = 30
RUNAWAY_PIECES = 100_000  # what a server that reads no token limit generates (its context, say)
RUNAWAY_PACE_S = 0.001


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # a string for free-form (custom) tools such as codex's apply_patch
    call_id: str = "call_1"
    fragments: int | None = None  # Chat Completions streams the arguments in this many pieces (default 3)


@dataclass
class Reply:
    """An answer. ``pieces``: stream the text as these deltas (one per token, as servers do);
    ``finish`` and ``usage_out`` override the finish reason and the output tokens reported."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    pieces: Iterable[str] | None = None
    finish: str | None = None
    usage_out: int | None = None


@dataclass
class ModelRequest:
    api: str  # anthropic | chat | responses | gemini
    path: str
    model: str
    tools: list[str]
    tool_results: int
    text: str
    stream: bool
    wants_json: bool
    body: dict[str, Any]


@dataclass
class Failure:
    """A scripted failure for one request: an HTTP status with an error body, or a hang."""

    status: int | None = None
    hang_s: float | None = None
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"retry-after": "0"}: fast CLI retries
    after_pieces: int | None = None  # with hang_s on a streamed answer: hang after this many chunks


Scenario = Callable[[ModelRequest], Reply]


def final_text(text: str) -> Scenario:
    """A scenario that always answers ``text``."""
    return lambda request: Reply(text=text)


def side_reply(request: ModelRequest) -> Reply:
    """Side calls (titles, routers): JSON when structured output is asked for, else a short text."""
    if request.wants_json:
        return Reply(
            text=json.dumps({"title": "skilltune test", "reasoning": "test", "model_choice": "flash"})
        )
    return Reply(text="skilltune test")


class FakeModelServer:
    """``with FakeModelServer(scenario) as server:`` then point a CLI at ``server.url``."""

    def __init__(
        self,
        scenario: Scenario,
        failures: list[Failure] | None = None,
        side: Scenario | None = None,
        *,
        failures_for: Literal["tools", "all"] = "tools",
        limit_fields: tuple[str, ...] | None = None,
        refuse_fields: dict[str, str] | None = None,
    ) -> None:
        """``side`` answers requests that offer no tools (default: ``side_reply``); a CLI run as a
        plain model with no tools (a proposer, a direct chat target) needs its scenario there.

        ``failures`` apply to requests offering tools, or to every request (``failures_for="all"``).
        ``limit_fields`` emulates a server's token limit: the answer streams one word per chunk,
        cut to the first of these request fields present (finish ``length``); a request carrying
        none of them runs away, as llama-cpp-python does when sent only ``max_completion_tokens``
        (endless chunks until the client leaves; a plain answer never comes). ``refuse_fields``:
        request field -> the message of the 400 a request carrying it gets."""
        from tests.fakeserver import anthropic, gemini, openai_chat, openai_responses

        self.scenario = scenario
        self.side = side or side_reply
        self.failures = list(failures or [])
        self.failures_for = failures_for
        self.limit_fields = limit_fields
        self.refuse_fields = dict(refuse_fields or {})
        self.requests: list[ModelRequest] = []
        self.raw: list[dict[str, Any]] = []
        self.disconnects = 0  # streamed answers whose client left before the end
        self.release = threading.Event()  # set on exit: every hang ends
        self._lock = threading.Lock()
        self.routes: list[tuple[Callable[[str], bool], Any]] = [
            (lambda p: "/messages" in p, anthropic),
            (lambda p: p.rstrip("/").endswith("/chat/completions"), openai_chat),
            (lambda p: p.rstrip("/").endswith("/responses"), openai_responses),
            (lambda p: "generatecontent" in p.lower() or "counttokens" in p.lower(), gemini),
        ]
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                server.raw.append({"method": "GET", "path": self.path})
                body = json.dumps({"data": [], "models": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {}
                server.raw.append(
                    {"method": "POST", "path": self.path, "headers": dict(self.headers), "body": body}
                )
                module = next((m for match, m in server.routes if match(self.path)), None)
                if module is None:
                    self._send_json(404, {"error": {"message": f"no fake route for {self.path}"}})
                    return
                request = module.parse(self.path, body)
                with server._lock:
                    server.requests.append(request)
                    applies = request.tools or server.failures_for == "all"
                    failure = server.failures.pop(0) if server.failures and applies else None
                refused = next((f for f in server.refuse_fields if f in body), None)
                if refused is not None:
                    self._send_json(400, module.error_body(400, server.refuse_fields[refused]))
                    return
                if failure is not None and (failure.after_pieces is None or not request.stream):
                    if failure.hang_s is not None:
                        server.release.wait(failure.hang_s)
                        self.close_connection = True
                        return
                    self._send_json(
                        failure.status or 500,
                        module.error_body(failure.status or 500, failure.message),
                        failure.headers,
                    )
                    return
                reply = server.scenario(request) if request.tools else server.side(request)
                if server.limit_fields is not None:
                    reply = limited(reply, body, server.limit_fields)
                    if reply.pieces is None:  # a plain answer of a runaway server never comes
                        server.release.wait(RUNAWAY_PIECES * RUNAWAY_PACE_S)
                        self.close_connection = True
                        return
                if request.stream:
                    self._stream(module.stream(request, reply), failure, reply.finish == "runaway")
                else:
                    self._send_json(200, module.respond(request, reply))

            def _stream(self, chunks: Iterable[str], failure: Failure | None, paced: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for sent, chunk in enumerate(chunks):
                        if failure is not None and sent == failure.after_pieces:
                            server.release.wait(failure.hang_s or 0)
                            return
                        self.wfile.write(chunk.encode())
                        self.wfile.flush()
                        if paced:
                            time.sleep(RUNAWAY_PACE_S)
                except (BrokenPipeError, ConnectionResetError):
                    with server._lock:
                        server.disconnects += 1

            def _send_json(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def limited(reply: Reply, body: dict[str, Any], fields: tuple[str, ...]) -> Reply:
    """``reply`` as a server reading the token limit from ``fields`` gives it: one word per piece, cut
    at the limit; with no such field in ``body``, endless (finish ``runaway``), or no plain answer."""
    words = [w + " " for w in (reply.text or "").split(" ")]
    limit = next((body[f] for f in fields if isinstance(body.get(f), int)), None)
    if limit is None:
        if not body.get("stream"):
            return Reply(text=reply.text)
        endless = itertools.islice(itertools.cycle(words), RUNAWAY_PIECES)
        return Reply(pieces=endless, finish="runaway", usage_out=RUNAWAY_PIECES)
    kept = words[:limit]
    finish = "length" if len(words) > limit else None
    return Reply(text="".join(kept), pieces=kept, finish=finish, usage_out=len(kept))


def sse(event: str | None, data: dict[str, Any]) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def text_of(value: Any) -> str:
    """All text inside a message payload (strings, lists of parts, nested dicts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(
            text_of(v) for k, v in value.items() if k in ("text", "content", "input", "output", "parts")
        )
    return ""
