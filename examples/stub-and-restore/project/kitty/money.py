"""Amounts of money as integer cents, read from and written as text."""

from __future__ import annotations

import re

_AMOUNT = re.compile(r"(-)?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?")


def parse_amount(text: str) -> int:
    """Cents in ``text``: "12.5" -> 1250, "1,234.56" -> 123456, "-3" -> -300.

    Surrounding spaces are ignored. Thousands separators must group exactly three
    digits. More than two decimals, or anything else, raises ValueError.
    """
    match = _AMOUNT.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an amount: {text!r}")
    sign, whole, fraction = match.groups()
    cents = int(whole.replace(",", "")) * 100 + int((fraction or "0").ljust(2, "0"))
    return -cents if sign else cents


def format_amount(cents: int) -> str:
    """``cents`` as text with two decimals and thousands separators: 123456 -> "1,234.56", -5 -> "-0.05"."""
    sign = "-" if cents < 0 else ""
    whole, rest = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{rest:02d}"
