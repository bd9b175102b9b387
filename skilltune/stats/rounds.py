"""What further rounds of a sequential decision can still change (the gate's early stops).

A task whose replicates repeat exactly (two or more rounds, every round the same pair of
scores) is taken to keep repeating: a near-deterministic target, or a task both skills
always solve or always fail. If such tasks are tied, no later round gives them a
difference, and the sign-flip test's smallest p-value is 2^-m over the m tasks that can
still differ. When that floor is above the decision's level, no later look can accept:
the gate stops and rejects. A stop to reject never raises the chance of a wrong keep; it
costs power only when a task that repeated would have changed later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Scores = tuple[float | None, float | None]  # (incumbent, candidate) of one round


def repeats(rounds: Sequence[Scores]) -> bool:
    """Whether a task's rounds (two or more, all scored) all hold the same pair of scores."""
    seen = set(rounds)
    return len(rounds) >= 2 and len(seen) == 1 and None not in next(iter(seen))


def all_repeat(by_task: Mapping[str, Sequence[Scores]]) -> bool:
    """Whether every task's replicates repeat exactly (so every later round repeats too)."""
    return bool(by_task) and all(repeats(r) for r in by_task.values())


def open_tasks(by_task: Mapping[str, Sequence[Scores]]) -> int:
    """Tasks that can still hold a difference: all but those tied in every one of 2+ rounds."""
    return sum(1 for r in by_task.values() if not (repeats(r) and r[0][0] == r[0][1]))
