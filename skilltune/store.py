"""Files on disk: atomic writes, canonical JSON and content hashes.

Every file skilltune writes goes through ``write_text``/``write_json`` (temp file
+ rename), so a killed process never leaves a half-written record behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every content hash is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_UMASK = _umask()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; run files are as readable as any other
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def iter_tree(root: Path, *, hidden: bool = False) -> Iterator[Path]:
    """Regular files under ``root`` in sorted order, skipping caches and (unless ``hidden``) dot-files."""
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part == "__pycache__" or (part.startswith(".") and not hidden) for part in rel.parts):
            continue
        if path.is_file():
            yield path


# --- secrets: never written to disk ----------------------------------------------------------

_SECRET_WORDS = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "auth",
    "cookie",
)
REDACTED = "***redacted***"


def is_secret_key(key: str) -> bool:
    """api_key, authToken, password... but not author, tokens_in or api_key_env (a variable's name)."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", key)]
    if not words or words[-1] in ("env", "var", "file", "path"):
        return False
    return words[-1] in _SECRET_WORDS


def redact(value: Any, key: str = "") -> Any:
    """Replace values under secret keys (api_key, token...) before anything is written."""
    if isinstance(value, dict):
        return {k: redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    if isinstance(value, str) and is_secret_key(key):
        return REDACTED
    return value


# --- the run directory ------------------------------------------------------------------------

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
TERMINAL_STATES = ("success", "no-progress", "exhausted", "stopped", "blocked", "crash")


class RunLock:
    """An OS lock (flock) that dies with its process, so no stale locks.

    It lives beside the run directory (``runs/.TAG.lock``), not inside it, so it
    also guards creating, replacing and renaming the directory itself.
    """

    def __init__(self, path: Path, guards: Path | None = None) -> None:
        self.path = path
        self.guards = guards or path.parent  # what the lock protects, for messages
        self._fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        from skilltune.errors import UsageError

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
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RunDir:
    """Paths and append-only logs of ``runs/<tag>/`` (the layout is a contract: tools read it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = root / "config.json"
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
        self.steps = root / "steps"

    def step_dir(self, step: int) -> Path:
        return self.steps / f"step_{step:04d}"

    def epoch_dir(self, epoch: int) -> Path:
        return self.steps / f"epoch_{epoch:04d}"

    def lock(self) -> RunLock:
        return RunLock(self.root.parent / f".{self.root.name}.lock", guards=self.root)

    def journal(self, event: str, **fields: Any) -> None:
        from datetime import UTC, datetime

        row = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "event": event, **fields}
        self.root.mkdir(parents=True, exist_ok=True)
        with self.journal_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            handle.flush()

    def read_journal(self) -> list[dict[str, Any]]:
        """Every complete event; a torn last line (a kill mid-write) is ignored."""
        if not self.journal_path.is_file():
            return []
        rows = []
        for line in self.journal_path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def terminal(self) -> tuple[str, str] | None:
        if not self.terminal_path.is_file():
            return None
        state, _, reason = self.terminal_path.read_text(encoding="utf-8").strip().partition(": ")
        return state, reason

    def write_terminal(self, state: str, reason: str) -> None:
        if state not in TERMINAL_STATES:
            raise ValueError(f"unknown terminal state {state!r}")
        write_text(self.terminal_path, f"{state}: {' '.join(reason.split())}\n")

    def write_results(self, rows: list[dict[str, Any]]) -> None:
        """Rewrite results.tsv from the step records (idempotent: a resumed run never duplicates a row)."""

        def cell(value: Any) -> str:
            if value is None:
                return ""
            if isinstance(value, float):
                return f"{value:.6g}"
            return " ".join(str(value).split()).replace("\t", " ")

        lines = ["\t".join(RESULTS_HEADER)]
        lines += ["\t".join(cell(row.get(col)) for col in RESULTS_HEADER) for row in rows]
        write_text(self.results, "\n".join(lines) + "\n")


class UnitRecord(BaseModel):
    """step.json / epoch.json: a finished unit of a training run (results.tsv is rebuilt from these).

    ``verdict`` is keep, discard or crash; ``decision`` is what decided it (the gate's
    decision, or lint / screen / skip); ``edits`` are compact ``op@anchor: text`` forms.
    """

    schema_version: int = 1
    kind: Literal["step", "epoch"]
    index: int
    step: int
    epoch: int
    candidate: str
    parent: str
    verdict: Literal["keep", "discard", "crash"]
    decision: str
    reason: str
    metric: str
    val_candidate: float | None = None
    val_incumbent: float | None = None
    alpha: float | None = None  # set when a gate decided the unit
    rollouts: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    edits: list[str] = Field(default_factory=list)
    edit_texts: list[str] = Field(default_factory=list)

    def row(self) -> dict[str, Any]:
        description = "; ".join(self.edits[:3]) if self.edits else self.reason
        if self.verdict != "keep" and self.edits:
            description = f"{description} ({self.reason})"
        return {
            "step": self.step,
            "epoch": self.epoch,
            "phase": self.kind,
            "candidate": self.candidate[:12],
            "parent": self.parent[:12],
            "verdict": self.verdict,
            "metric": self.metric,
            "val_candidate": self.val_candidate,
            "val_incumbent": self.val_incumbent,
            "rollouts": self.rollouts,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "edits": len(self.edits),
            "description": description,
        }
