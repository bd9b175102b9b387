"""Vetting proposed edits (citations, train quotes, anchor repair), the growth cap's floor, fitting a
patch under it, and the val-free outcome the proposer is told."""

from __future__ import annotations

from typing import Literal

import pytest

from skilltune.proposal import Edit, EvidencePacket, Proposal, Trajectory, TriggerCase
from skilltune.propose.edit import GROWTH_ALLOWED, PatchError, fit_growth, growth_limit, lint_edit
from skilltune.propose.merge import normal_form
from skilltune.propose.prompts import reflect_prompt, slow_update_prompt
from skilltune.propose.reflect import rejected_buffer, render_memory
from skilltune.propose.vet import (
    anchor_problem,
    anchor_repair_prompt,
    copyable_lines,
    drop_uncited,
    parse_anchor_repair,
    repair_anchors,
    vet_edits,
)
from skilltune.runfiles import UnitRecord
from skilltune.skill import Candidate

SKILL = """\
---
name: routing
description: Routes tickets.
---
# Routing tickets

- Read the ticket.
- Answer with one label.

<!-- PROTECTED:slow-update -->
- Kept by the slow update.
<!-- /PROTECTED -->
"""


def _trajectory(task: str, replicate: int) -> Trajectory:
    return Trajectory(
        id=f"{task}#r{replicate}", task_id=task, prompt="p", output="o", hard=0, soft=0.0, status="ok"
    )


def _packet(skill: str = SKILL) -> EvidencePacket:
    return EvidencePacket(
        step=1, mode="patch", skill_files={"SKILL.md": skill}, skill_main="SKILL.md",
        failures=[_trajectory("train-a", 0), _trajectory("train-a", 1)],
        successes=[_trajectory("train-b", 0)],
    )  # fmt: skip


def test_an_edit_citing_no_trajectory_of_the_packet_is_dropped_with_its_reason() -> None:
    edits = [
        Edit(op="append", text="- Copy the schema.", support=["<trajectory id>"]),
        Edit(op="append", text="- Nothing cited."),
        Edit(op="append", text="- Cites one.", support=["train-b#r0", "val-x#r0"]),
        Edit(op="append", text="- Cites a task.", support=[" train-a "]),
    ]
    vetted = drop_uncited(Proposal(edits=edits), _packet())
    assert [(e.text, e.support) for e in vetted.edits] == [
        ("- Cites one.", ["train-b#r0"]),  # an id the proposer was not shown does not count
        ("- Cites a task.", ["train-a#r0", "train-a#r1"]),  # a bare task id names its trajectories
    ]
    assert [(d.edit.text, d.reason) for d in vetted.dropped] == [
        ("- Copy the schema.", "cites no trajectory of this step's evidence (it cited '<trajectory id>')"),
        ("- Nothing cited.", "cites no trajectory of this step's evidence (it cited nothing)"),
    ]


TICKET = (
    'Customer message:\n"Since this morning the dashboard returns a 502 whenever I open the Reports tab."'
)
ROUTE = "\n\nWhich team should handle this ticket: Support, Billing or Engineering?"


def _ticket(task: str, replicate: int, message: str) -> Trajectory:
    return _trajectory(task, replicate).model_copy(update={"prompt": message + ROUTE})


def test_an_edit_quoting_a_train_prompt_is_dropped_with_the_task_and_the_quote() -> None:
    """Issue 31: the 1.5B analyst keyed a rule on a span of one ticket. Replicates of a task are one
    prompt; the question every ticket ends with is the split's pattern, which a rule may name."""
    packet = _packet().model_copy(
        update={
            "failures": [_ticket("ticket-502", 0, TICKET), _ticket("ticket-502", 1, TICKET)],
            "successes": [
                _ticket("ticket-refund", 0, 'Customer message:\n"Still no refund after two weeks."')
            ],
        }
    )
    edits = [
        Edit(op="append", text="- If the ticket contains 'dashboard returns a 502', route to Support.",
             support=["ticket-502#r0"]),
        Edit(op="append", text="- Route billing questions to Billing.", support=["ticket-refund#r0"]),
        Edit(op="append", text="- Answer 'which team should handle this ticket' with one word.",
             support=["ticket-refund"]),
        Edit(op="insert_after", anchor="- Read the ticket.", support=["ticket-502"],
             text="- Since this morning the dashboard returns a 502? Engineering. 'Still no refund after two weeks'?"),
        Edit(op="append", text="- 'dashboard returns a 502' cites nothing.", support=["<trajectory id>"]),
    ]  # fmt: skip
    vetted = vet_edits(Proposal(edits=edits), packet)
    assert [e.text for e in vetted.edits] == [edits[1].text, edits[2].text]
    assert [d.reason for d in vetted.dropped] == [
        "cites no trajectory of this step's evidence (it cited '<trajectory id>')",
        "quotes train task ticket-502's prompt: 'dashboard returns a 502'",
        "quotes train task ticket-502's prompt: 'since this morning the dashboard returns a 502' (and 1 more span(s))",
    ]
    # the same words in the skill already are not the edit's quote
    skill = SKILL.replace(
        "- Read the ticket.", "- Read the ticket: 'dashboard returns a 502' is a server fault."
    )
    again = vet_edits(
        Proposal(edits=edits[:1]), packet.model_copy(update={"skill_files": {"SKILL.md": skill}})
    )
    assert [e.text for e in again.edits] == [edits[0].text] and again.dropped == []


