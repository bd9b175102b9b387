"""A step's proposals as the report, ``status`` and the findings entry show them.

A step with several asks (``--proposals`` above 1, run schema 10) lists in its reflections.json
each ask's proposal with its train screen and fate, and the selection that built the candidate.
Here they become the report's ranked table (the screen's order: kept first, then by screen gain)
and the counts asked / screened / kept. A step of one ask has no proposals: none of this shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

from skilltune.runfiles import ProposalRecord, ProposalStatus, ReflectionsFile, ScreenFigures


class ProposalRow(BaseModel):
    """One proposal in the ranked table: what was asked, its edits, its screen and its fate."""

    rank: int
    index: int  # the ask's index (asks/ask_NN.json)
    rule: int = 0  # the rule's place in the ask's answer (each rule is screened on its own)
    kind: str  # focus or sample
    asked: str  # the focus label, or "sample"
    edits: list[str]  # compact forms (op@anchor: text)
    screen: ScreenFigures | None  # None: not screened (spent, no rule, not applied)
    attempts: int
    status: ProposalStatus
    reason: str

    @property
    def name(self) -> str:
        """``2.1``: ask 2's first rule (rules count from 1 as a reader reads them)."""
        return f"{self.index}.{self.rule + 1}"

    @property
    def badge(self) -> str:
        """The status as a CSS class (``screened out`` -> ``screened-out``)."""
        return self.status.replace(" ", "-")


class ProposalCounts(BaseModel):
    """Proposals over one step or a run: ``asked`` (one per ask), ``asked_again`` (asks whose first
    answer was spent), ``screened`` (ran on train), ``kept`` (in their step's candidate), and every
    status (``ProposalStatus``) with how many proposals ended there."""

    steps: int = 0
    asked: int = 0
    asked_again: int = 0
    screened: int = 0
    kept: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)

    def __add__(self, other: ProposalCounts) -> ProposalCounts:
        statuses = Counter(self.statuses)
        statuses.update(other.statuses)
        return ProposalCounts(
            steps=self.steps + other.steps, asked=self.asked + other.asked,
            asked_again=self.asked_again + other.asked_again, screened=self.screened + other.screened,
            kept=self.kept + other.kept, statuses=dict(sorted(statuses.items())),
        )  # fmt: skip

    def short(self) -> str:
        """``4 / 3 / 1``: asked / screened / kept."""
        return f"{self.asked} / {self.screened} / {self.kept}"

    def sentence(self) -> str:
        """The counts in words, e.g. ``32 asked in 8 steps (8 asked again), 14 screened, 4 kept``."""
        steps = f" in {self.steps} step{'' if self.steps == 1 else 's'}" if self.steps else ""
        again = f" ({self.asked_again} asked again)" if self.asked_again else ""
        return f"{self.asked} asked{steps}{again}, {self.screened} screened, {self.kept} kept"

    def others(self) -> str:
        """What became of the proposals not kept: ``6 spent, 3 screened out``, by count."""
        rest = sorted(((n, s) for s, n in self.statuses.items() if s != "kept"), key=lambda x: (-x[0], x[1]))
        return ", ".join(f"{n} {s}" for n, s in rest)


def _rank_key(p: ProposalRecord) -> tuple[bool, bool, float, int, int, int]:
    """Kept first, then the screened by gain (fewer broken, then ask order), then the rest by ask."""
    screen = p.screen
    return (
        p.status != "kept",
        screen is None,
        -(screen.gain if screen else 0.0),
        len(screen.broke) if screen else 0,
        p.index,
        p.rule,
    )


def ranked(proposals: Iterable[ProposalRecord]) -> list[ProposalRow]:
    """The proposals in the screen's order, each with its rank (from 1)."""
    return [_row(rank, p) for rank, p in enumerate(sorted(proposals, key=_rank_key), start=1)]


def _row(rank: int, p: ProposalRecord) -> ProposalRow:
    return ProposalRow(
        rank=rank,
        index=p.index,
        rule=p.rule,
        kind=p.kind,
        asked=p.label if p.kind == "focus" else "sample",
        edits=[e.compact() for e in p.edits],
        screen=p.screen,
        attempts=p.attempts,
        status=p.status,
        reason=p.reason,
    )


def counts(reflections: ReflectionsFile) -> ProposalCounts | None:
    """The step's proposal counts (None for a step of one ask, which lists no proposals)."""
    found = reflections.proposals
    if not found:
        return None
    return ProposalCounts(
        steps=1,
        asked=len(found),
        asked_again=sum(1 for p in found if p.attempts > 1),
        screened=sum(1 for p in found if p.screen is not None),
        kept=sum(1 for p in found if p.status == "kept"),
        statuses=dict(sorted(Counter(p.status for p in found).items())),
    )


def total(each: Iterable[ProposalCounts | None]) -> ProposalCounts | None:
    """The sum of the steps' counts (None when no step had proposals)."""
    found = [c for c in each if c is not None]
    if not found:
        return None
    out = ProposalCounts()
    for c in found:
        out = out + c
    return out
