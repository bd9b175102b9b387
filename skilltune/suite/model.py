"""Task, suite config and validation problems: the data a suite is made of.

``Task`` and what it rests on live in ``skilltune.contracts`` (below the scorers in the layer
order) and are re-exported here, their first home.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from skilltune.contracts import (
    PROMPT_VARIANTS,
    SUITE_ROOT,
    TRIGGER_MODE,
    FeedbackPolicy,
    PromptVariant,
    Task,
    check_file_entry,
)

__all__ = [
    "PROMPT_VARIANTS",
    "REQUIRED_SPLITS",
    "SPLITS",
    "SUITE_ROOT",
    "TRIGGER_MODE",
    "FeedbackPolicy",
    "Problem",
    "PromptVariant",
    "SuiteConfig",
    "SuiteOptions",
    "Task",
    "check_file_entry",
    "safe_id",
]


SPLITS = ("train", "val", "test")
REQUIRED_SPLITS = ("train", "val")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_id(task_id: str) -> str:
    """The task id as a file-name component: characters outside [A-Za-z0-9._-] become ``_``."""
    return _UNSAFE.sub("_", task_id)


class SuiteConfig(BaseModel):
    """The first fenced json block of scoring.md. Unknown keys are kept."""

    model_config = ConfigDict(extra="allow")

    default_mode: str = "checklist"
    mixed_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    smoke_tools: list[str] = Field(default_factory=list)
    judge: dict[str, Any] | None = None
    max_concurrency: PositiveInt | None = None
    # skill-trainer's two-suite rule: tasks carry a "suite" name; the gate decides on the primary
    # suite's tasks, and the secondary suite can only reject a candidate (a regression test).
    primary_suite: str | None = None
    secondary_suite: str | None = None
    secondary_alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    # What scores tell the analyst about failed train rollouts (the expected answer by default).
    feedback: FeedbackPolicy = "full"


class SuiteOptions(BaseModel):
    """How a command reads a suite, beside its files: skill-trainer's prompt variant (``cheap``
    unless ``full`` is asked for) and overrides of the scoring.md judge block (``--judge-opt``).

    Both change what is run or scored: the variant changes each task's hash (rollouts made
    with the other prompt are never reused), the judge overrides change the scoring contract.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_variant: PromptVariant = "cheap"
    judge_options: dict[str, Any] = Field(default_factory=dict)


class Problem(BaseModel):
    """One validation finding, printed as ``file:line: message`` (line only for jsonl).

    A ``warning`` does not stop the suite from loading: something skilltune reads
    differently from skill-trainer, or a field it ignores."""

    file: str
    line: int | None = None
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {'warning: ' if self.warning else ''}{self.message}"
