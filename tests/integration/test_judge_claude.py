"""The judge as an agent CLI used as a plain model (``provider=claude``): a Claude Code subscription is
enough to judge. The real claude CLI answers through the fake model server; the target is the mock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skilltune.measure.evaluate import evaluate
from skilltune.runfiles import JudgeFile, JudgeInputsFile, RolloutRecord
from skilltune.suite import load_suite
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer, ModelRequest, Reply
from tests.helpers import rule_task, write_skill, write_suite

MODEL = "claude-sonnet-4-6"


def judged_suite(root: Path) -> Path:
    """Two val tasks, each with a fixture under refs/ the judge reads, and a reference."""
    tasks = []
    for i in range(2):
        (root / "refs" / f"v{i}").mkdir(parents=True)
        (root / "refs" / f"v{i}" / "notes.txt").write_text(f"fixture {i}\n")
        (root / "refs" / f"v{i}" / "gold.md").write_text(f"GOLD-{i}: state the rule.\n")
        tasks.append(
            {
                **rule_task(f"v{i}", ["state-the-rule"]),
                "scoring": {},
                "files": [f"refs/v{i}/notes.txt"],
                "reference": f"refs/v{i}/gold.md",
                "judge_inputs": ["notes.txt"],
            }
        )
    config = {
        "default_mode": "judge",
        "judge": {"provider": "claude", "model": MODEL, "samples": 2, "criteria_weights": {"rule": 1.0}},
    }
    write_suite(root, [dict(tasks[0], id="t0")], tasks, config=config)
    (root / "judge.md").write_text("# Judge\n\nCriterion `rule`: did the output state the rule?\n")
    return root


def judge_reply(request: ModelRequest) -> Reply:
    """The judge's answer, in text (a CLI offers no tool): it passes outputs that state the rule."""
    stated = "PASS:state-the-rule" in request.text
    verdict = {
        "criteria": [{"name": "rule", "score": 1.0 if stated else 0.2, "evidence": "the PASS line"}],
        "overall": 1.0 if stated else 0.2,
        "passed": stated,
        "reasoning": "Stated the rule." if stated else "The rule is never stated.",
    }
    return Reply(text=f"Here is my verdict.\n```json\n{json.dumps(verdict)}\n```")


def test_claude_cli_judges_the_rollouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli("claude")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("CLAUDE_CONFIG_DIR", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL"):
        monkeypatch.delenv(var, raising=False)
    suite = load_suite(judged_suite(tmp_path / "suite"))
    good = write_skill(tmp_path / "good", "- State the rule.")
    with FakeModelServer(lambda request: Reply(text="unexpected"), side=judge_reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        summary = evaluate(suite, good, split="val", out=tmp_path / "out", workers=2)
    assert (summary.hard_acc, summary.soft_acc) == (1.0, 1.0)
    assert summary.judge_tokens > 0
    # two verdicts per rollout, each a plain call with the reference and the input file in its prompt
    assert len(server.requests) == 4 and all(not r.tools and r.model == MODEL for r in server.requests)
    assert all("GOLD-" in r.text and "## Input file: notes.txt" in r.text for r in server.requests)
    for path in sorted((tmp_path / "out").rglob("record.json")):
        record = RolloutRecord.read(path)
        assert record.status == "ok" and record.judge is not None and record.judge.calls == 2
        assert record.judge.tokens_in > 0 and record.judge.model.startswith("claude")
        verdicts = JudgeFile.read(path.parent / "judge.json")
        assert verdicts.provider == "claude" and [s.passed for s in verdicts.samples] == [True, True]
        inputs = JudgeInputsFile.read(path.parent / "judge_inputs.json")
        assert list(inputs.files) == ["notes.txt"] and inputs.files["notes.txt"].startswith("fixture")
        assert record.score is not None and "ref:dataset" in record.score.checks
