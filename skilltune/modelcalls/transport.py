"""The HTTP client under the LangChain models, and one attempt run so the calling thread can end it.

The vendor SDKs behind ChatOpenAI and ChatAnthropic send through an ``httpx2.Client`` of ours:
its request hook tags each request with the attempt it belongs to (a context variable, which
LangChain carries into the threads it runs steps in), and httpx2's ``trace`` extension hands
over the socket when it is opened. The calling thread watches the clock and the cancel check
while a worker thread runs the attempt; to end it, it shuts that socket down: a blocked read
returns at once, a generating server sees its client go, nothing waits for a read timeout.
No keep-alive: every attempt opens its own connection, so shutting one down ends one attempt.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from skilltune.errors import UsageError
from skilltune.modelcalls.settings import CallCancelled

POLL_S = 0.05
# Sent as the key to a keyless endpoint (a local server): the SDKs require one; the request hook
# removes the header that carries it, so such a server sees no credentials, as before.
NO_KEY = "skilltune-no-key"
_KEY_HEADERS = ("authorization", "x-api-key")

_T = TypeVar("_T")


@dataclass
class Connection:
    """The sockets of one attempt, so another thread can end it."""

    sockets: list[socket.socket] = field(default_factory=list)
    requests: int = 0  # requests the attempt sent through our client (a check that it was used)
    unstreamed: bool = False  # a streamed request was answered with one JSON object, not events
    aborted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def trace(self, name: str, info: dict[str, Any]) -> None:
        stream: Any = info.get("return_value") if name.endswith(".complete") else None
        get_extra_info = getattr(stream, "get_extra_info", None)
        sock = get_extra_info("socket") if callable(get_extra_info) else None
        if isinstance(sock, socket.socket):
            with self.lock:
                self.sockets.append(sock)
                if self.aborted:
                    _shutdown(sock)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            for sock in self.sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_ATTEMPT: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "skilltune_attempt", default=None
)


def _on_request(request: Any) -> None:
    conn = _ATTEMPT.get()
    if conn is not None:
        with conn.lock:
            conn.requests += 1
        request.extensions["trace"] = conn.trace
    for name in _KEY_HEADERS:
        if NO_KEY in request.headers.get(name, ""):
            del request.headers[name]


def _on_response(response: Any) -> None:
    conn = _ATTEMPT.get()
    if conn is None or response.status_code >= 300:
        return
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "text/event-stream" and _asked_to_stream(response.request):
        conn.unstreamed = (
            True  # the SDK reads no event from it: the attempt fails, the call resends unstreamed
        )


def _asked_to_stream(request: Any) -> bool:
    try:
        body = json.loads(request.content or b"{}")
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(body, dict) and body.get("stream") is True


def http_client() -> Any:
    """An ``httpx2.Client`` for the SDKs: one connection per attempt, proxies and CA bundles from
    the environment (as every other HTTP client of the user's). Timeouts are the SDK's back-stop
    for an abandoned thread; the calling thread ends each attempt at its deadline."""
    try:
        import httpx2
    except ImportError:
        raise UsageError("model calls need httpx2: pip install 'skilltune[api]'") from None
    return httpx2.Client(
        limits=httpx2.Limits(max_keepalive_connections=0),
        trust_env=True,
        event_hooks={"request": [_on_request], "response": [_on_response]},
    )


@dataclass
class Attempt(Generic[_T]):
    """How an attempt ended: its result, the exception it raised, or ``timed_out``."""

    result: _T | None = None
    error: BaseException | None = None
    timed_out: bool = False


def run_attempt(
    work: Callable[[], _T], conn: Connection, deadline: float, cancel: Callable[[], bool] | None
) -> Attempt[_T]:
    """Run ``work`` in a worker thread whose requests belong to ``conn``, until it ends or the
    deadline passes (the connection is shut down). Raises CallCancelled when ``cancel()`` turns
    true, and passes on a KeyboardInterrupt, closing the connection first in both cases."""
    box: Attempt[_T] = Attempt()
    done = threading.Event()

    def worker() -> None:
        _ATTEMPT.set(conn)
        try:
            box.result = work()
        except BaseException as exc:
            box.error = exc
        finally:
            done.set()

    threading.Thread(target=worker, name="skilltune-model-call", daemon=True).start()
    try:
        while not done.wait(POLL_S):
            if cancel is not None and cancel():
                conn.abort()
                raise CallCancelled("cancelled during the call (the connection was closed)")
            if time.monotonic() >= deadline:
                conn.abort()
                return Attempt(timed_out=True)
    except BaseException:
        conn.abort()
        raise
    return box
