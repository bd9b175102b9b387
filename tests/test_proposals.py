"""Several proposals a step (issue 31): focused asks, each proposal screened alone, the candidate built
from what works, leave-one-out, spent edits re-asked, resume, records and report; against a scripted
OpenAI-compatible analyst (tests/fake_openai.py) and the mock agent."""

from __future__ import annotations

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
from skilltune.runfiles import AskFile, ReflectionsFile, UnitRecord
from skilltune.training import resume, train
from tests.fake_openai import FakeOpenAI, prompt_of
from tests.helpers import REPO, quiet, rule_task, write_skill, write_suite

CITE = "- Cite sources for every claim."
TIMELINE = "- Add timeline details for each event."
TIMELINE_AGAIN = "- Add timeline entries, one per event."  # the same fix in other words
RIDER = "- Be polite to the reader."
CONCISE = "- Keep it concise."


def _suite(root: Path, val_rules: tuple[str, str] = ("cite-sources", "add-timeline")) -> Path:
    """Train: four tasks need the cite rule, four the timeline rule, two pass as they are. Val and
    test: the same kinds (``val_rules``: what val's tasks need instead)."""

    def tasks(prefix: str, n: int, rules: tuple[str, str]) -> list[dict[str, Any]]:
        out = [rule_task(f"{prefix}-cite-{i}", [rules[0]]) for i in range(n)]
        out += [rule_task(f"{prefix}-time-{i}", [rules[1]]) for i in range(n)]
        out += [rule_task(f"{prefix}-easy-{i}", []) for i in range(2)]
        return out

    rules = ("cite-sources", "add-timeline")
    return write_suite(root, tasks("train", 4, rules), tasks("val", 5, val_rules), tasks("test", 3, rules))


def _edit(text: str, support: list[str]) -> dict[str, Any]:
    return {"op": "append", "text": text, "rationale": "r", "support": support, "kind": "failure"}


def _ids(prompt: str) -> list[str]:
    return re.findall(r'<trajectory id="([^"]+)"', prompt)


FOCUS = re.compile(r"(\d+) of them failed the same way: (.*?)\.\n")


def analyst(body: dict[str, Any]) -> str:
    """Focused asks are answered in plain words, a rule a line. On the cite group: the rule and a
    rider. On the timeline group: the cite rule again (spent: the first ask proposed it), then, told
    so, the timeline rule in two wordings. Told of spent rules in any other case: one that does nothing."""
    prompt = prompt_of(body)
    found = FOCUS.search(prompt)
    about = found.group(2) if found else ""
    spent = "already tried in this run" in prompt
    if "add-timeline" in about and spent:
        rules = [TIMELINE, TIMELINE_AGAIN]
    elif spent:
        rules = [CONCISE]
    elif "cite-sources" in about:
        rules = [CITE, RIDER]
    elif "add-timeline" in about:
        rules = [CITE]
    else:
        rules = [CONCISE]
    return "Here are the rules:\n" + "\n".join(rules)


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


