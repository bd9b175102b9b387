"""Which distinct queries a draft keeps: balanced between the classes, the buckets and the splits.

A draft asks for a quarter more queries than it keeps (``SURPLUS``): duplicates take some, and
the rest is the room to balance. Within one class (should trigger, should not), ``choose`` takes
queries one at a time: from the bucket furthest below its share (taken + 1) / target, ties to the
earlier bucket, and from that bucket the earliest query whose split (``split_of``: its text's
sha256, modulo three) has the fewest queries of the class so far. So each bucket gets its share
while it has queries (a short bucket's places go to the others), and each class's train, val and
test come out as even as the surplus allows, while a query's split stays a function of its text.
Then both classes are cut to the smaller one's count: a draft is balanced even when the drafter
gave too few of one kind. The picks are greedy, so a smaller quota keeps a prefix of a larger one's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from skilltune.suite.draft_review import split_of

SURPLUS = 1.25


@dataclass(frozen=True)
class Pick:
    """A query kept: its bucket (index in the draft's plan) and split."""

    bucket: int
    query: str
    split: str


def choose(pools: list[list[str]], targets: list[int], quota: int) -> list[Pick]:
    """At most ``quota`` queries of one class from ``pools`` (each bucket's distinct queries, in order),
    the buckets weighted by ``targets`` (see the module's docstring)."""
    left = [list(pool) for pool in pools]
    taken = [0] * len(pools)
    per_split: Counter[str] = Counter()
    picks: list[Pick] = []
    while len(picks) < quota:
        open_ = [i for i, pool in enumerate(left) if pool]
        if not open_:
            break
        i = min(open_, key=lambda b: ((taken[b] + 1) / max(targets[b], 1), b))
        pool = left[i]
        j = min(range(len(pool)), key=lambda k: (per_split[split_of(pool[k])], k))
        query = pool.pop(j)
        split = split_of(query)
        picks.append(Pick(i, query, split))
        taken[i] += 1
        per_split[split] += 1
    return picks


def balance(positive: list[Pick], negative: list[Pick]) -> tuple[list[Pick], list[Pick]]:
    """Both classes cut to the smaller one's count (each a prefix of its picks)."""
    n = min(len(positive), len(negative))
    return positive[:n], negative[:n]
