"""One bounded model call: a token limit the endpoint reads, a wall clock that ends it, retries,
rate limits, and a cancel check that closes the connection at once.

Each attempt runs in a worker thread while the calling thread watches the clock and the
cancel check. To end an attempt, the calling thread shuts the attempt's socket down (caught
when it was opened, through httpx2's ``trace`` extension): a blocked read returns at once, a
generating server sees its client go, and nothing waits for a read timeout. Every attempt
opens its own connection for that reason (no keep-alive: a model call lasts seconds).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skilltune.agents.prices import estimate_cost
from skilltune.errors import UsageError
from skilltune.modelcalls.limits import endpoint_state
from skilltune.modelcalls.settings import (
    CallCancelled,
    CallSettings,
    ChatRequest,
    Endpoint,
    ErrorKind,
    ModelCallError,
    Reply,
)
from skilltune.modelcalls.wire import Partial, wire_for

_POLL_S = 0.05
_BACKOFF_CAP_S = 30.0
_ERROR_BODY_BYTES = 65_536
_PARAM_FIXES = 3  # a call adapts to refused parameters at most this often (not counted as retries)
_CONTEXT = re.compile(r"context (length|window)|maximum context|too many tokens|n_ctx|context_length", re.I)
_REFUSED = re.compile(
    r"unsupported|not supported|unrecogni[sz]ed|unknown|extra (fields|inputs)|not permitted|instead", re.I
)


@dataclass
class _Failure:
    kind: ErrorKind
    reason: str  # one line: what the endpoint said
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None


@dataclass
class _Outcome:
    partial: Partial | None = None
    failure: _Failure | None = None
    cut: bool = False  # the client stopped reading: the stream ran past the token limit


@dataclass
class _Connection:
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
                    _shutdown(sock)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            for sock in self.sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _retry_after(headers: Any) -> float | None:
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


def _tokens_used(outcome: _Outcome | None) -> int | None:
    """The tokens an attempt used, as the endpoint counted them (None: unknown)."""
    partial = outcome.partial if outcome is not None else None
    if partial is None or partial.tokens_in is None:
        return None
    return partial.tokens_in + (partial.tokens_out if partial.tokens_out is not None else partial.units)


class ModelClient:
    """Calls to one endpoint under one set of limits. Thread-safe: share one per endpoint.

    ``where`` is how the caller's user sets options (``--proposer-opt``, ``--agent-opt``): error
    messages name the setting to change with it.
    """

    def __init__(self, endpoint: Endpoint, settings: CallSettings, *, where: str = "option") -> None:
        self.endpoint = endpoint
        self.settings = settings
        self.where = where
        self.wire = wire_for(endpoint.provider)
        self.state = endpoint_state(endpoint.url)
        self.state.configure(settings)
        self._http: Any = None
        self._http_lock = threading.Lock()

    # --- the call ---------------------------------------------------------------------------
    def ask(
        self,
        prompt: str,
        *,
        system: str | None = None,
        cancel: Callable[[], bool] | None = None,
        **fields: Any,
    ) -> Reply:
        """``chat`` with one user message (and a system prompt); ``fields`` as ChatRequest's."""
        return self.chat(ChatRequest.of(prompt, system=system, **fields), cancel=cancel)

    def chat(self, request: ChatRequest, *, cancel: Callable[[], bool] | None = None) -> Reply:
        """The endpoint's answer to ``request``, within the limits; raises ModelCallError (failed for
        good) or CallCancelled (``cancel()`` turned true: the connection was closed at once)."""
        s = self.settings
        events: list[dict[str, Any]] = []
        failures: list[str] = []
        notes: list[str] = []
        t0 = time.monotonic()
        waited = 0.0
        attempt = retries = fixes = 0
        estimate = request.prompt_chars() // 4 + request.max_tokens
        jitter = random.Random(f"{self.endpoint.url}|{request.model}|{request.seed}")
        while True:
            attempt += 1
            w0 = time.monotonic()
            try:
                ticket = self.state.acquire(estimate, cancel)
            except CallCancelled as exc:
                raise CallCancelled(str(exc), events) from None
            waited += time.monotonic() - w0
            budget_end = t0 + waited + s.wall_limit_s
            a0 = time.monotonic()
            token_param = self._token_param()
            body = self.wire.body(request, token_param, s.stream, self.state.dropped)
            events.append(self._request_event(attempt, body, request))
            outcome: _Outcome | None = None
            try:
                outcome = self._attempt(body, min(a0 + s.timeout_s, budget_end), cancel, request.max_tokens)
            except CallCancelled as exc:
                events.append({"type": "cancelled", "attempt": attempt})
                raise CallCancelled(str(exc), events) from None
            finally:
                self.state.release(ticket, _tokens_used(outcome))
            failure = outcome.failure
            if failure is None and outcome.partial is not None and outcome.partial.error is not None:
                failure = self._stream_error(outcome.partial.error)
            if failure is None:
                assert outcome.partial is not None
                return self._reply(
                    request, outcome, token_param, time.monotonic() - a0, attempt, failures, events, notes, t0
                )
            fixed = self._adapt(failure, token_param, body, notes, events) if fixes < _PARAM_FIXES else False
            events.append(
                {
                    "type": "error",
                    "attempt": attempt,
                    "kind": failure.kind,
                    "status": failure.status,
                    "message": failure.reason,
                }
            )
            failures.append(f"{failure.kind}: {failure.reason}")
            if fixed:
                fixes += 1
                continue
            if not failure.retryable or retries >= s.max_retries:
                raise self._final(failure, attempt, events)
            retries += 1
            delay = (
                failure.retry_after
                if failure.retry_after is not None
                else min(_BACKOFF_CAP_S, s.backoff_s * 2 ** (retries - 1)) * (0.5 + jitter.random() / 2)
            )
            if failure.status == 429:
                self.state.pause(delay)
            if time.monotonic() + delay >= budget_end:
                raise self._final(failure, attempt, events, budget=delay)
            events[-1]["retry_in_s"] = round(delay, 3)
            self._sleep(delay, cancel, events)

    # --- one attempt ------------------------------------------------------------------------
    def _attempt(
        self, body: dict[str, Any], deadline: float, cancel: Callable[[], bool] | None, max_units: int
    ) -> _Outcome:
        conn = _Connection()
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
                    return _Outcome(
                        partial=conn.partial,
                        failure=_Failure(
                            "timeout",
                            f"no complete answer within timeout_s={self.settings.timeout_s:g} s (the connection was closed)",
                            retryable=True,
                        ),
                    )
        except BaseException:
            conn.abort()
            raise
        if "error" in box:
            return _Outcome(partial=conn.partial, failure=self._transport_failure(box["error"]))
        outcome: _Outcome = box["outcome"]
        return outcome

    def _exchange(self, body: dict[str, Any], deadline: float, conn: _Connection, max_units: int) -> _Outcome:
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
                return _Outcome(failure=self._http_failure(response.status_code, response.headers, raw))
            partial = conn.partial = Partial()
            if response.headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream":
                for event in httpx2.EventSource(response):
                    pieces = len(partial.text)
                    self.wire.feed(event.event, event.data, partial)
                    if partial.units > max_units:  # the piece over the limit is not part of the reply
                        del partial.text[pieces:]
                        partial.units = max_units
                        return _Outcome(partial=partial, cut=True)  # leaving the block closes the connection
                    if partial.done:
                        break
                return _Outcome(partial=partial)
            raw = response.read()
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return _Outcome(
                    failure=_Failure(
                        "server_error", f"the answer is not JSON: {raw[:200]!r}", response.status_code, True
                    )
                )
            if not isinstance(obj, dict):
                return _Outcome(
                    failure=_Failure(
                        "server_error",
                        f"the answer is not a JSON object: {raw[:200]!r}",
                        response.status_code,
                        True,
                    )
                )
            self.wire.read(obj, partial)
            return _Outcome(partial=partial)

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

    # --- failures ---------------------------------------------------------------------------
    def _http_failure(self, status: int, headers: Any, raw: bytes) -> _Failure:
        text = raw.decode("utf-8", "replace")
        try:
            message = self.wire.error_text(json.loads(text))
        except json.JSONDecodeError:
            message = text.strip()[:300] or "(no body)"
        message = f"HTTP {status}: {' '.join(message.split())[:400]}"
        if status == 429:
            return _Failure("rate_limited", message, status, True, _retry_after(headers))
        if status >= 500 or status in (408, 409, 425):
            return _Failure("server_error", message, status, True, _retry_after(headers))
        if status in (401, 403):
            return _Failure("auth", message, status)
        if status == 404:
            return _Failure("not_found", message, status)
        return _Failure("bad_request", message, status)

    def _transport_failure(self, exc: BaseException) -> _Failure:
        import httpx2

        if isinstance(exc, httpx2.TimeoutException):
            return _Failure("timeout", f"{type(exc).__name__}: no answer in time ({exc})", retryable=True)
        if isinstance(exc, httpx2.TransportError | OSError):
            return _Failure("network", f"{type(exc).__name__}: {exc}".strip(": "), retryable=True)
        raise exc

    def _stream_error(self, error: dict[str, Any]) -> _Failure:
        text = self.wire.error_text({"error": error})
        transient = re.search(
            r"overload|rate|server_error|api_error|unavailable|timeout|capacity", text, re.I
        )
        kind: ErrorKind = "server_error" if transient else "bad_request"
        return _Failure(kind, f"error in the answer: {text[:400]}", retryable=bool(transient))

    def _adapt(
        self,
        failure: _Failure,
        token_param: str,
        body: dict[str, Any],
        notes: list[str],
        events: list[dict[str, Any]],
    ) -> bool:
        """Adapt to a 400 that refuses one of our parameters (token_param=auto only); True to resend."""
        if failure.status not in (400, 422) or not _REFUSED.search(failure.reason):
            return False
        said = failure.reason.lower()
        auto = self.settings.token_param == "auto"
        if auto and token_param == "max_tokens" and "max_completion_tokens" in said:
            self.state.learn(token_param="max_completion_tokens")
        elif auto and token_param == "max_completion_tokens" and "max_completion_tokens" in said:
            self.state.learn(token_param="max_tokens")
        elif "stream_options" in body and "stream_options" in said:
            self.state.learn(drop="stream_options")
        elif "seed" in body and re.search(r"\bseed\b", said):
            self.state.learn(drop="seed")
            self._note("the endpoint refuses seed: replicates are sampled without one", notes, events)
        else:
            return False
        return True

    def _final(
        self, failure: _Failure, attempt: int, events: list[dict[str, Any]], budget: float | None = None
    ) -> ModelCallError:
        w, s = self.where, self.settings
        where = f"{self.endpoint.url} ({self.endpoint.provider})"
        fix = {
            "auth": f"the key in ${self.endpoint.api_key_env} was refused{'' if self.endpoint.key() else ' (it is not set)'}: "
            f"set a valid key there, or name another variable with {w} api_key_env=VAR",
            "not_found": f"check {w} base_url (OpenAI-compatible servers serve .../v1; Anthropic's is the bare host) and {w} model",
            "bad_request": f"check {w} model, max_tokens, temperature and stop",
        }.get(failure.kind, "")
        if failure.kind == "bad_request" and _CONTEXT.search(failure.reason):
            fix = f"the prompt and max_tokens exceed the model's context: lower {w} max_tokens or shorten the prompt (a local server may need a larger context, e.g. --n_ctx)"
        if failure.kind == "timeout":
            fix = f"raise {w} timeout_s, or lower {w} max_tokens (a small local model generates about 20 tokens a second)"
        if failure.retryable and budget is not None:
            fix = f"waiting {budget:.0f} s more would pass the call's wall_limit_s={s.wall_limit_s:g} s: raise {w} wall_limit_s, or lower the load ({w} max_concurrent, requests_per_minute, tokens_per_minute)"
        elif failure.retryable:
            fix = (
                (fix + "; " if fix else "")
                + f"raise {w} max_retries (now {s.max_retries}) or lower the load ({w} max_concurrent, requests_per_minute)"
            )
        message = f"{where}: {failure.reason} (after {attempt} attempt{'s' if attempt > 1 else ''}); {fix}"
        kind: ErrorKind = "budget" if budget is not None else failure.kind
        return ModelCallError(
            message, kind, status=failure.status, retryable=failure.retryable, attempts=attempt, events=events
        )

    # --- helpers ----------------------------------------------------------------------------
    def _token_param(self) -> str:
        configured = self.settings.token_param
        if configured != "auto":
            return configured
        return self.state.token_param or self.endpoint.default_token_param()

    def _note(self, note: str, notes: list[str], events: list[dict[str, Any]]) -> None:
        notes.append(note)
        events.append({"type": "note", "message": note})

    def _sleep(self, seconds: float, cancel: Callable[[], bool] | None, events: list[dict[str, Any]]) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if cancel is not None and cancel():
                raise CallCancelled("cancelled while waiting to retry", events)
            time.sleep(min(left, _POLL_S))

    def _request_event(self, attempt: int, body: dict[str, Any], request: ChatRequest) -> dict[str, Any]:
        shown = {k: v for k, v in body.items() if k not in ("messages", "system")}
        return {"type": "request", "attempt": attempt, "url": self.endpoint.url, **shown,
                "messages": len(request.messages), "prompt_chars": request.prompt_chars()}  # fmt: skip

    def _reply(
        self, request: ChatRequest, outcome: _Outcome, token_param: str, seconds: float, attempt: int,
        failures: list[str], events: list[dict[str, Any]], notes: list[str], t0: float,
    ) -> Reply:  # fmt: skip
        partial = outcome.partial
        assert partial is not None
        text = "".join(partial.text)
        finish = partial.finish or ("length" if outcome.cut else "stop")
        over = outcome.cut or (partial.tokens_out is not None and partial.tokens_out > request.max_tokens)
        if over:
            finish = "length"
            self._over_limit(token_param, request.max_tokens, outcome.cut, notes, events)
        estimated = partial.tokens_in is None or partial.tokens_out is None
        tokens_in = partial.tokens_in if partial.tokens_in is not None else request.prompt_chars() // 4
        tokens_out = (
            partial.tokens_out if partial.tokens_out is not None else (partial.units or len(text) // 4)
        )
        prices = self.settings.prices
        cost = estimate_cost(request.model, tokens_in, tokens_out, prices)
        if cost is None and partial.model:
            cost = estimate_cost(partial.model, tokens_in, tokens_out, prices)
        events.append(
            {"type": "reply", "attempt": attempt, "model": partial.model or request.model, "finish": finish,
             "tokens_in": tokens_in, "tokens_out": tokens_out, "seconds": round(seconds, 3), "text": text}
        )  # fmt: skip
        return Reply(
            text=text, model=partial.model or request.model, finish=finish, tokens_in=tokens_in,
            tokens_out=tokens_out, usage_estimated=estimated, cost_usd=cost,
            seconds=round(time.monotonic() - t0, 3), attempts=attempt, failures=failures, events=events, notes=notes,
        )  # fmt: skip

    def _over_limit(
        self, token_param: str, limit: int, cut: bool, notes: list[str], events: list[dict[str, Any]]
    ) -> None:
        """The endpoint generated past the limit it was sent: it does not read that field."""
        how = f"the client cut the stream at {limit} tokens" if cut else "the reply is longer than asked"
        if self.settings.token_param == "auto" and token_param == "max_completion_tokens":
            self.state.learn(token_param="max_tokens")
            note = (f"{self.endpoint.url} ignores max_completion_tokens ({how}); later calls send max_tokens "
                    f"(say so with {self.where} token_param=max_tokens)")  # fmt: skip
        else:
            note = (f"{self.endpoint.url} ignores {token_param} ({how}); stream=true lets the client enforce the "
                    f"limit, {self.where} token_param chooses the field sent")  # fmt: skip
        self._note(note, notes, events)
