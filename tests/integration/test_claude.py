"""The real Claude Code CLI (``claude -p --output-format stream-json``) against the scripted Anthropic server.

claude speaks Anthropic Messages, always streaming. The backend passes the user's
``ANTHROPIC_*`` variables through, so the tests point it at the server with
``ANTHROPIC_BASE_URL`` and a dummy ``ANTHROPIC_API_KEY``. HOME is a tmp folder in every
test (the private HOME links credentials from it).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend, parse_agent_options
from skilltune.agents.base import AgentRequest
from skilltune.agents.claude import ClaudeAgent, ClaudeOptions, interpret_stream
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome
from skilltune.suite import Task
from tests.conftest import require_cli
from tests.fakeserver import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    Failure,
    FakeModelServer,
    ModelRequest,
    Reply,
    ToolCall,
)
from tests.integration import common

MODEL = "claude-sonnet-4-6"  # a model claude sends an effort for (sonnet 4.5 and haiku 4.5 get none)
SKILL_BODY = "Write exactly what the task asks."
FAST = {"api_retries": 0, "wall_limit_s": 120}


def workdir(request: ModelRequest) -> str:
    """The workspace, as claude's system prompt states it (its file tools want absolute paths)."""
    found = re.search(r"Primary working directory: (\S+)", request.text)
    assert found, "no working directory in the request"
    return found.group(1)


def hello_scenario(request: ModelRequest) -> Reply:
    """Turn 1: claude's own Write tool creates hello.txt; turn 2: the final text."""
    if request.tool_results == 0:
        assert "Write" in request.tools, request.tools
        path = f"{workdir(request)}/{common.FILE}"
        return Reply(
            text="Writing the file.",
            tool_calls=[ToolCall("Write", {"file_path": path, "content": common.TOKEN + "\n"})],
        )
    return Reply(text=common.FINAL)


def looping_scenario(request: ModelRequest) -> Reply:
    """Never finishes: one more Bash call every turn."""
    return Reply(
        tool_calls=[
            ToolCall("Bash", {"command": "true", "description": "nothing"}, f"c{request.tool_results}")
        ]
    )


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the user's HOME (claude must never touch the real one)."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


