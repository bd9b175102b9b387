"""Small builders shared by tests: suites in tmp folders, skills, runners."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
MOCK_SUITE = REPO / "examples" / "mock-demo" / "suite"
MOCK_SKILL = REPO / "examples" / "mock-demo" / "skill"
GOOD_SKILL = REPO / "examples" / "mock-demo" / "good-skill"
NULL_SUITE = REPO / "examples" / "null-demo" / "suite"
PYENV_SUITE = REPO / "examples" / "pyenv-demo"
Result = TypeVar("Result")


def write_suite(
    root: Path,
    train: list[dict[str, Any]],
    val: list[dict[str, Any]],
    test: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    cfg = {"default_mode": "checklist", "mixed_weight": 0.5, **(config or {})}
    (root / "scoring.md").write_text(f"# Scoring\n\n```json\n{json.dumps(cfg, indent=2)}\n```\n\nProse.\n")
    for name, tasks in (("train", train), ("val", val), ("test", test)):
        if tasks is not None:
            (root / f"{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return root


def rule_task(task_id: str, rules: list[str], noise: float = 0.0, **extra: Any) -> dict[str, Any]:
    """A mock task that needs ``rules`` stated in the skill."""
    return {
        "id": task_id,
        "prompt": f"Do the {task_id} thing.",
        "requires": rules,
        "failure_hints": {r: f"symptom of missing {r}" for r in rules},
        "noise": noise,
        "scoring": {"required": [*(f"PASS:{r}" for r in rules), "RESULT: solved"]},
        **extra,
    }


def write_skill(folder: Path, body: str, name: str = "demo-skill") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A test skill.\n---\n\n{body}\n")
    return folder


def growing_limit(
    attempt: Callable[[float], Result],
    reached: Callable[[Result], bool],
    limits: Sequence[float],
    what: str,
) -> Result:
    """``attempt(limit)`` with each limit in turn, until ``reached`` says the code under test got where
    the test needs it before the limit struck (started up, reached the server, ran its tool); that result.

    A test of what happens *at* a time limit (a wall limit, a stall, a call's timeout) must not pass
    without having got there, and must not fail because a loaded machine was still starting when a short
    limit struck (a different outcome, for a different reason). The first limit keeps the test quick on
    an idle machine; a longer one follows only when needed. Never reached: the test fails, saying so.
    """
    for limit in limits:
        result = attempt(limit)
        if reached(result):
            return result
    pytest.fail(
        f"{what} did not happen before any of the limits tried ({', '.join(f'{x:g}' for x in limits)} s)"
    )
