"""Task, suite config and validation problems: the data a suite is made of."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

SPLITS = ("train", "val", "test")
REQUIRED_SPLITS = ("train", "val")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_id(task_id: str) -> str:
    """The task id as a file-name component: characters outside [A-Za-z0-9._-] become ``_``."""
    return _UNSAFE.sub("_", task_id)


class Task(BaseModel):
    """One scoreable task.

    ``id`` is unique across all splits of a suite; ``files`` are paths under the
    suite copied into the workspace root under their basename; ``scoring`` holds
    the optional ``mode`` plus that mode's fields. Every other field of the jsonl
    object (``requires``, ``noise``, a scorer's extras, ...) is kept in
    ``model_extra`` for backends and scorers.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str
    prompt: str
    files: list[str] = Field(default_factory=list)
    scoring: dict[str, Any] = Field(default_factory=dict)
    split: str = Field(default="", exclude=True)

    def field(self, name: str, default: Any = None) -> Any:
        """A backend- or scorer-specific field of the task object (``requires``, ``noise``...)."""
        extra = self.model_extra or {}
        return extra.get(name, default)

    def as_json(self) -> dict[str, Any]:
        """The task object as it appeared in the suite (without the split)."""
        return self.model_dump(mode="json")


class SuiteConfig(BaseModel):
    """The first fenced json block of scoring.md. Unknown keys are kept."""

    model_config = ConfigDict(extra="allow")

    default_mode: str = "checklist"
    mixed_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    smoke_tools: list[str] = Field(default_factory=list)
    judge: dict[str, Any] | None = None
    max_concurrency: PositiveInt | None = None


class Problem(BaseModel):
    """One validation finding, printed as ``file:line: message`` (line only for jsonl)."""

    file: str
    line: int | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"
