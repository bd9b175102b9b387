"""The built-in scoring modes: exact, checklist, command, rubric."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skilltune.agents.process import kill_group
from skilltune.errors import ScoringError
from skilltune.score.base import Score, Scorer, score_from_mapping

if TYPE_CHECKING:
    from skilltune.agents.base import AgentResult
    from skilltune.suite import Task

DEFAULT_COMMAND_TIMEOUT_S = 120.0
# skill-trainer passes its prompt variant ("cheap" unless asked for "full") as the third
# argument of rubric.score; skilltune has one prompt per task, so rubrics see "cheap".
RUBRIC_MODE_ARG = "cheap"


class ExactScorer(Scorer):
    """Regex ``expected`` searched in the agent's final output; hard = soft = found."""

    mode = "exact"

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        expected = scoring.get("expected")
        if expected is None:
            return ["exact mode needs 'expected' (a regex searched in the agent's final output)"]
        if not isinstance(expected, str) or not expected:
            return ["'expected' must be a non-empty string (a regex)"]
        try:
            re.compile(expected)
        except re.error as exc:
            return [f"'expected' is not a valid regex: {exc}"]
        return []

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        expected = task.scoring.get("expected")
        if not isinstance(expected, str) or not expected:
            raise ScoringError(f"task {task.id}: exact mode without 'expected'")
        flags = re.IGNORECASE if task.scoring.get("ignore_case") else 0
        found = re.search(expected, result.final_text, flags) is not None
        return self.make(int(found), float(found), ["expected_found" if found else "expected_missing"])


class ChecklistScorer(Scorer):
    """Substrings ``required`` in the final output: soft = fraction found, hard = all found."""

    mode = "checklist"

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        required = scoring.get("required")
        if required is None:
            return ["checklist mode needs 'required' (a list of substrings)"]
        if not isinstance(required, list) or not all(isinstance(r, str) and r for r in required):
            return ["'required' must be a list of non-empty strings"]
        if not required:
            return ["'required' is an empty checklist: list at least one substring"]
        return []

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        required = task.scoring.get("required")
        if not isinstance(required, list) or not required:
            raise ScoringError(f"task {task.id}: checklist mode with an empty 'required' list")
        text = result.final_text
        found = [r for r in required if r in text]
        missing = [r for r in required if r not in text]
        checks = [f"found:{r}" for r in found] + [f"missing:{r}" for r in missing]
        return self.make(int(not missing), len(found) / len(required), checks)


class CommandScorer(Scorer):
    """Shell ``command`` run in the workspace; exit 0 = pass.

    The command sees ``TASK_OUTPUT`` (the file holding the agent's final output),
    ``SKILLTUNE_SUITE`` (the suite folder, for checker scripts kept under refs/)
    and ``SKILLTUNE_TASK_ID``. It runs in its own process group, killed as a group
    after ``timeout`` seconds (default 120): a timeout is a scoring error, not a 0.
    """

    mode = "command"

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        problems = []
        command = scoring.get("command")
        if command is None:
            problems.append("command mode needs 'command' (a shell command; exit 0 = pass)")
        elif not isinstance(command, str) or not command.strip():
            problems.append("'command' must be a non-empty string")
        timeout = scoring.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            problems.append("'timeout' must be a positive number of seconds")
        return problems

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        command = task.scoring.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ScoringError(f"task {task.id}: command mode without 'command'")
        timeout = float(task.scoring.get("timeout") or DEFAULT_COMMAND_TIMEOUT_S)
        with tempfile.TemporaryDirectory(prefix="skilltune-score-") as tmp:
            output_file = result.output_file
            if output_file is None:
                output_file = Path(tmp) / "output.txt"
                output_file.write_text(result.final_text, encoding="utf-8")
            env = dict(
                os.environ,
                TASK_OUTPUT=str(output_file),
                SKILLTUNE_SUITE=str(self.suite.root.resolve()),  # the command runs in the workspace
                SKILLTUNE_TASK_ID=task.id,
            )
            rc, tail = _run_group(command, workspace, env, timeout)
        checks = [f"command_exit:{rc}"]
        if rc != 0 and tail:
            checks.append(f"command_output:{tail}")
        return self.make(int(rc == 0), float(rc == 0), checks)


def _run_group(command: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run a shell command in its own process group; kill the group at the timeout."""
    # shell=True is deliberate: the command comes from the suite author, never from agent output.
    # Output goes to a file, not a pipe: a background child holding a pipe open would
    # otherwise make a finished command look like a hang.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill_group(proc.pid)
            proc.wait()
            raise ScoringError(f"scoring command timed out after {timeout:g} s: {command}") from exc
        finally:
            kill_group(proc.pid)  # reap anything the command left running in the background
        log.seek(0)
        lines = log.read().decode("utf-8", "replace").strip().splitlines()
    return proc.returncode, (lines[-1][:160] if lines else "")


class RubricScorer(Scorer):
    """The suite's ``rubric.py``: ``score(task, workdir, mode) -> {hard, soft, checks}``.

    ``workdir`` is the rollout's workspace, where ``output.txt`` holds the agent's
    final output (skill-trainer's layout); ``task`` is the task object as a dict.
    """

    mode = "rubric"

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        if not (suite_root / "rubric.py").is_file():
            return ["rubric mode needs rubric.py in the suite folder with score(task, workdir, mode)"]
        return []

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        try:
            raw = self.suite.rubric_module().score(task.as_json(), workspace, RUBRIC_MODE_ARG)
        except Exception as exc:
            raise ScoringError(f"rubric.py score() raised {type(exc).__name__}: {exc}") from exc
        return score_from_mapping(
            raw,
            weight=self.suite.config.mixed_weight,
            contract=self.suite.contract_hash,
            source="rubric.py score()",
        )
