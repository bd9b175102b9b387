"""The server, the request/answer model and the routing to each API's module."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

INPUT_TOKENS = 120
OUTPUT_TOKENS = 30


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # a string for free-form (custom) tools such as codex's apply_patch
    call_id: str = "call_1"


@dataclass
class Reply:
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


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
        self, scenario: Scenario, failures: list[Failure] | None = None, side: Scenario | None = None
    ) -> None:
        """``side`` answers requests that offer no tools (default: ``side_reply``); a CLI run as a
        plain model with no tools (a proposer) needs its scenario there."""
        from tests.fakeserver import anthropic, gemini, openai_chat, openai_responses

        self.scenario = scenario
        self.side = side or side_reply
        self.failures = list(failures or [])
        self.requests: list[ModelRequest] = []
        self.raw: list[dict[str, Any]] = []
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
                    failure = server.failures.pop(0) if server.failures and request.tools else None
                if failure is not None:
                    if failure.hang_s is not None:
                        time.sleep(failure.hang_s)
                        self.close_connection = True
                        return
                    self._send_json(
                        failure.status or 500,
                        module.error_body(failure.status or 500, failure.message),
                        failure.headers,
                    )
                    return
                reply = server.scenario(request) if request.tools else server.side(request)
                if request.stream:
                    chunks = module.stream(request, reply)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for chunk in chunks:
                        self.wfile.write(chunk.encode())
                        self.wfile.flush()
                    self.close_connection = True
                else:
                    self._send_json(200, module.respond(request, reply))

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
        self.server.shutdown()
        self.server.server_close()


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
