"""Small builders shared by tests: suites in tmp folders, skills, stopped runs, growing limits."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from skilltune.progress import PlainReporter
    from skilltune.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
MOCK_SUITE = REPO / "examples" / "mock-demo" / "suite"
MOCK_SKILL = REPO / "examples" / "mock-demo" / "skill"
GOOD_SKILL = REPO / "examples" / "mock-demo" / "good-skill"
# the demo as it was with 16 val tasks (a run made before the val split grew resumes against it)
MOCK_SUITE_16 = REPO / "benchmarks" / "fixtures" / "mock-demo-16" / "suite"
MOCK_SKILL_16 = REPO / "benchmarks" / "fixtures" / "mock-demo-16" / "skill"
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


# A strict gate decides every step on its own: short mock runs whose steps all end.
FAST: dict[str, Any] = {"gate": "strict", "seed": 0}


def quiet() -> PlainReporter:
    from skilltune.progress import PlainReporter

    return PlainReporter(quiet=True)


def tree(root: Path) -> list[str]:
    """Every path under ``root``, relative and sorted: what a refused command must leave unchanged."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def stopped_run(runs: Path, tag: str, max_steps: int, suite: Path = MOCK_SUITE, **settings: Any) -> RunDir:
    """A mock run of ``max_steps`` steps stopped by a STOP file after step 1."""
    from skilltune.progress import PlainReporter
    from skilltune.rundir import RunDir
    from skilltune.training import train

    class StopAfterStep1(PlainReporter):
        """Creates the run's STOP file when step 1 is reported: the run stops before step 2."""

        def line(self, text: str) -> None:
            if text.startswith("step 1 "):
                (runs / tag / "STOP").write_text("")

    run = RunDir(runs / tag)
    result = train(
        suite,
        settings.pop("skill", MOCK_SKILL),
        tag=tag,
        runs_dir=str(runs),
        max_steps=max_steps,
        reporter=StopAfterStep1(quiet=True),
        **{**FAST, **settings},
    )
    assert result.state == "stopped", result.reason
    assert result.steps == 1
    return run


def prompt_section(prompt: str, name: str) -> str:
    """The body of a proposer prompt's tagged section ``<name ...>`` ... ``</name>`` ("" when absent)."""
    match = re.search(rf"^<{name}(?: [^>]*)?>\n(.*?)\n</{name}>$", prompt, re.S | re.M)
    return match.group(1) if match else ""


def trajectory_blocks(prompt: str, section: str = "failed_trajectories") -> dict[str, str]:
    """The trajectories of a section of a proposer prompt: id -> the block's text."""
    body = prompt_section(prompt, section)
    return dict(re.findall(r'^<trajectory id="([^"]+)"[^>]*>\n(.*?)\n</trajectory>$', body, re.S | re.M))
