"""The pure-noise twin of ../suite: the same tasks, scored by a seeded coin that never reads the reply.

A negative control for a real model. The rollouts are real (the model answers every
prompt as in the twin), but ``score`` ignores the reply: each rollout scores 1 or 0 by a
fair coin seeded on the task id, the phase, the candidate and the replicate, which
skilltune's rollout layout names in the folder of the rollout's ``output.txt``
(``rollouts/<phase>/<cand12>/<task>_r<k>/``). Every arm, and every replicate, gets its
own coin, as a real model's sampling noise would; the same rollout always scores the
same. No skill can change the expected score (0.5), so a run on this suite should keep
nothing, and a comparison should find no difference beyond its error rate.

The proposer pool is the twin's, read from ../suite/scoring.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

TWIN = Path(__file__).resolve().parent.parent / "suite"


def _twin_config() -> dict[str, Any]:
    text = (TWIN / "scoring.md").read_text(encoding="utf-8")
    block = re.search(r"^```json\s*\n(.*?)^```", text, re.S | re.M)
    if block is None:
        raise ValueError(f"{TWIN / 'scoring.md'} has no json config block")
    config: dict[str, Any] = json.loads(block.group(1))
    return config


CONFIG = {
    "name": "local-model-null",
    "mixed_weight": 0.5,
    "max_concurrency": 1,
    "proposer_pool": _twin_config()["proposer_pool"],
}


def tasks(split: str) -> list[dict[str, Any]]:
    path = TWIN / f"{split}.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            task = json.loads(line)
            task.pop("scoring", None)  # the coin decides; the twin's expected answers stay out
            out.append(task)
    return out


def prepare(task: Any, workspace: Path) -> None:
    """A chat task needs no files."""


def coin(task_id: str, rollout_folder: Path) -> int:
    """1 or 0, fair, from the task id and the rollout's phase, candidate and replicate."""
    phase, candidate, name = (
        rollout_folder.parent.parent.name,
        rollout_folder.parent.name,
        rollout_folder.name,
    )
    replicate = name.rsplit("_r", 1)[-1]
    digest = hashlib.sha256(f"{task_id}|{phase}|{candidate}|{replicate}".encode()).digest()
    return digest[0] & 1


def score(task: Any, workspace: Path, agent_result: Any) -> dict[str, Any]:
    folder = agent_result.output_file.parent if agent_result.output_file is not None else None
    if folder is None or not re.fullmatch(r".+_r\d+", folder.name):
        raise ValueError("no rollout folder to seed the coin on (agent_result.output_file is not set)")
    heads = coin(task.id, folder)
    return {"hard": heads, "soft": float(heads), "checks": [f"coin: {'heads' if heads else 'tails'}"]}
