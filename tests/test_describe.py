"""Tuning the description (--component): the description edit, its lint, the proposers' view of the
train trigger decisions, the joint gate of body and description tasks, and the trigger demo and
its null twin end to end (the mock is deterministic, so these runs are fast and exact)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from skilltune.agents.mock import loads_skill
from skilltune.errors import UsageError
from skilltune.proposal import Edit, EvidencePacket, Proposal, TriggerCase
from skilltune.propose.describe import rewrite_description
from skilltune.propose.edit import PatchError, apply_edit, lint_edit
from skilltune.propose.merge import merge_edits
from skilltune.propose.prompts import reflect_prompt
from skilltune.propose.vet import vet_edits
from skilltune.runfiles import Comparison, RunConfigFile, TrainConfig
from skilltune.skill import Candidate, lint_description, load_skill, set_description
from skilltune.suite import load_suite
from skilltune.training import train
from skilltune.training.config import settings_for_resume
from skilltune.training.secondary import gate_scope
from tests.helpers import REPO, quiet, rule_task, write_skill, write_suite

DEMO = REPO / "examples" / "trigger-demo"
NULL = REPO / "examples" / "trigger-null"
SEED = "Writes release notes from merged pull requests. Use when the user asks for release notes."
# --carry screen, as the demo's README runs it: at --carry run its one gate, at step 10, is too few of
# 28 val requests to keep the rewrite at the run's first level (issue 35 grows the queries).
DEMO_SETTINGS: dict[str, Any] = {
    "agent": "mock",
    "proposer": "mock",
    "component": "description",
}


def case(i: str, prompt: str, should: bool, description: str = SEED) -> TriggerCase:
    loaded, _ = loads_skill(description, prompt)
    return TriggerCase(id=f"{i}#r0", task_id=i, prompt=prompt, should_trigger=should, loaded=loaded)


def test_the_rewrite_names_what_missed_requests_share_and_drops_what_only_false_triggers_hold() -> None:
    cases = [
        case("a", "update the changelog for 2.1", True),
        case("b", "add the merged PRs to the changelog", True),
        case("c", "draft the release notes for 3.0", True),
        case("d", "release the database lock", False),
        case("e", "rename a function", False),
    ]
    new, support = rewrite_description(SEED, cases) or ("", [])
    assert new.startswith("Writes release notes from merged pull requests. Use when the user asks about")
    assert "changelog" in new and "release," not in new and "notes" in new  # release: only the lock needs it
    assert support == ["a#r0", "b#r0", "d#r0"]
    assert loads_skill(new, "changelog for 4.0")[0] and not loads_skill(new, "release the lock")[0]
    assert lint_description(new) == []
    right = [case("c", "draft the release notes for 3.0", True), case("e", "rename a function", False)]
    assert rewrite_description(SEED, right) is None  # nothing missed, nothing wrongly taken


def test_a_word_one_request_alone_uses_needs_the_skill_body_behind_it() -> None:
    cases = [case("a", "summarise what shipped this week", True), case("e", "rename a function", False)]
    assert rewrite_description(SEED, cases) is None
    new, _ = rewrite_description(SEED, cases, body="Notes on what shipped.") or ("", [])
    assert "shipped" in new


_TIES = """
import json
from skilltune.agents.mock import loads_skill
from skilltune.proposal import TriggerCase
from skilltune.propose.describe import rewrite_description

SEED = "Writes release notes. Use when the user asks for release notes."
def case(i, prompt, should):
    return TriggerCase(id=i, task_id=i, prompt=prompt, should_trigger=should, loaded=loads_skill(SEED, prompt)[0])
