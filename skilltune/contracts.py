"""The data that passes from a suite to an agent to a scorer: ``Task`` and ``AgentResult``.

They sit below ``score/``, ``suite/`` and ``agents/`` in the layer order (tools/check_layers.py),
so a scorer names them without importing the suite or the agents it must not depend on. Their
old homes, ``skilltune.suite.model`` and ``skilltune.agents.base``, re-export them.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, model_validator

from skilltune.errors import UsageError

# skill-trainer's prompt variants: a task may carry prompt_cheap / prompt_full beside (or instead of) prompt.
PROMPT_VARIANTS = ("cheap", "full")
PromptVariant = Literal["cheap", "full"]
# The scoring mode of a task that says whether the skill should be loaded and names no mode itself.
TRIGGER_MODE = "trigger"
# scoring.md's ``feedback`` key: what a score may say beyond its numbers. ``full``: everything,
# expected answers included; ``no-answers``: what failed, never what was expected (no pattern,
# no checklist item, no command or its output, no free text of rubric.py, score() or the judge);
# ``none``: nothing (the analyst sees the numbers alone, not even a rubric's checks).
FeedbackPolicy = Literal["full", "no-answers", "none"]
# Validation context key: the folder a task's ``files`` must exist in (folder suites set it).
SUITE_ROOT = "suite_root"


def check_file_entry(root: Path, rel: str) -> str | None:
    """Why a ``files`` entry is unusable (missing, or escaping the suite), or None."""
    if not rel.strip():
        return f"files entry {rel!r} must be a non-empty path string"
    posix = PurePosixPath(rel)
    if posix.is_absolute() or PureWindowsPath(rel).is_absolute() or rel.startswith("~"):
        return f"files entry {rel!r} is absolute: give a path relative to the suite folder"
    if ".." in posix.parts:
        return f"files entry {rel!r} escapes the suite ('..'): keep task files under the suite folder"
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
    suite copied into the workspace root under their basename (refs/ included:
    skill-trainer keeps fixtures there; only what a task lists enters its
    workspace); ``prompt`` is the task as given to the agent, and skill-trainer's
    ``prompt_cheap`` / ``prompt_full`` (kept as extras) replace it for that
    prompt variant (``prompt_for``): a task needs at least one of the three; ``scoring`` holds
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
    prompt: str = Field(
        default="",
        pattern=r"\S",
        description="a non-empty string: the task as given to the agent",
    )
    files: Annotated[
        list[Annotated[str, AfterValidator(_file_in_suite)]], AfterValidator(_distinct_basenames)
    ] = Field(default_factory=list, description="a list of paths under the suite folder")
    scoring: dict[str, Any] = Field(
        default_factory=dict, description="an object: optional 'mode' plus that mode's fields"
    )
    # skill-creator's trigger evals: whether the skill should be loaded for this prompt (None: not said).
    should_trigger: StrictBool | None = Field(
        default=None,
        description="true or false: whether the agent should load the skill for this prompt (trigger mode)",
    )
    split: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _has_a_prompt(self) -> Task:
        extra = self.model_extra or {}
        for name in ("prompt_cheap", "prompt_full"):
            if name in extra and not (isinstance(extra[name], str) and extra[name].strip()):
                raise ValueError(f"{name!r} must be a non-empty string: the task's {name[7:]} prompt")
        if not self.prompt and not any(f"prompt_{v}" in extra for v in PROMPT_VARIANTS):
            raise ValueError(
                "missing 'prompt' (the task as given to the agent; skill-trainer's 'prompt_cheap' or "
                "'prompt_full' may stand in for it)"
            )
        return self

    def mode(self, default_mode: str) -> str:
        """The task's scoring mode: its own ``scoring.mode``, else ``trigger`` when it says whether the
        skill should be loaded (``should_trigger``), else the suite's ``default_mode``."""
        return str(
            self.scoring.get("mode") or (TRIGGER_MODE if self.should_trigger is not None else default_mode)
        )

    def prompt_for(self, variant: str) -> str | None:
        """The prompt of ``variant`` (``prompt_<variant>``, else ``prompt``), or None when it has none."""
        own = (self.model_extra or {}).get(f"prompt_{variant}")
        return own if isinstance(own, str) and own.strip() else (self.prompt or None)

    def field(self, name: str, default: Any = None) -> Any:
        """A backend- or scorer-specific field of the task object (``requires``, ``noise``...)."""
        extra = self.model_extra or {}
        return extra.get(name, default)

    def as_json(self) -> dict[str, Any]:
        """The task object as it appeared in the suite (without the split)."""
        data = self.model_dump(mode="json")
        if not self.prompt:  # a task given prompt_cheap / prompt_full only had no prompt field
            data.pop("prompt", None)
        if self.should_trigger is None:  # absent, as in the suite (and in the task's hash)
            data.pop("should_trigger", None)
        return data

    def with_split(self) -> dict[str, Any]:
        """The task object with its ``split``, as skill-trainer's task.json (and its rubrics) see it."""
        return {**self.as_json(), "split": self.split}


def variant_prompt(task: Task, variant: str, where: Path | str) -> str:
    """The prompt ``task`` gives under ``variant``; UsageError naming ``where`` (the suite) when it has none."""
    prompt = task.prompt_for(variant)
    if prompt is None:
        raise UsageError(
            f"{where}: task {task.id} has no prompt for the {variant} variant: give it "
            f"'prompt' or 'prompt_{variant}', or run with --prompt-variant "
            f"{'full' if variant == 'cheap' else 'cheap'}"
        )
    return prompt


AgentStatus = Literal["ok", "task_failed", "timeout", "infra_error"]


class Message(BaseModel):
    role: Literal["user", "assistant", "system", "tool"]
    content: str


class AgentResult(BaseModel):
    """What a backend observed. A failed rollout is data here, never an exception.

    ``status``: ``ok`` (the agent finished), ``task_failed`` (the agent itself
    ended in failure: max turns, an error result), ``timeout`` (wall limit),
    ``infra_error`` (auth, rate limit, overload, network, a crash before the
    first model turn: retried, never scored). ``events`` is the raw event
    stream; ``messages`` the agent's side of the conversation.
    """

    status: AgentStatus
    final_text: str = ""
    events: list[dict[str, Any]] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    reason: str | None = None
    log_tail: str = ""
    exit_code: int | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    cost_estimated: bool = False
    turns: int | None = None
    output_file: Path | None = Field(default=None, exclude=True)
    stalled: bool = False  # the liveness check fired: the harness requeues the rollout once
    final: bool = False  # an infra error no retry can help (a refused key, no such model): not run again
    # Whether the agent loaded the skill (trigger mode scores it); None: the backend cannot tell.
    skill_loaded: bool | None = None
