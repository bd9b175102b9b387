"""skilltune audit: a clean demo run passes; planted leaks, protected-block changes and the other
faults each raise their own finding (exit 1); the end of train writes audit.json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.progress import PlainReporter
from skilltune.proposal import DroppedEdit, Edit, EvidencePacket, Proposal
from skilltune.propose.base import PROPOSERS
from skilltune.propose.mock import MockProposer
from skilltune.review.audit import audit
from skilltune.review.leakage import Secrets, search, words
from skilltune.rundir import RunDir
from skilltune.runfiles import AuditFile, ReflectionsFile, RolloutRecord, UnitRecord
from skilltune.skill import load_skill
from skilltune.suite import load_suite
from skilltune.training import train
from tests.helpers import MOCK_SKILL, MOCK_SUITE, rule_task, write_suite

runner = CliRunner()
VAL_PROMPT = json.loads((MOCK_SUITE / "val.jsonl").read_text().splitlines()[0])["prompt"]


def _quiet() -> dict[str, Any]:
    return {"reporter": PlainReporter(quiet=True)}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    """The mock demo with `make demo`'s settings (8 steps, seed 1, the default alpha) but one ask a step
    and `--carry screen`: the shape the planted faults need (a gated reject at step 5, and steps after
    it). A run with several asks a step is audited in tests/test_proposals.py."""
    runs = tmp_path_factory.mktemp("runs")
    result = train(
        MOCK_SUITE, MOCK_SKILL, tag="demo", runs_dir=str(runs),
        max_steps=8, seed=1, proposals=1, carry="screen", **_quiet(),
    )  # fmt: skip
    assert result.state == "success" and result.kept >= 1
    return RunDir(runs / "demo")


@pytest.fixture
def run_copy(demo_run: RunDir, tmp_path: Path) -> RunDir:
    shutil.copytree(demo_run.root, tmp_path / "demo", symlinks=True)
    return RunDir(tmp_path / "demo")


def _checks(run: RunDir) -> set[str]:
    return {f.check for f in audit(run.root).findings}


def test_the_mock_demo_run_is_clean_and_train_wrote_its_audit(demo_run: RunDir) -> None:
    written = AuditFile.read(demo_run.audit)  # the end of train ran the audit
    assert written.clean and written.findings == []
    assert written.searched["passages"] > 1000 and written.searched["ids"] == 62  # 48 val + 14 test ids
    assert written.searched["documents"] >= 20
    assert written.searched["train_prompts"] == 14 and written.warnings == []
    assert "warnings" not in json.loads(demo_run.audit.read_text())  # left out while empty
    result = runner.invoke(app, ["audit", str(demo_run.root)])
    assert result.exit_code == 0, result.output
    assert "clean" in result.output and "warning" not in result.output


def test_a_planted_protected_block_change_is_flagged(run_copy: RunDir) -> None:
    # A discarded step whose candidate rewrote the slow-update block (lint should have stopped it):
    # the candidate and its record agree, so only the protected-block check can see it.
    step = next(
        r for r in (UnitRecord.read(p) for p in sorted(run_copy.steps.glob("step_*/step.json")))
        if r.verdict == "discard" and r.decision == "reject"
    )  # fmt: skip
    folder = run_copy.unit_dir("step", step.index)
    skill_md = folder / "candidate" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("step edits never change this block", "steps may edit"))
    changed = load_skill(folder / "candidate")
    step.model_copy(update={"candidate": changed.hash}).write(folder / "step.json")
    result = runner.invoke(app, ["audit", str(run_copy.root)])
    assert result.exit_code == 1, result.output
    found = AuditFile.read(run_copy.audit)
    assert {f.check for f in found.findings} == {"protected-block"}
    assert found.findings[0].where == f"steps/{folder.name}/candidate/SKILL.md"
    assert "slow-update" in found.findings[0].message and "protected-block (1)" in result.output


def test_a_planted_val_prompt_in_a_proposer_answer_is_flagged(run_copy: RunDir) -> None:
    path = run_copy.unit_dir("step", 3) / "reflections.json"
    reflections = ReflectionsFile.read(path)
    prompt = VAL_PROMPT.split()
    assert len(prompt) > 12
    leaked = " ".join(prompt[1:10])  # nine words from the middle of a val prompt, reworded around
    reflections.calls[0].response += f"\nNote: the team saw that {leaked.upper()}!"
    reflections.write(path)
    found = audit(run_copy.root)
    assert [f.check for f in found.findings] == ["leak"]
    (leak,) = found.findings
    assert leak.where == "steps/step_0003/reflections.json calls[0] (analyst) response"
    assert "val task val-redis-eviction (prompt)" in leak.message
    assert leak.details["passages"][0]["text"] == " ".join(words(leaked))


def test_a_val_prompt_in_an_edit_dropped_before_the_merge_is_flagged(run_copy: RunDir) -> None:
    """An edit dropped for citing no trajectory was still the proposer's answer: the leak search reads it."""
    path = run_copy.unit_dir("step", 3) / "reflections.json"
    reflections = ReflectionsFile.read(path)
    edit = Edit(op="append", text=f"- {VAL_PROMPT}", support=["<trajectory id>"])
    reflections.model_copy(update={"dropped": [DroppedEdit(edit=edit, reason="cites nothing")]}).write(path)
    found = audit(run_copy.root)
    assert [(f.check, f.where) for f in found.findings] == [
        ("leak", "steps/step_0003/reflections.json dropped[0]")
    ]


