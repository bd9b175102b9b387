"""examples/stub-and-restore: stubs are made as promised, and the package's own tests score the workspace."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from skilltune.agents import get_backend
from skilltune.agents.base import AgentResult
from skilltune.rollout.runner import RolloutJob, RolloutRunner, rollout_dir
from skilltune.skill import load_skill
from skilltune.suite import PythonSuite, load_suite, validate_suite
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "stub-and-restore"
PROJECT = EXAMPLE / "project"
NO_OUTPUT = AgentResult(status="ok", final_text="done")


@pytest.fixture(scope="module")
def suite() -> PythonSuite:
    loaded = load_suite(EXAMPLE)
    assert isinstance(loaded, PythonSuite)
    return loaded


@pytest.fixture(scope="module")
def env(suite: PythonSuite) -> ModuleType:
    return suite.module


def prepared(suite: PythonSuite, task_id: str, workspace: Path) -> Path:
    workspace.mkdir()
    suite.prepare(suite.task(task_id), workspace)
    return workspace


def score(suite: PythonSuite, task_id: str, workspace: Path) -> Any:
    return suite.scorer(suite.task(task_id)).score(suite.task(task_id), workspace, NO_OUTPUT)


def function_node(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_suite_validates_and_every_split_has_tasks() -> None:
    assert validate_suite(EXAMPLE) == []
    loaded = load_suite(EXAMPLE)
    assert [len(loaded.tasks(s)) for s in ("train", "val", "test")] == [5, 3, 3]


def test_the_original_project_passes_all_its_tests(env: ModuleType) -> None:
    tests = env.all_tests()
    assert len(tests) >= 25
    assert all(t.startswith("tests.test_") for t in tests)


@pytest.mark.parametrize(
    "task_id", ["restore-parse-amount", "restore-allocate", "restore-settle-and-transfer"]
)
def test_prepare_stubs_the_bodies_and_keeps_signature_and_docstring(
    suite: PythonSuite, task_id: str, tmp_path: Path
) -> None:
    workspace = prepared(suite, task_id, tmp_path / "ws")
    for stub in suite.task(task_id).field("stubs"):
        rel, name = stub.split(":")
        original = function_node((PROJECT / rel).read_text(), name)
        stubbed = function_node((workspace / rel).read_text(), name)
        assert ast.dump(stubbed.args) == ast.dump(original.args)
        assert ast.get_docstring(stubbed) == ast.get_docstring(original)
        assert len(stubbed.body) == 2 and isinstance(stubbed.body[1], ast.Raise)
        assert "NotImplementedError" in ast.unparse(stubbed.body[1])
    # the tests travel with the package, unchanged
    for test_file in (PROJECT / "tests").glob("*.py"):
        assert (workspace / "tests" / test_file.name).read_text() == test_file.read_text()


@pytest.mark.parametrize(
    "task_id", ["restore-parse-amount", "restore-round-to", "restore-settle-and-transfer"]
)
def test_stubbed_scores_hard_0_and_restored_scores_hard_1(
    suite: PythonSuite, env: ModuleType, task_id: str, tmp_path: Path
) -> None:
    workspace = prepared(suite, task_id, tmp_path / "ws")
    stubbed = score(suite, task_id, workspace)
    total = len(env.all_tests())
    assert stubbed.hard == 0
    assert 0 < stubbed.soft < 1  # the tests of the other functions still pass
    assert stubbed.checks[0] == f"passed {round(stubbed.soft * total)}/{total} tests"
    names = [s.split(":")[1] for s in suite.task(task_id).field("stubs")]
    failing = stubbed.checks[1:]
    assert failing and all(c.startswith(("fail:", "error:")) for c in failing)
    # each stubbed function's tests fail (the test classes are named after the functions)
    for name in names:
        cls = "".join(part.capitalize() for part in name.split("_"))
        assert any(f".{cls}." in c for c in failing), (name, failing)

    for rel in {s.split(":")[0] for s in suite.task(task_id).field("stubs")}:
        shutil.copyfile(PROJECT / rel, workspace / rel)
    restored = score(suite, task_id, workspace)
    assert (restored.hard, restored.soft) == (1, 1.0)
    assert restored.checks == [f"passed {total}/{total} tests"]


def test_a_wrong_body_fails_its_tests(suite: PythonSuite, tmp_path: Path) -> None:
    workspace = prepared(suite, "restore-round-to", tmp_path / "ws")
    module = workspace / "kitty" / "split.py"
    module.write_text(module.read_text().replace(suite.module.STUB_LINE, "return cents"))
    result = score(suite, "restore-round-to", workspace)
    assert result.hard == 0 and any("RoundTo" in c for c in result.checks)


def test_the_pristine_tests_score_not_the_workspace_copy(suite: PythonSuite, tmp_path: Path) -> None:
    """An agent that deletes the failing tests (or the whole tests folder) gains nothing."""
    workspace = prepared(suite, "restore-split-evenly", tmp_path / "ws")
    before = score(suite, "restore-split-evenly", workspace)
    (workspace / "tests" / "test_split.py").write_text("")
    shutil.rmtree(workspace / "tests")
    after = score(suite, "restore-split-evenly", workspace)
    assert (after.hard, after.soft) == (before.hard, before.soft) == (0, before.soft)


def test_a_broken_package_scores_0_without_a_scoring_error(suite: PythonSuite, tmp_path: Path) -> None:
    """A syntax error the agent left makes every test fail to import: a 0, not a scorer failure."""
    workspace = prepared(suite, "restore-balances", tmp_path / "ws")
    (workspace / "kitty" / "ledger.py").write_text("def balances(:\n")
    result = score(suite, "restore-balances", workspace)
    assert (result.hard, result.soft) == (0, 0.0)
    shutil.rmtree(workspace / "kitty")
    assert score(suite, "restore-balances", workspace).soft == 0.0


def test_an_endless_loop_is_a_zero_with_a_reason(
    suite: PythonSuite, env: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.all_tests()  # known before the limit is lowered
    monkeypatch.setattr(env, "TEST_TIMEOUT_S", 2)
    workspace = prepared(suite, "restore-round-to", tmp_path / "ws")
    module = workspace / "kitty" / "split.py"
    module.write_text(module.read_text().replace(suite.module.STUB_LINE, "while True:\n        pass"))
    result = score(suite, "restore-round-to", workspace)
    assert (result.hard, result.soft) == (0, 0.0)
    assert result.checks[0].startswith("timeout:")


def test_the_rollout_diff_holds_only_the_agents_work(suite: PythonSuite, tmp_path: Path) -> None:
    """Through skilltune's rollout: the stubbed project is the baseline commit; the mock agent, when it
    solves the task, writes the module back, and the diff is that body and nothing else."""
    skill = load_skill(EXAMPLE / "skill")
    backend = get_backend("mock")
    runner = RolloutRunner(suite=suite, backend=backend, options=backend.parse_options({}), out=tmp_path)
    task = suite.task("restore-summary-lines")  # needs only the rule the seed skill states
    job = RolloutJob(task=task, phase="eval", candidate=skill, replicate=0, seed=0)
    record = runner.run(job)
    assert record.status == "ok" and record.score is not None and record.score.hard == 1
    diff = (rollout_dir(tmp_path, job) / "diff.patch").read_text()
    assert diff.count("diff --git ") == 1 and "diff --git a/kitty/report.py b/kitty/report.py" in diff
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == [f"-    {suite.module.STUB_LINE}"]
    assert "+    lines = []" in diff
