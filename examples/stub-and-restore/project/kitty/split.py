"""Dividing an amount between people without losing or inventing a cent."""

from __future__ import annotations


def split_evenly(cents: int, people: int) -> list[int]:
    """``cents`` divided among ``people``; the leftover cents go one each to the first people.

    split_evenly(1000, 3) == [334, 333, 333]. ``people`` below 1 or a negative
    amount raises ValueError.
    """
    if people < 1:
        raise ValueError("split among at least one person")
    if cents < 0:
        raise ValueError("cannot split a negative amount")
    share, leftover = divmod(cents, people)
    return [share + 1 if i < leftover else share for i in range(people)]


def allocate(cents: int, weights: list[int]) -> list[int]:
    """``cents`` divided in proportion to ``weights`` (largest remainder method).

    Each part first gets the floor of its exact share; the cents left over go one
    each to the parts with the largest remainders, earlier parts first on a tie.
    The parts always add up to ``cents``. Negative weights, or weights that add up
    to zero, raise ValueError.
    """
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError("weights must be non-negative and add up to more than zero")
    total = sum(weights)
    parts = [cents * w // total for w in weights]
    remainders = [cents * w % total for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-remainders[i], i))
    for i in order[: cents - sum(parts)]:
        parts[i] += 1
    return parts


def round_to(cents: int, step: int) -> int:
    """``cents`` rounded to the nearest multiple of ``step``; halves round away from zero.

    round_to(1234, 5) == 1235, round_to(1232, 5) == 1230, round_to(-1225, 50) == -1250.
    A ``step`` below 1 raises ValueError.
    """
    if step < 1:
        raise ValueError("step must be at least 1")
    magnitude, rest = divmod(abs(cents), step)
    if 2 * rest >= step:
        magnitude += 1
    rounded = magnitude * step
    return -rounded if cents < 0 else rounded
