"""One bounded model call: a token limit the endpoint reads, a wall clock that ends it, retries,
rate limits, and a cancel check that closes the connection at once (each attempt: attempt.py)."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import Any

from skilltune.agents.prices import estimate_cost
from skilltune.modelcalls.attempt import Attempts, Failure, Outcome
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
from skilltune.modelcalls.wire import wire_for

_POLL_S = 0.05
_BACKOFF_CAP_S = 30.0
_PARAM_FIXES = 3  # a call adapts to refused parameters at most this often (not counted as retries)
_CONTEXT = re.compile(r"context (length|window)|maximum context|too many tokens|n_ctx|context_length", re.I)
_REFUSED = re.compile(
    r"unsupported|not supported|unrecogni[sz]ed|unknown|extra (fields|inputs)|not permitted|instead", re.I
)


def _tokens_used(outcome: Outcome | None) -> int | None:
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
        self.attempts = Attempts(endpoint, self.wire)

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
            outcome: Outcome | None = None
            try:
                outcome = self.attempts.run(
                    body, min(a0 + s.timeout_s, budget_end), cancel, request.max_tokens, s.timeout_s
                )
            except CallCancelled as exc:
                events.append({"type": "cancelled", "attempt": attempt})
                raise CallCancelled(str(exc), events) from None
            finally:
                self.state.release(ticket, _tokens_used(outcome))
            failure = outcome.failure
            if failure is None and outcome.partial is not None and outcome.partial.error is not None:
                failure = self.attempts.stream_error(outcome.partial.error)
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

    def _adapt(
        self,
        failure: Failure,
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
        self, failure: Failure, attempt: int, events: list[dict[str, Any]], budget: float | None = None
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
            if not s.stream:  # llama-cpp-python finishes a plain answer for a client that left
                fix += f"; with {w} stream=false a server may go on generating after the cut: use stream=true"
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
        self, request: ChatRequest, outcome: Outcome, token_param: str, seconds: float, attempt: int,
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
            text=text, model=partial.model or request.model, finish=finish, tool_calls=partial.tool_calls(), tokens_in=tokens_in,
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
