"""Task, suite config and validation problems: the data a suite is made of."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PositiveInt, ValidationInfo

SPLITS = ("train", "val", "test")
REQUIRED_SPLITS = ("train", "val")
# Validation context key: the folder a task's ``files`` must exist in (folder suites set it).
SUITE_ROOT = "suite_root"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_id(task_id: str) -> str:
    """The task id as a file-name component: characters outside [A-Za-z0-9._-] become ``_``."""
    return _UNSAFE.sub("_", task_id)


def check_file_entry(root: Path, rel: str) -> str | None:
    """Why a ``files`` entry is unusable (missing, or escaping the suite), or None."""
    if not rel.strip():
        return f"files entry {rel!r} must be a non-empty path string"
    posix = PurePosixPath(rel)
    if posix.is_absolute() or PureWindowsPath(rel).is_absolute() or rel.startswith("~"):
        return f"files entry {rel!r} is absolute: give a path relative to the suite folder"
    if ".." in posix.parts:
        return f"files entry {rel!r} escapes the suite ('..'): keep task files under the suite folder"
    if posix.parts and posix.parts[0] == "refs":
        return (
            f"files entry {rel!r} is under refs/, which holds reference material and never enters a workspace"
        )
    if not posix.parts or posix == PurePosixPath("."):
        return f"files entry {rel!r} is the whole suite: list the files the agent needs"
    full = root / rel
    suite_real = root.resolve()
    if not full.exists():
        return f"files entry {rel!r} does not exist under {root}"
    if not full.resolve().is_relative_to(suite_real):
        return f"files entry {rel!r} escapes the suite through a symlink ({full.resolve()})"
    if full.is_dir():
        for inner in sorted(full.rglob("*")):
            if inner.is_symlink() and not inner.resolve().is_relative_to(suite_real):
                return (
                    f"files entry {rel!r} holds {inner.relative_to(root).as_posix()!r}, "
                    f"a symlink out of the suite ({inner.resolve()})"
                )
    return None


def _suite_root(info: ValidationInfo) -> Path | None:
    root = (info.context or {}).get(SUITE_ROOT)
    return Path(root) if root is not None else None


def _file_in_suite(rel: str, info: ValidationInfo) -> str:
    root = _suite_root(info)
    problem = check_file_entry(root, rel) if root is not None else None
    if problem:
        raise ValueError(problem)
    return rel


def _distinct_basenames(files: list[str], info: ValidationInfo) -> list[str]:
    if _suite_root(info) is None:  # only a folder suite copies files in under their basename
        return files
    first: dict[str, str] = {}
    for rel in files:
        base = PurePosixPath(rel).name
        if base in first:
            raise ValueError(
                f"files {first[base]!r} and {rel!r} would both land in the workspace as {base!r}: "
                "rename one, or list the folder that holds both"
            )
        first[base] = rel
    return files


class Task(BaseModel):
    """One scoreable task.

    ``id`` is unique across all splits of a suite; ``files`` are paths under the
    suite copied into the workspace root under their basename; ``scoring`` holds
    the optional ``mode`` plus that mode's fields (the mode's scorer validates
    those). Every other field of the jsonl object (``requires``, ``noise``, a
    scorer's extras, ...) is kept in ``model_extra`` for backends and scorers.

    Validated with ``context={SUITE_ROOT: folder}`` (as a folder suite does), each
    ``files`` entry must also exist under that folder without escaping it, stay
    out of refs/, and no two entries may share a basename. Each field's
    ``description`` says what it must hold: validation messages quote it.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1, description="a non-empty string, unique across train, val and test")
    prompt: str = Field(pattern=r"\S", description="a non-empty string: the task as given to the agent")
    files: Annotated[
        list[Annotated[str, AfterValidator(_file_in_suite)]], AfterValidator(_distinct_basenames)
    ] = Field(default_factory=list, description="a list of paths under the suite folder")
    scoring: dict[str, Any] = Field(
        default_factory=dict, description="an object: optional 'mode' plus that mode's fields"
    )
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
