"""skill-trainer suites and skills, run unchanged: suites of our own in skill-trainer's layout
(tasks/X, skills/X/SKILL.md with META.md and a PROTECTED:SLOW_UPDATE block) exercising each
feature its examples use: fixtures under refs/, prompt variants, task.json for the scorer, a
rubric's hard, the task's split and suite, primary/secondary suites, failure_classes.md, the mock
proposer without a pool."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from skilltune.agents import AGENTS
from skilltune.agents.base import AgentBackend, AgentRequest, AgentResult
from skilltune.cli import app
from skilltune.measure.evaluate import evaluate
from skilltune.measure.smoke import smoke
from skilltune.proposal import Edit
from skilltune.propose.edit import PatchError, apply_patch, lint_edit, set_protected_block
from skilltune.rollout.workspace import audit_workspace
from skilltune.runfiles import ReflectionsFile, RolloutRecord, UnitRecord, Verdict
from skilltune.skill import lint_candidate, load_skill
from skilltune.suite import load_suite, validate_suite
from skilltune.training import train
from tests.helpers import rule_task, write_suite

SLOW_BLOCK = (
    "<!-- PROTECTED:SLOW_UPDATE:START -->\n## Conventions (slow update)\n\n"
    "Owned by the slow update.\n<!-- PROTECTED:SLOW_UPDATE:END -->\n"
)
RUBRIC = """
import json
from pathlib import Path

def score(task, workdir, mode="cheap"):
    workdir = Path(workdir)
    seen = json.loads((workdir / "task.json").read_text()) if (workdir / "task.json").exists() else None
    output = (workdir / "output.txt").read_text()
    ok = "RESULT: solved" in output
    checks = [f"mode:{mode}", f"split:{task.get('split')}", f"task_json:{seen == task}"]
    return {"hard": 0.9 if ok else 0, "soft": 1.0 if ok else 0.0, "checks": checks}
"""


class ProbeAgent(AgentBackend):
    """A plug-in agent that reports what its workspace holds while it runs (task.json? META.md?)."""

    name = "probe"
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md",)

    def run(self, request: AgentRequest) -> AgentResult:
        files = sorted(
            p.relative_to(request.workspace).as_posix()
            for p in request.workspace.rglob("*")
            if p.is_file() and ".git" not in p.parts
        )
        text = "FILES: " + ", ".join(files) + f"\nPROMPT: {request.task.prompt}\nRESULT: solved\n"
        return AgentResult(
            status="ok",
            final_text=text,
            events=[{"type": "result"}],
            model="probe",
            tokens_in=1,
            tokens_out=1,
        )


@pytest.fixture
def probe() -> Iterator[str]:
    AGENTS.register("probe", ProbeAgent)
    try:
        yield "probe"
    finally:
        AGENTS.unregister("probe")


def write_layout(root: Path, **config: Any) -> tuple[Path, Path]:
    """skill-trainer's layout: tasks/demo (fixtures under refs/, a rubric) and skills/demo."""
    suite = root / "tasks" / "demo"
    (suite / "refs" / "t1" / "pkg").mkdir(parents=True)
    (suite / "refs" / "t1" / "data.csv").write_text("a,b\n1,2\n")
    (suite / "refs" / "t1" / "pkg" / "SKILL.md").write_text("---\nname: reviewed\n---\nA fixture.\n")
    (suite / "refs" / "t1" / "gold.md").write_text("The expected answer, never in a workspace.\n")
    (suite / "refs" / "unlisted.txt").write_text("reference material nobody lists\n")
    common = {"files": ["refs/t1/data.csv", "refs/t1/pkg"], "scoring": {"mode": "rubric"}}
    write_suite(
        suite,
        train=[
            {"id": "t1", "prompt": "Base prompt one.", "prompt_full": "FULL prompt one.", **common},
            {"id": "t2", "prompt_cheap": "CHEAP prompt two.", "prompt_full": "FULL prompt two.", **common},
        ],
        val=[{"id": "v1", "prompt": "Base prompt val.", **common}],
        test=[{"id": "x1", "prompt": "Base prompt test.", **common}],
        config={"default_mode": "rubric", **config},
    )
    (suite / "rubric.py").write_text(RUBRIC)
    (suite / "failure_classes.md").write_text(
        "| class | mechanism |\n|---|---|\n| FAILURE-CLASS-MARKER | x |\n"
    )
    skill = root / "skills" / "demo"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: demo\ndescription: A demo skill.\n---\n\n# Demo\n\n- Do the work.\n\n" + SLOW_BLOCK
    )
    (skill / "META.md").write_text("# Optimizer memory: demo\n\nMETA-MARKER\n")
    return suite, skill / "SKILL.md"


