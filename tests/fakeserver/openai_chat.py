"""OpenAI Chat Completions: POST .../chat/completions (copilot, opencode, qwen)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, text_of

USAGE = {
    "prompt_tokens": INPUT_TOKENS,
    "completion_tokens": OUTPUT_TOKENS,
    "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
}


def parse(path: str, body: dict[str, Any]) -> ModelRequest:
    messages = body.get("messages", [])
    tools = [
        t.get("function", {}).get("name", "") for t in body.get("tools", []) or [] if isinstance(t, dict)
    ]
    fmt = body.get("response_format") or {}
    return ModelRequest(
        api="chat",
        path=path,
        model=str(body.get("model", "")),
        tools=tools,
        tool_results=sum(1 for m in messages if m.get("role") == "tool"),
        text=text_of(messages),
        stream=bool(body.get("stream")),
        wants_json=fmt.get("type") in ("json_object", "json_schema"),
        body=body,
    )


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{i}_{call.call_id}",
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


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": request.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
        ],
        "usage": USAGE,
    }


def _chunk(
    request: ModelRequest, delta: dict[str, Any], finish: str | None = None, usage: bool = False
) -> str:
    payload: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": request.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        payload["usage"] = USAGE
    return f"data: {json.dumps(payload)}\n\n"


def stream(request: ModelRequest, reply: Reply) -> list[str]:
    out = [_chunk(request, {"role": "assistant", "content": ""})]
    if reply.text:
        out.append(_chunk(request, {"content": reply.text}))
    for index, call in enumerate(_tool_calls(reply)):
        out.append(_chunk(request, {"tool_calls": [{"index": index, **call}]}))
    finish = "tool_calls" if reply.tool_calls else "stop"
    out.append(_chunk(request, {}, finish, usage=True))
    out.append("data: [DONE]\n\n")
    return out


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
        status, "server_error"
    )
    return {"error": {"message": message, "type": kind, "code": status}}