@pytest.fixture
def endpoint(user_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Start a server with a scenario and point claude at it through the user's variables."""
    started: list[FakeModelServer] = []

    def start(scenario: Any, failures: list[Failure] | None = None) -> FakeModelServer:
        server = FakeModelServer(scenario, failures)
        server.__enter__()
        started.append(server)
        for var in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "CLAUDE_CODE_OAUTH_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def events_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]


def model_calls(server: FakeModelServer) -> list[ModelRequest]:
    return [r for r in server.requests if r.tools]


# --- (a) a real rollout ---------------------------------------------------------------------------
def test_rollout_writes_the_file_with_the_skill_installed_natively(tmp_path: Path, endpoint: Any) -> None:
    require_cli("claude")
    server = endpoint(hello_scenario)
    options = {**FAST, "model": MODEL, "effort": "low", "tools": ["Read", "Write"]}
    record, folder = common.rollout(tmp_path, "claude", options)
    common.check_success(record, folder, server, cost_reported=True)
    calls = model_calls(server)
    assert len(calls) == 2 and record.turns == 2
    # the restriction reached claude; the Skill tool was kept because the skill is installed natively
    assert sorted(calls[0].tools) == ["Read", "Skill", "Write"]
    assert calls[0].model == MODEL and record.model == MODEL
    assert calls[0].body["output_config"]["effort"] == "low"
    assert server.raw[-1]["headers"].get("x-api-key") == "sk-ant-test-dummy"
    # the skill was placed natively: claude lists it (init event) and describes it to the model
    init = events_of(folder)[0]
    assert init["type"] == "system" and "greeter" in init["skills"]
    assert init["permissionMode"] == "acceptEdits"
    assert "greeter: Writes greeting files when asked to." in calls[0].text
    conversation = json.loads((folder / "conversation.json").read_text())
    assert any(
        m["role"] == "assistant" and m["content"].startswith("[tool call] Write") for m in conversation
    )
    assert any(m["role"] == "tool" and "[Write result]" in m["content"] for m in conversation)
    assert record.tokens_in == 2 * INPUT_TOKENS and record.tokens_out == 2 * OUTPUT_TOKENS
    assert record.cost_usd is not None and record.cost_usd > 0


@pytest.mark.parametrize("placement", ["system", "prepend"])
def test_placement_system_and_prepend(tmp_path: Path, endpoint: Any, placement: str) -> None:
    require_cli("claude")
    server = endpoint(hello_scenario)
    record, folder = common.rollout(tmp_path, "claude", {**FAST, "placement": placement, "tools": ["Write"]})
    common.check_success(record, folder, server, cost_reported=True)
    first = model_calls(server)[0]
    assert first.tools == ["Write"]  # no native skill folder: nothing added to the restriction
    system = json.dumps(first.body["system"])
    user = json.dumps(first.body["messages"][0])
    if placement == "system":
        assert SKILL_BODY in system and SKILL_BODY not in user
    else:  # the prompt starts with the skill's front matter: it must come after `--`
        assert SKILL_BODY in user and SKILL_BODY not in system
        assert "---\\nname: greeter" in user
    assert "greeter" not in events_of(folder)[0]["skills"]


# --- (b) infrastructure errors ---------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 529, 400])
def test_http_errors_before_the_first_turn_are_infra_errors(
    tmp_path: Path, endpoint: Any, status: int
) -> None:
    require_cli("claude")
    server = endpoint(hello_scenario, failures=[Failure(status=status, message=f"scripted {status}")])
    record, folder = common.rollout(tmp_path, "claude", FAST)
    assert record.status == "infra_error", (record.status, record.reason)
    assert str(status) in (record.reason or "")
    assert record.score is None and not (folder / "score.json").exists()
    assert record.turns == 0 and record.attempts == 1
    assert len(model_calls(server)) == 1  # api_retries=0: claude did not retry on its own


def test_a_hanging_server_is_an_infra_error_and_the_process_group_is_gone(
    tmp_path: Path, endpoint: Any
) -> None:
    require_cli("claude")
    marker = tmp_path / "marker-bin" / "claude"  # a unique path in the process list
    marker.parent.mkdir()
    marker.symlink_to(require_cli("claude"))

    servers: list[FakeModelServer] = []

    def attempt(limit: float) -> common.Rollout:
        servers.append(endpoint(hello_scenario, failures=[Failure(hang_s=120)]))
        options = {**FAST, "wall_limit_s": limit, "executable": str(marker)}
        return common.rollout(tmp_path / f"limit-{limit:g}", "claude", options)

    def hung(_: common.Rollout) -> bool:  # the server got the request it hangs on
        return bool(model_calls(servers[-1]))

    record, folder = common.growing_wall_limit(attempt, hung, (4, 12, 36), "claude's model request")
    assert record.status == "infra_error", (record.status, record.reason)
    assert "no model turn before the wall limit" in (
        record.reason or ""
    )  # killed there, not at the hang's end
    assert record.score is None and not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"claude processes left behind: {left.stdout}"


# --- (c) max turns ---------------------------------------------------------------------------------
def test_max_turns_exceeded_is_a_task_failure_and_is_scored(tmp_path: Path, endpoint: Any) -> None:
    require_cli("claude")
    endpoint(looping_scenario)
    record, folder = common.rollout(tmp_path, "claude", {**FAST, "max_turns": 1})
    assert record.status == "task_failed", (record.status, record.reason)
    assert "max turns" in (record.reason or "")
    assert record.score is not None and record.score.hard == 0
    assert (folder / "score.json").exists()
    *_, last, loads = events_of(folder)  # claude's last event, then skilltune's record of the skill loads
    assert last["subtype"] == "error_max_turns" and loads == {
        "type": "skilltune.skill_loads",
        "skill": "greeter",
        "loaded": [],
        "decision": False,
    }


# --- (d) the private HOME --------------------------------------------------------------------------
def fill_user_home(home: Path) -> Path:
    """A user's ~/.claude with a skill, instructions, settings, a login; returns the credentials file."""
    skill = home / ".claude" / "skills" / "secret-skill"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: secret-skill\ndescription: USER-SKILL-MARKER never for rollouts.\n---\n\nUSER-SKILL-BODY\n"
    )
    (home / ".claude" / "CLAUDE.md").write_text("USER-CLAUDE-MD-MARKER\n")
    (home / ".claude" / "settings.json").write_text(json.dumps({"env": {"USER_SETTINGS_MARKER": "1"}}))
    credentials = home / ".claude" / ".credentials.json"
    credentials.write_text(json.dumps({"claudeAiOauth": {"accessToken": "fake", "refreshToken": "fake"}}))
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "primaryApiKey": "sk-ant-console-fake",
                "mcpServers": {"user-mcp": {"command": "false"}},
                "projects": {"/somewhere": {"history": ["USER-HISTORY-MARKER"]}},
            }
        )
    )
    return credentials


