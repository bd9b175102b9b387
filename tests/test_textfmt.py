"""How numbers and text are shown to people (skilltune/textfmt.py)."""

from __future__ import annotations

import pytest

from skilltune.textfmt import count, duration, fmt, one_line, signed


def test_scores_and_differences_have_three_decimals_and_a_dash_for_none() -> None:
    assert (fmt(0.5), fmt(2 / 3), fmt(None)) == ("0.500", "0.667", "-")
    assert (signed(0.0), signed(0.25), signed(-0.1234), signed(None)) == ("+0.000", "+0.250", "-0.123", "-")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (0, "0.0s"), (4.24, "4.2s"), (59.4, "59.4s"), (59.6, "1m00s"), (187, "3m07s"),
     (7500, "2h05m"), (3599.6, "1h00m")],
)  # fmt: skip
def test_durations_round_to_whole_units_past_a_minute(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_counts_are_plural_unless_one() -> None:
    assert [count(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]


def test_one_line_flattens_whitespace_and_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n  b\tc ", 10) == "a b c"
    assert one_line(None, 5) == ""
    cut = one_line("abcdefghij", 5)
    assert cut == "abcd\u2026" and len(cut) == 5
    assert one_line("abcde", 5) == "abcde"
