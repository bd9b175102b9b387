"""The mock proposer's description rewrite: deterministic, from the train requests the skill
missed and the ones it wrongly triggered on.

A description's "use when" clause is rebuilt from words. It adds words of the missed requests
that more of them hold than requests that should not load the skill, greedily: the word that the
most still-uncovered missed requests hold, less the requests that should not load it, first (on a tie, a word of the skill's own body, then the longest:
longer words tend to be the specific ones); a word only one request uses is taken only when
the skill's body uses it too (one request is thin evidence). It drops a clause word that a false
trigger holds when every request that should load the skill and holds it keeps another word. Words are compared as the mock agent reads them (``agents.mock.trigger_terms``: stemmed,
stop words aside), so the rule is the mock's counterpart, not a rule of any one suite.
"""

from __future__ import annotations

from collections import Counter

from skilltune.agents.mock import normalise, trigger_terms
from skilltune.proposal import TriggerCase
from skilltune.skill import WHEN_CLAUSE

MAX_WORDS = 40  # words of a rebuilt clause (a description stays far below 1024 characters)
LEAD = "Use when the user asks about"  # the clause's opening: every word of it is a stop word or short


def _term(word: str) -> str | None:
    """The key term a word is to the mock agent (None: a stop word, or too short)."""
    terms = trigger_terms(word)
    return next(iter(terms)) if terms else None


def _words(text: str) -> list[tuple[str, str]]:
    """(word, term) for each word of ``text`` that is a key term, first occurrence of each term."""
    out: dict[str, str] = {}
    for word in normalise(text).split():
        term = _term(word)
        if term is not None and term not in out:
            out[term] = word
    return [(word, term) for term, word in out.items()]


def _terms(text: str) -> set[str]:
    return {term for _, term in _words(text)}


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def rewrite_description(
    description: str, cases: list[TriggerCase], body: str = ""
) -> tuple[str, list[str]] | None:
    """The new description and the ids of the cases behind it; None when the cases ask no change.
    ``body``: the skill's body, whose words break ties between a missed request's words (the
    skill's own text says what it is about)."""
    found = WHEN_CLAUSE.search(description)
    lead, clause = (description[: found.start()], description[found.end() :]) if found else ("", description)
    terms = _terms(clause)
    should = [c for c in cases if c.should_trigger]
    unwanted = Counter(term for c in cases if not c.should_trigger for term in _terms(c.prompt))
    false = [c for c in cases if c.loaded and not c.should_trigger]
    missed = [c for c in should if not c.loaded]
    in_body = _terms(body)
    support = Counter(term for c in missed for term in _terms(c.prompt) if term not in terms)
    surface = {term: word for c in missed for word, term in _words(c.prompt)}
    added: dict[str, str] = {}  # term -> word
    uncovered = [c for c in missed if _terms(c.prompt) & set(support)]
    while uncovered:
        counts = Counter(t for c in uncovered for t in _terms(c.prompt) if t in support and t not in added)
        # A word one request alone uses is taken only when the skill's own text uses it too.
        eligible = [t for t in counts if counts[t] > unwanted[t] and (counts[t] >= 2 or t in in_body)]
        if not eligible:
            break
        # The term itself breaks what is left of a tie: set order changes with each process's hash seed.
        best = max(eligible, key=lambda t: (counts[t] - unwanted[t], t in in_body, len(surface[t]), t))
        added[best] = surface[best]
        uncovered = [c for c in uncovered if best not in _terms(c.prompt)]
    cited = [c.id for c in missed if _terms(c.prompt) & set(added)]
    # A term a false trigger holds goes when every request that should load the skill and holds
    # it keeps another term: the requests it rightly took stay taken.
    drop: set[str] = set()
    culprits = sorted(terms, key=lambda t: (-sum(t in _terms(c.prompt) for c in false), t))
    for term in (t for t in culprits if any(t in _terms(c.prompt) for c in false)):
        left = (terms | set(added)) - drop - {term}
        if all(_terms(c.prompt) & left for c in should if term in _terms(c.prompt)):
            drop.add(term)
    cited += [c.id for c in false if _terms(c.prompt) & drop]
    if not added and not drop:
        return None
    kept = [word for word, term in _words(clause) if term not in drop]
    words = [*kept, *added.values()][:MAX_WORDS]
    if not words:
        return None
    head = lead.strip() if found else description.strip()
    return f"{head} {LEAD} {_join(words)}.".strip(), sorted(set(cited))
