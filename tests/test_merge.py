"""Merging a step's proposed edits: dedupe, support counted in code, rank, budget; edit budgets."""

from __future__ import annotations

from itertools import pairwise

import pytest

from skilltune.proposal import Edit
from skilltune.propose.edit import check_edit
from skilltune.propose.merge import EditBudget, MergeResult, Schedule, edit_key, merge_edits
from skilltune.skill import Candidate, load_skill
from tests.helpers import MOCK_SKILL

TEXT = """\
---
name: release-notes
description: Formats release notes. Use when asked to write or review release notes.
---
# Release notes

## Rules

- Always cite the source file and line for every claim.
- Group changes under Added, Changed and Fixed headings.
- Keep each entry to one sentence in the past tense.
- Never mention internal ticket numbers.

<!-- PROTECTED:conventions -->
## Conventions
Dates use ISO 8601 (YYYY-MM-DD).
<!-- /PROTECTED -->
"""


@pytest.fixture
def incumbent() -> Candidate:
    return Candidate({"SKILL.md": TEXT})


def append(text: str, support: list[str], rank: int = 0) -> Edit:
    return Edit(op="append", text=text, support=support, rank=rank)


def kept_texts(result: MergeResult) -> list[str]:
    return [m.edit.text for m in result.kept]


# --- dedupe and support ------------------------------------------------------------------------------


def test_duplicates_merge_with_union_of_distinct_support(incumbent: Candidate) -> None:
    proposals = [
        append("- Mention contributors by handle.", ["t1#r0"], rank=1),
        append("* mention contributors, by handle", ["t1#r0", "t2#r0"], rank=0),
        append("1. Mention   contributors by HANDLE!", ["t3#r1"], rank=2),
        append("  +  Mention contributors by handle", ["t2#r0"], rank=3),
    ]
    result = merge_edits(proposals, incumbent, budget=4)
    assert result.dropped == []
    assert len(result.kept) == 1
    merged = result.kept[0]
    assert merged.support == ["t1#r0", "t2#r0", "t3#r1"]
    assert merged.edit.support == ["t1#r0", "t2#r0", "t3#r1"]
    assert merged.count == 4
    assert merged.edit.text == "- Mention contributors by handle."  # the first proposal's wording
    assert merged.edit.rank == 1


def test_replace_duplicates_merge_across_anchor_case_and_whitespace(incumbent: Candidate) -> None:
    proposals = [
        Edit(op="replace", anchor="internal ticket numbers", text="ticket IDs", support=["a"]),
        Edit(op="replace", anchor="Internal  ticket numbers.", text="Ticket IDs!", support=["b"]),
    ]
    result = merge_edits(proposals, incumbent, budget=4)
    assert [(m.edit.anchor, m.support, m.count) for m in result.kept] == [
        ("internal ticket numbers", ["a", "b"], 2)
    ]


def test_support_counts_distinct_trajectories_not_claims(incumbent: Candidate) -> None:
    proposals = [
        # three proposals, one trajectory: support 1
        append("- Loud rule.", ["t1#r0", "t1#r0", "t1#r0"], rank=0),
        append("- loud rule", ["t1#r0"], rank=0),
        append("- Loud rule!", ["t1#r0"], rank=0),
        # one proposal, two trajectories: support 2
        append("- Quiet rule.", ["t2#r0", "t3#r0"], rank=5),
    ]
    result = merge_edits(proposals, incumbent, budget=1)
    assert [(m.edit.text, m.support, m.count) for m in result.kept] == [
        ("- Quiet rule.", ["t2#r0", "t3#r0"], 1)
    ]
    assert result.dropped == [{"edit": "append: - Loud rule.", "reason": "over the step's edit budget (1)"}]


def test_edit_without_support_has_zero_support(incumbent: Candidate) -> None:
    result = merge_edits([append("- A.", []), append("- B.", ["t1#r0"])], incumbent, budget=4)
    assert [(m.edit.text, m.support) for m in result.kept] == [("- B.", ["t1#r0"]), ("- A.", [])]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(
            Edit(op="append", text="- Keep entries short."),
            Edit(op="insert_after", anchor="Never mention internal", text="- Keep entries short."),
            id="different-op",
        ),
        pytest.param(
            Edit(op="insert_after", anchor="Always cite the source", text="- Keep entries short."),
            Edit(op="insert_after", anchor="Never mention internal", text="- Keep entries short."),
            id="different-anchor",
        ),
        pytest.param(
            Edit(op="replace", anchor="the past tense", text="plain words"),
            Edit(op="replace", anchor="Fixed headings", text="plain words"),
            id="different-replace-anchor",
        ),
        pytest.param(
            Edit(op="append", text="- Keep entries short."),
            Edit(op="append", text="- Keep entries shorter."),
            id="different-words",
        ),
    ],
)
def test_different_edits_are_not_merged(incumbent: Candidate, a: Edit, b: Edit) -> None:
    assert edit_key(a) != edit_key(b)
    result = merge_edits([a.model_copy(update={"support": ["x"]}), b], incumbent, budget=4)
    assert [m.count for m in result.kept] == [1, 1]
    assert [(m.edit.op, m.edit.anchor) for m in result.kept] == [(a.op, a.anchor), (b.op, b.anchor)]


