"""Gemini: POST /v1beta/models/<model>:generateContent and :streamGenerateContent?alt=sse."""

from __future__ import annotations

import json
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, text_of

USAGE = {
    "promptTokenCount": INPUT_TOKENS,
    "candidatesTokenCount": OUTPUT_TOKENS,
    "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS,
}


def parse(path: str, body: dict[str, Any]) -> ModelRequest:
    contents = body.get("contents", [])
    tools = [
        decl.get("name", "")
        for tool in body.get("tools", []) or []
        for decl in (tool.get("functionDeclarations") or tool.get("function_declarations") or [])
    ]
    results = sum(
        1
        for c in contents
        for part in c.get("parts", [])
        if isinstance(part, dict) and ("functionResponse" in part or "function_response" in part)
    )
    config = body.get("generationConfig") or {}
    model = path.split("/models/", 1)[-1].split(":", 1)[0] if "/models/" in path else ""
    return ModelRequest(
        api="gemini",
        path=path,
        model=model,
        tools=tools,
        tool_results=results,
        text=text_of(body.get("systemInstruction", "")) + "\n" + text_of(contents),
        stream="streamGenerateContent" in path,
        wants_json=config.get("responseMimeType") == "application/json",
        body=body,
    )


def _candidate(reply: Reply) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    for call in reply.tool_calls:
        args = call.arguments if isinstance(call.arguments, dict) else {"input": call.arguments}
        parts.append({"functionCall": {"name": call.name, "args": args}})
    return {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    if "countTokens" in request.path:
        return {"totalTokens": INPUT_TOKENS}
    return {"candidates": [_candidate(reply)], "usageMetadata": USAGE, "modelVersion": request.model}


def stream(request: ModelRequest, reply: Reply) -> list[str]:
    return [f"data: {json.dumps(respond(request, reply))}\n\n"]


def error_body(status: int, message: str) -> dict[str, Any]:
    names = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
    return {"error": {"code": status, "message": message, "status": names.get(status, "INTERNAL")}}
