"""The wall time a session spent after its last stage event: the stage a stop or a kill ended.

A stage's event (journal.jsonl ``stage``) is written when the stage ends, so a session stopped in a
gate leaves that gate's time in no stage event, though the session's active time counts it (the
cards' wall time). Each session's time after its last event of work (a stage, a unit's end, the
session's start) belongs to the stage that was running: the unit still going then (the one whose
stage ended last, else the next unit in run order, else the held-out test), and its first stage
that a later session journaled for the first time, or, for a unit never finished, the stage its
rollouts show it reached.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from skilltune.runfiles import JournalEvent, Resumed, RunStart, SessionStart, StageDone, UnitEnd

# A unit's stages in the order they run (``edit``: a step of one ask; ``screen`` follows either).
STAGES = {
    "step": ("rollout", "reflect", "edit", "screen", "gate"),
    "epoch": ("compare", "slow_update", "gate"),
}
# Rollout phases that show a stage was reached, latest first.
_REACHED = {
    "step": (("gate", "gate"), ("screen", "screen")),
    "epoch": (("gate", "gate"), ("train", "compare")),
}


def sessions(journal: list[JournalEvent]) -> list[list[JournalEvent]]:
    """The journal cut into sessions: each opens with ``session_start`` or with ``resume`` (written
    before its ``session_start``, which then stays in the resume's session)."""
    out: list[list[JournalEvent]] = []
    for event in journal:
        opens = isinstance(event, Resumed) or (
            isinstance(event, SessionStart) and not (out and isinstance(out[-1][-1], Resumed))
        )
        if opens or not out:
            out.append([])
        out[-1].append(event)
    return out


def unjournaled(
    journal: list[JournalEvent],
    order: list[str],
    reached: Collection[tuple[str, str]],
    asked: Collection[str],
) -> list[tuple[str, str, float]]:
    """(unit, stage, seconds) of the time each session spent after its last event of work.

    ``order``: the units in run order; ``reached``: the (unit, phase) pairs that hold rollouts;
    ``asked``: the steps of several asks (no ``edit`` stage)."""
    cut = sessions(journal)
    later: list[dict[str, list[str]]] = [{} for _ in cut]  # per session: stages journaled after it
    seen: dict[str, list[str]] = {}
    for k in reversed(range(len(cut))):
        later[k] = {unit: list(stages) for unit, stages in seen.items()}
        for event in cut[k]:
            if isinstance(event, StageDone):
                seen.setdefault(event.unit, []).append(event.stage)
    out = []
    ended: set[str] = set()
    done: dict[str, set[str]] = {}
    for k, session in enumerate(cut):
        # the seed's baseline runs first: until its stage ended, it is what a session was doing
        baseline = "baseline" in done.get("step_0000", set())
        mark: JournalEvent | None = None
        for event in session:
            if isinstance(event, StageDone):
                done.setdefault(event.unit, set()).add(event.stage)
            if isinstance(event, UnitEnd):
                ended.add(event.unit)
            if isinstance(event, StageDone | UnitEnd | SessionStart | Resumed | RunStart):
                mark = event
        if mark is None:
            continue
        gap = (_ts(session[-1]) - _ts(mark)).total_seconds()
        if not baseline and "baseline" not in done.get("step_0000", set()):
            if gap > 0:
                out.append(("step_0000", "baseline", round(gap, 3)))
            continue
        unit = _running(mark, order, ended)
        if gap <= 0 or unit is None:
            continue
        stage = _stage(unit, done.get(unit, set()), later[k].get(unit, []), reached, asked)
        if stage is not None:
            out.append((unit, stage, round(gap, 3)))
    return out


def _ts(event: JournalEvent) -> datetime:
    return datetime.fromisoformat(event.ts)


def _running(mark: JournalEvent, order: list[str], ended: set[str]) -> str | None:
    """The unit going on after ``mark``: the one whose stage it ended, else the next unfinished one."""
    if isinstance(mark, StageDone) and mark.unit == "final":
        return None  # the test is done: only the end of the run (audit, findings) followed
    if isinstance(mark, StageDone) and mark.unit != "step_0000" and mark.unit not in ended:
        return mark.unit
    return next((u for u in order if u not in ended), "final")


def _stage(
    unit: str, done: set[str], later: list[str], reached: Collection[tuple[str, str]], asked: Collection[str]
) -> str | None:
    if unit == "final":
        return "compare"
    kind = unit.partition("_")[0]
    if kind not in STAGES:
        return None
    first_later = next((s for s in later if s not in done), None)
    if first_later is not None:  # a later session finished it
        return first_later
    for phase, stage in _REACHED[kind]:
        if (unit, phase) in reached and stage not in done:
            return stage
    stages = [s for s in STAGES[kind] if not (s == "edit" and unit in asked)]
    return next((s for s in stages if s not in done), None)
