"""The real gemini CLI (``gemini -p ... -o stream-json``) against the scripted Gemini server.

gemini speaks Gemini ``streamGenerateContent?alt=sse``; the backend points it at the
server through the user's ``GOOGLE_GEMINI_BASE_URL`` and ``GEMINI_API_KEY`` (set here
with monkeypatch), with ``max_attempts=1`` so its own retries never slow a test down.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend, parse_agent_options
from skilltune.agents.base import AgentRequest
from skilltune.agents.gemini import GeminiAgent, GeminiOptions
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
from tests.fakeserver.gemini import THOUGHT_TOKENS
from tests.integration import common

MODEL = "gemini-2.5-flash"  # in the price table
SKILL_BODY = "Write exactly what the task asks."
BASE = {"model": MODEL, "max_attempts": 1, "wall_limit_s": 120}
USER_MARKERS = (
    "USER-MEMORY-MARKER",
    "USER-SKILL-MARKER",
    "USER-AGENTS-SKILL-MARKER",
    "USER-SYSTEM-MD-MARKER",
)


def workspace_of(request: ModelRequest) -> str:
    """The workspace gemini names in its session context (its file tools want absolute paths)."""
    found = re.search(r"Workspace Directories:\*\*\s*\n\s*- (\S+)", request.text)
    return found.group(1) if found else "."


def hello_scenario(request: ModelRequest) -> Reply:
    """First turn: gemini's own write_file tool writes hello.txt; then the final text."""
    if request.tool_results == 0:
        path = f"{workspace_of(request)}/{common.FILE}"
        return Reply(tool_calls=[ToolCall("write_file", {"file_path": path, "content": common.TOKEN + "\n"})])
    return Reply(text=common.FINAL)