def test_edits_on_different_files_are_not_merged() -> None:
    incumbent = Candidate({"SKILL.md": TEXT, "references/guide.md": "# Guide\n"})
    a = Edit(op="append", text="- Same.")
    b = Edit(op="append", file="references/guide.md", text="- Same.")
    result = merge_edits([a, b], incumbent, budget=4)
    assert [m.edit.file for m in result.kept] == ["SKILL.md", "references/guide.md"]


# --- ranking and budget -----------------------------------------------------------------------------


def test_ranking_support_then_rank_then_order(incumbent: Candidate) -> None:
    proposals = [
        append("- A.", ["t1"], rank=2),
        append("- B.", ["t1", "t2"], rank=5),
        append("- C.", ["t3"], rank=0),
        append("- D.", ["t4"], rank=0),
        append("- E.", ["t1", "t2", "t3"], rank=9),
        append("- F.", ["t2"], rank=1),
    ]
    result = merge_edits(proposals, incumbent, budget=10)
    assert kept_texts(result) == ["- E.", "- B.", "- C.", "- D.", "- F.", "- A."]
    assert result.dropped == []
    assert result.budget == 10


def test_rank_of_a_group_is_its_best_member(incumbent: Candidate) -> None:
    proposals = [
        append("- A.", ["t1"], rank=3),
        append("- B.", ["t2"], rank=1),
        append("- a", ["t1"], rank=0),  # same as A, same trajectory: support stays 1, best rank 0
    ]
    result = merge_edits(proposals, incumbent, budget=10)
    assert kept_texts(result) == ["- A.", "- B."]
    assert result.kept[0].count == 2


@pytest.mark.parametrize("budget", [0, 1, 2, 3])
def test_budget_keeps_the_top_n(incumbent: Candidate, budget: int) -> None:
    proposals = [
        append("- A.", ["t1"], rank=0),
        append("- B.", ["t1", "t2", "t3"], rank=0),
        append("- C.", ["t1", "t2"], rank=0),
    ]
    result = merge_edits(proposals, incumbent, budget=budget)
    order = ["- B.", "- C.", "- A."]
    assert kept_texts(result) == order[:budget]
    assert [d["edit"] for d in result.dropped] == [f"append: {t}" for t in order[budget:]]
    for dropped in result.dropped:
        assert "budget" in dropped["reason"]
        assert f"({budget})" in dropped["reason"]
    assert result.budget == budget


def test_unappliable_edits_are_dropped_with_the_patch_error(incumbent: Candidate) -> None:
    missing = Edit(
        op="replace", anchor="Write entries in French.", text="x", support=["t1", "t2", "t3", "t4"]
    )
    protected = Edit(op="delete", anchor="Dates use ISO 8601", support=["t1", "t2", "t3"])
    good = append("- Fine.", ["t5"], rank=7)
    result = merge_edits([missing, protected, good], incumbent, budget=10)
    assert kept_texts(result) == ["- Fine."]
    assert result.dropped == [
        {"edit": missing.compact(), "reason": check_edit(incumbent, missing)},
        {"edit": protected.compact(), "reason": check_edit(incumbent, protected)},
    ]
    assert "not found" in result.dropped[0]["reason"]
    assert "PROTECTED block" in result.dropped[1]["reason"]
    assert all("budget" not in d["reason"] for d in result.dropped)


def test_group_is_kept_when_an_equal_member_applies(incumbent: Candidate) -> None:
    unappliable = Edit(
        op="delete", anchor="1. NEVER... mention (internal) ticket-numbers!!", support=["t1", "t2"]
    )
    appliable = Edit(op="delete", anchor="Never mention internal ticket numbers", support=["t3"])
    assert edit_key(unappliable) == edit_key(appliable)
    assert check_edit(incumbent, unappliable) is not None
    assert check_edit(incumbent, appliable) is None
    result = merge_edits([unappliable, appliable], incumbent, budget=4)
    assert [(m.support, m.count) for m in result.kept] == [(["t1", "t2", "t3"], 2)]
    assert check_edit(incumbent, result.kept[0].edit) is None


def test_unappliable_edits_do_not_use_the_budget(incumbent: Candidate) -> None:
    bad = Edit(op="delete", anchor="nowhere", support=["t1", "t2", "t3"])
    result = merge_edits([bad, append("- A.", ["t1"]), append("- B.", [])], incumbent, budget=2)
    assert kept_texts(result) == ["- A.", "- B."]
    assert len(result.dropped) == 1
    assert "not found" in result.dropped[0]["reason"]


