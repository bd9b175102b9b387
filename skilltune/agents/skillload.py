"""Which skills an agent CLI loaded, read from the events it printed (what trigger mode scores).

A skill folder installed natively (placement ``native``) is listed to the model by name and
description and loaded on demand. Each CLI shows a load its own way (as seen with the real CLIs
against tests/fakeserver, see docs/trigger.md):

- a call of its skill tool naming the skill: claude's ``Skill`` ``{"skill": NAME}`` and qwen's
  ``skill`` (``tool_use`` blocks of ``assistant`` events), copilot's ``skill`` ``{"skill": NAME}``
  (``tool.execution_start``), gemini's ``activate_skill`` ``{"name": NAME}`` (``tool_use``
  events), opencode's ``skill`` ``{"name": NAME}`` (``tool_use`` parts);
- a read of the skill's ``SKILL.md`` by any tool (a shell command, a file read) whose arguments
  name ``<name>/SKILL.md``: the only way for codex and cursor, which have no skill tool, and
  counted on the others too (a model may read the file instead of calling the tool).

A load of another skill (a catalogue skill, one the CLI bundles) is not a load of the candidate.
``record`` sets ``AgentResult.skill_loaded`` and adds a ``skilltune.skill_loads`` event naming
every skill loaded; ``keep_tool`` keeps the skill tool in a restricted tool list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from skilltune.agents.base import AgentRequest, AgentResult

ToolCall = tuple[str, Any]  # (tool name, its arguments: a dict, or text such as a shell command)
CallReader = Callable[[list[dict[str, Any]]], Iterator[ToolCall]]
LOADS_EVENT = "skilltune.skill_loads"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def anthropic_calls(events: list[dict[str, Any]]) -> Iterator[ToolCall]:
    """``tool_use`` blocks of ``assistant`` events (claude, qwen, cursor's claude-like stream)."""
    for event in events:
        if event.get("type") != "assistant":
            continue
        content = _dict(event.get("message")).get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield str(block.get("name")), block.get("input")


def copilot_calls(events: list[dict[str, Any]]) -> Iterator[ToolCall]:
    """copilot's ``tool.execution_start`` events: ``data.toolName`` and ``data.arguments``."""
    for event in events:
        if event.get("type") == "tool.execution_start":
            data = _dict(event.get("data"))
            yield str(data.get("toolName")), data.get("arguments")


def gemini_calls(events: list[dict[str, Any]]) -> Iterator[ToolCall]:
    """gemini's ``tool_use`` events: ``tool_name`` and ``parameters``."""
    for event in events:
        if event.get("type") == "tool_use":
            yield str(event.get("tool_name")), event.get("parameters")


def opencode_calls(events: list[dict[str, Any]]) -> Iterator[ToolCall]:
    """opencode's ``tool_use`` events: ``part.tool`` and ``part.state.input``."""
    for event in events:
        if event.get("type") == "tool_use":
            part = _dict(event.get("part"))
            yield str(part.get("tool")), _dict(part.get("state")).get("input")


def codex_calls(events: list[dict[str, Any]]) -> Iterator[ToolCall]:
    """codex's items: a ``command_execution`` (its shell command) or an ``mcp_tool_call``."""
    for event in events:
        item = _dict(event.get("item"))
        if event.get("type") not in ("item.started", "item.completed"):
            continue
        if item.get("type") == "command_execution":
            yield "shell", str(item.get("command") or "")
        elif item.get("type") == "mcp_tool_call":
            yield str(item.get("tool")), item.get("arguments")


def cursor_calls(events: list[dict[str, Any]]) -> Iterator[ToolCall]:
    """cursor-agent's ``tool_call`` events (``started``: ``{"readToolCall": {"args": {...}}}``)
    and the ``tool_use`` blocks of its claude-like ``assistant`` events."""
    yield from anthropic_calls(events)
    for event in events:
        call = _dict(event.get("tool_call"))
        if event.get("type") == "tool_call" and event.get("subtype") == "started" and call:
            key, body = next(iter(call.items()))
            body = _dict(body)
            yield str(body.get("name") or key), body.get("args", body.get("arguments"))


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def reads_skill_file(arguments: Any, name: str) -> bool:
    """Whether a tool call's ``arguments`` name skill ``name``'s SKILL.md (``cat .agents/skills/NAME/
    SKILL.md``, ``{"file_path": "/ws/.claude/skills/NAME/SKILL.md"}``, ``cat NAME/SKILL.md``)."""
    pattern = rf"(?:^|[\s/'\"=:(]){re.escape(name)}/SKILL\.md\b"
    return re.search(pattern, _text(arguments)) is not None


@dataclass(frozen=True)
class SkillLoads:
    """How one CLI shows a skill load: its tool calls (``calls``), the names of its skill tool
    (none for a CLI whose model reads SKILL.md itself) and the argument that names the skill."""

    calls: CallReader
    tools: tuple[str, ...] = ()
    name_keys: tuple[str, ...] = ("skill", "name")

    def loaded(self, events: list[dict[str, Any]], known: tuple[str, ...] = ()) -> list[str]:
        """The skills loaded in ``events``, in the order first loaded: each named in a skill tool
        call, and each of ``known`` whose SKILL.md a call reads."""
        found: list[str] = []
        for tool, arguments in self.calls(events):
            names = [n for n in known if reads_skill_file(arguments, n)]
            if tool in self.tools and isinstance(arguments, dict):
                named = next((arguments[k] for k in self.name_keys if isinstance(arguments.get(k), str)), "")
                names.insert(0, named.strip().lstrip("/"))
            found += [n for n in names if n and n not in found]
        return found

    def keep_tool(self, tools: list[str] | None, placed: bool) -> list[str] | None:
        """A copy of the tool list an agent is restricted to (``tools``; None: no restriction, kept
        so) with the skill tool added when a skill folder is ``placed``: without it the CLI would not
        list the candidate, and the difficulty lever would switch the candidate off."""
        if tools is None:
            return None
        kept = list(tools)
        if placed and self.tools and self.tools[0] not in kept:
            kept.append(self.tools[0])
        return kept

    def record(
        self, result: AgentResult, events: list[dict[str, Any]], request: AgentRequest[Any], native: bool
    ) -> None:
        """Set ``result.skill_loaded``: whether the candidate was loaded when it was installed
        natively as a folder (``native``), False with no skill (the no-skill arm), None when the
        skill was in context whatever the agent chose (placement system or prepend, a single
        instruction file). The names of the skills loaded go into a ``skilltune.skill_loads`` event."""
        skill = request.skill_name
        known = tuple(dict.fromkeys([*([skill] if skill else []), *(c.name for c in request.catalogue)]))
        loaded = self.loaded(events, known)
        result.skill_loaded = False if skill is None else (skill in loaded if native else None)
        if skill is not None or request.catalogue or loaded:
            result.events.append(
                {"type": LOADS_EVENT, "skill": skill, "loaded": loaded, "decision": result.skill_loaded}
            )


CLAUDE = SkillLoads(anthropic_calls, ("Skill",))
QWEN = SkillLoads(anthropic_calls, ("skill",))
COPILOT = SkillLoads(copilot_calls, ("skill",))
GEMINI = SkillLoads(gemini_calls, ("activate_skill",))
OPENCODE = SkillLoads(opencode_calls, ("skill",))
CODEX = SkillLoads(codex_calls)  # no skill tool: the model reads .agents/skills/<name>/SKILL.md
CURSOR = SkillLoads(cursor_calls)  # no skill tool: the model reads .cursor/skills/<name>/SKILL.md