def only_record(out: Path) -> tuple[RolloutRecord, Path]:
    paths = sorted(out.rglob("record.json"))
    return RolloutRecord.read(paths[0]), paths[0].parent


# --- fixtures under refs/, the audit ------------------------------------------------------------


def test_listed_refs_files_reach_the_workspace_and_nothing_else_of_refs(tmp_path: Path, probe: str) -> None:
    suite_dir, skill_md = write_layout(tmp_path)
    assert [p for p in validate_suite(suite_dir) if not p.warning] == []
    report = smoke(suite_dir, skill_md, agent=probe, out=tmp_path / "smoke")
    assert report.ok, [c for c in report.checks if not c.ok]
    _, folder = only_record(tmp_path / "smoke" / "rollouts" / "eval")
    output = (folder / "output.txt").read_text()
    files = output.splitlines()[0].removeprefix("FILES: ").split(", ")
    assert "data.csv" in files and "pkg/SKILL.md" in files
    assert not any("gold" in f or "unlisted" in f or "META" in f for f in files), files
    assert not any(f == "task.json" for f in files), "the agent saw task.json"


def test_an_unlisted_refs_file_in_a_workspace_is_a_leak(tmp_path: Path) -> None:
    suite_dir, _ = write_layout(tmp_path)
    suite = load_suite(suite_dir)
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(suite_dir / "refs" / "t1" / "data.csv", ws / "data.csv")  # listed: input
    assert audit_workspace(ws, suite, suite.task("t1")) == []
    shutil.copy(suite_dir / "refs" / "t1" / "gold.md", ws / "gold.md")  # not listed: a leak
    assert any("gold.md" in f for f in audit_workspace(ws, suite, suite.task("t1")))


# --- prompt variants, task.json, the rubric's task dict and hard --------------------------------


@pytest.mark.parametrize("variant", ["cheap", "full"])
def test_prompt_variant_reaches_agent_and_rubric(tmp_path: Path, probe: str, variant: str) -> None:
    suite_dir, skill_md = write_layout(tmp_path)
    # a suite path is read with the prompt variant the settings name (measure.read_suite)
    evaluate(
        suite_dir,
        skill_md,
        agent=probe,
        split="train",
        prompt_variant=variant,
        out=tmp_path / "out",
        workers=1,
    )
    records = {
        r.task_id: (r, f) for r, f in (only_record(p.parent) for p in (tmp_path / "out").rglob("record.json"))
    }
    prompts = {tid: (f / "output.txt").read_text().splitlines()[1] for tid, (_, f) in records.items()}
    expected = {
        "cheap": ("Base prompt one.", "CHEAP prompt two."),
        "full": ("FULL prompt one.", "FULL prompt two."),
    }
    assert (prompts["t1"], prompts["t2"]) == tuple(f"PROMPT: {p}" for p in expected[variant])
    for record, folder in records.values():
        assert record.score is not None
        # the rubric saw the variant, the split, and task.json (the task with its split) in the workspace
        assert record.score.checks[:3] == [f"mode:{variant}", "split:train", "task_json:True"]
        assert record.score.hard == 0  # the rubric's 0.9, read as skill-trainer reads it: int(0.9)
        assert not (folder / "task.json").exists()


def test_fractional_rubric_hard_truncates_with_a_warning(tmp_path: Path, probe: str) -> None:
    suite_dir, skill_md = write_layout(tmp_path)
    evaluate(suite_dir, skill_md, agent=probe, split="val", out=tmp_path / "out")
    record, _ = only_record(tmp_path / "out")
    assert record.score is not None and record.score.hard == 0
    assert "warning: returned hard=0.9, read as 0 (int(), as skill-trainer does)" in record.score.checks


