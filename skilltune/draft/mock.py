"""The mock drafter: plausible, varied queries from the skills' names and descriptions, with no model.

Deterministic on (seed, bucket), so tests and the offline demo repeat. Each bucket's queries are
templates of its kind filled with the skill's topic (its name's words: ``release-notes`` ->
"release notes"), the verb its description opens with ("Writes ..." -> "write") and a context
("v2.4.0", "the mobile app"...), in an order shuffled once per bucket; a later call of the bucket
goes on where the queries written so far stop. Near misses borrow a word of the target's name
for a sibling's topic; unrelated requests are everyday coding asks that hold no word of any
skill's description. Every answer plants two near-duplicates (an earlier query with its case and
punctuation changed, and one with "please" in front) so that the dedupe always has work.

The label check answers as the mock agent decides to load a skill (skilltune/agents/mock.py): the
skill whose key terms (its "use when" clause's words and its name's, stemmed) the query holds
most, ties to more letters matched, then to the name first in order; none when it holds none.
"""

from __future__ import annotations

import itertools
import json
import re

from skilltune.agents.mock import loads_skill
from skilltune.draft.asks import Card, CheckAsk, QueryAsk, key_words
from skilltune.draft.base import DraftCall, Drafted, Drafter
from skilltune.stats.seeds import seeded_random

_CONTEXTS = (
    "v2.4.0", "the mobile app", "this sprint", "the 3.0 release", "the payments service",
    "last week's work", "the api gateway", "the public beta", "the admin dashboard", "version 1.9",
    "the cli tool", "the q3 milestone", "the docs site", "the data pipeline", "the ios build",
    "the search service", "the onboarding flow", "the billing module", "release 5.2", "the android client",
)  # fmt: skip
_TRIGGER = {
    "terse": (
        "{v} {t} for {c}",
        "{t}, {c}, due today",
        "{c}: {t} pls",
        "{t} draft for {c} by friday",
        "short {t} for {c}, bullet points",
    ),
    "question": (
        "can you {v} the {t} for {c}?",
        "what should go in the {t} for {c}?",
        "would you {v} {t} for {c} before the demo?",
        "any chance of {t} for {c} this afternoon?",
        "how would you word the {t} for {c}?",
    ),
    "casual": (
        "hey can u {v} the {t} for {c}",
        "ok so {t} for {c} pls",
        "{t} for {c} asap, boss is asking",
        "quick one, {t} for {c}?",
        "lol forgot the {t} for {c}, help",
    ),
}
# A long request: an opening with the context, the ask, and a constraint.
_OPENINGS = (
    "I'm wrapping up {c} and the team is waiting on me.",
    "We just finished {c} after a rough couple of weeks.",
    "Context: {c} is nearly done and I have a pile of notes from it.",
    "Our team owns {c}, and the stakeholders keep asking what changed.",
    "My manager is out and I'm covering {c} this week.",
    "Work on {c} wrapped up yesterday.",
)
_ASKS = (
    "Could you {v} the {t}?",
    "I need the {t} today.",
    "Please {v} the {t} from what we have.",
    "Can you put together the {t}?",
)
_ENDINGS = (
    "Keep it short and readable for people outside engineering.",
    "Flag anything that looks unclear.",
    "Plain words please, no marketing tone.",
    "Someone new to the project should be able to follow it.",
    "Bullet points are fine.",
    "It goes to customers, so be careful with the wording.",
)
_NEAR = (
    "{s} for the {w} of {c}", "help with the {s} about the {w} for {c}",
    "can you look at the {s} from the {w} work on {c}?", "I need the {s} that mention the {w} in {c}",
    "sort out the {s} for the {w} branch of {c}",
)  # fmt: skip
_CHORES = (
    "refactor", "add type hints to", "speed up", "add logging to", "document", "fix the off-by-one bug in",
    "rename the variables in", "explain", "remove the dead code from", "add input validation to",
)  # fmt: skip
_THINGS = (
    "the csv parser", "the login form", "the cache layer", "the retry helper", "the date utils",
    "the image resizer", "the config loader", "the rate limiter", "the search endpoint", "the user model",
    "the websocket client", "the sql migrations",
)  # fmt: skip
_WORD = re.compile(r"[a-z0-9]+")


