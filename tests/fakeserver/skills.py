"""A scripted model that decides whether to load a skill from the listing the CLI sent it.

Each CLI lists the skills it discovered by name and description somewhere in its request:

- claude: a ``<system-reminder>`` of the first user message, ``- NAME: DESCRIPTION``;
- codex: the ``<skills_instructions>`` developer message, ``- NAME: DESCRIPTION (file: r1/NAME/SKILL.md)``;
- copilot (its system prompt), gemini (its system instruction), opencode (its system prompt):
  ``<available_skills>`` with ``<name>NAME</name> <description>DESCRIPTION</description>``;
- qwen: the same in its ``skill`` tool's description, the description followed by ``(project)``.

The model reads the description of each skill it is told about from there (never from the
suite), and on its first turn loads the first whose description names a word of the user's
request, by the mock agent's rule (``loads_skill``: a key term of the "use when" clause is a word
of the prompt); else it answers at once. So an edited description changes its decision only if
the CLI sent the edit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from skilltune.agents.mock import loads_skill
from tests.fakeserver.core import ModelRequest, Reply, Scenario, ToolCall

ANSWER = "Done."


def strings(value: Any) -> Iterator[str]:
    """Every string inside a request body (messages, system prompts, tool descriptions)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def listed_description(text: str, name: str) -> str | None:
    """The description the CLI listed for skill ``name`` in ``text`` (None: not listed)."""
    quoted = re.escape(name)
    found = re.search(rf"<name>\s*{quoted}\s*</name>\s*<description>\s*(.*?)\s*</description>", text, re.S)
    if found:
        return re.sub(r"\s*\((?:project|user|bundled)\)$", "", found.group(1))
    found = re.search(rf"^- {quoted}: (.*?)(?: \(file: [^)]*\))?$", text, re.M)
    return found.group(1) if found else None


def skill_scenario(
    load: Callable[[str], ToolCall], prompts: Sequence[str], skills: Sequence[str]
) -> tuple[Scenario, list[tuple[str, str | None]]]:
    """The scenario, and the log of its decisions: (the user's request, the skill it loaded or None).

    ``load``: the CLI's way to load skill NAME (its skill tool, or a read of the file); ``prompts``:
    the requests the rollouts may carry (the one in the request is the user's); ``skills``: the names
    it looks up in the listing, in order."""
    decisions: list[tuple[str, str | None]] = []

    def scenario(request: ModelRequest) -> Reply:
        if request.tool_results:
            return Reply(text=ANSWER)
        text = "\n".join(strings(request.body))
        prompt = next((p for p in prompts if p in text), None)
        if prompt is None:
            return Reply(text=ANSWER)
        for name in skills:
            description = listed_description(text, name)
            if description is not None and loads_skill(description, prompt)[0]:
                decisions.append((prompt, name))
                return Reply(tool_calls=[load(name)])
        decisions.append((prompt, None))
        return Reply(text=ANSWER)

    return scenario, decisions
