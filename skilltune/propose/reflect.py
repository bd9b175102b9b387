"""Reflect: turn train rollouts into the evidence packet a proposer reads.

Only train-phase records enter a packet: the feedback of val and test scores never leaves
the gate. The analyst sees the task, the agent's output, its diff, the score's numbers and
the scorer's feedback (score.json's ``feedback``: the expected answer, the missing items, the
failing command's output, the judge's evidence, as far as the suite's ``feedback`` policy
allows). The checks of exact, checklist and command scores never enter (the feedback says the
same in words); those of a rubric, a Python env or the judge do, unless the policy is
``none``: their authors write them as receipts (skill-trainer's ``symptom:<class>``,
``crit:<name>=...``), which the suite's failure_classes.md maps to mechanisms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from skilltune.errors import SkilltuneError
from skilltune.judge.verdict import verdict_feedback
from skilltune.proposal import Component, EvidencePacket, RejectedEdit, Trajectory, TriggerCase
from skilltune.propose.groups import expected_text, failure_groups, failure_keys, summary
from skilltune.rollout.tally import unit_of
from skilltune.runfiles import JudgeFile, RolloutRecord, RunFileError, UnitRecord
from skilltune.skill import Candidate
from skilltune.suite import Suite

_DIFF_LIMIT = 20_000


class NoEvidenceError(SkilltuneError):
    """Reflect received no scored train trajectory: an error, never "0 edits"."""

    exit_code = 3


RECEIPT_MODES = ("rubric", "judge", "pyenv")  # modes whose checks are written as receipts, not answers
FAILURE_CLASSES = "failure_classes.md"  # skill-trainer's symptom -> mechanism guide for the proposer
_FEEDBACK_LIMIT = 3000


def judge_feedback(folder: Path) -> str:
    """The first verdict's reasoning and per-criterion evidence of a judged rollout, or "" for a
    rollout that was not judged: the feedback of a record written before scores carried theirs."""
    path = folder / "judge.json"
    if not path.is_file():
        return ""
    try:
        verdict = JudgeFile.read(path).samples[0]
    except (RunFileError, IndexError):
        return ""
    return verdict_feedback(verdict)[:_FEEDBACK_LIMIT]


def scorer_feedback(record: RolloutRecord, folder: Path, suite: Suite, mode: str) -> str:
    """What the scorer said about a train rollout (its score's feedback, as the suite's policy let it)."""
    assert record.score is not None
    if record.score.feedback or suite.config.feedback != "full" or mode != "judge":
        return record.score.feedback
    return judge_feedback(folder)  # a judged record of run schema 6 or older


def failure_classes(suite: Suite) -> str:
    path = suite.root / FAILURE_CLASSES
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def trajectory_id(record: RolloutRecord) -> str:
    """``<task id>#r<replicate>``; in a run with several agents ``<label>/<task id>#r<replicate>``
    (two agents run the same task and replicate)."""
    return f"{unit_of(record)}#r{record.replicate}"


def _order(item: tuple[RolloutRecord, Path]) -> tuple[str, str, int]:
    """Canonical evidence order: task, then agent (several agents), then replicate."""
    return (item[0].task_id, item[0].target or "", item[0].replicate)


def trajectory(record: RolloutRecord, folder: Path, suite: Suite) -> Trajectory:
    if record.phase != "train":
        raise ValueError(f"only train rollouts are evidence, not {record.phase}")
    if record.score is None:
        raise ValueError("unscored rollouts are not evidence")
    task = suite.task(record.task_id)
    mode = suite.scoring_mode(task)
    receipts = mode in RECEIPT_MODES and suite.config.feedback != "none"
    output = (folder / "output.txt").read_text(encoding="utf-8") if (folder / "output.txt").is_file() else ""
    diff = (folder / "diff.patch").read_text(encoding="utf-8") if (folder / "diff.patch").is_file() else ""
    return Trajectory(
        id=trajectory_id(record),
        task_id=record.task_id,
        agent=record.target,
        prompt=suite.prompt(task),
        output=output,
        hard=record.score.hard,
        soft=record.score.soft,
        status=record.status,
        diff=diff[:_DIFF_LIMIT],
        mode=mode,
        feedback=scorer_feedback(record, folder, suite, mode),
        checks=list(record.score.checks) if receipts else [],
        failure_keys=failure_keys(record, task, suite, output),
        expected=expected_text(task, suite),
    )


def trigger_cases(records: list[tuple[RolloutRecord, Path]], suite: Suite) -> list[TriggerCase]:
    """The load decisions of the train rollouts of tasks that say ``should_trigger`` (rollouts with
    no decision left out), in (task, replicate) order: the description's proposer's evidence."""
    cases = []
    for record, _ in sorted(records, key=_order):
        if record.phase != "train" or record.skill_loaded is None:
            continue
        task = suite.task(record.task_id)
        if task.should_trigger is None:
            continue
        case = TriggerCase(
            id=trajectory_id(record), task_id=record.task_id, prompt=suite.prompt(task),
            should_trigger=task.should_trigger, loaded=record.skill_loaded,
        )  # fmt: skip
        cases.append(case)
    return cases


def build_packet(
    *,
    step: int,
    mode: Literal["patch", "rewrite"],
    incumbent: Candidate,
    records: list[tuple[RolloutRecord, Path]],
    suite: Suite,
    rejected: list[RejectedEdit],
    memory: str,
    max_edits: int,
    seed: int,
    component: Component = "body",
) -> EvidencePacket:
    """Failures and successes, separately, in canonical (task, replicate) order; the trigger
    tasks' load decisions (``trigger_cases``) beside them. In a run with several agents each
    trajectory names the agent that ran it (its ``agent`` and id), so the proposer can tell an
    agent's failure from another's."""
    trajectories = [
        trajectory(r, folder, suite) for r, folder in sorted(records, key=_order) if r.score is not None
    ]
    if not trajectories:
        raise NoEvidenceError(
            f"step {step}: reflect received no scored train trajectory (all rollouts failed to run)"
        )
    failed = [t for t in trajectories if t.failed]
    return EvidencePacket(
        step=step,
        mode=mode,
        summary=summary(failure_groups(failed), len(failed), len(trajectories)),
        skill_files=dict(incumbent.files),
        skill_main=incumbent.main,
        failures=failed,
        successes=[t for t in trajectories if not t.failed],
        rejected=rejected,
        memory=memory,
        max_edits=max_edits,
        seed=seed,
        failure_classes=failure_classes(suite),
        component=component,
        triggers=trigger_cases(records, suite),
    )


GATE_DECISIONS = ("accept", "reject")  # decided on val: the proposer learns the outcome, never the figures


def outcome(record: UnitRecord) -> str:
    """What the proposer may learn of a unit's verdict: a gate's decision without its val figures;
    the reason of a lint, screen (train figures), repeat or empty discard."""
    if record.decision in GATE_DECISIONS:
        return "kept by the gate on val" if record.verdict == "keep" else "rejected by the gate on val"
    return f"{record.decision}: {record.reason}"


def rejected_buffer(done: list[UnitRecord], limit: int = 12) -> list[RejectedEdit]:
    """The latest edits not kept, with what decided them (never a val figure), for the next proposer prompt."""
    out = []
    for record in done:
        if record.kind != "step" or record.verdict != "discard":
            continue  # a carried candidate is not rejected: the next step builds on it
        evidence = outcome(record)
        texts = record.edit_texts or [""] * len(record.edits)
        out += [
            RejectedEdit(step=record.index, edit=edit, text=text, evidence=evidence)
            for edit, text in zip(record.edits, texts, strict=False)
        ]
    return out[-limit:]


def render_memory(done: list[UnitRecord]) -> str:
    """META.md, the optimizer memory: what worked and what failed, by epoch.

    Read by the proposer, never deployed with the skill; rebuilt from the unit records. Val figures
    stay out of it (the gate's outcome is told, not its figures).
    """
    lines = ["# Optimizer memory", "", "Read by the proposer; never part of the skill.", ""]
    for epoch in sorted({r.epoch for r in done}):
        units = [r for r in done if r.epoch == epoch]
        worked = [
            f"- {r.kind} {r.index}: {'; '.join(r.edits)} ({outcome(r)})" for r in units if r.verdict == "keep"
        ]
        failed = [
            f"- {r.kind} {r.index}: {'; '.join(r.edits) or '(no edit)'} ({outcome(r)})"
            for r in units
            if r.verdict == "discard"
        ]
        # a step carried on ungated did not fail: the next step built on it, a later gate decided its edits
        carried = [f"- {r.kind} {r.index}: {'; '.join(r.edits)} ({r.reason})" for r in units if r.carried_on]
        lines += [f"## Epoch {epoch}", "", "### Worked", *(worked or ["- nothing"]), "", "### Failed"]
        lines += [*(failed or ["- nothing"]), ""]
        if carried:
            lines += ["### Carried on ungated (built on by the next step, gated later)", *carried, ""]
    return "\n".join(lines)
