"""Plain-text lines for people to read."""

from __future__ import annotations

from kitty.ledger import Transfer
from kitty.money import format_amount


def format_transfer(transfer: Transfer) -> str:
    """One transfer as a sentence: "ben pays ana 12.50"."""
    return f"{transfer.payer} pays {transfer.payee} {format_amount(transfer.cents)}"


def summary_lines(balances: dict[str, int]) -> list[str]:
    """One line per person, by name: "ana is owed 12.50", "ben owes 3.00", "cy is settled up"."""
    lines = []
    for name in sorted(balances):
        cents = balances[name]
        if cents > 0:
            lines.append(f"{name} is owed {format_amount(cents)}")
        elif cents < 0:
            lines.append(f"{name} owes {format_amount(-cents)}")
        else:
            lines.append(f"{name} is settled up")
    return lines
