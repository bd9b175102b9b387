"""Evaluate one skill on one split: ``skilltune run``.

Accuracies weight every task equally: the mean over tasks of each task's mean
over its scored replicates (the unit a held-out comparison reasons about).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skilltune.agents import get_backend, parse_agent_options
from skilltune.cache import RolloutCache
from skilltune.errors import InfraFailure, UsageError
from skilltune.execute import Executor, make_executor
from skilltune.rollout import NO_SKILL, RetryPolicy, RolloutJob, RolloutRunner, accuracy, jobs_for
from skilltune.runfiles import Phase, RolloutRecord
from skilltune.score.base import require_same_contract
from skilltune.skill import Candidate, load_skill
from skilltune.store import write_json
from skilltune.suite import Suite, load_suite
from skilltune.workspace import check_placement, check_target

SUMMARY_SCHEMA_VERSION = 1


class TaskSummary(BaseModel):
    n: int
    n_scored: int
    hard: float | None
    soft: float | None
    mixed: float | None
    statuses: dict[str, int]
    mixed_per_replicate: list[float | None]


class EvalSummary(BaseModel):
    """summary.json of ``skilltune run``."""

    schema_version: int = SUMMARY_SCHEMA_VERSION
    suite: str
    split: str
    agent: str
    model: str | None
    options: dict[str, Any]
    reps: int
    seed: int
    skill_name: str | None
    skill_hash: str
    contract: str | None
    n_rollouts: int
    n_scored: int
    n_cached: int = Field(default=0, description="rollouts copied from the --cache folder (not run)")
    statuses: dict[str, int]
    contaminated: bool = Field(description="infra errors or crashes remain after retries")
    hard_acc: float | None
    soft_acc: float | None
    mixed: float | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    wall_s: float
    per_task: dict[str, TaskSummary]


def make_jobs(
    suite: Suite, split: str, candidate: Candidate | None, reps: int, seed: int, phase: Phase
) -> list[RolloutJob]:
    """One job per (task, replicate), in canonical order."""
    if reps < 1:
        raise UsageError("--reps must be at least 1")
    return jobs_for(suite.tasks(split), candidate, phase, reps, seed)


def summarize_tasks(
    records: Iterable[RolloutRecord], task_ids: list[str], reps: int
) -> dict[str, TaskSummary]:
    by_task: dict[str, list[RolloutRecord]] = {t: [] for t in task_ids}
    for record in records:
        by_task.setdefault(record.task_id, []).append(record)
    out = {}
    for task_id, recs in by_task.items():
        recs.sort(key=lambda r: r.replicate)
        scored = [r.score for r in recs if r.score is not None]
        per_rep: list[float | None] = [None] * reps
        for r in recs:
            if r.replicate < reps:
                per_rep[r.replicate] = r.score.mixed if r.score else None
        out[task_id] = TaskSummary(
            n=len(recs),
            n_scored=len(scored),
            hard=_mean([s.hard for s in scored]),
            soft=_mean([s.soft for s in scored]),
            mixed=_mean([s.mixed for s in scored]),
            statuses=dict(Counter(r.status for r in recs)),
            mixed_per_replicate=per_rep,
        )
    return out


def _mean(values: list[float] | list[int]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def require_a_result(records: list[RolloutRecord], where: Path) -> None:
    """Raise InfraFailure when every rollout ended ``infra_error`` (in the order they finished: the
    last one's reason is the error shown)."""
    if records and all(r.status == "infra_error" for r in records):
        raise InfraFailure(
            f"all {len(records)} rollout(s) ended infra_error (never scored): the agent or its endpoint "
            f"failed every time; the last error: {records[-1].reason}\nrecords: {where}"
        )


def prepare_out(out: Path, force: bool, suite: Suite, outputs: tuple[str, ...] = ("summary.json",)) -> None:
    """Refuse to mix a new result into an old one unless ``force``, or to write into the suite."""
    if out.resolve().is_relative_to(suite.root.resolve()):
        raise UsageError(f"--out {out} lies inside the suite {suite.root}: results would change the suite")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise UsageError(
                f"--out {out} already holds results; choose a new folder or pass --force to replace them"
            )
        shutil.rmtree(out / "rollouts", ignore_errors=True)
        for name in outputs:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def evaluate(
    suite: Suite | Path | str,
    skill: Candidate | Path | str | None,
    *,
    agent: str = "mock",
    split: str = "val",
    reps: int = 1,
    seed: int = 0,
    workers: int = 4,
    out: Path | str,
    agent_options: dict[str, Any] | None = None,
    force: bool = False,
    executor: Executor | None = None,
    retry: RetryPolicy | None = None,
    on_record: Callable[[RolloutRecord, int, int], None] | None = None,
    cache: Path | str | None = None,
    fresh: bool = False,
    executor_kind: str = "local",
    ray_address: str | None = None,
) -> EvalSummary:
    """Roll out ``skill`` (None: no skill) on every task of ``split``, ``reps`` times; write summary.json."""
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    candidate = skill if isinstance(skill, Candidate) or skill is None else load_skill(skill)
    backend = get_backend(agent)
    options = parse_agent_options(backend, agent_options or {})
    jobs = make_jobs(suite, split, candidate, reps, seed, "eval")
    check_placement(candidate, backend, options.placement)
    check_target(backend, options, suite.tasks(split), [candidate], executor_kind, suite)
    out = Path(out)
    prepare_out(out, force, suite)
    runner = RolloutRunner(
        suite=suite, backend=backend, options=options, out=out, retry=retry or RetryPolicy(),
        cache=RolloutCache(Path(cache)) if cache else None, fresh=fresh,
    )  # fmt: skip
    executor = executor or make_executor(workers, suite.config.max_concurrency, executor_kind, ray_address)
    t0 = time.monotonic()
    records: list[RolloutRecord] = []
    for record in executor.map(jobs, runner):
        records.append(record)
        if on_record is not None:
            on_record(record, len(records), len(jobs))
    scored = [r for r in records if r.score is not None]
    contract = require_same_contract(r.score.contract for r in scored if r.score) if scored else None
    per_task = summarize_tasks(records, [t.id for t in suite.tasks(split)], reps)
    statuses = Counter(r.status for r in records)
    summary = EvalSummary(
        suite=str(suite.source),
        split=split,
        agent=backend.name,
        model=options.model,
        options=options.model_dump(mode="json"),
        reps=reps,
        seed=seed,
        skill_name=candidate.name if candidate else None,
        skill_hash=candidate.hash if candidate else NO_SKILL,
        contract=contract,
        n_rollouts=len(records),
        n_scored=len(scored),
        n_cached=sum(1 for r in records if r.cached_from),
        statuses=dict(sorted(statuses.items())),
        contaminated=bool(statuses.get("infra_error") or statuses.get("crashed")),
        hard_acc=accuracy(records, "hard"),
        soft_acc=accuracy(records, "soft"),
        mixed=accuracy(records, "mixed"),
        tokens_in=sum(r.tokens_in or 0 for r in records),
        tokens_out=sum(r.tokens_out or 0 for r in records),
        cost_usd=round(sum(r.cost_usd or 0.0 for r in records), 6),
        wall_s=round(time.monotonic() - t0, 3),
        per_task=per_task,
    )
    write_json(out / "summary.json", summary)
    require_a_result(records, out / "rollouts" / "eval")
    return summary
