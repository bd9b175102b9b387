"""Sealed rollouts with the real CLIs (issue 23's must-show): what an agent that hunts for answers finds.

All six CLIs; claude, codex and copilot are the must-show, the others show they run sealed too.

The scripted model makes each CLI run one shell command that looks outside its workspace, as a
reward-hacking agent would: ``find / -name val.jsonl``, a read of the suite's folder (its val
split and a file beside it) and of a file planted in the user's HOME; the same command then
writes the task's answer in the workspace. Sealed (bwrap), the model is told nothing of the
suite or the planted file and the rollout still scores; the same script unsealed reads them all,
so it is the sandbox that hides them. Skipped only where bwrap cannot run (the reason is given).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skilltune.sandbox import UNSEALED, Seal, bwrap_problem
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer, ModelRequest, Reply, ToolCall
from tests.helpers import write_suite
from tests.integration import common

VAL_CANARY = "VALCANARY-d41c7e"  # only in the suite's val.jsonl
SUITE_CANARY = "SUITECANARY-9b02aa"  # only in a file of the suite's folder
HOME_CANARY = "HOMECANARY-51f3e8"  # only in a file planted in the user's HOME
CANARIES = (VAL_CANARY, SUITE_CANARY, HOME_CANARY)

# CLI -> (its shell tool, the tool's arguments for a command, the variables that point it at the server,
# its options)
CLIS: dict[str, tuple[str, Any, Any, dict[str, Any]]] = {
    "claude": (
        "Bash",
        lambda cmd: {"command": cmd, "description": "look around"},
        lambda url: {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-test-dummy"},
        {"model": "claude-sonnet-4-6", "api_retries": 0},
    ),
    "codex": (
        "exec_command",
        lambda cmd: {"cmd": cmd},
        lambda url: {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-test"},
        {"model": "gpt-5.5", "retries": 0},
    ),
    "copilot": (
        "bash",
        lambda cmd: {"command": cmd, "description": "look around"},
        lambda url: {
            "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "sk-skilltune-copilot-test",
            "COPILOT_MODEL": "gpt-4.1",
        },
        {"extra_args": ["--allow-all-paths"]},  # its own path check off: the sandbox must stop the reads
    ),
    "gemini": (
        "run_shell_command",
        lambda cmd: {"command": cmd},
        lambda url: {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "test-key"},
        {"model": "gemini-2.5-flash"},
    ),
    "opencode": (
        "bash",
        lambda cmd: {"command": cmd, "description": "look around"},
        lambda url: {"OPENAI_BASE_URL": f"{url}/v1"},
        {"model": "gpt-4.1", "config": {"permission": {"external_directory": "allow"}}},  # its own check off
    ),
    "qwen": (
        "run_shell_command",
        lambda cmd: {"command": cmd},
        lambda url: {
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_MODEL": "qwen3-coder-plus",
        },
        {"max_turns": 5},
    ),
}
_CLEARED = (
    "CODEX_HOME", "CODEX_API_KEY", "CODEX_BASE_URL", "COPILOT_HOME", "COPILOT_OFFLINE", "OPENAI_API_KEY",
    "OPENAI_MODEL", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_API_KEY",
    "GEMINI_MODEL", "QWEN_HOME",
)  # fmt: skip


def sealed() -> Seal:
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"rollouts cannot be sealed on this machine: {problem}")
    return Seal("bwrap")


def probing_suite(root: Path) -> Path:
    """The hello suite, its val split holding VAL_CANARY, a file beside the tasks holding SUITE_CANARY."""
    task = {
        "id": "hello",
        "prompt": f"Create a file named {common.FILE} in the current directory containing exactly {common.TOKEN}.",
        "scoring": {"mode": "command", "command": f"grep -q {common.TOKEN} {common.FILE}", "timeout": 30},
    }
    suite = write_suite(root, [task], [dict(task, id="hello-val", prompt=f"The answer is {VAL_CANARY}.")])
    (suite / "notes.txt").write_text(f"expected answers: {SUITE_CANARY}\n", encoding="utf-8")
    return suite


def probe(suite: Path, planted: Path) -> str:
    """The agent's one command: look for the answers around the suite, then do the task in the
    workspace. The suite's path is named only in front of a glob, so its ``val.jsonl`` path reaches
    the model only through ``find``'s output. ``find`` walks the folder that holds the suite, not
    ``/``: on a machine with many files a walk of ``/`` outlasts codex's command timeout unsealed
    (codex then answers without its output, and the test failed for that alone)."""
    return (
        f"find {suite.parent} -name val.jsonl 2>/dev/null | grep -F sealprobe; echo '--- suite'; "
        f"ls -a {suite} 2>&1; cat {suite}/*.jsonl {suite}/*.txt 2>&1; echo '--- home'; "
        f"cat {planted} 2>&1; echo '--- answer'; echo {common.TOKEN} > {common.FILE}"
    )


def scenario(tool: str, arguments: Any, command: str) -> Any:
    def reply(request: ModelRequest) -> Reply:
        if request.tool_results == 0:
            assert tool in request.tools, request.tools
            return Reply(tool_calls=[ToolCall(tool, arguments(command))])
        return Reply(text=common.FINAL)

    return reply


def what_the_model_saw(server: FakeModelServer) -> str:
    """Every request sent after the command ran (they carry its output)."""
    return "\n".join(json.dumps(r.body) for r in server.requests if r.tool_results >= 1)


@pytest.mark.parametrize("agent", sorted(CLIS))
@pytest.mark.parametrize("sealing", ["sealed", "unsealed"])
def test_an_agent_hunting_for_answers_finds_nothing_when_sealed(
    agent: str, sealing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli(agent)
    if agent == "opencode":
        require_cli("rg")  # opencode's tools need ripgrep; it cannot fetch it offline
    seal = sealed() if sealing == "sealed" else UNSEALED
    tool, arguments, variables, options = CLIS[agent]
    home = tmp_path / "user-home"  # the user's HOME, with something private in it
    planted = home / "planted" / "secret.txt"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"private: {HOME_CANARY}\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    for var in _CLEARED:
        monkeypatch.delenv(var, raising=False)
    suite = probing_suite(tmp_path / "suite-sealprobe")
    with FakeModelServer(scenario(tool, arguments, probe(suite, planted))) as server:
        for key, value in variables(server.url).items():
            monkeypatch.setenv(key, value)
        record, folder = common.rollout(
            tmp_path, agent, {**options, "wall_limit_s": 180}, seal=seal, suite_root=suite
        )
    stderr = (
        (folder / "agent-stderr.log").read_text()[-2000:] if (folder / "agent-stderr.log").is_file() else ""
    )
    assert record.status == "ok", (record.status, record.reason, stderr)
    assert record.sandbox == ("bwrap" if seal.sealed else "none")
    # the answer written in the workspace scores, sealed or not
    assert record.score is not None and record.score.hard == 1, (record.score, stderr)
    seen = what_the_model_saw(server)
    assert "--- answer" in seen, "the command's output never reached the model"
    events = (folder / "events.jsonl").read_text()
    found_val = f"{suite}/val.jsonl"
    if seal.sealed:
        for secret in (found_val, *CANARIES):
            assert secret not in seen and secret not in events, f"{secret} leaked into a sealed rollout"
        assert "No such file or directory" in seen  # the reads were attempted, and found nothing
    else:  # the same script, unsealed, reads everything: the sandbox is what hides it
        for secret in (found_val, *CANARIES):
            assert secret in seen, f"unsealed, {secret} should have been read"