def test_merge_nothing(incumbent: Candidate) -> None:
    assert merge_edits([], incumbent, budget=3) == MergeResult(budget=3, kept=[], dropped=[])


def test_merge_does_not_mutate_proposals(incumbent: Candidate) -> None:
    first = append("- A.", ["t2"])
    second = append("- a", ["t1"])
    merge_edits([first, second], incumbent, budget=3)
    assert first.support == ["t2"]
    assert second.support == ["t1"]


# --- EditBudget --------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [0, 1, 2, 5, 10, 50])
def test_constant_budget(step: int) -> None:
    assert EditBudget("constant", start=3, end=1, steps=10).at(step) == 3


def test_linear_budget() -> None:
    budget = EditBudget("linear", start=4, end=2, steps=5)
    # 4, 3.5, 3, 2.5, 2 rounded half to even
    assert [budget.at(s) for s in range(1, 6)] == [4, 4, 3, 2, 2]


def test_linear_budget_growing() -> None:
    budget = EditBudget("linear", start=1, end=5, steps=5)
    assert [budget.at(s) for s in range(1, 6)] == [1, 2, 3, 4, 5]


def test_cosine_budget() -> None:
    budget = EditBudget("cosine", start=4, end=2, steps=10)
    # 2 + (1 + cos(pi * (s - 1) / 9)): 4, 3.94, 3.77, 3.5, 3.17, 2.83, 2.5, 2.23, 2.06, 2
    values = [budget.at(s) for s in range(1, 11)]
    assert values == [4, 4, 4, 4, 3, 3, 2, 2, 2, 2]
    assert values[0] == 4
    assert values[-1] == 2
    assert all(a >= b for a, b in pairwise(values))


def test_default_budget_is_cosine_4_to_2() -> None:
    assert EditBudget() == EditBudget("cosine", 4, 2, 10)
    assert [EditBudget().at(s) for s in range(1, 11)] == [4, 4, 4, 4, 3, 3, 2, 2, 2, 2]


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_budget_clamps_outside_the_schedule(schedule: Schedule) -> None:
    budget = EditBudget(schedule, start=4, end=2, steps=5)
    assert budget.at(0) == budget.at(-3) == 4
    assert budget.at(5) == budget.at(6) == budget.at(100) == 2


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
@pytest.mark.parametrize(("start", "end"), [(1, 1), (3, 0), (1, -2), (2, 0)])
def test_budget_never_below_one(schedule: Schedule, start: int, end: int) -> None:
    budget = EditBudget(schedule, start=start, end=end, steps=6)
    assert all(budget.at(s) >= 1 for s in range(0, 10))


def test_budget_start_one_end_one_is_always_one() -> None:
    for schedule in ("constant", "linear", "cosine"):
        budget = EditBudget(schedule, start=1, end=1, steps=6)
        assert [budget.at(s) for s in range(1, 7)] == [1] * 6


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_interpolated_budget_with_zero_start_is_still_one(schedule: Schedule) -> None:
    budget = EditBudget(schedule, start=0, end=0, steps=6)
    assert [budget.at(s) for s in range(1, 7)] == [1] * 6


@pytest.mark.parametrize(("schedule", "steps"), [("constant", 6), ("linear", 1), ("cosine", 0)])
def test_unclamped_budget_paths_are_never_below_one(schedule: Schedule, steps: int) -> None:
    budget = EditBudget(schedule, start=0, end=0, steps=steps)
    assert budget.at(1) == 1


def test_budget_falls_to_one_at_the_end() -> None:
    assert [EditBudget("linear", start=3, end=0, steps=4).at(s) for s in range(1, 5)] == [3, 2, 1, 1]


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
@pytest.mark.parametrize("steps", [0, 1])
def test_single_step_budget_is_start(schedule: Schedule, steps: int) -> None:
    budget = EditBudget(schedule, start=4, end=2, steps=steps)
    assert [budget.at(s) for s in (0, 1, 2, 5)] == [4, 4, 4, 4]


def test_merge_counts_only_shown_trajectory_ids_as_support() -> None:
    """With known ids, an edit citing invented trajectories loses to one backed by two real ones."""
    incumbent = load_skill(MOCK_SKILL)
    invented = Edit(op="append", text="- Invented rule.", support=["x#r1", "y#r2", "z#r3"], rank=0)
    real = Edit(op="append", text="- Real rule.", support=["train-a#r0", "train-b#r0", "ghost#r9"], rank=1)
    known = {"train-a#r0", "train-b#r0", "train-c#r0"}
    unchecked = merge_edits([invented, real], incumbent, budget=1)
    assert [m.edit.text for m in unchecked.kept] == ["- Invented rule."]
    merged = merge_edits([invented, real], incumbent, budget=1, known=known)
    assert [m.edit.text for m in merged.kept] == ["- Real rule."]
    assert merged.kept[0].support == ["train-a#r0", "train-b#r0"]
    assert [d["reason"] for d in merged.dropped] == ["over the step's edit budget (1)"]
