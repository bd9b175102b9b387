"""Anthropic Messages: POST /v1/messages (claude sends ``stream: true``)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, sse, text_of


def parse(path: str, body: dict[str, Any]) -> ModelRequest:
    messages = body.get("messages", [])
    results = sum(
        1
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )
    return ModelRequest(
        api="anthropic",
        path=path,
        model=str(body.get("model", "")),
        tools=[t.get("name", "") for t in body.get("tools", []) or []],
        tool_results=results,
        text=text_of(body.get("system", "")) + "\n" + text_of(messages),
        stream=bool(body.get("stream")),
        wants_json=False,
        body=body,
    )


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for i, call in enumerate(reply.tool_calls):
        args = call.arguments if isinstance(call.arguments, dict) else {"input": call.arguments}
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{i}_{call.call_id}", "name": call.name, "input": args}
        )
    return blocks


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": _blocks(reply),
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
    }


def stream(request: ModelRequest, reply: Reply) -> list[str]:
    message = respond(request, reply) | {"content": [], "stop_reason": None}
    message["usage"] = {"input_tokens": INPUT_TOKENS, "output_tokens": 1}
    out = [sse("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(_blocks(reply)):
        if block["type"] == "text":
            out.append(
                sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            out.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
            )
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            out.append(
                sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            out.append(
                sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = "tool_use" if reply.tool_calls else "end_turn"
    out.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": OUTPUT_TOKENS},
            },
        )
    )
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
