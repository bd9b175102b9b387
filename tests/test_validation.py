"""One message per field a model refused: named, with what it must hold or the fix."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from skilltune.validation import field_problems


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    turns: int = Field(default=1, gt=0, description="a positive integer")
    pattern: str = "x"
    nested: list[int] = Field(default_factory=list)

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        if value == "(":
            raise ValueError("'pattern' is not a valid regex")
        return value


def _problems(given: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        _Options.model_validate(given)
    return field_problems(caught.value, **kwargs)


def test_each_kind_of_error_names_its_field() -> None:
    raw = {"turns": 0, "pattern": "(", "colour": "blue", "nested": [1, "x"]}
    assert _problems(raw, model=_Options) == [
        "missing 'model'",
        "'turns': Input should be greater than 0 (got 0)",
        "'pattern' is not a valid regex",  # a validator's own words, as written
        "'nested.1': Input should be a valid integer, unable to parse string as an integer (got 'x')",
        "unknown field 'colour' (known: model, nested, pattern, turns): fix the spelling or remove it",
    ]


def test_owner_noun_and_descriptions_word_the_messages() -> None:
    raw = {"turns": 0, "colour": "blue"}
    assert _problems(raw, model=_Options, owner="claude", noun="agent option", described=True) == [
        "claude needs 'model'",
        "agent option turns must be a positive integer (got 0)",
        "unknown agent option 'colour' for claude (known: model, nested, pattern, turns): fix the spelling "
        "or remove it",
    ]


def test_raw_names_the_field_and_shows_its_whole_value_clipped() -> None:
    raw = {"model": "m", "nested": [1, "x" * 100]}
    (message,) = _problems(raw, raw=raw)
    assert message.startswith("'nested': Input should be a valid integer") and message.endswith("...)")


def test_an_error_at_no_field_and_a_limit() -> None:
    assert _problems([1], top="scoring") == [
        "scoring: Input should be a valid dictionary or instance of _Options (got [1])"
    ]
    assert _problems({"turns": 0, "colour": 1}, limit=1) == ["missing 'model'"]
