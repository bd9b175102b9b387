"""Several agents in one comparison: does a skill's gain transfer from one agent to another?

``compare_agents`` runs every arm on every agent and computes, per agent, exactly what a
single-agent ``compare`` does (``build_comparison``): each agent's records and comparison.json
lie in a folder of its own under ``out`` (``out/<name>/``, so two agents' records never share a
folder), and ``out/transfer.json`` (``Transfer``) holds the skill x agent table: per agent and arm
the held-out score, per agent each pair's paired difference with its 95% CI and verdict, and the
agent's rollouts, tokens and USD. All agents share the executor and the rollout cache (whose keys
hold the agent and its options); each agent gets the skill placed as its own backend places it.

Every agent's options and placement are checked before anything is written. The agents' rollouts
run side by side through one map of the shared executor (``run_agents``: their jobs interleaved,
each run by its agent's runner), so no worker waits for one agent's slowest rollout.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skilltune.errors import InfraFailure, UsageError
from skilltune.execute import Executor, make_executor
from skilltune.measure import read_suite
from skilltune.measure.compare import arm_jobs, build_comparison, by_arm, check_arms
from skilltune.rollout.routes import Batches
from skilltune.rollout.runner import NO_SKILL, RetryPolicy
from skilltune.runfiles import AgentSpec, Comparison, Phase, RolloutRecord, Transfer, TransferAgent
from skilltune.session import OnRecord, RolloutSession, prepare_out, refuse_the_same_agent_twice
from skilltune.settings import CompareSettings
from skilltune.skill import Candidate
from skilltune.store import redact
from skilltune.suite import Suite

TRANSFER_FILE = "transfer.json"


def check_agents(agents: Sequence[AgentSpec]) -> None:
    """Refuse no agent, or two agents of one name (their folders would be one)."""
    if not agents:
        raise UsageError("give at least one --agent")
    labels = [a.label for a in agents]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise UsageError(f"two agents are named {twice[0]!r}: name each one (--agent NAME=BACKEND)")


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


def agent_column(
    label: str, spec: AgentSpec, comparison: Comparison, records: list[RolloutRecord]
) -> TransferAgent:
    """``spec``'s column of the transfer table, from its comparison and all its records."""
    return TransferAgent(
        label=label,
        agent=spec.agent,
        options=redact(dict(spec.options)),
        comparison=f"{label}/comparison.json",
        scores={name: arm.metric(comparison.metric) for name, arm in comparison.arms.items()},
        pairs=comparison.pairs,
        n_rollouts=len(records),
        n_scored=sum(1 for r in records if r.score is not None),
        n_cached=sum(1 for r in records if r.cached_from is not None),
        tokens=sum(r.spent_tokens for r in records),
        cost_usd=round(sum(r.spent_usd for r in records), 6),
        contaminated=comparison.contaminated,
    )


def build_transfer(
    suite: Suite, comparisons: Mapping[str, Comparison], columns: Sequence[TransferAgent]
) -> Transfer:
    """transfer.json from each agent's comparison (all of one split, reps, metric and arms)."""
    first = next(iter(comparisons.values()))
    arms = {name: arm.skill_hash for name, arm in first.arms.items()}
    contract = next((c.contract for c in comparisons.values() if c.contract is not None), None)
    return Transfer(
        suite=str(suite.source), split=first.split, reps=first.reps, metric=first.metric,
        contract=contract, arms=arms, agents=list(columns),
    )  # fmt: skip


def run_agents(
    sessions: Mapping[str, RolloutSession],
    arms: Mapping[str, Candidate | None],
    split: str,
    reps: int,
    phase: Phase,
    out: Path,
    on_record: OnRecord | None = None,
) -> dict[str, dict[str, tuple[str, list[RolloutRecord]]]]:
    """Every agent's arms on ``split`` through one map of the (shared) executor, side by side
    (``Batches``); per agent what ``run_arms`` gives, its records under ``out/<label>``.

    The executor yields records, not jobs: a record goes to the agent whose runner's options hash
    it holds (``compare_agents`` refuses two labels of the very same agent, whose hashes are one)."""
    first = next(iter(sessions.values()))
    tasks = first.suite.tasks(split)
    batches = []
    waiting: dict[tuple[str, str, str, int], list[str]] = {}
    for label, session in sessions.items():
        runner = session.runner(out / label)
        jobs = arm_jobs(session, arms, tasks, reps, phase)
        for job in jobs:
            key = (
                runner.options_hash,
                job.candidate.hash if job.candidate else NO_SKILL,
                job.task.id,
                job.replicate,
            )
            waiting.setdefault(key, []).append(label)
        batches.append((jobs, runner))
    joined = Batches(batches)
    finished: dict[str, list[RolloutRecord]] = {label: [] for label in sessions}
    for count, record in enumerate(first.stream(joined.jobs, joined), start=1):
        label = waiting[(record.options_hash, record.candidate, record.task_id, record.replicate)].pop(0)
        finished[label].append(record)
        if on_record is not None:
            on_record(record, count, len(joined.jobs))
    return {label: by_arm(arms, records) for label, records in finished.items()}


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
    tasks = suite.tasks(split)
    sessions = {  # every agent's checks pass before anything is written
        spec.label: RolloutSession.open(
            suite, base.for_agent(spec), tasks=tasks, candidates=list(arms.values()), retry=retry
        )
        for spec in agents
    }
    refuse_the_same_agent_twice(sessions)  # their draws would be one agent's, shared between two columns
    prepare_out(out, force, suite, (TRANSFER_FILE,))
    for spec in agents:
        shutil.rmtree(out / spec.label, ignore_errors=True)  # --force: an older result of this agent
    shared = shared_executor or make_executor(
        base.workers, suite.config.max_concurrency, base.executor, base.ray_address
    )
    phase: Phase = "test" if split == "test" else "eval"
    for session in sessions.values():
        session.executor = shared
    by_agent = run_agents(sessions, arms, split, reps, phase, out, on_record)
    comparisons: dict[str, Comparison] = {}
    columns = []
    failed = []
    for spec in agents:
        recs = by_agent[spec.label]
        comparison = build_comparison(suite, split, sessions[spec.label].target.name, reps, metric, recs)
        comparison.write(out / spec.label / "comparison.json")
        comparisons[spec.label] = comparison
        records = [r for _, arm_records in recs.values() for r in arm_records]
        columns.append(agent_column(spec.label, spec, comparison, records))
        if records and all(r.status == "infra_error" for r in records):
            failed.append(f"{spec.label}: {records[-1].reason}")
    transfer = build_transfer(suite, comparisons, columns)
    transfer.write(out / TRANSFER_FILE)
    if failed:
        raise InfraFailure(
            "every rollout of an agent ended infra_error (never scored): its column is empty; the last "
            "error of each: " + "; ".join(failed) + f"\ntransfer table: {out / TRANSFER_FILE}"
        )
    return transfer
