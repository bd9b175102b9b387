"""Runs the report tests read: the mock demo trained for real (the mock agent and proposer)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.helpers import MOCK_SKILL, MOCK_SUITE

DEMO: dict[str, Any] = {"max_steps": 8, "seed": 1}  # what `make demo` runs (the default alpha)


def train_demo(runs_dir: Path, tag: str = "demo", **settings: Any) -> Path:
    import skilltune

    skilltune.train(MOCK_SUITE, MOCK_SKILL, tag=tag, runs_dir=str(runs_dir), **{**DEMO, **settings})
    return runs_dir / tag


class _StopAfterBaseline:
    """A reporter that asks the run to stop once the seed's baseline is done (a STOP file, as a user
    would): the run ends ``stopped`` before its first unit, and ``resume`` continues it."""

    def __init__(self, run: Path) -> None:
        self.run = run

    def update(self, progress: object) -> None:
        (self.run / "STOP").write_text("")

    def line(self, text: str) -> None:
        return None

    def close(self) -> None:
        return None


def train_stopped(runs_dir: Path, tag: str, **settings: Any) -> Path:
    """A demo run stopped after its baseline (STOP removed again, so ``resume`` may continue it)."""
    import skilltune

    run = runs_dir / tag
    skilltune.train(
        MOCK_SUITE, MOCK_SKILL, tag=tag, runs_dir=str(runs_dir), reporter=_StopAfterBaseline(run),
        **{**DEMO, **settings},
    )  # fmt: skip
    (run / "STOP").unlink()
    return run


class _StopInGate:
    """A reporter that asks the run to stop (a STOP file) once the gate of step ``step`` has run
    ``after`` rollouts, as a Ctrl-C there would: the rollouts already running finish and the run ends
    ``stopped`` in that unit, before its record."""

    def __init__(self, run: Path, step: int, after: int) -> None:
        self.run, self.step, self.after = run, step, after
        self.start: int | None = None

    def update(self, progress: object) -> None:
        from skilltune.progress import RunProgress

        assert isinstance(progress, RunProgress)
        if progress.phase != "gate" or progress.step != self.step:
            return
        if self.start is None:
            self.start = progress.rollouts_done - 1  # this update reports the gate's first rollout
        if progress.rollouts_done - self.start >= self.after:
            (self.run / "STOP").write_text("")

    def line(self, text: str) -> None:
        return None

    def close(self) -> None:
        return None


def train_stopped_in_gate(runs_dir: Path, tag: str, step: int = 2, after: int = 20, **settings: Any) -> Path:
    """A demo run stopped in the gate of step ``step`` (STOP removed again, so ``resume`` may continue it).
    ``carry="off"`` unless ``settings`` say otherwise: a gate in every step, where the default --carry
    screen gates none of the demo's steps 1-3 (their candidates are carried into step 4's)."""
    import skilltune

    run = runs_dir / tag
    skilltune.train(
        MOCK_SUITE, MOCK_SKILL, tag=tag, runs_dir=str(runs_dir), reporter=_StopInGate(run, step, after),
        **{**DEMO, "carry": "off", **settings},
    )  # fmt: skip
    (run / "STOP").unlink()
    return run


def make_live(run: Path, unit: str) -> None:
    """Make a finished run look as it did while ``unit`` ran, in a process that is alive (this one):
    the unit's record, the held-out test and TERMINAL gone, a session open, the run's lock ours."""
    import os
    import shutil

    from skilltune.runfiles import SessionStart

    for name in ("TERMINAL", "comparison.json", "audit.json"):
        (run / name).unlink(missing_ok=True)
    shutil.rmtree(run / "final", ignore_errors=True)
    kind = unit.partition("_")[0]
    (run / "steps" / unit / f"{kind}.json").unlink()
    with (run / "journal.jsonl").open("a") as journal:
        journal.write(SessionStart(pid=os.getpid()).model_dump_json() + "\n")
    (run.parent / f".{run.name}.lock").write_text(str(os.getpid()))


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file under ``root`` (skill-repo's .git included) with the sha256 of its bytes."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).as_posix() not in skip
    }


def results_rows(run: Path) -> list[dict[str, str]]:
    """results.tsv as the run wrote it (an independent source for the report's counts)."""
    header, *lines = (run / "results.tsv").read_text().splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"), strict=True)) for line in lines]


def val_tasks() -> list[str]:
    return [
        json.loads(line)["id"] for line in (MOCK_SUITE / "val.jsonl").read_text().splitlines() if line.strip()
    ]
