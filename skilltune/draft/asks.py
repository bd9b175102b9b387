"""What a draft asks for: its buckets (kind x phrasing or sibling), each ask's prompt, and reading answers.

A draft is planned as **buckets**, each one short, focused ask a small model can manage:
should-trigger requests in four phrasings (``terse``, ``question``, ``long``, ``casual``), near
misses for each sibling skill of the catalogue (requests that use the target's words but belong
to that sibling), and unrelated requests. Each answer is a JSON list of strings, read leniently
(``read_queries``: a fenced or bare list, an object holding one, a cut list's complete items, or
the lines of a numbered list). The label check asks, for one query, which skill fits it best
(``read_choice``: the first skill name, or ``none``, the answer names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import Template
from typing import Any, Literal

from skilltune.modelcalls.plain import complete_items, parse_json
from skilltune.propose.prompts import template
from skilltune.skill import WHEN_CLAUSE, Candidate

Kind = Literal["should-trigger", "near-miss", "unrelated"]

STYLES: dict[str, str] = {
    "terse": "a terse command of a few words, typed in a hurry",
    "question": "a question, ending with a question mark",
    "long": "a longer request of two or three sentences that first gives some context (the project, what "
    "happened, who needs it) and then says what is wanted",
    "casual": "casual chat, all in lower case, without a final full stop, as someone types on a phone",
}
NEAR_SHARE = 2 / 3  # of the should-not queries: near misses; the rest unrelated requests
MAX_ITEMS = 10  # requests asked for in one call: a longer list is where a small model repeats itself
_QUERY_CHARS = 600
_SHOWN_WRITTEN = 20
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_COMMON = frozenset((
    "about", "after", "also", "asks", "from", "into", "that", "their", "them", "then", "this", "user",
    "users", "want", "wants", "what", "when", "where", "which", "with", "your", "skill", "request",
    "requests", "used", "uses", "using", "the", "and", "for",
))  # fmt: skip
_LEAD = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.):]|\(\d+\))\s*")


@dataclass(frozen=True)
class Card:
    """A skill as the drafter sees it: its name and description."""

    name: str
    description: str

    @classmethod
    def of(cls, skill: Candidate) -> Card:
        return cls(skill.name, " ".join(skill.description.split()))

    def line(self) -> str:
        return f"- {self.name}: {self.description}"


@dataclass(frozen=True)
class Bucket:
    """One kind of query of a draft: its kind, its phrasing (should-trigger), sibling (near-miss) or
    ``unrelated``, and how many queries of it the draft keeps."""

    kind: Kind
    style: str
    target: int

    @property
    def should_trigger(self) -> bool:
        return self.kind == "should-trigger"

    @property
    def why(self) -> str:
        """The review file's reason for a query of this bucket."""
        if self.kind == "should-trigger":
            return f"phrasing: {self.style}"
        if self.kind == "near-miss":
            return f"near miss for sibling {self.style}"
        return "unrelated"

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.style}"


