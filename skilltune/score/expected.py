"""What an exact-mode ``expected`` regex asks for, in plain words.

A small analyst model reads a failed rollout's feedback: ``(?i)^\\W*account\\W*$`` tells it less
than "expected answer: account, alone in the output, ignoring case". ``expected_answer`` reads the
shapes suites write around a plain answer (anchors ``^ $ \\A \\Z``, ``\\b``, inline flags, padding
of spaces and punctuation such as ``\\W*``, escaped punctuation, optional trailing punctuation,
groups, alternatives of plain answers) and gives up, returning None, on anything else (``\\d{5}``,
``.*foo.*bar``): such a regex is shown as it is written.

This is a reader of a few shapes, not a regex engine: it never decides a score (``re`` does), so
giving up is always safe. ``plain_answer`` is the short form for grouping rollouts by answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_Kind = Literal["lit", "space", "start", "end", "bound", "pad", "group", "bar"]
# Tokens that may stand before (after) the answer without being part of it.
_LEAD = frozenset({"start", "bound", "pad", "space"})
_TRAIL = frozenset({"end", "bound", "pad", "space"})
_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_QUANTIFIER = re.compile(r"(?:[*+?]|\{(\d*)(?:(,)(\d*))?\})[?+]?")


@dataclass(frozen=True)
class ExpectedAnswer:
    """The plain answer an ``expected`` regex encodes.

    ``answers``: the answer, or the alternatives of which any one passes (two or more, in the
    regex's order, none empty). ``ignore_case``: the match ignores case (the task's
    ``ignore_case`` or an inline ``(?i)``). ``where``: where the answer must stand, in words
    ("" for anywhere in the output; "alone in the output" for an answer that spaces and
    punctuation may surround and nothing else). ``exact``: ``where`` and the answers say all the
    regex asks, so showing the regex adds nothing.
    """

    answers: tuple[str, ...]
    ignore_case: bool = False
    where: str = ""
    exact: bool = True

    @property
    def text(self) -> str:
        """The answer as a person reads it: ``account``, or ``one of: yes, no``."""
        if len(self.answers) == 1:
            return _shown(self.answers[0], alternatives=False)
        return "one of: " + ", ".join(_shown(a, alternatives=True) for a in self.answers)

    @property
    def key(self) -> tuple[str, ...]:
        """The answers as a grouping key: case-folded when case is ignored, in a fixed order."""
        folded = (a.casefold() if self.ignore_case else a for a in self.answers)
        return tuple(sorted(set(folded)))

    def notes(self) -> list[str]:
        """What a reader needs besides the answer: where it stands, and that case is ignored (only
        when the answers have letters whose case could differ)."""
        cased = self.ignore_case and any(a.lower() != a.upper() for a in self.answers)
        return [note for note in (self.where, "ignoring case" if cased else "") if note]


def expected_answer(pattern: str, ignore_case: bool = False) -> ExpectedAnswer | None:
    """The plain answer ``pattern`` (searched with ``ignore_case``) encodes, or None when it
    encodes none: a regex that matches more than a fixed answer with spaces and punctuation
    around it, or one this reader does not follow."""
    flags = ""
    rest = pattern
    while found := _FLAGS.match(rest):
        flags += found.group(1)
        rest = rest[found.end() :]
    if "x" in flags:  # verbose: spaces and # mean something else
        return None
    tokens = _Reader(rest, line_anchors="m" in flags).sequence(inner=False)
    if tokens is None:
        return None
    shape = _shape(tokens)
    return None if shape is None else _describe(shape, ignore_case or "i" in flags)


def plain_answer(pattern: str, ignore_case: bool = False) -> str | None:
    """The plain answer ``pattern`` encodes as a person reads it (``account``, ``one of: yes, no``),
    or None when it encodes none."""
    found = expected_answer(pattern, ignore_case)
    return None if found is None else found.text


def shown_regex(pattern: str) -> str:
    """A regex as written, between backticks: never a Python repr (whose doubled backslashes a
    reader would copy); only characters that cannot be printed are escaped."""
    return "`" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in pattern) + "`"


def _shown(answer: str, *, alternatives: bool) -> str:
    """An answer as is, or quoted when it would read ambiguously (edge spaces, a comma in a list)."""
    unclear = answer != answer.strip() or not answer.isprintable() or (alternatives and "," in answer)
    return repr(answer) if unclear else answer


@dataclass(frozen=True)
class _Tok:
    kind: _Kind
    text: str = ""  # lit: the character; start/end: "output" or "line"
    loose: bool = False  # lit: an unescaped '.' (any character); space: any run of spaces
    plain: bool = False  # pad: any spaces and punctuation, none required (\W*)
    branches: tuple[tuple[_Tok, ...], ...] = ()  # group


class _Reader:
    """Tokens of a pattern (its leading inline flags removed), or None for syntax outside the shapes."""

    def __init__(self, pattern: str, *, line_anchors: bool) -> None:
        self.pattern = pattern
        self.pos = 0
        self.scope = "line" if line_anchors else "output"

    def sequence(self, *, inner: bool) -> list[_Tok] | None:
        tokens: list[_Tok] = []
        while self.pos < len(self.pattern):
            char = self.pattern[self.pos]
            if char == ")":
                if not inner:
                    return None
                self.pos += 1
                return tokens
            token = self._atom()
            if token is None:
                return None
            tokens.append(token)
        return None if inner else tokens

    def _quantifier(self) -> tuple[int, bool] | None:
        """The quantifier at the reading position, consumed: (its minimum, whether it allows one
        at most), or None when there is none."""
        found = _QUANTIFIER.match(self.pattern, self.pos)
        if found is None:
            return None
        text = found.group(0).rstrip("?+") or found.group(0)[:1]
        if text[0] == "{":
            low, comma, high = found.group(1), found.group(2), found.group(3)
            if not low and not comma:  # "{}" or "{x": a literal brace, not a quantifier
                return None
            at_most = int(high or 2) if comma else int(low)
            self.pos = found.end()
            return int(low or 0), at_most <= 1
        self.pos = found.end()
        return (1 if text == "+" else 0), text == "?"

    def _atom(self) -> _Tok | None:
        char = self.pattern[self.pos]
        self.pos += 1
        if char == "(":
            return self._group()
        if char == "|":
            return _Tok("bar")
        if char == "[":
            return self._padding(self._class())
        if char == "^":
            return _Tok("start", self.scope)
        if char == "$":
            return _Tok("end", self.scope)
        if char in "*+?":
            return None
        if char == "\\":
            return self._escape()
        return self._literal(char, loose=char == ".")

    def _escape(self) -> _Tok | None:
        if self.pos >= len(self.pattern):
            return None
        char = self.pattern[self.pos]
        self.pos += 1
        if char == "A":
            return _Tok("start", "output")
        if char == "Z":
            return _Tok("end", "output")
        if char == "b":
            return _Tok("bound")
        if char == "W":
            return self._padding(True, plain_when_optional=True)
        if char == "s":  # a run of spaces: inside the answer one space, around it padding
            self._quantifier()
            return _Tok("space", " ", loose=True)
        if char.isalnum() or char == "_":  # \d, \w, \n, \1, \x41...: not a plain character here
            return None
        return self._literal(char, loose=False)

    def _literal(self, char: str, *, loose: bool) -> _Tok | None:
        quantified = self._quantifier()
        if quantified is None:
            return _Tok("lit", char, loose=loose)
        optional_one = quantified == (0, True)
        if optional_one and not loose and not char.isalnum() and not char.isspace():
            return _Tok("pad")  # "\.?": a punctuation mark that may end the answer
        return None

    def _padding(self, padding_class: bool | None, *, plain_when_optional: bool = False) -> _Tok | None:
        if not padding_class:
            return None
        quantified = self._quantifier()
        optional = quantified is not None and quantified[0] == 0
        return _Tok("pad", plain=plain_when_optional and optional)

    def _class(self) -> bool | None:
        """Read a ``[...]`` class: True when it matches only spaces and punctuation (``[\\W_]``,
        ``[\\s.,!]``) or leaves out the letters (``[^a-z]``, ``[^A-Za-z0-9]``); False for another
        class; None when it does not end."""
        end = self.pos
        negated = self.pattern.startswith("^", end)
        end += negated
        members: list[str] = []
        if self.pattern.startswith("]", end):  # a leading ']' is the character itself
            members.append("]")
            end += 1
        while end < len(self.pattern) and self.pattern[end] != "]":
            step = 2 if self.pattern[end] == "\\" else 1
            members.append(self.pattern[end : end + step])
            end += step
        if end >= len(self.pattern):
            return None
        self.pos = end + 1
        if negated:
            body = "".join(members)
            return "a-z" in body or "A-Z" in body or "\\w" in body
        ranged = "-" in members[1:-1]  # an unescaped '-' between two members makes a range
        return not ranged and all(_padding_member(m) for m in members)

    def _group(self) -> _Tok | None:
        if self.pattern.startswith("?:", self.pos):
            self.pos += 2
        elif self.pattern.startswith("?P<", self.pos):
            close = self.pattern.find(">", self.pos)
            if close < 0:
                return None
            self.pos = close + 1
        elif self.pattern.startswith("?", self.pos):  # look-arounds, comments, scoped flags
            return None
        inner = self.sequence(inner=True)
        if inner is None or self._quantifier() is not None:
            return None
        return _Tok("group", branches=_branches(inner))


def _branches(tokens: list[_Tok] | tuple[_Tok, ...]) -> tuple[tuple[_Tok, ...], ...]:
    """``tokens`` split at their ``|`` bars: the alternatives they spell (one when there is no bar)."""
    branches: list[list[_Tok]] = [[]]
    for token in tokens:
        if token.kind == "bar":
            branches.append([])
        else:
            branches[-1].append(token)
    return tuple(tuple(b) for b in branches)


def _padding_member(member: str) -> bool:
    """A member of a class that matches spaces or punctuation only (``\\s``, ``\\W``, ``.``, ``\\-``)."""
    return member in ("\\s", "\\W") or not member[-1].isalnum()


@dataclass(frozen=True)
class _Shape:
    answers: tuple[str, ...]
    lead: tuple[_Tok, ...] = ()
    trail: tuple[_Tok, ...] = ()
    loose: bool = False


def _shape(tokens: list[_Tok] | tuple[_Tok, ...]) -> _Shape | None:
    """The answers ``tokens`` spell, with what stands before and after them."""
    if any(t.kind == "bar" for t in tokens):
        return _alternatives([_shape(b) for b in _branches(tokens)])
    start, end = 0, len(tokens)
    while start < end and tokens[start].kind in _LEAD:
        start += 1
    while end > start and tokens[end - 1].kind in _TRAIL:
        end -= 1
    lead, core, trail = tuple(tokens[:start]), tokens[start:end], tuple(tokens[end:])
    if len(core) == 1 and core[0].kind == "group":
        inner = _alternatives([_shape(b) for b in core[0].branches])
        if inner is None:
            return None
        return _Shape(inner.answers, lead + inner.lead, inner.trail + trail, inner.loose)
    if not core or core[0].kind == "space" or core[-1].kind == "space":
        return None
    if any(t.kind not in ("lit", "space") for t in core):
        return None
    answer = "".join(t.text for t in core)
    return _Shape((answer,), lead, trail, loose=any(t.loose for t in core))


def _alternatives(shapes: list[_Shape | None]) -> _Shape | None:
    """Several branches as one shape: each a plain answer, all standing in the same place."""
    if not shapes or any(s is None for s in shapes):
        return None
    found = [s for s in shapes if s is not None]
    first = found[0]
    if any((s.lead, s.trail) != (first.lead, first.trail) for s in found):
        return None
    answers = tuple(dict.fromkeys(a for s in found for a in s.answers))
    return _Shape(answers, first.lead, first.trail, any(s.loose for s in found))


def _describe(shape: _Shape, ignore_case: bool) -> ExpectedAnswer | None:
    lead, trail = shape.lead, shape.trail
    if any(t.kind == "start" for t in lead[1:]) or any(t.kind == "end" for t in trail[:-1]):
        return None  # an anchor behind padding: a shape this reader does not follow
    if any(not a.strip() for a in shape.answers):
        return None  # the empty output, or spaces: no answer to name
    start = lead[0].text if lead and lead[0].kind == "start" else None
    end = trail[-1].text if trail and trail[-1].kind == "end" else None
    pads = [t for t in lead + trail if t.kind in ("pad", "space")]
    plain_pads = all(t.plain for t in pads)  # \s* is not: "alone" would let punctuation in
    bound_before = any(t.kind == "bound" for t in lead)
    bound_after = any(t.kind == "bound" for t in trail)
    exact = not shape.loose
    if start and end:
        scope = "output" if start != end else start
        exact = exact and start == end and plain_pads
        if pads:
            where = "alone in the output" if scope == "output" else "alone on a line"
        else:
            where = "as the whole output" if scope == "output" else "as a whole line"
    elif start or end:
        scope = start or end or "output"
        article = "the output" if scope == "output" else "a line"
        where = f"at the {'start' if start else 'end'} of {article}"
        if bound_after if start else bound_before:
            where += ", as a word"
        exact = exact and not pads
    else:
        where = "as a word" if bound_before and bound_after else ""
        exact = exact and plain_pads and bound_before == bound_after
    return ExpectedAnswer(answers=shape.answers, ignore_case=ignore_case, where=where, exact=exact)
