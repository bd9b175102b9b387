"""Anthropic Messages: POST /v1/messages (claude posts ``/v1/messages?beta=true``, always ``stream: true``).

What the real ``claude`` binary (2.1.x) needs from a server, learnt the hard way:

- every ``tool_use`` id must be unique within the conversation: a repeated id (the same
  scripted call id in two turns) makes claude wait forever for a result it thinks it has;
  ids here carry the turn (the number of tool results already in the request);
- message ids are unique too (claude's stream-json output repeats them per content block);
- SSE: ``message_start`` (with ``usage.input_tokens``), ``content_block_start`` /
  ``content_block_delta`` / ``content_block_stop`` per block, ``message_delta`` (stop
  reason, ``usage.output_tokens``), ``message_stop``; claude sums ``input_tokens`` of
  ``message_start`` and ``output_tokens`` of ``message_delta`` per turn, so a rollout of n
  model calls reports n·INPUT_TOKENS in and n·OUTPUT_TOKENS out;
- errors as ``{"type": "error", "error": {"type": ..., "message": ...}}`` with the HTTP
  status; claude reports them in its result event as ``api_error_status``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, sse, text_of

_message_ids = itertools.count(1)


def parse(path: str, body: dict[str, Any]) -> ModelRequest:
    messages = body.get("messages", [])
    results = sum(
        1
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )
    output_config = body.get("output_config") or {}
    return ModelRequest(
        api="anthropic",
        path=path,
        model=str(body.get("model", "")),
        tools=[t.get("name", "") for t in body.get("tools", []) or []],
        tool_results=results,
        text=text_of(body.get("system", "")) + "\n" + text_of(messages),
        stream=bool(body.get("stream")),
        wants_json=isinstance(output_config, dict) and "format" in output_config,
        body=body,
    )


def _blocks(reply: Reply, turn: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text or reply.pieces is not None:
        blocks.append({"type": "text", "text": reply.text or ""})
    for i, call in enumerate(reply.tool_calls):
        args = call.arguments if isinstance(call.arguments, dict) else {"input": call.arguments}
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{turn}_{i}_{call.call_id}", "name": call.name, "input": args}
        )
    return blocks


def _usage(output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _stop(reply: Reply) -> str:
    if reply.finish:
        return "max_tokens" if reply.finish in ("length", "runaway") else reply.finish
    return "tool_use" if reply.tool_calls else "end_turn"


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{next(_message_ids)}",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": _blocks(reply, request.tool_results),
        "stop_reason": _stop(reply),
        "stop_sequence": None,
        "usage": _usage(OUTPUT_TOKENS if reply.usage_out is None else reply.usage_out),
    }


def stream(request: ModelRequest, reply: Reply) -> Iterator[str]:
    """The events of a streamed answer, made as they are sent (``pieces``: one text delta each)."""
    message = respond(request, reply) | {"content": [], "stop_reason": None, "usage": _usage(1)}
    yield sse("message_start", {"type": "message_start", "message": message})
    yield sse("ping", {"type": "ping"})
    for index, block in enumerate(_blocks(reply, request.tool_results)):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            texts = reply.pieces if reply.pieces is not None else [block["text"]]
            deltas: Iterable[dict[str, Any]] = ({"type": "text_delta", "text": t} for t in texts)
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        yield sse(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        )
        for delta in deltas:
            yield sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    out_tokens = OUTPUT_TOKENS if reply.usage_out is None else reply.usage_out
    yield sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop(reply), "stop_sequence": None},
            "usage": {"output_tokens": out_tokens},
        },
    )
    yield sse("message_stop", {"type": "message_stop"})


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
