"""audit.json (what ``skilltune audit`` found in a run) and findings.json (where the run's findings
entry was appended, so that no resume or re-run of the end appends it twice)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, Field

from skilltune.runfiles.base import Migration, OldRunFileError, RunFile

Check = Literal[
    "leak",
    "best-lineage",
    "protected-block",
    "contract-drift",
    "agent-drift",
    "rejected-edit",
    "contaminated-gate",
    "unsealed",
]
CHECKS: tuple[Check, ...] = get_args(Check)
# Checks that warn: what they find is allowed (train text is evidence), worth a look, and leaves
# the run clean. Kept out of ``checks``, which a skilltune that predates them would refuse to read.
Caution = Literal["train-quote"]


FIRST_VERSION = 3  # audit.json and findings.json first exist in run schema 3


def _predating(name: str, fix: str) -> dict[int, Migration]:
    """Refusals for versions before the file existed: such a file was not written by skilltune."""

    def refuse(raw: dict[str, Any]) -> dict[str, Any]:
        raise OldRunFileError(f"{name} claims a run schema from before {name} existed: {fix}")

    return dict.fromkeys(range(1, FIRST_VERSION), refuse)


class AuditFinding(BaseModel):
    """One thing the audit found: which check, where (a path relative to the run directory, with
    the part of the file), what, and the details a report can show."""

    check: Check | Caution
    where: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class AuditFile(RunFile):
    """audit.json: every check's findings. ``clean`` iff there are none; ``warnings`` (the
    ``Caution`` checks' findings) leave a run clean; ``notes`` say what the audit could not check
    (a task id too short to search, a suite that changed since the run)."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = _predating(
        "audit.json", "delete it and run `skilltune audit RUNDIR` to write it again"
    )
    OMIT_WHEN_EMPTY = ("warnings",)

    clean: bool
    checks: list[Check]
    findings: list[AuditFinding] = Field(default_factory=list)
    warnings: list[AuditFinding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    searched: dict[str, int] = Field(default_factory=dict)  # documents, passages and ids searched


class FindingsTarget(BaseModel):
    path: str  # absolute
    at: str  # ISO time of the append


class FindingsRecord(RunFile):
    """findings.json: the run's entry id (also written into each findings file as a marker) and
    the files it was appended to."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = _predating(
        "findings.json", "delete it (the markers in the findings files still prevent duplicates)"
    )

    run_id: str
    appended: list[FindingsTarget] = Field(default_factory=list)

    def has(self, path: str) -> bool:
        return any(t.path == path for t in self.appended)
