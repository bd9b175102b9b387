"""Held-out comparison of arms (skills, or no skill): the only number that matters.

``compare`` runs every arm on a split with replicates and writes comparison.json;
``build_comparison`` turns records into that schema (train's final step uses it too).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skilltune.errors import UsageError
from skilltune.execute import Executor
from skilltune.measure import read_suite
from skilltune.metric import Metric
from skilltune.rollout.runner import NO_SKILL, RetryPolicy, RolloutJob
from skilltune.rollout.tally import Unit, accuracy, unit_of
from skilltune.runfiles import UNDECIDED, ArmResult, Comparison, PairResult, Phase, RolloutRecord
from skilltune.score.base import require_same_contract
from skilltune.score.trigger import trigger_stats
from skilltune.session import OnRecord, RolloutSession, require_a_result
from skilltune.settings import CompareSettings
from skilltune.skill import Candidate
from skilltune.stats import paired_differences, paired_t, task_means
from skilltune.suite import Suite, Task


def decisions(
    records: list[RolloutRecord], should: Mapping[str, bool]
) -> list[tuple[str, bool, bool | None]]:
    """``(unit, should_trigger, skill_loaded)`` of each record whose unit (its task; with several
    agents ``label/task``) is in ``should``; no decision for a rollout that yielded no result."""
    named = [(str(unit_of(r)), r) for r in records]
    return [
        (unit, should[unit], None if r.status in UNDECIDED else r.skill_loaded)
        for unit, r in named
        if unit in should
    ]


def expected_loads(suite: Suite, split: str) -> dict[str, bool]:
    """task id -> should_trigger, for the tasks of ``split`` that give one."""
    return {t.id: t.should_trigger for t in suite.tasks(split) if t.should_trigger is not None}


def _arm(
    records: list[RolloutRecord],
    units: Sequence[Unit],
    reps: int,
    metric: Metric,
    skill_hash: str,
    should: Mapping[str, bool],
) -> ArmResult:
    """One arm's accuracies and per-unit, per-replicate scores (records outside the design are ignored)."""
    per_task: dict[str, list[float | None]] = {str(u): [None] * reps for u in units}
    kept = [r for r in records if str(unit_of(r)) in per_task and r.replicate < reps]
    for r in kept:
        per_task[str(unit_of(r))][r.replicate] = r.score.metric(metric) if r.score else None
    return ArmResult(
        skill_hash=skill_hash,
        hard_acc=accuracy(kept, "hard", pool_agents=False),
        soft_acc=accuracy(kept, "soft", pool_agents=False),
        mixed=accuracy(kept, "mixed", pool_agents=False),
        n_tasks=len(task_means(per_task)),
        n_rollouts=len(records),
        n_scored=sum(1 for r in records if r.score is not None),
        statuses=dict(sorted(Counter(r.status for r in records).items())),
        per_task=per_task,
        trigger=trigger_stats(decisions(kept, should)),
    )


def build_comparison(
    suite: Suite,
    split: str,
    agent: str,
    reps: int,
    metric: Metric,
    arms: Mapping[str, tuple[str, list[RolloutRecord]]],
    units: Sequence[Unit] | None = None,
) -> Comparison:
    """``arms``: name -> (skill hash, records). Pairs are every (a, b) in arm order; diff is b - a.
    ``units``: the rows, each paired across arms (default: the split's tasks; a training run's
    several agents: its (agent, task) units, ``label/task``)."""
    units = units if units is not None else [Unit(t.id) for t in suite.tasks(split)]
    loads = expected_loads(suite, split)
    should = {str(u): loads[u.task] for u in units if u.task in loads}
    results = {name: _arm(recs, units, reps, metric, h, should) for name, (h, recs) in arms.items()}
    scored = [r.score.contract for _, recs in arms.values() for r in recs if r.score is not None]
    contract = require_same_contract(scored) if scored else None
    pairs = []
    for a, b in itertools.combinations(results, 2):
        diffs = paired_differences(task_means(results[a].per_task), task_means(results[b].per_task))
        res = paired_t(diffs)
        pairs.append(
            PairResult(
                a=a,
                b=b,
                diff=round(res.diff, 6),
                # scores lie in [0, 1], so a difference in [-1, 1]: the t interval is clipped to it
                ci95=[round(max(-1.0, res.ci95[0]), 6), round(min(1.0, res.ci95[1]), 6)]
                if res.ci95
                else None,
                p_value=None if res.p_value is None else round(res.p_value, 6),
                n_tasks=res.n,
                verdict=res.verdict,
            )
        )
    contaminated = any(r.status in UNDECIDED for _, recs in arms.values() for r in recs)
    return Comparison(
        suite=str(suite.source),
        split=split,
        agent=agent,
        reps=reps,
        metric=metric,
        contract=contract,
        contaminated=contaminated,
        arms=results,
        pairs=pairs,
    )


