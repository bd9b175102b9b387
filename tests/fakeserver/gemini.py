"""Gemini: POST /v1beta/models/<model>:generateContent, :streamGenerateContent?alt=sse, :countTokens.

What the real gemini CLI (0.61) needs from it:

- streaming answers as SSE ``data:`` chunks, each a ``GenerateContentResponse``; text
  arrives split over chunks, a tool call as a ``functionCall`` part, the last chunk
  carries ``finishReason`` and the ``usageMetadata`` (the CLI takes each request's usage
  from its last chunk that has one; its stream-json ``output_tokens`` leave
  ``thoughtsTokenCount`` out, its ``total_tokens`` keep them);
- side calls without tools (the model router when no ``-m`` is given, loop checks):
  when ``generationConfig`` asks for JSON, an object valid for its
  ``responseJsonSchema`` / ``responseSchema`` (Gemini schema types are upper case:
  ``OBJECT``, ``STRING``, ``INTEGER``...), else a short text;
- ``countTokens`` answered with a total.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakeserver.core import INPUT_TOKENS, OUTPUT_TOKENS, ModelRequest, Reply, text_of

THOUGHT_TOKENS = 10  # thinking tokens: billed as output, reported apart from candidatesTokenCount
USAGE = {
    "promptTokenCount": INPUT_TOKENS,
    "candidatesTokenCount": OUTPUT_TOKENS,
    "thoughtsTokenCount": THOUGHT_TOKENS,
    "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS + THOUGHT_TOKENS,
}
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _schema(config: dict[str, Any]) -> dict[str, Any] | None:
    for key in ("responseJsonSchema", "responseSchema", "response_json_schema", "response_schema"):
        value = config.get(key)
        if isinstance(value, dict):
            return value
    return None


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
    config = body.get("generationConfig") or body.get("generation_config") or {}
    mime = config.get("responseMimeType") or config.get("response_mime_type")
    model = path.split("/models/", 1)[-1].split(":", 1)[0] if "/models/" in path else ""
    return ModelRequest(
        api="gemini",
        path=path,
        model=model,
        tools=tools,
        tool_results=results,
        text=text_of(body.get("systemInstruction", "")) + "\n" + text_of(contents),
        stream="streamgeneratecontent" in path.lower(),
        wants_json=mime == "application/json" or _schema(config) is not None,
        body=body,
    )


def instance_of(schema: dict[str, Any]) -> Any:
    """A small value valid for a (Gemini or JSON) schema: every property filled, enums' first value."""
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance_of(schema[key][0])
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "string")
    kind = str(kind).lower()
    if kind == "object":
        return {name: instance_of(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        return [instance_of(schema.get("items") or {}) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return False
    return "skilltune test"


def _side_text(request: ModelRequest, reply: Reply) -> Reply:
    """A JSON side call gets an answer valid for the schema it sent (the router's, the loop checker's)."""
    if request.tools or not request.wants_json:
        return reply
    config = request.body.get("generationConfig") or request.body.get("generation_config") or {}
    schema = _schema(config)
    if schema is None:
        return reply
    return Reply(text=json.dumps(instance_of(schema)))


def _parts(reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    for call in reply.tool_calls:
        args = call.arguments if isinstance(call.arguments, dict) else {"input": call.arguments}
        parts.append({"functionCall": {"name": call.name, "args": args}})
    return parts


def _response(request: ModelRequest, parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": request.model, "responseId": "fake-1"}
    if last:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = USAGE
    return out


def respond(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    if "counttokens" in request.path.lower():
        return {"totalTokens": INPUT_TOKENS}
    return _response(request, _parts(_side_text(request, reply)), last=True)


def stream(request: ModelRequest, reply: Reply) -> list[str]:
    """SSE chunks: the text in two pieces, then each function call, the last with usage and finishReason."""
    reply = _side_text(request, reply)
    pieces: list[list[dict[str, Any]]] = []
    text = reply.text or ""
    if text and not request.wants_json and len(text) > 1:
        cut = len(text) // 2
        pieces += [[{"text": text[:cut]}], [{"text": text[cut:]}]]
    elif text:
        pieces.append([{"text": text}])
    for part in _parts(Reply(tool_calls=reply.tool_calls)):
        pieces.append([part])
    if not pieces:
        pieces.append([{"text": ""}])
    chunks = [_response(request, parts, last=i == len(pieces) - 1) for i, parts in enumerate(pieces)]
    return [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "INTERNAL")}}
