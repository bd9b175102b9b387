"""conversation.json: the task as given to the agent, the agent's side, and the harness's summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skilltune.agents.base import AgentResult, Message
from skilltune.score.base import Score
from skilltune.store import write_json

_SUMMARY_DIFF_CHARS = 4000
_SCORING_ERROR = "the scorer could not score this rollout; see record.json"


def conversation(
    prompt: str, result: AgentResult, status: str, reason: str | None, score: Score | None, diff: str
) -> list[dict[str, Any]]:
    """user: the task as given; assistant: the agent's side; system: the harness's summary.

    No reference answer goes in here: the summary has the score's numbers, not its checks.
    """
    messages = [Message(role="user", content=prompt), *result.messages]
    if not result.messages and result.final_text:
        messages.append(Message(role="assistant", content=result.final_text))
    lines = _status_lines(status, reason, score)
    changed = sum(1 for line in diff.splitlines() if line.startswith("diff --git "))
    lines.append(f"the agent changed {changed} file(s)" if changed else "the agent changed no files")
    if diff:
        shown = diff[:_SUMMARY_DIFF_CHARS]
        lines.append(shown + ("\n[diff truncated]" if len(diff) > len(shown) else ""))
    messages.append(Message(role="system", content="\n".join(lines)))
    return [json.loads(m.model_dump_json()) for m in messages]


def _status_lines(status: str, reason: str | None, score: Score | None) -> list[str]:
    # A scoring error's reason can quote the scorer (a command, a rubric's message): not for the agent's side.
    shown = reason if status != "scoring_error" else _SCORING_ERROR
    lines = [f"status: {status}" + (f" ({shown})" if shown else "")]
    if score is not None:
        lines.append(f"score: hard={score.hard} soft={score.soft:.3f} mixed={score.mixed:.3f}")
    return lines


def restate_status(folder: Path, status: str, reason: str | None, score: Score | None) -> None:
    """conversation.json's summary, brought up to date once an unscored rollout was scored."""
    path = folder / "conversation.json"
    if not path.is_file():
        return
    messages = json.loads(path.read_text(encoding="utf-8"))
    if not messages or messages[-1].get("role") != "system":
        return
    lines = str(messages[-1].get("content", "")).splitlines()
    rest = [line for line in lines[1:] if not line.startswith("score: ")]
    messages[-1]["content"] = "\n".join(_status_lines(status, reason, score) + rest)
    write_json(path, messages)
