"""The real GitHub Copilot CLI (``copilot -p ... --output-format json``) against the scripted server.

copilot speaks Chat Completions to a bring-your-own-key provider: the tests point it at
the fake server through the user's variables (``COPILOT_PROVIDER_BASE_URL``,
``COPILOT_PROVIDER_API_KEY``, ``COPILOT_MODEL``), as a user would. copilot masks the
provider key wherever it occurs in its output, so the key here is long and unlike any
other text.
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
from skilltune.agents.copilot import NO_TOOLS, USAGE_FILE, CopilotAgent, CopilotOptions
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome
from skilltune.rollout.runner import RetryPolicy
from skilltune.skill import Candidate
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

MODEL = "gpt-4.1"  # priced in the table: cost is estimated
KEY = "sk-skilltune-copilot-test-7f3a9c"
SKILL_BODY = "Write exactly what the task asks."
FAST_RETRY = {"retry-after": "0"}  # copilot still waits ~1 s per retry (5 retries)
GIVE_UP = {"retry-after": "3600"}  # beyond copilot's patience: it reports the error at once
TRY_TWICE = RetryPolicy(max_attempts=2, base_s=0.0, cap_s=0.0)  # skilltune's own retry of an infra error


def workspace_of(request: ModelRequest) -> str:
    found = re.search(r"Current working directory: (\S+)", request.text)
    assert found, "copilot names its working directory in the system prompt"
    return found.group(1)


def create_scenario(request: ModelRequest) -> Reply:
    """First turn: copilot's own ``create`` tool writes hello.txt (absolute path); then the final text."""
    if request.tool_results == 0:
        assert "create" in request.tools, request.tools
        path = f"{workspace_of(request)}/{common.FILE}"
        return Reply(tool_calls=[ToolCall("create", {"path": path, "file_text": f"{common.TOKEN}\n"})])
    return Reply(text=common.FINAL)


