"""Several target agents in one training run (issue 22): their session, their evidence, their veto.

A run given ``--agent`` more than once opens one rollout session of all its agents (session.py's
``RolloutSession``: a target per label), which runs every job of every stage (train minibatch,
screen, gate rounds, epoch comparisons, held-out test) once per agent: each job and record names its
agent's label (``RolloutJob.agent``, ``RolloutRecord.target``) and its rollouts lie in a folder of
their own (``rollouts/<phase>/<cand12>@<label>/``). A run with one agent has no labels in its files:
its jobs' folders and its files are exactly as before.

The gate's unit is the (agent, task) pair (rollout/tally.py's ``Unit``, named ``label/task`` in the
files): the gate runs its test on the pooled units at the decision's level, so the run-wide error
control is unchanged. ``--agents-gate`` says what a keep means: ``mean`` takes the pooled test's
decision; ``no-worse`` (the default) also runs, per agent, the one-sided paired regression test of the
secondary-suite veto (training/secondary.py's ``regression_test``, at the suite's
``secondary_alpha``) and turns an accept into a reject when an agent is significantly hurt. The
veto can only turn accepts into rejects, so it cannot raise the false-accept rate. The sequential
gate's harm veto (one unit fallen with confidence) holds under ``no-worse``; under ``mean`` it
looks at each task's units pooled over the agents (``harm_groups``): one agent's loss on a task is
weighed against the others' gains on it, which is what ``mean`` asks for, while a task that fell on
every agent is still vetoed. Trigger tasks are trade-offs (``trade_offs``) under both.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from skilltune.execute import Executor
from skilltune.metric import Metric
from skilltune.rollout.runner import RetryPolicy
from skilltune.rollout.tally import Unit, accuracy
from skilltune.runfiles import AgentEvidence, AgentsGate, RolloutRecord, TrainConfig, Verdict
from skilltune.session import RolloutSession
from skilltune.skill import Candidate
from skilltune.suite import Suite
from skilltune.training.secondary import regression_test


def open_rollouts(
    suite: Suite,
    config: TrainConfig,
    seed: Candidate,
    retry: RetryPolicy | None = None,
    executor: Executor | None = None,
) -> RolloutSession:
    """The run's rollout session: every agent's checks passed before anything is written (a TrainConfig
    is its rollouts' settings). Raises UsageError naming the agent that refuses."""
    return RolloutSession.open(
        suite, config, config.targets(), tasks=suite.all_tasks(), candidates=[seed], retry=retry,
        executor=executor,
    )  # fmt: skip


def agent_evidence(
    labels: Sequence[str],
    candidate: Sequence[RolloutRecord],
    incumbent: Sequence[RolloutRecord],
    metric: Metric,
    alpha: float,
) -> list[AgentEvidence]:
    """Per agent: its val means of both arms and the one-sided regression test of its tasks."""
    out = []
    for label in labels:
        cand = [r for r in candidate if r.target == label]
        inc = [r for r in incumbent if r.target == label]
        check = regression_test(label, cand, inc, metric, alpha)
        out.append(
            AgentEvidence(
                label=label,
                val_candidate=accuracy(cand, metric),
                val_incumbent=accuracy(inc, metric),
                n_tasks=check.n_tasks,
                mean_diff=check.mean_diff,
                p_value=check.p_value,
                alpha=alpha,
                hurt=check.regression,
            )
        )
    return out


def agents_veto(verdict: Verdict, evidence: list[AgentEvidence], mode: AgentsGate) -> Verdict:
    """The pooled gate's verdict with each agent's evidence recorded; under ``no-worse`` an accept
    becomes a reject when an agent is significantly hurt (``mean``: the pooled decision stands)."""
    recorded = verdict.model_copy(update={"agents": evidence, "agents_gate": mode})
    hurt = [a for a in evidence if a.hurt]
    if mode != "no-worse" or not verdict.accept or not hurt:
        return recorded
    said = "; ".join(
        f"{a.label} {a.mean_diff:+.3f} over {a.n_tasks} task(s), one-sided p {a.p_value:.4f} < {a.alpha}"
        for a in hurt
        if a.mean_diff is not None and a.p_value is not None
    )
    return recorded.model_copy(
        update={
            "decision": "reject",
            "reason": f"--agents-gate no-worse: agent(s) significantly hurt: {said} "
            f"(the pooled gate had accepted: {verdict.reason})",
        }
    )


def trade_offs(trigger: Collection[str], units: Sequence[Unit]) -> frozenset[str]:
    """The units the harm veto does not veto one by one: the trigger tasks' (on every agent)."""
    return frozenset(str(u) for u in units if u.task in trigger)


def harm_groups(units: Sequence[Unit], mode: AgentsGate) -> dict[str, str]:
    """How the harm veto pools units: under ``--agents-gate mean`` a task's units across the agents
    (``label/task`` -> ``task``), so the veto looks at the task's mean difference over the agents;
    otherwise none (under ``no-worse`` each (agent, task) unit is vetoed on its own)."""
    return {str(u): u.task for u in units} if mode == "mean" else {}
