"""OpenAI Responses: POST .../responses (codex; always streaming).

A ``ToolCall`` whose arguments are a string becomes a ``custom_tool_call`` (a free-form
tool: codex's apply_patch takes raw patch text as ``input``); a dict becomes a
``function_call`` (codex's shell tool: ``exec_command`` with ``{"cmd": ...}``). Their
results come back as ``custom_tool_call_output`` / ``function_call_output`` items, which
``tool_results`` counts.
"""

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


def _started(item: dict[str, Any]) -> dict[str, Any]:
    """The item as ``response.output_item.added`` shows it: in progress, its payload still empty."""
    empty = {
        "message": ("content", []),
        "function_call": ("arguments", ""),
        "custom_tool_call": ("input", ""),
    }
    key, value = empty.get(item["type"], ("", None))
    return {**item, "status": "in_progress", **({key: value} if key else {})}


def _payload_events(index: int, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The delta/done events between an item's ``added`` and ``done`` (the real API's sequence)."""
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        part = item["content"][0]
        text = part["text"]
        empty_part = {**part, "text": ""}
        return [
            ("response.content_part.added", {**at, "content_index": 0, "part": empty_part}),
            ("response.output_text.delta", {**at, "content_index": 0, "delta": text}),
            ("response.output_text.done", {**at, "content_index": 0, "text": text}),
            ("response.content_part.done", {**at, "content_index": 0, "part": part}),
        ]
    if item["type"] == "function_call":
        args = item["arguments"]
        return [
            ("response.function_call_arguments.delta", {**at, "delta": args}),
            ("response.function_call_arguments.done", {**at, "arguments": args}),
        ]
    if item["type"] == "custom_tool_call":
        raw = item["input"]
        return [
            ("response.custom_tool_call_input.delta", {**at, "delta": raw}),
            ("response.custom_tool_call_input.done", {**at, "input": raw}),
        ]
    return []


def stream(request: ModelRequest, reply: Reply) -> list[str]:
    """SSE events in the order the real API sends them, usage in ``response.completed``."""
    items = _items(request, reply)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response(request, [], "in_progress")}),
        ("response.in_progress", {"response": _response(request, [], "in_progress")}),
    ]
    for index, item in enumerate(items):
        events.append(("response.output_item.added", {"output_index": index, "item": _started(item)}))
        events += _payload_events(index, item)
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    events.append(("response.completed", {"response": _response(request, items, "completed")}))
    return [sse(kind, {"type": kind, "sequence_number": n, **data}) for n, (kind, data) in enumerate(events)]


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "server_error" if status >= 500 else "invalid_request_error",
            "code": status,
        }
    }