def test_a_pattern_is_judged_on_the_whole_batch_not_on_one_asks_part_of_it() -> None:
    """A focused ask shows one failure group and two passing trajectories: there the question every
    ticket-number task asks is one task's words; the step's batch shows it is the split's pattern."""
    question = "\n\nWhich ticket number is the customer writing about?"
    batch = _packet().model_copy(
        update={
            "failures": [
                _ticket("ticket-a", 0, 'Customer message:\n"Re: ticket 48213, still no refund."' + question),
                _ticket(
                    "ticket-b", 0, 'Customer message:\n"About case #77120: the export fails."' + question
                ),
            ],
            "successes": [_ticket("area-a", 0, 'Customer message:\n"I was charged twice."')],
        }
    )
    focused = batch.model_copy(update={"failures": batch.failures[:1]})
    edit = Edit(
        op="append", support=["ticket-a#r0"],
        text="- When asked 'Which ticket number is the customer writing about?', reply with its digits only.",
    )  # fmt: skip
    alone = vet_edits(Proposal(edits=[edit]), focused)
    assert [d.reason for d in alone.dropped] == [
        "quotes train task ticket-a's prompt: 'which ticket number is the customer writing about'"
    ]
    assert vet_edits(Proposal(edits=[edit]), focused, batch=batch).edits == [edit]


def test_a_description_quoting_a_trigger_request_is_dropped() -> None:
    request = "Please deploy the staging cluster to eu-west-1 tonight, after the freeze."
    packet = _packet().model_copy(
        update={
            "component": "description",
            "triggers": [
                TriggerCase(id="deploy-eu#r0", task_id="deploy-eu", prompt=request, should_trigger=True, loaded=False),
                TriggerCase(id="weather#r0", task_id="weather", prompt="Will it rain?", should_trigger=False, loaded=False),
            ],
        }
    )  # fmt: skip
    quoting = Edit(
        op="description",
        support=["deploy-eu#r0"],
        text="Routes tickets. Use when asked to 'deploy the staging cluster to eu-west-1'.",
    )
    general = Edit(op="description", support=["deploy-eu#r0"],
                   text="Routes tickets. Use when asked to deploy a cluster to a region.")  # fmt: skip
    vetted = vet_edits(Proposal(edits=[quoting, general]), packet)
    assert vetted.edits == [general]
    assert [d.reason for d in vetted.dropped] == [
        "quotes train task deploy-eu's prompt: 'deploy the staging cluster to eu west 1'"
    ]


def test_an_outcome_copied_from_the_prompt_is_taken_out_of_an_edit() -> None:
    """What the 1.5B analyst did by hand: it copied the memory's "(rejected by the gate on val)"
    after an earlier edit into its new edit's text, which was appended to the skill as it was."""
    edits = [
        Edit(
            op="append", text="- List the follow-ups. (rejected by the gate on val)", support=["train-a#r0"]
        ),
        Edit(op="append", text="- Name an owner — kept by the gate on val", support=["train-a#r0"]),
        Edit(op="append", text="- A gate on val decides (its words stay).", support=["train-a#r0"]),
    ]
    vetted = drop_uncited(Proposal(edits=edits), _packet())
    assert [e.text for e in vetted.edits] == [
        "- List the follow-ups.", "- Name an owner", "- A gate on val decides (its words stay).",
    ]  # fmt: skip


def test_anchor_problems_and_the_lines_a_repair_may_copy() -> None:
    packet = _packet()
    missing = Edit(op="insert_after", anchor="# Routing", text="- New.", support=["train-a#r0"])
    assert anchor_problem(packet, missing) is None  # a unique part of a line is an anchor
    wrong = missing.model_copy(update={"anchor": "## Optimizer memory"})
    assert "anchor not found" in (anchor_problem(packet, wrong) or "")
    locked = missing.model_copy(update={"anchor": "Kept by the slow update."})
    assert "PROTECTED" in (anchor_problem(packet, locked) or "")
    assert anchor_problem(packet, Edit(op="append", text="- x")) is None
    assert copyable_lines(SKILL) == ["# Routing tickets", "- Read the ticket.", "- Answer with one label."]
    prompt = anchor_repair_prompt(packet, [(wrong, "anchor not found: '## Optimizer memory'")])
    assert "'## Optimizer memory'" in prompt and "- Answer with one label." in prompt
    assert "Kept by the slow update" not in prompt and "name: routing" not in prompt