cases = [
    case("a", "the product shipped today", True), case("b", "what shipped in the product", True),
    case("c", "release notes please", True), case("d", "notes on the release of the lock", False),
]
print(json.dumps(rewrite_description(SEED, cases)))
"""


def test_the_rewrite_is_the_same_in_every_process() -> None:
    """Two missed requests' words that tie ("product", "shipped") and two of the seed's words a false
    trigger holds alike ("release", "notes"): the rewrite does not follow the order of a set of
    strings, which changes with each process's hash seed (the trigger demo's tables did)."""
    outputs = set()
    for hash_seed in range(6):
        env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
        done = subprocess.run(
            [sys.executable, "-c", _TIES], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(done.stdout)
    [only] = outputs
    new, _ = json.loads(only)
    assert "product" in new or "shipped" in new


@pytest.mark.parametrize(
    ("description", "name", "problem"),
    [
        ("", "x", "empty"),
        ("Writes notes. Use when asked. " + "x" * 1100, "x", "1024"),
        ("Writes <b>notes</b>. Use when asked.", "x", "XML"),
        ("Writes notes. Use when asked.", "claude-notes", "reserved word 'claude'"),
        ("I write notes. Use when asked.", "x", "third"),
        ("You can write notes with it. Use when asked.", "x", "third"),
        ("Writes release notes from merged pull requests.", "x", "use when"),
    ],
)
def test_the_description_lint_holds_the_platforms_limits(description: str, name: str, problem: str) -> None:
    assert any(problem in p for p in lint_description(description, name)), lint_description(description, name)


def test_the_description_edit_replaces_the_description_and_nothing_else(tmp_path: Path) -> None:
    text = "---\nname: notes\ndescription: >-\n  Writes notes.\n  Use when asked.\nmetadata: {a: 1}\n---\n# Body\n"
    out = set_description(text, "Writes notes: fast. Use when asked for notes.")
    assert out.endswith("metadata: {a: 1}\n---\n# Body\n") and out.startswith("---\nname: notes\n")
    edit = Edit(op="description", text="Writes notes: fast. Use when asked for notes.")
    assert apply_edit(text, edit)[0] == out
    with pytest.raises(PatchError, match="description cannot be set"):
        apply_edit("# no front matter\n", edit)
    seed = Candidate({"SKILL.md": text})
    bad = seed.replace_file("SKILL.md", set_description(text, "Writes notes."))
    assert "use when" in (lint_edit(bad, seed, 0.5) or "")
    assert lint_edit(seed.replace_file("SKILL.md", out), seed, 0.5) is None
    # the merge keeps one description, the strongest, and it counts as one edit of the budget
    edits = [
        Edit(op="description", text="Writes notes. Use when asked for notes.", support=["t#r0", "u#r0"]),
        Edit(op="description", text="Writes notes. Use when asked for a memo.", support=["t#r0"]),
        Edit(op="append", text="- Be brief.", support=["t#r0"]),
    ]
    merged = merge_edits(edits, seed, budget=2)
    assert [m.edit.op for m in merged.kept] == ["description", "append"]
    assert "one description" in merged.dropped[0]["reason"]


def _packet(component: Literal["body", "description"], edits_for: list[TriggerCase]) -> EvidencePacket:
    skill = "---\nname: notes\ndescription: Writes notes. Use when asked for notes.\n---\n# Body\n"
    return EvidencePacket(
        step=1, mode="patch", skill_files={"SKILL.md": skill}, skill_main="SKILL.md", failures=[], successes=[],
        component=component, triggers=edits_for,
    )  # fmt: skip


def test_the_step_vets_edits_of_the_other_component_and_descriptions_that_fail_lint() -> None:
    cases = [case("a", "update the changelog", True)]
    packet = _packet("description", cases)
    proposal = Proposal(
        edits=[
            Edit(op="description", text="I write notes.", support=["a#r0"]),
            Edit(op="append", text="- Be brief.", support=["a#r0"]),
            Edit(op="description", text="Writes notes. Use when asked for a changelog.", support=["a"]),
        ]
    )
    vetted = vet_edits(proposal, packet)
    assert [e.text for e in vetted.edits] == ["Writes notes. Use when asked for a changelog."]
    reasons = [d.reason for d in vetted.dropped]
    assert any("third" in r for r in reasons) and any("a body edit is not taken" in r for r in reasons)
    body_step = vet_edits(proposal.model_copy(update={"dropped": []}), _packet("body", cases))
    assert [e.op for e in body_step.edits] == ["append"]
    # the description step's prompt: the missed and wrongly taken train requests with their ids
    prompt = reflect_prompt(
        _packet("description", [*cases, case("d", "take notes of the meeting", False, "Use when notes.")])
    )
    assert '<request id="a#r0" should_load="true">\nupdate the changelog\n</request>' in prompt
    assert "<false_triggers>" in prompt and 'id="d#r0"' in prompt


def test_the_joint_gate_gates_a_candidate_on_its_own_components_tasks(tmp_path: Path) -> None:
    trig = [{"id": f"q{i}", "prompt": f"update the changelog {i}", "should_trigger": True} for i in range(2)]
    suite = load_suite(write_suite(tmp_path / "s", [rule_task("b0", ["r"])], [rule_task("b1", ["r"]), *trig]))
    seed = load_skill(write_skill(tmp_path / "k", "- r\n"))
    described = seed.replace_file("SKILL.md", set_description(seed.text, "Writes notes. Use when notes."))
    body = seed.replace_file("SKILL.md", seed.text + "- more\n")
    val = suite.tasks("val")
    assert gate_scope(suite, val, described, seed).gated == {"q0", "q1"}
    assert gate_scope(suite, val, described, seed).held == "body tasks"
    assert (gate_scope(suite, val, body, seed).gated, gate_scope(suite, val, body, seed).held) == (
        {"b1"},
        "trigger tasks",
    )
    both = described.replace_file("SKILL.md", described.text + "- more\n")
    assert gate_scope(suite, val, both, seed).gated == {"b1", "q0", "q1"}


def _demo_run(tmp_path: Path, suite: Path, tag: str) -> Path:
    result = train(
        suite, DEMO / "skill", tag=tag, runs_dir=str(tmp_path), reporter=quiet(),
        **DEMO_SETTINGS,
    )  # fmt: skip
    return Path(result.run_dir)


def test_the_trigger_demo_raises_held_out_accuracy_and_its_null_twin_keeps_nothing(tmp_path: Path) -> None:
    run = _demo_run(tmp_path, DEMO / "suite", "demo")
    pair = Comparison.read(run / "comparison.json").pairs[0]
    assert pair.verdict == "b_better" and pair.ci95 is not None and pair.ci95[0] > 0, pair
    assert json.loads((run / "config.json").read_text())["component"] == "description"
    assert not list(run.glob("epochs/*"))  # no slow update: it writes the body
    kept = [json.loads(p.read_text()) for p in sorted(run.glob("steps/*/step.json"))]
    assert [k["verdict"] for k in kept].count("keep") >= 1
    best = load_skill(run / "best_skill")
    assert best.front_matter.body == load_skill(DEMO / "skill").front_matter.body  # the body is untouched
    assert lint_description(best.description, best.name) == []
    # the proposer saw train requests only: no val or test query reaches its prompts
    suite = load_suite(DEMO / "suite")
    held = [t.prompt for split in ("val", "test") for t in suite.tasks(split)]
    prompts = [
        c["prompt"] for p in run.glob("steps/*/reflections.json") for c in json.loads(p.read_text())["calls"]
    ]
    assert prompts and all("<missed_requests>" in p for p in prompts)
    assert not [q for q in held for p in prompts if q in p]
    assert any(t.prompt in prompts[0] for t in suite.tasks("train"))

    null = _demo_run(tmp_path, NULL / "suite", "null")
    verdicts = [json.loads(p.read_text())["verdict"] for p in null.glob("steps/*/step.json")]
    assert verdicts and set(verdicts) <= {"discard", "carried"} and "discard" in verdicts
    assert (null / "TERMINAL").read_text().startswith("no-progress")


def test_a_resume_keeps_the_component(tmp_path: Path) -> None:
    settings = TrainConfig(
        suite=str(DEMO / "suite"), skill=str(DEMO / "skill"), tag="t", component="description"
    )
    stored = RunConfigFile.model_validate(settings.model_dump() | {"suite_hash": "h", "contract": "c"})
    with pytest.raises(UsageError, match="--component"):
        settings_for_resume(stored, {"component": "body"})
    assert settings_for_resume(stored, {"component": "description"}).component == "description"
    assert stored.planned_decisions == stored.total_steps  # no epoch updates to plan