def topic(card: Card) -> str:
    return " ".join(w for w in re.split(r"[^A-Za-z0-9]+", card.name.lower()) if w)


def verb(card: Card) -> str:
    """The verb a description opens with, as a request says it ("Writes" -> "write")."""
    first = (card.description.split() or ["write"])[0].lower().strip(".,:;")
    if first.endswith(("ches", "shes", "xes", "sses", "zes")):
        return first[:-2]
    if first.endswith("ies"):
        return first[:-3] + "y"
    return first[:-1] if first.endswith("s") and not first.endswith("ss") else first


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class MockDrafter(Drafter):
    """Deterministic queries and label checks (see the module's docstring)."""

    name = "mock"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.given: dict[str, set[str]] = {}  # bucket -> the queries answered so far (never twice)

    def _pool(self, ask: QueryAsk) -> list[str]:
        """Every query the mock can write for the ask's bucket, in the bucket's own shuffled order."""
        skill, bucket = ask.skill, ask.bucket
        if bucket.style == "long":
            parts = itertools.product(_OPENINGS, _ASKS, _ENDINGS, _CONTEXTS)
            pool = [" ".join((o, a, e)).format(v=verb(skill), t=topic(skill), c=c) for o, a, e, c in parts]
        elif bucket.kind == "should-trigger":
            pool = [
                t.format(v=verb(skill), t=topic(skill), c=c)
                for t, c in itertools.product(_TRIGGER[bucket.style], _CONTEXTS)
            ]
            if bucket.style == "casual":
                pool = [q.lower().rstrip(".") for q in pool]
        elif bucket.kind == "near-miss":
            sibling = ask.sibling()
            borrowed = [
                w for w in key_words(skill) if w not in _words(sibling.name + " " + sibling.description)
            ]
            pool = [
                t.format(s=topic(sibling), w=w, c=c)
                for t, w, c in itertools.product(_NEAR, borrowed[:2] or key_words(skill)[:1], _CONTEXTS)
            ]
        else:
            taken = set().union(*(_words(" ".join([c.name, *key_words(c)])) for c in (skill, *ask.catalogue)))
            pool = [
                f"{chore} {thing}"
                for chore, thing in itertools.product(_CHORES, _THINGS)
                if not _words(f"{chore} {thing}") & taken
            ]
        seeded_random(self.seed, bucket.key).shuffle(pool)
        return pool

    def write(self, ask: QueryAsk) -> Drafted[list[str]]:
        given = self.given.setdefault(ask.bucket.key, set())
        fresh = [q for q in self._pool(ask) if q not in given and q not in ask.written][: ask.n]
        if len(fresh) >= 4:  # an earlier query again, its case and final punctuation changed
            first = fresh[0]
            fresh[3] = (first[:1].upper() + first[1:]).rstrip("?.!") + ("." if first[-1:] != "." else "!")
        if len(fresh) >= 7:  # and one with a word more in front
            fresh[6] = f"please {fresh[1]}"
        given.update(fresh)
        call = DraftCall(
            ask=ask.label, drafter=self.name, model="mock", prompt=ask.prompt(), answer=json.dumps(fresh)
        )
        return Drafted(fresh, True, [call])

    def classify(self, ask: CheckAsk) -> Drafted[str | None]:
        scores = []
        for card in (ask.skill, *ask.catalogue):
            _, matched = loads_skill(f"{card.description} {topic(card)}", ask.query)
            if matched:
                scores.append((-len(matched), -sum(map(len, matched)), card.name))
        choice = min(scores)[2] if scores else None
        call = DraftCall(
            ask="check", drafter=self.name, model="mock", prompt=ask.prompt(), answer=choice or "none"
        )
        return Drafted(choice, True, [call])
