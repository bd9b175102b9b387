"""examples/stub-and-restore with a real agent CLI: claude, driven by the scripted Anthropic server.

The script plays an agent that does the job: it reads the stubbed module, writes the original
body over the stub with claude's own Edit tool, runs the project's tests with Bash, and finishes.
The rollout must then score as restored (hard 1), and its diff must hold only that body.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from skilltune.agents import get_backend
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, rollout_dir
from skilltune.skill import load_skill
from skilltune.suite import load_suite
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer, ModelRequest, Reply, ToolCall
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "stub-and-restore"
TASK = "restore-settle"
MODULE = "kitty/ledger.py"
FUNCTION = "settle"
FINAL = "Restored settle(); the project's tests pass."


def original_body(source: str, function: str) -> str:
    """The lines of ``function``'s body after its docstring, as they stand in the original module."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = source.splitlines()
    return "\n".join(lines[node.body[1].lineno - 1 : node.end_lineno])


def workdir(request: ModelRequest) -> str:
    found = re.search(r"Primary working directory: (\S+)", request.text)
    assert found, "no working directory in claude's system prompt"
    return found.group(1)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    stub_line = load_suite(EXAMPLE).module.STUB_LINE  # type: ignore[attr-defined]
    body = original_body((EXAMPLE / "project" / MODULE).read_text(), FUNCTION)

    def scenario(request: ModelRequest) -> Reply:
        path = f"{workdir(request)}/{MODULE}"
        turn = request.tool_results
        if turn == 0:
            return Reply(text="Reading the module.", tool_calls=[ToolCall("Read", {"file_path": path})])
        if turn == 1:
            assert stub_line in request.text, "claude did not return the stubbed module"
            edit = {"file_path": path, "old_string": f"    {stub_line}", "new_string": body}
            return Reply(text="Restoring the body.", tool_calls=[ToolCall("Edit", edit)])
        if turn == 2:
            command = {
                "command": "python3 -B -m unittest discover -s tests -t .",
                "description": "run the tests",
            }
            return Reply(tool_calls=[ToolCall("Bash", command)])
        return Reply(text=FINAL)

    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("CLAUDE_CONFIG_DIR", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    with FakeModelServer(scenario) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        yield fake


def test_claude_restoring_the_body_scores_as_restored(tmp_path: Path, server: FakeModelServer) -> None:
    require_cli("claude")
    suite = load_suite(EXAMPLE)
    backend = get_backend("claude")
    options = backend.parse_options(
        {"api_retries": 0, "wall_limit_s": 120, "tools": ["Read", "Edit", "Bash"]}
    )
    runner = RolloutRunner(
        suite=suite,
        backend=backend,
        options=options,
        out=tmp_path / "out",
        retry=RetryPolicy(max_attempts=1, base_s=0.0, cap_s=0.0),
    )
    job = RolloutJob(
        task=suite.task(TASK), phase="eval", candidate=load_skill(EXAMPLE / "skill"), replicate=0, seed=0
    )
    record = runner.run(job)
    folder = rollout_dir(tmp_path / "out", job)
    assert record.status == "ok", (record.status, record.reason)
    calls = [r for r in server.requests if r.tools]
    assert len(calls) == 4, [r.tool_results for r in calls]
    # claude ran the tests in the workspace and saw them pass
    assert re.search(r"Ran \d+ tests", calls[3].text) and "OK" in calls[3].text, calls[3].text[-1500:]
    assert record.score is not None and (record.score.hard, record.score.soft) == (1, 1.0), record.score
    diff = (folder / "diff.patch").read_text()
    assert diff.count("diff --git ") == 1 and f"+++ b/{MODULE}" in diff, diff
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    body = original_body((EXAMPLE / "project" / MODULE).read_text(), FUNCTION)
    assert "\n".join(added) == body
    assert FINAL in (folder / "output.txt").read_text()
