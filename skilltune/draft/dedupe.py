"""Duplicate queries out of a draft: the same text once normalised, and near-duplicates.

**Normalised text**: Unicode NFKC, case folded, every run of characters that are not letters or
digits one space ("Draft the notes!" and "draft the  notes" are one query). **Near-duplicates**:
the sets of the two queries' normalised words overlap with a Jaccard index of ``NEAR`` (0.8) or
more, |A & B| / |A | B|. Why words and not characters (difflib's ratio): the near-duplicates a
model writes are the same request with a word added or moved ("please draft the release notes
for v2.4" beside "draft the release notes for v2.4": 6/7 = 0.86), which a set of words sees
whatever the order, while two short requests that differ in one word that matters ("fix the
build" and "fix the tests": 2/4) stay apart; a character ratio rates those two 0.7 and a
reordered request low. It is the standard library's sets, no dependency.

The first query of a pair is kept, in the order the draft asked its buckets; each one dropped is
recorded with the query it repeats and the rule that caught it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

NEAR = 0.8
_SEPARATORS = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    return _SEPARATORS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


@dataclass(frozen=True)
class Duplicate:
    """A query left out: the kept one it repeats, and how (``normalised`` or ``near (0.86)``)."""

    query: str
    kept: str
    rule: str


class Deduper:
    """The queries seen so far; ``add`` says whether a new one is kept."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}  # normalised -> the query kept
        self._words: list[tuple[frozenset[str], str]] = []
        self.dropped: list[Duplicate] = []

    def add(self, query: str) -> bool:
        """Keep ``query`` (True) unless it repeats a query kept before (recorded in ``dropped``)."""
        norm = normalise(query)
        if norm in self._texts:
            self.dropped.append(Duplicate(query, self._texts[norm], "normalised"))
            return False
        words = frozenset(norm.split())
        for other, kept in self._words:
            score = jaccard(words, other)
            if score >= NEAR:
                self.dropped.append(Duplicate(query, kept, f"near ({score:.2f})"))
                return False
        self._texts[norm] = query
        self._words.append((words, query))
        return True
