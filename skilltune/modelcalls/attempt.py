"""One attempt of a model call: the HTTP exchange in a worker thread, ended by the caller's clock
or cancel check, and what came back, classified.

The calling thread watches the clock and the cancel check while a worker thread talks to the
endpoint. To end an attempt it shuts the attempt's socket down (caught when it was opened,
through httpx2's ``trace`` extension): a blocked read returns at once, a generating server sees
its client go, and nothing waits for a read timeout. Every attempt opens its own connection for
that reason (no keep-alive: a model call lasts seconds).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skilltune.errors import UsageError
from skilltune.modelcalls.settings import CallCancelled, Endpoint, ErrorKind
from skilltune.modelcalls.wire import Partial, Wire

_POLL_S = 0.05
_ERROR_BODY_BYTES = 65_536


@dataclass
class Failure:
    kind: ErrorKind
    reason: str  # one line: what the endpoint said
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None


@dataclass
class Outcome:
    partial: Partial | None = None
    failure: Failure | None = None
    cut: bool = False  # the client stopped reading: the stream ran past the token limit


@dataclass
class Connection:
    """The sockets of one attempt, so another thread can end it."""

    sockets: list[socket.socket] = field(default_factory=list)
    aborted: bool = False
    partial: Partial | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def trace(self, name: str, info: dict[str, Any]) -> None:
        stream: Any = info.get("return_value") if name.endswith(".complete") else None
        get_extra_info = getattr(stream, "get_extra_info", None)
        sock = get_extra_info("socket") if callable(get_extra_info) else None
        if isinstance(sock, socket.socket):
            with self.lock:
                self.sockets.append(sock)
                if self.aborted:
                    shutdown(sock)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            for sock in self.sockets:
                shutdown(sock)


def shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def retry_after(headers: Any) -> float | None:
    """Seconds an endpoint asks to wait: ``retry-after-ms``, or ``retry-after`` in seconds or as a date."""
    ms = headers.get("retry-after-ms")
    with contextlib.suppress(TypeError, ValueError):
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None


def transport_failure(exc: BaseException) -> Failure:
    """A failure of the connection (retryable), or ``exc`` raised again when it is none."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return Failure("timeout", f"{type(exc).__name__}: no answer in time ({exc})", retryable=True)
    if isinstance(exc, httpx2.TransportError | OSError):
        return Failure("network", f"{type(exc).__name__}: {exc}".strip(": "), retryable=True)
    raise exc


class Attempts:
    """Attempts against one endpoint, over one HTTP client (thread-safe, made on first use)."""

    def __init__(self, endpoint: Endpoint, wire: Wire) -> None:
        self.endpoint = endpoint
        self.wire = wire
        self._http: Any = None
        self._http_lock = threading.Lock()

    def run(
        self,
        body: dict[str, Any],
        deadline: float,
        cancel: Callable[[], bool] | None,
        max_units: int,
        timeout_s: float,
    ) -> Outcome:
        """Send ``body``; the answer, or why there is none, by ``deadline`` at the latest. Raises
        CallCancelled when ``cancel()`` turns true (the connection is closed first)."""
        conn = Connection()
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["outcome"] = self._exchange(body, deadline, conn, max_units)
            except BaseException as exc:
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="skilltune-model-call", daemon=True).start()
        try:
            while not done.wait(_POLL_S):
                if cancel is not None and cancel():
                    conn.abort()
                    raise CallCancelled("cancelled during the call (the connection was closed)")
                if time.monotonic() >= deadline:
                    conn.abort()
                    return Outcome(
                        partial=conn.partial,
                        failure=Failure(
                            "timeout",
                            f"no complete answer within timeout_s={timeout_s:g} s (the connection was closed)",
                            retryable=True,
                        ),
                    )
        except BaseException:
            conn.abort()
            raise
        if "error" in box:
            return Outcome(partial=conn.partial, failure=transport_failure(box["error"]))
        outcome: Outcome = box["outcome"]
        return outcome

    def _exchange(self, body: dict[str, Any], deadline: float, conn: Connection, max_units: int) -> Outcome:
        """Send ``body`` and read the answer (runs in the worker thread)."""
        import httpx2

        http = self._client()
        remaining = max(0.1, deadline - time.monotonic())
        headers = self.wire.headers(self.endpoint.key())
        headers["Accept"] = "text/event-stream" if body.get("stream") else "application/json"
        # httpx2's own timeouts are a back-stop for an abandoned thread: the calling thread ends the
        # attempt at the deadline (a read timeout would restart with every byte a slow server sends).
        timeout = httpx2.Timeout(remaining + 5.0, connect=min(remaining, 30.0))
        with http.stream(
            "POST",
            self.endpoint.url,
            json=body,
            headers=headers,
            timeout=timeout,
            extensions={"trace": conn.trace},
        ) as response:
            if response.status_code >= 400:
                raw = b""
                for chunk in response.iter_bytes():
                    raw += chunk
                    if len(raw) >= _ERROR_BODY_BYTES:
                        break
                return Outcome(failure=self.http_failure(response.status_code, response.headers, raw))
            partial = conn.partial = Partial()
            if response.headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream":
                for event in httpx2.EventSource(response):
                    pieces = len(partial.text)
                    self.wire.feed(event.event, event.data, partial)
                    if partial.units > max_units:  # the piece over the limit is not part of the reply
                        del partial.text[pieces:]
                        partial.units = max_units
                        return Outcome(partial=partial, cut=True)  # leaving the block closes the connection
                    if partial.done:
                        break
                return Outcome(partial=partial)
            raw = response.read()
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return Outcome(
                    failure=Failure(
                        "server_error", f"the answer is not JSON: {raw[:200]!r}", response.status_code, True
                    )
                )
            if not isinstance(obj, dict):
                return Outcome(
                    failure=Failure(
                        "server_error",
                        f"the answer is not a JSON object: {raw[:200]!r}",
                        response.status_code,
                        True,
                    )
                )
            self.wire.read(obj, partial)
            return Outcome(partial=partial)

    def _client(self) -> Any:
        with self._http_lock:
            if self._http is None:
                try:
                    import httpx2
                except ImportError:
                    raise UsageError("model calls need httpx2: pip install 'skilltune[api]'") from None
                # One connection per attempt (see the module docstring); proxies and CA bundles
                # from the environment, as every other HTTP client of the user's.
                self._http = httpx2.Client(limits=httpx2.Limits(max_keepalive_connections=0), trust_env=True)
            return self._http

    def http_failure(self, status: int, headers: Any, raw: bytes) -> Failure:
        text = raw.decode("utf-8", "replace")
        try:
            message = self.wire.error_text(json.loads(text))
        except json.JSONDecodeError:
            message = text.strip()[:300] or "(no body)"
        message = f"HTTP {status}: {' '.join(message.split())[:400]}"
        if status == 429:
            return Failure("rate_limited", message, status, True, retry_after(headers))
        if status >= 500 or status in (408, 409, 425):
            return Failure("server_error", message, status, True, retry_after(headers))
        if status in (401, 403):
            return Failure("auth", message, status)
        if status == 404:
            return Failure("not_found", message, status)
        return Failure("bad_request", message, status)

    def stream_error(self, error: dict[str, Any]) -> Failure:
        text = self.wire.error_text({"error": error})
        transient = re.search(
            r"overload|rate|server_error|api_error|unavailable|timeout|capacity", text, re.I
        )
        kind: ErrorKind = "server_error" if transient else "bad_request"
        return Failure(kind, f"error in the answer: {text[:400]}", retryable=bool(transient))
