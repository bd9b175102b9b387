"""The two wire formats: OpenAI Chat Completions and Anthropic Messages, plain and streamed (SSE).

Requests are built field by field (nothing is renamed behind our back: the token limit goes
in the field the endpoint reads). Answers are read leniently, as local servers send them:
usage may be missing or arrive on any chunk, a stream may end without ``[DONE]`` or a
finish reason, and a server that ignored ``stream`` answers with one JSON object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from skilltune.modelcalls.settings import ChatRequest, ToolCall

ANTHROPIC_VERSION = "2023-06-01"
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


@dataclass
class Partial:
    """What an answer has said so far. ``units`` counts streamed pieces of generated text (a
    server sends about one token per piece), which is how a reply over its limit is noticed."""

    text: list[str] = field(default_factory=list)
    units: int = 0
    finish: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    error: dict[str, Any] | None = None  # an error reported inside a 200 answer or a stream
    done: bool = False
    tool_names: dict[int, str] = field(default_factory=dict)  # tool calls by index: name, argument pieces
    tool_args: dict[int, list[str]] = field(default_factory=dict)

    def add_tool(self, index: int, name: str | None, arguments: Any) -> None:
        """Fold a tool call, or a piece of one, into the answer (arguments: a JSON text piece or an object)."""
        if isinstance(name, str) and name:
            self.tool_names[index] = name
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if isinstance(arguments, str) and arguments:
            self.tool_args.setdefault(index, []).append(arguments)
            self.units += 1  # a call's arguments are generated tokens too

    def tool_calls(self) -> list[ToolCall]:
        calls = []
        for index in sorted(self.tool_names):
            raw = "".join(self.tool_args.get(index, []))
            parsed = _json(raw) if raw.strip() else {}
            calls.append(ToolCall(self.tool_names[index], parsed if isinstance(parsed, dict) else None, raw))
        return calls


class Wire(Protocol):
    def headers(self, key: str | None) -> dict[str, str]: ...

    def body(
        self, request: ChatRequest, token_param: str, stream: bool, dropped: frozenset[str]
    ) -> dict[str, Any]: ...

    def read(self, obj: dict[str, Any], into: Partial) -> None:
        """Fold one JSON answer (non-streamed) into ``into``."""

    def feed(self, event: str, data: str, into: Partial) -> None:
        """Fold one server-sent event into ``into``; sets ``done`` at the end of the stream."""

    def error_text(self, obj: Any) -> str: ...


_FIXED = ("model", "messages", "system", "stream", "max_tokens", "max_completion_tokens")


def _with_extra(body: dict[str, Any], request: ChatRequest, dropped: frozenset[str]) -> dict[str, Any]:
    """``body`` with the request's extra fields (never over the fixed ones), less the dropped."""
    merged = body | {k: v for k, v in request.extra.items() if k not in _FIXED}
    return {k: v for k, v in merged.items() if k not in dropped}


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        return None


