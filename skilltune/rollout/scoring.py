"""Scoring a finished rollout: in its workspace, or again from its record folder.

In the workspace, skill-trainer's ``task.json`` (the task with its split) sits beside
``output.txt`` for the scorer only: written after the agent exited and its diff was saved,
removed once scored. Again from the record folder: an ``unscored`` rollout, once the judge
answers; the agent's work is on disk (output.txt, diff.patch, judge_inputs.json), only the
scorer runs, and the record keeps everything else as it was and adds what scoring cost.
"""

from __future__ import annotations

import json
from pathlib import Path

from skilltune.agents.base import AgentResult
from skilltune.errors import ScoringError
from skilltune.rollout.conversation import restate_status
from skilltune.runfiles import RolloutFiles, RolloutRecord, RolloutStatus
from skilltune.score.base import Score, Scored, ScoringUsage
from skilltune.store import write_json
from skilltune.suite import Suite, Task


def score_in_workspace(
    suite: Suite, task: Task, workspace: Path, result: AgentResult, folder: Path
) -> Scored:
    """Score a rollout whose agent has exited, with task.json in its workspace for the scorer's eyes only."""
    task_json = workspace / "task.json"
    task_json.write_text(json.dumps(task.with_split(), indent=2), encoding="utf-8")
    try:
        return suite.scorer(task).score_rollout(task, workspace, result, folder)
    finally:
        task_json.unlink(missing_ok=True)


def rescore_record(suite: Suite, task: Task, folder: Path, record: RolloutRecord) -> RolloutRecord:
    """The record at ``folder`` scored now; raises ScorerUnavailable when the scorer's service is
    still down (the record stays as it was)."""
    output = folder / "output.txt"
    result = AgentResult(
        status=record.pending_status or "ok",
        final_text=output.read_text(encoding="utf-8") if output.is_file() else "",
        output_file=output,
        skill_loaded=record.skill_loaded,
    )
    status: RolloutStatus = record.pending_status or "ok"
    reason = None
    score: Score | None = None
    usage: ScoringUsage | None = None
    try:
        scored = suite.scorer(task).rescore(task, folder, result)
        score, usage = scored.score, scored.usage
    except ScoringError as exc:
        status, reason, usage = "scoring_error", str(exc), getattr(exc, "usage", None)
    if score is not None:
        write_json(folder / "score.json", score.file_json())
    restate_status(folder, status, reason, score)
    updated = record.model_copy(
        update={
            "status": status,
            "reason": reason,
            "score": score,
            "pending_status": None,
            "judge": add_usage(record.judge, usage),
            "files": RolloutFiles(score="score.json" if score is not None else None),
        }
    )
    updated.write(folder / "record.json")
    return updated


def add_usage(before: ScoringUsage | None, now: ScoringUsage | None) -> ScoringUsage | None:
    """What a scorer spent over every scoring of a rollout (a failed one, then a re-judge)."""
    if before is None or now is None:
        return now or before
    return now.model_copy(
        update={
            "calls": before.calls + now.calls,
            "tokens_in": before.tokens_in + now.tokens_in,
            "tokens_out": before.tokens_out + now.tokens_out,
            "cost_usd": round(before.cost_usd + now.cost_usd, 6),
            "cached": before.cached and now.cached,
        }
    )
