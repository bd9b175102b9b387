"""The mock proposer: deterministic, no model, for tests and benchmarks.

It reads the ``SYMPTOM:`` lines of failed train trajectories and draws from the
suite's ``proposer_pool`` (scoring.md config: ``[{"id", "text", "answers": [...]}]``):
with probability ``p_right`` an entry whose ``answers`` match an observed symptom,
otherwise a random entry. Proposals are ``append`` edits of the entry's text, one
per failed trajectory. Entries the skill already states, and entries the gate
already rejected, are not proposed again. Seeded on the packet's seed.

A suite without a pool (skill-trainer's mock demos: a real editor reads them) gets
its failure hints turned into rules instead: each distinct symptom (or, for a judged
rollout that printed none, the first sentence of the judge's feedback) becomes a
rule appended to the skill, the most frequent first.

A step that tunes the description (``--component description``) gets one ``description`` edit
from the train requests the skill missed and those it wrongly triggered on
(``propose.describe.rewrite_description``); one the gate already rejected is not proposed again.
"""

from __future__ import annotations

import json
import random
import re

from pydantic import BaseModel, Field, ValidationError

from skilltune.errors import UsageError
from skilltune.proposal import Edit, EvidencePacket, Proposal, ProposerCall, Trajectory
from skilltune.propose.base import Proposer, ProposerOptions, SlowUpdate
from skilltune.propose.describe import rewrite_description
from skilltune.propose.edit import apply_edit
from skilltune.propose.prompts import reflect_prompt, rewrite_prompt, slow_update_prompt
from skilltune.skill import split_front_matter

HINT = "(failure hint)"  # the id of a rule made from a hint (no pool entry has it)


class PoolEntry(BaseModel):
    id: str
    text: str
    answers: list[str] = Field(default_factory=list)


class MockProposerOptions(ProposerOptions):
    p_right: float = Field(default=0.7, ge=0.0, le=1.0)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def symptoms(trajectory: Trajectory) -> list[str]:
    return [
        line.split(":", 1)[1].strip()
        for line in trajectory.output.splitlines()
        if line.startswith("SYMPTOM:")
    ]


def hints(trajectory: Trajectory) -> list[str]:
    """What a failed trajectory says went wrong: its SYMPTOM lines, else a rubric's ``symptom:<class>``
    checks, else the judge's first sentence."""
    found = [s for s in symptoms(trajectory) if s]
    if not found:
        found = [c.split(":", 1)[1].strip() for c in trajectory.checks if c.startswith("symptom:")]
    # Only the judge's feedback: the other modes' (the expected answer) would change the demo's draws.
    if not found and trajectory.mode == "judge" and trajectory.feedback.strip():
        first = re.split(r"(?<=[.!?])\s", trajectory.feedback.strip().splitlines()[0], maxsplit=1)[0]
        found = [first.strip()] if first.strip() else []
        found = [f[:200] for f in found]
    return found