def bash_scenario(command: str) -> Any:
    def scenario(request: ModelRequest) -> Reply:
        if request.tool_results == 0:
            return Reply(tool_calls=[ToolCall("bash", {"command": command, "description": "probe"})])
        return Reply(text=common.FINAL)

    return scenario


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Start a server with a scenario and point copilot at it through the user's COPILOT_* variables."""

    def start(scenario: Any, failures: list[Failure] | None = None) -> FakeModelServer:
        server = FakeModelServer(scenario, failures)
        server.__enter__()
        started.append(server)
        for var in (
            "COPILOT_HOME",
            "COPILOT_OFFLINE",
            "COPILOT_SKILLS_DIRS",
            "COPILOT_CUSTOM_INSTRUCTIONS_DIRS",
        ):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("COPILOT_PROVIDER_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("COPILOT_PROVIDER_TYPE", "openai")
        monkeypatch.setenv("COPILOT_PROVIDER_API_KEY", KEY)
        monkeypatch.setenv("COPILOT_MODEL", MODEL)
        return server

    started: list[FakeModelServer] = []
    yield start
    for server in started:
        server.__exit__(None, None, None)


def options(**extra: Any) -> dict[str, Any]:
    return {"wall_limit_s": 120, **extra}


def model_calls(server: FakeModelServer) -> list[ModelRequest]:
    return [r for r in server.requests if r.tools]


def system_text(request: ModelRequest) -> str:
    return str(request.body["messages"][0]["content"])


def user_text(request: ModelRequest) -> str:
    users = [m for m in request.body["messages"] if m.get("role") == "user"]
    return json.dumps(users[-1]["content"]) if users else ""


# --- real rollouts -----------------------------------------------------------------------------
def test_rollout_with_create_tool_and_native_skill(tmp_path: Path, endpoint: Any) -> None:
    require_cli("copilot")
    server = endpoint(create_scenario)
    record, folder = common.rollout(tmp_path, "copilot", options(effort="high"))
    common.check_success(record, folder, server, cost_reported=False)
    calls = model_calls(server)
    assert record.model == MODEL and all(r.model == MODEL for r in calls)
    assert record.tokens_in == INPUT_TOKENS * len(calls) and record.tokens_out == OUTPUT_TOKENS * len(calls)
    assert record.turns == 2 and record.cost_estimated
    first = calls[0]
    assert first.stream and first.path == "/v1/chat/completions"
    assert first.body.get("reasoning_effort") == "high"
    # Native placement: the system prompt lists the skill from .github/skills (the skill tool loads it).
    listing = system_text(first)
    assert "<name>greeter</name>" in listing and "Writes greeting files when asked to." in listing
    assert "skill" in first.tools
    headers = {k.lower(): v for k, v in server.raw[-1]["headers"].items()}
    assert headers["authorization"] == f"Bearer {KEY}"
    conversation = json.loads((folder / "conversation.json").read_text())
    assert any(
        m["role"] == "assistant" and m["content"].startswith("[tool call] create") for m in conversation
    )
    assert any(m["role"] == "tool" and m["content"].startswith("[create result]") for m in conversation)
    usage = json.loads((folder / USAGE_FILE).read_text())
    assert usage["modelMetrics"][MODEL]["usage"]["inputTokens"] == record.tokens_in
    kinds = [json.loads(line)["type"] for line in (folder / "events.jsonl").read_text().splitlines()]
    assert "result" in kinds and "tool.execution_complete" in kinds
    assert not any(k.endswith("_delta") for k in kinds)


def test_system_placement_goes_to_the_private_instructions(tmp_path: Path, endpoint: Any) -> None:
    require_cli("copilot")
    server = endpoint(create_scenario)
    record, folder = common.rollout(tmp_path, "copilot", options(placement="system"))
    common.check_success(record, folder, server, cost_reported=False)
    first = model_calls(server)[0]
    assert f"<custom_instruction>\n{common.SKILL.text}" in system_text(first)
    assert "<name>greeter</name>" not in system_text(first)  # nothing placed natively


def test_prepended_skill_with_front_matter_is_the_prompt(tmp_path: Path, endpoint: Any) -> None:
    require_cli("copilot")
    server = endpoint(create_scenario)
    record, folder = common.rollout(tmp_path, "copilot", options(placement="prepend"))
    common.check_success(record, folder, server, cost_reported=False)
    prompt = json.loads(user_text(model_calls(server)[0]))
    assert "---\\nname: greeter" in json.dumps(prompt) and common.TOKEN in json.dumps(prompt)
    assert SKILL_BODY not in system_text(model_calls(server)[0])


def test_agents_md_and_restricted_tools(tmp_path: Path, endpoint: Any) -> None:
    require_cli("copilot")
    server = endpoint(create_scenario)
    skill = Candidate(
        {"AGENTS.md": "# Rules\n\nAGENTS-MARKER-7: always greet.\n"}, main="AGENTS.md", kind="file"
    )
    record, folder = common.rollout(tmp_path, "copilot", options(tools=["view", "create"]), candidate=skill)
    common.check_success(record, folder, server, cost_reported=False)
    first = model_calls(server)[0]
    assert "AGENTS-MARKER-7" in system_text(first)
    assert first.tools == ["view", "create"]  # no skill folder: the skill tool is not kept


# --- infrastructure errors ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "own_retries", "attempts"), [(429, 5, 1), (503, 0, 1), (529, 0, 1), (400, 0, 2)]
)
def test_http_errors_before_the_first_turn_are_infra_errors(
    tmp_path: Path, endpoint: Any, status: int, own_retries: int, attempts: int
) -> None:
    """An HTTP error before the first turn: infra_error, never scored; skilltune tries it again (the 400
    case lets it: a second copilot run).

    With a retry-after of 0 copilot retries a 429/5xx five times itself (a second each: the 429 case
    shows it once); with an hour's retry-after it gives up at once, as it does on a 400."""
    require_cli("copilot")
    message = f"scripted {status}"
    failures = [Failure(status=status, message=message, headers=FAST_RETRY) for _ in range(own_retries)]
    failures += [Failure(status=status, message=message, headers=GIVE_UP) for _ in range(attempts)]
    server = endpoint(create_scenario, failures)
    retry = TRY_TWICE if attempts == 2 else common.NO_RETRY
    record, folder = common.rollout(tmp_path, "copilot", options(), retry=retry)
    assert record.status == "infra_error", (record.status, record.reason)
    assert record.score is None and not (folder / "score.json").exists()
    assert str(status) in (record.reason or "")
    assert record.attempts == attempts
    assert len(model_calls(server)) == own_retries + attempts and not server.failures
    assert "session.error" in (folder / "events.jsonl").read_text()


