"""One bounded model call: a token limit the endpoint reads, a wall clock that ends it, retries,
rate limits, and a cancel check that closes the connection at once; the answer as text, or as a
pydantic model through structured output.

The call itself goes through a LangChain chat model (chatmodels.py) on our HTTP client
(transport.py); the loop here decides what each attempt sends and what its failure means.
"""

from __future__ import annotations

import importlib
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from skilltune.errors import UsageError
from skilltune.modelcalls.failures import REFUSED, CallFailure, final_error
from skilltune.modelcalls.limits import endpoint_state
from skilltune.modelcalls.prices import estimate_cost
from skilltune.modelcalls.settings import CallCancelled, CallSettings, ChatRequest, Endpoint, Reply
from skilltune.modelcalls.transport import Connection, http_client, run_attempt

if TYPE_CHECKING:
    from skilltune.modelcalls.chatmodels import Partial

_S = TypeVar("_S", bound=BaseModel)
_POLL_S = 0.05
_BACKOFF_CAP_S = 30.0
_PARAM_FIXES = 3  # a call adapts to refused parameters at most this often (not counted as retries)
_EMPTY_STREAM = "No generations found in stream"  # LangChain's word for a stream with no answer in it
_LEARNABLE = ("stream_options", "parallel_tool_calls")  # parameters left out once an endpoint refuses them


@dataclass
class _Outcome:
    partial: Partial
    failure: CallFailure | None = None
    cut: bool = False  # the client stopped reading: the stream ran past the token limit


def _used(partial: Partial) -> int:
    """The answer's output tokens: as the server reported them, else the streamed pieces."""
    return partial.tokens_out if partial.tokens_out is not None else partial.units


def _tokens_used(outcome: _Outcome | None) -> int | None:
    """The tokens an attempt used, as the endpoint counted them (None: unknown)."""
    partial = outcome.partial if outcome is not None else None
    if partial is None or partial.tokens_in is None:
        return None
    return partial.tokens_in + _used(partial)


