"""Merge a step's proposed edits: dedupe, count support in code, rank, keep the budget."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from skilltune.proposal import Edit
from skilltune.propose.edit import check_edit
from skilltune.skill import Candidate

Schedule = Literal["constant", "linear", "cosine"]


@dataclass(frozen=True)
class EditBudget:
    """How many edits a step may keep: ``start`` at step 1 going to ``end`` at ``steps``.

    ``cosine`` (the default, 4 -> 2) keeps early steps bold and late steps careful.
    """

    schedule: Schedule = "cosine"
    start: int = 4
    end: int = 2
    steps: int = 10

    def at(self, step: int) -> int:
        if self.schedule == "constant" or self.steps <= 1:
            return max(1, self.start)
        progress = min(1.0, max(0.0, (step - 1) / (self.steps - 1)))
        if self.schedule == "linear":
            value = self.start + (self.end - self.start) * progress
        else:
            value = self.end + (self.start - self.end) * (1 + math.cos(math.pi * progress)) / 2
        return max(1, round(value))


class MergedEdit(BaseModel):
    edit: Edit
    support: list[str]
    count: int = Field(description="how many proposals said the same thing")


class MergeResult(BaseModel):
    budget: int
    kept: list[MergedEdit]
    dropped: list[dict[str, str]]  # {"edit": compact, "reason": ...}


def _norm(text: str | None) -> str:
    text = (text or "").lower()
    text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", text, flags=re.M)  # list markers
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def edit_text_key(text: str) -> str:
    """Two edits whose texts are equal under this key state the same rule (a step's spent edits)."""
    return _norm(text)


def edit_key(edit: Edit) -> tuple[str, str, str, str]:
    """Edits equal under this key are the same edit (text and anchor normalised)."""
    return (edit.op, edit.file, _norm(edit.anchor), _norm(edit.text))


def normal_form(candidate: Candidate) -> tuple[tuple[str, str], ...]:
    """Candidates equal under this key are the same skill (each file's text normalised as an edit's is)."""
    return tuple(sorted((path, _norm(text)) for path, text in candidate.files.items()))


def merge_edits(
    proposals: list[Edit], incumbent: Candidate, budget: int, known: set[str] | None = None
) -> MergeResult:
    """Group equal edits (support = distinct trajectory ids, counted here, not by the
    proposer, and only ids of trajectories it was shown when ``known`` is given); drop
    those that cannot apply to the incumbent; rank by support, then the proposer's
    rank, then first appearance; keep ``budget``. A ``description`` edit counts as one edit, and
    a candidate takes at most one (the strongest)."""
    groups: dict[tuple[str, str, str, str], list[tuple[int, Edit]]] = {}
    for index, edit in enumerate(proposals):
        groups.setdefault(edit_key(edit), []).append((index, edit))
    dropped: list[dict[str, str]] = []
    ranked: list[tuple[int, int, int, MergedEdit]] = []
    for members in groups.values():
        first_index = members[0][0]
        support = sorted({s for _, e in members for s in e.support if known is None or s in known})
        # Equal edits may word their anchor differently: the group stands if any wording applies.
        problems = [check_edit(incumbent, e) for _, e in members]
        usable = [e for (_, e), problem in zip(members, problems, strict=True) if problem is None]
        if not usable:
            dropped.append({"edit": members[0][1].compact(), "reason": problems[0] or ""})
            continue
        merged = MergedEdit(
            edit=usable[0].model_copy(update={"support": support}), support=support, count=len(members)
        )
        best_rank = min(e.rank for _, e in members)
        ranked.append((-len(support), best_rank, first_index, merged))
    ranked.sort(key=lambda item: item[:3])
    kept: list[MergedEdit] = []
    for *_, merged in ranked:
        if merged.edit.op == "description" and any(k.edit.op == "description" for k in kept):
            reason = "a candidate takes one description (a stronger one is kept)"
        elif len(kept) >= budget:
            reason = f"over the step's edit budget ({budget})"
        else:
            kept.append(merged)
            continue
        dropped.append({"edit": merged.edit.compact(), "reason": reason})
    return MergeResult(budget=budget, kept=kept, dropped=dropped)