def test_a_variant_a_task_has_no_prompt_for_is_refused(tmp_path: Path, probe: str) -> None:
    root = write_suite(
        tmp_path / "s",
        train=[{"id": "t", "prompt_full": "only full", "scoring": {"required": ["x"]}}],
        val=[{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}],
    )
    result = CliRunner().invoke(
        app,
        ["run", str(root), "--no-skill", "--agent", probe, "--split", "train", "--out", str(tmp_path / "o")],
    )
    assert result.exit_code == 2
    assert "task t has no prompt for the cheap variant" in result.stderr


# --- the skill: SKILL.md path, META.md, protected markers -------------------------------------------


def test_skill_md_path_is_its_folder_and_meta_md_is_not_the_skill(tmp_path: Path) -> None:
    _, skill_md = write_layout(tmp_path)
    by_file, by_folder = load_skill(skill_md), load_skill(skill_md.parent)
    assert by_file.hash == by_folder.hash
    assert set(by_file.files) == {"SKILL.md"}  # META.md is the optimizer's memory, never the agent's


def test_skill_trainer_protected_block_is_kept_from_step_edits(tmp_path: Path) -> None:
    _, skill_md = write_layout(tmp_path)
    seed = load_skill(skill_md)
    assert lint_candidate(seed) == []
    inside = Edit(op="replace", anchor="Owned by the slow update.", text="Hijacked.")
    with pytest.raises(PatchError, match="PROTECTED"):
        apply_patch(seed, [inside])
    appended, _ = apply_patch(seed, [Edit(op="append", text="- A new rule.")])
    assert appended.text.index("- A new rule.") < appended.text.index("<!-- PROTECTED:SLOW_UPDATE:START -->")
    # the epoch slow update writes skill-trainer's SLOW_UPDATE block, in its own markers
    updated = seed.replace_file("SKILL.md", set_protected_block(seed.text, "slow-update", "- Guidance."))
    assert (
        "<!-- PROTECTED:SLOW_UPDATE:START -->\n## Conventions (slow update)\n- Guidance.\n<!-- PROTECTED:SLOW_UPDATE:END -->"
        in updated.text
    )
    assert "<!-- PROTECTED:slow-update -->" not in updated.text
    assert lint_edit(updated, seed, 0.5, own_block="slow-update") is None
    assert lint_edit(updated, seed, 0.5) == "lint: a PROTECTED block changed"


def test_unclosed_skill_trainer_block_is_a_lint_error(tmp_path: Path) -> None:
    _, skill_md = write_layout(tmp_path)
    skill_md.write_text(
        skill_md.read_text().replace("<!-- PROTECTED:SLOW_UPDATE:END -->", "<!-- /PROTECTED -->")
    )
    messages = [i.message for i in lint_candidate(load_skill(skill_md))]
    assert messages == ["<!-- /PROTECTED --> does not close PROTECTED:SLOW_UPDATE"]


# --- suites: per-suite totals, the secondary veto ------------------------------------------------


def two_suite_layout(root: Path) -> Path:
    """Primary tasks need rule 'cite-sources'; the secondary suite's tasks fail when the skill says it."""
    primary = [rule_task(f"p{i}", ["cite-sources"], suite="docs") for i in range(4)]
    secondary = [
        {**rule_task(f"s{i}", []), "suite": "chat", "forbids": ["cite sources"], "forbid_hint": "too formal"}
        for i in range(3)
    ]
    pool = [{"id": "cite", "text": "- Always cite sources for every claim.", "answers": ["cite-sources"]}]
    return write_suite(
        root,
        train=primary[:2] + secondary[:1],
        val=primary[2:] + secondary[1:] + [rule_task("p9", ["cite-sources"], suite="docs")],
        test=[rule_task("px", ["cite-sources"], suite="docs")],
        config={"primary_suite": "docs", "secondary_suite": "chat", "proposer_pool": pool},
    )


def test_run_reports_totals_per_suite(tmp_path: Path) -> None:
    root = two_suite_layout(tmp_path / "s")
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: two\ndescription: d\n---\n\n- Be brief.\n")
    summary = evaluate(root, skill, split="val", out=tmp_path / "out")
    assert summary.per_suite["docs"].n_tasks == 3 and summary.per_suite["docs"].hard == 0.0
    assert summary.per_suite["chat"].n_tasks == 2 and summary.per_suite["chat"].hard == 1.0


