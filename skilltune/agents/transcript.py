"""From a CLI's event stream to a transcript: JSON lines, message text, tool calls and results.

Shared by the CLI parsers so that every backend writes tool activity the same way:
``[tool call] NAME ARGUMENTS`` and ``[NAME result] OUTPUT`` (``result (error)`` for a failed
call), each clipped to ``TOOL_TEXT_CHARS``; and every parser starts its AgentResult the same way
(``stream_result``).
"""

from __future__ import annotations

import json
from typing import Any

from skilltune.agents.base import AgentResult, Message
from skilltune.process import ProcessOutcome

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


def assistant_blocks(blocks: list[Any], tool_names: dict[str, str]) -> tuple[list[Message], str | None]:
    """The messages of a claude-like assistant message's content ``blocks`` (its non-blank text and
    its ``tool_use`` calls, whose ids are noted in ``tool_names``), and its last text (None: none)."""
    messages: list[Message] = []
    last_text: str | None = None
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            last_text = str(block["text"])
            messages.append(Message(role="assistant", content=last_text))
        elif block.get("type") == "tool_use":
            tool_names[str(block.get("id"))] = str(block.get("name"))
            messages.append(tool_call_message(block.get("name"), block.get("input", {})))
    return messages, last_text


def tool_result_messages(content: Any, tool_names: dict[str, str]) -> list[Message]:
    """The ``tool_result`` blocks of a claude-like user message's ``content`` (a list; anything else
    holds none), each named after its call in ``tool_names``."""
    messages = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            name = tool_names.get(str(block.get("tool_use_id")), "tool")
            text = content_text(block.get("content"))
            messages.append(tool_result_message(name, text, error=bool(block.get("is_error"))))
    return messages


def stream_result(
    outcome: ProcessOutcome,
    events: list[dict[str, Any]],
    messages: list[Message],
    final_text: str = "",
    *,
    model: str | None = None,
    turns: int | None = None,
    tokens: tuple[int | None, int | None] = (None, None),
    cost_usd: float | None = None,
) -> AgentResult:
    """An ``ok`` result of a CLI's event stream: the ``events`` kept, the transcript's ``messages``,
    the process's exit code and what the stream told; the parser then says how the run ended."""
    return AgentResult(
        status="ok",
        final_text=final_text,
        events=events,
        messages=messages,
        exit_code=outcome.returncode,
        model=model,
        tokens_in=tokens[0],
        tokens_out=tokens[1],
        cost_usd=cost_usd,
        turns=turns,
    )
