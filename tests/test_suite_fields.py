"""Typed scoring fields: a mode's Fields model refuses bad fields at validate (file:line) and hands
the scorer typed values at score time, for built-in modes and for a plug-in registered at run time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import AfterValidator, Field, PositiveInt
from typer.testing import CliRunner

from skilltune.agents.base import AgentResult
from skilltune.cli import app
from skilltune.errors import ScoringError
from skilltune.score import Score, Scorer, ScoringFields
from skilltune.score.modes import CommandFields, ExactFields
from skilltune.score.registry import SCORERS
from skilltune.suite import Suite, Task, load_suite, validate_suite
from tests.helpers import write_suite

WORDS = "skilltune-test-words"


def _matches_something(word: re.Pattern[str]) -> re.Pattern[str]:
    if word.fullmatch(""):
        raise ValueError(
            "'word' matches the empty string, so every position would count: use + rather than *"
        )
    return word


class WordFields(ScoringFields):
    """A plug-in mode's fields: a regex, compiled by the model, and how often it must match."""

    word: Annotated[re.Pattern[str], AfterValidator(_matches_something)] = Field(
        description="a regex: the word to count in the agent's final output"
    )
    at_least: PositiveInt = Field(default=1, description="a positive integer: matches needed to pass")


class WordScorer(Scorer):
    """Pass when ``word`` matches at least ``at_least`` times; soft = the share of those found."""

    mode = WORDS
    Fields = WordFields

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        fields = self.fields(task)
        assert isinstance(fields, WordFields)
        count = len(fields.word.findall(result.final_text))
        return self.make(int(count >= fields.at_least), min(1.0, count / fields.at_least), [f"count:{count}"])


@pytest.fixture
def words_mode() -> Iterator[str]:
    SCORERS.register(WORDS, WordScorer)
    try:
        yield WORDS
    finally:
        SCORERS.unregister(WORDS)


def words_suite(root: Path, *scorings: dict[str, object]) -> Path:
    """train.jsonl holds one task per scoring object, in order (line n = scorings[n-1])."""
    train = [
        {"id": f"w{n}", "prompt": "count", "scoring": {"mode": WORDS, **s}} for n, s in enumerate(scorings)
    ]
    return write_suite(root, train, [{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}])


def score(suite: Suite, task: Task, text: str) -> Score:
    return suite.scorer(task).score(task, suite.root, AgentResult(status="ok", final_text=text))


# --- a plug-in's Fields ----------------------------------------------------------------------------


def test_plugin_scorer_gets_its_fields_typed(tmp_path: Path, words_mode: str) -> None:
    root = words_suite(tmp_path / "s", {"word": r"\bcat\b", "at_least": 2}, {"word": "dog"})
    assert validate_suite(root) == []
    suite = load_suite(root)
    twice, once = suite.task("w0"), suite.task("w1")
    fields = suite.scorer(twice).fields(twice)
    assert isinstance(fields, WordFields)
    assert fields.word.pattern == r"\bcat\b" and fields.at_least == 2
    assert suite.scorer(once).fields(once) == WordFields(word=re.compile("dog"), at_least=1)  # the default
    assert (score(suite, twice, "cat, cat and a catalogue").hard, score(suite, twice, "one cat").soft) == (
        1,
        0.5,
    )
    assert score(suite, once, "hotdog dog").checks == ["count:2"]


@pytest.mark.parametrize(
    ("scoring", "message"),
    [
        ({}, f"{WORDS} mode needs 'word' (a regex: the word to count in the agent's final output)"),
        (
            {"word": "cat", "at_least": 0},
            "'at_least' must be a positive integer: matches needed to pass (got 0)",
        ),
        (
            {"word": "a*"},
            "'word' matches the empty string, so every position would count: use + rather than *",
        ),
    ],
    ids=["missing", "constraint", "own-validator"],
)
def test_plugin_fields_refusal_is_a_file_line_problem(
    tmp_path: Path, words_mode: str, scoring: dict[str, object], message: str
) -> None:
    root = words_suite(tmp_path / "s", {"word": "ok"}, scoring)
    problems = validate_suite(root)
    assert [(p.file, p.line) for p in problems] == [(str(root / "train.jsonl"), 2)]
    assert problems[0].message.startswith(message), problems[0].message
    result = CliRunner().invoke(app, ["validate", str(root)])
    assert result.exit_code == 2
    assert f"{root / 'train.jsonl'}:2: {message}" in result.stderr