def test_the_users_skills_never_reach_the_agent_and_credentials_are_linked(
    tmp_path: Path, endpoint: Any, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("claude")
    credentials = fill_user_home(user_home)
    before = credentials.read_text()
    homes = tmp_path / "tmp"
    homes.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(homes))  # private HOMEs are made here: observable
    seen: dict[str, Any] = {}

    def scenario(request: ModelRequest) -> Reply:
        if "link" not in seen:  # while claude runs: what does its private HOME hold?
            private = next(homes.glob("skilltune-claude-home-*"))
            linked = private / ".claude" / ".credentials.json"
            seen["link"] = (linked.is_symlink(), str(linked.readlink()) if linked.is_symlink() else None)
            seen["config"] = json.loads((private / ".claude" / ".claude.json").read_text())
            seen["files"] = sorted(str(p.relative_to(private)) for p in private.rglob("*"))
            seen["texts"] = " ".join(p.read_text() for p in private.rglob("*") if p.is_file())
        return hello_scenario(request)

    server = endpoint(scenario)
    record, folder = common.rollout(tmp_path, "claude", FAST)
    common.check_success(record, folder, server, cost_reported=True)
    assert seen["link"] == (True, str(credentials))
    assert seen["config"].get("primaryApiKey") == "sk-ant-console-fake"
    assert "mcpServers" not in seen["config"] and "projects" not in seen["config"]
    assert not [f for f in seen["files"] if "secret-skill" in f or f.endswith("CLAUDE.md")], seen["files"]
    assert "USER_SETTINGS_MARKER" not in seen["texts"] and "USER-SKILL" not in seen["texts"]
    for request in server.requests:
        text = json.dumps(request.body)
        for marker in (
            "USER-SKILL-MARKER",
            "USER-SKILL-BODY",
            "USER-CLAUDE-MD-MARKER",
            "USER-HISTORY-MARKER",
            "user-mcp",
        ):
            assert marker not in text, marker
    assert "secret-skill" not in events_of(folder)[0]["skills"]
    assert credentials.read_text() == before and not credentials.is_symlink()
    assert not list(homes.glob("skilltune-claude-home-*")), "the private HOME was not removed"


def test_link_credentials_links_and_never_copies(
    tmp_path: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("claude")
    credentials = fill_user_home(user_home)
    private = tmp_path / "private"
    private.mkdir()
    ClaudeAgent().link_credentials(private)
    linked = private / ".claude" / ".credentials.json"
    assert linked.is_symlink() and linked.resolve() == credentials.resolve()
    assert sorted(p.name for p in (private / ".claude").iterdir()) == [".credentials.json"]
    # a user with CLAUDE_CONFIG_DIR keeps the login there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".credentials.json").write_text("{}")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(elsewhere))
    other = tmp_path / "private2"
    other.mkdir()
    ClaudeAgent().link_credentials(other)
    assert (other / ".claude" / ".credentials.json").resolve() == (elsewhere / ".credentials.json").resolve()
    # no login at all: nothing linked, no error
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "missing"))
    empty = tmp_path / "private3"
    empty.mkdir()
    ClaudeAgent().link_credentials(empty)
    assert not (empty / ".claude").exists()


# --- options, command and parsing ------------------------------------------------------------------
def request_for(tmp_path: Path, options: dict[str, Any], **extra: Any) -> AgentRequest:
    backend = get_backend("claude")
    return AgentRequest(
        task=Task(id="t", prompt="do it"),
        prompt=extra.pop("prompt", "do it"),
        workspace=tmp_path,
        log_dir=tmp_path,
        candidate_hash="noskill",
        options=backend.parse_options(options),
        **extra,
    )


