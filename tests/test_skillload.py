"""Reading the skill loads from each CLI's events (agents/skillload.py), and the refusal of a trigger
task where the placement leaves the agent no choice.

The events are those the real CLIs printed against tests/fakeserver (claude 2.1.197, copilot 1.0.102,
gemini 0.61.0, opencode 1.18.33, qwen 0.15.10, codex 0.171.0), cut to the fields that matter;
cursor's is the stand-in's shape (cursor-agent cannot be installed here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend
from skilltune.agents.base import AgentRequest, AgentResult
from skilltune.agents.skillload import (
    CLAUDE,
    CODEX,
    COPILOT,
    CURSOR,
    GEMINI,
    LOADS_EVENT,
    OPENCODE,
    QWEN,
    SkillLoads,
    reads_skill_file,
)
from skilltune.errors import UsageError
from skilltune.rollout.workspace import check_target
from skilltune.skill import Candidate
from skilltune.suite import Task, load_suite
from tests.helpers import write_suite

SKILL = "release-notes"
OTHER = "meeting-notes"  # a catalogue skill


def _claude(name: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {"skill": name}}
    return {"type": "assistant", "message": {"role": "assistant", "content": [block]}}


def _qwen(name: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": "call_1", "name": "skill", "input": {"skill": name}}
    return {"type": "assistant", "message": {"role": "assistant", "content": [block]}}


def _copilot(name: str) -> dict[str, Any]:
    data = {"toolCallId": "call_1", "toolName": "skill", "arguments": {"skill": name}, "turnId": "0"}
    return {"type": "tool.execution_start", "data": data}


def _gemini(name: str) -> dict[str, Any]:
    return {"type": "tool_use", "tool_name": "activate_skill", "tool_id": "a_1", "parameters": {"name": name}}


def _opencode(name: str) -> dict[str, Any]:
    state = {"status": "completed", "input": {"name": name}, "output": f'<skill_content name="{name}">'}
    return {"type": "tool_use", "part": {"type": "tool", "tool": "skill", "callID": "c1", "state": state}}


def _codex(name: str) -> dict[str, Any]:
    command = f"/bin/bash -lc 'sed -n 1,200p .agents/skills/{name}/SKILL.md'"
    item = {"id": "item_0", "type": "command_execution", "command": command, "exit_code": 0}
    return {"type": "item.completed", "item": item}


def _cursor(name: str) -> dict[str, Any]:
    args = {"path": f"/ws/.cursor/skills/{name}/SKILL.md"}
    return {"type": "tool_call", "subtype": "started", "tool_call": {"readToolCall": {"args": args}}}


CASES = [
    (CLAUDE, _claude),
    (QWEN, _qwen),
    (COPILOT, _copilot),
    (GEMINI, _gemini),
    (OPENCODE, _opencode),
    (CODEX, _codex),
    (CURSOR, _cursor),
]


@pytest.mark.parametrize(("rule", "event"), CASES)
def test_each_cli_load_is_read_and_a_catalogue_load_is_another_skill(rule: SkillLoads, event: Any) -> None:
    known = (SKILL, OTHER)
    assert rule.loaded([event(SKILL)], known) == [SKILL]
    assert rule.loaded([event(OTHER)], known) == [OTHER]
    assert rule.loaded([event(OTHER), event(SKILL), event(OTHER)], known) == [OTHER, SKILL]
    assert rule.loaded([], known) == []


def test_a_skill_tool_call_names_skills_the_suite_does_not_know() -> None:
    """A bundled skill of the CLI is recorded too (by its tool call); a leading slash is dropped."""
    assert CLAUDE.loaded([_claude("/deep-research")], (SKILL,)) == ["deep-research"]
    # no skill tool: only the SKILL.md of a skill the suite knows can be recognised
    assert CODEX.loaded([_codex("imagegen")], (SKILL,)) == []


def test_a_read_of_skill_md_counts_on_a_cli_with_a_skill_tool_too() -> None:
    read = {
        "type": "tool_use",
        "name": "Read",
        "input": {"file_path": f"/ws/.claude/skills/{SKILL}/SKILL.md"},
    }
    event = {"type": "assistant", "message": {"content": [read]}}
    assert CLAUDE.loaded([event], (SKILL, OTHER)) == [SKILL]


@pytest.mark.parametrize(
    ("arguments", "read"),
    [
        (f"cat .agents/skills/{SKILL}/SKILL.md", True),
        (f"cd .agents/skills && cat {SKILL}/SKILL.md", True),
        ({"file_path": f"/ws/.claude/skills/{SKILL}/SKILL.md"}, True),
        (f"cat '{SKILL}/SKILL.md'", True),
        (f"cat .agents/skills/{SKILL}-extra/SKILL.md", False),  # another skill whose name starts so
        (f"cat .agents/skills/old-{SKILL}/SKILL.md", False),
        ("ls .agents/skills", False),
        (f"cat .agents/skills/{SKILL}/reference.md", False),
    ],
)
def test_what_counts_as_a_read_of_skill_md(arguments: Any, read: bool) -> None:
    assert reads_skill_file(arguments, SKILL) is read


def _request(tmp_path: Path, skill: str | None, placement: str = "native") -> AgentRequest[Any]:
    backend = get_backend("claude")
    other = Candidate({"SKILL.md": f"---\nname: {OTHER}\ndescription: Summarises meetings.\n---\n\nBody\n"})
    return AgentRequest(
        task=Task(id="t", prompt="p"),
        prompt="p",
        workspace=tmp_path,
        log_dir=tmp_path,
        candidate_hash="h",
        skill_name=skill,
        catalogue=(other,),
        options=backend.parse_options({"placement": placement}),
    )


def test_a_restricted_tool_list_keeps_the_skill_tool_where_a_skill_is_placed() -> None:
    assert CLAUDE.keep_tool(None, placed=True) is None  # no restriction stays none
    assert CLAUDE.keep_tool(["Read"], placed=True) == ["Read", "Skill"]
    assert GEMINI.keep_tool([], placed=True) == ["activate_skill"]
    assert COPILOT.keep_tool(["view", "skill"], placed=True) == ["view", "skill"]
    assert QWEN.keep_tool(["read_file"], placed=False) == ["read_file"]
    assert CODEX.keep_tool(["shell"], placed=True) == ["shell"]  # no skill tool to keep
    tools = ["view"]
    COPILOT.keep_tool(tools, placed=True)
    assert tools == ["view"]  # a copy: the options' list is left as it was


def test_the_decision_and_the_event_that_names_every_load(tmp_path: Path) -> None:
    events = [_claude(OTHER), _claude(SKILL)]
    result = AgentResult(status="ok", events=list(events))
    CLAUDE.record(result, events, _request(tmp_path, SKILL), native=True)
    assert result.skill_loaded is True
    assert result.events[-1] == {
        "type": LOADS_EVENT,
        "skill": SKILL,
        "loaded": [OTHER, SKILL],
        "decision": True,
    }
    only_other = AgentResult(status="ok")
    CLAUDE.record(only_other, [_claude(OTHER)], _request(tmp_path, SKILL), native=True)
    assert only_other.skill_loaded is False  # a catalogue skill is not the candidate
    # the skill in context whatever the agent chose (system prompt, prepended, a single file): no decision
    in_context = AgentResult(status="ok")
    CLAUDE.record(in_context, events, _request(tmp_path, SKILL, "system"), native=False)
    assert in_context.skill_loaded is None and in_context.events[-1]["loaded"] == [OTHER, SKILL]
    # the no-skill arm loads nothing of the candidate's, whatever it loaded of the catalogue
    no_skill = AgentResult(status="ok")
    CLAUDE.record(no_skill, [_claude(OTHER)], _request(tmp_path, None), native=False)
    assert no_skill.skill_loaded is False and no_skill.events[-1]["loaded"] == [OTHER]


@pytest.mark.parametrize("agent", ["claude", "codex", "copilot", "cursor", "gemini", "opencode", "qwen"])
def test_every_cli_backend_reports_loads(agent: str) -> None:
    backend = get_backend(agent)
    assert backend.reports_skill_loads and backend.loads_need_native


def _trigger_suite(root: Path) -> Path:
    task = {"id": "t1", "prompt": "write the release notes", "should_trigger": True}
    return write_suite(root, [task], [dict(task, id="v1")])


FOLDER = Candidate(
    {"SKILL.md": f"---\nname: {SKILL}\ndescription: Use when asked for release notes.\n---\n\nB\n"}
)


@pytest.mark.parametrize(
    ("placement", "candidate", "message"),
    [
        ("system", FOLDER, "with placement=system the skill is in the agent's context on every rollout"),
        ("prepend", FOLDER, "with placement=prepend"),
        ("native", Candidate({"CLAUDE.md": "Be brief.\n"}, "CLAUDE.md", "file"), "CLAUDE.md is a single"),
    ],
)
def test_a_trigger_task_is_refused_where_the_agent_cannot_decide(
    tmp_path: Path, placement: str, candidate: Candidate, message: str
) -> None:
    suite = load_suite(_trigger_suite(tmp_path / "suite"))
    backend = get_backend("claude")
    options = backend.parse_options({"placement": placement})
    with pytest.raises(UsageError) as refused:
        check_target(backend, options, suite.tasks("val"), [candidate], suite=suite, preflight=False)
    text = " ".join(str(refused.value).split())
    assert "val.jsonl:1: task v1: trigger mode" in text and message in text, text


def test_a_trigger_task_runs_with_the_skill_folder_placed_natively(tmp_path: Path) -> None:
    suite = load_suite(_trigger_suite(tmp_path / "suite"))
    backend = get_backend("claude")
    options = backend.parse_options({})
    check_target(backend, options, suite.tasks("val"), [FOLDER, None], suite=suite, preflight=False)
    assert (
        backend.skill_load_problem(options, FOLDER) is None
        and backend.skill_load_problem(options, None) is None
    )