def test_secondary_suite_regression_vetoes_an_accept(tmp_path: Path) -> None:
    root = two_suite_layout(tmp_path / "s")
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: two\ndescription: d\n---\n\n- Be brief.\n")
    result = train(
        root, skill, tag="veto", runs_dir=str(tmp_path / "runs"), max_steps=1, gate="strict", seed=1
    )
    gate = Verdict.read(Path(result.run_dir) / "steps" / "step_0001" / "gate.json")
    assert gate.secondary is not None
    assert (gate.secondary.suite, gate.secondary.n_tasks, gate.secondary.mean_diff) == ("chat", 2, -1.0)
    assert gate.secondary.regression and gate.decision == "reject"
    assert "secondary suite 'chat' regressed" in gate.reason and "the gate had accepted" in gate.reason
    step = UnitRecord.read(Path(result.run_dir) / "steps" / "step_0001" / "step.json")
    assert step.verdict == "discard"


def test_without_a_secondary_suite_the_same_edit_is_kept(tmp_path: Path) -> None:
    root = two_suite_layout(tmp_path / "s")
    scoring = (root / "scoring.md").read_text().replace('"secondary_suite": "chat",', "")
    (root / "scoring.md").write_text(scoring.replace('"primary_suite": "docs",', ""))
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: two\ndescription: d\n---\n\n- Be brief.\n")
    result = train(
        root, skill, tag="keep", runs_dir=str(tmp_path / "runs"), max_steps=1, gate="strict", seed=1
    )
    gate = Verdict.read(Path(result.run_dir) / "steps" / "step_0001" / "gate.json")
    assert gate.secondary is None and gate.decision == "accept"  # the veto alone made the difference


def test_named_suites_must_exist(tmp_path: Path) -> None:
    root = two_suite_layout(tmp_path / "s")
    (root / "scoring.md").write_text((root / "scoring.md").read_text().replace('"chat"', '"chta"'))
    problems = [p for p in validate_suite(root) if not p.warning]
    assert any("config secondary_suite 'chta' names no val task's suite" in p.message for p in problems)


# --- the proposer: failure_classes.md, the mock proposer without a pool -------------------------------


def test_mock_proposer_turns_hints_into_rules_and_sees_failure_classes(tmp_path: Path) -> None:
    root = write_suite(
        tmp_path / "tasks" / "hints",
        train=[rule_task(f"t{i}", ["verify-output"]) for i in range(3)],
        val=[rule_task(f"v{i}", ["verify-output"]) for i in range(3)],
    )
    (root / "failure_classes.md").write_text("| unchecked | FAILURE-CLASS-MARKER |\n")
    skill = tmp_path / "skills" / "hints"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: hints\ndescription: d\n---\n\n- Be brief.\n")
    result = train(
        root, skill / "SKILL.md", tag="hints", runs_dir=str(tmp_path / "runs"), max_steps=1, seed=0
    )
    reflections = ReflectionsFile.read(Path(result.run_dir) / "steps" / "step_0001" / "reflections.json")
    assert [e.text for e in reflections.edits][:1] == [
        "- Check before you finish that this does not happen: symptom of missing verify-output."
    ]
    assert "FAILURE-CLASS-MARKER" in reflections.calls[0].prompt
    assert "<failure_classes>\n" in reflections.calls[0].prompt


# --- the whole round trip, as a skill-trainer user types it ------------------------------------------


