"""Trigger suites on real agent CLIs (issue 21): the load decision read from each CLI's own events.

A scripted model (tests/fakeserver/skills.py) reads the skill listing the CLI sent it and loads a
skill, by the CLI's own way of loading one, only when a key word of its description is a word of
the user's request. The suite brings a catalogue of two distractor skills, installed beside the
candidate. ``skilltune compare`` on val runs the seed skill and one whose description names the
cases it misses: the decisions are read from the CLI's events, scored in trigger mode, and recall
rises from 1/2 to 2/2 while the distractors' loads never count as the candidate's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.agents.skillload import LOADS_EVENT
from skilltune.cli import app
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer, ToolCall
from tests.fakeserver.skills import skill_scenario
from tests.helpers import write_suite

SKILL = "release-notes"
SEED = "Drafts release notes from merged pull requests. Use when the user asks for release notes."
EDITED = (
    "Drafts release notes from merged pull requests. Use when the user asks for release notes, "
    "a changelog entry, or what shipped in a version."
)
CATALOGUE = {
    "meeting-notes": "Summarises meeting transcripts into decisions and action items. "
    "Use when the user shares a meeting transcript.",
    "sql-format": "Formats SQL queries. Use when the user asks to indent or format a SQL query.",
}
# val: (id, prompt, should_trigger, the skill the scripted model loads with the seed, with the edit)
VAL = [
    ("v-notes", "Write the release notes for version 2.4", True, SKILL, SKILL),
    ("v-changelog", "Update CHANGELOG.md with what shipped this sprint", True, None, SKILL),
    ("v-meeting", "Here is the transcript of our meeting this morning: summarise it", False, "meeting-notes", "meeting-notes"),
    ("v-sql", "Indent this SQL query so it is readable", False, "sql-format", "sql-format"),
]  # fmt: skip
TRAIN = [("t-notes", "Draft release notes for the 3.0 milestone", True)]
SHOULD = {row[0]: row[2] for row in VAL}


@dataclass
class Cli:
    """How a test reaches one CLI: its executable, the variables that point it at the server, its
    options, and how its model loads skill NAME."""

    executable: str
    env: Callable[[str], dict[str, str]]
    load: Callable[[str], ToolCall]
    options: dict[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()


CLIS = {
    "claude": Cli(
        "claude",
        lambda url: {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-test-dummy"},
        lambda name: ToolCall("Skill", {"skill": name}),
        {"model": "claude-sonnet-4-6", "api_retries": "0"},
        ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR"),
    ),
    "codex": Cli(
        "codex",
        lambda url: {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-test"},
        # no skill tool: the model reads the file the listing points to
        lambda name: ToolCall("exec_command", {"cmd": f"cat .agents/skills/{name}/SKILL.md"}),
        {"model": "gpt-5.5", "retries": "0"},
        ("CODEX_BASE_URL", "CODEX_API_KEY", "CODEX_HOME", "OPENAI_MODEL"),
    ),
    "copilot": Cli(
        "copilot",
        lambda url: {
            "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "sk-skilltune-copilot-test-7f3a9c",
            "COPILOT_MODEL": "gpt-4.1",
        },
        lambda name: ToolCall("skill", {"skill": name}),
        {},
        ("COPILOT_HOME", "COPILOT_OFFLINE", "COPILOT_SKILLS_DIRS", "COPILOT_CUSTOM_INSTRUCTIONS_DIRS"),
    ),
    "gemini": Cli(
        "gemini",
        lambda url: {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "test-key-skilltune"},
        lambda name: ToolCall("activate_skill", {"name": name}),
        {"model": "gemini-2.5-flash", "max_attempts": "1"},
        (
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_GENAI_USE_GCA",
            "GOOGLE_API_KEY",
            "GEMINI_MODEL",
            "GEMINI_CLI_HOME",
        ),
    ),
    "qwen": Cli(
        "qwen",
        lambda url: {
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_MODEL": "qwen3-coder-plus",
        },
        lambda name: ToolCall("skill", {"skill": name}),
        {},
        ("QWEN_HOME", "QWEN_RUNTIME_DIR", "DASHSCOPE_API_KEY"),
    ),
    "opencode": Cli(
        "opencode",
        lambda url: {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-test"},
        lambda name: ToolCall("skill", {"name": name}),
        {"model": "gpt-4.1"},
        ("OPENAI_MODEL", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME"),
    ),
}
# The CLI's own event of a load, as events.jsonl keeps it: (event type, where the skill's name is).
LOAD_EVENTS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "claude": lambda e: next(
        (b["input"]["skill"] for b in e.get("message", {}).get("content", []) if b.get("name") == "Skill"),
        None,
    )
    if e["type"] == "assistant"
    else None,
    "codex": lambda e: e["item"]["command"] if e["type"] == "item.completed" and "SKILL.md" in str(e["item"]) else None,
    "copilot": lambda e: e["data"]["arguments"]["skill"] if e["type"] == "tool.execution_start" else None,
    "gemini": lambda e: e["parameters"]["name"] if e["type"] == "tool_use" else None,
    "qwen": lambda e: next(
        (b["input"]["skill"] for b in e.get("message", {}).get("content", []) if b.get("name") == "skill"),
        None,
    )
    if e["type"] == "assistant"
    else None,
    "opencode": lambda e: e["part"]["state"]["input"]["name"] if e["type"] == "tool_use" else None,
}  # fmt: skip


def write_skill(
    folder: Path, name: str, description: str, body: str = "- Group the changes by kind."
) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")
    return folder


def task(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": row[0], "prompt": row[1], "should_trigger": row[2]}


def trigger_suite(root: Path) -> Path:
    """Trigger tasks only (train 1, val 4) and a catalogue of two distractor skills."""
    write_suite(root, [task(r[:3]) for r in TRAIN], [task(r[:3]) for r in VAL])
    for name, description in CATALOGUE.items():
        write_skill(root / "catalogue" / name, name, description, f"- How to handle {name}.")
    return root


def events_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]


def point_at(agent: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Point ``agent`` at the server at ``url`` through the user's variables; its --agent-opt args."""
    cli = CLIS[agent]
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(exist_ok=True)
    for variable in cli.unset:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in cli.env(url).items():
        monkeypatch.setenv(variable, value)
    return [arg for key, value in cli.options.items() for arg in ("--agent-opt", f"{key}={value}")]


