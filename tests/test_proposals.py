"""Several proposals a step (issue 31): focused asks, each proposal screened alone, the candidate built
from what works, leave-one-out, spent edits re-asked, resume, records and report; against a scripted
OpenAI-compatible analyst (tests/fake_openai.py) and the mock agent."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skilltune.review.audit import audit
from skilltune.rundir import RunDir
from skilltune.runfiles import ReflectionsFile, UnitRecord
from skilltune.training import resume, train
from tests.fake_openai import FakeOpenAI, prompt_of
from tests.helpers import REPO, quiet, rule_task, write_skill, write_suite

CITE = "- Cite sources for every claim."
TIMELINE = "- Add timeline details for each event."
RIDER = "- Be polite to the reader."
SHOUT = "- Shout the key point."
CONCISE = "- Keep it concise."


def _suite(root: Path) -> Path:
    """Train: four tasks need the cite rule, four the timeline rule, two pass as they are (and fail when
    the skill tells the agent to shout). Val and test: the same kinds."""

    def tasks(prefix: str, n: int) -> list[dict[str, Any]]:
        out = [rule_task(f"{prefix}-cite-{i}", ["cite-sources"]) for i in range(n)]
        out += [rule_task(f"{prefix}-time-{i}", ["add-timeline"]) for i in range(n)]
        out += [rule_task(f"{prefix}-easy-{i}", [], forbids=["shout"]) for i in range(2)]
        return out

    return write_suite(root, tasks("train", 4), tasks("val", 5), tasks("test", 3))


def _edit(text: str, support: list[str]) -> dict[str, Any]:
    return {"op": "append", "text": text, "rationale": "r", "support": support, "kind": "failure"}


def _ids(prompt: str) -> list[str]:
    return re.findall(r'<trajectory id="([^"]+)"', prompt)


def analyst(body: dict[str, Any]) -> str:
    """Focused on the cite group: the rule and a rider; on the timeline group: the rule; a sample: a
    rule that breaks the easy tasks; asked again about spent edits: a useless rule."""
    prompt = prompt_of(body)
    ids = _ids(prompt)
    focus = re.search(r"<focus>\n(.*?)\n", prompt)
    if "<spent_edits>" in prompt:
        edits = [_edit(CONCISE, ids[:1])]
    elif focus and "cite-sources" in focus.group(1):
        edits = [_edit(CITE, ids[:2]), _edit(RIDER, ids[:1])]
    elif focus and "add-timeline" in focus.group(1):
        edits = [_edit(TIMELINE, ids[:2])]
    else:
        edits = [_edit(SHOUT, ids[:1])]
    return json.dumps({"edits": edits})


def _options(server: FakeOpenAI) -> dict[str, Any]:
    return {"model": "m", "base_url": server.base_url, "api_key_env": "FAKE_API_KEY", "stream": False}


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "k")


def _train(tmp_path: Path, server: FakeOpenAI, tag: str, **settings: Any) -> RunDir:
    suite = _suite(tmp_path / "suite")
    skill = write_skill(tmp_path / "skill", "Write the report.")
    settings = {"max_steps": 1, "batch": 10, "carry": "off", **settings}
    train(
        suite, skill, tag=tag, runs_dir=str(tmp_path / "runs"), proposer="api", proposer_options=_options(server),
        proposals=4, reporter=quiet(), **settings,
    )  # fmt: skip
    return RunDir(tmp_path / "runs" / tag)


def test_one_focused_ask_per_failure_group_and_the_candidate_is_what_the_screen_shows_works(
    tmp_path: Path, keyed: None
) -> None:
    with FakeOpenAI(analyst) as server:
        run = _train(tmp_path, server, "p")
    prompts = [prompt_of(r["body"]) for r in server.requests]
    # two focused asks (the group every failure shares, RESULT: solved, singles nothing out), then two
    # samples; the second sample repeats the first's edit and is asked again, told it is spent
    assert len(prompts) == 5
    focus = [re.search(r"<focus>\n(.*?)\n", p) for p in prompts]
    assert [m.group(1) if m else None for m in focus[:2]] == [
        "missing required item: PASS:cite-sources (4 failed tasks)",
        "missing required item: PASS:add-timeline (4 failed tasks)",
    ]
    assert focus[2] is None and focus[3] is None and "<spent_edits>" in prompts[4]
    assert "Shout the key point" in prompts[4].split("<spent_edits>")[1]
    # a focused prompt holds its group's failed trajectories only; every prompt opens with the summary
    assert all("-cite-" in i for i in _ids(prompts[0].split("<successful_trajectories>")[0]))
    for p in prompts:
        found = re.search(r"<failure_summary>\n(.*?)\n</failure_summary>", p, re.S)
        summary = found.group(1) if found else ""
        assert "8 of 10 rollouts failed" in summary and "PASS:cite-sources (4 rollouts)" in summary
    # samples run hotter than focused asks (the proposer's own temperature is 0)
    temps = [r["body"].get("temperature") for r in server.requests]
    assert temps[0] == 0.0 and temps[2] == 0.8 and temps[4] == 0.8

    reflections = ReflectionsFile.read(run.unit_dir("step", 1) / "reflections.json")
    by = {p.index: p for p in reflections.proposals}
    assert [p.status for p in reflections.proposals] == ["kept", "kept", "screened out", "screened out"]
    assert by[1].screen is not None and sorted(by[1].screen.fixed) == [f"train-cite-{i}" for i in range(4)]
    assert by[1].screen.broke == [] and by[1].screen.rollouts == 6  # its four tasks and two passing ones
    assert by[3].screen is not None and sorted(by[3].screen.broke) == ["train-easy-0", "train-easy-1"]
    assert by[4].attempts == 2 and [e.text for e in by[4].edits] == [CONCISE]
    assert by[4].screen is not None and by[4].reason == "fixed 0, broke 0"
    # leave-one-out: the rider goes, both rules stay
    selection = reflections.selection
    assert selection is not None and selection.kept == [1, 2]
    loo = {step.edit.split(": ", 1)[1]: step.dropped for step in selection.leave_one_out}
    assert loo == {TIMELINE: False, RIDER: True, CITE: False}
    assert [e.text for e in reflections.edits] == [CITE, TIMELINE]
    assert any(d.reason.startswith("spent: the same edit as ask 3") for d in reflections.dropped)
    assert len(reflections.calls) == 5
    record = UnitRecord.read(run.unit_dir("step", 1) / "step.json")
    assert record.verdict == "keep" and record.edit_texts == [CITE, TIMELINE]
    text = (run.root / "best_skill" / "SKILL.md").read_text()
    assert CITE in text and TIMELINE in text and RIDER not in text and SHOUT not in text
    # the audit reads every ask's prompt and answer (reflections.json gathers them): a clean run
    assert audit(run.root).findings == []


def test_an_edit_screened_out_is_spent_for_the_rest_of_the_run(tmp_path: Path, keyed: None) -> None:
    """Step 2 (everything passes: samples only) proposes the edit step 1 screened out: it is not
    screened again, the ask is asked again, told it is spent; nothing passes, the step says why."""
    with FakeOpenAI(analyst) as server:
        run = _train(tmp_path, server, "s", max_steps=2)
    second = ReflectionsFile.read(run.unit_dir("step", 2) / "reflections.json")
    assert all(p.kind == "sample" and p.attempts == 2 for p in second.proposals)
    spent = [d.reason for d in second.dropped if d.reason.startswith("spent")]
    assert spent and all("step 1: screened out" in r or "ask " in r for r in spent)
    record = UnitRecord.read(run.unit_dir("step", 2) / "step.json")
    assert record.verdict == "discard" and record.decision in ("screen", "empty")


def test_a_resumed_step_asks_no_call_twice(tmp_path: Path, keyed: None) -> None:
    """SIGKILL the run while the proposals are screened (the mock agent sleeps so the screen lasts),
    resume: the analyst is asked five times in all, as an uninterrupted run asks it."""
    suite = _suite(tmp_path / "suite")
    skill = write_skill(tmp_path / "skill", "Write the report.")
    env = dict(os.environ, FAKE_API_KEY="k", SKILLTUNE_WORKSPACES=str(tmp_path / "ws"))
    with FakeOpenAI(analyst) as server:
        args = [
            sys.executable, "-m", "skilltune.cli", "train", str(suite), "--skill", str(skill), "--agent", "mock",
            "--agent-opt", "sleep_s=0.3", "--workers", "1", "--proposer", "api", "--proposer-opt", "model=m",
            "--proposer-opt", f"base_url={server.base_url}", "--proposer-opt", "api_key_env=FAKE_API_KEY",
            "--proposer-opt", "stream=false", "--proposals", "4", "--batch", "10", "--carry", "off",
            "--max-steps", "1", "--tag", "k", "--runs-dir", str(tmp_path / "runs"), "--quiet",
        ]  # fmt: skip
        proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        screen = tmp_path / "runs" / "k" / "steps" / "step_0001" / "rollouts" / "screen"
        deadline = time.monotonic() + 300
        while (
            not list(screen.glob("*/*/record.json")) and time.monotonic() < deadline and proc.poll() is None
        ):
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before its screen could be interrupted"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        run = RunDir(tmp_path / "runs" / "k")
        done = len(list(screen.glob("*/*/record.json")))
        assert not (run.unit_dir("step", 1) / "step.json").exists() and done < 26  # interrupted mid-screen
        assert len(server.requests) == 5
        resume(run.root, reporter=quiet(), proposer_options=_options(server))
        assert len(server.requests) == 5  # every answer was read back from asks/
    record = UnitRecord.read(run.unit_dir("step", 1) / "step.json")
    assert record.verdict == "keep" and record.edit_texts == [CITE, TIMELINE]
