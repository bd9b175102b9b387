"""Train quotes: skill text that copies a span of one train task's prompt.

A rule such as ``if the ticket contains 'dashboard returns a 502', route to Support`` fits the
train task it quotes and no other, and it passes a train screen for that reason alone: vet drops
such an edit (propose/vet.py) and the audit warns of one in the best skill (review/audit.py).

Words are lowercase ``\\w+`` runs with JSON escapes removed, so case, punctuation, layout and
escaping do not hide a span (the leak search, review/leakage.py, reads text the same way). A
*quote* is a run of words of a train prompt found in the text:

- ``QUOTED_WORDS`` (4) or more words inside one quoted span of the text ('...', "...", `...`,
  curly quotes) that make at least half of that span: quoting marks the words as the task's own;
  three words ('charged twice for') are too little to key a rule on one task, labels ('billing',
  `support-tier-2`) are shorter, and four words of a long quote ('write the postmortem for' in a
  quoted sentence of another task) are phrasing the prompts share, not the quote;
- ``RUN_WORDS`` (8) or more consecutive words anywhere: a general rule shares short phrases with
  prompts ('reply with the ticket number only' is six words), eight in a row are copied;

held by the prompts of fewer than ``PATTERN_TASKS`` (2) train tasks (a span two tasks' prompts
share is a pattern of the split, which a rule may name), and not in the incumbent skill (words the
skill holds already are not the edit's quote).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

QUOTED_WORDS = 4
RUN_WORDS = 8
PATTERN_TASKS = 2

_ESCAPE = re.compile(r"\\[nrtbf\"\\/]|\\u[0-9a-fA-F]{4}")
_WORD = re.compile(r"\w+")
# A single quote opens only after a non-word character and closes only before one, and one between
# two word characters is an apostrophe inside the span: "customer's" and "don't" neither open nor
# close a quoted span, and 'it doesn't work' is one.
_QUOTED = re.compile(
    r"(?<!\w)(?:'((?:[^'\n]|(?<=\w)'(?=\w))+?)'|‘((?:[^’\n]|(?<=\w)’(?=\w))+?)’)(?!\w)"
    r"|\"([^\"\n]+?)\"|“([^”\n]+?)”|`([^`\n]+?)`"
)
Gram = tuple[str, ...]
T = TypeVar("T")


def words(text: str) -> list[str]:
    """The words of ``text``: lowercase ``\\w+`` runs, JSON escapes (``\\n``, ``\\u00e9``) removed."""
    return _WORD.findall(_ESCAPE.sub(" ", text).lower())


def windows(text_words: list[str], size: int) -> Iterator[Gram]:
    """Every run of ``size`` consecutive words, in order."""
    for i in range(len(text_words) - size + 1):
        yield tuple(text_words[i : i + size])


def passages(text_words: list[str], size: int, lookup: Callable[[Gram], T | None]) -> list[tuple[str, T]]:
    """The runs of ``text_words`` made of windows of ``size`` words that ``lookup`` knows, windows
    that overlap merged into one passage, each with what ``lookup`` said of its first window."""
    found: list[tuple[str, T]] = []
    start = end = -1
    source: T | None = None
    for i, gram in enumerate(windows(text_words, size)):
        where = lookup(gram)
        if where is None:
            continue
        if i <= end:  # overlaps the passage being built: extend it
            end = i + size - 1
            continue
        if source is not None:
            found.append((" ".join(text_words[start : end + 1]), source))
        start, end, source = i, i + size - 1, where
    if source is not None:
        found.append((" ".join(text_words[start : end + 1]), source))
    return found


def quoted_spans(text: str) -> list[list[str]]:
    """The words of each span of ``text`` inside quotes or backticks."""
    return [words(next(g for g in match.groups() if g is not None)) for match in _QUOTED.finditer(text)]


@dataclass(frozen=True)
class Quote:
    """A passage of an edit's text (its words, space-joined) copied from one train task's prompt."""

    text: str
    task_id: str


class TrainPrompts:
    """The train prompts a text is checked against: the windows of ``QUOTED_WORDS`` and of
    ``RUN_WORDS`` words of each, and which tasks' prompts hold each window."""

    def __init__(self, prompts: Mapping[str, str]) -> None:
        """``prompts``: task id -> its prompt (one per task: replicates are one task)."""
        self._held: dict[int, dict[Gram, set[str]]] = {QUOTED_WORDS: {}, RUN_WORDS: {}}
        for task_id, prompt in prompts.items():
            prompt_words = words(prompt)
            for size, index in self._held.items():
                for gram in windows(prompt_words, size):
                    index.setdefault(gram, set()).add(task_id)

    def quotes(self, text: str, skill: Iterable[str] = ()) -> list[Quote]:
        """The distinct quotes in ``text`` (see the module's docstring), in order; ``skill``: the texts
        of the skill the edit changes, whose words are not the edit's quote."""
        skill_words = [words(t) for t in skill]

        def lookup(size: int) -> Callable[[Gram], str | None]:
            known = {g for w in skill_words for g in windows(w, size)}
            index = self._held[size]

            def quoted_from(gram: Gram) -> str | None:
                held = index.get(gram)
                if held is None or len(held) >= PATTERN_TASKS or gram in known:
                    return None
                return next(iter(held))

            return quoted_from

        found = [Quote(p, task) for p, task in passages(words(text), RUN_WORDS, lookup(RUN_WORDS))]
        short = lookup(QUOTED_WORDS)
        for span in quoted_spans(text):
            for passage, task in passages(span, QUOTED_WORDS, short):
                if 2 * len(passage.split()) < len(span):
                    continue  # a few words of a longer quote: shared phrasing, not what was quoted
                # A quoted passage inside a longer run already found is the same quote.
                if not any(f" {passage} " in f" {q.text} " for q in found):
                    found.append(Quote(passage, task))
        return list(dict.fromkeys(found))