class OpenAIChat:
    """POST .../chat/completions."""

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def body(
        self, request: ChatRequest, token_param: str, stream: bool, dropped: frozenset[str]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            token_param: request.max_tokens,
            "stream": stream,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body["seed"] = request.seed
        if request.stop:
            body["stop"] = list(request.stop)
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
                for t in request.tools
            ]  # fmt: skip
            body["tool_choice"] = request.tool_choice
        return _with_extra(body, request, dropped)

    def _usage(self, obj: dict[str, Any], into: Partial) -> None:
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("prompt_tokens"), int):
                into.tokens_in = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                into.tokens_out = usage["completion_tokens"]
        if isinstance(obj.get("model"), str) and obj["model"]:
            into.model = obj["model"]

    def read(self, obj: dict[str, Any], into: Partial) -> None:
        if isinstance(obj.get("error"), dict | str):
            into.error = obj["error"] if isinstance(obj["error"], dict) else {"message": obj["error"]}
            return
        self._usage(obj, into)
        choices = obj.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        message = first.get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        into.text.append(content if isinstance(content, str) else "")
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for index, call in enumerate(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                into.add_tool(index, function.get("name"), function.get("arguments"))
        into.finish = first.get("finish_reason") or "stop"
        into.done = True

    def feed(self, event: str, data: str, into: Partial) -> None:
        if data.strip() == "[DONE]":
            into.done = True
            return
        obj = _json(data)
        if not isinstance(obj, dict):
            return
        if obj.get("error"):
            into.error = obj["error"] if isinstance(obj["error"], dict) else {"message": str(obj["error"])}
            into.done = True
            return
        self._usage(obj, into)
        for choice in obj.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content") if isinstance(delta, dict) else None
            thought = (
                delta.get("reasoning_content") or delta.get("reasoning") if isinstance(delta, dict) else None
            )
            if isinstance(piece, str) and piece:
                into.text.append(piece)
                into.units += 1
            elif isinstance(thought, str) and thought:
                into.units += 1  # a reasoning model's thinking counts against the limit, not the text
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            for position, call in enumerate(calls if isinstance(calls, list) else []):
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    index = call.get("index", position)
                    into.add_tool(
                        index if isinstance(index, int) else position,
                        function.get("name"),
                        function.get("arguments"),
                    )
            if choice.get("finish_reason"):
                into.finish = choice["finish_reason"]

    def error_text(self, obj: Any) -> str:
        if isinstance(obj, dict):
            error = obj.get("error", obj)
            if isinstance(error, dict):
                return str(error.get("message") or error)
            return str(error)
        return str(obj)


class AnthropicMessages:
    """POST .../v1/messages."""

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(
        self, request: ChatRequest, token_param: str, stream: bool, dropped: frozenset[str]
    ) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in request.messages if m.role != "system"
            ],
            "stream": stream,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in request.tools
            ]  # fmt: skip
            body["tool_choice"] = {"type": "any" if request.tool_choice == "required" else "auto"}
        return _with_extra(body, request, dropped)

    def read(self, obj: dict[str, Any], into: Partial) -> None:
        if obj.get("type") == "error" or isinstance(obj.get("error"), dict):
            into.error = obj.get("error") if isinstance(obj.get("error"), dict) else {"message": str(obj)}
            return
        blocks = obj.get("content") or []
        into.text.append(
            "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        )
        for index, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                into.add_tool(index, block.get("name"), block.get("input"))
        usage = obj.get("usage") or {}
        into.tokens_in = usage.get("input_tokens") if isinstance(usage.get("input_tokens"), int) else None
        into.tokens_out = usage.get("output_tokens") if isinstance(usage.get("output_tokens"), int) else None
        into.model = obj.get("model") or into.model
        stop = obj.get("stop_reason") or "end_turn"
        into.finish = _FINISH.get(stop, stop)
        into.done = True

    def feed(self, event: str, data: str, into: Partial) -> None:
        obj = _json(data)
        if not isinstance(obj, dict):
            return
        kind = obj.get("type") or event
        if kind == "message_start":
            message = obj.get("message") or {}
            into.model = message.get("model") or into.model
            usage = message.get("usage") or {}
            if isinstance(usage.get("input_tokens"), int):
                into.tokens_in = usage["input_tokens"]
        elif kind == "content_block_start":
            block = obj.get("content_block") or {}
            if block.get("type") == "tool_use":  # its input streams as input_json_delta pieces
                into.add_tool(int(obj.get("index", 0)), block.get("name"), None)
        elif kind == "content_block_delta":
            delta = obj.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                into.text.append(delta["text"])
                into.units += 1
            elif delta.get("type") == "thinking_delta":
                into.units += 1
            elif delta.get("type") == "input_json_delta":
                into.add_tool(int(obj.get("index", 0)), None, delta.get("partial_json"))
        elif kind == "message_delta":
            stop = (obj.get("delta") or {}).get("stop_reason")
            if stop:
                into.finish = _FINISH.get(stop, stop)
            usage = obj.get("usage") or {}
            if isinstance(usage.get("output_tokens"), int):
                into.tokens_out = usage["output_tokens"]
        elif kind == "message_stop":
            into.done = True
        elif kind == "error":
            into.error = obj.get("error") if isinstance(obj.get("error"), dict) else {"message": data}
            into.done = True

    def error_text(self, obj: Any) -> str:
        if isinstance(obj, dict):
            error = obj.get("error", obj)
            if isinstance(error, dict):
                kind = error.get("type")
                message = error.get("message") or error
                return f"{kind}: {message}" if kind else str(message)
        return str(obj)


def wire_for(provider: str) -> Wire:
    return AnthropicMessages() if provider == "anthropic" else OpenAIChat()
