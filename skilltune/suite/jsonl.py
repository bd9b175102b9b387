"""Folder suites in skill-trainer's format: train/val/test.jsonl + scoring.md (+ rubric.py...).

``read_jsonl_suite`` parses and validates in one pass, collecting every problem
instead of stopping at the first, so ``skilltune validate`` can list them all.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from skilltune.score.base import declared_fields, parse_fields, unknown_fields
from skilltune.score.registry import scorer_class, scoring_modes
from skilltune.store import iter_tree
from skilltune.suite.base import Suite
from skilltune.suite.checks import BESIDE_SCORING, check_task
from skilltune.suite.compat import check_judge_block, check_suites, departures
from skilltune.suite.draft_review import REVIEW_FILE, review_problems
from skilltune.suite.model import REQUIRED_SPLITS, SPLITS, TRIGGER_MODE, Problem, SuiteConfig, Task
from skilltune.suite.trigger_evals import TRIGGER_EVALS_FILE, read_trigger_evals
from skilltune.validation import field_problem, field_problems

CONTRACT_FILES = ("scoring.md", "rubric.py", "judge.md")
_FENCE_OPEN = re.compile(r"^\s*```json\s*$")
_FENCE_CLOSE = re.compile(r"^\s*```\s*$")


class JsonlSuite(Suite):
    kind = "jsonl"

    def contract_files(self) -> list[tuple[str, Path]]:
        files = [(name, self.root / name) for name in CONTRACT_FILES if (self.root / name).is_file()]
        refs = self.root / "refs"
        files += [(p.relative_to(self.root).as_posix(), p) for p in iter_tree(refs, hidden=True)]
        return files

    def scoring_mode(self, task: Task) -> str:
        return task.mode(self.config.default_mode)

    def task_files(self, task: Task) -> list[tuple[str, Path]]:
        out: list[tuple[str, Path]] = []
        for rel in task.files:
            src = self.root / rel
            if src.is_dir():
                out += [(p.relative_to(self.root).as_posix(), p) for p in iter_tree(src)]
            else:
                out.append((rel, src))
        return out

    def prepare(self, task: Task, workspace: Path) -> None:
        """Copy each of the task's files into the workspace root under its basename."""
        for rel in task.files:
            src = self.root / rel
            dest = workspace / PurePosixPath(rel).name
            if src.is_dir():
                shutil.copytree(src, dest, symlinks=False, dirs_exist_ok=True)
            else:
                shutil.copyfile(src, dest)


def parse_config(scoring_md: Path, problems: list[Problem]) -> SuiteConfig | None:
    """The first fenced json block of scoring.md as a SuiteConfig (defaults when none)."""
    text = _read_text(scoring_md, problems)
    if text is None:
        return None
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _FENCE_OPEN.match(line)), None)
    if start is None:
        return SuiteConfig()
    end = next((j for j in range(start + 1, len(lines)) if _FENCE_CLOSE.match(lines[j])), None)
    if end is None:
        problems.append(
            Problem(file=str(scoring_md), line=start + 1, message="the ```json block is never closed")
        )
        return None
    block = "\n".join(lines[start + 1 : end])
    try:
        raw = json.loads(block)
    except json.JSONDecodeError as exc:
        problems.append(
            Problem(
                file=str(scoring_md),
                line=start + 1 + exc.lineno,
                message=f"config block is not valid JSON: {exc.msg}",
            )
        )
        return None
    if not isinstance(raw, dict):
        problems.append(
            Problem(file=str(scoring_md), line=start + 1, message="config block must be a JSON object")
        )
        return None
    mode = raw.get("default_mode", SuiteConfig.model_fields["default_mode"].default)
    bad_mode = isinstance(mode, str) and mode not in scoring_modes()
    if bad_mode:  # reported whatever else is wrong with the block
        problems.append(
            Problem(
                file=str(scoring_md),
                line=_key_line(lines, start, end, "default_mode"),
                message=f"config default_mode {mode!r} is not a scoring mode "
                f"(known: {', '.join(scoring_modes())})",
            )
        )
    try:
        config = SuiteConfig.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(
                Problem(
                    file=str(scoring_md),
                    line=_key_line(lines, start, end, str(err["loc"][0]) if err["loc"] else ""),
                    message=field_problem(err, model=SuiteConfig, noun="config", top="config"),
                )
            )
        if isinstance(mode, str) and not bad_mode:  # the tasks are still checked against it
            return SuiteConfig(default_mode=mode)
        return None
    if bad_mode:
        return None
    if "judge" in raw:
        problems += check_judge_block(raw["judge"], str(scoring_md), _key_line(lines, start, end, "judge"))
    return config


