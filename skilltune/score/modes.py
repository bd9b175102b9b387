"""The built-in scoring modes: exact, checklist, command, rubric."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool, field_validator

from skilltune.contracts import AgentResult, Task
from skilltune.errors import ScoringError, SkilltuneWarning
from skilltune.process import kill_group
from skilltune.score.base import OpenFields, Score, Scorer, ScoringFields, score_from_mapping
from skilltune.score.expected import ExpectedAnswer, expected_answer, shown_regex

DEFAULT_COMMAND_TIMEOUT_S = 120.0


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(
            f"'expected' is not a valid regex: {exc}; put a backslash before a literal ( [ . * + ?"
        ) from None
    return pattern


class ExactFields(ScoringFields):
    """exact mode's fields: ``expected`` compiles as a regex; nothing else is accepted."""

    expected: Annotated[str, AfterValidator(_compiles)] = Field(
        min_length=1, description="a non-empty string: a regex searched in the agent's final output"
    )
    # Strict: a JSON string such as "false" must not read as true.
    ignore_case: StrictBool = Field(
        default=False, description="true or false: match 'expected' ignoring case"
    )


class ExactScorer(Scorer):
    """Regex ``expected`` searched in the agent's final output; hard = soft = found."""

    mode = "exact"
    Fields = ExactFields

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        fields = self.fields(task)
        assert isinstance(fields, ExactFields)
        flags = re.IGNORECASE if fields.ignore_case else 0
        match = re.search(fields.expected, result.final_text, flags)
        checks = ["expected_found" if match else "expected_missing"]
        if match:
            feedback = self.context.allowed_feedback(
                _found(fields, match.group(0)), "the output matched the expected answer"
            )
        else:
            answered = _answered(result.final_text)
            feedback = self.context.allowed_feedback(
                _missing(fields, answered),
                f"the output did not hold the expected answer (the suite keeps it hidden; {answered})",
            )
        return self.make(int(bool(match)), float(bool(match)), checks, feedback)


def _missing(fields: ExactFields, answered: str) -> str:
    """A failed rollout's feedback in words a small model reads: ``expected answer: account (alone
    in the output, ignoring case; the agent answered: 'Customer Support')``. The regex follows the
    answer only when the words do not say all it asks; a regex encoding no plain answer is shown
    as written."""
    plain = expected_answer(fields.expected, fields.ignore_case)
    if plain is None:
        said = [*(["ignoring case"] if fields.ignore_case else []), answered]
        return f"expected a match for the regex {shown_regex(fields.expected)} ({'; '.join(said)})"
    return f"expected answer: {plain.text} ({'; '.join([*_described(plain, fields), answered])})"


def _found(fields: ExactFields, matched: str) -> str:
    plain = expected_answer(fields.expected, fields.ignore_case)
    if plain is None:
        return f"the output matched the regex {shown_regex(fields.expected)}: {matched!r}"
    said = _described(plain, fields)
    if matched not in plain.answers:
        said.append(f"matched: {matched!r}")
    return f"the output held the expected answer: {plain.text}" + (f" ({'; '.join(said)})" if said else "")


def _described(plain: ExpectedAnswer, fields: ExactFields) -> list[str]:
    """The notes on a plain answer (where it stands, case), and the regex when they fall short."""
    notes = ", ".join(plain.notes())
    regex = [] if plain.exact else [f"the regex {shown_regex(fields.expected)}"]
    return [*([notes] if notes else []), *regex]


def _answered(text: str, limit: int = 400) -> str:
    """What the agent answered: its final output, or the last ``limit`` characters of a longer one."""
    text = text.strip()
    if not text:
        return "the final output was empty"
    if len(text) <= limit:
        return f"the agent answered: {text!r}"
    return f"the agent's output ended: ...{text[-limit:]!r}"


def _not_empty(required: list[str]) -> list[str]:
    if not required:
        raise ValueError("'required' is an empty checklist: list at least one substring")
    return required


class ChecklistFields(ScoringFields):
    """checklist mode's fields: at least one non-empty substring in ``required``."""

    required: Annotated[list[Annotated[str, Field(min_length=1)]], AfterValidator(_not_empty)] = Field(
        description="a list of non-empty strings, each searched in the agent's final output"
    )


class ChecklistScorer(Scorer):
    """Substrings ``required`` in the final output: soft = fraction found, hard = all found."""

    mode = "checklist"
    Fields = ChecklistFields

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        fields = self.fields(task)
        assert isinstance(fields, ChecklistFields)
        required = fields.required
        text = result.final_text
        found = [r for r in required if r in text]
        missing = [r for r in required if r not in text]
        checks = [f"found:{r}" for r in found] + [f"missing:{r}" for r in missing]
        listed = "; ".join(
            [*(["found: " + ", ".join(map(repr, found))] if found else []),
             *(["missing: " + ", ".join(map(repr, missing))] if missing else [])]
        )  # fmt: skip
        feedback = self.context.allowed_feedback(
            f"{len(found)} of {len(required)} required items in the output ({listed})",
            f"{len(found)} of {len(required)} required items in the output (the suite keeps them hidden)",
        )
        return self.make(int(not missing), len(found) / len(required), checks, feedback)


