"""`skilltune run ... --agent claude` writes the same kind of records as the mock agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.sandbox import bwrap_problem
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer
from tests.integration import common
from tests.integration.test_claude import MODEL, hello_scenario


def test_skilltune_run_with_claude_against_a_model_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("claude")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    suite = common.hello_suite(tmp_path / "suite")
    skill = tmp_path / "skill"
    common.SKILL.write(skill)
    out = tmp_path / "OUT"
    with FakeModelServer(hello_scenario) as server:
        # the CLI's own variables, as a user would set them
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        args = [
            "run", str(suite), "--skill", str(skill), "--agent", "claude", "--split", "val", "--reps", "1",
            "--out", str(out), "--agent-opt", f"model={MODEL}", "--agent-opt", "api_retries=0", "--quiet",
        ]  # fmt: skip
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (folder,) = [p.parent for p in out.glob("rollouts/eval/*/*/record.json")]
    for name in (
        "record.json",
        "conversation.json",
        "events.jsonl",
        "diff.patch",
        "output.txt",
        "score.json",
    ):
        assert (folder / name).is_file() and (folder / name).stat().st_size > 0, name
    record: dict[str, Any] = json.loads((folder / "record.json").read_text())
    assert record["agent"] == "claude" and record["status"] == "ok"
    assert record["score"]["hard"] == 1 and len(record["score"]["contract"]) == 64
    assert record["tokens_in"] > 0 and record["tokens_out"] > 0
    assert record["cost_usd"] is not None and record["cost_estimated"] is False
    assert common.TOKEN in (folder / "diff.patch").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hard_acc"] == 1.0 and summary["tokens_in"] == record["tokens_in"]
    # --sandbox auto: sealed wherever bwrap runs, and the run says how it ran
    sealed = "bwrap" if bwrap_problem() is None else "none"
    assert record["sandbox"] == summary["sandbox"] == sealed
