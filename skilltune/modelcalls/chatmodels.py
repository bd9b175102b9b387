"""LangChain chat models for one attempt: ChatOpenAI or ChatAnthropic on our HTTP client, what
their answers say, and what their errors mean.

Imported on a call's first attempt (LangChain and the vendor SDKs are heavy). Each attempt
builds its model (a few milliseconds) from the request's parameters, so the token limit goes in
the field the endpoint reads and parameters the endpoint refused are left out. LangChain's own
retries are off (``max_retries=0``); so is its response cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError

from skilltune.modelcalls.failures import CallFailure, answer_error, error_text, http_failure
from skilltune.modelcalls.settings import ChatMessage, ChatRequest, Endpoint, ToolCall
from skilltune.modelcalls.transport import NO_KEY

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
_BACKSTOP_S = 5.0


@dataclass
class Partial:
    """What an answer has said so far. ``units`` counts streamed pieces of generated text or
    tool-call arguments (a server sends about one token per piece): how a reply over its limit
    is noticed."""

    text: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)  # streamed pieces of the tool call's arguments
    units: int = 0
    finish: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tool_args: dict[str, Any] | None = None  # structured: the arguments of the tool call
    calls: list[ToolCall] = field(default_factory=list)  # every tool call of the answer
    parsed: BaseModel | None = None
    parse_error: str | None = None
    cut: bool = False  # the stream went past the limit and the client closed it
    raw_args: bool = False  # ``text`` is a tool call's arguments that are not JSON


class _Pieces(BaseCallbackHandler):
    """Counts the streamed pieces as they arrive; past ``limit``, marks the answer cut and calls
    ``stop`` (which closes the connection: the SDK's read then fails, and the call ends)."""

    def __init__(self, partial: Partial, limit: int, stop: Callable[[], None]) -> None:
        self.partial = partial
        self.limit = limit
        self.stop = stop
        self._last: Any = None

    def on_llm_new_token(
        self, token: str | list[str | dict[str, Any]], *, chunk: Any = None, **kwargs: Any
    ) -> Any:
        # langchain-openai reports each chunk and langchain-core reports it again: count it once.
        if chunk is None or chunk is self._last or self.partial.cut:
            return
        self._last = chunk
        message = getattr(chunk, "message", None)
        if message is None:
            return
        text = str(message.text)
        args = [str(c["args"]) for c in getattr(message, "tool_call_chunks", None) or [] if c.get("args")]
        if not (text or args):
            return
        if self.partial.units >= self.limit:  # the piece over the limit is not part of the reply
            self.partial.cut = True
            self.stop()
            return
        self.partial.units += 1
        if text:
            self.partial.text.append(text)
        self.partial.args.extend(args)


def messages_of(request: ChatRequest, provider: str) -> list[BaseMessage]:
    if provider == "anthropic":  # the Messages API has one system prompt, ahead of the turns
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        turns = [_message(m, provider) for m in request.messages if m.role != "system"]
        return [SystemMessage(content=system), *turns] if system else turns
    return [_message(m, provider) for m in request.messages]


def _message(message: ChatMessage, provider: str) -> BaseMessage:
    if message.role == "system":
        return SystemMessage(content=message.content)
    if message.role == "user":
        return HumanMessage(content=message.content)
    if message.role == "tool":
        return ToolMessage(content=message.content, tool_call_id=message.tool_call_id or "")
    calls = [
        {"name": c.name, "args": dict(c.arguments), "id": c.id, "type": "tool_call"}
        for c in message.tool_calls
    ]
    # ChatOpenAI sends an empty content beside tool calls as null, which llama-cpp-python's server
    # refuses (a 500 on every later turn): a blank keeps it a string (Anthropic refuses blank text)
    blank = " " if provider == "openai" and calls and not message.content else ""
    return AIMessage(content=message.content or blank, tool_calls=calls)


def request_params(
    request: ChatRequest,
    provider: str,
    token_param: str,
    stream: bool,
    dropped: frozenset[str],
    schema: type[BaseModel] | None = None,
) -> dict[str, Any]:
    """The parameters sent besides the messages and tool schemas (shown in the request event);
    the optional ones the endpoint refused (``dropped``) are left out."""
    params: dict[str, Any] = {"model": request.model, token_param: request.max_tokens, "stream": stream}
    optional: dict[str, Any] = {}
    if request.temperature is not None:
        optional["temperature"] = request.temperature
    if schema is not None:  # with_structured_output forces the one tool
        params["tools"] = [schema.__name__]
        params["tool_choice"] = schema.__name__
    elif request.tools:  # offered: the model chooses whether to call one
        params["tools"] = [str(t.get("function", t).get("name", "")) for t in request.tools]
        params["tool_choice"] = "auto"
    if provider == "anthropic":
        if request.stop:
            optional["stop_sequences"] = list(request.stop)
    else:
        if schema is not None:
            optional["parallel_tool_calls"] = False
        if request.seed is not None:
            optional["seed"] = request.seed
        if request.stop:
            optional["stop"] = list(request.stop)
        if stream:
            optional["stream_options"] = {"include_usage": True}
    # the request's extra fields (response_format, top_p...) never replace the fields above
    optional |= {k: v for k, v in request.extra.items() if k not in params and k not in optional}
    return params | {k: v for k, v in optional.items() if k not in dropped}


# What ``build`` sends through the chat models' own settings; any other parameter is an extra
# field of the request, sent as it is (ChatOpenAI's extra_body, ChatAnthropic's model_kwargs).
_OWN = frozenset(
    {"model", "max_tokens", "max_completion_tokens", "stream", "temperature", "seed", "stop",
     "stop_sequences", "stream_options", "tools", "tool_choice", "parallel_tool_calls"}
)  # fmt: skip


def build(endpoint: Endpoint, key: str | None, params: dict[str, Any], timeout_s: float, http: Any) -> Any:
    """The chat model that sends ``params``, through ``http``."""
    import httpx2

    extra = {k: v for k, v in params.items() if k not in _OWN}
    backstop = httpx2.Timeout(timeout_s + _BACKSTOP_S, connect=min(timeout_s, 30.0))
    base = endpoint.url.rsplit(
        "/v1/messages" if endpoint.provider == "anthropic" else "/chat/completions", 1
    )[0]
    if endpoint.provider == "anthropic":
        import anthropic
        from langchain_anthropic import ChatAnthropic

        model = ChatAnthropic(
            model=params["model"], max_tokens=params["max_tokens"], temperature=params.get("temperature"),
            stop=params.get("stop_sequences"), streaming=params["stream"], base_url=base,
            api_key=key or NO_KEY, max_retries=0, cache=False, model_kwargs=extra,
        )  # fmt: skip
        # ChatAnthropic takes no http_client (langchain-anthropic 1.7): its SDK client is a cached
        # property, set here to one on our HTTP client.
        model.__dict__["_client"] = anthropic.Client(
            api_key=key or NO_KEY, base_url=base, max_retries=0, timeout=backstop, http_client=http
        )
        return model
    from langchain_openai import ChatOpenAI

    # ChatOpenAI sends its max_tokens as max_completion_tokens; an endpoint reading max_tokens gets
    # it in the request body as it is (extra_body).
    limit: dict[str, Any] = (
        {"max_completion_tokens": params["max_completion_tokens"], "extra_body": extra}
        if "max_completion_tokens" in params
        else {"extra_body": extra | {"max_tokens": params["max_tokens"]}}
    )
    return ChatOpenAI(
        model=params["model"], temperature=params.get("temperature"), seed=params.get("seed"),
        stop=params.get("stop"), streaming=params["stream"], stream_usage="stream_options" in params,
        base_url=base, api_key=key or NO_KEY, http_client=http, max_retries=0, timeout=backstop,
        use_responses_api=False, cache=False,
        disabled_params=None if "parallel_tool_calls" in params else {"parallel_tool_calls": None},
        **limit,
    )  # fmt: skip


def structured_runnable(model: Any, schema: type[BaseModel]) -> Runnable[Any, Any]:
    """``schema`` asked for by tool calling; the answer comes with the raw message."""
    runnable: Runnable[Any, Any] = model.with_structured_output(
        schema, method="function_calling", include_raw=True
    )
    return runnable


def answer(
    runnable: Runnable[Any, Any],
    messages: list[BaseMessage],
    partial: Partial,
    limit: int,
    stop: Callable[[], None],
    schema: type[BaseModel] | None = None,
) -> bool:
    """Ask ``runnable`` and fold its answer into ``partial``; True when the stream was cut at the
    token limit (``partial`` then holds the text up to it; ``stop`` closed the connection). Runs in
    the attempt's worker thread."""
    config: RunnableConfig = {"callbacks": [_Pieces(partial, limit, stop)]}
    try:
        result = runnable.invoke(messages, config=config)
    except Exception:
        if partial.cut:  # the read that failed when the connection was closed
            return _cut(partial)
        raise
    if partial.cut:
        return _cut(partial)
    if not isinstance(result, dict):
        _read(result, partial)
        return False
    _read(result["raw"], partial)  # structured: {"raw", "parsed", "parsing_error"}
    parsed, error = result.get("parsed"), result.get("parsing_error")
    if parsed is None and schema is not None and partial.tool_args is not None:
        # llama-cpp-python repeats the function name in every streamed delta and LangChain joins
        # them ("VerdictVerdict...": an unknown tool). The tool was forced: its arguments are the answer.
        with contextlib.suppress(ValidationError):
            parsed, error = schema.model_validate(partial.tool_args), None
    partial.parsed = parsed if isinstance(parsed, BaseModel) else None
    partial.parse_error = f"{type(error).__name__}: {error}" if error is not None else None
    return False


def _cut(partial: Partial) -> bool:
    """A stream the client cut: a forced tool call's arguments so far are the answer's text (a
    model answering through the tool streams no text; the caller may read what came before the
    cut, such as the complete items of a list)."""
    if not "".join(partial.text) and partial.args:
        partial.text = ["".join(partial.args)]
        partial.raw_args = True
    return True


def _read(message: BaseMessage, partial: Partial) -> None:
    partial.text = [str(message.text)]
    meta = message.response_metadata or {}
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    partial.finish = _FINISH.get(finish, finish) if isinstance(finish, str) else None
    model = meta.get("model_name") or meta.get("model")
    partial.model = model if isinstance(model, str) and model else None
    calls = getattr(message, "tool_calls", None) or []
    partial.tool_args = dict(calls[0]["args"]) if calls else None
    partial.calls = [
        ToolCall(str(c.get("id") or f"call_{i}"), str(c.get("name") or ""), dict(c.get("args") or {}))
        for i, c in enumerate(calls)
    ]
    invalid = getattr(message, "invalid_tool_calls", None) or []
    if not calls and invalid and not partial.text[0]:
        # arguments that are not JSON (cut at the token limit, say) are the answer's only text: the
        # caller may still read what came before the cut
        partial.text = [str(invalid[0].get("args") or "")]
        partial.raw_args = True
    usage = getattr(message, "usage_metadata", None)
    if usage:
        # A server that reports no input count in its stream (Anthropic-compatible servers send it
        # in message_start only; LangChain reads message_delta) leaves 0: unknown, not zero.
        partial.tokens_in = usage.get("input_tokens") or None
        partial.tokens_out = usage.get("output_tokens")


def failure_of(exc: BaseException, provider: str) -> CallFailure:
    """What an exception of the SDK, LangChain or the HTTP client says; raises any other."""
    import httpx2

    if provider == "anthropic":
        import anthropic as sdk
    else:
        import openai as sdk  # type: ignore[no-redef]
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message = error_text(body, str(getattr(exc, "message", "") or exc))
    if isinstance(exc, sdk.APIStatusError) and isinstance(status, int) and status >= 400:
        return http_failure(status, exc.response.headers, message)
    if isinstance(exc, sdk.APITimeoutError | httpx2.TimeoutException):
        return CallFailure("timeout", f"{type(exc).__name__}: no answer in time ({exc})", retryable=True)
    if isinstance(exc, sdk.APIConnectionError | httpx2.TransportError | OSError):
        cause: BaseException = exc
        while cause.__cause__ is not None:  # LangChain's error wraps the SDK's, which wraps httpx2's
            cause = cause.__cause__
        return CallFailure("network", f"{type(cause).__name__}: {cause}".strip(": "), retryable=True)
    if isinstance(exc, sdk.APIError):  # an error event inside a stream
        return answer_error(message)
    if isinstance(exc, ValueError) and exc.args and isinstance(exc.args[0], dict):
        return answer_error(error_text(exc.args[0]))  # LangChain's ValueError(error) for a 200 reporting one
    if isinstance(exc, ValueError | KeyError | TypeError):  # LangChain's word for an answer not of this API
        reason = f"the answer is not one of this API: {type(exc).__name__}: {exc}"
        return CallFailure("server_error", reason[:400], retryable=True)
    raise exc
