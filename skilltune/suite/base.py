"""The Suite: tasks by split, its config, scorers, and the hashes that pin it down."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from pydantic import ValidationError

from skilltune.contracts import variant_prompt
from skilltune.errors import UsageError
from skilltune.score.base import Scorer
from skilltune.score.context import ScoringContext
from skilltune.score.registry import scorer_class
from skilltune.skill import Candidate
from skilltune.store import canonical_json, iter_tree
from skilltune.suite.catalogue import catalogue_hash, read_catalogue
from skilltune.suite.judge import JudgeSettings, contract_overrides, judge_block, judge_settings
from skilltune.suite.model import SPLITS, SuiteConfig, SuiteOptions, Task
from skilltune.validation import field_problems

# Task fields the judge reads beside ``scoring`` (skill-trainer's places): part of the contract.
JUDGE_TASK_FIELDS = ("reference", "reference_text", "judge_inputs")

# Strings shorter than this are too common to call a leak when found in a workspace.
_MIN_REFERENCE_LEN = 8


def _digest_update(digest: Any, name: str, data: bytes) -> None:
    """Frame each item (name, length, bytes) so concatenations cannot collide."""
    digest.update(name.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0")
    digest.update(data)


_LOAD_LOCK = threading.RLock()  # rollouts score in worker threads; a module loads once, bytecode flag intact


def load_module(path: Path, prefix: str) -> ModuleType:
    """Import a suite's Python file under a unique module name (no sys.path changes)."""
    with _LOAD_LOCK:
        return _load_module(path, prefix)


def _load_module(path: Path, prefix: str) -> ModuleType:
    name = f"{prefix}_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Loading a suite must write nothing, not even __pycache__ next to the user's file.
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.dont_write_bytecode = saved
    return module