def test_cli_round_trip_on_a_skill_trainer_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite_dir = write_suite(
        tmp_path / "tasks" / "demo",
        train=[rule_task(f"t{i}", ["cite-sources"]) for i in range(3)],
        val=[rule_task(f"v{i}", ["cite-sources"]) for i in range(3)],
        test=[rule_task(f"x{i}", ["cite-sources"]) for i in range(2)],
    )
    (suite_dir / "failure_classes.md").write_text("| class | mechanism |\n")
    skill = tmp_path / "skills" / "demo"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\n\n- Be brief.\n\n" + SLOW_BLOCK)
    (skill / "META.md").write_text("# Optimizer memory\n")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    skill_md = "skills/demo/SKILL.md"
    for args in (
        ["validate", "tasks/demo"],
        ["smoke", "tasks/demo", "--skill", skill_md, "--agent", "mock"],
        ["run", "tasks/demo", "--skill", skill_md, "--agent", "mock", "--out", "runs/eval"],
        [
            "train",
            "tasks/demo",
            "--skill",
            skill_md,
            "--agent",
            "mock",
            "--proposer",
            "mock",
            "--tag",
            "t",
            "--max-steps",
            "3",
            "-q",
        ],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.stdout, result.stderr)
    config = json.loads((tmp_path / "runs" / "t" / "config.json").read_text())
    assert config["prompt_variant"] == "cheap" and config["judge_options"] == {}
    assert (tmp_path / "runs" / "t" / "TERMINAL").read_text().startswith(("success", "no-progress"))


def test_rubric_receipts_and_failure_classes_reach_the_proposer(tmp_path: Path) -> None:
    """skill-trainer's sql demo: the rubric's checks name a symptom class, failure_classes.md maps it."""
    root = write_suite(
        tmp_path / "tasks" / "sql",
        train=[
            {"id": f"t{i}", "prompt": "Write the query.", "scoring": {"mode": "rubric"}} for i in range(2)
        ],
        val=[{"id": "v0", "prompt": "Write the query.", "scoring": {"mode": "rubric"}}],
        config={"default_mode": "rubric"},
    )
    (root / "rubric.py").write_text(
        "def score(task, workdir, mode):\n"
        "    return {'hard': 0, 'soft': 0.3, 'checks': ['ran', 'rows:12!=9', 'symptom:ghost-rows']}\n"
    )
    (root / "failure_classes.md").write_text(
        "| ghost-rows | FAILURE-CLASS-MARKER: rows nobody should count |\n"
    )
    skill = tmp_path / "skills" / "sql"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: sql\ndescription: d\n---\n\n- Write one query.\n")
    result = train(root, skill / "SKILL.md", tag="sql", runs_dir=str(tmp_path / "runs"), max_steps=1, seed=0)
    reflections = ReflectionsFile.read(Path(result.run_dir) / "steps" / "step_0001" / "reflections.json")
    prompt = reflections.calls[0].prompt  # a focused ask on the group the symptom names
    assert "2 of them failed the same way: symptom: ghost-rows." in prompt
    assert "what went wrong: ran, rows:12!=9, symptom:ghost-rows" in prompt
    assert "FAILURE-CLASS-MARKER" in prompt
    # the rubric fails every rollout whatever the skill says: the rule is screened out, not kept
    proposed = [e.text for p in reflections.proposals for e in p.edits]
    assert proposed[:1] == ["- Check before you finish that this does not happen: ghost-rows."]
    assert reflections.edits == [] and reflections.proposals[0].status == "screened out"


def test_checklist_checks_never_reach_the_proposer_and_no_answers_hides_the_items(tmp_path: Path) -> None:
    """A checklist's checks are the expected strings: they never reach the proposer as checks. Its
    feedback names the missing items (the default, ``full``), or only counts them (``no-answers``)."""
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: c\ndescription: d\n---\n\n- Be brief.\n")
    prompts = {}
    for policy in ("full", "no-answers"):
        root = write_suite(
            tmp_path / policy,
            train=[rule_task(f"t{i}", ["secret-rule"]) for i in range(2)],
            val=[rule_task("v0", ["secret-rule"])],
            config={"feedback": policy},
        )
        result = train(root, skill, tag="c", runs_dir=str(tmp_path / f"runs-{policy}"), max_steps=1, seed=0)
        prompts[policy] = (
            ReflectionsFile.read(Path(result.run_dir) / "steps" / "step_0001" / "reflections.json")
            .calls[0]
            .prompt
        )
    for prompt in prompts.values():
        assert "<checks>" not in prompt and "missing:PASS:secret-rule" not in prompt
    assert "missing: 'PASS:secret-rule'" in prompts["full"]
    assert "PASS:secret-rule" not in prompts["no-answers"] and "RESULT: solved" not in prompts["no-answers"]
    assert "required items in the output (the suite keeps them hidden)" in prompts["no-answers"]
