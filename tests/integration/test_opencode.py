"""The real opencode CLI (``opencode run --format json``) against the scripted Chat Completions server.

The backend points opencode at the server through ``OPENAI_BASE_URL`` (an
``@ai-sdk/openai-compatible`` provider in ``OPENCODE_CONFIG_CONTENT``). opencode takes
several seconds per run on CPU, so one server serves every case of this module (its
request log is cleared before each rollout) and each case runs a single rollout.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend, parse_agent_options
from skilltune.agents.opencode import OpencodeAgent, OpencodeOptions, interpret_stream
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome
from tests.conftest import require_cli
from tests.fakeserver import Failure, FakeModelServer, ModelRequest, Reply, ToolCall
from tests.integration import common

MODEL = "gpt-4.1"  # unknown to opencode's price table (it reports cost 0): skilltune estimates
SKILL_BODY = "Write exactly what the task asks."
STEP_LIMIT = "MAXIMUM STEPS REACHED"
WORKDIR = re.compile(r"Working directory: (\S+)")
SLEEPER = "-sleeper-"
SLEEPER_STARTED = "sleeper-started.txt"  # the sleeper tool's first act: the workspace's diff shows it ran
FAST_RETRY = {"retry-after-ms": "20"}  # opencode honours it: its 5 retries take no time


def require_opencode() -> None:
    require_cli("opencode")
    if shutil.which("rg") is None:  # opencode's skill tool needs ripgrep; it cannot fetch it offline
        require_cli("rg")


def scenario(request: ModelRequest) -> Reply:
    """Load the skill when it is listed, write hello.txt with opencode's write tool, then finish."""
    if STEP_LIMIT in request.text:
        return Reply(text="Stopped at the step limit.")
    if SLEEPER in request.model and request.tool_results == 0:  # a tool that outlives the wall limit
        command = f"echo {request.model} > {SLEEPER_STARTED}; sleep 300; echo {request.model}"
        return Reply(tool_calls=[ToolCall("bash", {"command": command, "description": "wait"})])
    assert "write" in request.tools, request.tools
    found = WORKDIR.search(request.text)
    assert found, "opencode's system prompt names the working directory"
    calls = []
    if "<name>greeter</name>" in request.text:
        calls.append(ToolCall("skill", {"name": "greeter"}, call_id="skill"))
    target = f"{found.group(1)}/{common.FILE}"
    calls.append(ToolCall("write", {"filePath": target, "content": common.TOKEN + "\n"}, call_id="write"))
    if request.tool_results < len(calls):
        return Reply(tool_calls=[calls[request.tool_results]])
    return Reply(text=common.FINAL)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer(scenario) as running:
        yield running


