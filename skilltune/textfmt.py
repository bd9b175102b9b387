"""How skilltune shows numbers and text to people: scores, signed differences, durations, one-line excerpts."""

from __future__ import annotations


def fmt(value: float | None) -> str:
    """A score: three decimals, '-' when there is none."""
    return "-" if value is None else f"{value:.3f}"


def signed(value: float | None) -> str:
    """A difference of scores, always with its sign; '-' when there is none."""
    return "-" if value is None else f"{value:+.3f}"


def duration(seconds: float | None) -> str:
    """A wall time: 4.2s, 3m07s, 2h05m; '-' when there is none."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def usd(value: float) -> str:
    """A cost in USD: cents, or four decimals below a cent ($0.0042)."""
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def count(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless n is 1: "1 step", "3 steps"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def one_line(text: str | None, limit: int) -> str:
    """``text`` on one line (runs of whitespace become a space), cut to ``limit`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"
