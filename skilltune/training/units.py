"""A run's units in order, and what the finished ones say (incumbent, best val, discard streak).

Units are steps, with an epoch slow update after every ``epoch_steps`` of them.

A unit is done when its record (step.json / epoch.json) exists: resuming re-enters the
first unit without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skilltune.rundir import RunDir
from skilltune.runfiles import SeedFile, TrainConfig, UnitRecord, Verdict
from skilltune.skill import Candidate


@dataclass(frozen=True)
class Unit:
    kind: Literal["step", "epoch"]
    index: int
    seq: int  # 1-based position in the run: replicate indices and RNG purposes derive from it

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.index:04d}"

    def folder(self, run: RunDir) -> Path:
        return run.unit_dir(self.kind, self.index)


def unit_order(config: TrainConfig) -> list[Unit]:
    """Every unit of the run: ("step", n), and ("epoch", e) after every ``epoch_steps`` steps (no
    epoch with ``--component description``: a slow update writes the body)."""
    out: list[Unit] = []
    for n in range(1, config.total_steps + 1):
        out.append(Unit("step", n, len(out) + 1))
        if n % config.epoch_steps == 0 and config.total_epochs:  # none: only the description is tuned
            out.append(Unit("epoch", n // config.epoch_steps, len(out) + 1))
    return out


def finished(run: RunDir, order: list[Unit]) -> list[UnitRecord]:
    """The records of the units done so far, in run order (up to the first unfinished one)."""
    done = []
    for unit in order:
        record = run.unit_record(unit.kind, unit.index)
        if record is None:
            break
        done.append(record)
    return done


def load_seed(run: RunDir) -> Candidate:
    meta = SeedFile.read(run.seed_json)
    stub = Candidate({meta.main: ""}, meta.main, meta.kind, meta.fallback_name)
    return Candidate.load(run.seed_dir, stub)


def incumbent(run: RunDir, done: list[UnitRecord], seed: Candidate) -> Candidate:
    """The skill the next unit starts from: the last kept candidate, else the seed."""
    for record in reversed(done):
        if record.verdict == "keep":
            return Candidate.load(run.unit_dir(record.kind, record.index) / "candidate", seed)
    return seed


def best_val(done: list[UnitRecord], seed_val: float | None) -> float | None:
    """The val score of the last kept candidate (what the gate measured), else the seed's."""
    kept = [r.val_candidate for r in done if r.verdict == "keep" and r.val_candidate is not None]
    return kept[-1] if kept else seed_val


def discard_streak(done: list[UnitRecord]) -> int:
    """Candidates discarded in a row since the last keep.

    Only steps count; a step that produced no candidate (nothing proposed, nothing
    applicable, a patch that did not apply: decision ``empty``) or whose candidate was carried
    on ungated (``defer``) neither counts nor resets the streak.
    """
    streak = 0
    for record in done:
        if record.kind != "step" or record.decision in ("empty", "defer"):
            continue
        streak = 0 if record.verdict == "keep" else streak + 1
    return streak


def carried(run: RunDir, done: list[UnitRecord], mode: str) -> UnitRecord | None:
    """The unit whose candidate the next step builds on instead of the incumbent (``--carry``), or None.

    ``screen``: a step ``defer``red (its candidate beat its parent on the train screen and was
    not gated yet). ``gate``: also a step whose gate rejected for lack of evidence (futility, the
    cap, a stop later rounds could not change) with a positive val gain, no harm veto and no
    secondary regression. A keep or any other gate decision ends the carry; a step discarded
    before its gate (lint, screen, repeat, nothing proposed) leaves it as it was.
    """
    if mode == "off":
        return None
    out: UnitRecord | None = None
    for record in done:
        if record.verdict == "keep":
            out = None
        elif record.kind != "step":
            continue
        elif record.decision == "defer":
            out = record
        elif record.alpha is not None or record.decision in ("accept", "reject"):
            out = record if mode == "gate" and carryable(run, record) else None
    return out


def carryable(run: RunDir, record: UnitRecord) -> bool:
    """A gate reject for lack of evidence: rounds were run, the val gain is positive, and neither the
    harm veto nor the secondary suite's regression test spoke against it."""
    path = run.unit_dir(record.kind, record.index) / "gate.json"
    if record.decision != "reject" or not path.is_file():
        return False
    verdict = Verdict.read(path)
    if not verdict.rounds or verdict.val_candidate is None or verdict.val_incumbent is None:
        return False
    if verdict.harm is not None and (verdict.harm.harmed or verdict.harm.suspects):
        return False
    if verdict.secondary is not None and verdict.secondary.regression:
        return False
    return verdict.val_candidate > verdict.val_incumbent


def base_of(
    run: RunDir, done: list[UnitRecord], seed: Candidate, mode: str
) -> tuple[Candidate, UnitRecord | None]:
    """The skill the next step builds on (the carried candidate, else the incumbent) and the carried unit."""
    record = carried(run, done, mode)
    if record is None:
        return incumbent(run, done, seed), None
    return Candidate.load(run.unit_dir(record.kind, record.index) / "candidate", seed), record