class ModelClient:
    """Calls to one endpoint under one set of limits. Thread-safe: share one per endpoint.

    ``where`` is how the caller's user sets options (``--proposer-opt``, ``--agent-opt``): error
    messages name the setting to change with it (by ``keys``' name where the caller's differs).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        settings: CallSettings,
        *,
        where: str = "option",
        keys: dict[str, str] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.settings = settings
        self.where = where
        self.keys = keys or {}
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
        return self._call(request, None, cancel)[0]

    def structured(
        self, request: ChatRequest, schema: type[_S], *, cancel: Callable[[], bool] | None = None
    ) -> tuple[_S | None, Reply]:
        """``schema`` filled in by the model through a forced tool call, and the Reply; the model is
        None when the answer has no tool call or one that does not validate (the Reply's text is
        then the answer's text, or the tool call's arguments as JSON; ``notes`` say which)."""
        reply, partial = self._call(request, schema, cancel)
        return (partial.parsed if isinstance(partial.parsed, schema) else None), reply

    def _call(
        self, request: ChatRequest, schema: type[BaseModel] | None, cancel: Callable[[], bool] | None
    ) -> tuple[Reply, Partial]:
        self._load()
        from skilltune.modelcalls.chatmodels import request_params

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
            stream = s.stream and "stream" not in self.state.dropped
            params = request_params(
                request, self.endpoint.provider, token_param, stream, self.state.dropped, schema
            )
            events.append(self._request_event(attempt, params, request))
            outcome: _Outcome | None = None
            try:
                outcome = self._attempt(request, schema, params, min(a0 + s.timeout_s, budget_end), cancel)
            except CallCancelled as exc:
                events.append({"type": "cancelled", "attempt": attempt})
                raise CallCancelled(str(exc), events) from None
            finally:
                self.state.release(ticket, _tokens_used(outcome))
            failure = outcome.failure
            if failure is None:
                reply = self._reply(request, schema, outcome, token_param, time.monotonic() - a0,
                                    attempt, failures, events, notes, t0)  # fmt: skip
                return reply, outcome.partial
            fixed = (
                self._adapt(failure, token_param, params, notes, events) if fixes < _PARAM_FIXES else False
            )
            events.append({"type": "error", "attempt": attempt, "kind": failure.kind,
                           "status": failure.status, "message": failure.reason})  # fmt: skip
            failures.append(f"{failure.kind}: {failure.reason}")
            if fixed:
                fixes += 1
                continue
            if not failure.retryable or retries >= s.max_retries:
                raise final_error(failure, self.endpoint, s, self.where, attempt, events, keys=self.keys)
            retries += 1
            delay = (
                failure.retry_after
                if failure.retry_after is not None
                else min(_BACKOFF_CAP_S, s.backoff_s * 2 ** (retries - 1)) * (0.5 + jitter.random() / 2)
            )
            if failure.status == 429:
                self.state.pause(delay)
            if time.monotonic() + delay >= budget_end:
                raise final_error(
                    failure, self.endpoint, s, self.where, attempt, events, budget=delay, keys=self.keys
                )
            events[-1]["retry_in_s"] = round(delay, 3)
            self._sleep(delay, cancel, events)

    def _load(self) -> None:
        """Import LangChain for this endpoint's provider and make the HTTP client, before any clock runs."""
        package = "langchain_anthropic" if self.endpoint.provider == "anthropic" else "langchain_openai"
        try:
            importlib.import_module("skilltune.modelcalls.chatmodels")
            importlib.import_module(package)
        except ImportError as exc:
            raise UsageError(
                f"model calls need LangChain ({exc.name or package} is missing): pip install 'skilltune[api]'"
            ) from None
        with self._http_lock:
            if self._http is None:
                self._http = http_client()

    # --- one attempt ------------------------------------------------------------------------
    def _attempt(
        self,
        request: ChatRequest,
        schema: type[BaseModel] | None,
        params: dict[str, Any],
        deadline: float,
        cancel: Callable[[], bool] | None,
    ) -> _Outcome:
        from skilltune.modelcalls import chatmodels

        provider = self.endpoint.provider
        model = chatmodels.build(
            self.endpoint, self.endpoint.key(), params, self.settings.timeout_s, self._http
        )
        runnable = chatmodels.structured_runnable(model, schema) if schema is not None else model
        if schema is None and request.tools:
            # "auto" said outright: llama-cpp-python's chatml-function-calling ignores tools without it
            runnable = model.bind_tools(list(request.tools), tool_choice="auto")
        messages = chatmodels.messages_of(request, provider)
        partial = chatmodels.Partial()
        conn = Connection()

        def work() -> bool:
            cut = chatmodels.answer(runnable, messages, partial, request.max_tokens, conn.abort, schema)
            if not conn.requests:  # the wall clock and cancel could not end this call: say so loudly
                raise RuntimeError(
                    f"the LangChain {provider} model did not send through skilltune's HTTP client"
                )
            return cut

        ended = run_attempt(work, conn, deadline, cancel)
        if ended.timed_out:
            reason = f"no complete answer within timeout_s={self.settings.timeout_s:g} s (the connection was closed)"
            return _Outcome(partial, CallFailure("timeout", reason, retryable=True))
        if ended.error is not None and not conn.requests:
            raise ended.error  # LangChain or the SDK refused the call before sending it: a bug of ours
        if ended.error is not None and conn.unstreamed:
            reason = "the endpoint answered stream=true with one JSON object (it does not stream)"
            return _Outcome(partial, CallFailure("server_error", reason, ignored="stream"))
        if (
            ended.error is not None
            and request.tools
            and params["stream"]
            and _EMPTY_STREAM in str(ended.error)
        ):
            # llama-cpp-python cannot stream a tool call the model chose (tool_choice auto): it ends
            # the stream empty; unstreamed it answers
            reason = (
                "the endpoint sent an empty stream to a request offering tools (it cannot stream tool calls)"
            )
            return _Outcome(partial, CallFailure("server_error", reason, ignored="stream"))
        if ended.error is not None:
            return _Outcome(partial, chatmodels.failure_of(ended.error, provider))
        return _Outcome(partial, cut=bool(ended.result))

    # --- failures ---------------------------------------------------------------------------
    def _adapt(
        self,
        failure: CallFailure,
        token_param: str,
        params: dict[str, Any],
        notes: list[str],
        events: list[dict[str, Any]],
    ) -> bool:
        """Adapt to a 400 that refuses one of our parameters (token_param=auto only) or to an endpoint
        that does not stream; True to resend."""
        if failure.ignored == "stream":
            self.state.learn(drop="stream")
            note = (f"{self.endpoint.url} does not stream: later calls ask for one JSON answer (the client "
                    f"cannot cut a reply past its limit, timeout_s still ends it; {self.where} stream=false says so)")  # fmt: skip
            self._note(note, notes, events)
            return True
        if failure.status not in (400, 422) or not REFUSED.search(failure.reason):
            return False
        said = failure.reason.lower()
        auto = self.settings.token_param == "auto"
        learnable = next((p for p in _LEARNABLE if p in params and p in said), None)
        if auto and token_param == "max_tokens" and "max_completion_tokens" in said:
            self.state.learn(token_param="max_completion_tokens")
        elif auto and token_param == "max_completion_tokens" and "max_completion_tokens" in said:
            self.state.learn(token_param="max_tokens")
        elif learnable is not None:
            self.state.learn(drop=learnable)
        elif "seed" in params and re.search(r"\bseed\b", said):
            self.state.learn(drop="seed")
            self._note("the endpoint refuses seed: replicates are sampled without one", notes, events)
        else:
            return False
        return True

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

    def _request_event(self, attempt: int, params: dict[str, Any], request: ChatRequest) -> dict[str, Any]:
        return {"type": "request", "attempt": attempt, "url": self.endpoint.url, **params,
                "messages": len(request.messages), "prompt_chars": request.prompt_chars()}  # fmt: skip

    def _reply(
        self, request: ChatRequest, schema: type[BaseModel] | None, outcome: _Outcome, token_param: str,
        seconds: float, attempt: int, failures: list[str], events: list[dict[str, Any]], notes: list[str],
        t0: float,
    ) -> Reply:  # fmt: skip
        partial = outcome.partial
        text = "".join(partial.text)
        finish = partial.finish or ("length" if outcome.cut else "stop")
        over = outcome.cut or (partial.tokens_out is not None and partial.tokens_out > request.max_tokens)
        if over:
            finish = "length"
            self._over_limit(token_param, request.max_tokens, outcome.cut, notes, events)
        elif schema is not None and finish != "length" and _used(partial) >= request.max_tokens:
            # llama-cpp-python ends a forced tool call cut at max_tokens with finish "tool_calls": a
            # structured answer that used its whole limit is read as cut (the caller keeps what is
            # complete). Text answers keep the finish the server gave.
            self._note(f"the answer used its whole token limit ({request.max_tokens}) and ended "
                       f"{finish!r}: read as cut at the limit", notes, events)  # fmt: skip
            finish = "length"
        if schema is not None and not outcome.cut:
            text = self._structured_text(schema, partial, text, notes, events)
        elif schema is not None and partial.raw_args:
            self._note(
                f"the {schema.__name__} tool call was cut: its arguments so far are the text", notes, events
            )
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
            | ({"parsed": partial.parsed is not None} if schema is not None else {})
            | ({"tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in partial.calls]}
               if schema is None and partial.calls else {})
        )  # fmt: skip
        return Reply(
            text=text, model=partial.model or request.model, finish=finish, tokens_in=tokens_in,
            tokens_out=tokens_out, usage_estimated=estimated, cost_usd=cost,
            seconds=round(time.monotonic() - t0, 3), attempts=attempt, failures=failures, events=events, notes=notes,
            tool_calls=list(partial.calls) if schema is None and not outcome.cut else [],
        )  # fmt: skip

    def _structured_text(
        self,
        schema: type[BaseModel],
        partial: Partial,
        text: str,
        notes: list[str],
        events: list[dict[str, Any]],
    ) -> str:
        """The Reply's text of a structured answer, with a note when it was not parsed."""
        name = schema.__name__
        if partial.parsed is not None:
            return text
        if partial.raw_args:
            self._note(f"the {name} tool call's arguments are not JSON: returned as the text", notes, events)
            return text
        if partial.tool_args is None:
            self._note(
                f"the model answered without a {name} tool call: its text is returned unparsed", notes, events
            )
            return text
        self._note(
            f"the {name} tool call does not validate ({(partial.parse_error or '')[:300]})", notes, events
        )
        return text or json.dumps(partial.tool_args)

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
