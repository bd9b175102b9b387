"""Small builders shared by tests: suites in tmp folders, skills, runners."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MOCK_SUITE = REPO / "examples" / "mock-demo" / "suite"
MOCK_SKILL = REPO / "examples" / "mock-demo" / "skill"
GOOD_SKILL = REPO / "examples" / "mock-demo" / "good-skill"
NULL_SUITE = REPO / "examples" / "null-demo" / "suite"
PYENV_SUITE = REPO / "examples" / "pyenv-demo"


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


def prompt_section(prompt: str, name: str) -> str:
    """The body of a proposer prompt's tagged section ``<name ...>`` ... ``</name>`` ("" when absent)."""
    match = re.search(rf"^<{name}(?: [^>]*)?>\n(.*?)\n</{name}>$", prompt, re.S | re.M)
    return match.group(1) if match else ""


def trajectory_blocks(prompt: str, section: str = "failed_trajectories") -> dict[str, str]:
    """The trajectories of a section of a proposer prompt: id -> the block's text."""
    body = prompt_section(prompt, section)
    return dict(re.findall(r'^<trajectory id="([^"]+)"[^>]*>\n(.*?)\n</trajectory>$', body, re.S | re.M))
