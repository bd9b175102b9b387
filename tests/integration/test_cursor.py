"""The cursor backend against a stand-in ``cursor-agent`` that replays recorded event streams.

cursor-agent is not on the registries here, so ``stand_ins/cursor_agent.py`` plays it: it
refuses any but the documented headless form, prints a recorded stream-json session and
makes the recorded file writes. A wrapper script named ``cursor-agent`` on PATH starts it
with the scenario and a log file (the backend passes no other variables through).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend, parse_agent_options
from skilltune.agents.base import AgentRequest
from skilltune.agents.cursor import CursorAgent
from skilltune.agents.skillload import LOADS_EVENT
from skilltune.errors import UsageError
from skilltune.suite import Task
from tests.integration import common

STAND_IN = Path(__file__).resolve().parent / "stand_ins" / "cursor_agent.py"
FAST = {"wall_limit_s": 120, "model": "gpt-5"}

StandIn = Callable[..., Path]


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's HOME: a login in both places cursor-agent keeps one, and user-level skills and rules."""
    home = tmp_path / "user-home"
    (home / ".config" / "cursor").mkdir(parents=True)
    (home / ".config" / "cursor" / "auth.json").write_text('{"accessToken": "a", "refreshToken": "r"}')
    (home / ".cursor" / "skills" / "user-skill").mkdir(parents=True)
    (home / ".cursor" / "skills" / "user-skill" / "SKILL.md").write_text("---\nname: user-skill\n---\nUSER\n")
    (home / ".cursor" / "rules").mkdir()
    (home / ".cursor" / "rules" / "mine.mdc").write_text("USER RULE\n")
    (home / ".cursor" / "cli-config.json").write_text(
        json.dumps({"version": 1, "authInfo": {"email": "u@x"}})
    )
    monkeypatch.setenv("HOME", str(home))
    for var in ("CURSOR_CONFIG_DIR", "XDG_CONFIG_HOME", "CURSOR_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CURSOR_API_KEY", "cursor-test-key")
    return home


