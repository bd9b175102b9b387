"""Reflect: turn train rollouts into the evidence packet a proposer reads.

Only train-phase records enter a packet. The checks of exact, checklist and command
scores never do (they are the expected strings, the command); those of a rubric, a
Python env or the judge do: their authors write them as receipts (skill-trainer's
``symptom:<class>``, ``crit:<name>=...``), which the suite's failure_classes.md maps to
mechanisms. The analyst sees the task, the agent's output, its diff, the score's numbers
and those checks and, for a judged rollout, the judge's reasoning and evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from skilltune.errors import SkilltuneError
from skilltune.propose.model import EvidencePacket, RejectedEdit, Trajectory
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
    """The first verdict's reasoning and per-criterion evidence of a judged rollout (what skill-trainer
    feeds its editors), or "" for a rollout that was not judged."""
    path = folder / "judge.json"
    if not path.is_file():
        return ""
    try:
        verdict = JudgeFile.read(path).samples[0]
    except (RunFileError, IndexError):
        return ""
    lines = [verdict.reasoning.strip()] if verdict.reasoning.strip() else []
    lines += [f"- {c.name} {c.score:.2f}: {' '.join(c.evidence.split())}" for c in verdict.criteria]
    return "\n".join(lines)[:_FEEDBACK_LIMIT]


def failure_classes(suite: Suite) -> str:
    path = suite.root / FAILURE_CLASSES
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def trajectory(record: RolloutRecord, folder: Path, suite: Suite) -> Trajectory:
    if record.phase != "train":
        raise ValueError(f"only train rollouts are evidence, not {record.phase}")
    if record.score is None:
        raise ValueError("unscored rollouts are not evidence")
    task = suite.task(record.task_id)
    output = (folder / "output.txt").read_text(encoding="utf-8") if (folder / "output.txt").is_file() else ""
    diff = (folder / "diff.patch").read_text(encoding="utf-8") if (folder / "diff.patch").is_file() else ""
    return Trajectory(
        id=f"{record.task_id}#r{record.replicate}",
        task_id=record.task_id,
        prompt=suite.prompt(task),
        output=output,
        hard=record.score.hard,
        soft=record.score.soft,
        status=record.status,
        diff=diff[:_DIFF_LIMIT],
        feedback=judge_feedback(folder),
        checks=list(record.score.checks) if suite.scoring_mode(task) in RECEIPT_MODES else [],
    )


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
) -> EvidencePacket:
    """Failures and successes, separately, in canonical (task, replicate) order."""
    trajectories = [
        trajectory(r, folder, suite)
        for r, folder in sorted(records, key=lambda rf: (rf[0].task_id, rf[0].replicate))
        if r.score is not None
    ]
    if not trajectories:
        raise NoEvidenceError(
            f"step {step}: reflect received no scored train trajectory (all rollouts failed to run)"
        )
    return EvidencePacket(
        step=step,
        mode=mode,
        skill_files=dict(incumbent.files),
        skill_main=incumbent.main,
        failures=[t for t in trajectories if t.failed],
        successes=[t for t in trajectories if not t.failed],
        rejected=rejected,
        memory=memory,
        max_edits=max_edits,
        seed=seed,
        failure_classes=failure_classes(suite),
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
        if record.kind != "step" or record.verdict == "keep":
            continue
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
            if r.verdict != "keep"
        ]
        lines += [f"## Epoch {epoch}", "", "### Worked", *(worked or ["- nothing"]), "", "### Failed"]
        lines += [*(failed or ["- nothing"]), ""]
    return "\n".join(lines)
