"""A run's skill versions read back from its directory: the seed, each unit's candidate, the chain
of kept versions, and the kept unit that introduced each change between the seed and the best.

Everything here is read from files on disk (audit, findings and promote only read a run). It
does not use ``skilltune.training``: the end of a training run calls the modules that use this one.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from skilltune.rundir import RunDir
from skilltune.runfiles import RunConfigFile, SeedFile, UnitRecord
from skilltune.skill import Candidate


def unit_name(record: UnitRecord) -> str:
    """The unit's folder name under steps/ (step_0003, epoch_0001)."""
    return f"{record.kind}_{record.index:04d}"


@dataclass
class History:
    """The finished units of a run in run order, their saved candidates, and the seed."""

    run: RunDir
    config: RunConfigFile
    seed: Candidate
    units: list[UnitRecord]
    saved: dict[str, Candidate] = field(default_factory=dict)  # unit name -> its candidate/ folder

    @classmethod
    def read(cls, run: RunDir) -> History:
        config = RunConfigFile.read(run.config)
        meta = SeedFile.read(run.seed_json)
        stub = Candidate({meta.main: ""}, meta.main, meta.kind, meta.fallback_name)
        seed = Candidate.load(run.seed_dir, stub)
        records = [
            UnitRecord.read(path)
            for pattern in ("step_*/step.json", "epoch_*/epoch.json")
            for path in run.steps.glob(pattern)
        ]
        # An epoch unit follows the step it closes (its ``step`` is that step's number).
        records.sort(key=lambda r: (r.step, r.kind == "epoch", r.index))
        history = cls(run, config, seed, records)
        for record in records:
            folder = run.unit_dir(record.kind, record.index) / "candidate"
            if folder.is_dir():
                history.saved[unit_name(record)] = Candidate.load(folder, seed)
        return history

    @property
    def kept(self) -> list[UnitRecord]:
        return [r for r in self.units if r.verdict == "keep"]

    @cached_property
    def chain(self) -> list[tuple[str, Candidate]]:
        """(unit name, version) from the seed (named ``seed``) through every keep, in order."""
        out = [("seed", self.seed)]
        for record in self.kept:
            candidate = self.saved.get(unit_name(record))
            if candidate is not None:
                out.append((unit_name(record), candidate))
        return out

    @property
    def best(self) -> Candidate:
        return self.chain[-1][1]

    def by_hash(self) -> dict[str, Candidate]:
        found = {self.seed.hash: self.seed}
        found.update({c.hash: c for c in self.saved.values()})
        return found

    def unit(self, name: str) -> UnitRecord | None:
        return next((r for r in self.units if unit_name(r) == name), None)

    def folder(self, name: str) -> Path:
        return self.run.steps / name


@dataclass(frozen=True)
class Hunk:
    """One change from the seed to the best version of a file: seed lines [seed_start, seed_end)
    became ``added``; ``units`` are the kept units that made it, in run order."""

    path: str
    seed_start: int
    seed_end: int
    removed: list[str]
    added: list[str]
    units: list[str]


def _lines(candidate: Candidate, path: str) -> list[str]:
    return candidate.files[path].splitlines(keepends=True) if path in candidate.files else []


def _matcher(a: list[str], b: list[str]) -> difflib.SequenceMatcher[str]:
    return difflib.SequenceMatcher(None, a, b, autojunk=False)


def hunks(chain: list[tuple[str, Candidate]]) -> list[Hunk]:
    """The changes from the first version of ``chain`` to its last, file by file, each with the
    units that introduced it: the unit that wrote each added line, and the unit that removed each
    seed line the hunk removes (tracked version by version along the chain)."""
    first, last = chain[0][1], chain[-1][1]
    out: list[Hunk] = []
    for path in sorted(set(first.files) | set(last.files)):
        seed_lines = _lines(first, path)
        origin: list[str | None] = [None] * len(seed_lines)  # per line of the current version
        ident: list[int | None] = list(range(len(seed_lines)))  # seed line index, if it is one
        removed_by: dict[int, str] = {}
        lines = seed_lines
        for name, version in chain[1:]:
            new = _lines(version, path)
            new_origin: list[str | None] = [name] * len(new)
            new_ident: list[int | None] = [None] * len(new)
            for a, b, size in _matcher(lines, new).get_matching_blocks():
                new_origin[b : b + size] = origin[a : a + size]
                new_ident[b : b + size] = ident[a : a + size]
            for seed_index in set(ident) - set(new_ident):
                if seed_index is not None:
                    removed_by.setdefault(seed_index, name)
            lines, origin, ident = new, new_origin, new_ident
        order = [name for name, _ in chain]
        for tag, i1, i2, j1, j2 in _matcher(seed_lines, lines).get_opcodes():
            if tag == "equal":
                continue
            # Lines added by different units are separate hunks (each with its own evidence); the
            # seed lines the change removes go with the first.
            runs = _runs(origin, j1, j2) or [(j1, j2)]
            for k, (start, end) in enumerate(runs):
                units = {o for o in origin[start:end] if o is not None}
                if k == 0:
                    units |= {removed_by[i] for i in range(i1, i2) if i in removed_by}
                out.append(
                    Hunk(
                        path=path,
                        seed_start=i1 if k == 0 else i2,
                        seed_end=i2,
                        removed=seed_lines[i1:i2] if k == 0 else [],
                        added=lines[start:end],
                        units=sorted(units, key=order.index),
                    )
                )
    return out


def _runs(origin: list[str | None], start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) cut where the unit that wrote the lines changes."""
    runs: list[tuple[int, int]] = []
    for j in range(start, end):
        if runs and origin[j] == origin[runs[-1][0]]:
            runs[-1] = (runs[-1][0], j + 1)
        else:
            runs.append((j, j + 1))
    return runs


def apply_hunks(base: list[str], chosen: list[Hunk]) -> list[str]:
    """``base`` (the seed's lines of one file) with the ``chosen`` hunks of that file applied."""
    out: list[str] = []
    at = 0
    for hunk in sorted(chosen, key=lambda h: h.seed_start):
        out += base[at : hunk.seed_start] + hunk.added
        at = hunk.seed_end
    return out + base[at:]