def test_one_focused_ask_per_failure_group_each_rule_screened_and_leave_one_out_drops_a_rider(
    tmp_path: Path, keyed: None
) -> None:
    with FakeOpenAI(analyst) as server:
        run = _train(tmp_path, server, "p")
    prompts = [prompt_of(r["body"]) for r in server.requests]
    # four asks: one focused ask per failure group (RESULT: solved, which every failure shares, singles
    # nothing out), then the groups again; the timeline ask's first answer repeats the cite ask's rule:
    # asked again, told it is spent; the repeats' answers repeat the first ones: asked again too
    focus = [FOCUS.search(p) for p in prompts]
    assert [(m.group(1), m.group(2)) if m else None for m in focus[:3]] == [
        ("4", "missing required item: PASS:cite-sources"),
        ("4", "missing required item: PASS:add-timeline"),
        ("4", "missing required item: PASS:add-timeline"),
    ]
    assert (
        "already tried" not in prompts[1] and CITE.removeprefix("- ") in prompts[2].split("already tried")[1]
    )
    # each focused prompt opens with the batch's count, then its group's tasks (the task and what the
    # scorer said): the cite group's prompt names only cite tasks
    assert all("8 of 10 rollouts failed." in p.split("\n\n", 1)[0] for p in prompts)
    assert "Do the train-cite-0 thing." in prompts[0] and "train-time-" not in prompts[0]
    # a focused ask at the proposer's temperature (0); a re-ask hotter, with a seed
    bodies = [r["body"] for r in server.requests]
    assert bodies[0].get("temperature") == 0.0 and bodies[2].get("temperature") == 0.7 and "seed" in bodies[2]

    reflections = ReflectionsFile.read(run.unit_dir("step", 1) / "reflections.json")
    rows = {(p.index, p.rule): p for p in reflections.proposals}
    assert {k: p.status for k, p in rows.items() if k[0] <= 2} == {
        (1, 0): "kept", (1, 1): "screened out", (2, 0): "kept", (2, 1): "left out"
    }  # fmt: skip
    assert all(p.status in ("spent", "screened out") for k, p in rows.items() if k[0] > 2)  # the repeats
    cite = rows[(1, 0)].screen
    assert cite is not None and sorted(cite.fixed) == [f"train-cite-{i}" for i in range(4)]
    assert cite.broke == [] and cite.rollouts == 6  # its four tasks and two passing ones
    assert rows[(1, 1)].reason == "fixed 0, broke 0"  # the rider, screened on its own
    assert rows[(2, 0)].attempts == 2 and [e.text for e in rows[(2, 1)].edits] == [TIMELINE_AGAIN]
    # leave-one-out, weakest first, on fresh replicates: the second wording of the timeline fix adds
    # nothing beside the first and goes; each of the two rules costs its tasks when left out
    selection = reflections.selection
    assert selection is not None and selection.kept == [1, 2]
    loo = {step.edit.split(": ", 1)[1]: step.dropped for step in selection.leave_one_out}
    assert loo == {TIMELINE_AGAIN: True, TIMELINE: False, CITE: False}
    assert [e.text for e in reflections.edits] == [CITE, TIMELINE]
    assert any(d.reason.startswith("spent: the same edit as ask 1") for d in reflections.dropped)
    assert len(reflections.calls) == len(prompts)
    confirm = run.unit_dir("step", 1) / "rollouts" / "screen"
    assert list(confirm.glob("*/*_r1200/record.json"))  # leave-one-out's own replicates
    record = UnitRecord.read(run.unit_dir("step", 1) / "step.json")
    assert record.verdict == "keep" and record.edit_texts == [CITE, TIMELINE]
    text = (run.root / "best_skill" / "SKILL.md").read_text()
    assert CITE in text and TIMELINE in text and RIDER not in text and TIMELINE_AGAIN not in text
    # the audit reads every ask's prompt and answer (reflections.json gathers them): a clean run
    assert audit(run.root).findings == []


def test_an_edit_the_gate_rejected_is_spent_for_the_rest_of_the_run(tmp_path: Path, keyed: None) -> None:
    """Val's tasks need other rules: step 1's candidate is rejected by the gate. Step 2's answers repeat
    its rules: those are dropped, never screened again, and the ask whose every rule was spent is asked
    again, told so."""
    suite = _suite(tmp_path / "suite", val_rules=("zeta-one", "zeta-two"))
    skill = write_skill(tmp_path / "skill", "Write the report.")
    with FakeOpenAI(analyst) as server:
        train(
            suite, skill, tag="s", runs_dir=str(tmp_path / "runs"), proposer="api", max_steps=2, batch=10,
            carry="off", proposer_options=_options(server), reporter=quiet(),
        )  # fmt: skip
    run = RunDir(tmp_path / "runs" / "s")
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").decision == "reject"
    second = ReflectionsFile.read(run.unit_dir("step", 2) / "reflections.json")
    spent = [d.reason for d in second.dropped if d.reason.startswith("spent")]
    assert any("step 1: rejected by the gate on val" in r for r in spent), spent
    # the cite ask's answer kept its new rule; every other answer was all spent and asked again
    assert [p.attempts for p in second.proposals] == [1, 2, 2, 2]
    screened = [e.text for p in second.proposals for e in p.edits]
    assert CITE not in screened and TIMELINE not in screened
    # a re-ask is told the spent rules as they were written (not the key they are compared by)
    reasks = sorted((run.unit_dir("step", 2) / "asks").glob("ask_*_r1.json"))
    assert len(reasks) == 3
    for path in reasks:
        prompt = AskFile.read(path).calls[0].prompt
        assert all(rule.removeprefix("- ") in prompt for rule in (CITE, TIMELINE)), prompt


def test_a_resumed_step_asks_no_call_twice(tmp_path: Path, keyed: None) -> None:
    """SIGKILL the run while the proposals are screened (the mock agent sleeps so the screen lasts),
    resume: the analyst is asked seven times in all, as an uninterrupted run asks it."""
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
        assert not (run.unit_dir("step", 1) / "step.json").exists() and done < 20  # interrupted mid-screen
        asked = len(server.requests)
        assert asked == 7  # four asks and three asked again (their answers were spent)
        resume(run.root, reporter=quiet(), proposer_options=_options(server))
        assert len(server.requests) == asked  # every answer was read back from asks/
    record = UnitRecord.read(run.unit_dir("step", 1) / "step.json")
    assert record.verdict == "keep" and record.edit_texts == [CITE, TIMELINE]
