"""The real Qwen Code CLI (``qwen -o stream-json``) against the scripted Chat Completions server.

qwen is pointed at the server through the user's variables (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``OPENAI_MODEL``), as a user would. One server serves the whole
module (each test sets its scenario and scripted failures and reads the requests it
caused): qwen is the slowest of the CLIs, so rollouts are kept few.

qwen retries 429 and 5xx seven times with backoff (about 75 s) whatever its settings say,
and ignores ``retry-after`` from an OpenAI-compatible endpoint; those cases therefore end
at a short wall limit (still an infra error, never scored), and qwen's own final report
of such an error (an ``[API Error: 429 ...]`` text in a ``success`` result, exit code 0)
is checked on the stream it prints, replayed.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend, parse_agent_options
from skilltune.agents.base import AgentRequest
from skilltune.agents.qwen import NO_TOOLS, QwenAgent, QwenOptions
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
)
from tests.integration import common

MODEL = "qwen3-coder-plus"  # priced under "qwen3-coder": cost is estimated
KEY = "sk-skilltune-qwen-test-5d21"


def workspace_of(request: ModelRequest) -> str:
    found = re.search(r"working in the directory: (\S+)", request.text)
    assert found, "qwen names its working directory in its first user message"
    return found.group(1).rstrip(".")


def write_scenario(request: ModelRequest) -> Reply:
    """First turn: qwen's own ``write_file`` tool writes hello.txt (absolute path); then the final text."""
    if request.tool_results == 0:
        assert "write_file" in request.tools, request.tools
        path = f"{workspace_of(request)}/{common.FILE}"
        return Reply(tool_calls=[ToolCall("write_file", {"file_path": path, "content": f"{common.TOKEN}\n"})])
    return Reply(text=common.FINAL)


def shell_scenario(command: str) -> Any:
    def scenario(request: ModelRequest) -> Reply:
        if request.tool_results == 0:
            return Reply(tool_calls=[ToolCall("run_shell_command", {"command": command})])
        return Reply(text=common.FINAL)

    return scenario


class Endpoint:
    """The module's server, set up for one test: scenario, failures, the test's own requests."""

    def __init__(self, server: FakeModelServer) -> None:
        self.server = server

    def calls(self) -> list[ModelRequest]:
        return [r for r in self.server.requests if r.tools]

    def requests(self) -> list[ModelRequest]:
        return self.server.requests


@pytest.fixture(scope="module")
def shared_server() -> Iterator[FakeModelServer]:
    with FakeModelServer(write_scenario) as server:
        yield server


