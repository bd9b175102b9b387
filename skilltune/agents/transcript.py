"""From a CLI's event stream to a transcript: JSON lines, message text, tool calls and results.

Shared by the CLI parsers so that every backend writes tool activity the same way:
``[tool call] NAME ARGUMENTS`` and ``[NAME result] OUTPUT`` (``result (error)`` for a failed
call), each clipped to ``TOOL_TEXT_CHARS``.
"""

from __future__ import annotations

import json
from typing import Any

from skilltune.agents.base import Message

TOOL_TEXT_CHARS = 2000  # how much of a tool's input or output a transcript keeps


def clip(text: str, limit: int = TOOL_TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def parse_jsonl(lines: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """JSON objects of an event stream, and the lines that were not JSON (banners, warnings)."""
    events, other = [], []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            other.append(stripped)
            continue
        if isinstance(value, dict):
            events.append(value)
        else:
            other.append(stripped)
    return events, other


def tool_call_message(name: object, arguments: Any) -> Message:
    """The agent's call of tool ``name``; ``arguments`` shown as JSON unless they are already text."""
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return Message(role="assistant", content=clip(f"[tool call] {name} {shown}"))


def tool_result_message(name: object, output: str, error: bool = False) -> Message:
    """What tool ``name`` returned (``error``: the call failed)."""
    flag = " (error)" if error else ""
    return Message(role="tool", content=clip(f"[{name} result{flag}] {output}"))