def _read_text(path: Path, problems: list[Problem]) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        problems.append(Problem(file=str(path), line=line, message="not UTF-8 text: save the file as UTF-8"))
        return None


def _key_line(lines: list[str], start: int, end: int, key: str) -> int:
    for i in range(start + 1, end):
        if f'"{key}"' in lines[i]:
            return i + 1
    return start + 1


def read_jsonl_suite(root: Path) -> tuple[JsonlSuite | None, list[Problem]]:
    """Parse and validate a folder suite; the suite is None when any problem was found."""
    problems: list[Problem] = []
    scoring_md = root / "scoring.md"
    config: SuiteConfig | None = None
    if not scoring_md.is_file():
        problems.append(
            Problem(
                file=str(scoring_md),
                message="missing: a suite needs scoring.md (a ```json config block, then prose)",
            )
        )
    else:
        config = parse_config(scoring_md, problems)
    # None: the config's default mode is unusable (reported): tasks without a mode of their own are
    # not checked against a mode the author did not choose.
    default_mode = config.default_mode if config else None

    seen: dict[str, str] = {}
    splits: dict[str, list[Task]] = {}
    has_trigger_evals = (root / TRIGGER_EVALS_FILE).is_file()
    for split in SPLITS:
        path = root / f"{split}.jsonl"
        if not path.is_file():
            if split in REQUIRED_SPLITS and not has_trigger_evals:
                problems.append(Problem(file=str(path), message=f"missing: a suite needs {split}.jsonl"))
            continue
        tasks = []
        content = _read_text(path, problems)
        if content is None:
            continue
        raw_lines = content.splitlines()
        for number, line in enumerate(raw_lines, start=1):
            if not line.strip():
                continue
            task = _read_task(root, path, number, line, split, default_mode, seen, problems)
            if task is not None:
                tasks.append(task)
        if not any(line.strip() for line in raw_lines):
            problems.append(
                Problem(
                    file=str(path), message="empty split: add at least one task (one JSON object per line)"
                )
            )
        splits[split] = tasks
    locations = _add_trigger_evals(root, splits, default_mode, seen, problems) if has_trigger_evals else {}
    if (root / REVIEW_FILE).is_file():  # a drafted suite: its review's decisions must be in the split files
        problems += review_problems(root, splits, complete=not any(not p.warning for p in problems))

    _check_rubric(root, problems)
    _check_symlinks(root, problems)
    if config is not None:
        tasks = [t for split_tasks in splits.values() for t in split_tasks]
        problems += check_suites(root, config, tasks) + departures(root, config, tasks)
    if any(not p.warning for p in problems) or config is None:
        return None, problems
    suite = JsonlSuite(root, root, config, splits)
    suite.locations = locations
    return suite, problems


def _add_trigger_evals(
    root: Path,
    splits: dict[str, list[Task]],
    default_mode: str | None,
    seen: dict[str, str],
    problems: list[Problem],
) -> dict[str, str]:
    """Add the trigger tasks of trigger_evals.json to ``splits``; where each lies (``file:line``)."""
    found, locations = read_trigger_evals(root, seen, problems)
    for split, tasks in found.items():
        for task in tasks:
            file, _, line = locations[task.id].rpartition(":")
            errors, warnings = scoring_problems(task.scoring, default_mode, root, task.as_json())
            problems += [Problem(file=file, line=int(line), message=m) for m in errors]
            problems += [Problem(file=file, line=int(line), message=m, warning=True) for m in warnings]
        splits[split] = [*splits.get(split, []), *tasks]
    for split in REQUIRED_SPLITS:
        if not splits.get(split) and not (root / f"{split}.jsonl").is_file():
            problems.append(
                Problem(
                    file=str(root / f"{split}.jsonl"),
                    message=f"missing: a suite needs {split} tasks: write {split}.jsonl, or add queries "
                    f"to {TRIGGER_EVALS_FILE} (every third query of each class goes to {split})",
                )
            )
    ordered = {split: splits[split] for split in SPLITS if split in splits}
    splits.clear()
    splits.update(ordered)  # in split order, whichever file gave a split its first tasks
    return locations