def check_rollout(agent: str, folder: Path, loaded: str | None) -> dict[str, Any]:
    """One rollout's record and events: the decision is whether the CLI's own events show a load of
    the candidate (``loaded``: the skill the scripted model loaded); a distractor's is recorded, not
    counted. Returns the record."""
    record: dict[str, Any] = json.loads((folder / "record.json").read_text())
    task_id = record["task_id"]
    assert record["status"] == "ok", (task_id, record["reason"])
    assert record["skill_loaded"] is (loaded == SKILL), task_id
    assert record["score"]["hard"] == int(record["skill_loaded"] == SHOULD[task_id])
    events = events_of(folder)
    (summary,) = [e for e in events if e["type"] == LOADS_EVENT]
    assert summary["loaded"] == ([loaded] if loaded else []), (task_id, summary)
    own = [found for e in events if (found := LOAD_EVENTS[agent](e))]
    assert len(own) == (1 if loaded else 0) and (not loaded or loaded in own[0]), (task_id, own)
    return record


def stats(trigger: dict[str, Any]) -> tuple[int, int, int, int]:
    return trigger["tp"], trigger["fn"], trigger["fp"], trigger["tn"]


@pytest.mark.parametrize("agent", ["claude", "codex", "copilot", "gemini"])
def test_the_load_decision_from_the_cli_events_and_a_description_edit_raises_recall(
    agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli(CLIS[agent].executable)
    suite = trigger_suite(tmp_path / "suite")
    seed = write_skill(tmp_path / "seed", SKILL, SEED)
    edited = write_skill(tmp_path / "edited", SKILL, EDITED)
    out = tmp_path / "out"
    scenario, decisions = skill_scenario(CLIS[agent].load, [row[1] for row in VAL], [SKILL, *CATALOGUE])
    with FakeModelServer(scenario) as server:
        options = point_at(agent, server.url, tmp_path, monkeypatch)
        args = [
            "compare", str(suite), f"seed={seed}", f"edited={edited}", "--agent", agent, "--split", "val",
            "--reps", "1", "--workers", "2", "--out", str(out), "--quiet", *options,
        ]  # fmt: skip
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    # the scripted model decided from the descriptions the CLI listed: the edit reached it
    for task_id, prompt, _, with_seed, with_edit in VAL:
        made = sorted((d for p, d in decisions if p == prompt), key=str)
        assert made == sorted([with_seed, with_edit], key=str), (task_id, decisions)
    # each rollout's decision, read from the CLI's own events
    arms = json.loads((out / "comparison.json").read_text())["arms"]
    arm_of = {arms[name]["skill_hash"][:12]: name for name in ("seed", "edited")}
    loads = {("seed", r[0]): r[3] for r in VAL} | {("edited", r[0]): r[4] for r in VAL}
    folders = sorted(p.parent for p in out.glob("rollouts/eval/*/*/record.json"))
    assert len(folders) == len(loads)
    for folder in folders:
        task_id = json.loads((folder / "record.json").read_text())["task_id"]
        check_rollout(agent, folder, loads[(arm_of[folder.parent.name], task_id)])
    # scored in trigger mode: the edit finds the case the seed missed, and takes no distractor
    seed_stats, edited_stats = arms["seed"]["trigger"], arms["edited"]["trigger"]
    assert stats(seed_stats) == (1, 1, 0, 2) and stats(edited_stats) == (2, 0, 0, 2)
    assert seed_stats["recall"]["value"] == 0.5 and edited_stats["recall"]["value"] == 1.0
    assert seed_stats["accuracy"]["value"] == 0.75 and edited_stats["accuracy"]["value"] == 1.0
    assert seed_stats["precision"]["value"] == edited_stats["precision"]["value"] == 1.0


@pytest.mark.parametrize("agent", ["qwen", "opencode"])
def test_the_slower_clis_report_their_loads_in_a_run(
    agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """qwen and opencode take 10-15 s a rollout: one `skilltune run` of the edited skill on val (a load
    of the skill, a miss, two distractor loads), the decisions read from their events and scored."""
    require_cli(CLIS[agent].executable)
    if agent == "opencode":
        require_cli("rg")  # opencode's skill tool needs ripgrep; it cannot fetch it offline
    suite = trigger_suite(tmp_path / "suite")
    edited = write_skill(tmp_path / "edited", SKILL, EDITED)
    out = tmp_path / "out"
    scenario, _ = skill_scenario(CLIS[agent].load, [row[1] for row in VAL], [SKILL, *CATALOGUE])
    with FakeModelServer(scenario) as server:
        options = point_at(agent, server.url, tmp_path, monkeypatch)
        args = [
            "run", str(suite), "--skill", str(edited), "--agent", agent, "--split", "val", "--reps", "1",
            "--workers", "2", "--out", str(out), "--quiet", *options,
        ]  # fmt: skip
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    loads = {r[0]: r[4] for r in VAL}
    folders = sorted(p.parent for p in out.glob("rollouts/eval/*/*/record.json"))
    assert sorted(
        check_rollout(agent, f, loads[f.name.rsplit("_r", 1)[0]])["task_id"] for f in folders
    ) == sorted(loads)
    trigger = json.loads((out / "summary.json").read_text())["trigger"]
    assert stats(trigger) == (2, 0, 0, 2) and trigger["recall"]["value"] == 1.0
