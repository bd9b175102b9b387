"""Several agents in one comparison: does a skill's gain transfer from one agent to another?

``compare_agents`` runs every arm on every agent and computes, per agent, exactly what a
single-agent ``compare`` does (``build_comparison``): each agent's records and comparison.json
lie in a folder of its own under ``out`` (``out/<name>/``, so two agents' records never share a
folder), and ``out/transfer.json`` (``Transfer``) holds the skill x agent table: per agent and arm
the held-out score, per agent each pair's paired difference with its 95% CI and verdict, and the
agent's rollouts, tokens and USD. All agents share the executor and the rollout cache (whose keys
hold the agent and its options); each agent gets the skill placed as its own backend places it.

Every agent's options and placement are checked before anything is written (one rollout session
of all the agents, each in a folder of its own). The agents' rollouts run side by side through one
map of the shared executor (their jobs interleaved, each run by its agent's runner), so no worker
waits for one agent's slowest rollout. ``agent_comparisons`` builds the per-agent comparisons and the
table from each agent's records: here, and for a training run's held-out test (training/final.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skilltune.errors import InfraFailure, UsageError
from skilltune.execute import Executor
from skilltune.measure import read_suite
from skilltune.measure.compare import arm_jobs, build_comparison, by_arm, check_arms
from skilltune.metric import Metric
from skilltune.rollout.runner import RetryPolicy
from skilltune.runfiles import (
    AgentSpec,
    Comparison,
    Phase,
    RolloutRecord,
    Transfer,
    TransferAgent,
    distinct_labels,
)
from skilltune.session import OnRecord, RolloutSession, Target
from skilltune.settings import CompareSettings
from skilltune.skill import Candidate
from skilltune.store import redact
from skilltune.suite import Suite

TRANSFER_FILE = "transfer.json"


def check_agents(agents: Sequence[AgentSpec]) -> None:
    """Refuse no agent, or two agents of one name (their folders would be one)."""
    if not agents:
        raise UsageError("give at least one --agent")
    try:
        distinct_labels(list(agents))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_out(out: Path) -> None:
    """Refuse an output folder inside a run directory: a resumed run would count these rollouts
    against its budgets, and its audit would read them."""
    for folder in [out, *out.resolve().parents]:
        if (folder / "config.json").is_file() and (folder / "seed.json").is_file():
            raise UsageError(
                f"--out {out} lies inside the run {folder}: its budgets and audit would count these "
                f"rollouts; write beside it, e.g. --out {folder.parent / (folder.name + '-transfer')} "
                "(its report shows that table)"
            )


def agent_column(target: Target, comparison: Comparison, records: list[RolloutRecord]) -> TransferAgent:
    """``target``'s column of the transfer table, from its comparison and all its records."""
    return TransferAgent(
        label=target.label,
        agent=target.agent,
        options=redact(dict(target.given)),
        comparison=f"{target.label}/comparison.json",
        scores={name: arm.metric(comparison.metric) for name, arm in comparison.arms.items()},
        pairs=comparison.pairs,
        n_rollouts=len(records),
        n_scored=sum(1 for r in records if r.score is not None),
        n_cached=sum(1 for r in records if r.cached_from is not None),
        tokens=sum(r.spent_tokens for r in records),
        cost_usd=round(sum(r.spent_usd for r in records), 6),
        contaminated=comparison.contaminated,
    )


def agent_comparisons(
    session: RolloutSession,
    arms: Mapping[str, Candidate | None],
    split: str,
    reps: int,
    metric: Metric,
    records: Mapping[str, list[RolloutRecord]],
    out: Path,
) -> Transfer:
    """Each agent's comparison of ``arms`` from its ``records`` (label -> all of its records), written
    to ``out/<label>/comparison.json`` as a single-agent compare writes it (its records as a lone
    agent's: their units are tasks), and the skill x agent table of them all to ``out/transfer.json``."""
    comparisons: dict[str, Comparison] = {}
    columns = []
    for label, target in session.targets.items():
        mine = records.get(label, [])
        alone = [r.model_copy(update={"target": None}) for r in mine]
        comparison = build_comparison(session.suite, split, target.name, reps, metric, by_arm(arms, alone))
        comparison.write(out / label / "comparison.json")
        comparisons[label] = comparison
        columns.append(agent_column(target, comparison, mine))
    first = next(iter(comparisons.values()))
    transfer = Transfer(
        suite=str(session.suite.source), split=first.split, reps=first.reps, metric=first.metric,
        contract=next((c.contract for c in comparisons.values() if c.contract is not None), None),
        arms={name: arm.skill_hash for name, arm in first.arms.items()}, agents=columns,
    )  # fmt: skip
    transfer.write(out / TRANSFER_FILE)
    return transfer


def compare_agents(
    suite: Suite | Path | str,
    arms: Mapping[str, Candidate | None],
    agents: Sequence[AgentSpec],
    settings: CompareSettings | None = None,
    *,
    out: Path | str,
    force: bool = False,
    shared_executor: Executor | None = None,
    retry: RetryPolicy | None = None,
    on_record: OnRecord | None = None,
    **given: Any,
) -> Transfer:
    """Run each arm on the split ``reps`` times with every agent; write ``out/<name>/comparison.json``
    per agent and ``out/transfer.json``. ``settings`` and ``given`` as ``compare`` takes them; each of
    ``agents`` replaces their agent and agent options (seed, workers, executor, cache are shared).
    """
    base = CompareSettings.of(settings, **given)
    split, reps, metric = base.split, base.reps, base.metric
    suite = read_suite(suite, base)
    check_arms(arms)
    check_agents(agents)
    out = Path(out)
    check_out(out)
    session = RolloutSession.open(
        suite, base, agents, tasks=suite.tasks(split), candidates=list(arms.values()), out=out, force=force,
        outputs=(TRANSFER_FILE,), retry=retry, executor=shared_executor, folders="own",
    )  # fmt: skip
    phase: Phase = "test" if split == "test" else "eval"
    jobs = arm_jobs(session, arms, suite.tasks(split), reps, phase)
    finished: dict[str, list[RolloutRecord]] = {label: [] for label in session.targets}
    for count, (job, record) in enumerate(session.stream(jobs), start=1):
        finished[str(job.agent)].append(record)
        if on_record is not None:
            on_record(record, count, len(jobs))
    by_agent = {  # each agent's records arm by arm, each arm in canonical order
        label: [r for _, recs in by_arm(arms, mine).values() for r in recs]
        for label, mine in finished.items()
    }
    transfer = agent_comparisons(session, arms, split, reps, metric, by_agent, out)
    failed = [
        f"{label}: {records[-1].reason}"
        for label, records in by_agent.items()
        if records and all(r.status == "infra_error" for r in records)
    ]
    if failed:
        raise InfraFailure(
            "every rollout of an agent ended infra_error (never scored): its column is empty; the last "
            "error of each: " + "; ".join(failed) + f"\ntransfer table: {out / TRANSFER_FILE}"
        )
    return transfer
