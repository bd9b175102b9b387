"""Edits that can be trusted to reach the gate (issue 19, item 3), through `--proposer api` against a
scripted local server: uncited edits dropped, a failed anchor repaired in one round, a patch over the
growth cap gated with the edits that fit, a repeat of a rejected candidate closed without rollouts,
and no val figure in any proposer prompt."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skilltune.progress import PlainReporter
from skilltune.rundir import RunDir
from skilltune.runfiles import ReflectionsFile, UnitRecord
from skilltune.suite import load_suite
from skilltune.training import resume, train
from tests.fake_openai import FakeOpenAI, prompt_of
from tests.helpers import MOCK_SKILL, MOCK_SUITE

POOL = {e["id"]: e["text"] for e in load_suite(MOCK_SUITE).config.model_extra["proposer_pool"]}  # type: ignore[index]
IDS = re.compile(r"\btrain-[a-z0-9-]+#r\d+")
NEUTRAL = "- Write every postmortem in British English."


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "k")


def _answer(edits: list[dict[str, Any]]) -> str:
    return "```json\n" + json.dumps({"edits": edits}) + "\n```"


def _first_id(body: dict[str, Any]) -> str:
    found: list[str] = IDS.findall(prompt_of(body))
    assert found, "the analyst's prompt names no train trajectory"
    return found[0]


def _train(tmp_path: Path, respond: Callable[[dict[str, Any]], str], tag: str, **settings: Any) -> RunDir:
    with FakeOpenAI(respond) as server:
        options = {"provider": "openai", "model": "m", "base_url": server.base_url, "api_key_env": "FAKE_API_KEY",
                   "stream": False}  # fmt: skip
        train(
            MOCK_SUITE, MOCK_SKILL, tag=tag, runs_dir=str(tmp_path), proposer="api", proposer_options=options,
            screen=False, batch=4, reporter=PlainReporter(quiet=True), **settings,
        )  # fmt: skip
    return RunDir(tmp_path / tag)


def _record(run: RunDir, index: int) -> UnitRecord:
    return UnitRecord.read(run.unit_dir("step", index) / "step.json")


def test_an_edit_citing_no_trajectory_is_dropped_with_the_reason_in_reflections(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> str:
        return _answer(
            [
                {"op": "append", "text": POOL["p-impact"], "support": ["<trajectory id>"]},
                {"op": "append", "text": POOL["p-summary"], "support": [_first_id(body)]},
            ]
        )

    run = _train(tmp_path, respond, "cite", max_steps=1)
    folder = run.unit_dir("step", 1)
    reflections = ReflectionsFile.read(folder / "reflections.json")
    assert [e.text for e in reflections.edits] == [POOL["p-summary"]]
    assert [d.edit.text for d in reflections.dropped] == [POOL["p-impact"]]
    assert (
        "cites no trajectory of this step's evidence (it cited '<trajectory id>')"
        in reflections.dropped[0].reason
    )
    candidate = (folder / "candidate_skill.md").read_text()
    assert POOL["p-summary"] in candidate and POOL["p-impact"] not in candidate
    assert _record(run, 1).decision in ("accept", "reject")  # the cited edit was gated


def test_an_anchor_not_in_the_skill_is_repaired_in_one_round(tmp_path: Path) -> None:
    """The analyst anchors on a heading of the prompt (what the 1.5B model did); the repair shows it
    the lines it may copy, it picks one, and the edit is applied there and gated."""

    def respond(body: dict[str, Any]) -> str:
        prompt = prompt_of(body)
        if "<failed_anchors>" in prompt:
            assert "'## Optimizer memory'" in prompt and "anchor not found" in prompt
            assert "- Link the dashboard, log query or graph that supports each factual claim." in prompt
            return '{"anchors": ["## Rules"]}'
        edit = {"op": "insert_after", "anchor": "## Optimizer memory", "text": POOL["p-impact"],
                "support": [_first_id(body)]}  # fmt: skip
        return _answer([edit])

    run = _train(tmp_path, respond, "anchor", max_steps=1)
    folder = run.unit_dir("step", 1)
    reflections = ReflectionsFile.read(folder / "reflections.json")
    assert [c.role for c in reflections.calls] == ["analyst", "analyst (anchor repair)"]
    assert [e.anchor for e in reflections.edits] == ["## Rules"]
    assert reflections.notes["anchor_repair"] == "1 of 1 anchors repaired"
    assert f"## Rules\n{POOL['p-impact']}\n" in (folder / "candidate_skill.md").read_text()
    assert _record(run, 1).decision in ("accept", "reject")


def test_an_anchor_the_repair_cannot_place_is_appended_at_the_end(tmp_path: Path) -> None:
    """What the 1.5B model did by hand: the anchor is a line of the trajectory, and the repair answers
    with the edit's own text, which is not in the skill either. The rule it meant to add is
    appended at the end of the skill (an anchor found twice would be left for the merge to drop)."""
    trajectory_line = "Do the postmortem for the checkout outage."

    def respond(body: dict[str, Any]) -> str:
        if "<failed_anchors>" in prompt_of(body):
            return json.dumps({"anchors": [POOL["p-impact"]]})
        edit = {
            "op": "replace",
            "anchor": trajectory_line,
            "text": POOL["p-impact"],
            "support": [_first_id(body)],
        }
        return _answer([edit])

    run = _train(tmp_path, respond, "unanchored", max_steps=1)
    folder = run.unit_dir("step", 1)
    reflections = ReflectionsFile.read(folder / "reflections.json")
    assert [(e.op, e.anchor) for e in reflections.edits] == [("append", None)]
    assert reflections.notes["anchor_repair"] == (
        "0 of 1 anchors repaired; 1 edit(s) whose anchor is nowhere in the skill appended at its end instead"
    )
    seed = (MOCK_SKILL / "SKILL.md").read_text()
    candidate = (folder / "candidate_skill.md").read_text()
    assert POOL["p-impact"] not in seed and f"\n{POOL['p-impact']}\n" in candidate
    assert trajectory_line not in candidate
    assert _record(run, 1).decision in ("accept", "reject")


def test_a_candidate_over_the_growth_cap_is_gated_with_the_edits_that_fit(tmp_path: Path) -> None:
    long_rule = "- " + "Check every section twice before you finish. " * 40  # 1,842 characters

    def respond(body: dict[str, Any]) -> str:
        support = [_first_id(body)]
        return _answer(
            [
                {"op": "append", "text": POOL["p-impact"], "support": support},
                {"op": "append", "text": long_rule, "support": support},
                {"op": "append", "text": POOL["p-summary"], "support": support},
            ]
        )

    run = _train(tmp_path, respond, "growth", max_steps=1)
    folder = run.unit_dir("step", 1)
    record = _record(run, 1)
    assert record.decision in ("accept", "reject") and (folder / "gate.json").is_file()
    assert record.edit_texts == [POOL["p-impact"], POOL["p-summary"]]
    merged = json.loads((folder / "merged_patch.json").read_text())
    assert [m["edit"]["text"] for m in merged["kept"]] == [POOL["p-impact"], POOL["p-summary"]]
    assert [d["reason"][:46] for d in merged["dropped"]] == [
        "over the growth cap with the stronger edits kept"[:46]
    ]
    assert "grew from 1379 to" in merged["dropped"][0]["reason"]


def _neutral(body: dict[str, Any]) -> str:
    return _answer([{"op": "append", "text": NEUTRAL, "support": [_first_id(body)]}])


def _rerun_from_step_2(run: RunDir) -> None:
    for index in (2, 3):
        shutil.rmtree(run.unit_dir("step", index))
    (run.root / "TERMINAL").unlink()


def test_a_repeat_of_a_rejected_candidate_costs_no_rollouts_and_resumes_the_same(tmp_path: Path) -> None:
    """Step 1's gate rejects a neutral rule; steps 2 and 3 propose it again: each is closed as a
    repeat after its train batch (4 rollouts), with no screen, no gate and no alpha, the proposer is
    told, and a resume from step 2 writes the same results.tsv."""
    run = _train(tmp_path, _neutral, "repeat", max_steps=3, seed=3)
    first = _record(run, 1)
    assert (first.decision, first.alpha is not None) == ("reject", True)
    for index in (2, 3):
        record = _record(run, index)
        assert (record.verdict, record.decision, record.rollouts, record.alpha) == (
            "discard",
            "repeat",
            4,
            None,
        )
        assert record.reason == f"repeat of rejected candidate {first.candidate[:12]} (step 1)"
        assert not (run.unit_dir("step", index) / "gate.json").exists()
        assert sorted(p.name for p in (run.unit_dir("step", index) / "rollouts").iterdir()) == ["train"]
    journal = [json.loads(line) for line in run.journal_path.read_text().splitlines()]
    gated = {e["unit"] for e in journal if e["event"] == "stage" and e["stage"] in ("gate", "screen")}
    assert gated == {"step_0001"}
    ends = {e["unit"]: e["rollouts"] for e in journal if e["event"] == "unit_end"}
    assert ends["step_0002"] == ends["step_0003"] == 4
    rows = run.results.read_text().splitlines()
    assert rows[2].split("\t")[9] == "4" and "repeat of rejected candidate" in rows[2]
    told = ReflectionsFile.read(run.unit_dir("step", 3) / "reflections.json").calls[0].prompt
    assert "repeat of rejected candidate" in told and "rejected by the gate on val" in told

    before = run.results.read_text()
    _rerun_from_step_2(run)
    with FakeOpenAI(_neutral) as server:
        config = json.loads(run.config.read_text())
        config["proposer_options"]["base_url"] = server.base_url
        run.config.write_text(json.dumps(config))
        resume(run.root, reporter=PlainReporter(quiet=True))
    assert run.results.read_text() == before


def test_no_val_figure_reaches_any_proposer_prompt(tmp_path: Path) -> None:
    """A distinctive val gain planted in step 1's record (kept, then rejected) never reaches the
    prompts of the steps after it, nor META.md; the outcome does."""
    run = _train(tmp_path, _neutral, "val", max_steps=3, seed=3)
    planted = {"val_candidate": 0.918273, "val_incumbent": 0.546372,
               "reason": "gain +0.371901 crossed the sequential bound"}  # fmt: skip
    for verdict in ("keep", "discard"):
        path = run.unit_dir("step", 1) / "step.json"
        record = UnitRecord.read(path).model_copy(update={**planted, "verdict": verdict})
        if verdict == "keep":
            record = record.model_copy(update={"decision": "accept"})
        record.write(path)
        _rerun_from_step_2(run)
        with FakeOpenAI(_neutral) as server:
            config = json.loads(run.config.read_text())
            config["proposer_options"]["base_url"] = server.base_url
            run.config.write_text(json.dumps(config))
            resume(run.root, reporter=PlainReporter(quiet=True))
        prompts = [run.meta.read_text()]
        for index in (2, 3):
            calls = ReflectionsFile.read(run.unit_dir("step", index) / "reflections.json").calls
            prompts += [c.prompt for c in calls]
        prompts += [
            json.loads(p.read_text())["calls"][0]["prompt"] for p in run.steps.glob("*/slow_update.json")
        ]
        for text in prompts:
            for figure in ("0.918", "0.546", "0.3719", "crossed the sequential bound"):
                assert figure not in text
        outcome = "kept by the gate on val" if verdict == "keep" else "rejected by the gate on val"
        assert outcome in prompts[0] and outcome in prompts[1]
