"""A step's asks: several short questions to the analyst instead of one long one (``--proposals N``).

A small model is a poor writer and a fair source of guesses: asked once for the whole batch it
proposes one weak edit, asked about one failure group at a time it proposes rules, some right. So
a step asks ``N`` times, *focused* asks about the failure groups of the batch (propose/groups.py):
one per group, largest first, then round the groups again while asks are left, each repeat at
``SAMPLE_TEMPERATURE`` with a seed of its own (a group's answers must be able to differ: with a
1.5B analyst a third of the answers held no rule, and the same question asked again gave the usable
ones). The prompt holds a few of that group's failures in plain words and asks for
one or two rules. Each rule of an answer is screened on its own by the step; the loop, not the
analyst, decides which guesses are good. A batch without failures asks nothing. Independent
*samples* of the whole batch cost a third of the screen's rollouts and half the calls in the
simulated runs (benchmarks/proposals.py) and added no gain, so only a description step asks them
(its evidence is the batch's load decisions, not failure groups).

Every ask is derived from the step's packet and its index alone, so a resumed step asks the same
questions (and finds their answers on disk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skilltune.proposal import EvidencePacket, Focus
from skilltune.propose.groups import failure_groups

SAMPLE_TEMPERATURE = 0.7  # a repeat, a sample and a re-ask must be able to differ from the first answer
ASK_EDITS = 2  # rules one ask may propose
FOCUS_FAILURES = 4  # failed trajectories a focused prompt shows (its group's, in canonical order)
FOCUS_SUCCESSES = 2  # passing trajectories beside them: what the skill already gets right


@dataclass(frozen=True)
class Ask:
    """One question of a step: ``index`` from 1; a focused ask names its failure group."""

    index: int
    kind: Literal["focus", "sample"]
    focus: Focus | None = None
    repeat: int = 0  # how many times its group was asked before in this step

    @property
    def label(self) -> str:
        return self.focus.label if self.focus is not None else "the whole batch (an independent sample)"


def plan_asks(packet: EvidencePacket, n: int) -> list[Ask]:
    """At most ``n`` asks: one focused ask per failure group, largest first (none without failures).
    A description step and rewrite mode ask ``n`` samples (their prompt is about the whole batch)."""
    if packet.component != "body" or packet.mode != "patch":
        return [Ask(i + 1, "sample") for i in range(n)]
    groups = failure_groups(packet.failures)
    if len(groups) > 1:  # a key every failure shares (a checklist's closing marker) singles nothing out
        everyone = {t.id for t in packet.failures}
        groups = [g for g in groups if set(g.trajectories) != everyone] or groups
    if not groups:
        return []
    return [Ask(i + 1, "focus", groups[i % len(groups)], i // len(groups)) for i in range(n)]


def ask_packet(packet: EvidencePacket, ask: Ask, seed: int, spent: list[str], reask: bool) -> EvidencePacket:
    """The packet of one ask (a re-ask: told the ``spent`` edits, and at a temperature that lets the
    answer change)."""
    hot = ask.kind == "sample" or reask or ask.repeat > 0
    update: dict[str, object] = {
        "ask": ask.index,
        "seed": seed,
        "spent": list(spent) if reask else [],
        "max_edits": min(packet.max_edits, ASK_EDITS) if packet.component == "body" else packet.max_edits,
        "temperature": SAMPLE_TEMPERATURE if hot else None,
    }
    if ask.focus is not None:
        members = set(ask.focus.trajectories)
        update |= {
            "focus": ask.focus,
            "failures": [t for t in packet.failures if t.id in members][:FOCUS_FAILURES],
            "successes": packet.successes[:FOCUS_SUCCESSES],
        }
    return packet.model_copy(update=update)
