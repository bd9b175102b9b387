"""skill-trainer's two-suite rule: the gate decides on the primary suite's val tasks; the secondary
suite can only veto.

Tasks name their suite in a ``suite`` field (``primary`` when they name none); scoring.md's
config names ``primary_suite`` and ``secondary_suite``. The gate sees the primary tasks only.
Once it accepts, the secondary tasks of the same rounds get a one-sided paired t-test of
candidate against incumbent on the per-task means of the gate metric: a regression
significant at ``secondary_alpha`` (default 0.05) turns the accept into a reject. It never
turns a reject into an accept, so it cannot raise the gate's false-accept rate.
"""

from __future__ import annotations

from skilltune.metric import Metric
from skilltune.rollout.tally import per_task_scores
from skilltune.runfiles import RolloutRecord, SecondaryCheck, Verdict
from skilltune.suite import Suite, Task

DEFAULT_SUITE = "primary"  # skill-trainer's name for a task that names no suite


def suite_of(task: Task) -> str:
    return str(task.field("suite") or DEFAULT_SUITE)


def secondary_ids(suite: Suite, tasks: list[Task]) -> set[str]:
    """The ids of ``tasks`` in the secondary suite (empty when the config names none)."""
    name = suite.config.secondary_suite
    return {t.id for t in tasks if name is not None and suite_of(t) == name}


def gated_ids(suite: Suite, tasks: list[Task]) -> set[str]:
    """The ids the gate decides on: the primary suite's (every task not in the secondary suite
    when only ``secondary_suite`` is named)."""
    primary = suite.config.primary_suite
    secondary = secondary_ids(suite, tasks)
    return {t.id for t in tasks if t.id not in secondary and (primary is None or suite_of(t) == primary)}


def regression_test(
    suite_name: str,
    candidate: list[RolloutRecord],
    incumbent: list[RolloutRecord],
    metric: Metric,
    alpha: float,
) -> SecondaryCheck:
    from skilltune.stats import mean, p_below_zero, paired_differences, task_means

    diffs = paired_differences(
        task_means(per_task_scores(incumbent, metric)), task_means(per_task_scores(candidate, metric))
    )
    one_sided = p_below_zero(diffs)
    return SecondaryCheck(
        suite=suite_name,
        alpha=alpha,
        n_tasks=len(diffs),
        mean_diff=round(mean(diffs), 6) if diffs else None,
        p_value=None if one_sided is None else round(one_sided, 6),
        regression=one_sided is not None and one_sided < alpha,
    )


def veto(verdict: Verdict, check: SecondaryCheck) -> Verdict:
    """The gate's verdict with the secondary check recorded; an accept becomes a reject on a regression."""
    recorded = verdict.model_copy(update={"secondary": check})
    if not (verdict.accept and check.regression):
        return recorded
    return recorded.model_copy(
        update={
            "decision": "reject",
            "reason": (
                f"secondary suite {check.suite!r} regressed: mean {check.mean_diff:+.3f} over "
                f"{check.n_tasks} task(s), one-sided p {check.p_value:.4f} < {check.alpha} "
                f"(the gate had accepted: {verdict.reason})"
            ),
        }
    )
