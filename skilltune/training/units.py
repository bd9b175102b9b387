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
from skilltune.runfiles import SeedFile, TrainConfig, UnitRecord
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
    on ungated (verdict ``carried``) neither counts nor resets the streak.
    """
    streak = 0
    for record in done:
        if record.kind != "step" or record.decision == "empty" or record.carried_on:
            continue
        streak = 0 if record.verdict == "keep" else streak + 1
    return streak
