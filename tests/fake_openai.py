"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for offline tests.

``responder(request_json) -> str | (status, body)`` decides each answer; every request
is recorded. Token usage is fixed so parsed usage can be checked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT_TOKENS = 11
COMPLETION_TOKENS = 7
Responder = Callable[[dict[str, Any]], "str | tuple[int, dict[str, Any]]"]


class FakeOpenAI:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                fake.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                answer = fake.responder(body)
                if isinstance(answer, tuple):
                    status, payload = answer
                else:
                    status, payload = (
                        200,
                        {
                            "id": f"chatcmpl-{len(fake.requests)}",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model", "fake"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": answer},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {
                                "prompt_tokens": PROMPT_TOKENS,
                                "completion_tokens": COMPLETION_TOKENS,
                                "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
                            },
                        },
                    )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def prompt_of(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