def arm_jobs(
    session: RolloutSession, arms: Mapping[str, Candidate | None], tasks: list[Task], reps: int, phase: Phase
) -> list[RolloutJob]:
    """Every arm's jobs on ``tasks`` (arm by arm, each in canonical order): one pool of jobs."""
    return [job for cand in arms.values() for job in session.jobs(tasks, cand, phase, reps)]


def by_arm(
    arms: Mapping[str, Candidate | None], records: list[RolloutRecord]
) -> dict[str, tuple[str, list[RolloutRecord]]]:
    """Arm name -> (skill hash, its records in canonical (task, replicate) order)."""
    by_cand: dict[str, list[RolloutRecord]] = {}
    for record in records:
        by_cand.setdefault(record.candidate, []).append(record)
    result = {}
    for name, cand in arms.items():
        key = cand.hash if cand else NO_SKILL
        result[name] = (key, sorted(by_cand.get(key, []), key=lambda r: (r.task_id, r.replicate)))
    return result


def run_arms(
    session: RolloutSession,
    arms: Mapping[str, Candidate | None],
    split: str,
    reps: int,
    phase: Phase,
    on_record: OnRecord | None = None,
    out: Path | None = None,
) -> dict[str, tuple[str, list[RolloutRecord]]]:
    """Roll out every arm on ``split`` (one pool of jobs; records sorted into canonical order)."""
    jobs = arm_jobs(session, arms, session.suite.tasks(split), reps, phase)
    return by_arm(arms, session.run(jobs, out, on_record))


def check_arms(arms: Mapping[str, Candidate | None]) -> None:
    """Refuse fewer than two arms, or two arms of one skill."""
    if len(arms) < 2:
        raise UsageError("compare needs at least two arms (NAME=SKILL ..., or one skill and --no-skill)")
    hashes = [c.hash if c else NO_SKILL for c in arms.values()]
    if len(set(hashes)) < len(hashes):
        raise UsageError("two arms are the same skill (same content hash): give different skills")


def compare(
    suite: Suite | Path | str,
    arms: Mapping[str, Candidate | None],
    settings: CompareSettings | None = None,
    *,
    out: Path | str,
    force: bool = False,
    shared_executor: Executor | None = None,
    retry: RetryPolicy | None = None,
    on_record: OnRecord | None = None,
    **given: Any,
) -> Comparison:
    """Run each arm on the split ``reps`` times with one agent and write ``out/comparison.json``.

    ``settings`` and ``given`` as ``evaluate`` takes them, for a CompareSettings (split, reps,
    metric, ...); several agents are ``measure.transfer.compare_agents``'s.
    """
    chosen = CompareSettings.of(settings, **given)
    if chosen.several:
        raise UsageError("compare() runs one agent: give several to compare_agents() (measure/transfer.py)")
    split, reps = chosen.split, chosen.reps
    suite = read_suite(suite, chosen)
    check_arms(arms)
    out = Path(out)
    session = RolloutSession.open(
        suite, chosen, tasks=suite.tasks(split), candidates=list(arms.values()), out=out, force=force,
        outputs=("comparison.json",), retry=retry, executor=shared_executor,
    )  # fmt: skip
    phase: Phase = "test" if split == "test" else "eval"
    finished: list[RolloutRecord] = []  # in the order they finished

    def record(done: RolloutRecord, count: int, total: int) -> None:
        finished.append(done)
        if on_record is not None:
            on_record(done, count, total)

    recs = run_arms(session, arms, split, reps, phase, record)
    comparison = build_comparison(suite, split, session.target.name, reps, chosen.metric, recs)
    comparison.write(out / "comparison.json")
    require_a_result(finished, out / "rollouts" / phase)
    return comparison