@pytest.fixture
def endpoint(server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    """The shared server with a fresh request log, reached through the user's variables."""
    require_opencode()
    server.requests.clear()
    server.raw.clear()
    server.failures.clear()
    for var in ("OPENAI_API_KEY", "OPENAI_MODEL", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    return server


def bodies(server: FakeModelServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.raw if r.get("method") == "POST"]


def system_prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")


def polluted_home(root: Path, marker: str) -> dict[str, Path]:
    """A user's HOME and XDG folders full of opencode config, rules and skills naming ``marker``."""
    home, xdg_config, xdg_data = root / "home", root / "xdg-config", root / "xdg-data"
    skill = f"---\nname: user-{marker}\ndescription: {marker} user skill\n---\n\n{marker} body\n"
    for config in (home / ".config" / "opencode", xdg_config / "opencode"):
        (config / "skills" / f"user-{marker}").mkdir(parents=True)
        (config / "skills" / f"user-{marker}" / "SKILL.md").write_text(skill)
        (config / "AGENTS.md").write_text(f"Always mention {marker}.\n")
        (config / "opencode.json").write_text(json.dumps({"instructions": [str(config / "AGENTS.md")]}))
    for other in (home / ".claude" / "skills", home / ".agents" / "skills"):
        (other / f"other-{marker}").mkdir(parents=True)
        (other / f"other-{marker}" / "SKILL.md").write_text(skill.replace("user-", "other-"))
    (home / ".claude" / "CLAUDE.md").write_text(f"Claude rules {marker}\n")
    return {"home": home, "xdg_config": xdg_config, "xdg_data": xdg_data}


# --- a real rollout ---------------------------------------------------------------------------
def test_rollout_writes_file_with_native_skill_and_private_home(
    tmp_path: Path, endpoint: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_opencode()
    marker = f"USERCFG{uuid.uuid4().hex[:8]}"
    key = f"sk-linked-{uuid.uuid4().hex[:8]}"
    dirs = polluted_home(tmp_path / "user", marker)
    auth = dirs["xdg_data"] / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True)
    auth.write_text(json.dumps({"skilltune": {"type": "api", "key": key}}))
    monkeypatch.setenv("HOME", str(dirs["home"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(dirs["xdg_config"]))
    monkeypatch.setenv("XDG_DATA_HOME", str(dirs["xdg_data"]))
    monkeypatch.setenv("OPENCODE_CONFIG", str(dirs["xdg_config"] / "opencode" / "opencode.json"))

    record, folder = common.rollout(tmp_path, "opencode", {"model": MODEL, "wall_limit_s": 120})

    common.check_success(record, folder, endpoint, cost_reported=False)
    diff = (folder / "diff.patch").read_text()
    assert diff.count("+++ b/") == 1, diff  # opencode's own files (.opencode/.gitignore) stay out
    assert record.model == MODEL and record.turns == 3, (record.model, record.turns)
    # native placement: listed in the system prompt (opencode's own built-in skill hidden) and
    # loaded by opencode's skill tool, whose output reaches the next request
    main = [b for b in bodies(endpoint) if b.get("tools")]
    listed = system_prompt(main[0])
    assert "<name>greeter</name>" in listed and "customize-opencode" not in listed
    assert SKILL_BODY in json.dumps(main[-1]["messages"])
    conversation = json.loads((folder / "conversation.json").read_text())
    assert any(m["role"] == "tool" and SKILL_BODY in m["content"] for m in conversation)
    assert any(m["role"] == "assistant" and "[tool call] write" in m["content"] for m in conversation)
    # the title side call is spared (--title), and the user's config, rules and skills never arrive
    assert len(bodies(endpoint)) == len(main) == 3
    assert marker not in json.dumps(bodies(endpoint))
    # the login is linked: with no key variable the endpoint's key comes from the user's auth.json
    assert {r["headers"].get("Authorization") for r in endpoint.raw} == {f"Bearer {key}"}
    assert not (folder / "agent-stderr.log").read_text().strip()


@pytest.mark.parametrize("placement", ["system", "prepend"])
def test_skill_placement_system_and_prepend(
    tmp_path: Path, endpoint: FakeModelServer, placement: str
) -> None:
    require_opencode()
    record, _ = common.rollout(
        tmp_path, "opencode", {"model": MODEL, "placement": placement, "wall_limit_s": 120}
    )
    assert record.status == "ok" and record.score is not None and record.score.hard == 1, record
    main = [b for b in bodies(endpoint) if b.get("tools")]
    assert main and "<name>greeter</name>" not in system_prompt(main[0])  # not installed natively
    users = [m for m in main[0]["messages"] if m.get("role") == "user"]
    if placement == "system":
        assert SKILL_BODY in system_prompt(main[0])
        assert all(SKILL_BODY not in json.dumps(m) for m in users)
    else:  # the prompt starts with the front matter (---): it must arrive whole, after `--`
        text = json.dumps(users)
        assert "name: greeter" in text and SKILL_BODY in text and common.TOKEN in text
        assert SKILL_BODY not in system_prompt(main[0])


def test_max_turns_is_a_task_failure(tmp_path: Path, endpoint: FakeModelServer) -> None:
    """max_turns=1: opencode forces a text-only answer on turn 2; the rollout is task_failed, scored."""
    require_opencode()
    record, _ = common.rollout(
        tmp_path, "opencode", {"model": MODEL, "max_turns": 1, "wall_limit_s": 120}, candidate=None
    )
    assert record.status == "task_failed" and "max turns" in (record.reason or ""), record
    assert record.score is not None and record.turns == 2
    assert STEP_LIMIT in json.dumps(bodies(endpoint)[-1]["messages"])


def test_plain_model_for_the_proposer(endpoint: FakeModelServer) -> None:
    require_opencode()
    agent = get_backend("opencode")
    assert isinstance(agent, OpencodeAgent)
    result = agent.complete("Say something.", MODEL, wall_limit_s=120)
    assert result.status == "ok" and result.final_text == "skilltune test", result
    assert bodies(endpoint) and all(not b.get("tools") for b in bodies(endpoint))  # no tools at all


# --- infra errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "count"),
    [(429, 6), (503, 6), (400, 1)],  # opencode retries 429/5xx 5 times itself; a 400 not at all
)
def test_http_errors_before_the_first_turn_are_infra_errors(
    tmp_path: Path, endpoint: FakeModelServer, status: int, count: int
) -> None:
    require_opencode()
    endpoint.failures.extend(
        Failure(status=status, message=f"scripted {status}", headers=FAST_RETRY) for _ in range(count)
    )
    record, folder = common.rollout(tmp_path, "opencode", {"model": MODEL, "wall_limit_s": 120})
    assert record.status == "infra_error", (record.status, record.reason)
    assert record.score is None and not (folder / "score.json").exists()
    assert f"scripted {status}" in (record.reason or "")
    assert not endpoint.failures, "opencode gave up before using every scripted failure"
    assert len([r for r in endpoint.requests if r.tools]) == count


def test_hanging_server_hits_the_wall_limit_and_leaves_no_process(
    tmp_path: Path, endpoint: FakeModelServer
) -> None:
    require_opencode()
    marker = f"{MODEL}-hang{uuid.uuid4().hex[:8]}"  # in opencode's argv (--model), priced as gpt-4.1

    def attempt(limit: float) -> common.Rollout:
        endpoint.requests.clear()
        endpoint.failures[:] = [Failure(hang_s=120)]
        return common.rollout(
            tmp_path / f"limit-{limit:g}", "opencode", {"model": marker, "wall_limit_s": limit}
        )

    def hung(_: common.Rollout) -> bool:  # its model request reached the server, which hung
        return any(r.tools for r in endpoint.requests)

    record, folder = common.growing_wall_limit(attempt, hung, (10, 30, 90), "opencode's model request")
    assert record.status == "infra_error" and "wall limit" in (record.reason or ""), record
    assert record.score is None and not (folder / "score.json").exists()
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"processes left behind: {left.stdout}"


def test_tool_outliving_the_wall_limit_is_a_timeout_and_is_killed(
    tmp_path: Path, endpoint: FakeModelServer
) -> None:
    """opencode starts its tools detached (a session of their own): the group kill alone misses them."""
    require_opencode()
    marker = f"{MODEL}{SLEEPER}{uuid.uuid4().hex[:8]}"  # in opencode's argv and in the bash command

    def attempt(limit: float) -> common.Rollout:
        return common.rollout(
            tmp_path / f"limit-{limit:g}", "opencode", {"model": marker, "wall_limit_s": limit}
        )

    def tool_ran(result: common.Rollout) -> bool:  # the limit struck while the sleeper tool ran
        diff = result[1] / "diff.patch"
        return diff.is_file() and SLEEPER_STARTED in diff.read_text()

    record, folder = common.growing_wall_limit(attempt, tool_ran, (10, 30, 90), "opencode's sleeper tool")
    assert record.status == "timeout", (record.status, record.reason)
    assert record.score is not None and (folder / "score.json").exists()  # a timeout is scored as it stands
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"processes left behind: {left.stdout}"


# --- options and the event stream (no model turn needed) --------------------------------------
def test_options_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_opencode()
    agent = OpencodeAgent()
    with pytest.raises(UsageError, match="unknown agent option"):
        parse_agent_options(agent, {"bogus": 1})
    with pytest.raises(UsageError, match="unknown opencode tool"):
        parse_agent_options(agent, {"tools": ["Read", "Frobnicate"]})
    options = parse_agent_options(
        agent,
        {"model": "Qwen/Qwen3-Coder", "tools": ["Read", "write"], "max_turns": 4, "effort": "high",
         "base_url": "http://127.0.0.1:9/v1", "config": {"permission": {"webfetch": "allow"}}},
    )  # fmt: skip
    assert isinstance(options, OpencodeOptions)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    request = common_request(tmp_path, options, skill_name="greeter")
    config = agent.settings(tmp_path, request)
    assert config["model"] == "skilltune/Qwen/Qwen3-Coder"
    assert config["permission"] == {
        "*": "deny", "edit": "allow", "read": "allow", "webfetch": "allow",
        "skill": {"*": "allow", "customize-opencode": "deny"},
    }  # fmt: skip
    assert config["agent"] == {"build": {"steps": 5}}
    provider = config["provider"]["skilltune"]
    assert provider["options"] == {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "{env:OPENAI_API_KEY}"}
    assert provider["models"]["Qwen/Qwen3-Coder"]["variants"] == {"high": {"reasoningEffort": "high"}}
    argv = agent.command(request, tmp_path)
    assert argv[-2:] == ["--", request.prompt] and argv[-4:-2] == ["--variant", "high"]
    long = request.model_copy(update={"prompt": "x" * 200_000})  # over argv's 128 KiB per string
    assert agent.command(long, tmp_path)[-1] != long.prompt and agent.stdin_text(long) == long.prompt
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    bare = parse_agent_options(agent, {"model": "gpt-4.1"})
    with pytest.raises(UsageError, match="names no provider"):
        agent.command(common_request(tmp_path, bare), tmp_path)
    own = parse_agent_options(agent, {"model": "anthropic/claude-sonnet-4-5"})
    assert "provider" not in agent.settings(tmp_path, common_request(tmp_path, own))


def test_interpret_errors_and_usage() -> None:
    require_opencode()

    def outcome(rc: int = 0) -> ProcessOutcome:
        return ProcessOutcome(returncode=rc, stdout_lines=[], stderr_tail="")

    step = {"type": "step_finish", "part": {"tokens": {"input": 90, "output": 20, "reasoning": 5,
            "cache": {"read": 10, "write": 0}}, "cost": 0.002}}  # fmt: skip
    text = {"type": "text", "part": {"text": "all done"}}
    found = interpret_stream([text, step], outcome())
    assert (found.status, found.final_text, found.turns) == ("ok", "all done", 1)
    assert (found.tokens_in, found.tokens_out, found.cost_usd) == (100, 25, 0.002)

    def error(code: int | None, retryable: bool, message: str = "boom") -> dict[str, Any]:
        data: dict[str, Any] = {"message": message, "isRetryable": retryable}
        if code is not None:
            data["statusCode"] = code
        return {"type": "error", "error": {"name": "APIError", "data": data}}

    # after a model turn: a 400 is the task's failure, a 503 / network failure is not
    assert interpret_stream([text, step, error(400, False)], outcome(1)).status == "task_failed"
    assert interpret_stream([text, step, error(503, True)], outcome(1)).status == "infra_error"
    unreachable = error(None, True, "Cannot connect to API: Unable to connect.")
    assert interpret_stream([text, step, unreachable], outcome(1)).status == "infra_error"
    assert interpret_stream([error(400, False)], outcome(1)).status == "infra_error"
    assert interpret_stream([], outcome(0)).status == "infra_error"


def common_request(tmp_path: Path, options: Any, skill_name: str | None = None) -> Any:
    from skilltune.agents.base import AgentRequest
    from skilltune.suite import Task

    return AgentRequest(
        task=Task(id="t", prompt="---\nfront: matter\n---\ndo it"),
        prompt="---\nfront: matter\n---\ndo it",
        workspace=tmp_path,
        log_dir=tmp_path,
        candidate_hash="x",
        skill_name=skill_name,
        options=options,
    )
