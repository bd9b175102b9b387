"""``skilltune.train(..., proposer="claude")``: the real claude CLI as the analyst, against the fake server.

The target agent is the mock (fast, deterministic; ``crn`` so a useless edit scores exactly
like its parent). The scripted analyst answers step 1 with a distractor line of the suite's
proposer pool (the strict gate rejects it: no gain) and step 2 with the pool lines that
the failed trajectories' SYMPTOM lines call for (kept). The proposer's prompts, as
reflections.json records them, are compared with golden files in tests/golden/ after the
run-specific parts (hashes, replicate numbers, tmp paths) are normalised.

Regenerate the golden files after an intended change of the prompts or of the demo suite:

    SKILLTUNE_REGENERATE_GOLDEN=1 .venv/bin/pytest tests/integration/test_claude_proposer.py

and review the diff of tests/golden/ before committing it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from skilltune.progress import PlainReporter
from skilltune.suite import load_suite
from skilltune.training import train
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer, ModelRequest, Reply
from tests.helpers import MOCK_SKILL, MOCK_SUITE, prompt_section, trajectory_blocks

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REGENERATE = bool(os.environ.get("SKILLTUNE_REGENERATE_GOLDEN"))
POOL: list[dict[str, Any]] = load_suite(MOCK_SUITE).config.model_extra["proposer_pool"]  # type: ignore[index]
DISTRACTOR = next(e for e in POOL if e["id"] == "p-distract-length")
MODEL = "claude-sonnet-4-6"


def analyst(request: ModelRequest) -> Reply:
    """The scripted analyst: a distractor while nothing was rejected yet, then the symptoms' fixes."""
    if "<failed_trajectories>" not in request.text:
        return Reply(text="skilltune test")  # not the analyst's prompt (a side call)
    blocks = trajectory_blocks(request.text)
    if prompt_section(request.text, "rejected_edits") == "(none)":
        first = next(iter(blocks))
        edits = [{"op": "append", "text": DISTRACTOR["text"], "rationale": "shorter is better", "support": [first], "kind": "failure"}]  # fmt: skip
    else:
        edits = []
        for trajectory, block in blocks.items():
            for line in block.splitlines():
                if not line.startswith("SYMPTOM:"):
                    continue
                for entry in POOL:
                    if any(a and a.lower() in line.lower() for a in entry["answers"]):
                        edits.append({"op": "append", "text": entry["text"], "rationale": "symptom", "support": [trajectory], "kind": "failure"})  # fmt: skip
    return Reply(text="My analysis of the trajectories.\n```json\n" + json.dumps({"edits": edits}) + "\n```")


def normalise(prompt: str, tmp_path: Path) -> str:
    text = prompt.replace(str(tmp_path), "<tmp>").replace(tempfile.gettempdir(), "<tmp>")
    text = re.sub(r"\b[0-9a-f]{12,64}\b", "<hash>", text)
    text = re.sub(r"#r\d+", "#r<k>", text)
    return re.sub(r"replicate=\d+", "replicate=<k>", text)


def test_train_with_the_claude_proposer_prompts_match_the_golden_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cli("claude")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("CLAUDE_CONFIG_DIR", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL"):
        monkeypatch.delenv(var, raising=False)
    # the scenario answers requests with tools (none come: the proposer runs claude without tools)
    # one whole-batch ask a step, each step gated: the golden prompts' shape
    with FakeModelServer(lambda request: Reply(text="unexpected"), side=analyst) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        result = train(
            MOCK_SUITE, MOCK_SKILL, tag="cp", runs_dir=str(tmp_path / "runs"), proposer="claude",
            proposer_options={"model": MODEL}, agent_options={"crn": True}, max_steps=2, gate="strict",
            proposals=1, carry="off", reporter=PlainReporter(quiet=True),
        )  # fmt: skip
    run = tmp_path / "runs" / "cp"
    assert result.state == "success", result.reason
    rows = [line.split("\t") for line in (run / "results.tsv").read_text().splitlines()[1:]]
    assert [r[5] for r in rows] == ["discard", "keep"], rows
    assert DISTRACTOR["text"] in rows[0][-1]
    # claude ran as a plain model: no tools offered, the prompt passed verbatim as the user's text
    assert len(server.requests) == 2 and all(not r.tools and r.model == MODEL for r in server.requests)
    prompts = []
    for folder, request in zip(("step_0001", "step_0002"), server.requests, strict=True):
        calls = json.loads((run / "steps" / folder / "reflections.json").read_text())["calls"]
        assert [c["role"] for c in calls] == ["analyst"]
        assert calls[0]["model"] == MODEL and calls[0]["tokens_in"] and calls[0]["tokens_out"]
        blocks = request.body["messages"][0]["content"]
        assert blocks[-1]["text"] == calls[0]["prompt"]
        prompts.append(calls[0]["prompt"])
    # train evidence only: no val or test task id or prompt anywhere
    held_out = [
        json.loads(line)
        for split in ("val", "test")
        for line in (MOCK_SUITE / f"{split}.jsonl").read_text().splitlines()
        if line.strip()
    ]
    for prompt in prompts:
        for task in held_out:
            assert task["id"] not in prompt and task["prompt"] not in prompt, task["id"]
        assert re.search(r'<trajectory id="train-[a-z-]+#r\d+"', prompt)
    # the rejected-edit buffer: empty at step 1, holds step 1's distractor at step 2
    rejected = [prompt_section(p, "rejected_edits") for p in prompts]
    assert rejected[0] == "(none)"
    assert rejected[1].startswith("- step 1: append: ") and DISTRACTOR["text"] in rejected[1]
    for number, prompt in enumerate(prompts, start=1):
        golden = GOLDEN / f"claude_proposer_step_{number}.txt"
        text = normalise(prompt, tmp_path)
        if REGENERATE:
            GOLDEN.mkdir(exist_ok=True)
            golden.write_text(text, encoding="utf-8")
        assert golden.is_file(), f"{golden} is missing: run with SKILLTUNE_REGENERATE_GOLDEN=1"
        assert text == golden.read_text(encoding="utf-8"), (
            f"the proposer prompt of step {number} differs from {golden.name}; if intended, regenerate "
            "with SKILLTUNE_REGENERATE_GOLDEN=1 and review the diff"
        )
