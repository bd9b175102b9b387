"""journal.jsonl: one typed event per line (sessions, stages, units), versioned like the files."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from skilltune.runfiles.base import SCHEMA_VERSION, RunFileError, upgrade
from skilltune.validation import field_problems


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    ts: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))


class RunStart(_Event):
    event: Literal["run_start"] = "run_start"
    tag: str
    planned_rollouts: int
    per_step: int


class SessionStart(_Event):
    event: Literal["session_start"] = "session_start"
    pid: int


class SessionEnd(_Event):
    event: Literal["session_end"] = "session_end"
    rollouts: int


class Resumed(_Event):
    event: Literal["resume"] = "resume"
    units_done: int


class StageDone(_Event):
    """A stage of a unit ended: its wall time, and what it used (rollouts, the agents' or the
    proposer's tokens, proposer calls, and the judge's tokens and USD on those rollouts)."""

    event: Literal["stage"] = "stage"
    unit: str
    stage: str
    seconds: float
    rollouts: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    calls: int | None = None
    judge_tokens_in: int | None = None
    judge_tokens_out: int | None = None
    judge_cost_usd: float | None = None


class UnitEnd(_Event):
    event: Literal["unit_end"] = "unit_end"
    unit: str
    verdict: str
    candidate: str
    rollouts: int


class Crashed(_Event):
    event: Literal["crash"] = "crash"
    error: str
    traceback: str


JournalEvent = Annotated[
    RunStart | SessionStart | SessionEnd | Resumed | StageDone | UnitEnd | Crashed,
    Field(discriminator="event"),
]
_JOURNAL_EVENT: TypeAdapter[JournalEvent] = TypeAdapter(JournalEvent)


def parse_event(raw: Any, what: str) -> JournalEvent:
    """One journal line's object, checked and migrated like the other run files."""
    if not isinstance(raw, dict):
        raise RunFileError(f"{what}: expected a JSON object")
    raw = upgrade(raw, {}, what)
    try:
        return _JOURNAL_EVENT.validate_python(raw)
    except ValidationError as exc:
        raise RunFileError(f"{what}: not a journal event ({field_problems(exc, limit=1)[0]})") from None


def active_seconds(journal: Iterable[JournalEvent]) -> float:
    """Wall time over every session, each ending at its last journal event (a kill leaves no
    session_end): what the time budget counts and what reports show.

    ``resume`` writes its event before the new session's ``session_start``: it opens the new
    session, so the pause between two sessions (a night between a stop and its resume) is never
    counted as the earlier session's time."""
    total = 0.0
    start = last = None
    opened = False  # the last event was a resume: the session_start that follows is that session's
    for event in journal:
        ts = datetime.fromisoformat(event.ts)
        if isinstance(event, SessionStart | Resumed) and not (opened and isinstance(event, SessionStart)):
            if start is not None and last is not None:
                total += (last - start).total_seconds()
            start = ts
        opened = isinstance(event, Resumed)
        last = ts
    if start is not None and last is not None:
        total += (last - start).total_seconds()
    return total
