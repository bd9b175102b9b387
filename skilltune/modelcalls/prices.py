"""Price estimates for agents and model calls that report tokens but no cost (USD per million tokens).

Used only when no cost is reported (CLIs without one, every model call); the record marks
the figure ``cost_estimated``. Prices change: this table is a rough guide, matched by the
longest model-name prefix; an unknown model gets no estimate rather than a guess. Users
override or extend it per run (the ``prices`` option of the direct targets and of
``--proposer api``): their entries are matched first.
"""

from __future__ import annotations

from collections.abc import Mapping

# model-name prefix -> (input USD / Mtok, output USD / Mtok)
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-haiku-4": (1.0, 5.0),
    "opus": (15.0, 75.0),
    "sonnet": (3.0, 15.0),
    "haiku": (1.0, 5.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4o": (2.5, 10.0),
    "o4-mini": (1.1, 4.4),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "qwen3-coder": (0.3, 1.2),
}


def estimate_cost(
    model: str | None,
    tokens_in: int | None,
    tokens_out: int | None,
    overrides: Mapping[str, tuple[float, float]] | None = None,
) -> float | None:
    """USD for this many tokens of ``model``, or None when the model or the counts are unknown.
    ``overrides`` (model-name prefix -> prices) are matched before the built-in table."""
    if not model or tokens_in is None or tokens_out is None:
        return None
    name = model.lower().split("/")[-1]
    for table in ({k.lower(): v for k, v in (overrides or {}).items()}, PRICES):
        matches = [prefix for prefix in table if name.startswith(prefix)]
        if matches:
            price_in, price_out = table[max(matches, key=len)]
            return round((tokens_in * price_in + tokens_out * price_out) / 1_000_000, 6)
    return None
