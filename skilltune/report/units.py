"""One unit of a run as the report shows it: verdict and gate rounds, and (in detail) the skill's
diff, the proposer's edits with their rationale and the trajectories they cite."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from skilltune.propose.merge import MergeResult, edit_key
from skilltune.report.model import Citation, EditView, GateRound, Interval, UnitView
from skilltune.report.proposals import ProposalCounts, counts, ranked
from skilltune.report.rollouts import RolloutTally
from skilltune.rundir import RunDir
from skilltune.runfiles import Figures, ReflectionsFile, Round, SlowUpdateFile, UnitRecord, Verdict
from skilltune.skill import Candidate

EXCERPT_CHARS = 600
PROMPT_CHARS = 400  # of the task a cited trajectory was given
DIFF_LINES = 400
PAIRED_Z = 1.645


@dataclass(frozen=True)
class ProposerUsage:
    """What the proposer used in a unit (its reflections.json, or an epoch's slow_update.json)."""

    stage: str
    tokens: int = 0
    calls: int = 0
    found: bool = False
    proposals: ProposalCounts | None = None  # a step of several asks: asked / screened / kept


def proposer_usage(folder: Path) -> ProposerUsage:
    """The proposer's tokens and calls in the unit at ``folder``, as the budgets count them, and the
    step's proposal counts."""
    reflections, slow = folder / "reflections.json", folder / "slow_update.json"
    if reflections.is_file():
        answer = ReflectionsFile.read(reflections)
        return ProposerUsage(
            "reflect", answer.tokens, len(answer.calls), found=True, proposals=counts(answer)
        )
    if slow.is_file():
        update = SlowUpdateFile.read(slow)
        return ProposerUsage("slow_update", update.tokens, len(update.calls), found=True)
    return ProposerUsage("reflect" if folder.name.startswith("step") else "slow_update")


def unit_view(record: UnitRecord, folder: Path) -> UnitView:
    """The unit's record and its gate's rounds (cheap: two small files)."""
    view = UnitView(
        name=folder.name, kind=record.kind, index=record.index, epoch=record.epoch,
        verdict=record.verdict, decision=record.decision, reason=record.reason,
        candidate=record.candidate, parent=record.parent, val_candidate=record.val_candidate,
        val_incumbent=record.val_incumbent, alpha=record.alpha, rollouts=record.rollouts,
        tokens=record.tokens, cost_usd=record.cost_usd, edits=record.edits, carried=record.carried,
        carried_edits=record.carried_edits, agents=record.agents,
    )  # fmt: skip
    gate = folder / "gate.json"
    if gate.is_file():
        verdict = Verdict.read(gate)
        view.agents_gate = verdict.agents_gate
        view.rounds = [_round(r) for r in verdict.rounds]
        view.interval = _interval(view.rounds[-1]) if view.rounds else None
        paired = {pair.incumbent_replicate for r in verdict.rounds for pair in r.pairs}
        view.incumbent_replicates = sorted(paired)  # none in gate.json of schema 5 or older
    return view


class Chained(Protocol):
    """A unit as ``step_origins`` reads it (a step.json record, or the report's view of one)."""

    @property
    def kind(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def edits(self) -> list[str]: ...
    @property
    def carried(self) -> int | None: ...
    @property
    def carried_edits(self) -> int: ...


def step_origins(units: Iterable[Chained]) -> dict[int, list[int]]:
    """Each step's origins: the step that proposed each of its edits, by step index. A step built on
    a carried candidate (``carried`` j, its first ``carried_edits`` edits j's) takes those edits'
    origins from step j, so the keep that ends a chain of ungated steps names, for each edit it
    kept, the step that proposed it. ``units`` in run order (a carried step precedes its heir)."""
    found: dict[int, list[int]] = {}
    for unit in units:
        if unit.kind != "step":
            continue
        inherited = min(unit.carried_edits, len(unit.edits)) if unit.carried is not None else 0
        source = found.get(unit.carried) if unit.carried is not None else None
        if source is not None and len(source) >= inherited:
            head = source[:inherited]
        else:  # the carried step's record is missing: its index is all that is known
            head = [unit.carried or unit.index] * inherited
        found[unit.index] = head + [unit.index] * (len(unit.edits) - inherited)
    return found


def set_origins(units: list[UnitView]) -> None:
    """Fill each finished step's ``origins`` (``step_origins``); ``units`` in run order."""
    finished = [u for u in units if u.finished]
    origins = step_origins(finished)
    for view in finished:
        if view.kind == "step":
            view.origins = origins[view.index]


def describe_pending(view: UnitView, folder: Path, before: list[UnitView], seed: str) -> None:
    """What a unit without a record (running, or the one a run ended in) is testing, from its folder:
    the candidate it saved (candidate/), its incumbent (the last keep before it, else the seed), and
    its edits: those it carried from the step before (a step carried on ungated) and its own
    (reflections.json's with several asks, merged_patch.json's with one). ``before``: the finished
    units before it, in run order, their origins set."""
    view.parent = next((u.candidate for u in reversed(before) if u.verdict == "keep"), seed)
    if not (folder / "candidate").is_dir():
        return
    own = _own_edits(folder)
    last = before[-1] if before else None
    if view.kind == "step" and last is not None and last.kind == "step" and last.carried_on:
        view.carried, view.carried_edits = last.index, len(last.edits)
        view.edits = [*last.edits, *own]
        view.origins = [*(step for step, _ in last.edit_origins), *[view.index] * len(own)]
    else:
        view.edits = own


def _own_edits(folder: Path) -> list[str]:
    """The edits a unit's candidate/ holds of its own (compact forms)."""
    reflections, merged = folder / "reflections.json", folder / "merged_patch.json"
    answer = ReflectionsFile.read(reflections) if reflections.is_file() else None
    if answer is not None and answer.proposals:  # several asks: ``edits`` are the candidate's own
        return [e.compact() for e in answer.edits]
    if merged.is_file():
        result = MergeResult.model_validate_json(merged.read_text(encoding="utf-8"))
        return [m.edit.compact() for m in result.kept]
    return [e.compact() for e in answer.edits] if answer is not None else []


def _round(rnd: Round) -> GateRound:
    figures = rnd.statistic.figures() if rnd.statistic is not None else Figures()
    return GateRound.model_validate({**rnd.model_dump(exclude={"statistic"}), **figures.model_dump()})


def _interval(last: GateRound) -> Interval | None:
    if last.gain is None:
        return None
    if last.bound is not None and last.se is not None:  # sequential: the accept side and the futility side
        return Interval(gain=last.gain, low=last.gain - last.bound * last.se, high=last.upper)
    if last.p is not None:  # the sign-flip test accepts on crossings, not on an interval: futility side only
        return Interval(gain=last.gain, low=None, high=last.upper)
    if last.se is not None:  # paired-z
        return Interval(
            gain=last.gain, low=last.gain - PAIRED_Z * last.se, high=last.gain + PAIRED_Z * last.se
        )
    return Interval(gain=last.gain, low=last.gain, high=last.gain)


class SkillVersions:
    """The skill's files at each version the run made, by content hash (the seed, and every
    unit's candidate/ folder), read when first asked for."""

    def __init__(self, run: RunDir, seed: Candidate) -> None:
        self.run = run
        self.seed = seed
        self._folders: dict[str, Path] = {}
        self._loaded: dict[str, Candidate] = {seed.hash: seed}

    def load(self, folder: Path) -> str:
        """The hash of the unit's candidate/ at ``folder`` (a unit without a record names none)."""
        candidate = Candidate.load(folder / "candidate", self.seed)
        self._loaded.setdefault(candidate.hash, candidate)
        return candidate.hash

    def add(self, candidate_hash: str, folder: Path) -> None:
        if (folder / "candidate").is_dir():
            self._folders.setdefault(candidate_hash, folder / "candidate")

    def get(self, candidate_hash: str) -> Candidate | None:
        if candidate_hash not in self._loaded:
            folder = self._folders.get(candidate_hash)
            if folder is None:
                return None
            self._loaded[candidate_hash] = Candidate.load(folder, self.seed)
        return self._loaded[candidate_hash]


def skill_diff(before: Candidate | None, after: Candidate | None) -> str:
    """A unified diff of every file of the skill (clipped to DIFF_LINES lines)."""
    if before is None or after is None or before.hash == after.hash:
        return ""
    lines: list[str] = []
    for path in sorted(set(before.files) | set(after.files)):
        old = before.files.get(path, "").splitlines(keepends=True)
        new = after.files.get(path, "").splitlines(keepends=True)
        lines += difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", n=2)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    clipped = text.splitlines(keepends=True)
    if len(clipped) > DIFF_LINES:
        return "".join(clipped[:DIFF_LINES]) + f"... ({len(clipped) - DIFF_LINES} more lines)\n"
    return text


def clip(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start and the end of ``text`` (where agents say what they did and how it ended)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]}\n[... {len(text) - limit} characters ...]\n{text[-(limit - head) :]}"


_NOTE_LABELS = {"error": "Proposer error", "cut": "Answer cut", "anchor_repair": "Anchor repair"}


def note_lines(notes: dict[str, Any]) -> list[str]:
    """reflections.json's notes in words, one line each: ``why_not`` ([decision, reason], why the
    step's own proposals gave no candidate) as a sentence, a known key by its label, any other
    key as it is named; a list's items joined, never a Python repr."""
    lines = []
    for key, value in notes.items():
        if key == "why_not" and isinstance(value, list | tuple) and len(value) == 2:
            reason = str(value[1])
            if reason.startswith("screen: "):
                reason = "the screen kept none: " + reason.removeprefix("screen: ")
            lines.append(f"No candidate of the step's own. {reason[:1].upper()}{reason[1:]}.")
            continue
        label = _NOTE_LABELS.get(key, key.replace("_", " ").capitalize())
        if isinstance(value, dict):
            text = "; ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list | tuple):
            text = "; ".join(str(v) for v in value)
        else:
            text = str(value)
        lines.append(f"{label}: {text}")
    return lines


def add_detail(view: UnitView, run: RunDir, rollouts: RolloutTally | None, versions: SkillVersions) -> None:
    """Fill the unit's edits (with rationale and cited trajectories), diff and slow-update guidance."""
    folder = run.unit_dir(view.kind, view.index)
    view.diff = skill_diff(versions.get(view.parent), versions.get(view.candidate))
    reflections = folder / "reflections.json"
    if reflections.is_file():
        answer = ReflectionsFile.read(reflections)
        view.notes = note_lines(answer.notes)
        view.proposals = ranked(answer.proposals)
        view.selection = answer.selection
        kept_texts = {" ".join(edit.split()) for edit in view.edits}
        seen: dict[tuple[str, str, str, str], EditView] = {}
        for edit in answer.edits:
            kept = " ".join(edit.compact().split()) in kept_texts
            citations = [_citation(s, folder.name, run.root, rollouts) for s in edit.support]
            same = seen.get(edit_key(edit))
            if same is not None:  # proposed again: one edit of the candidate, as the step's merge made it
                same.times += 1
                same.kept = same.kept or kept
                cited = {c.id for c in same.citations}
                same.citations += [c for c in citations if c.id not in cited]
                continue
            seen[edit_key(edit)] = EditView(
                op=edit.op,
                file=edit.file,
                anchor=edit.anchor,
                text=edit.text,
                rationale=edit.rationale,
                kind=edit.kind,
                kept=kept,
                matched=edit.matched,
                citations=citations,
            )
            view.proposed.append(seen[edit_key(edit)])
    slow = folder / "slow_update.json"
    if slow.is_file():
        view.guidance = SlowUpdateFile.read(slow).guidance


def _citation(support: str, unit: str, root: Path, rollouts: RolloutTally | None) -> Citation:
    task_id, _, rep = support.rpartition("#r")
    found = None
    if rollouts is not None and rep.isdigit():
        found = rollouts.train.get((unit, task_id, int(rep)))
    if found is None:
        return Citation(id=support, task_id=task_id or support)
    output = root / found.output
    excerpt = clip(output.read_text(encoding="utf-8", errors="replace")) if output.is_file() else ""
    conversation = root / found.conversation
    return Citation(
        id=support,
        task_id=task_id,
        status=found.status,
        score=found.score,
        prompt=clip(_task_prompt(conversation), PROMPT_CHARS),
        feedback=clip(found.feedback),
        excerpt=excerpt,
        conversation=found.conversation if conversation.is_file() else None,
    )


def _task_prompt(conversation: Path) -> str:
    """The task as the agent was given it: conversation.json's first user message ("" when the
    file is missing or not a list of messages)."""
    try:
        messages = json.loads(conversation.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(messages, list):
        return ""
    first = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    content = first.get("content") if first is not None else None
    return content if isinstance(content, str) else ""