@pytest.mark.parametrize(
    "check",
    ["contract-drift", "agent-drift", "contaminated-gate", "rejected-edit", "best-lineage", "unsealed"],
)
def test_each_planted_fault_raises_its_own_finding(run_copy: RunDir, check: str) -> None:
    # Step 5 is the demo's gated reject (under --carry screen, steps 1-3 carry their
    # candidates ungated and step 4 keeps them)
    gate_records = sorted(run_copy.unit_dir("step", 5).glob("rollouts/gate/*/*/record.json"))
    assert gate_records
    if check == "contract-drift":
        record = RolloutRecord.read(gate_records[0])
        assert record.score is not None
        record.model_copy(update={"score": record.score.model_copy(update={"contract": "f" * 64})}).write(
            gate_records[0]
        )
    elif check == "agent-drift":  # a resume after the agent CLI was upgraded: step 5 ran another version
        for path in gate_records:
            RolloutRecord.read(path).model_copy(update={"options_hash": "0" * 64}).write(path)
    elif check == "contaminated-gate":
        record = RolloutRecord.read(gate_records[-1])
        record.model_copy(update={"status": "infra_error", "score": None}).write(gate_records[-1])
    elif check == "unsealed":  # an agent process that ran unsealed (no bwrap, or --sandbox none)
        record = RolloutRecord.read(gate_records[0])
        record.model_copy(update={"sandbox": "none"}).write(gate_records[0])
    elif check == "rejected-edit":  # step 7's proposer proposes step 5's rejected edit again
        rejected = ReflectionsFile.read(run_copy.unit_dir("step", 5) / "reflections.json").edits[0]
        path = run_copy.unit_dir("step", 7) / "reflections.json"
        later = ReflectionsFile.read(path)
        later.model_copy(update={"edits": [*later.edits, rejected]}).write(path)
    else:  # best_skill/ is not the last kept version
        (run_copy.best_dir / "SKILL.md").write_text(MOCK_SKILL.joinpath("SKILL.md").read_text())
    assert UnitRecord.read(run_copy.unit_dir("step", 5) / "step.json").decision == "reject"
    assert _checks(run_copy) == {check}


def test_an_audit_needs_the_runs_suite_and_says_how_to_give_it(run_copy: RunDir, tmp_path: Path) -> None:
    config = json.loads(run_copy.config.read_text()) | {"suite": str(tmp_path / "moved")}
    run_copy.config.write_text(json.dumps(config))
    run_copy.audit.unlink()
    result = runner.invoke(app, ["audit", str(run_copy.root)])
    assert result.exit_code == 2 and "--suite PATH" in result.output
    assert not run_copy.audit.exists()  # bad input writes nothing
    result = runner.invoke(app, ["audit", str(run_copy.root), "--suite", str(MOCK_SUITE)])
    assert result.exit_code == 0, result.output


def test_leak_search_rules(tmp_path: Path) -> None:
    shared = "Check the queue backlog before you restart any of the worker pods today"
    suite = load_suite(
        write_suite(
            tmp_path / "suite",
            train=[rule_task("train-one", ["a"], prompt=f"Train prompt. {shared}.")],
            val=[
                rule_task(
                    "val-secret-task",
                    ["a"],
                    prompt=f"{shared}. The billing export double counts refunds issued after midnight UTC.",
                ),
                rule_task("v1", ["a"]),
            ],
        )
    )
    secrets = Secrets.of(suite, ["seed skill text"])
    assert secrets.unsearched_ids == ["v1"]
    # eight words of val text, however they are punctuated or escaped, are a leak; seven are not
    assert search(secrets, "so: The billing EXPORT double-counts refunds issued after\\nmidnight") is not None
    assert search(secrets, "the billing export double counts refunds issued") is None
    # text the train split holds too is not a leak, nor is the prompt template's own wording
    assert search(secrets, shared) is None
    assert search(secrets, "Read the trajectories and propose at most 4 small edits to the skill") is None
    hit = search(secrets, 'support: ["val-secret-task#r0"]')
    assert hit is not None and hit.ids == ["val-secret-task"]
    assert search(secrets, "val-secret-tasks") is None


