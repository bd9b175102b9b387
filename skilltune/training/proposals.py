"""A step's asks and their answers (``--proposals N`` above 1): the proposals its screen chooses from.

Each ask (propose/asks.py) is one proposer call, vetted as a single ask's edits are, and written to
``asks/ask_NN.json`` as soon as it returns: a resumed step reads it and asks no call twice.

An answer whose every edit is already *spent* (rejected by a gate in this run, or proposed by an
earlier ask of this step) is not screened: the ask is asked once more, told plainly which edits are spent and at a temperature that
lets the answer change (``asks/ask_NN_r1.json``). Spent edits inside an answer that also holds new
ones are dropped from it, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skilltune.proposal import DroppedEdit, Edit, EvidencePacket
from skilltune.propose.asks import Ask, ask_packet, plan_asks
from skilltune.propose.merge import edit_text_key
from skilltune.propose.reflect import outcome
from skilltune.propose.vet import vet_edits
from skilltune.runfiles import AskFile, UnitRecord
from skilltune.training.context import RunContext
from skilltune.training.units import Unit

SPENT_SHOWN = 12  # spent edits a re-ask is told of (those it repeated first)
# What became of an edit that makes it spent for the rest of the run: a gate rejected it (a repeat of
# a rejected candidate is one). The train screen is not the judge of an edit for good: one replicate
# on a few train tasks is noisy, and a later batch holds other tasks; a screened-out edit proposed again
# costs a few train rollouts, and the prompt's rejected list already says what became of it.
SPENT_DECISIONS = ("reject", "repeat")


@dataclass(frozen=True)
class Spent:
    """An edit no ask should propose again: its text as proposed, and where it went (for the reason)."""

    text: str
    where: str


@dataclass
class Answered:
    """One ask's outcome: its answers (the first, and the re-ask's) and the edits that go to the screen."""

    ask: Ask
    answers: list[AskFile]
    edits: list[Edit]
    spent: list[DroppedEdit] = field(default_factory=list)  # edits dropped as spent, with where

    @property
    def calls(self) -> int:
        return sum(len(a.calls) for a in self.answers)


def spent_edits(done: list[UnitRecord]) -> dict[str, Spent]:
    """The run's spent edits so far, by normalised text, each with what became of it (in the words the
    proposer may read: a gate's outcome, never its figures)."""
    out: dict[str, Spent] = {}
    for record in done:
        if record.kind == "step" and record.verdict == "discard" and record.decision in SPENT_DECISIONS:
            for text in record.edit_texts:
                out.setdefault(edit_text_key(text), Spent(text, f"step {record.index}: {outcome(record)}"))
    return out


def gather(ctx: RunContext, unit: Unit, packet: EvidencePacket, done: list[UnitRecord]) -> list[Answered]:
    """Every ask of the step, answered (from disk when a resumed step asked it already)."""
    spent = spent_edits(done)
    seen: dict[str, Spent] = {}  # this step's edits so far, each with the ask that proposed it
    out = []
    for ask in plan_asks(packet, ctx.config.asks):
        ctx.session.check_stop()
        first = _answer(ctx, unit, packet, ask, 0, [])
        edits, repeats = _split(first.edits, spent, seen)
        answers = [first]
        if first.edits and not edits:  # every edit spent: ask again, told which
            said = {edit_text_key(e.edit.text) for e in repeats}
            tell = [e.edit.text for e in repeats] + [
                e.text for key, e in [*seen.items(), *reversed(spent.items())] if key not in said
            ]  # the answer's repeats, then this step's edits, then the run's latest
            second = _answer(ctx, unit, packet, ask, 1, tell[:SPENT_SHOWN])
            edits, more = _split(second.edits, spent, seen)
            repeats += more
            answers.append(second)
        for edit in edits:
            seen.setdefault(edit_text_key(edit.text), Spent(edit.text, f"ask {ask.index} of this step"))
        out.append(Answered(ask, answers, edits, repeats))
    return out


def _split(
    edits: list[Edit], spent: dict[str, Spent], seen: dict[str, Spent]
) -> tuple[list[Edit], list[DroppedEdit]]:
    fresh: list[Edit] = []
    repeats: list[DroppedEdit] = []
    for edit in edits:
        key = edit_text_key(edit.text)
        known = spent.get(key) or seen.get(key)
        if known is not None and edit.op != "delete":
            repeats.append(DroppedEdit(edit=edit, reason=f"spent: the same edit as {known.where}"))
        else:
            fresh.append(edit)
    return fresh, repeats


def _answer(
    ctx: RunContext, unit: Unit, packet: EvidencePacket, ask: Ask, attempt: int, spent: list[str]
) -> AskFile:
    """One call of one ask (read back when a resumed step made it already)."""
    path = _path(unit.folder(ctx.run), ask.index, attempt)
    if path.is_file():
        return AskFile.read(path)
    seed = ctx.rng(unit.index, "propose", ask.index, attempt).randrange(2**31)
    asked = ask_packet(packet, ask, seed, spent, reask=attempt > 0)
    vetted = vet_edits(ctx.proposer.propose(asked), asked, batch=packet)  # patterns: the whole batch
    answer = AskFile(
        index=ask.index,
        kind=ask.kind,
        label=ask.label,
        focus_key=ask.focus.key if ask.focus else None,
        attempt=attempt,
        temperature=asked.temperature,
        edits=vetted.edits,
        files=vetted.files,
        calls=vetted.calls,
        notes=vetted.notes,
        dropped=vetted.dropped,
    )
    answer.write(path)
    return answer


def _path(folder: Path, index: int, attempt: int) -> Path:
    return folder / "asks" / (f"ask_{index:02d}.json" if attempt == 0 else f"ask_{index:02d}_r{attempt}.json")
