"""A Python env suite: tasks that need a small repository with a stubbed function.

skilltune calls ``tasks(split)``, then ``prepare(task, workspace)`` to build each
rollout's starting repository (skilltune turns it into a fresh single-commit git
repo), and ``score(task, workspace, agent_result)`` after the agent ran. The hidden
checks live here, never in the workspace.

The mock agent reads each task's ``requires``/``match_regex``/``failure_hints``
(rules the skill must state); when it "solves" a task it writes ``mock_writes``
into the workspace, standing in for a real agent's edit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

CONFIG = {"name": "pyenv-demo", "mixed_weight": 0.5}

_RULES: dict[str, dict[str, Any]] = {
    "run-the-tests": {
        "regex": ["\\b(run|execute)\\b", "\\btests?\\b"],
        "hint": "the change was handed back without anyone executing the project's checks; it fails on the first edge case",
    },
    "keep-the-signature": {
        "regex": ["signature|parameters|arguments", "keep|preserve|unchanged|do not change"],
        "hint": "callers broke because the function now takes different parameters than before",
    },
}


def _task(task_id: str, module: str, func: str, stub_sig: str, prompt: str, solution: str, checks: list[str], rules: list[str]) -> dict[str, Any]:
    return {
        "id": task_id,
        "prompt": prompt,
        "module": module,
        "func": func,
        "stub_sig": stub_sig,
        "checks": checks,
        "requires": rules,
        "match_regex": {r: _RULES[r]["regex"] for r in rules},
        "failure_hints": {r: _RULES[r]["hint"] for r in rules},
        "noise": 0.05,
        "mock_writes": {f"{module}.py": solution},
    }


_TASKS = {
    "train": [
        _task(
            "train-slugify", "textkit", "slugify", "def slugify(text: str) -> str:",
            "Implement slugify in textkit.py: lowercase, words joined by single hyphens, punctuation dropped.",
            "import re\n\n\ndef slugify(text: str) -> str:\n    return '-'.join(re.findall(r'[a-z0-9]+', text.lower()))\n",
            ["slugify('Hello, World!') == 'hello-world'", "slugify('  a  b ') == 'a-b'"],
            ["run-the-tests"],
        ),
        _task(
            "train-clamp", "mathkit", "clamp", "def clamp(value: float, low: float, high: float) -> float:",
            "Implement clamp in mathkit.py so the value is limited to [low, high].",
            "def clamp(value: float, low: float, high: float) -> float:\n    return max(low, min(high, value))\n",
            ["clamp(5, 0, 3) == 3", "clamp(-1, 0, 3) == 0", "clamp(2, 0, 3) == 2"],
            ["keep-the-signature"],
        ),
        _task(
            "train-chunks", "listkit", "chunks", "def chunks(items: list, size: int) -> list:",
            "Implement chunks in listkit.py: split a list into consecutive pieces of at most `size` items.",
            "def chunks(items: list, size: int) -> list:\n    return [items[i:i + size] for i in range(0, len(items), size)]\n",
            ["chunks([1, 2, 3], 2) == [[1, 2], [3]]", "chunks([], 3) == []"],
            ["run-the-tests", "keep-the-signature"],
        ),
    ],
    "val": [
        _task(
            "val-initials", "textkit", "initials", "def initials(name: str) -> str:",
            "Implement initials in textkit.py: the upper-case first letter of each word.",
            "def initials(name: str) -> str:\n    return ''.join(w[0].upper() for w in name.split())\n",
            ["initials('ada lovelace') == 'AL'", "initials('') == ''"],
            ["run-the-tests"],
        ),
        _task(
            "val-mean", "mathkit", "mean", "def mean(values: list) -> float:",
            "Implement mean in mathkit.py; the mean of an empty list is 0.0.",
            "def mean(values: list) -> float:\n    return sum(values) / len(values) if values else 0.0\n",
            ["mean([1, 2, 3]) == 2", "mean([]) == 0.0"],
            ["keep-the-signature"],
        ),
    ],
    "test": [
        _task(
            "test-dedupe", "listkit", "dedupe", "def dedupe(items: list) -> list:",
            "Implement dedupe in listkit.py: drop repeated items, keeping the first occurrence's order.",
            "def dedupe(items: list) -> list:\n    return list(dict.fromkeys(items))\n",
            ["dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]"],
            ["run-the-tests", "keep-the-signature"],
        ),
    ],
}


def tasks(split: str) -> list[dict[str, Any]]:
    return _TASKS.get(split, [])


def prepare(task: Any, workspace: Path) -> None:
    """A tiny repository: the module with its function stubbed, and a README."""
    stub = f"{task.field('stub_sig')}\n    raise NotImplementedError\n"
    (workspace / f"{task.field('module')}.py").write_text(stub, encoding="utf-8")
    (workspace / "README.md").write_text(
        textwrap.dedent(f"""\
        # {task.field('module')}

        Small helpers. `{task.field('func')}` is not implemented yet.
        """),
        encoding="utf-8",
    )


def score(task: Any, workspace: Path, agent_result: Any) -> dict[str, Any]:
    """Run the hidden checks against the workspace's module in a fresh interpreter."""
    passed: list[str] = []
    failed: list[str] = []
    for check in task.field("checks"):
        code = f"from {task.field('module')} import *\nassert {check}\n"
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=workspace, capture_output=True, timeout=30, check=False
        )
        (passed if proc.returncode == 0 else failed).append(check)
    total = len(passed) + len(failed)
    return {
        "hard": int(not failed),
        "soft": len(passed) / total if total else 0.0,
        "checks": [f"pass:{c}" for c in passed] + [f"fail:{c}" for c in failed],
    }