def body_text(request: ModelRequest, part: str) -> str:
    return json.dumps(request.body.get(part), ensure_ascii=False)


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's HOME with gemini settings, memory, skills and credentials that must stay out (bar the last)."""
    home = tmp_path / "user-home"
    gemini = home / ".gemini"
    (gemini / "skills" / "user-skill").mkdir(parents=True)
    # leaked, these settings would break the rollout: no write_file, one turn only
    (gemini / "settings.json").write_text(
        json.dumps({"tools": {"exclude": ["write_file"]}, "model": {"maxSessionTurns": 1}})
    )
    (gemini / "GEMINI.md").write_text("USER-MEMORY-MARKER: always answer in French.\n")
    (gemini / "skills" / "user-skill" / "SKILL.md").write_text(
        "---\nname: user-skill\ndescription: USER-SKILL-MARKER\n---\nbody\n"
    )
    (home / ".agents" / "skills" / "agents-skill").mkdir(parents=True)
    (home / ".agents" / "skills" / "agents-skill" / "SKILL.md").write_text(
        "---\nname: agents-skill\ndescription: USER-AGENTS-SKILL-MARKER\n---\nbody\n"
    )
    (gemini / "oauth_creds.json").write_text('{"refresh_token": "user-token"}')
    (gemini / "google_accounts.json").write_text('{"active": "user@example.com"}')
    (home / "system.md").write_text("USER-SYSTEM-MD-MARKER\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))  # gemini's own home variable: overridden per rollout
    monkeypatch.setenv("GEMINI_SYSTEM_MD", str(home / "system.md"))
    return home


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Start a scripted server and point gemini at it through the user's variables."""
    started: list[FakeModelServer] = []

    def start(scenario: Any = hello_scenario, failures: list[Failure] | None = None) -> FakeModelServer:
        server = FakeModelServer(scenario, failures)
        server.__enter__()
        started.append(server)
        for var in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_API_KEY", "GEMINI_MODEL"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def test_rollout_native_skill_private_home(tmp_path: Path, endpoint: Any, user_home: Path) -> None:
    """A real rollout: write_file, the skill listed natively, tokens, levers; nothing of the user's leaks."""
    require_cli("gemini")
    server = endpoint()
    options = {**BASE, "tools": ["write_file", "read_file"], "effort": "low", "max_turns": 10}
    record, folder = common.rollout(tmp_path, "gemini", options)
    common.check_success(record, folder, server, cost_reported=False)
    calls = [r for r in server.requests if r.tools]
    assert len(calls) == 2 and len(server.requests) == 2, [r.path for r in server.requests]
    first = calls[0]
    assert first.model == MODEL and "streamGenerateContent" in first.path and first.stream
    # native placement: the skill is listed in the system instruction, activate_skill kept
    assert "greeter" in body_text(first, "systemInstruction")
    assert set(first.tools) == {"write_file", "read_file", "activate_skill"}, first.tools
    thinking = first.body["generationConfig"]["thinkingConfig"]
    assert thinking.get("thinkingBudget") == 1024, thinking
    # usage: every request counted once; output includes the thinking tokens
    assert record.tokens_in == INPUT_TOKENS * 2
    assert record.tokens_out == (OUTPUT_TOKENS + THOUGHT_TOKENS) * 2
    assert record.model == MODEL and record.turns == 2 and record.cost_estimated
    conversation = json.loads((folder / "conversation.json").read_text())
    assert any(m["role"] == "tool" and "write_file success" in m["content"] for m in conversation)
    assert any(
        m["role"] == "assistant" and m["content"].startswith("[tool write_file]") for m in conversation
    )
    assert (folder / "output.txt").read_text() == common.FINAL
    # the user's settings, memory, skills and system prompt never reached the model
    for request in server.requests:
        sent = json.dumps(request.body)
        for marker in USER_MARKERS:
            assert marker not in sent, marker


@pytest.mark.parametrize("placement", ["system", "prepend"])
def test_rollout_placements(tmp_path: Path, endpoint: Any, placement: str) -> None:
    """system: the skill in the system instruction (private ~/.gemini/GEMINI.md); prepend: in the prompt."""
    require_cli("gemini")
    server = endpoint()
    record, folder = common.rollout(tmp_path, "gemini", {**BASE, "placement": placement})
    common.check_success(record, folder, server, cost_reported=False)
    first = next(r for r in server.requests if r.tools)
    system, contents = body_text(first, "systemInstruction"), body_text(first, "contents")
    assert "greeter" not in system or placement == "system"  # no native copy: not listed as a skill
    if placement == "system":
        assert SKILL_BODY in system and SKILL_BODY not in contents
        assert "/.gemini/GEMINI.md" in system
    else:  # the prompt starts with the skill's front matter: "---" must not be read as an option
        assert SKILL_BODY in contents and SKILL_BODY not in system
        user = first.body["contents"][0]["parts"][-1]["text"]
        assert user.startswith("---\nname: greeter") and common.TOKEN in user


@pytest.mark.parametrize(
    ("status", "why"),
    [(429, "rate limited"), (503, "overloaded"), (400, "before the first model turn")],
)
def test_http_errors_before_first_turn_are_infra(
    tmp_path: Path, endpoint: Any, status: int, why: str
) -> None:
    """Scripted 429, 503 and 400 on the first model request: infra_error, never task_failed, not scored."""
    require_cli("gemini")
    server = endpoint(failures=[Failure(status=status)] * 3)
    record, folder = common.rollout(tmp_path, "gemini", BASE)
    assert record.status == "infra_error", (record.status, record.reason)
    assert why in (record.reason or ""), record.reason
    assert record.score is None and not (folder / "score.json").exists()
    assert len([r for r in server.requests if r.tools]) == 1  # max_attempts=1: gemini did not retry


def test_turn_limit_is_task_failed(tmp_path: Path, endpoint: Any) -> None:
    """max_turns=1 ends gemini after its first turn (exit 53): the task's failure, scored as it stands."""
    require_cli("gemini")
    server = endpoint()
    record, folder = common.rollout(tmp_path, "gemini", {**BASE, "max_turns": 1})
    assert record.status == "task_failed", (record.status, record.reason)
    assert "max turns (1)" in (record.reason or "")
    assert record.score is not None and (folder / "score.json").exists()
    assert len(server.requests) == 1


def test_hanging_server_is_infra_and_leaves_no_process(tmp_path: Path, endpoint: Any) -> None:
    """A server that never answers: the wall limit kills gemini's process group; infra_error."""
    require_cli("gemini")
    marker = str(uuid.uuid4())  # gemini's --session-id: a unique word in its argv

    servers: list[FakeModelServer] = []

    def attempt(limit: float) -> common.Rollout:
        servers.append(endpoint(failures=[Failure(hang_s=120)]))
        options = {**BASE, "wall_limit_s": limit, "extra_args": ["--session-id", marker]}
        return common.rollout(tmp_path / f"limit-{limit:g}", "gemini", options)

    def hung(_: common.Rollout) -> bool:  # the server got the request it hangs on
        return bool(servers[-1].requests)

    record, folder = common.growing_wall_limit(attempt, hung, (8, 24, 72), "gemini's model request")
    assert record.status == "infra_error", (record.status, record.reason)
    assert "no model turn before the wall limit" in (record.reason or ""), record.reason
    assert len(servers[-1].requests) == 1  # gemini did reach the server, which never answered
    assert record.score is None and not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"gemini processes left behind: {left.stdout}"


def test_complete_as_plain_model(endpoint: Any) -> None:
    """The proposer's path: no tools at all (an empty tools.core), the answer is the final text."""
    require_cli("gemini")
    server = endpoint(scenario=lambda request: Reply(text="not a side call"))
    backend = get_backend("gemini")
    assert isinstance(backend, GeminiAgent)
    result = backend.complete("---\nReturn a JSON object.", MODEL, wall_limit_s=120)
    assert result.status == "ok", (result.status, result.reason, result.log_tail)
    assert result.final_text == "skilltune test"  # the server's answer to a request offering no tools
    assert [r.tools for r in server.requests] == [[]]
    assert result.tokens_in == INPUT_TOKENS and result.cost_estimated


def test_private_home_links_credentials_only(
    tmp_path: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only gemini's credential files are linked (not copied) into the private HOME; env isolation."""
    require_cli("gemini")
    for var in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GEMINI_CLI_IDE_SERVER_PORT", "1234")
    backend = GeminiAgent()
    private = tmp_path / "private"
    private.mkdir()
    backend.link_credentials(private)
    for name in ("oauth_creds.json", "google_accounts.json"):
        link = private / ".gemini" / name
        assert link.is_symlink() and link.resolve() == (user_home / ".gemini" / name).resolve()
    assert sorted(p.name for p in (private / ".gemini").iterdir()) == [
        "google_accounts.json",
        "oauth_creds.json",
    ]
    request = make_request(tmp_path, {"model": MODEL, "placement": "system"}, system_prompt="SKILL TEXT")
    backend.prepare_home(private, request)
    settings = json.loads((private / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "oauth-personal"  # the user's login, found
    assert "tools" not in settings and "model" not in settings
    assert (private / ".gemini" / "GEMINI.md").read_text() == "SKILL TEXT"
    env = backend.environment(private, request)
    assert env["HOME"] == env["GEMINI_CLI_HOME"] == str(private)
    assert env["GEMINI_SYSTEM_MD"] == "false" and "GEMINI_CLI_IDE_SERVER_PORT" not in env
    argv = backend.command(request, private)
    assert argv[1:3] == ["-m", MODEL] and f"--prompt={request.prompt}" in argv


def test_options_and_interpretation(tmp_path: Path) -> None:
    """Typed options refuse unknown keys and efforts; events without a CLI parse as expected."""
    require_cli("gemini")
    backend = get_backend("gemini")
    with pytest.raises(UsageError, match="unknown agent option 'colour'"):
        parse_agent_options(backend, {"colour": "blue"})
    with pytest.raises(UsageError, match="effort"):
        parse_agent_options(backend, {"effort": "xhigh"})
    assert parse_agent_options(backend, {}).model == "gemini-2.5-pro"
    assert isinstance(backend, GeminiAgent)
    plain = backend.parse_options({"model": None, **backend.plain_model_options()})
    assert isinstance(plain, GeminiOptions) and plain.tools == []
    assert backend.settings(tmp_path, make_request(tmp_path, plain.model_dump()))["tools"] == {"core": []}
    effort = backend.settings(
        tmp_path, make_request(tmp_path, {"model": "gemini-3-pro-preview", "effort": "high"})
    )
    override = effort["modelConfigs"]["overrides"][0]
    assert override["match"] == {"model": "gemini-3-pro-preview"}
    assert override["modelConfig"]["generateContentConfig"]["thinkingConfig"] == {"thinkingLevel": "HIGH"}
    request = make_request(tmp_path, {"model": "auto"})
    events: list[dict[str, Any]] = [
        {"type": "init", "model": "auto"},
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": "Hel", "delta": True},
        {"type": "message", "role": "assistant", "content": "lo", "delta": True},
        {
            "type": "result",
            "status": "success",
            "stats": {
                "input_tokens": 1000,
                "output_tokens": 100,
                "total_tokens": 1200,
                "models": {
                    "gemini-2.5-flash-lite": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
                    "gemini-2.5-pro": {"input_tokens": 1000, "output_tokens": 100, "total_tokens": 1200},
                },
            },
        },
    ]
    result = backend.interpret(events, ProcessOutcome(0, [], ""), request)
    assert (result.status, result.final_text, result.turns) == ("ok", "Hello", 1)
    assert (result.tokens_in, result.tokens_out, result.model) == (1000, 200, "gemini-2.5-pro")
    assert result.cost_estimated and result.cost_usd == pytest.approx((1000 * 1.25 + 200 * 10.0) / 1e6)
    # an API error after the first model turn is the task's; a crash before it is infra
    failed = backend.interpret(
        [
            *events[:4],
            {"type": "result", "status": "error", "error": {"message": "[API Error: bad request]"}},
        ],
        ProcessOutcome(144, [], ""),
        request,
    )
    assert failed.status == "task_failed" and "HTTP 400" in (failed.reason or "")
    empty = "The model returned an empty response with no text or thoughts. This may be a transient API issue"
    transient = backend.interpret(
        [
            *events[:4],
            {"type": "error", "severity": "error", "message": empty},
            {"type": "result", "status": "error"},
        ],
        ProcessOutcome(0, [], ""),
        request,
    )
    assert transient.status == "infra_error" and "empty response" in (transient.reason or "")
    crashed = backend.interpret([], ProcessOutcome(1, [], "TypeError: boom\n"), request)
    assert crashed.status == "infra_error" and "boom" in (crashed.reason or "")
    stderr = "YOLO mode is enabled.\nWhen using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n"
    no_key = backend.interpret([], ProcessOutcome(41, [], stderr), request)
    assert no_key.status == "infra_error" and "must specify the GEMINI_API_KEY" in (no_key.reason or "")


def make_request(tmp_path: Path, options: dict[str, Any], system_prompt: str | None = None) -> AgentRequest:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "log").mkdir(exist_ok=True)
    prompt = "---\nname: x\n---\nDo it."
    return AgentRequest(
        task=Task(id="t", prompt=prompt),
        prompt=prompt,
        system_prompt=system_prompt,
        workspace=tmp_path / "ws",
        log_dir=tmp_path / "log",
        candidate_hash="noskill",
        options=GeminiAgent().parse_options(options),
    )


def test_prompt_too_long_for_argv_goes_to_stdin(endpoint: Any) -> None:
    """A 200 kB prompt (over the 128 KiB of one argv string) reaches the model once, through stdin.

    gemini waits only 500 ms for piped input to become readable once it looks (readStdin); on a loaded
    machine it can miss it and end with nothing done (exit 0, no request). That is an infra error (never
    an answer), so it is tried again, as skilltune's retries would."""
    require_cli("gemini")
    prompt = "LONG-PROMPT-START " + "word " * 40_000 + "LONG-PROMPT-END"
    for _ in range(3):
        server = endpoint(scenario=lambda request: Reply(text="the answer"))
        result = GeminiAgent().complete(prompt, MODEL, wall_limit_s=120)
        if result.status == "ok":
            break
        assert result.status == "infra_error" and not server.requests, (result.status, result.reason)
    assert result.status == "ok", (result.status, result.reason, result.log_tail)
    [request] = server.requests
    assert request.text.count("LONG-PROMPT-START") == 1 and request.text.count("LONG-PROMPT-END") == 1
