"""Evaluate one skill on one split: ``skilltune run``.

Accuracies weight every task equally: the mean over tasks of each task's mean
over its scored replicates (the unit a held-out comparison reasons about).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skilltune.execute import Executor
from skilltune.measure import read_suite
from skilltune.measure.compare import decisions, expected_loads
from skilltune.rollout.runner import NO_SKILL, RetryPolicy
from skilltune.rollout.tally import accuracy
from skilltune.runfiles import UNDECIDED, RolloutRecord
from skilltune.sandbox import RolloutSandbox, rollout_sandbox
from skilltune.score.base import require_same_contract
from skilltune.score.trigger import TriggerStats, trigger_stats
from skilltune.session import OnRecord, RolloutSession, require_a_result
from skilltune.settings import RunSettings
from skilltune.skill import Candidate, load_skill
from skilltune.store import write_json
from skilltune.suite import Suite

SUMMARY_SCHEMA_VERSION = 2  # 2: trigger (sandbox, added with a default, reads the same)


class TaskSummary(BaseModel):
    n: int
    n_scored: int
    hard: float | None
    soft: float | None
    mixed: float | None
    statuses: dict[str, int]
    mixed_per_replicate: list[float | None]


class SuiteTotals(BaseModel):
    """skill-trainer's per-suite totals: tasks grouped by their ``suite`` field."""

    n_tasks: int
    hard: float | None
    soft: float | None
    mixed: float | None


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
    sandbox: RolloutSandbox = Field(
        default="none", description="how the rollouts ran: bwrap (sealed), none, inert (no process to seal)"
    )
    statuses: dict[str, int]
    contaminated: bool = Field(description="infra errors, crashes or unscored rollouts remain after retries")
    hard_acc: float | None
    soft_acc: float | None
    mixed: float | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    judge_tokens: int = Field(default=0, description="the judge's tokens, in and out (judged suites)")
    judge_cost_usd: float = 0.0
    wall_s: float
    per_task: dict[str, TaskSummary]
    per_suite: dict[str, SuiteTotals] = Field(
        default_factory=dict, description="totals by the tasks' suite field, when they name more than one"
    )
    trigger: TriggerStats | None = Field(
        default=None, description="load decisions on the split's trigger tasks (precision, recall, accuracy)"
    )


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


def evaluate(
    suite: Suite | Path | str,
    skill: Candidate | Path | str | None,
    settings: RunSettings | None = None,
    *,
    out: Path | str,
    force: bool = False,
    shared_executor: Executor | None = None,
    retry: RetryPolicy | None = None,
    on_record: OnRecord | None = None,
    **given: Any,
) -> EvalSummary:
    """Roll out ``skill`` (None: no skill) on every task of the split, ``reps`` times; write summary.json.

    ``settings`` (default: RunSettings' defaults) with the keywords in ``given`` applied (any of its
    fields: split, reps, agent, agent_options, seed, workers, executor, cache, ...); a path as
    ``suite`` is read with their prompt variant and judge options. ``shared_executor``: an executor
    to run on (e.g. one Ray cluster for several calls) instead of one made from the settings.
    """
    chosen = RunSettings.of(settings, **given)
    split, reps = chosen.split, chosen.reps
    suite = read_suite(suite, chosen)
    candidate = skill if isinstance(skill, Candidate) or skill is None else load_skill(skill)
    tasks = suite.tasks(split)
    out = Path(out)
    session = RolloutSession.open(
        suite, chosen, tasks=tasks, candidates=[candidate], out=out, force=force,
        outputs=("summary.json",), retry=retry, executor=shared_executor,
    )  # fmt: skip
    jobs = session.jobs(tasks, candidate, "eval", reps)
    target = session.target
    t0 = time.monotonic()
    records = session.run(jobs, on_record=on_record)
    scored = [r for r in records if r.score is not None]
    contract = require_same_contract(r.score.contract for r in scored if r.score) if scored else None
    per_task = summarize_tasks(records, [t.id for t in tasks], reps)
    statuses = Counter(r.status for r in records)
    summary = EvalSummary(
        suite=str(suite.source),
        split=split,
        agent=target.name,
        model=target.options.model,
        options=target.options.model_dump(mode="json"),
        reps=reps,
        seed=chosen.seed,
        skill_name=candidate.name if candidate else None,
        skill_hash=candidate.hash if candidate else NO_SKILL,
        contract=contract,
        n_rollouts=len(records),
        n_scored=len(scored),
        n_cached=sum(1 for r in records if r.cached_from),
        sandbox=rollout_sandbox(session.seal, target.backend.seal_support),
        statuses=dict(sorted(statuses.items())),
        contaminated=any(r.status in UNDECIDED for r in records),
        hard_acc=accuracy(records, "hard"),
        soft_acc=accuracy(records, "soft"),
        mixed=accuracy(records, "mixed"),
        tokens_in=sum(r.tokens_in or 0 for r in records),
        tokens_out=sum(r.tokens_out or 0 for r in records),
        cost_usd=round(sum(r.cost_usd or 0.0 for r in records), 6),
        judge_tokens=sum(r.judge.tokens for r in records if r.judge),
        judge_cost_usd=round(sum(r.judge.cost_usd for r in records if r.judge), 6),
        wall_s=round(time.monotonic() - t0, 3),
        per_task=per_task,
    )
    summary.per_suite = suite_totals(suite, split, records)
    summary.trigger = trigger_stats(decisions(records, expected_loads(suite, split)))
    write_json(out / "summary.json", summary)
    require_a_result(records, out / "rollouts" / "eval")
    return summary


def suite_totals(suite: Suite, split: str, records: list[RolloutRecord]) -> dict[str, SuiteTotals]:
    """Accuracies per ``suite`` name of the tasks (skill-trainer's primary/secondary suites); empty
    when every task is in one suite and the config names none."""
    names = {t.id: str(t.field("suite") or "primary") for t in suite.tasks(split)}
    if len(set(names.values())) < 2 and suite.config.secondary_suite is None:
        return {}
    out = {}
    for name in sorted(set(names.values())):
        own = [r for r in records if names.get(r.task_id) == name]
        out[name] = SuiteTotals(
            n_tasks=sum(1 for n in names.values() if n == name),
            hard=accuracy(own, "hard"),
            soft=accuracy(own, "soft"),
            mixed=accuracy(own, "mixed"),
        )
    return out
