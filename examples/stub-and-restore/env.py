"""A Python env suite: restore function bodies that were replaced by stubs, scored by the package's tests.

``project/`` is a small package (``kitty``: shared expenses in integer cents) with
its unittest tests. For each task, ``prepare`` copies the project into the
workspace and replaces the bodies of the task's ``stubs`` (``"file.py:function"``)
with ``raise NotImplementedError``, keeping each signature and docstring.
skilltune then commits that stubbed state as the workspace's only commit, so the
rollout's diff holds exactly what the agent wrote.

``score`` runs the project's own tests, taken from ``project/tests`` in this
folder (never the workspace's copy, which the agent may have edited), against the
package the agent left in the workspace: hard = every test passes, soft = the
fraction that pass.

The mock agent reads each task's ``requires``/``match_regex``/``failure_hints``;
when it solves a task it writes the original modules back (``mock_writes``), as a
real agent that restored them would.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

CONFIG = {
    "name": "stub-and-restore",
    "mixed_weight": 0.5,
    # For the mock proposer: helpful rules (their ``answers`` name the symptoms they cure) and distractors.
    "proposer_pool": [
        {
            "id": "read-tests-first",
            "text": "- Read the function's tests before you write its body: they pin down the cases the docstring leaves open.",
            "answers": ["misses a case the tests pin down"],
        },
        {
            "id": "run-tests",
            "text": "- Run the project's tests (`python -B -m unittest discover -s tests -t .`) before you finish, and fix every failure.",
            "answers": ["without running the project's tests"],
        },
        {
            "id": "one-liners",
            "text": "- Prefer a one-line implementation wherever one is possible.",
            "answers": [],
        },
        {
            "id": "comment-every-line",
            "text": "- Add a comment above every line you restore.",
            "answers": [],
        },
        {
            "id": "type-check",
            "text": "- Annotate every local variable with its type.",
            "answers": [],
        },
    ],
}

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "project"
PACKAGE = "kitty"
TEST_TIMEOUT_S = 60
STUB_LINE = 'raise NotImplementedError("restore this function body")'

_RULES: dict[str, dict[str, Any]] = {
    "run-the-tests": {
        "regex": [r"\brun\b", r"\btests?\b"],
        "hint": "the body was handed back without running the project's tests; an edge case in them fails",
    },
    "read-the-tests": {
        "regex": [r"\bread\b", r"\btests?\b", r"\b(before|first)\b"],
        "hint": "the restored body follows the docstring loosely and misses a case the tests pin down",
    },
    "keep-the-contract": {
        "regex": [r"signature|docstring", r"\b(keep|preserve|unchanged)\b"],
        "hint": "the function's signature or docstring was changed, so its callers and tests no longer match",
    },
}

# (task id, stubs, rules the mock needs stated in the skill)
_SPLITS: dict[str, list[tuple[str, list[str], list[str]]]] = {
    "train": [
        ("restore-parse-amount", ["kitty/money.py:parse_amount"], ["read-the-tests", "run-the-tests"]),
        ("restore-split-evenly", ["kitty/split.py:split_evenly"], ["run-the-tests"]),
        ("restore-balances", ["kitty/ledger.py:balances"], ["read-the-tests", "keep-the-contract"]),
        ("restore-summary-lines", ["kitty/report.py:summary_lines"], ["keep-the-contract"]),
        (
            "restore-parse-and-summary",
            ["kitty/money.py:parse_amount", "kitty/report.py:summary_lines"],
            ["read-the-tests", "run-the-tests", "keep-the-contract"],
        ),
    ],
    "val": [
        ("restore-format-amount", ["kitty/money.py:format_amount"], ["run-the-tests", "keep-the-contract"]),
        ("restore-allocate", ["kitty/split.py:allocate"], ["read-the-tests", "run-the-tests"]),
        ("restore-round-to", ["kitty/split.py:round_to"], ["read-the-tests"]),
    ],
    "test": [
        ("restore-settle", ["kitty/ledger.py:settle"], ["read-the-tests", "run-the-tests"]),
        ("restore-format-transfer", ["kitty/report.py:format_transfer"], ["keep-the-contract"]),
        (
            "restore-settle-and-transfer",
            ["kitty/ledger.py:settle", "kitty/report.py:format_transfer"],
            ["read-the-tests", "run-the-tests", "keep-the-contract"],
        ),
    ],
}


def _prompt(stubs: list[str]) -> str:
    where = ", ".join(f"`{s.split(':')[1]}` in {s.split(':')[0]}" for s in stubs)
    bodies = "body was" if len(stubs) == 1 else "bodies were"
    return (
        f"In this repository (the `kitty` package), the {bodies} of {where} replaced by a stub that raises "
        "NotImplementedError. Restore the implementation so the function does what its docstring says "
        "and the project's tests pass."
    )


def _task(task_id: str, stubs: list[str], rules: list[str]) -> dict[str, Any]:
    files = sorted({s.split(":")[0] for s in stubs})
    return {
        "id": task_id,
        "prompt": _prompt(stubs),
        "stubs": stubs,
        "requires": rules,
        "match_regex": {r: _RULES[r]["regex"] for r in rules},
        "failure_hints": {r: _RULES[r]["hint"] for r in rules},
        "noise": 0.05,
        "mock_writes": {f: (PROJECT / f).read_text(encoding="utf-8") for f in files},
    }


def tasks(split: str) -> list[dict[str, Any]]:
    return [_task(*spec) for spec in _SPLITS.get(split, [])]


def stub_source(source: str, function: str) -> str:
    """``source`` with the body of top-level ``function`` replaced by a stub (signature and docstring kept)."""
    tree = ast.parse(source)
    node = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function
        ),
        None,
    )
    if node is None:
        raise ValueError(f"no top-level function {function!r}")
    body = node.body
    has_docstring = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    statements = body[1:] if has_docstring else body
    if not statements:
        raise ValueError(f"{function!r} has no body to stub")
    lines = source.splitlines(keepends=True)
    first, last = statements[0].lineno - 1, node.end_lineno or statements[-1].lineno
    indent = " " * statements[0].col_offset
    return "".join([*lines[:first], f"{indent}{STUB_LINE}\n", *lines[last:]])


def prepare(task: Any, workspace: Path) -> None:
    """The project with the task's functions stubbed (skilltune commits this as the baseline)."""
    shutil.copytree(PROJECT, workspace, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for stub in task.field("stubs"):
        rel, function = stub.split(":")
        path = workspace / rel
        path.write_text(stub_source(path.read_text(encoding="utf-8"), function), encoding="utf-8")


# Runs in a fresh interpreter, in a folder holding the package under test and the pristine tests;
# prints one JSON object: test id -> "pass" | "fail" | "error".
_RUNNER = r"""
import json, sys, unittest
sys.path.insert(0, ".")
outcomes = {}

class Result(unittest.TestResult):
    def addSuccess(self, test):
        outcomes.setdefault(test.id(), "pass")
    def addFailure(self, test, err):
        outcomes[test.id()] = "fail"
    def addError(self, test, err):
        outcomes[test.id()] = "error"
    def addSubTest(self, test, subtest, err):
        if err is not None:
            outcomes[test.id()] = "fail"

unittest.defaultTestLoader.discover("tests", top_level_dir=".").run(Result())
print(json.dumps(outcomes))
"""


def run_tests(package_dir: Path) -> dict[str, str] | None:
    """Outcome of every test of ``project/tests`` run against ``package_dir``; None on a timeout."""
    with tempfile.TemporaryDirectory(prefix="stub-and-restore-") as tmp:
        root = Path(tmp)
        if package_dir.is_dir():
            shutil.copytree(package_dir, root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(PROJECT / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        try:
            proc = subprocess.run(
                [sys.executable, "-B", "-c", _RUNNER],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=TEST_TIMEOUT_S,
                check=False,
                env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
            )
        except subprocess.TimeoutExpired:
            return None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the test runner failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    outcomes: dict[str, str] = json.loads(lines[-1])
    return outcomes


@cache
def all_tests() -> tuple[str, ...]:
    """Every test id of the project, from a run against the original package (all must pass)."""
    outcomes = run_tests(PROJECT / PACKAGE)
    if outcomes is None or set(outcomes.values()) != {"pass"}:
        raise RuntimeError(f"the original project does not pass its own tests: {outcomes}")
    return tuple(sorted(outcomes))


def score(task: Any, workspace: Path, agent_result: Any) -> dict[str, Any]:
    """The project's tests against the workspace's package: hard = all pass, soft = fraction passing.

    A test that did not run (its module failed to import) counts as failing."""
    expected = all_tests()
    outcomes = run_tests(workspace / PACKAGE)
    if outcomes is None:
        return {
            "hard": 0,
            "soft": 0.0,
            "checks": [f"timeout: the tests did not finish within {TEST_TIMEOUT_S} s (an endless loop?)"],
        }
    passed = [t for t in expected if outcomes.get(t) == "pass"]
    failed = [f"{outcomes.get(t, 'not run')}:{t}" for t in expected if outcomes.get(t) != "pass"]
    return {
        "hard": int(not failed),
        "soft": len(passed) / len(expected),
        "checks": [f"passed {len(passed)}/{len(expected)} tests", *failed],
    }
