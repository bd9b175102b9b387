"""The package's shape: no import cycle (function-level imports counted), every module imports
alone in a fresh interpreter, modules stay small and say what they are."""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import REPO
from tools.check_import_cycles import cycles, import_graph
from tools.check_layers import illegal, unplaced

PACKAGE = REPO / "skilltune"
MAX_LINES = 400  # agent backends excepted: one CLI's whole behaviour lives in one file


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_no_import_cycle() -> None:
    found = cycles(import_graph("skilltune"))
    assert found == [], f"import cycles: {found}"


def test_the_layers_hold_and_name_every_module() -> None:
    assert unplaced("skilltune") == []
    assert illegal("skilltune") == []


PLANTED = {
    "inside a function": "\n\ndef _planted():\n    from skilltune.training import api\n    return api\n",
    "annotation only": (
        "\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from skilltune.training import api\n"
    ),
}


@pytest.mark.parametrize("how", list(PLANTED))
def test_a_planted_upward_import_fails_the_layer_check(tmp_path: Path, how: str) -> None:
    """The check on a copy of the package: clean, then failing on one upward import (store, in the
    lowest layer, importing the training loop, in a function or under TYPE_CHECKING), whose chain
    it names."""
    import shutil

    ignored = shutil.ignore_patterns("__pycache__", "node_modules")
    shutil.copytree(PACKAGE, tmp_path / "skilltune", ignore=ignored)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    tool = [sys.executable, str(REPO / "tools" / "check_layers.py"), "skilltune"]
    clean = subprocess.run(tool, capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    store = tmp_path / "skilltune" / "store.py"
    store.write_text(store.read_text() + PLANTED[how])
    planted = subprocess.run(tool, capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert planted.returncode == 1
    assert "skilltune.store (lower) imports skilltune.training (higher)" in planted.stdout
    assert "skilltune.store -> skilltune.training.api" in planted.stdout


def test_the_packages_own_lazy_api_is_no_dependency_of_its_importers() -> None:
    """skilltune/__init__.py names the whole API under TYPE_CHECKING; report/page.py imports the
    package for __version__ and still depends on nothing above it."""
    from tools.check_layers import layer_graph

    graph = layer_graph("skilltune")
    assert graph.direct_import_exists(importer="skilltune.report.page", imported="skilltune")
    assert not graph.direct_import_exists(importer="skilltune", imported="skilltune.training")
    assert graph.direct_import_exists(importer="skilltune", imported="skilltune.errors")  # run time


def _write_package(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_checker_sees_function_level_and_package_cycles_but_not_type_checking(tmp_path, monkeypatch):
    _write_package(
        tmp_path,
        {
            "cyc/__init__.py": "",
            # a cycle hidden behind a function-level import
            "cyc/a.py": "from cyc import b\n",
            "cyc/b.py": "def f():\n    from cyc import a\n    return a\n",
            # a cycle through a package's __init__: importing cyc.sub.x runs cyc/sub/__init__.py
            "cyc/sub/__init__.py": "from cyc.sub import x\nfrom cyc import c\n",
            "cyc/sub/x.py": "",
            "cyc/c.py": "import cyc.sub.x\n",
            # TYPE_CHECKING imports never run: no cycle
            "cyc/d.py": "from cyc import e\n",
            "cyc/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyc import d\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = cycles(import_graph("cyc"))
    assert ["cyc.a", "cyc.b"] in found
    assert ["cyc.c", "cyc.sub"] in found
    assert not any("cyc.d" in component for component in found)


def _import_alone(module: str) -> tuple[str, int, str]:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=REPO, check=False
    )
    return module, proc.returncode, proc.stderr[-2000:]


def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    """An import-order dependency (a module that works only after another was imported) fails here."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_import_alone, _modules()))
    failed = [f"{module}:\n{stderr}" for module, rc, stderr in results if rc != 0]
    assert len(results) > 50
    assert failed == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_module_is_small_and_says_what_it_is(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(text))
    assert docstring and docstring.strip().splitlines()[0].strip(), f"{path} has no docstring"
    if path.parent.name != "agents" or path.name in ("__init__.py", "base.py", "cli.py", "process.py"):
        lines = len(text.splitlines())
        assert lines <= MAX_LINES, f"{path} has {lines} lines (at most {MAX_LINES}): it holds two things"


# Modules tested in a file not named after them, with the file that tests them and why. A module
# with code that is neither covered by name nor listed here fails the test below: a new module
# without tests is noticed.
TESTED_ELSEWHERE: dict[str, tuple[str, str]] = {
    "skilltune.propose.asks": ("test_groups.py", "a step's asks, planned from the failure groups"),
    "skilltune.training.screen": ("test_proposals.py", "each rule screened on its train targets"),
    "skilltune.training.select": ("test_proposals.py", "the bundle of the rules that work, leave-one-out"),
    "skilltune": ("test_startup.py", "the lazy public API: what `import skilltune` loads and when"),
    "skilltune.agents": ("test_agent_plumbing.py", "the backend registry, through the backends it finds"),
    "skilltune.agents.base": ("test_agent_plumbing.py", "the plumbing every CLI backend shares"),
    "skilltune.agents.home": ("test_agent_plumbing.py", "the private HOME each CLI rollout gets"),
    "skilltune.process": (
        "test_agent_plumbing.py",
        "the agent process: wall limit, stall, group kill",
    ),
    "skilltune.agents.transcript": (
        "test_agent_plumbing.py",
        "transcripts read from the CLIs' event streams",
    ),
    "skilltune.agents.chat": ("test_direct_targets.py", "the direct chat targets against the fake server"),
    "skilltune.agents.openai": ("test_direct_targets.py", "the openai direct target"),
    "skilltune.agents.anthropic": ("test_direct_targets.py", "the anthropic direct target"),
    "skilltune.modelcalls.prices": ("test_modelcalls.py", "the price table the model calls' costs come from"),
    "skilltune.stats.alpha": ("test_sequential.py", "the weights the run-wide alpha spending shares"),
    "skilltune.stats.signflip": ("test_sequential.py", "the sequential gate's sign-flip test"),
    "skilltune.rollout.conversation": ("test_rollout.py", "conversation.json, written by every rollout"),
    "skilltune.rollout.scoring": (
        "test_judge.py",
        "scoring a kept record again (resume after a judge outage)",
    ),
    "skilltune.errors": ("test_cli_app.py", "the exit codes the CLI gives each kind of error"),
    "skilltune.execute": ("test_executor.py", "executors, by their role"),
    "skilltune.execute.base": ("test_executor.py", "the executor protocol"),
    "skilltune.execute.local": ("test_executor.py", "the local executor: interrupts, draining, liveness"),
    "skilltune.review.leakage": ("test_audit.py", "the leakage check the audit runs"),
    "skilltune.meta_eval": ("test_calibrate.py", "the meta-evaluation calibrate runs"),
    "skilltune.measure": (
        "test_skilltrainer_compat.py",
        "read_suite: the prompt variant the settings name reaches the agent and rubric.py",
    ),
    "skilltune.proposal": ("test_propose_api.py", "the proposer's contract types, filled by the proposers"),
    "skilltune.progress": ("test_training.py", "the reporters whose lines the training tests read"),
}


def _holds_code(path: Path) -> bool:
    """A module defining a function or a class (not one that only re-exports or sets constants)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body)


def _test_names(module: str) -> set[str]:
    """The test files named after ``module``: test_<name>, test_<package>_<name>, and for a module of a
    sub-package, the package's own test file (test_<package>; test_<package>_<topic> files count too)."""
    parts = module.split(".")[1:] or ["skilltune"]
    names = {f"test_{parts[-1]}.py", f"test_{'_'.join(parts)}.py"}
    if len(parts) > 1:
        names.add(f"test_{parts[0]}.py")
    return names


def test_every_module_with_code_has_tests_named_after_it_or_says_where_they_are() -> None:
    tests = {p.name for p in (REPO / "tests").glob("test_*.py")}
    tests |= {p.name for p in (REPO / "tests" / "integration").glob("test_*.py")}
    with_code = {m for m in _modules() if _holds_code(_path(m))}
    missing = []
    for module in sorted(with_code):
        first = module.split(".")[1] if "." in module else None  # the package, or the module itself
        named = _test_names(module) & tests or (first and any(t.startswith(f"test_{first}_") for t in tests))
        if not named and module not in TESTED_ELSEWHERE:
            missing.append(module)
    assert missing == [], (
        f"modules without a tests/test_<name>.py: {missing}; add one, or name the file that tests them "
        "in TESTED_ELSEWHERE with the reason"
    )
    stale = sorted(set(TESTED_ELSEWHERE) - with_code)
    assert stale == [], f"TESTED_ELSEWHERE names modules that are gone or hold no code: {stale}"
    absent = {m: f for m, (f, _) in TESTED_ELSEWHERE.items() if f not in tests}
    assert absent == {}, f"TESTED_ELSEWHERE names test files that do not exist: {absent}"


def _path(module: str) -> Path:
    rel = Path(*module.split(".")[1:])
    package = PACKAGE / rel / "__init__.py"
    return package if package.is_file() else PACKAGE / rel.with_suffix(".py")
