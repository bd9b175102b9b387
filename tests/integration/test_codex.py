"""The real codex CLI (``codex exec --json``) against the scripted Responses server.

codex speaks only the OpenAI Responses API, always streaming. The backend points it
at the server through ``OPENAI_BASE_URL`` (a provider with ``wire_api = "responses"``
in a private CODEX_HOME) and reads the key from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend, parse_agent_options
from skilltune.agents.base import AgentRequest
from skilltune.agents.codex import LAST_MESSAGE_FILE, CodexAgent, CodexOptions
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome
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
    final_text,
)
from tests.integration import common

MODEL = "gpt-5.5"  # a model codex knows (it offers apply_patch); priced under "gpt-5"
PATCH = f"*** Begin Patch\n*** Add File: {common.FILE}\n+{common.TOKEN}\n*** End Patch\n"
SKILL_BODY = "Write exactly what the task asks."


def patch_scenario(request: ModelRequest) -> Reply:
    """First turn: codex's own apply_patch (a free-form tool: raw patch text); then the final text."""
    if request.tool_results == 0:
        assert "apply_patch" in request.tools, request.tools
        return Reply(tool_calls=[ToolCall("apply_patch", PATCH)])
    return Reply(text=common.FINAL)


def shell_scenario(command: str) -> Any:
    """First turn: codex's shell tool (exec_command) runs ``command``; then the final text."""

    def scenario(request: ModelRequest) -> Reply:
        if request.tool_results == 0:
            assert "exec_command" in request.tools, request.tools
            return Reply(tool_calls=[ToolCall("exec_command", {"cmd": command})])
        return Reply(text=common.FINAL)

    return scenario


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Start a server with a scenario and point codex at it through the user's variables."""

    def start(
        scenario: Any, failures: list[Failure] | None = None, key: str | None = "sk-test"
    ) -> FakeModelServer:
        server = FakeModelServer(scenario, failures)
        server.__enter__()
        started.append(server)
        for var in ("CODEX_BASE_URL", "CODEX_API_KEY", "OPENAI_API_KEY", "CODEX_HOME"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        if key is not None:
            monkeypatch.setenv("OPENAI_API_KEY", key)
        return server

    started: list[FakeModelServer] = []
    yield start
    for server in started:
        server.__exit__(None, None, None)


def options(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "retries": 0, "wall_limit_s": 120, **extra}


def developer_text(request: ModelRequest) -> str:
    return "\n".join(
        json.dumps(item)
        for item in request.body.get("input", [])
        if isinstance(item, dict) and item.get("role") == "developer"
    )


# --- real rollouts -----------------------------------------------------------------------------
def test_rollout_with_apply_patch_and_native_skill(tmp_path: Path, endpoint: Any) -> None:
    require_cli("codex")
    server = endpoint(patch_scenario)
    record, folder = common.rollout(tmp_path, "codex", options(effort="high"))
    common.check_success(record, folder, server, cost_reported=False)
    model_calls = [r for r in server.requests if r.tools]
    assert record.model == MODEL and all(r.model == MODEL for r in model_calls)
    assert record.tokens_in == INPUT_TOKENS * len(model_calls)
    assert record.tokens_out == OUTPUT_TOKENS * len(model_calls)
    assert record.turns == 2  # the patch and the final message
    first = model_calls[0]
    # Native placement: codex lists the skill (name, description, path) to the model.
    listing = developer_text(first)
    assert "greeter: Writes greeting files when asked to." in listing
    assert "greeter/SKILL.md" in listing
    assert first.body["reasoning"]["effort"] == "high"
    assert first.path == "/v1/responses" and first.stream
    # The patch went back to the model as a custom tool result; the transcript shows the tool.
    outputs = [i for i in model_calls[1].body["input"] if i.get("type") == "custom_tool_call_output"]
    assert outputs and "hello.txt" in json.dumps(outputs)
    conversation = json.loads((folder / "conversation.json").read_text())
    assert {"role": "assistant", "content": f"[tool apply_patch] add {common.FILE}"} in conversation
    assert (folder / LAST_MESSAGE_FILE).read_text().strip() == common.FINAL
    kinds = [e.get("type") for e in map(json.loads, (folder / "events.jsonl").read_text().splitlines())]
    assert kinds[0] == "thread.started" and kinds[-2:] == ["turn.completed", "skilltune.skill_loads"]


def test_rollout_with_shell_tool_and_system_placement(tmp_path: Path, endpoint: Any) -> None:
    require_cli("codex")
    server = endpoint(shell_scenario(f"printf '%s\\n' {common.TOKEN} > {common.FILE} && ls -a"))
    record, folder = common.rollout(tmp_path, "codex", options(placement="system"))
    common.check_success(record, folder, server, cost_reported=False)
    first = next(r for r in server.requests if r.tools)
    developer = developer_text(first)
    assert SKILL_BODY in developer  # developer_instructions carry the skill
    assert "greeter: Writes" not in developer  # ... and nothing was placed natively
    conversation = json.loads((folder / "conversation.json").read_text())
    shell = [m for m in conversation if m["content"].startswith("[tool shell] ")]
    assert shell and common.FILE in shell[0]["content"]
    assert any(m["role"] == "tool" and m["content"].startswith("[exit 0]") for m in conversation)


def test_single_agents_md_is_sent(tmp_path: Path, endpoint: Any) -> None:
    require_cli("codex")
    server = endpoint(patch_scenario)
    skill = Candidate(
        {"AGENTS.md": "# Rules\n\nAGENTS-MARKER-7: always greet politely.\n"}, main="AGENTS.md", kind="file"
    )
    record, folder = common.rollout(tmp_path, "codex", options(), candidate=skill)
    common.check_success(record, folder, server, cost_reported=False)
    assert "AGENTS-MARKER-7" in next(r for r in server.requests if r.tools).text


def test_prepended_skill_with_front_matter_is_the_prompt(tmp_path: Path, endpoint: Any) -> None:
    require_cli("codex")
    server = endpoint(patch_scenario)
    record, folder = common.rollout(tmp_path, "codex", options(placement="prepend"))
    common.check_success(record, folder, server, cost_reported=False)
    first = next(r for r in server.requests if r.tools)
    user_texts = [
        part.get("text", "")
        for item in first.body["input"]
        if item.get("role") == "user"
        for part in item.get("content", [])
    ]
    assert any(t.startswith("---\nname: greeter") and common.TOKEN in t for t in user_texts), user_texts


# --- infrastructure errors ---------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 503, 529, 500, 400])
def test_http_errors_before_the_first_turn_are_infra_errors(
    tmp_path: Path, endpoint: Any, status: int
) -> None:
    require_cli("codex")
    server = endpoint(patch_scenario, [Failure(status=status, message=f"scripted {status}")])
    record, folder = common.rollout(tmp_path, "codex", options())
    assert record.status == "infra_error", (record.status, record.reason)
    assert record.score is None and not (folder / "score.json").exists()
    assert record.attempts == 1 and len([r for r in server.requests if r.tools]) == 1  # retries=0
    assert "turn.failed" in (folder / "events.jsonl").read_text()


def test_hanging_server_is_an_infra_error_and_leaves_no_process(tmp_path: Path, endpoint: Any) -> None:
    require_cli("codex")
    marker = f"skilltune-hang-{uuid.uuid4().hex}"

    servers: list[FakeModelServer] = []

    def attempt(limit: float) -> common.Rollout:
        servers.append(endpoint(patch_scenario, [Failure(hang_s=120)]))
        opts = options(wall_limit_s=limit, extra_args=["-c", f'skilltune_test_marker="{marker}"'])
        return common.rollout(tmp_path / f"limit-{limit:g}", "codex", opts)

    def hung(_: common.Rollout) -> bool:  # the server got the request it hangs on
        return bool(any(r.tools for r in servers[-1].requests))

    record, folder = common.growing_wall_limit(attempt, hung, (3, 9, 27), "codex's model request")
    assert record.status == "infra_error", (record.status, record.reason)
    assert "wall limit" in (record.reason or "")
    assert record.score is None and not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"codex processes left behind: {left.stdout}"


def test_stream_failures_after_a_model_turn(tmp_path: Path) -> None:
    """The wording codex uses decides: overload/network is infra, anything else the task's own failure."""
    require_cli("codex")
    backend = CodexAgent()
    request = _request(tmp_path, CodexOptions(model=MODEL))
    turn: list[dict[str, Any]] = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "working"}},
    ]
    failed = ProcessOutcome(returncode=1, stdout_lines=[], stderr_tail="")

    def status(message: str, events: list[dict[str, Any]] = turn) -> tuple[str, str | None]:
        result = backend.interpret(
            [*events, {"type": "turn.failed", "error": {"message": message}}], failed, request
        )
        return result.status, result.reason

    assert (
        status("We’re currently experiencing high demand, which may cause temporary errors.")[0]
        == "infra_error"
    )
    assert status("stream disconnected before completion: error sending request")[0] == "infra_error"
    assert status("exceeded retry limit, last status: 429 Too Many Requests")[0] == "infra_error"
    assert status("You've hit your usage limit. Try again later.")[0] == "infra_error"
    assert status("Codex ran out of room in the model's context window.")[0] == "task_failed"
    assert status("Codex ran out of room in the model's context window.", turn[:2])[0] == "infra_error"
    ok = backend.interpret(
        [*turn, {"type": "turn.completed", "usage": {"input_tokens": 7, "output_tokens": 3}}],
        ProcessOutcome(returncode=0, stdout_lines=[], stderr_tail=""),
        request,
    )
    assert (ok.status, ok.final_text, ok.tokens_in, ok.tokens_out, ok.turns) == ("ok", "working", 7, 3, 1)
    crashed = backend.interpret(
        [],
        ProcessOutcome(returncode=1, stdout_lines=[], stderr_tail="Error loading config.toml"),
        request,
    )
    assert crashed.status == "infra_error" and "config.toml" in (crashed.reason or "")


