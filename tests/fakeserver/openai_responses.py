"""OpenAI Responses: POST .../responses (codex; always streaming)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, sse, text_of

_RESULT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def parse(path: str, body: dict[str, Any]) -> ModelRequest:
    items = body.get("input", [])
    items = items if isinstance(items, list) else [{"type": "message", "content": items}]
    tools = [
        str(t.get("name") or t.get("type") or "") for t in body.get("tools", []) or [] if isinstance(t, dict)
    ]
    fmt = ((body.get("text") or {}).get("format") or {}).get("type")
    return ModelRequest(
        api="responses",
        path=path,
        model=str(body.get("model", "")),
        tools=tools,
        tool_results=sum(1 for item in items if isinstance(item, dict) and item.get("type") in _RESULT_TYPES),
        text=text_of(body.get("instructions", "")) + "\n" + text_of(items),
        stream=bool(body.get("stream", True)),
        wants_json=fmt == "json_schema",
        body=body,
    )


def _items(request: ModelRequest, reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": "msg_fake",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, call in enumerate(reply.tool_calls):
        call_id = f"call_{i}_{call.call_id}"
        if isinstance(call.arguments, str):
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{i}",
                    "call_id": call_id,
                    "name": call.name,
                    "input": call.arguments,
                    "status": "completed",
                }
            )
        else:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": call_id,
                    "name": call.name,
                    "arguments": json.dumps(call.arguments),
                    "status": "completed",
                }
            )
    return items


def _response(request: ModelRequest, items: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": request.model,
        "output": items,
        "usage": {
            "input_tokens": INPUT_TOKENS,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        },
    }


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    return _response(request, _items(request, reply), "completed")


def stream(request: ModelRequest, reply: Reply) -> list[str]:
    items = _items(request, reply)
    out = [
        sse(
            "response.created",
            {"type": "response.created", "response": _response(request, [], "in_progress")},
        )
    ]
    for index, item in enumerate(items):
        out.append(
            sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(
                sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            )
        out.append(
            sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    out.append(
        sse(
            "response.completed",
            {"type": "response.completed", "response": _response(request, items, "completed")},
        )
    )
    return out


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "server_error" if status >= 500 else "invalid_request_error",
            "code": status,
        }
    }
