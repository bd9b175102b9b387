"""skill-trainer's two-suite rule: the gate decides on the primary suite's val tasks; the secondary
suite can only veto.

Tasks name their suite in a ``suite`` field (``primary`` when they name none); scoring.md's
config names ``primary_suite`` and ``secondary_suite``. The gate sees the primary tasks only.
Once it accepts, the secondary tasks of the same rounds get a one-sided paired t-test of
candidate against incumbent on the per-task means of the gate metric: a regression
significant at ``secondary_alpha`` (default 0.05) turns the accept into a reject. It never
turns a reject into an accept, so it cannot raise the gate's false-accept rate.

The same veto joins the body and the description (``gate_scope``): in a suite that names no
secondary suite and holds both trigger tasks (``trigger`` mode) and body tasks among its val
tasks, a candidate that changes only the description is gated on the trigger tasks and vetoed
by the body tasks, one that changes only the body is gated on the body tasks and vetoed by the
trigger tasks, and one that changes both is gated on every task. gate.json says which
(``gated_on``, and ``secondary.suite``: ``body tasks`` or ``trigger tasks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skilltune.metric import Metric
from skilltune.rollout.tally import per_task_scores
from skilltune.runfiles import RolloutRecord, SecondaryCheck, Verdict
from skilltune.skill import Candidate
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


@dataclass(frozen=True)
class GateScope:
    """The val tasks a decision gates on, the name of those that can only veto (None: none), and
    what gate.json says of the scope (None: the gate saw every task the suite's config gates)."""

    gated: set[str]
    held: str | None
    note: str | None = None


def changed_part(candidate: Candidate, incumbent: Candidate) -> Literal["description", "body", "both"]:
    """What ``candidate`` changes of ``incumbent``: only the description, only the rest, or both."""
    description = candidate.description != incumbent.description
    rest = candidate.front_matter.body != incumbent.front_matter.body or any(
        text != incumbent.files.get(path) for path, text in candidate.files.items() if path != candidate.main
    )
    if description and not rest:
        return "description"
    return "both" if description else "body"


def gate_scope(suite: Suite, tasks: list[Task], candidate: Candidate, incumbent: Candidate) -> GateScope:
    """skill-trainer's two suites when the config names them, else the joint gate of body and
    description (the module's docstring)."""
    if suite.config.secondary_suite is not None or suite.config.primary_suite is not None:
        return GateScope(gated_ids(suite, tasks), suite.config.secondary_suite)
    trigger = {t.id for t in tasks if suite.scoring_mode(t) == "trigger"}
    body = {t.id for t in tasks} - trigger
    if not trigger or not body:
        return GateScope(trigger | body, None)
    part = changed_part(candidate, incumbent)
    if part == "description":
        return GateScope(trigger, "body tasks", "trigger tasks (the candidate changes the description only)")
    if part == "body":
        return GateScope(body, "trigger tasks", "body tasks (the candidate leaves the description as it was)")
    return GateScope(trigger | body, None, "every task (the candidate changes the description and the body)")


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
