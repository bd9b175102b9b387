"""The direct chat targets' tool placement: the model decides whether to load the skill.

With ``placement=tool`` (and for every task that carries ``should_trigger``, whatever the
placement), a chat rollout is a short conversation instead of one call. The system prompt lists
the skills the model has, the candidate among the suite's catalogue (docs/trigger.md), each by
name and description, in name order, as agent CLIs list installed skills; a ``load_skill``
function (argument: the skill's name) is offered. When the model calls it, the named skill's
SKILL.md body is the tool's result and the model is asked again, until it answers without a tool
call or ``max_turns`` model calls (default 3) are spent. Each call is bounded like any chat call
(``max_tokens``, ``timeout_s``, ``wall_limit_s``).

The decision (``AgentResult.skill_loaded``) is whether the model loaded the candidate; loading a
catalogue skill is not a load of the candidate. Every call of the tool is a ``skill_load`` event
(the name asked for, the skill it named or none, whether it was a repeat). An unknown name gets a
result that says so and lists the names; a skill loaded twice gets a short result pointing to the
first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skilltune.modelcalls import ChatMessage, ChatRequest, Reply, ToolCall
from skilltune.skill import Candidate

TOOL_NAME = "load_skill"
DEFAULT_TURNS = 3
LOAD_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Load a skill: returns its instructions (its SKILL.md). Call it with the name of a "
        "listed skill whose description fits the request, before answering.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "the skill's name, as listed"}},
            "required": ["name"],
        },
    },
}


def uses_load_tool(placement: str, should_trigger: bool | None) -> bool:
    """Whether a chat rollout offers the tool: placement ``tool``, or a task about the load decision
    (``should_trigger`` set: with the skill always in context there would be no decision)."""
    return placement == "tool" or should_trigger is not None


def skills_prompt(skills: Sequence[Candidate]) -> str:
    """The system prompt that lists ``skills`` (name order) and says how to load one."""
    listed = "\n".join(f"- {s.name}: {' '.join(s.description.split())}" for s in sorted(skills, key=_name))
    return (
        "You have skills: instructions for particular kinds of task, each loaded on demand.\n\n"
        f"Available skills:\n{listed}\n\n"
        f"When a skill's description fits the user's request, call the {TOOL_NAME} tool with its name "
        "before you answer, then follow its instructions. Do not load a skill that does not fit; "
        "answer directly instead."
    )


@dataclass
class Conversation:
    """What a tool-placement rollout said and did (summed over its model calls)."""

    replies: list[Reply] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)  # skills whose body was returned, in order
    pending: bool = False  # the last reply still called the tool: max_turns ended the conversation

    @property
    def final(self) -> Reply:
        return self.replies[-1]


def converse(
    ask: Callable[[ChatRequest], Reply],
    request: ChatRequest,
    skills: Sequence[Candidate],
    max_turns: int,
) -> Conversation:
    """Ask, answer every ``load_skill`` call with the skill's body, ask again; at most ``max_turns``
    calls. ``ask`` raises as ModelClient.chat does (the caller turns that into the rollout's status)."""
    by_name = {s.name: s for s in skills}
    talk = Conversation()
    messages = list(request.messages)
    for turn in range(1, max_turns + 1):
        reply = ask(dataclasses.replace(request, messages=tuple(messages)))
        talk.replies.append(reply)
        talk.events += [{**e, "turn": turn} for e in reply.events]
        if not reply.tool_calls:
            talk.pending = False
            return talk
        talk.pending = True
        messages.append(ChatMessage("assistant", reply.text, tool_calls=tuple(reply.tool_calls)))
        for call in reply.tool_calls:
            messages.append(ChatMessage("tool", _result(call, by_name, talk, turn), tool_call_id=call.id))
    return talk


def _result(call: ToolCall, by_name: dict[str, Candidate], talk: Conversation, turn: int) -> str:
    """The tool's result for ``call`` (and its event)."""
    asked = call.arguments.get("name")
    name = _known(call.name, asked, by_name)
    event: dict[str, Any] = {"type": "skill_load", "turn": turn, "tool": call.name, "asked": asked}
    names = ", ".join(sorted(by_name))
    if _known_tool(call.name) is None:
        talk.events.append(event | {"skill": None, "result": "unknown tool"})
        return f"There is no tool {call.name!r}: the one tool is {TOOL_NAME}, with the name of a skill ({names})."
    if name is None:
        talk.events.append(event | {"skill": None, "result": "unknown skill"})
        return f"There is no skill named {asked!r}. The skills are: {names}."
    if name in talk.loaded:
        talk.events.append(event | {"skill": name, "result": "already loaded"})
        return f"The skill {name} is already loaded: its instructions are in an earlier result."
    talk.loaded.append(name)
    talk.events.append(event | {"skill": name, "result": "loaded"})
    return by_name[name].front_matter.body.strip() or "(the skill has no instructions)"


def _known_tool(name: str) -> str | None:
    """``load_skill``, also as llama-cpp-python streams it (the name repeated in every delta, which
    LangChain joins: ``load_skillload_skill``)."""
    if name and name == TOOL_NAME * (len(name) // len(TOOL_NAME)):
        return TOOL_NAME
    return None


def _known(tool: str, asked: Any, by_name: dict[str, Candidate]) -> str | None:
    if _known_tool(tool) is None or not isinstance(asked, str):
        return None
    key = asked.strip()
    if key in by_name:
        return key
    folded = {n.lower(): n for n in by_name}  # a model that capitalises the name still means it
    return folded.get(key.lower())


def _name(skill: Candidate) -> str:
    return skill.name