class Suite(ABC):
    """A loaded, valid task suite.

    ``root`` is the folder that holds the suite (for a Python env: the module's
    folder); ``contract_hash`` pins the scoring contract, ``content_hash`` the
    whole suite (prompts and files included). Both are computed once, after
    ``configure`` set the ``options`` a command reads the suite with (the prompt
    variant, judge overrides).
    """

    kind: str

    def __init__(self, source: Path, root: Path, config: SuiteConfig, splits: dict[str, list[Task]]):
        self.source = source
        self.root = root
        self.config = config
        self.splits = splits
        self._by_id = {t.id: t for tasks in splits.values() for t in tasks}
        self._scorers: dict[str, Scorer] = {}
        self._rubric: ModuleType | None = None
        self.options = SuiteOptions()
        # task id -> "file:line" for tasks read from somewhere other than <split>.jsonl (trigger_evals.json)
        self.locations: dict[str, str] = {}

    def configure(self, options: SuiteOptions) -> Suite:
        """Read the suite with ``options``; refuses judge overrides the judge cannot take (UsageError)."""
        if "contract_hash" in self.__dict__ and options != self.options:
            raise RuntimeError("a suite's options are set before its hashes are computed")
        if options.judge_options:
            try:
                judge_settings(self.config.judge, options.judge_options)
            except ValidationError as exc:
                problems = "; ".join(
                    field_problems(exc, model=JudgeSettings, noun="judge option", top="judge")
                )
                raise UsageError(f"--judge-opt: {problems}") from None
        self.options = options
        return self

    @property
    def judge(self) -> JudgeSettings:
        """The judge's settings: scoring.md's block with the ``--judge-opt`` overrides."""
        return judge_settings(self.config.judge, self.options.judge_options)

    def prompt(self, task: Task) -> str:
        """The prompt the agent gets for ``task`` under the suite's prompt variant."""
        return variant_prompt(task, self.options.prompt_variant, self.source)

    @property
    def name(self) -> str:
        configured = (self.config.model_extra or {}).get("name")
        return str(configured) if configured else self.root.resolve().name

    def tasks(self, split: str) -> list[Task]:
        if split not in SPLITS:
            raise UsageError(f"unknown split {split!r}: use train, val or test")
        tasks = self.splits.get(split) or []
        if not tasks:
            raise UsageError(f"{self.source}: the suite has no {split} tasks ({split}.jsonl)")
        return tasks

    def has_split(self, split: str) -> bool:
        return bool(self.splits.get(split))

    def task(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise UsageError(f"{self.source}: no task with id {task_id!r}") from None

    def all_tasks(self) -> list[Task]:
        return [t for split in SPLITS for t in self.splits.get(split, [])]

    # --- hashes -----------------------------------------------------------------------------
    @abstractmethod
    def contract_files(self) -> list[tuple[str, Path]]:
        """(name, path) of every file in the scoring contract, in a fixed order."""

    @cached_property
    def contract_hash(self) -> str:
        """sha256 over the contract files and the scoring fields of every task."""
        digest = hashlib.sha256()
        for name, path in self.contract_files():
            _digest_update(digest, name, path.read_bytes())
        scoring = [
            [t.split, t.id, t.scoring, *([judged] if (judged := judge_fields(t)) else []), *_trigger(t)]
            for t in sorted(self.all_tasks(), key=_task_key)
        ]
        _digest_update(digest, "tasks.scoring", canonical_json(scoring).encode("utf-8"))
        overrides = contract_overrides(self.options.judge_options)
        if overrides:  # the judge asked for on the command line is part of what scored
            _digest_update(digest, "judge.overrides", canonical_json(overrides).encode("utf-8"))
        return digest.hexdigest()

    @cached_property
    def content_hash(self) -> str:
        """sha256 over everything that defines the suite; a change here ends a training run."""
        digest = hashlib.sha256()
        _digest_update(digest, "contract", self.contract_hash.encode())
        for name, path in self.content_files():
            _digest_update(digest, name, path.read_bytes())
        tasks = [[t.split, t.as_json()] for t in sorted(self.all_tasks(), key=_task_key)]
        _digest_update(digest, "tasks", canonical_json(tasks).encode("utf-8"))
        return digest.hexdigest()

    def content_files(self) -> list[tuple[str, Path]]:
        return [(p.relative_to(self.root).as_posix(), p) for p in iter_tree(self.root)]

    @cached_property
    def catalogue(self) -> tuple[Candidate, ...]:
        """The skills installed beside the candidate in every rollout (``catalogue/``; see
        skilltune/suite/catalogue.py); empty for a suite without one."""
        return read_catalogue(self.root)[0]

    def task_hash(self, task: Task) -> str:
        """sha256 of one task: its object and the content of the files it brings (and the
        suite's skill catalogue, which every rollout of it installs)."""
        digest = hashlib.sha256()
        _digest_update(digest, "task", canonical_json(task.as_json()).encode("utf-8"))
        if self.catalogue:  # only then: a suite without one keeps the task hashes it had
            _digest_update(digest, "catalogue", catalogue_hash(self.catalogue).encode())
        if self.options.prompt_variant != "cheap":  # another prompt, and rubrics see the variant
            _digest_update(digest, "prompt_variant", self.options.prompt_variant.encode())
        for name, path in self.task_files(task):
            _digest_update(digest, name, path.read_bytes())
        return digest.hexdigest()

    def task_files(self, task: Task) -> list[tuple[str, Path]]:
        return []

    # --- workspaces and scoring -------------------------------------------------------------
    @abstractmethod
    def prepare(self, task: Task, workspace: Path) -> None:
        """Put the task's starting state into ``workspace`` (and nothing else)."""

    @abstractmethod
    def scoring_mode(self, task: Task) -> str: ...

    @cached_property
    def scoring_context(self) -> ScoringContext:
        """What this suite's scorers know of it (read once its options are set: the contract hash
        depends on them)."""
        return ScoringContext(
            root=self.root,
            contract=self.contract_hash,
            mixed_weight=self.config.mixed_weight,
            feedback=self.config.feedback,
            prompt_variant=self.options.prompt_variant,
            judge=MappingProxyType(judge_block(self.config.judge, self.options.judge_options)),
            rubric=self.rubric_module,
        )

    def scorer(self, task: Task) -> Scorer:
        mode = self.scoring_mode(task)
        if mode not in self._scorers:
            cls = scorer_class(mode)
            if cls is None:
                raise UsageError(f"{self.source}: task {task.id} uses unknown scoring mode {mode!r}")
            self._scorers[mode] = cls(self.scoring_context)
        return self._scorers[mode]

    def preflight(self, tasks: Iterable[Task]) -> None:
        """Refuse (UsageError) to start work no rollout of ``tasks`` could be scored in (a judge with
        no key or no client): checked before anything is spent."""
        for mode in sorted({self.scoring_mode(t) for t in tasks}):
            task = next(t for t in tasks if self.scoring_mode(t) == mode)
            self.scorer(task).preflight()

    def rubric_module(self) -> ModuleType:
        with _LOAD_LOCK:
            if self._rubric is None:
                self._rubric = load_module(self.root / "rubric.py", "skilltune_rubric")
            return self._rubric

    # --- leakage ----------------------------------------------------------------------------
    def reference_strings(self, task: Task) -> list[str]:
        """Text that must never appear in a workspace: the suite's path, scoring values, and the
        judge's inline reference."""
        found = [str(self.root.resolve())]
        found += [s for s in _strings(task.scoring) if len(s) >= _MIN_REFERENCE_LEN]
        reference = task.field("reference_text")
        if isinstance(reference, str) and len(reference.strip()) >= _MIN_REFERENCE_LEN:
            found.append(reference.strip())
        return found

    def reference_hashes(self, task: Task | None = None) -> set[str]:
        """sha256 of every contract file: a workspace file with one of these is a leak, unless
        ``task`` lists it in its ``files`` (its input, such as a fixture under refs/)."""
        given = {p.resolve() for _, p in self.task_files(task)} if task is not None else set()
        return {
            hashlib.sha256(p.read_bytes()).hexdigest()
            for _, p in self.contract_files()
            if p.resolve() not in given
        }


def judge_fields(task: Task) -> dict[str, Any]:
    """The judge's fields of ``task`` (reference, reference_text, judge_inputs) that it gives."""
    extra = task.model_extra or {}
    return {name: extra[name] for name in JUDGE_TASK_FIELDS if name in extra}


def _trigger(task: Task) -> list[dict[str, bool]]:
    """The expected load decision, part of the contract when the task gives one (absent: nothing, so
    the hashes of suites without trigger tasks are what they were)."""
    return [] if task.should_trigger is None else [{"should_trigger": task.should_trigger}]


def _task_key(task: Task) -> tuple[int, str]:
    return (SPLITS.index(task.split) if task.split in SPLITS else len(SPLITS), task.id)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "mode":
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
