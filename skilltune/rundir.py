"""The run directory ``runs/<tag>/``: its paths, lock, journal, results.tsv and TERMINAL.

The layout is a contract (tools and reports read it; DESIGN.md lists it). The JSON files
in it are read and written through their models in ``skilltune.runfiles``.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from skilltune.errors import UsageError
from skilltune.runfiles import (
    UNIT_FILES,
    AskFile,
    AuditFile,
    Comparison,
    FindingsRecord,
    JournalEvent,
    RunConfigFile,
    SeedFile,
    UnitRecord,
    parse_event,
)
from skilltune.store import write_text

RESULTS_HEADER = (
    "step",
    "epoch",
    "phase",
    "candidate",
    "parent",
    "verdict",
    "metric",
    "val_candidate",
    "val_incumbent",
    "rollouts",
    "tokens",
    "cost_usd",
    "edits",
    "description",
)
# How a run ended: the first word of its TERMINAL line.
TerminalState = Literal["success", "no-progress", "exhausted", "stopped", "blocked", "crash"]
TERMINAL_STATES: tuple[TerminalState, ...] = get_args(TerminalState)


class Terminal(NamedTuple):
    """A run's TERMINAL line: how it ended and why."""

    state: TerminalState
    reason: str


def _terminal(line: str) -> Terminal:
    """A TERMINAL line; one whose state skilltune never writes (edited by hand, or truncated) reads
    as a crash that keeps the whole line, so every reader treats it alike."""
    word, _, reason = line.strip().partition(": ")
    for state in TERMINAL_STATES:
        if word == state:
            return Terminal(state, reason)
    return Terminal("crash", f"{word}: {reason}")


class RunLock:
    """An OS lock (flock) that dies with its process, so no stale locks.

    It lives beside the run directory (``runs/.TAG.lock``), not inside it, so it
    also guards creating, replacing and renaming the directory itself.
    """

    def __init__(self, path: Path, guards: Path) -> None:
        self.path = path
        self.guards = guards  # what the lock protects, for messages
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise UsageError(
                f"{self.guards} is in use by another skilltune process (pid {holder}); wait for it to "
                "end, or stop it (a STOP file in the run directory, or Ctrl-C)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RunDir:
    """Paths and append-only logs of ``runs/<tag>/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = root / "config.json"
        self.seed_json = root / "seed.json"
        self.results = root / "results.tsv"
        self.journal_path = root / "journal.jsonl"
        self.terminal_path = root / "TERMINAL"
        self.stop_file = root / "STOP"
        self.meta = root / "META.md"
        self.allocation = root / "allocation.md"
        self.skill_repo = root / "skill-repo"
        self.seed_dir = root / "seed"
        self.best_dir = root / "best_skill"
        self.best_md = root / "best_skill.md"
        self.comparison = root / "comparison.json"
        self.final = root / "final"
        self.steps = root / "steps"
        self.audit = root / "audit.json"
        self.findings_md = root / "findings.md"
        self.findings_record = root / "findings.json"

    def unit_dir(self, kind: str, index: int) -> Path:
        """steps/step_NNNN (step 0 holds the seed's baseline pass) or steps/epoch_NNNN."""
        return self.steps / f"{kind}_{index:04d}"

    def unit_record(self, kind: str, index: int) -> UnitRecord | None:
        """The unit's step.json / epoch.json (its commit point), or None while it is unfinished."""
        path = self.unit_dir(kind, index) / f"{kind}.json"
        return UnitRecord.read(path) if path.is_file() else None

    def check_files(self) -> None:
        """Read every file of the run but the rollout records through its model, so that a file this
        skilltune cannot read (a newer one's, a damaged one) stops a resume before anything is written."""
        RunConfigFile.read(self.config)
        SeedFile.read(self.seed_json)
        self.read_journal()
        for path in sorted(self.steps.glob("*/*.json")):
            model = UNIT_FILES.get(path.name)
            if model is not None:
                model.read(path)
        for path in sorted(self.steps.glob("*/asks/*.json")):
            AskFile.read(path)
        if self.comparison.is_file():
            Comparison.read(self.comparison)
        if self.audit.is_file():
            AuditFile.read(self.audit)
        if self.findings_record.is_file():
            FindingsRecord.read(self.findings_record)

    def lock(self) -> RunLock:
        return RunLock(self.root.parent / f".{self.root.name}.lock", guards=self.root)

    def journal(self, event: JournalEvent) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with self.journal_path.open("a", encoding="utf-8") as handle:
            handle.write(event.model_dump_json(exclude_none=True) + "\n")
            handle.flush()

    def read_journal(self) -> list[JournalEvent]:
        """Every complete event; a torn last line (a kill mid-write) is ignored."""
        if not self.journal_path.is_file():
            return []
        events = []
        lines = self.journal_path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append(parse_event(raw, f"{self.journal_path}:{number}"))
        return events

    def terminal(self) -> Terminal | None:
        if not self.terminal_path.is_file():
            return None
        return _terminal(self.terminal_path.read_text(encoding="utf-8"))

    def write_terminal(self, state: TerminalState, reason: str) -> None:
        if state not in TERMINAL_STATES:  # the type says so; a plug-in or a cast could still try
            raise ValueError(f"unknown terminal state {state!r} (known: {', '.join(TERMINAL_STATES)})")
        write_text(self.terminal_path, f"{state}: {' '.join(reason.split())}\n")

    def write_results(self, records: list[UnitRecord]) -> None:
        """Rewrite results.tsv from the unit records (idempotent: a resumed run never duplicates a row)."""

        def cell(value: Any) -> str:
            if value is None:
                return ""
            if isinstance(value, float):
                return f"{value:.6g}"
            return " ".join(str(value).split()).replace("\t", " ")

        rows = [record.row() for record in records]
        # a run with several agents adds each gate's per-agent figures (one agent: the columns as before)
        header = (*RESULTS_HEADER, "agents") if any("agents" in row for row in rows) else RESULTS_HEADER
        lines = ["\t".join(header)]
        lines += ["\t".join(cell(row.get(col)) for col in header) for row in rows]
        write_text(self.results, "\n".join(lines) + "\n")