def test_options_and_command(tmp_path: Path) -> None:
    require_cli("claude")
    backend = get_backend("claude")
    assert isinstance(backend, ClaudeAgent)
    with pytest.raises(UsageError, match="unknown agent option 'colour'"):
        parse_agent_options(backend, {"colour": "red"})
    with pytest.raises(UsageError, match="effort"):
        parse_agent_options(backend, {"effort": "extreme"})
    argv = backend.command(request_for(tmp_path, {"max_turns": 7, "extra_args": ["--x"]}), tmp_path)
    assert argv[-2:] == ["--", "do it"] and argv[-3] == "--x"
    assert argv[argv.index("--max-turns") + 1] == "7"
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--allowedTools") + 1] == "Bash,Skill"
    assert "--tools" not in argv and "bypassPermissions" not in argv
    restricted = backend.command(request_for(tmp_path, {"tools": ["Read", "Bash"]}), tmp_path)
    assert restricted[restricted.index("--tools") + 1] == "Read,Bash"  # no skill installed: no Skill added
    assert restricted[restricted.index("--allowedTools") + 1] == "Bash"
    own = backend.command(
        request_for(tmp_path, {"tools": ["Bash"], "allowed_tools": ["Bash(git *)"]}), tmp_path
    )
    assert own[own.index("--allowedTools") + 1] == "Bash(git *)"
    system = backend.command(request_for(tmp_path, {"placement": "system"}, system_prompt="SKILL"), tmp_path)
    assert system[system.index("--append-system-prompt") + 1] == "SKILL"
    big = request_for(tmp_path, {"placement": "system"}, system_prompt="x" * 200_000)
    backend.prepare_home(tmp_path, big)  # a skill too long for one argument goes through a file
    argv = backend.command(big, tmp_path)
    assert (tmp_path / argv[argv.index("--append-system-prompt-file") + 1]).read_text() == "x" * 200_000
    plain = backend.command(request_for(tmp_path, backend.plain_model_options()), tmp_path)
    assert plain[plain.index("--tools") + 1] == "" and "--allowedTools" not in plain
    env = backend.cli_env(tmp_path, request_for(tmp_path, {"api_retries": 1, "bundled_skills": False}))
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / ".claude") and env["CLAUDE_CODE_MAX_RETRIES"] == "1"
    assert env["CLAUDE_CODE_DISABLE_BUNDLED_SKILLS"] == "1"
    assert backend.native_skill_dir("x") == ".claude/skills/x" and backend.native_files == ("CLAUDE.md",)
    assert isinstance(backend.parse_options({}), ClaudeOptions)


def outcome(returncode: int = 1, stderr: str = "", timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(returncode, [], stderr, timed_out=timed_out)


def assistant(text: str, msg_id: str = "m1", model: str = MODEL) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": msg_id, "model": model, "content": [{"type": "text", "text": text}]},
    }


def test_interpret_classifies_outcomes() -> None:
    require_cli("claude")
    init = {"type": "system", "subtype": "init", "model": "claude-opus-4-8[1m]"}
    # an API error after a model turn: 5xx and 429 stay infra errors
    synthetic = assistant("API Error: 500 boom", "e1", "<synthetic>") | {"error": "server_error"}
    failed = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 500,
        "num_turns": 2,
        "result": "API Error: 500 boom",
    }
    found = interpret_stream([init, assistant("working"), synthetic, failed], outcome())
    assert found.status == "infra_error" and found.turns == 2 and found.model == MODEL
    # a 400 after a model turn is the task's own failure (e.g. the prompt grew too long)
    too_long = failed | {"api_error_status": 400, "result": "API Error: 400 prompt is too long"}
    assert interpret_stream([init, assistant("working"), too_long], outcome()).status == "task_failed"
    # a crash: before any model turn infra, after one the task's failure
    assert interpret_stream([init], outcome(stderr="TypeError: x")).status == "infra_error"
    crashed = interpret_stream([init, assistant("working")], outcome(stderr="TypeError: x"))
    assert crashed.status == "task_failed" and crashed.final_text == "working"
    # killed at the wall limit: left to the runner (timeout after a turn, infra before)
    assert interpret_stream([init], outcome(timed_out=True)).status == "timeout"
    # cached prompt tokens count as tokens in; init's model label loses its [1m]
    ok = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "done", "total_cost_usd": 0.5,
          "usage": {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5, "output_tokens": 7}}  # fmt: skip
    done = interpret_stream([init, ok], outcome(0))
    assert (done.status, done.tokens_in, done.tokens_out, done.cost_usd) == ("ok", 115, 7, 0.5)
    assert done.model == "claude-opus-4-8" and done.final_text == "done"


def test_complete_is_a_plain_model_and_takes_a_prompt_too_long_for_argv(
    user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("claude")
    prompt = "LONG-PROMPT " + "word " * 40_000  # 200 KB: over the 128 KiB of one argv string
    with FakeModelServer(
        lambda r: Reply(text="unexpected"), side=lambda r: Reply(text="the answer")
    ) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        result = ClaudeAgent().complete(prompt, MODEL, wall_limit_s=120)
    assert result.status == "ok", result.reason
    assert result.final_text == "the answer" and result.model == MODEL and result.turns == 1
    assert (result.tokens_in, result.tokens_out) == (
        INPUT_TOKENS,
        OUTPUT_TOKENS,
    ) and not result.cost_estimated
    [request] = server.requests
    assert (
        request.tools == [] and request.body["messages"][0]["content"][-1]["text"].strip() == prompt.strip()
    )