def _read_task(
    root: Path,
    path: Path,
    number: int,
    line: str,
    split: str,
    default_mode: str | None,
    seen: dict[str, str],
    problems: list[Problem],
) -> Task | None:
    def report(message: str) -> None:
        problems.append(Problem(file=str(path), line=number, message=message))

    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        report(f"invalid JSON: {exc.msg} (column {exc.colno})")
        return None
    if not isinstance(obj, dict):
        report(f"a task must be a JSON object, got {type(obj).__name__}")
        return None
    task, messages = check_task(obj, split, f"{path.name}:{number}", seen, suite_root=root)
    scoring = obj.get("scoring", {})
    warnings: list[str] = []
    if isinstance(scoring, dict):  # else the Task model said what it must be
        errors, warnings = scoring_problems(scoring, default_mode, root, obj)
        messages += errors
    for message in messages:
        report(message)
    for message in warnings:
        problems.append(Problem(file=str(path), line=number, message=message, warning=True))
    return task if not messages else None


def scoring_problems(
    scoring: Mapping[str, Any], default_mode: str | None, root: Path, task: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a task's ``scoring`` object: its mode, that mode's ``Fields``, and the
    fields the mode reads from the ``task`` object itself.

    ``default_mode`` is the suite's (None when the config's is unusable: a task
    naming no mode is then not checked against one the author did not choose). A field
    the mode does not read is a warning: skill-trainer ignores it, and so does skilltune.
    """
    says_trigger = task is not None and task.get("should_trigger") is not None
    mode = scoring.get("mode") or (TRIGGER_MODE if says_trigger else default_mode)
    if mode is None:
        return [], []
    cls = scorer_class(mode) if isinstance(mode, str) else None
    if cls is None:
        return [f"unknown scoring mode {mode!r} (known: {', '.join(scoring_modes())})"], []
    unknown = unknown_fields(cls, scoring)
    declared = sorted(declared_fields(cls) or ())
    warnings = [
        f"{mode} mode has no field {name!r} (its fields: {', '.join(declared) or 'none'}): it is ignored, "
        "as skill-trainer ignores it; fix the spelling or move data for backends beside 'scoring'"
        for name in unknown
    ]
    known = {k: v for k, v in scoring.items() if k not in unknown}
    try:
        parse_fields(cls, known)
    except ValidationError as exc:
        fields = {k: v for k, v in known.items() if k != "mode"}
        problems = field_problems(
            exc,
            model=cls.Fields,
            raw=fields,
            owner=f"{mode} mode",
            described=True,
            unknown_hint=BESIDE_SCORING,
        )
        return problems, warnings
    errors = cls.check_fields(known, root)
    if task is not None:
        errors += cls.check_task(task, root)
    return errors, warnings


def _check_symlinks(root: Path, problems: list[Problem]) -> None:
    """A symlink out of the suite would pull outside files into the contract hash or a workspace."""
    suite_real = root.resolve()
    for path in sorted(root.rglob("*")):
        if path.is_symlink() and not path.resolve().is_relative_to(suite_real):
            problems.append(
                Problem(
                    file=str(path),
                    message=f"symlink out of the suite ({path.resolve()}): copy the file in instead",
                )
            )


def _check_rubric(root: Path, problems: list[Problem]) -> None:
    rubric = root / "rubric.py"
    if not rubric.is_file():
        return
    source = _read_text(rubric, problems)
    if source is None:
        return
    try:
        tree = ast.parse(source, filename=str(rubric))
    except SyntaxError as exc:
        problems.append(Problem(file=str(rubric), line=exc.lineno, message=f"syntax error: {exc.msg}"))
        return
    defines_score = any(
        (isinstance(node, ast.FunctionDef) and node.name == "score")
        or (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "score" for t in node.targets)
        )
        or (isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == "score" for a in node.names))
        for node in tree.body
    )
    if not defines_score:
        problems.append(
            Problem(file=str(rubric), message="rubric.py defines no score(task, workdir, mode) function")
        )
