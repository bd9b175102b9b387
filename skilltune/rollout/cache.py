"""The rollout cache: a finished rollout is never run twice.

A rollout is keyed by everything that determines it: the candidate's hash, the
task's content hash, the replicate index, the seed, the agent with its model and
options, and the scoring contract. A hit copies the stored record folder into
place (record.json says where it came from); only finished rollouts are stored
(never an infra error, a crash or a scoring error, which must run again).

Training runs give every unit fresh replicate indices, so the cache can never
hand the incumbent back the very batch that selected it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from skilltune.runfiles import RolloutRecord, RunFileError
from skilltune.store import canonical_json, sha256_text

STORABLE = ("ok", "task_failed", "timeout")


def rollout_key(
    candidate: str, task_hash: str, replicate: int, seed: int, options_hash: str, contract: str
) -> str:
    return sha256_text(canonical_json([candidate, task_hash, replicate, seed, options_hash, contract]))


class RolloutCache:
    """Record folders under ``root/<key[:2]>/<key>/``; safe to share between runs and processes."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def fetch(self, key: str, dest: Path, phase: str, target: str | None = None) -> bool:
        """Copy the cached rollout into ``dest`` (re-labelled with ``phase`` and the agent's label
        ``target``: the key holds the backend and its options, not the label); False on a miss.

        A record this skilltune cannot read (written by a newer one sharing the cache) is a miss."""
        source = self._path(key)
        if not (source / "record.json").is_file():
            return False
        try:
            record = RolloutRecord.read(source / "record.json")
        except RunFileError:
            return False
        staging = dest.with_name(f".{dest.name}.cache-tmp")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source, staging)
        record.model_copy(update={"phase": phase, "target": target, "cached_from": key}).write(
            staging / "record.json"
        )
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
        return True

    def store(self, key: str, folder: Path, status: str) -> None:
        if status not in STORABLE:
            return
        target = self._path(key)
        if (target / "record.json").is_file():
            return
        staging = target.with_name(f".{key}.tmp-{id(self)}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder, staging)
        try:
            staging.rename(target)
        except OSError:  # another process stored the same rollout first
            shutil.rmtree(staging, ignore_errors=True)