class LeakyProposer(MockProposer):
    """A proposer that copies a val prompt into its answer: what the audit exists to catch."""

    name = "leaky"

    def propose(self, packet: EvidencePacket) -> Proposal:
        proposal = super().propose(packet)
        leak = self.suite.tasks("val")[0].prompt
        edits = [e.model_copy(update={"rationale": f"{e.rationale}; as in: {leak}"}) for e in proposal.edits]
        return proposal.model_copy(update={"edits": edits})


@pytest.fixture
def leaky() -> Iterator[str]:
    PROPOSERS.register(LeakyProposer.name, LeakyProposer)
    try:
        yield LeakyProposer.name
    finally:
        PROPOSERS.unregister(LeakyProposer.name)


def test_train_audits_at_its_end_and_a_leak_does_not_change_its_exit_code(leaky: str, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--proposer", leaky, "--tag", "leak",
         "--max-steps", "2", "--seed", "1", "--runs-dir", str(tmp_path), "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "the audit found" in result.output and "skilltune audit" in result.output
    found = AuditFile.read(RunDir(tmp_path / "leak").audit)
    leaks = [f for f in found.findings if f.check == "leak"]
    assert leaks and all("val-redis-eviction" in f.message for f in leaks)
    assert any(f.where.startswith("steps/step_0001/reflections.json edits[") for f in leaks)
    assert (tmp_path / "leak" / "TERMINAL").read_text().split(":")[0] in ("success", "no-progress")


class QuotingProposer(MockProposer):
    """The mock's edits, and two rules keyed on the first sentence of a train prompt: one of a task
    in the step's evidence (vet drops it), and one of a train task outside it, which vet cannot see."""

    name = "quoting"

    def propose(self, packet: EvidencePacket) -> Proposal:
        proposal = super().propose(packet)
        shown = [*packet.failures, *packet.successes]
        outside = next(t for t in self.suite.tasks("train") if t.id not in {s.task_id for s in shown})

        def rule(prompt: str) -> str:
            return f"- If the request says '{prompt.split('. ', maxsplit=1)[0]}', follow the timeline rules."

        quotes = [
            Edit(op="append", text=rule(outside.prompt), support=[shown[0].id]),
            Edit(op="append", text=rule(shown[0].prompt), support=[shown[0].id]),
        ]
        later = [e.model_copy(update={"rank": e.rank + 2}) for e in proposal.edits]
        return proposal.model_copy(update={"edits": [*quotes, *later]})


@pytest.fixture
def quoting() -> Iterator[str]:
    PROPOSERS.register(QuotingProposer.name, QuotingProposer)
    try:
        yield QuotingProposer.name
    finally:
        PROPOSERS.unregister(QuotingProposer.name)


def test_a_best_skill_quoting_a_train_prompt_is_a_warning_not_a_finding(quoting: str, tmp_path: Path) -> None:
    """Vet drops a rule quoting a prompt of the step's evidence; one quoting a train task outside it
    (as an epoch update, a rewrite or a run made before the guard could add) reaches the best skill,
    and the audit warns of it: train text is allowed evidence, so the run stays clean (exit 0)."""
    result = train(  # one ask a step: its packet is the batch, so "outside" is outside the batch
        MOCK_SUITE, MOCK_SKILL, tag="quote", runs_dir=str(tmp_path), max_steps=2, seed=2, proposer=quoting,
        proposals=1, **_quiet(),
    )  # fmt: skip
    assert result.kept == 1
    run = RunDir(tmp_path / "quote")
    (dropped,) = ReflectionsFile.read(run.unit_dir("step", 1) / "reflections.json").dropped
    cited = dropped.edit.support[0].split("#")[0]  # the rule quoting the task it cites
    assert dropped.reason.startswith(f"quotes train task {cited}'s prompt: '")
    cli = runner.invoke(app, ["audit", str(run.root)])
    assert cli.exit_code == 0, cli.output
    found = AuditFile.read(run.audit)
    assert found.clean and found.findings == []
    (warning,) = found.warnings
    assert warning.check == "train-quote" and warning.where == "best_skill/SKILL.md"
    quotes = warning.details["quotes"]
    suite = load_suite(MOCK_SUITE)
    for quote in quotes:
        task = suite.task(quote["task"])
        assert task.split == "train" and quote["text"] in " ".join(words(task.prompt))
    units = ", ".join(warning.details["units"])
    assert f"warning: train-quote: best_skill/SKILL.md: added by {units}" in cli.output
    assert f"(train task {quotes[0]['task']})" in " ".join(cli.output.split())
