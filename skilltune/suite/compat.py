"""Where skilltune reads a skill-trainer suite differently: ``validate``'s warnings.

Every rule skilltune applies differently from skill-trainer is listed in
docs/suite-format.md ("Departures from skill-trainer"); this module warns about those
a suite's content decides, so an author knows which scores could differ. Those that depend
on a rollout (a command task's empty output) are noted in that rollout's score checks.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from skilltune.suite.judge import JudgeSettings
from skilltune.suite.model import Problem, SuiteConfig, Task
from skilltune.validation import field_problems

_SKILL_TRAINER_PASS_THRESHOLD = 0.7


def check_judge_block(block: Any, file: str, line: int) -> list[Problem]:
    """Problems with scoring.md's ``judge`` block: unknown keys warn (skill-trainer ignores them),
    bad values are errors naming what the key must hold."""
    if block is None:
        return []
    if not isinstance(block, dict):
        return [Problem(file=file, line=line, message="config judge must be an object of judge settings")]
    known = set(JudgeSettings.model_fields)
    problems = [
        Problem(
            file=file,
            line=line,
            message=f"config judge has no key {key!r} (its keys: {', '.join(sorted(known))}): it is ignored",
            warning=True,
        )
        for key in block
        if key not in known
    ]
    try:
        JudgeSettings.model_validate({k: v for k, v in block.items() if k in known})
    except ValidationError as exc:
        for message in field_problems(exc, model=JudgeSettings, noun="config judge", described=True):
            problems.append(Problem(file=file, line=line, message=message))
    return problems


def _mode(task: Task, config: SuiteConfig) -> str:
    return task.mode(config.default_mode)


def departures(root: Any, config: SuiteConfig, tasks: list[Task]) -> list[Problem]:
    """Warnings for the rules this suite meets that skilltune applies differently from skill-trainer."""
    scoring_md = str(root / "scoring.md")
    found: list[Problem] = []

    def warn(message: str, file: str = scoring_md, line: int | None = None) -> None:
        found.append(Problem(file=file, line=line, message=message, warning=True))

    modes = {_mode(t, config) for t in tasks}
    block = config.judge if isinstance(config.judge, dict) else {}
    if "judge" in modes:
        threshold = block.get("pass_threshold")
        if isinstance(threshold, int | float) and threshold != _SKILL_TRAINER_PASS_THRESHOLD:
            warn(
                f"judge.pass_threshold {threshold}: skilltune applies it to a verdict that lacks 'passed'; "
                f"skill-trainer ignores it and uses {_SKILL_TRAINER_PASS_THRESHOLD}"
            )
        if block.get("criteria_weights"):
            warn(
                "judge verdicts that lack 'passed' are judged on skilltune's weighted soft score; "
                "skill-trainer uses the judge's own 'overall' for them"
            )
    for task in tasks:
        if _mode(task, config) == "exact":
            expected = task.scoring.get("expected")
            if isinstance(expected, str) and _matches_empty(expected):
                warn(
                    f"task {task.id}: 'expected' matches an empty output, which skilltune scores 1 "
                    "and skill-trainer 0"
                )
    return found


def _matches_empty(pattern: str) -> bool:
    try:
        return re.search(pattern, "") is not None
    except re.error:
        return False


def check_suites(root: Any, config: SuiteConfig, tasks: list[Task]) -> list[Problem]:
    """skill-trainer's two-suite rule: the suites scoring.md names must have val tasks."""
    scoring_md = str(root / "scoring.md")
    val = [t for t in tasks if t.split == "val"]
    names = {str(t.field("suite") or "primary") for t in val}
    found = []
    for key in ("primary_suite", "secondary_suite"):
        name = getattr(config, key)
        if name is not None and name not in names:
            found.append(
                Problem(
                    file=scoring_md,
                    message=f"config {key} {name!r} names no val task's suite (val tasks name: "
                    f'{", ".join(sorted(names))}): give tasks "suite": "{name}" or fix the name',
                )
            )
    if config.primary_suite is not None and config.primary_suite == config.secondary_suite:
        found.append(
            Problem(file=scoring_md, message="config primary_suite and secondary_suite are the same suite")
        )
    return found