def test_plugin_unknown_field_is_a_warning(tmp_path: Path, words_mode: str) -> None:
    """A field the mode does not declare is ignored with a warning (skill-trainer ignores it too)."""
    root = words_suite(tmp_path / "s", {"word": "ok"}, {"word": "cat", "atleast": 2})
    problems = validate_suite(root)
    assert [(p.line, p.warning) for p in problems] == [(2, True)]
    assert problems[0].message.startswith(
        f"{WORDS} mode has no field 'atleast' (its fields: at_least, word): it is ignored"
    )
    suite = load_suite(root)
    task = suite.tasks("train")[1]
    fields = suite.scorer(task).fields(task)
    assert isinstance(fields, WordFields) and fields.at_least == 1


def test_plugin_fields_need_the_plugin(tmp_path: Path) -> None:
    """Without the plug-in its tasks are an unknown mode, not silently accepted fields."""
    root = words_suite(tmp_path / "s", {"word": "ok"})
    assert [p.message.split(" (")[0] for p in validate_suite(root)] == [f"unknown scoring mode {WORDS!r}"]


# --- built-in modes ------------------------------------------------------------------------------


def test_command_fields_typed_with_the_default_timeout(tmp_path: Path) -> None:
    root = write_suite(
        tmp_path / "s",
        [
            {"id": "given", "prompt": "p", "scoring": {"mode": "command", "command": "true", "timeout": 5}},
            {"id": "null", "prompt": "p", "scoring": {"mode": "command", "command": "true", "timeout": None}},
            {"id": "absent", "prompt": "p", "scoring": {"mode": "command", "command": "true"}},
        ],
        [{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}],
    )
    suite = load_suite(root)
    timeouts = {}
    for task_id in ("given", "null", "absent"):
        fields = suite.scorer(suite.task(task_id)).fields(suite.task(task_id))
        assert isinstance(fields, CommandFields)
        timeouts[task_id] = fields.timeout
    assert timeouts == {"given": 5.0, "null": 120.0, "absent": 120.0}


def test_rubric_keeps_fields_it_does_not_know(tmp_path: Path) -> None:
    root = write_suite(
        tmp_path / "s",
        [{"id": "r", "prompt": "p", "scoring": {"mode": "rubric", "level": 2, "weights": {"a": 1}}}],
        [{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}],
    )
    (root / "rubric.py").write_text("def score(task, workdir, mode):\n    return {'hard': 1, 'soft': 1.0}\n")
    suite = load_suite(root)
    task = suite.task("r")
    assert suite.scorer(task).fields(task).model_extra == {"level": 2, "weights": {"a": 1}}


def test_a_task_that_skipped_validation_is_a_scoring_error_not_a_zero(tmp_path: Path) -> None:
    root = write_suite(
        tmp_path / "s",
        [{"id": "t", "prompt": "p", "scoring": {"mode": "exact", "expected": "ok"}}],
        [{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}],
    )
    suite = load_suite(root)
    unchecked = Task(id="u", prompt="p", scoring={"mode": "exact", "expected": "ok", "ignore_case": "no"})
    with pytest.raises(ScoringError, match="task u: invalid exact fields"):
        score(suite, unchecked, "ok")
    assert score(suite, suite.task("t"), "ok").hard == 1


def test_exact_ignore_case_is_a_real_boolean(tmp_path: Path) -> None:
    """A JSON 1 or "no" is refused, not read as true."""
    assert ExactFields.model_validate({"expected": "a+"}).ignore_case is False
    for n, value in enumerate((1, "no")):
        task = {
            "id": "t",
            "prompt": "p",
            "scoring": {"mode": "exact", "expected": "a+", "ignore_case": value},
        }
        root = write_suite(
            tmp_path / f"s{n}", [task], [{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}]
        )
        assert [p.message for p in validate_suite(root)] == [
            f"'ignore_case' must be true or false: match 'expected' ignoring case (got {value!r})"
        ]


def test_task_files_are_checked_only_against_a_suite_folder(tmp_path: Path) -> None:
    """Outside a folder suite (Python envs, proposer tasks) ``files`` are plain strings."""
    assert Task(id="t", prompt="p", files=["../elsewhere.txt"]).files == ["../elsewhere.txt"]
    row = {"id": "t", "prompt": "p", "files": ["../elsewhere.txt"], "scoring": {"required": ["x"]}}
    root = write_suite(tmp_path / "s", [row], [{"id": "v", "prompt": "p", "scoring": {"required": ["x"]}}])
    assert [(p.line, p.message) for p in validate_suite(root)] == [
        (1, "files entry '../elsewhere.txt' escapes the suite ('..'): keep task files under the suite folder")
    ]