class MockProposer(Proposer):
    name = "mock"
    Options = MockProposerOptions

    def _pool(self) -> list[PoolEntry] | None:
        raw = (self.suite.config.model_extra or {}).get("proposer_pool")
        if raw is None:
            return None
        try:
            return [PoolEntry.model_validate(e) for e in raw]
        except (ValidationError, TypeError):
            raise UsageError(
                f"{self.suite.source}: scoring.md's proposer_pool must be a list of "
                '{"id": ..., "text": ..., "answers": [...]} objects'
            ) from None

    def _from_hints(self, packet: EvidencePacket) -> list[tuple[PoolEntry, Trajectory, bool]]:
        """No pool: each distinct failure hint becomes a rule, the most often seen first."""
        skill = _norm("\n".join(packet.skill_files.values()))
        rejected = {_norm(r.text) for r in packet.rejected} | {_norm(text) for text in packet.spent}
        seen: dict[str, tuple[PoolEntry, Trajectory, int]] = {}
        for trajectory in packet.failures:
            for hint in hints(trajectory):
                rule = f"- Check before you finish that this does not happen: {hint.rstrip('.')}."
                key = _norm(rule)
                if key in skill or key in rejected:
                    continue
                entry, first, count = seen.get(key, (PoolEntry(id=HINT, text=rule), trajectory, 0))
                seen[key] = (entry, first, count + 1)
        ranked = sorted(seen.values(), key=lambda item: -item[2])  # stable: first seen first among equals
        chosen = [(entry, trajectory, True) for entry, trajectory, _ in ranked]
        return chosen[: packet.max_edits] if packet.ask else chosen

    def _choose(self, packet: EvidencePacket) -> list[tuple[PoolEntry, Trajectory, bool]]:
        assert isinstance(self.options, MockProposerOptions)
        pool = self._pool()
        if pool is None:
            return self._from_hints(packet)
        # One of a step's several asks (packet.ask) draws on its own; the step's single ask as before.
        purpose = f"{packet.seed}|{packet.step}|mock-proposer" + (f"|ask{packet.ask}" if packet.ask else "")
        rng = random.Random(purpose)
        skill = _norm("\n".join(packet.skill_files.values()))
        rejected = {_norm(r.text) for r in packet.rejected} | {_norm(text) for text in packet.spent}
        available = [e for e in pool if _norm(e.text) not in skill and _norm(e.text) not in rejected]
        chosen: list[tuple[PoolEntry, Trajectory, bool]] = []
        for trajectory in packet.failures:
            if not available or (packet.ask and len(chosen) >= packet.max_edits):
                break
            seen = [s.lower() for s in symptoms(trajectory)]
            matching = [e for e in available if any(a.lower() in s for a in e.answers if a for s in seen)]
            right = bool(matching) and rng.random() < self.options.p_right
            entry = rng.choice(matching if right else available)
            if packet.ask and any(entry.id == e.id for e, _, _ in chosen):
                continue  # one ask proposes a rule once
            chosen.append((entry, trajectory, right))
        return chosen

    def propose(self, packet: EvidencePacket) -> Proposal:
        if packet.component == "description":
            return self._describe(packet)
        chosen = self._choose(packet)
        edits = [
            Edit(
                op="append",
                file=packet.skill_main,
                text=entry.text,
                rationale=(
                    "a failure hint of this trajectory, turned into a rule"
                    if entry.id == HINT
                    else f"pool entry {entry.id}"
                    + (" matches an observed symptom" if right else " (random draw)")
                ),
                support=[trajectory.id],
                rank=rank,
            )
            for rank, (entry, trajectory, right) in enumerate(chosen)
        ]
        if packet.mode == "patch":
            answer = json.dumps({"edits": [e.model_dump(mode="json") for e in edits]})
            return Proposal(edits=edits, calls=[_call("analyst", reflect_prompt(packet), answer)])
        return self._rewrite(packet, edits)

    def _describe(self, packet: EvidencePacket) -> Proposal:
        """One description edit from the batch's load decisions (none when they ask no change)."""
        front = split_front_matter(packet.skill_files[packet.skill_main])
        description = (front.data or {}).get("description")
        found = None
        if isinstance(description, str):
            found = rewrite_description(description, packet.triggers, front.body)
        if found is not None and _norm(found[0]) in {_norm(r.text) for r in packet.rejected}:
            found = None  # the gate already rejected it
        edits = []
        if found is not None:
            text, support = found
            why = f"{len(packet.missed)} missed request(s), {len(packet.false_triggers)} false trigger(s)"
            edits.append(
                Edit(op="description", file=packet.skill_main, text=text, rationale=why, support=support)
            )
        answer = [{"description": e.text, "rationale": e.rationale, "support": e.support} for e in edits]
        return Proposal(edits=edits, calls=[_call("analyst", reflect_prompt(packet), json.dumps(answer[:1]))])

    def _rewrite(self, packet: EvidencePacket, edits: list[Edit]) -> Proposal:
        """Three roles, three calls: analyst lists causes, author drafts, red-team drops repeats."""
        causes = "\n".join(f"- {e.rationale} ({', '.join(e.support)})" for e in edits) or "- no failures"
        calls = [_call("failure analyst", rewrite_prompt(packet, "failure analyst"), causes)]
        text = packet.skill_files[packet.skill_main]
        seen: set[str] = set()
        for edit in edits:
            if _norm(edit.text) in seen:
                continue
            seen.add(_norm(edit.text))
            text, _ = apply_edit(text, edit)
        calls.append(_call("author", rewrite_prompt(packet, "author", causes=causes), text))
        calls.append(
            _call("red-team reviewer", rewrite_prompt(packet, "red-team reviewer", draft=text), text)
        )
        files = dict(packet.skill_files)
        files[packet.skill_main] = text
        return Proposal(files=files, calls=calls, notes={"edits": [e.compact() for e in edits]})

    def slow_update(
        self, skill_text: str, comparison: str, kept: list[str], rejected: list[str], seed: int
    ) -> SlowUpdate:
        lines = [f"- {comparison}"]
        lines += [f"- Kept this epoch: {k}" for k in kept[:6]] or ["- Nothing was kept this epoch."]
        if rejected:
            lines.append(f"- {len(rejected)} edit(s) were tried and rejected; do not reintroduce them.")
        guidance = "\n".join(lines)
        prompt = slow_update_prompt(skill_text, comparison, kept, rejected)
        return SlowUpdate(
            guidance=guidance,
            calls=[_call("slow-update", prompt, guidance)],
        )


def _call(role: str, prompt: str, response: str) -> ProposerCall:
    """One of the mock's calls, recorded as a model's would be (model ``mock``)."""
    return ProposerCall(role=role, model="mock", prompt=prompt, response=response)