def test_hanging_server_is_an_infra_error_and_leaves_no_process(tmp_path: Path, endpoint: Any) -> None:
    require_cli("copilot")
    marker = f"skilltune-hang-{uuid.uuid4().hex}"

    servers: list[FakeModelServer] = []

    def attempt(limit: float) -> common.Rollout:
        servers.append(endpoint(create_scenario, [Failure(hang_s=120)]))
        opts = options(wall_limit_s=limit, extra_args=[f"--name={marker}"])
        return common.rollout(tmp_path / f"limit-{limit:g}", "copilot", opts)

    def hung(_: common.Rollout) -> bool:  # the server got the request it hangs on
        return bool(model_calls(servers[-1]))

    record, folder = common.growing_wall_limit(attempt, hung, (4, 12, 36), "copilot's model request")
    assert record.status == "infra_error", (record.status, record.reason)
    assert "wall limit" in (record.reason or "")
    assert record.score is None and not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"copilot processes left behind: {left.stdout}"


def test_failures_after_a_model_turn() -> None:
    """The stream decides: a 429/5xx is infra whenever it comes, another error after a turn is the task's."""
    require_cli("copilot")
    backend = CopilotAgent()
    request = _request(Path("/nonexistent"), CopilotOptions())
    turn: list[dict[str, Any]] = [
        {"type": "assistant.message", "data": {"content": "working", "model": MODEL, "toolRequests": []}}
    ]

    def interpret(
        events: list[dict[str, Any]], exit_code: int = 1, stderr: str = "", timed_out: bool = False
    ) -> tuple[str, str | None]:
        outcome = ProcessOutcome(exit_code, [], stderr, timed_out=timed_out)
        found = backend.interpret(events, outcome, request)
        return found.status, found.reason

    def error(status: int, message: str) -> list[dict[str, Any]]:
        return [
            {
                "type": "session.error",
                "data": {"errorType": "query", "message": message, "statusCode": status},
            },
            {"type": "result", "exitCode": 1, "usage": {}},
        ]

    assert interpret([*turn, *error(400, "400 context length exceeded")])[0] == "task_failed"
    assert interpret(error(400, "400 bad request"))[0] == "infra_error"
    assert interpret([*turn, *error(429, "Failed to get response; Last error: 429")])[0] == "infra_error"
    assert interpret([*turn, *error(502, "upstream")])[0] == "infra_error"
    assert interpret([*turn, {"type": "result", "exitCode": 0}], exit_code=0) == ("ok", None)
    crashed = interpret([], exit_code=1, stderr="error: Invalid command format.")
    assert crashed[0] == "infra_error" and "Invalid command format" in (crashed[1] or "")
    assert interpret(turn, exit_code=-15, timed_out=True)[0] == "timeout"