@pytest.fixture
def endpoint(shared_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    def start(scenario: Any = write_scenario, failures: list[Failure] | None = None) -> Endpoint:
        shared_server.scenario = scenario
        shared_server.failures = list(failures or [])
        shared_server.requests.clear()  # common.check_success counts the server's requests
        shared_server.raw.clear()
        for var in ("QWEN_HOME", "OPENAI_ORG_ID", "QWEN_CODE_UNATTENDED_RETRY"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{shared_server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_MODEL", MODEL)
        return Endpoint(shared_server)

    return start


def options(**extra: Any) -> dict[str, Any]:
    return {"wall_limit_s": 120, **extra}


def system_text(request: ModelRequest) -> str:
    return str(request.body["messages"][0]["content"])


# --- real rollouts -----------------------------------------------------------------------------
def test_rollout_with_write_file_and_native_skill(tmp_path: Path, endpoint: Any) -> None:
    require_cli("qwen")
    end = endpoint()
    record, folder = common.rollout(tmp_path, "qwen", options(effort="high", max_turns=5))
    common.check_success(record, folder, end.server, cost_reported=False)
    calls = end.calls()
    assert len(end.requests()) == len(calls) == 2  # no side calls (managed memory is off)
    assert record.model == MODEL and all(r.model == MODEL for r in calls)
    assert record.tokens_in == INPUT_TOKENS * 2 and record.tokens_out == OUTPUT_TOKENS * 2
    assert record.turns == 2 and record.cost_estimated and record.cost_usd
    first = calls[0]
    assert first.stream and first.path == "/v1/chat/completions"
    assert first.body.get("reasoning") == {"effort": "high"}
    headers = {k.lower(): v for k, v in end.server.raw[-1]["headers"].items()}
    assert headers["authorization"] == f"Bearer {KEY}"
    # Native placement: the skill tool lists the skill from .qwen/skills to the model.
    skill_tool = next(t for t in first.body["tools"] if t["function"]["name"] == "skill")
    assert "<name>\ngreeter\n</name>" in skill_tool["function"]["description"]
    conversation = json.loads((folder / "conversation.json").read_text())
    assert any(
        m["role"] == "assistant" and m["content"].startswith("[tool call] write_file") for m in conversation
    )
    assert any(m["role"] == "tool" and m["content"].startswith("[write_file result]") for m in conversation)
    kinds = [json.loads(line)["type"] for line in (folder / "events.jsonl").read_text().splitlines()]
    assert kinds[0] == "system" and kinds[-2:] == ["result", "skilltune.skill_loads"]


@pytest.mark.parametrize("placement", ["system", "prepend"])
def test_system_and_prepend_placement(tmp_path: Path, endpoint: Any, placement: str) -> None:
    require_cli("qwen")
    end = endpoint()
    record, folder = common.rollout(tmp_path, "qwen", options(placement=placement))
    common.check_success(record, folder, end.server, cost_reported=False)
    first = end.calls()[0]
    skill_tool = next(t for t in first.body["tools"] if t["function"]["name"] == "skill")
    assert "greeter" not in skill_tool["function"]["description"]  # nothing placed natively
    if placement == "system":  # --append-system-prompt: the end of qwen's system prompt
        assert common.SKILL.text.strip() in system_text(first)
    else:
        prompt = json.dumps(first.body["messages"][-1]["content"])
        assert json.dumps("---\nname: greeter")[1:-1] in prompt and common.TOKEN in prompt
        assert "Write exactly what the task asks." not in system_text(first)


def test_qwen_md_and_restricted_tools(tmp_path: Path, endpoint: Any) -> None:
    require_cli("qwen")
    end = endpoint()
    skill = Candidate({"QWEN.md": "# Rules\n\nQWEN-MARKER-7: always greet.\n"}, main="QWEN.md", kind="file")
    record, folder = common.rollout(
        tmp_path, "qwen", options(tools=["read_file", "write_file"]), candidate=skill
    )
    common.check_success(record, folder, end.server, cost_reported=False)
    first = end.calls()[0]
    assert "QWEN-MARKER-7" in first.text
    assert sorted(first.tools) == ["read_file", "write_file"]  # no skill folder: the skill tool goes too


def test_max_turns_is_the_tasks_failure(tmp_path: Path, endpoint: Any) -> None:
    require_cli("qwen")
    end = endpoint()
    record, folder = common.rollout(tmp_path, "qwen", options(max_turns=1))
    assert record.status == "task_failed", (record.status, record.reason)
    assert "max turns" in (record.reason or "")
    assert record.score is not None and (folder / "score.json").exists()  # scored as it stands
    assert len(end.calls()) == 1 and record.turns == 1 and record.tokens_in == INPUT_TOKENS


# --- infrastructure errors ---------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 400, 503, 529])
def test_http_errors_before_the_first_turn_are_infra_errors(
    tmp_path: Path, endpoint: Any, status: int
) -> None:
    require_cli("qwen")
    retried = status != 400  # qwen backs off ~75 s on 429/5xx: a short wall limit ends it
    failures = [Failure(status=status, message=f"scripted {status}")] * 10

    ends: list[Endpoint] = []

    def attempt(limit: float) -> common.Rollout:
        ends.append(endpoint(write_scenario, failures))
        return common.rollout(tmp_path / f"limit-{limit:g}", "qwen", options(wall_limit_s=limit))

    def backing_off(_: common.Rollout) -> bool:  # qwen had its first error before the limit
        return bool(ends[-1].calls())

    limits = (5, 15, 45) if retried else (120,)
    record, folder = common.growing_wall_limit(attempt, backing_off, limits, "qwen's first model request")
    end = ends[-1]
    assert record.status == "infra_error", (record.status, record.reason)
    assert record.score is None and not (folder / "score.json").exists()
    assert record.attempts == 1 and not record.turns
    if retried:
        assert "wall limit" in (record.reason or "") and end.calls()
    else:
        assert str(status) in (record.reason or "")
        assert len(end.calls()) == 1  # no retry of a 400
        assert "[API Error:" in (folder / "agent-stdout.jsonl").read_text()


def test_hanging_server_is_an_infra_error_and_leaves_no_process(tmp_path: Path, endpoint: Any) -> None:
    require_cli("qwen")
    marker = str(uuid.uuid4())  # qwen's --session-id wants a UUID: it marks the process

    ends: list[Endpoint] = []

    def attempt(limit: float) -> common.Rollout:
        ends.append(endpoint(write_scenario, [Failure(hang_s=120)]))
        options_ = options(wall_limit_s=limit, extra_args=[f"--session-id={marker}"])
        return common.rollout(tmp_path / f"limit-{limit:g}", "qwen", options_)

    def hung(_: common.Rollout) -> bool:  # its model request reached the server, which hung
        return bool(ends[-1].calls())

    record, folder = common.growing_wall_limit(attempt, hung, (4, 12, 36), "qwen's model request")
    assert record.status == "infra_error", (record.status, record.reason)
    assert "wall limit" in (record.reason or "")
    assert record.score is None and not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"qwen processes left behind: {left.stdout}"


def _turn(text: str = "working", tokens: int = 120) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "model": MODEL,
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": tokens, "output_tokens": tokens // 4},
        },
    }


def _result(text: str, turns: int, tokens: int = 0) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": turns,
        "result": text,
        "usage": {"input_tokens": tokens, "output_tokens": tokens // 4},
    }


def test_replayed_streams() -> None:
    """qwen's own reports of failures, as it prints them (a success result holding an API error text)."""
    require_cli("qwen")
    backend = QwenAgent()
    request = _request(Path("/nonexistent"), QwenOptions())
    init = {"type": "system", "subtype": "init", "model": MODEL, "tools": []}

    def interpret(
        events: list[dict[str, Any]], code: int = 0, stderr: str = ""
    ) -> tuple[str, str | None, Any]:
        found = backend.interpret([init, *events], ProcessOutcome(code, [], stderr), request)
        return found.status, found.reason, found

    error_503 = "[API Error: 503 scripted 503]"
    status, reason, found = interpret([_turn(error_503, 0), _result(error_503, 1)])
    assert (
        status == "infra_error" and "503" in (reason or "") and found.turns == 0 and found.tokens_in is None
    )
    assert interpret([_turn(), _turn(error_503, 0), _result(error_503, 2, 120)])[0] == "infra_error"
    quota = "[API Error: 429 scripted]\nPossible quota limitations in place or slow response times detected."
    assert interpret([_turn(), _turn(quota, 0), _result(quota, 2, 120)])[0] == "infra_error"
    bad = "[API Error: 400 context too long]"
    assert interpret([_turn(), _turn(bad, 0), _result(bad, 2, 120)])[0] == "task_failed"
    assert interpret([_turn(bad, 0), _result(bad, 1)])[0] == "infra_error"
    status, _, found = interpret([_turn("Done"), _result("Done", 1, 120)])
    assert (status, found.final_text, found.tokens_in, found.tokens_out, found.turns) == (
        "ok",
        "Done",
        120,
        30,
        1,
    )
    status, reason, found = interpret(
        [_turn()], code=53, stderr="Reached max session turns for this session."
    )
    assert status == "task_failed" and "max turns" in (reason or "") and found.tokens_in == 120
    assert interpret([], code=1, stderr="Unknown arguments: -, x")[0] == "infra_error"


def test_shell_commands_run_on_pipes_so_the_agent_sees_all_their_output(
    tmp_path: Path, endpoint: Any
) -> None:
    """qwen's shell tool on a pseudo-terminal takes the output when node-pty reports the exit, which
    can come before the output's end: on a loaded CI machine the sealing test's agent was shown a
    command's output without its last lines. skilltune's settings put the tool on pipes (``tty``
    says "not a tty"; on qwen's default pseudo-terminal it names /dev/pts/N), and the output's end
    reaches the model (qwen keeps the head and tail of these 2,000 lines; on the pseudo-terminal,
    in one run here, the tail it kept stopped at 1981: the last 19 lines and END-OF-OUTPUT lost). The
    race itself shows only now and then: the test checks the setting that removes it."""
    require_cli("qwen")
    end = endpoint(
        shell_scenario(f"tty; seq 1 2000; echo END-OF-OUTPUT; echo {common.TOKEN} > {common.FILE}")
    )
    record, folder = common.rollout(tmp_path, "qwen", options())
    common.check_success(record, folder, end.server, cost_reported=False)
    shell_output = json.dumps([m for m in end.calls()[1].body["messages"] if m.get("role") == "tool"])
    assert "not a tty" in shell_output and "/dev/pts/" not in shell_output
    assert "2000\\nEND-OF-OUTPUT" in shell_output  # the end (the echoed command has "2000; echo")


# --- isolation -----------------------------------------------------------------------------------
def test_private_home_keeps_the_login_and_nothing_else(
    tmp_path: Path, endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("qwen")
    real = tmp_path / "realhome"
    user = real / ".qwen"
    (user / "skills" / "user-skill").mkdir(parents=True)
    (user / "skills" / "user-skill" / "SKILL.md").write_text(
        "---\nname: user-secret-skill\ndescription: USER-SKILL-MARKER\n---\n\nbody\n"
    )
    (real / ".agents" / "skills" / "home-skill").mkdir(parents=True)
    (real / ".agents" / "skills" / "home-skill" / "SKILL.md").write_text(
        "---\nname: home-secret-skill\ndescription: HOME-SKILL-MARKER\n---\n\nbody\n"
    )
    (user / "QWEN.md").write_text("USER-QWEN-MD-MARKER\n")
    settings = json.dumps(
        {"model": {"name": "USER-MODEL-MARKER"}, "memory": {"enableManagedAutoMemory": True}}
    )
    (user / "settings.json").write_text(settings)
    creds = json.dumps({"access_token": "oauth-token", "refresh_token": "r"})
    (user / "oauth_creds.json").write_text(creds)
    (user / ".env").write_text("SKILLTUNE_DOTENV_PROBE=from-linked-env\n")
    monkeypatch.setenv("HOME", str(real))
    probe = (
        'readlink "$QWEN_HOME/oauth_creds.json"; readlink "$QWEN_HOME/.env"; echo "HOME=$HOME"; '
        'echo "DOTENV=$SKILLTUNE_DOTENV_PROBE"'
    )
    end = endpoint(shell_scenario(f"{probe}; printf '%s\\n' {common.TOKEN} > {common.FILE}"))
    monkeypatch.setenv("QWEN_HOME", str(user))  # the user's own config dir, as a variable
    monkeypatch.setenv("QWEN_RUNTIME_DIR", str(user))
    before = sorted(p.name for p in user.iterdir())
    record, folder = common.rollout(tmp_path, "qwen", options())
    common.check_success(record, folder, end.server, cost_reported=False)
    calls = end.calls()
    assert len(end.requests()) == 2  # the user's memory setting did not bring the memory agent
    seen = "\n".join(json.dumps(r.body) for r in calls)
    for marker in ("USER-SKILL-MARKER", "HOME-SKILL-MARKER", "USER-QWEN-MD-MARKER", "USER-MODEL-MARKER"):
        assert marker not in seen, marker
    shell_output = json.dumps([m for m in calls[1].body["messages"] if m.get("role") == "tool"])
    assert str(user / "oauth_creds.json") in shell_output and str(user / ".env") in shell_output  # links
    assert "DOTENV=from-linked-env" in shell_output  # qwen loaded the linked .env
    assert f"HOME={real}" not in shell_output  # the agent ran in its private HOME
    assert (user / "oauth_creds.json").read_text() == creds and (
        user / "settings.json"
    ).read_text() == settings
    assert sorted(p.name for p in user.iterdir()) == before  # nothing written into the user's config


# --- options, command, proposer ------------------------------------------------------------------
def test_options_and_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli("qwen")
    backend = get_backend("qwen")
    assert isinstance(backend, QwenAgent) and isinstance(backend.parse_options({}), QwenOptions)
    with pytest.raises(UsageError, match="unknown agent option 'turns'"):
        parse_agent_options(backend, {"turns": 5})
    with pytest.raises(UsageError, match="effort"):
        parse_agent_options(backend, {"effort": "extreme"})
    check = backend.check()
    assert check.installed and check.version and "0.15.10" in check.version
    front = "---\nname: x\n---\ndo it"
    opts = QwenOptions(
        model="m", max_turns=3, tools=["read_file"], placement="system", effort="low", retries=2
    )
    request = _request(tmp_path, opts, prompt=front, system="---\nSYSTEM")
    argv = backend.command(request, tmp_path)
    assert argv[-1] == f"--prompt={front}" and "--" not in argv
    assert "--model=m" in argv and argv[argv.index("--max-session-turns") + 1] == "3"
    assert "--append-system-prompt=---\nSYSTEM" in argv and "--core-tools=read_file" in argv
    excluded = next(a for a in argv if a.startswith("--exclude-tools="))
    assert "agent" in excluded and "skill" in excluded
    settings = backend.settings(tmp_path, request)
    assert settings["model"]["generationConfig"] == {"maxRetries": 2, "reasoning": {"effort": "low"}}
    assert settings["memory"]["enableManagedAutoMemory"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    none = _request(tmp_path, QwenOptions(tools=[]))
    assert f"--core-tools={NO_TOOLS}" in backend.command(none, tmp_path)
    long = _request(tmp_path, QwenOptions(), prompt="x" * 200_000)
    assert not any(a.startswith("--prompt") for a in backend.command(long, tmp_path))
    assert backend.stdin_text(long) == long.prompt and backend.stdin_text(request) is None
    monkeypatch.setenv("QWEN_HOME", "/user/qwen")
    monkeypatch.setenv("QWEN_CODE_MEMORY_BASE_DIR", "/user/memory")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "ds")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "an")
    env = backend.environment(tmp_path, request)
    assert env["QWEN_HOME"] == str(tmp_path / ".qwen") and env["QWEN_CODE_NO_RELAUNCH"] == "true"
    assert "QWEN_CODE_MEMORY_BASE_DIR" not in env and env["DASHSCOPE_API_KEY"] == "ds"
    assert "ANTHROPIC_API_KEY" not in env
    anthropic = _request(tmp_path, QwenOptions(auth_type="anthropic"))
    assert backend.environment(tmp_path, anthropic)["ANTHROPIC_API_KEY"] == "an"


def test_proposer_mode_offers_no_tools(endpoint: Any) -> None:
    require_cli("qwen")
    end = endpoint()
    result = QwenAgent().complete("Answer with JSON.", MODEL, wall_limit_s=120)
    assert result.status == "ok", (result.reason, result.log_tail)
    assert result.final_text == "skilltune test"  # the fake server's answer to a request without tools
    assert end.requests() and all(not r.tools for r in end.requests())
    assert result.tokens_in == INPUT_TOKENS and result.cost_estimated


def _request(
    tmp_path: Path, opts: QwenOptions, prompt: str = "do it", system: str | None = None
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


def test_system_prompt_too_long_for_argv_goes_to_a_rule_file(tmp_path: Path, endpoint: Any) -> None:
    """A 200 kB system-placed skill: a global rule at the end of qwen's system prompt, front matter kept."""
    require_cli("qwen")
    end = endpoint(scenario=lambda request: Reply(text="done"))
    system = "---\nname: big\n---\nLONG-SYSTEM-START " + "rule " * 40_000 + "LONG-SYSTEM-END\n"
    (tmp_path / "ws").mkdir()
    (tmp_path / "log").mkdir()
    request = _request(tmp_path, QwenOptions(placement="system", wall_limit_s=60), system=system)
    assert not any("LONG-SYSTEM-START" in a for a in QwenAgent().command(request, tmp_path))
    result = QwenAgent().run(request)
    assert result.status == "ok", (result.reason, result.log_tail)
    text = system_text(end.calls()[0])
    assert text.count("LONG-SYSTEM-START") == 1 and "name: big" in text
    assert len(text) - text.index("LONG-SYSTEM-END") < 500, text[
        -800:
    ]  # at the end, as --append-system-prompt
    commented = _request(tmp_path, QwenOptions(placement="system"), system=system + "<!-- note -->")
    with pytest.raises(UsageError, match="HTML comments"):
        QwenAgent().run(commented)
