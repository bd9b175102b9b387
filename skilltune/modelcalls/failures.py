"""What a failed attempt means: its kind and whether to retry it, and the final error that names
the setting to change."""

from __future__ import annotations

import contextlib
import email.utils
import re
import time
from dataclasses import dataclass
from typing import Any

from skilltune.modelcalls.settings import CallSettings, Endpoint, ErrorKind, ModelCallError

CONTEXT = re.compile(r"context (length|window)|maximum context|too many tokens|n_ctx|context_length", re.I)
REFUSED = re.compile(
    r"unsupported|not supported|unrecogni[sz]ed|unknown|extra (fields|inputs)|not permitted|instead", re.I
)
_TRANSIENT = re.compile(r"overload|rate|server_error|api_error|unavailable|timeout|capacity", re.I)


@dataclass
class CallFailure:
    kind: ErrorKind
    reason: str  # one line: what the endpoint said
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None
    ignored: str | None = None  # a request parameter the endpoint does not honour: resend without it


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


def error_text(body: Any, fallback: str = "") -> str:
    """What an error body says: its message (Anthropic's with the error type in front)."""
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = error.get("message") or error
        kind = error.get("type") if body.get("type") == "error" else None
        return f"{kind}: {message}" if kind else str(message)
    text = str(error).strip() if error is not None else ""
    return text[:300] or fallback or "(no body)"


def http_failure(status: int, headers: Any, message: str) -> CallFailure:
    reason = f"HTTP {status}: {' '.join(message.split())[:400]}"
    if status == 429:
        return CallFailure("rate_limited", reason, status, True, retry_after(headers))
    if status >= 500 or status in (408, 409, 425):
        return CallFailure("server_error", reason, status, True, retry_after(headers))
    if status in (401, 403):
        return CallFailure("auth", reason, status)
    if status == 404:
        return CallFailure("not_found", reason, status)
    return CallFailure("bad_request", reason, status)


def answer_error(text: str) -> CallFailure:
    """An error the endpoint reported inside a 200 answer or a stream."""
    transient = bool(_TRANSIENT.search(text))
    kind: ErrorKind = "server_error" if transient else "bad_request"
    return CallFailure(kind, f"error in the answer: {' '.join(text.split())[:400]}", retryable=transient)


def final_error(
    failure: CallFailure,
    endpoint: Endpoint,
    settings: CallSettings,
    where: str,
    attempt: int,
    events: list[dict[str, Any]],
    budget: float | None = None,
    keys: dict[str, str] | None = None,
) -> ModelCallError:
    """The error a call ends with: the endpoint, what it said, and the setting ``where`` changes
    (``keys``: the caller's name of a setting where it differs, e.g. the judge's ``timeout``)."""
    w, s = where, settings
    timeout_key = (keys or {}).get("timeout_s", "timeout_s")
    wall_key = (keys or {}).get("wall_limit_s", "wall_limit_s")
    wall_label = (
        f"wall_limit_s={s.wall_limit_s:g} s"
        if wall_key == "wall_limit_s"
        else f"wall limit ({s.wall_limit_s:g} s)"
    )
    fix = {
        "auth": f"the key in ${endpoint.api_key_env} was refused{'' if endpoint.key() else ' (it is not set)'}: "
        f"set a valid key there, or name another variable with {w} api_key_env=VAR",
        "not_found": f"check {w} base_url (OpenAI-compatible servers serve .../v1; Anthropic's is the bare host) and {w} model",
        "bad_request": f"check {w} model, max_tokens, temperature and stop",
    }.get(failure.kind, "")
    if failure.kind == "bad_request" and CONTEXT.search(failure.reason):
        fix = f"the prompt and max_tokens exceed the model's context: lower {w} max_tokens or shorten the prompt (a local server may need a larger context, e.g. --n_ctx)"
    if failure.kind == "timeout":
        fix = f"raise {w} {timeout_key}, or lower {w} max_tokens (a small local model generates about 20 tokens a second)"
        if not s.stream:  # llama-cpp-python finishes a plain answer for a client that left
            fix += f"; with {w} stream=false a server may go on generating after the cut: use stream=true"
    if failure.retryable and budget is not None:
        fix = f"waiting {budget:.0f} s more would pass the call's {wall_label}: raise {w} {wall_key}, or lower the load ({w} max_concurrent, requests_per_minute, tokens_per_minute)"
    elif failure.retryable:
        fix = (
            (fix + "; " if fix else "")
            + f"raise {w} max_retries (now {s.max_retries}) or lower the load ({w} max_concurrent, requests_per_minute)"
        )
    where_to = f"{endpoint.url} ({endpoint.provider})"
    message = f"{where_to}: {failure.reason} (after {attempt} attempt{'s' if attempt > 1 else ''}); {fix}"
    kind: ErrorKind = "budget" if budget is not None else failure.kind
    return ModelCallError(
        message, kind, status=failure.status, retryable=failure.retryable, attempts=attempt, events=events
    )
