"""OpenAI Chat Completions: POST .../chat/completions (copilot, opencode, qwen).

What the real CLIs (copilot 1.0.x, qwen 0.15.x) accept from a server:

- streaming (``stream: true``, SSE ``data:`` lines, ``data: [DONE]`` last): a first chunk
  with the role, the text as ``content`` deltas, each tool call as a first delta carrying
  ``index``, ``id``, ``type`` and the function ``name`` with empty ``arguments``, then the
  arguments in fragments (as real endpoints send them: clients must accumulate), then a
  chunk with ``finish_reason``; token usage comes in a last chunk with ``choices: []``
  when the request asks for it (``stream_options.include_usage``, both CLIs do), else
  on the finishing chunk;
- tool-call ids unique across the conversation (they carry the turn, i.e. the number of
  tool results already in the request) and a fresh completion id per answer;
- non-streaming answers as one ``chat.completion`` object with ``usage``;
- errors as ``{"error": {"message", "type", "code"}}`` with the HTTP status; a
  ``retry-after`` header on a scripted failure (``Failure.headers``) shortens the
  CLIs' own retries (copilot waits at least 1 s per retry, qwen honours whole seconds
  for 429 only).

Side calls (no tools offered) get the core's plain or JSON answer; a request asking for
``response_format`` json_object / json_schema counts as wanting JSON.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, text_of

USAGE = {
    "prompt_tokens": INPUT_TOKENS,
    "completion_tokens": OUTPUT_TOKENS,
    "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
}
_completion_ids = itertools.count(1)
_ARGUMENT_FRAGMENTS = 3


def parse(path: str, body: dict[str, Any]) -> ModelRequest:
    messages = body.get("messages", []) or []
    tools = [
        str((t.get("function") or {}).get("name", ""))
        for t in body.get("tools", []) or []
        if isinstance(t, dict)
    ]
    fmt = body.get("response_format") or {}
    return ModelRequest(
        api="chat",
        path=path,
        model=str(body.get("model", "")),
        tools=tools,
        tool_results=sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool"),
        text=text_of(messages),
        stream=bool(body.get("stream")),
        wants_json=isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"),
        body=body,
    )


def _tool_calls(request: ModelRequest, reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_t{request.tool_results}_{i}_{call.call_id}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(call.arguments),
            },
        }
        for i, call in enumerate(reply.tool_calls)
    ]


def _usage(reply: Reply) -> dict[str, int]:
    if reply.usage_out is None:
        return USAGE
    return {"prompt_tokens": INPUT_TOKENS, "completion_tokens": reply.usage_out,
            "total_tokens": INPUT_TOKENS + reply.usage_out}  # fmt: skip


def _finish(reply: Reply) -> str:
    if reply.finish:
        return "length" if reply.finish == "runaway" else reply.finish
    return "tool_calls" if reply.tool_calls else "stop"


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(request, reply)
    return {
        "id": f"chatcmpl-fake-{next(_completion_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": _usage(reply),
    }


def _fragments(text: str, parts: int = _ARGUMENT_FRAGMENTS) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream(request: ModelRequest, reply: Reply) -> Iterator[str]:
    """The chunks of a streamed answer, made as they are sent (a runaway answer is endless)."""
    completion_id = f"chatcmpl-fake-{next(_completion_ids)}"

    def chunk(choices: list[dict[str, Any]], usage: bool = False) -> str:
        payload: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": request.model,
            "choices": choices,
        }
        if usage:
            payload["usage"] = _usage(reply)
        return f"data: {json.dumps(payload)}\n\n"

    def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": content, "finish_reason": finish}

    yield chunk([delta({"role": "assistant", "content": ""})])
    if reply.pieces is not None:
        for piece in reply.pieces:
            yield chunk([delta({"content": piece})])
    elif reply.text:
        yield chunk([delta({"content": reply.text})])
    for index, call in enumerate(_tool_calls(request, reply)):
        head = {"index": index, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        yield chunk([delta({"tool_calls": [head]})])
        parts = reply.tool_calls[index].fragments if index < len(reply.tool_calls) else None
        for piece in _fragments(call["function"]["arguments"], parts or _ARGUMENT_FRAGMENTS):
            yield chunk([delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})])
    usage_chunk = bool((request.body.get("stream_options") or {}).get("include_usage"))
    yield chunk([delta({}, _finish(reply))], usage=not usage_chunk)
    if usage_chunk:
        yield chunk([], usage=True)
    yield "data: [DONE]\n\n"


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
        status, "server_error"
    )
    return {"error": {"message": message, "type": kind, "code": status}}