# --- isolation -----------------------------------------------------------------------------------
def test_private_home_keeps_the_login_and_nothing_else(
    tmp_path: Path, endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("copilot")
    real = tmp_path / "realhome"
    user = real / ".copilot"
    (user / "skills" / "user-skill").mkdir(parents=True)
    (user / "skills" / "user-skill" / "SKILL.md").write_text(
        "---\nname: user-secret-skill\ndescription: USER-SKILL-MARKER\n---\n\nbody\n"
    )
    (real / ".agents" / "skills" / "home-skill").mkdir(parents=True)
    (real / ".agents" / "skills" / "home-skill" / "SKILL.md").write_text(
        "---\nname: home-secret-skill\ndescription: HOME-SKILL-MARKER\n---\n\nbody\n"
    )
    (user / "copilot-instructions.md").write_text("USER-INSTRUCTIONS-MARKER\n")
    (user / "settings.json").write_text(json.dumps({"model": "USER-MODEL-MARKER", "banner": "always"}))
    login = json.dumps({"firstLaunchAt": "2026-01-01T00:00:00.000Z", "logged_in_users": []}, indent=2)
    (user / "config.json").write_text(login)
    extra = tmp_path / "extra-instructions"
    extra.mkdir()
    (extra / "AGENTS.md").write_text("EXTRA-DIR-MARKER\n")
    monkeypatch.setenv("HOME", str(real))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    probe = 'readlink "$COPILOT_HOME/config.json"; echo "HOME=$HOME"; ls -a "$COPILOT_HOME"'
    server = endpoint(bash_scenario(f"{probe}; printf '%s\\n' {common.TOKEN} > {common.FILE}"))
    monkeypatch.setenv("COPILOT_HOME", str(user))  # the user's own config dir, as variables
    monkeypatch.setenv("COPILOT_SKILLS_DIRS", str(user / "skills"))
    monkeypatch.setenv("COPILOT_CUSTOM_INSTRUCTIONS_DIRS", str(extra))
    before = sorted(p.name for p in user.iterdir())
    record, folder = common.rollout(tmp_path, "copilot", options())
    common.check_success(record, folder, server, cost_reported=False)
    calls = model_calls(server)
    seen = "\n".join(json.dumps(r.body) for r in calls)
    for marker in (
        "USER-SKILL-MARKER",
        "HOME-SKILL-MARKER",
        "USER-INSTRUCTIONS-MARKER",
        "EXTRA-DIR-MARKER",
        "USER-MODEL-MARKER",
    ):
        assert marker not in seen, marker
    shell_output = json.dumps([m for m in calls[1].body["messages"] if m.get("role") == "tool"])
    assert str(user / "config.json") in shell_output  # the login state is a link to the real file
    assert f"HOME={real}" not in shell_output  # the agent ran in its private HOME
    assert (user / "config.json").read_text() == login
    assert sorted(p.name for p in user.iterdir()) == before  # nothing written into the user's config
    assert (real / ".cache" / "copilot" / "pkg").is_dir()  # the package cache is the user's own, shared


# --- options, command, proposer ------------------------------------------------------------------
def test_options_and_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli("copilot")
    backend = get_backend("copilot")
    assert isinstance(backend.parse_options({}), CopilotOptions)
    with pytest.raises(UsageError, match=r"no max-turns limit.*wall_limit_s"):
        parse_agent_options(backend, {"max_turns": 5})
    with pytest.raises(UsageError, match="unknown agent option 'turns'"):
        parse_agent_options(backend, {"turns": 5})
    with pytest.raises(UsageError, match="effort"):
        parse_agent_options(backend, {"effort": "extreme"})
    check = backend.check()
    assert check.installed and check.version and "1.0.102" in check.version
    assert any("max_turns is refused" in n for n in check.notes)
    assert isinstance(backend, CopilotAgent)
    front = "---\nname: x\n---\ndo it"
    request = _request(tmp_path, CopilotOptions(model="m", effort="low", tools=[]), prompt=front)
    argv = backend.command(request, tmp_path)
    assert f"--prompt={front}" in argv and "--" not in argv
    assert argv[argv.index("--model") + 1] == "m" and argv[argv.index("--reasoning-effort") + 1] == "low"
    assert f"--available-tools={NO_TOOLS}" in argv and backend.stdin_text(request) is None
    long = _request(tmp_path, CopilotOptions(), prompt="x" * 200_000)
    assert not any(a.startswith("--prompt") for a in backend.command(long, tmp_path))
    assert backend.stdin_text(long) == long.prompt
    monkeypatch.setenv("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("COPILOT_SKILLS_DIRS", "/somewhere")
    monkeypatch.setenv("COPILOT_HOME", "/user/copilot")
    monkeypatch.setenv("GH_TOKEN", "gh-token")
    monkeypatch.delenv("COPILOT_OFFLINE", raising=False)
    env = backend.environment(tmp_path, request)
    assert env["COPILOT_OFFLINE"] == "true" and env["COPILOT_HOME"] == str(tmp_path / ".copilot")
    assert "COPILOT_SKILLS_DIRS" not in env and env["GH_TOKEN"] == "gh-token"
    assert env["COPILOT_PROVIDER_BASE_URL"] == "http://127.0.0.1:9/v1"
    monkeypatch.delenv("COPILOT_PROVIDER_BASE_URL")
    assert "COPILOT_OFFLINE" not in backend.environment(tmp_path, request)  # GitHub routing needs the network


def test_proposer_mode_offers_no_tools(endpoint: Any) -> None:
    require_cli("copilot")
    server = endpoint(create_scenario)
    result = CopilotAgent().complete("Answer with JSON.", MODEL, wall_limit_s=120)
    assert result.status == "ok", (result.reason, result.log_tail)
    assert result.final_text == "skilltune test"  # the fake server's answer to a request without tools
    assert server.requests and all(not r.tools for r in server.requests)
    assert result.tokens_in == INPUT_TOKENS and result.cost_estimated


def _request(
    tmp_path: Path, opts: CopilotOptions, prompt: str = "do it", system: str | None = None
) -> AgentRequest:
    return AgentRequest(
        task=Task(id="t", prompt=prompt),
        prompt=prompt,
        system_prompt=system,
        workspace=tmp_path / "ws",
        log_dir=tmp_path / "log",
        candidate_hash="noskill",
        options=opts,
    )