def test_a_repair_takes_only_anchors_that_work() -> None:
    packet = _packet()
    edits = [
        Edit(op="insert_after", anchor="nowhere", text="- A.", support=["train-a#r0"]),
        Edit(op="append", text="- B.", support=["train-a#r0"]),
        Edit(op="replace", anchor="also nowhere", text="- C.", support=["train-a#r0"]),
    ]
    anchors = parse_anchor_repair({"anchors": ["- Read the ticket.", "still nowhere"]})
    repaired, count = repair_anchors(edits, [0, 2], anchors, packet)
    assert count == 1
    assert [e.anchor for e in repaired] == ["- Read the ticket.", None, "also nowhere"]
    assert parse_anchor_repair(["x", None]) == ["x", None]
    with pytest.raises(ValueError, match="schema"):
        parse_anchor_repair({"edits": []})


def test_a_short_skill_may_grow_by_900_characters_as_skill_trainers_may() -> None:
    """The issue's case: a 158-character seed and three one-line rules (466 characters) were linted
    away under 1.5 x length + 200 (cap 437)."""
    assert growth_limit(158, 0.5) == 158 + GROWTH_ALLOWED
    assert growth_limit(4000, 0.5) == 6200  # a long skill keeps the proportional cap
    seed = Candidate({"SKILL.md": "---\nname: r\ndescription: d.\n---\n" + "x" * 126})
    grown = seed.replace_file("SKILL.md", seed.text + "- rule\n" * 44)
    assert len(seed.text) == 158 and len(grown.text) == 466
    assert lint_edit(grown, seed, 0.5) is None
    over = seed.replace_file("SKILL.md", seed.text + "y" * (GROWTH_ALLOWED + 1))
    assert "grew from 158 to 1059 characters (cap 1058)" in (lint_edit(over, seed, 0.5) or "")


def test_a_patch_over_the_cap_keeps_its_strongest_edits_that_fit() -> None:
    seed = Candidate({"SKILL.md": SKILL})
    edits = [
        Edit(op="append", text="- Strongest rule.", rank=0),
        Edit(op="append", text="- " + "long " * 200, rank=1),
        Edit(op="insert_after", anchor="- Read the ticket.", text="- Weakest rule.", rank=2),
    ]
    candidate, kept, left = fit_growth(seed, edits, 0.5)
    assert [e.text for e in kept] == ["- Strongest rule.", "- Weakest rule."]
    assert "- Strongest rule." in candidate.text and "long long" not in candidate.text
    assert [e.rank for e, _ in left] == [1] and "over the growth cap" in left[0][1]
    with pytest.raises(PatchError, match="no edit fits"):
        fit_growth(seed, [edits[1]], 0.5)


def test_candidates_equal_after_normalisation_have_one_normal_form() -> None:
    a = Candidate({"SKILL.md": SKILL + "\n- Route refunds to billing.\n"})
    b = Candidate({"SKILL.md": SKILL + "\n*  route refunds to billing\n"})
    c = Candidate({"SKILL.md": SKILL + "\n- Route refunds to sales.\n"})
    assert a.hash != b.hash and normal_form(a) == normal_form(b) != normal_form(c)


def _unit(
    index: int, verdict: Literal["keep", "discard"], decision: str, reason: str, edits: list[str]
) -> UnitRecord:
    return UnitRecord(
        kind="step", index=index, step=index, epoch=1, candidate=f"{index:064d}", parent="0" * 64,
        verdict=verdict, decision=decision, reason=reason, metric="mixed",
        val_candidate=0.8731 if decision in ("accept", "reject") else None,
        val_incumbent=0.4269 if decision in ("accept", "reject") else None,
        edits=edits, edit_texts=[e.split(": ", 1)[1] for e in edits],
    )  # fmt: skip


def test_no_val_figure_reaches_a_proposer_prompt() -> None:
    """Planted val figures (a gate reason and val scores) stay out of the rejected-edit buffer, the
    optimizer memory and every prompt built from them; the outcome is told."""
    done = [
        _unit(1, "keep", "accept", "gain +0.4462 crossed the bound at round 2", ["append: - Kept rule."]),
        _unit(2, "discard", "reject", "gain +0.0317 did not cross (p 0.4113)", ["append: - Bad rule."]),
        _unit(3, "discard", "screen", "screen: train 0.250 < 0.500", ["append: - Worse rule."]),
        _unit(4, "discard", "repeat", "repeat of rejected candidate 000000000000 (step 2)", ["append: - Bad rule."]),
    ]  # fmt: skip
    memory, rejected = render_memory(done), rejected_buffer(done)
    packet = _packet().model_copy(update={"memory": memory, "rejected": rejected})
    prompts = [memory, reflect_prompt(packet), slow_update_prompt(SKILL, "train comparison", [], [])]
    for text in prompts:
        for planted in ("0.4462", "0.0317", "0.4113", "0.873", "0.427", "crossed the bound", "did not cross"):
            assert planted not in text
    assert "rejected by the gate on val" in prompts[1] and "kept by the gate on val" in memory
    assert "screen: train 0.250 < 0.500" in prompts[1]  # train figures are train evidence
    assert "repeat of rejected candidate" in prompts[1]
