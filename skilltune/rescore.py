"""Scoring a rollout again from its record folder: an ``unscored`` one, once the judge answers.

The agent's work is on disk (output.txt, diff.patch, judge_inputs.json); only the scorer
runs. The record keeps everything else as it was and adds what scoring cost.
"""

from __future__ import annotations

import json
from pathlib import Path

from skilltune.agents.base import AgentResult
from skilltune.errors import ScoringError
from skilltune.runfiles import RolloutFiles, RolloutRecord, RolloutStatus
from skilltune.score.base import Score, ScoringUsage
from skilltune.store import write_json
from skilltune.suite import Suite, Task


def rescore_record(suite: Suite, task: Task, folder: Path, record: RolloutRecord) -> RolloutRecord:
    """The record at ``folder`` scored now; raises ScorerUnavailable when the scorer's service is
    still down (the record stays as it was)."""
    output = folder / "output.txt"
    result = AgentResult(
        status=record.pending_status or "ok",
        final_text=output.read_text(encoding="utf-8") if output.is_file() else "",
        output_file=output,
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
    _restate_status(folder, status, reason, score)
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


def _restate_status(folder: Path, status: str, reason: str | None, score: Score | None) -> None:
    """conversation.json's summary, brought up to date once an unscored rollout was scored."""
    path = folder / "conversation.json"
    if not path.is_file():
        return
    messages = json.loads(path.read_text(encoding="utf-8"))
    if not messages or messages[-1].get("role") != "system":
        return
    lines = str(messages[-1].get("content", "")).splitlines()
    shown = (
        "the scorer could not score this rollout; see record.json" if status == "scoring_error" else reason
    )
    head = [f"status: {status}" + (f" ({shown})" if shown else "")]
    if score is not None:
        head.append(f"score: hard={score.hard} soft={score.soft:.3f} mixed={score.mixed:.3f}")
    rest = [line for line in lines[1:] if not line.startswith("score: ")]
    messages[-1]["content"] = "\n".join(head + rest)
    write_json(path, messages)