@pytest.fixture
def stand_in(tmp_path: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    """Put a ``cursor-agent`` for one scenario on PATH; returns the file its log goes to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    def install(scenario: str, answer: str = "") -> Path:
        log = tmp_path / f"stand-in-{scenario}.json"
        # a unique path in the process list, so a leftover process can be found
        script = bin_dir / f"cursor_agent_{uuid.uuid4().hex[:8]}.py"
        script.symlink_to(STAND_IN)
        wrapper = bin_dir / "cursor-agent"
        wrapper.write_text(
            "#!/bin/sh\n"
            f"STANDIN_SCENARIO={scenario} STANDIN_LOG={shlex.quote(str(log))} STANDIN_ANSWER={shlex.quote(answer)} "
            f'exec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "$@"\n'
        )
        wrapper.chmod(0o755)
        return log

    return install


def seen_by(log: Path) -> dict[str, Any]:
    return dict(json.loads(log.read_text()))


@pytest.mark.parametrize("recording", ["hello", "hello_claude_like"])
def test_rollout_with_a_recorded_session(tmp_path: Path, stand_in: StandIn, recording: str) -> None:
    log = stand_in(recording)
    record, folder = common.rollout(tmp_path, "cursor", FAST)
    assert record.status == "ok", (record.reason, (folder / "agent-stderr.log").read_text())
    assert record.score is not None and record.score.hard == 1
    diff = (folder / "diff.patch").read_text()
    assert f"+++ b/{common.FILE}" in diff and common.TOKEN in diff
    assert common.FINAL in (folder / "output.txt").read_text()
    conversation = json.loads((folder / "conversation.json").read_text())
    assert conversation[0]["role"] == "user" and common.TOKEN in conversation[0]["content"]
    assert any(m["role"] == "assistant" and m["content"].startswith("[tool call] ") for m in conversation)
    assert any(m["role"] == "tool" and common.FILE in m["content"] for m in conversation)
    events = [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]
    assert events[0]["subtype"] == "init" and events[-2]["type"] == "result"
    # the skill placed natively, never read by the recorded session: not loaded
    assert events[-1] == {"type": LOADS_EVENT, "skill": "greeter", "loaded": [], "decision": False}
    assert record.skill_loaded is False
    # what the stand-in saw: the headless form, the prompt after --, stdin closed, the skill in place
    seen = seen_by(log)
    assert seen["argv"][:6] == ["-p", "--force", "--trust", "--output-format", "stream-json", "--model"]
    assert seen["argv"][-2] == "--" and seen["prompt"] == seen["argv"][-1]
    assert common.TOKEN in seen["prompt"] and seen["stdin"] == ""
    assert seen["workspace"].get(".cursor/skills/greeter/SKILL.md") == "file"
    if recording == "hello":  # the documented stream has no usage: no tokens, no cost, nothing estimated
        assert (record.tokens_in, record.cost_usd, record.cost_estimated) == (None, None, False)
    else:  # a stream with usage: cost estimated from the price table
        assert (record.tokens_in, record.tokens_out, record.turns) == (3600, 61, 2)
        assert record.cost_usd is not None and record.cost_usd > 0 and record.cost_estimated


def test_private_home_links_the_login_and_nothing_else(
    tmp_path: Path, stand_in: StandIn, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_UNRELATED_SECRET", "not-for-agents")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user_home / ".config"))
    log = stand_in("hello")
    record, _ = common.rollout(tmp_path, "cursor", FAST)
    assert record.status == "ok"
    seen = seen_by(log)
    assert seen["home"][".config/cursor/auth.json"] == f"link:{user_home / '.config/cursor/auth.json'}"
    assert seen["home"][".cursor/cli-config.json"] == f"link:{user_home / '.cursor/cli-config.json'}"
    assert not [p for p in seen["home"] if "skills" in p or "rules" in p], seen["home"]
    env = seen["env"]
    assert env["CURSOR_API_KEY"] == "cursor-test-key" and env["HOME"] != str(user_home)
    assert env["CURSOR_CONFIG_DIR"] == f"{env['HOME']}/.cursor"
    assert "SOME_UNRELATED_SECRET" not in env and "XDG_CONFIG_HOME" not in env
    assert "user-home" not in json.dumps({k: v for k, v in env.items() if k != "PATH"})
    # link_credentials on its own: links, never copies
    private = tmp_path / "private"
    private.mkdir()
    CursorAgent().link_credentials(private)
    assert (private / ".config/cursor/auth.json").is_symlink()
    assert (private / ".cursor/cli-config.json").resolve() == (
        user_home / ".cursor/cli-config.json"
    ).resolve()
    assert sorted(str(p.relative_to(private)) for p in private.rglob("*") if p.is_file()) == [
        ".config/cursor/auth.json",
        ".cursor/cli-config.json",
    ]


@pytest.mark.parametrize(
    ("scenario", "status", "scored"),
    [
        ("rate_limit", "infra_error", False),
        ("unauthenticated", "infra_error", False),
        ("crash_after_turn", "task_failed", True),
    ],
)
def test_failures(tmp_path: Path, stand_in: StandIn, scenario: str, status: str, scored: bool) -> None:
    stand_in(scenario)
    record, folder = common.rollout(tmp_path, "cursor", FAST)
    assert record.status == status, (record.status, record.reason)
    assert (record.score is not None) is scored and (folder / "score.json").exists() is scored


def test_a_hanging_agent_is_an_infra_error_and_its_group_is_killed(tmp_path: Path, stand_in: StandIn) -> None:
    log = stand_in("hang")
    script = next((tmp_path / "bin").glob("cursor_agent_*.py"))

    def attempt(limit: float) -> common.Rollout:
        log.unlink(missing_ok=True)
        return common.rollout(tmp_path / f"limit-{limit:g}", "cursor", {**FAST, "wall_limit_s": limit})

    def hanging(_: common.Rollout) -> bool:  # the stand-in started (it logs first)
        return log.is_file()

    record, folder = common.growing_wall_limit(attempt, hanging, (2, 6, 18), "the stand-in's start")
    assert record.status == "infra_error", (record.status, record.reason)
    assert "no model turn before the wall limit" in (record.reason or "")  # killed there, not at its end
    assert not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", left.stdout


def test_prepend_placement_keeps_front_matter_after_the_separator(tmp_path: Path, stand_in: StandIn) -> None:
    log = stand_in("hello")
    record, _ = common.rollout(tmp_path, "cursor", {**FAST, "placement": "prepend"})
    assert record.status == "ok"
    seen = seen_by(log)
    assert seen["prompt"].startswith("---\nname: greeter") and seen["argv"][-2] == "--"


def test_complete_asks_in_ask_mode(tmp_path: Path, stand_in: StandIn) -> None:
    log = stand_in("answer", answer="the proposer's answer")
    result = CursorAgent().complete("Which edits?", "gpt-5", wall_limit_s=120)
    assert result.status == "ok" and result.final_text == "the proposer's answer"
    argv = seen_by(log)["argv"]
    assert argv[argv.index("--mode") + 1] == "ask" and argv[-1] == "Which edits?"


def test_options_refused_and_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = get_backend("cursor")
    assert isinstance(backend, CursorAgent)
    for bad, match in (
        ({"effort": "high"}, "no effort"),
        ({"max_turns": 3}, "no max-turns"),
        ({"tools": ["Read"]}, "cannot restrict"),
        ({"placement": "system"}, "no system-prompt"),
        ({"colour": "red"}, "unknown agent option"),
    ):
        with pytest.raises(UsageError, match=match):
            parse_agent_options(backend, bad)
    assert backend.native_skill_dir("x") == ".cursor/skills/x" and backend.native_files == ("AGENTS.md",)
    request = AgentRequest(
        task=Task(id="t", prompt="p"),
        prompt="--not-a-flag",
        workspace=tmp_path,
        log_dir=tmp_path,
        candidate_hash="noskill",
        options=backend.parse_options({"extra_args": ["--sandbox", "disabled"]}),
    )
    argv = backend.command(request, tmp_path)
    assert argv[1:6] == ["-p", "--force", "--trust", "--output-format", "stream-json"]
    assert argv[-4:] == ["--sandbox", "disabled", "--", "--not-a-flag"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no cursor-agent anywhere
    check = backend.check()
    assert not check.installed and check.fix and "not on npm" in check.fix
    assert any("tool restriction" in note for note in check.notes)


def test_arguments_too_long_for_the_os_are_usage_errors(tmp_path: Path, stand_in: StandIn) -> None:
    """No retry can start a command line Linux refuses (E2BIG): a UsageError saying what to shorten."""
    stand_in("hello")
    backend = CursorAgent()

    def request(prompt: str, extra: list[str]) -> AgentRequest:
        (tmp_path / "ws").mkdir(exist_ok=True)
        return AgentRequest(
            task=Task(id="t", prompt=prompt),
            prompt=prompt,
            workspace=tmp_path / "ws",
            log_dir=tmp_path,
            candidate_hash="noskill",
            options=backend.parse_options({**FAST, "extra_args": extra}),
        )

    with pytest.raises(UsageError, match="takes its prompt only as a command-line argument"):
        backend.run(request("word " * 40_000, []))
    with pytest.raises(UsageError, match="E2BIG"):
        backend.run(request("short", ["--note", "x" * 200_000]))
