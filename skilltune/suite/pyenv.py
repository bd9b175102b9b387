"""Python env suites (SkillOpt's contract) for tasks that do not fit jsonl.

A module (a ``.py`` file, or ``env.py`` in a folder) defines::

    CONFIG = {"mixed_weight": 0.5}                      # optional, as scoring.md's block
    def tasks(split: str) -> list[dict | Task]: ...     # "train", "val", "test"
    def prepare(task: Task, workspace: Path) -> None:  # build the starting state
    def score(task: Task, workspace: Path, agent_result: AgentResult) -> dict | Score
    # score's dict: hard, soft, checks, and optionally feedback (what a person needs to fix a failure)

skilltune replaces whatever git history ``prepare`` leaves with a fresh
single-commit repository, so no history leaks into the workspace. The
module's source is part of the scoring-contract hash.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from skilltune.contracts import AgentResult
from skilltune.errors import ScoringError
from skilltune.score.base import Score, Scorer, score_from_mapping
from skilltune.score.context import ScoringContext
from skilltune.store import iter_tree
from skilltune.suite.base import Suite, load_module
from skilltune.suite.checks import check_task
from skilltune.suite.model import REQUIRED_SPLITS, SPLITS, Problem, SuiteConfig, Task
from skilltune.validation import field_problems

ENV_FILE = "env.py"
PYENV_MODE = "pyenv"
_REQUIRED = ("tasks", "prepare", "score")


class PythonSuite(Suite):
    kind = "python"

    def __init__(
        self,
        source: Path,
        module_path: Path,
        module: ModuleType,
        config: SuiteConfig,
        splits: dict[str, list[Task]],
    ):
        super().__init__(source, module_path.parent, config, splits)
        self.module_path = module_path
        self.module = module
        self._env_scorer: PythonEnvScorer | None = None

    @property
    def name(self) -> str:
        configured = (self.config.model_extra or {}).get("name")
        if configured:
            return str(configured)
        stem = self.module_path.stem
        return self.module_path.parent.resolve().name if stem == "env" else stem

    def contract_files(self) -> list[tuple[str, Path]]:
        refs = self.root / "refs"
        return [(self.module_path.name, self.module_path)] + [
            (p.relative_to(self.root).as_posix(), p) for p in iter_tree(refs, hidden=True)
        ]

    def content_files(self) -> list[tuple[str, Path]]:
        return self.contract_files()

    def scoring_mode(self, task: Task) -> str:
        return PYENV_MODE

    def scorer(self, task: Task) -> Scorer:
        if self._env_scorer is None:  # once the options are set: the context carries the contract hash
            self._env_scorer = PythonEnvScorer(self.scoring_context, self.module, self.module_path.name)
        return self._env_scorer

    def prepare(self, task: Task, workspace: Path) -> None:
        self.module.prepare(task, workspace)


class PythonEnvScorer(Scorer):
    """The env module's own ``score`` function (``module``, the file ``name``d in messages)."""

    mode = PYENV_MODE

    def __init__(self, context: ScoringContext, module: ModuleType, name: str) -> None:
        super().__init__(context)
        self.module = module
        self.name = name

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        try:
            raw = self.module.score(task, workspace, result)
        except Exception as exc:
            raise ScoringError(f"{self.name} score() raised {type(exc).__name__}: {exc}") from exc
        return score_from_mapping(
            raw,
            weight=self.context.mixed_weight,
            contract=self.context.contract,
            source=f"{self.name} score()",
            policy=self.context.feedback,
        )


def is_python_suite(path: Path) -> bool:
    return (path.is_file() and path.suffix == ".py") or (
        path.is_dir() and (path / ENV_FILE).is_file() and not (path / "train.jsonl").exists()
    )


def read_python_suite(path: Path) -> tuple[PythonSuite | None, list[Problem]]:
    module_path = path / ENV_FILE if path.is_dir() else path
    where = str(module_path)
    problems: list[Problem] = []
    try:
        module = load_module(module_path, "skilltune_env")
    except SyntaxError as exc:
        return None, [Problem(file=where, line=exc.lineno, message=f"syntax error: {exc.msg}")]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from user code is a broken env, not our exit
        return None, [
            Problem(
                file=where,
                line=_line_in(module_path, exc),
                message=f"importing it raised {type(exc).__name__}: {exc}",
            )
        ]

    for name in _REQUIRED:
        if not callable(getattr(module, name, None)):
            problems.append(
                Problem(
                    file=where,
                    message=f"defines no {name}() function (a Python env needs tasks, prepare and score)",
                )
            )
    config = SuiteConfig()
    raw_config = getattr(module, "CONFIG", None)
    if raw_config is not None:
        try:
            config = SuiteConfig.model_validate(raw_config)
        except ValidationError as exc:
            for message in field_problems(exc, model=SuiteConfig, noun="CONFIG", top="CONFIG"):
                problems.append(Problem(file=where, message=message))
    if problems:
        return None, problems

    seen: dict[str, str] = {}
    splits: dict[str, list[Task]] = {}
    for split in SPLITS:
        try:
            returned = module.tasks(split)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from user code is a broken env, not our exit
            problems.append(
                Problem(
                    file=where,
                    line=_line_in(module_path, exc),
                    message=f"tasks({split!r}) raised {type(exc).__name__}: {exc}",
                )
            )
            continue
        if returned is not None and not isinstance(returned, list | tuple):
            problems.append(
                Problem(
                    file=where,
                    message=f"tasks({split!r}) returned {type(returned).__name__}; return a list of task dicts",
                )
            )
            continue
        items = list(returned or [])
        if not items and split in REQUIRED_SPLITS:
            problems.append(Problem(file=where, message=f"empty split: tasks({split!r}) returned no tasks"))
        tasks = []
        for index, item in enumerate(items):
            task = _to_task(item, split, index, seen, where, problems)
            if task is not None:
                tasks.append(task)
        splits[split] = tasks
    if problems:
        return None, problems
    return PythonSuite(path, module_path, module, config, splits), problems


def _to_task(
    item: Any, split: str, index: int, seen: dict[str, str], where: str, problems: list[Problem]
) -> Task | None:
    label = f"tasks({split!r})[{index}]"
    obj = item.as_json() if isinstance(item, Task) else item
    if not isinstance(obj, dict):
        problems.append(Problem(file=where, message=f"{label} is a {type(item).__name__}, not a task dict"))
        return None
    task, messages = check_task(obj, split, label, seen)
    task_id = obj.get("id")
    named = f"{label} ({task_id})" if isinstance(task_id, str) and task_id else label
    problems.extend(Problem(file=where, message=f"{named}: {message}") for message in messages)
    return task


def _line_in(module_path: Path, exc: BaseException) -> int | None:
    """The deepest traceback line inside the env module, for a file:line message."""
    target = str(module_path.resolve())
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if str(Path(frame.filename).resolve()) == target:
            line = frame.lineno
    return line