def _shares(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` as even as can be, the larger shares first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def plan(count: int, siblings: list[str]) -> list[Bucket]:
    """The buckets of a draft of ``count`` queries: half should trigger (the four phrasings evenly),
    half should not (``NEAR_SHARE`` of them near misses, evenly over the siblings in name order, the rest
    unrelated). A bucket of no query is left out (more siblings than near-miss places)."""
    half = count // 2
    near = round(half * NEAR_SHARE) if siblings else 0
    buckets = [
        Bucket("should-trigger", s, n) for s, n in zip(STYLES, _shares(half, len(STYLES)), strict=True)
    ]
    if siblings:
        buckets += [
            Bucket("near-miss", s, n) for s, n in zip(siblings, _shares(near, len(siblings)), strict=True)
        ]
    buckets.append(Bucket("unrelated", "unrelated", half - near))
    return [b for b in buckets if b.target > 0]


def key_words(card: Card, limit: int = 6) -> list[str]:
    """The words of a skill a near miss borrows: its name's, then its "use when" clause's (or its
    description's), four letters or more, common words aside."""
    found = WHEN_CLAUSE.search(card.description)
    clause = card.description[found.end() :] if found else card.description
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", card.name) + _WORD.findall(clause)]
    return list(dict.fromkeys(w for w in words if len(w) >= 4 and w not in _COMMON))[:limit]


@dataclass(frozen=True)
class QueryAsk:
    """One call for ``n`` queries of a bucket; ``written`` are the bucket's queries so far (a later call
    asks for others), ``call`` counts the bucket's calls from 1."""

    bucket: Bucket
    n: int
    call: int
    skill: Card
    catalogue: tuple[Card, ...]
    written: tuple[str, ...]
    seed: int

    @property
    def label(self) -> str:
        return f"{self.bucket.key} #{self.call}"

    def sibling(self) -> Card:
        return next(c for c in self.catalogue if c.name == self.bucket.style)

    def instruction(self) -> str:
        target, n = self.skill.name, self.n
        if self.bucket.kind == "should-trigger":
            return (
                f'Write {n} different requests a developer might type that the skill "{target}" should '
                f"handle. Write every one of them as {STYLES[self.bucket.style]}."
            )
        if self.bucket.kind == "near-miss":
            sibling, words = self.bucket.style, ", ".join(key_words(self.skill))
            return (
                f'Write {n} different requests a developer might type that the skill "{sibling}" should '
                f'handle, not the skill "{target}". Make them near misses: each one uses some words of '
                f'"{target}" ({words}), so that a careless reader could take it for a "{target}" '
                f'request, yet it asks for what "{sibling}" does.'
            )
        return (
            f"Write {n} different everyday requests a developer might type to a coding agent (fix a bug, "
            "write or explain a function, set up a tool, change a test) that none of these skills is for."
        )

    def prompt(self) -> str:
        written = ""
        if self.written:
            shown = "\n".join(f"- {q}" for q in self.written[-_SHOWN_WRITTEN:])
            written = f"\n\nThese are written already; write others:\n{shown}"
        return _render(
            template("draft_queries"),
            skills=_listing(self.skill, self.catalogue),
            instruction=self.instruction(),
            written=written,
            n=self.n,
        )


@dataclass(frozen=True)
class CheckAsk:
    """The label check of one query: which of ``skills`` (the target and the catalogue) fits it best."""

    query: str
    skill: Card
    catalogue: tuple[Card, ...]
    seed: int

    @property
    def names(self) -> list[str]:
        return sorted([self.skill.name, *(c.name for c in self.catalogue)])

    def prompt(self) -> str:
        return _render(
            template("draft_check"),
            skills=_listing(self.skill, self.catalogue),
            request=self.query.replace("</request>", "<\\/request>"),
            names=", ".join(self.names),
        )


def _listing(skill: Card, catalogue: tuple[Card, ...]) -> str:
    """The skills in name order: the target's place in the list says nothing."""
    return "\n".join(c.line() for c in sorted([skill, *catalogue], key=lambda c: c.name))


def _render(tpl: Template, **values: Any) -> str:
    return tpl.substitute(**values).strip() + "\n"


def clean(item: Any) -> str | None:
    """A query from one item of an answer: a string (or an object's ``query`` / ``request`` / ``prompt``),
    on one line, list markers and quotes taken off; None when empty or longer than a request."""
    if isinstance(item, dict):
        item = next(
            (item[k] for k in ("query", "request", "prompt", "text") if isinstance(item.get(k), str)), None
        )
    if not isinstance(item, str):
        return None
    text = " ".join(_LEAD.sub("", item.strip()).split()).strip().strip("\"'`").strip()
    return text if text and len(text) <= _QUERY_CHARS else None


def read_queries(text: str, cut: bool = False) -> list[str]:
    """The queries of an answer: a JSON list (bare or fenced), the first list in a JSON object, the
    complete items of a list cut at the token limit (``cut``), else the lines of a numbered or bulleted
    list. ValueError when none is found (the ask is repaired once)."""
    try:
        data: Any = parse_json(text)
    except ValueError:
        data = complete_items(text, "queries") if cut or "[" in text else None
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list) or not data:
        data = [line for line in text.splitlines() if _LEAD.match(line)]
    queries = [q for q in (clean(item) for item in data) if q is not None]
    if not queries:
        raise ValueError("no list of requests in the answer")
    return queries


def read_choice(text: str, names: list[str]) -> str | None:
    """The skill an answer names first (one of ``names``), None for ``none``; ValueError when it names
    neither."""
    lowered = text.lower()
    hits = []
    for name in [*names, "none"]:
        found = re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", lowered)
        if found:
            hits.append((found.start(), -len(name), name))
    if not hits:
        raise ValueError(f"the answer names none of the skills ({', '.join(names)}) and not none")
    choice = min(hits)[2]
    return None if choice == "none" else choice
