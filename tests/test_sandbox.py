"""skilltune/sandbox.py: the probe, the choice, what a sealed process sees, and what a run records."""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.agents import get_backend
from skilltune.cli import app
from skilltune.errors import SkilltuneWarning, UsageError
from skilltune.rollout.runner import RolloutJob, RolloutRunner
from skilltune.sandbox import (
    UNSEALED,
    Seal,
    bwrap_problem,
    installation,
    resolve,
    rollout_sandbox,
    sealed_argv,
)
from skilltune.session import warn_unsealed
from skilltune.suite import load_suite
from tests.helpers import MOCK_SKILL, MOCK_SUITE


def needs_bwrap() -> None:
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bwrap cannot run here: {problem}")


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A PATH without bwrap (the probe is cached per process: cleared before and after)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bwrap_problem.cache_clear()
    yield
    bwrap_problem.cache_clear()


def test_choices_resolve_to_a_seal_or_a_reason(no_bwrap: None) -> None:
    assert resolve("none") == UNSEALED and not UNSEALED.sealed
    auto = resolve("auto")
    assert not auto.sealed and auto.reason is not None and "bwrap is not installed" in auto.reason
    assert "apt-get install bubblewrap" in auto.reason
    with pytest.raises(UsageError, match=r"--sandbox bwrap: bwrap is not installed.*--sandbox none"):
        resolve("bwrap")
    with pytest.raises(UsageError, match="use auto, bwrap or none"):
        resolve("sometimes")  # type: ignore[arg-type]


def test_what_a_backend_records_under_a_seal() -> None:
    sealed = Seal("bwrap")
    assert rollout_sandbox(sealed, "process") == "bwrap"
    assert rollout_sandbox(UNSEALED, "process") == "none"
    assert rollout_sandbox(sealed, "none") == "none"  # a backend that cannot run sealed
    assert rollout_sandbox(sealed, "inert") == rollout_sandbox(UNSEALED, "inert") == "inert"
    assert get_backend("mock").seal_support == "inert" and get_backend("openai").seal_support == "inert"
    assert all(get_backend(n).seal_support == "process" for n in ("claude", "codex", "gemini", "qwen"))


def test_a_sealed_process_sees_its_workspace_and_home_and_nothing_else(tmp_path: Path) -> None:
    needs_bwrap()
    workspace, home, outside = tmp_path / "ws", tmp_path / "home", tmp_path / "suite"
    for folder in (workspace, home, outside):
        folder.mkdir()
    (outside / "val.jsonl").write_text("ANSWERS\n")
    script = (
        f"echo answer > answer.txt && echo note > {home}/note.txt && pwd && ls /tmp | wc -l && "
        f"(cat {outside}/val.jsonl 2>&1 || true) && (touch /usr/x 2>&1 || true) && ls {Path.home()} 2>&1 || true"
    )
    argv = sealed_argv(["sh", "-c", script], workspace=workspace, home=home)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(workspace)  # started in its workspace
    assert (workspace / "answer.txt").read_text() == "answer\n" and (home / "note.txt").is_file()
    assert "ANSWERS" not in done.stdout and "No such file or directory" in done.stdout
    assert "Read-only file system" in done.stdout  # the system folders are read-only
    assert not (outside / "x").exists()


def test_installation_is_the_top_node_modules_tree_and_the_interpreter(tmp_path: Path) -> None:
    tree = tmp_path / "clis" / "node_modules"
    script = tree / "@vendor" / "cli" / "bin" / "cli.js"
    script.parent.mkdir(parents=True)
    script.write_text("#!/usr/bin/env node\n")
    (tree / ".bin").mkdir()
    (tree / ".bin" / "cli").symlink_to(script)
    found = installation(str(tree / ".bin" / "cli"))
    assert tree in found and all(p == tree or p.is_relative_to(tree) or p.name for p in found)
    assert not any(str(p).startswith("/usr") for p in found)  # system folders are bound anyway


def test_sealed_and_unsealed_rollouts_of_a_cli_never_share_a_cache_key(tmp_path: Path) -> None:
    suite = load_suite(MOCK_SUITE)
    job = RolloutJob(suite.tasks("train")[0], "eval", None, 0, 0)

    def key(agent: str, seal: Seal) -> str:
        backend = get_backend(agent)
        runner = RolloutRunner(suite, backend, backend.parse_options({}), tmp_path, seal=seal)
        return runner.cache_key(job)

    assert key("claude", Seal("bwrap")) != key("claude", UNSEALED)
    assert key("mock", Seal("bwrap")) == key("mock", UNSEALED)  # nothing to seal: the same rollout


def test_an_unsealed_cli_warns_once_per_reason_and_the_mock_never() -> None:
    claude = get_backend("claude")
    why = Seal("none", "a reason only this test gives")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_unsealed(why, claude)
        warn_unsealed(why, claude)
        warn_unsealed(why, get_backend("mock"))
        warn_unsealed(UNSEALED, claude)  # --sandbox none: the user's own choice
    said = [str(w.message) for w in caught if issubclass(w.category, SkilltuneWarning)]
    assert said == [
        "rollouts are NOT sealed: a reason only this test gives; the agent can read what you can (docs/sandbox.md)"
    ]


def test_the_cli_refuses_an_unknown_sandbox_and_agents_says_whether_rollouts_are_sealed(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    bad = runner.invoke(
        app,
        [
            "run",
            str(MOCK_SUITE),
            "--skill",
            str(MOCK_SKILL),
            "--sandbox",
            "maybe",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert bad.exit_code == 2 and "sandbox" in bad.output and "Traceback" not in bad.output
    listing = runner.invoke(app, ["agents"])
    assert listing.exit_code == 0, listing.output
    assert "sandbox (--sandbox auto): rollouts are" in " ".join(listing.output.split())
    assert "no process" in listing.output  # the mock: nothing to seal