# --- isolation -----------------------------------------------------------------------------------
def test_private_codex_home_keeps_the_login_and_nothing_else(
    tmp_path: Path, endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("codex")
    real = tmp_path / "realhome"
    user_codex = real / ".codex"
    (user_codex / "skills" / "user-skill").mkdir(parents=True)
    (user_codex / "skills" / "user-skill" / "SKILL.md").write_text(
        "---\nname: user-secret-skill\ndescription: USER-SKILL-MARKER\n---\n\nbody\n"
    )
    (real / ".agents" / "skills" / "home-skill").mkdir(parents=True)
    (real / ".agents" / "skills" / "home-skill" / "SKILL.md").write_text(
        "---\nname: home-secret-skill\ndescription: HOME-SKILL-MARKER\n---\n\nbody\n"
    )
    (user_codex / "AGENTS.md").write_text("USER-AGENTS-MARKER\n")
    config = 'developer_instructions = "USER-CONFIG-MARKER"\nmodel = "user-model"\n'
    (user_codex / "config.toml").write_text(config)
    auth = json.dumps({"OPENAI_API_KEY": "sk-linked-login"})
    (user_codex / "auth.json").write_text(auth)
    monkeypatch.setenv("HOME", str(real))
    probe = 'readlink "$CODEX_HOME/auth.json"; ls -a "$CODEX_HOME"; echo "HOME=$HOME"'
    server = endpoint(shell_scenario(f"{probe}; printf '%s\\n' {common.TOKEN} > {common.FILE}"), key=None)
    record, folder = common.rollout(tmp_path, "codex", options())
    common.check_success(record, folder, server, cost_reported=False)
    calls = [r for r in server.requests if r.tools]
    seen = "\n".join(json.dumps(r.body) for r in calls)
    for marker in (
        "USER-SKILL-MARKER",
        "HOME-SKILL-MARKER",
        "USER-AGENTS-MARKER",
        "USER-CONFIG-MARKER",
        "user-model",
    ):
        assert marker not in seen, marker
    # No key variable: the endpoint got the key of the linked auth.json (a logged-in codex works).
    posts = [r for r in server.raw if r["method"] == "POST"]
    assert posts and all(
        {k.lower(): v for k, v in r["headers"].items()}.get("authorization") == "Bearer sk-linked-login"
        for r in posts
    )
    shell_output = json.dumps([i for i in calls[1].body["input"] if i.get("type") == "function_call_output"])
    assert str(user_codex / "auth.json") in shell_output  # a link to the real file, not a copy
    assert f"HOME={real}" not in shell_output  # the agent ran in its private HOME
    assert (user_codex / "config.toml").read_text() == config and (
        user_codex / "auth.json"
    ).read_text() == auth
    assert sorted(p.name for p in user_codex.iterdir()) == ["AGENTS.md", "auth.json", "config.toml", "skills"]


def test_codex_home_variable_is_where_the_login_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("codex")
    elsewhere = tmp_path / "codex-home"
    elsewhere.mkdir()
    (elsewhere / "auth.json").write_text("{}")
    monkeypatch.setenv("CODEX_HOME", str(elsewhere))
    home = tmp_path / "private"
    home.mkdir()
    CodexAgent().link_credentials(home)
    assert (home / ".codex" / "auth.json").resolve() == (elsewhere / "auth.json").resolve()
    assert (home / ".codex" / "auth.json").is_symlink()


# --- options, config, proposer -------------------------------------------------------------------
def test_options_refuse_what_codex_cannot_do() -> None:
    require_cli("codex")
    backend = get_backend("codex")
    assert isinstance(backend.parse_options({}), CodexOptions)
    with pytest.raises(UsageError, match=r"no max-turns limit.*wall_limit_s"):
        parse_agent_options(backend, {"max_turns": 5})
    with pytest.raises(UsageError, match="sandbox=read-only"):
        parse_agent_options(backend, {"tools": ["Read", "Edit"]})
    with pytest.raises(UsageError, match="unknown agent option 'turns'"):
        parse_agent_options(backend, {"turns": 5})
    with pytest.raises(UsageError, match="effort"):
        parse_agent_options(backend, {"effort": "extreme"})
    check = backend.check()
    assert check.installed and check.version and "0.171" in check.version
    notes = "\n".join(check.notes)
    assert "max_turns is refused" in notes and "tools=... is refused" in notes


def test_config_and_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli("codex")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("CODEX_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    backend = CodexAgent()
    system = 'Line "one"\n\tTab \\ backslash \x7f\x01 ünïcode\n---\n'
    opts = CodexOptions(model=MODEL, effort="low", placement="system", shell=False, web_search="disabled")
    request = _request(tmp_path, opts, prompt="---\nfront: matter\n---\ndo it", system=system)
    config = tomllib.loads(backend.settings_text(tmp_path, request))
    assert config["developer_instructions"] == system
    assert config["model_reasoning_effort"] == "low" and config["web_search"] == "disabled"
    assert config["features"] == {"shell_tool": False}
    assert config["check_for_update_on_startup"] is False and config["analytics"] == {"enabled": False}
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9/v1" and provider["env_key"] == "CODEX_API_KEY"
    assert provider["wire_api"] == "responses" and provider["request_max_retries"] == 1
    argv = backend.command(request, tmp_path)
    assert argv[-2:] == ["--", request.prompt] and argv[argv.index("-m") + 1] == MODEL
    assert argv[argv.index("-s") + 1] == "workspace-write"
    env = backend.environment(tmp_path, request)
    assert env["CODEX_HOME"] == str(tmp_path / ".codex") and env["CODEX_API_KEY"] == "sk-codex"
    monkeypatch.delenv("CODEX_BASE_URL")
    config = tomllib.loads(backend.settings_text(tmp_path, request))
    assert "model_provider" not in config  # codex's own provider


def test_proposer_mode_is_read_only_without_shell(endpoint: Any) -> None:
    require_cli("codex")
    server = endpoint(final_text('{"edits": []}'))
    result = CodexAgent().complete("Answer with JSON.", MODEL, wall_limit_s=120)
    assert result.status == "ok", (result.reason, result.log_tail)
    assert result.final_text == '{"edits": []}' and result.tokens_in == INPUT_TOKENS
    request = next(r for r in server.requests if r.tools)
    assert "exec_command" not in request.tools and "web_search" not in request.tools
    assert '"sandbox_mode":"read-only"' in json.dumps(request.body.get("client_metadata", {})).replace(
        "\\", ""
    )


def test_prompt_and_system_prompt_too_long_for_argv(tmp_path: Path, endpoint: Any) -> None:
    """A 200 kB prompt goes to stdin (``-``), a 200 kB skill to config.toml: each reaches the model once."""
    require_cli("codex")
    server = endpoint(final_text("done"))
    prompt = "LONG-PROMPT-START " + "word " * 40_000 + "LONG-PROMPT-END"  # over 128 KiB: no argv string
    system = "LONG-SYSTEM-START " + "rule " * 40_000 + "LONG-SYSTEM-END"
    opts = CodexOptions(
        model=MODEL, placement="system", sandbox="read-only", shell=False, retries=0, wall_limit_s=120
    )
    request = _request(tmp_path, opts, prompt=prompt, system=system)
    backend = CodexAgent()
    argv = backend.command(request, tmp_path)
    assert argv[-2:] == ["--", "-"] and backend.stdin_text(request) == prompt
    assert not any(system in a or prompt in a for a in argv)  # developer_instructions: in config.toml
    result = backend.run(request)
    assert result.status == "ok", (result.reason, result.log_tail)
    [call] = [r for r in server.requests if r.tools]
    user = [p.get("text") for i in call.body["input"] if i.get("role") == "user" for p in i["content"]]
    assert user.count(prompt) == 1 and call.text.count("LONG-PROMPT-START") == 1
    developer = developer_text(call)
    assert json.dumps(system) in developer and call.text.count("LONG-SYSTEM-START") == 1


def _request(
    tmp_path: Path, opts: CodexOptions, prompt: str = "do it", system: str | None = None
) -> AgentRequest:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "log").mkdir(exist_ok=True)
    return AgentRequest(
        task=Task(id="t", prompt=prompt),
        prompt=prompt,
        system_prompt=system,
        workspace=tmp_path / "ws",
        log_dir=tmp_path / "log",
        candidate_hash="noskill",
        options=opts,
    )