class CommandFields(ScoringFields):
    """command mode's fields: the shell ``command`` and its finite, positive ``timeout`` (null: the default)."""

    command: str = Field(
        pattern=r"\S", description="a non-empty string: a shell command run in the workspace, exit 0 = pass"
    )
    timeout: Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False)] = Field(
        default=DEFAULT_COMMAND_TIMEOUT_S,
        description=f"a positive number of seconds, {DEFAULT_COMMAND_TIMEOUT_S:g} when left out",
    )

    @field_validator("timeout", mode="before")
    @classmethod
    def _null_is_the_default(cls, value: Any) -> Any:
        return DEFAULT_COMMAND_TIMEOUT_S if value is None else value


class CommandScorer(Scorer):
    """Shell ``command`` run in the workspace; exit 0 = pass.

    The command sees ``TASK_OUTPUT`` (the file holding the agent's final output),
    ``SKILLTUNE_SUITE`` (the suite folder, for checker scripts kept under refs/)
    and ``SKILLTUNE_TASK_ID``. It runs in its own process group, killed as a group
    after ``timeout`` seconds (default 120): a timeout is a scoring error, not a 0.
    """

    mode = "command"
    Fields = CommandFields

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        fields = self.fields(task)
        assert isinstance(fields, CommandFields)
        with tempfile.TemporaryDirectory(prefix="skilltune-score-") as tmp:
            output_file = result.output_file
            if output_file is None:
                output_file = Path(tmp) / "output.txt"
                output_file.write_text(result.final_text, encoding="utf-8")
            env = dict(
                os.environ,
                TASK_OUTPUT=str(output_file),
                SKILLTUNE_SUITE=str(self.context.root.resolve()),  # the command runs in the workspace
                SKILLTUNE_TASK_ID=task.id,
            )
            rc, lines = _run_group(fields.command, workspace, env, fields.timeout)
        tail = lines[-1][:160] if lines else ""
        checks = [f"command_exit:{rc}"]
        if rc != 0 and tail:
            checks.append(f"command_output:{tail}")
        if not result.final_text.strip():
            checks.append("note: empty final output (skill-trainer scores it 0 without running the command)")
        said = "passed" if rc == 0 else "failed"
        shown = "" if rc == 0 else _relevant_output(lines)
        feedback = self.context.allowed_feedback(
            f"the scoring command `{fields.command}` exited {rc} ({said})"
            + (f"; its output ends:\n{shown}" if shown else ""),
            f"the scoring command exited {rc} ({said}; the suite keeps the command and its output hidden)",
        )
        return self.make(int(rc == 0), float(rc == 0), checks, feedback)


_FAILURE_LINE = re.compile(r"FAILED|ERROR|Error|error:|assert|Traceback|expected", re.I)


def _relevant_output(lines: list[str], tail: int = 25, earlier: int = 15, limit: int = 2500) -> str:
    """What a person reads to fix a failed command: the lines naming failures (failing test
    names, errors, assertions) before the last ``tail`` lines, then those lines."""
    head = [line for line in lines[:-tail] if _FAILURE_LINE.search(line)][:earlier]
    shown = [*head, *(["..."] if head or len(lines) > tail else []), *lines[-tail:]]
    text = "\n".join(line[:300] for line in shown)
    return text if len(text) <= limit else "..." + text[-limit:]


def _run_group(command: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, list[str]]:
    """Run a shell command in its own process group; kill the group at the timeout. Returns its
    exit code and the lines it printed (stdout and stderr together)."""
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
    return proc.returncode, lines


class RubricScorer(Scorer):
    """The suite's ``rubric.py``: ``score(task, workdir, mode) -> {hard, soft, checks}``, and
    optionally ``feedback`` (a string or a list of strings: what a person needs to fix a failure).

    ``workdir`` is the rollout's workspace, where ``output.txt`` holds the agent's
    final output and ``task.json`` the task (skill-trainer's layout; both written after
    the agent exited); ``task`` is the task object as a dict with its ``split``; ``mode``
    is the prompt variant, ``"cheap"`` unless ``--prompt-variant full``. A ``hard``
    that is not 0 or 1 is read as skill-trainer reads it, ``int(hard)`` (0.8 -> 0),
    with a warning in the score's checks.
    """

    mode = "rubric"
    Fields = OpenFields  # rubric.py reads whatever fields it was written for

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        if not (suite_root / "rubric.py").is_file():
            return ["rubric mode needs rubric.py in the suite folder with score(task, workdir, mode)"]
        return []

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        try:
            raw = self.context.rubric().score(task.with_split(), workspace, self.context.prompt_variant)
        except Exception as exc:
            raise ScoringError(f"rubric.py score() raised {type(exc).__name__}: {exc}") from exc
        raw, note = _coerce_hard(raw)
        score = score_from_mapping(
            raw,
            weight=self.context.mixed_weight,
            contract=self.context.contract,
            source="rubric.py score()",
            policy=self.context.feedback,
        )
        if note is not None:
            warnings.warn(f"{self.context.root}: rubric.py {note}", SkilltuneWarning, stacklevel=2)
            score = score.model_copy(update={"checks": [*score.checks, f"warning: {note}"]})
        return score


def _coerce_hard(raw: Any) -> tuple[Any, str | None]:
    """skill-trainer reads a rubric's hard as ``int(hard)``: a 0.8 is 0, a True is 1."""
    if not isinstance(raw, Mapping) or "hard" not in raw:
        return raw, None
    hard = raw["hard"]
    if isinstance(hard, bool) or hard in (0, 1):
        return {**raw, "hard": int(hard)}, None
    try:
        coerced = int(hard)
    except (TypeError, ValueError):
        return raw, None  # not a number: score_from_mapping says so
    return {
        **raw,
        "hard": coerced,
    }, f"returned hard={hard!r}, read as {coerced} (int(), as skill-trainer does)"
