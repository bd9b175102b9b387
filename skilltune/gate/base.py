"""The gate's contract: ``Gate``, its ``Options``, the ``Sampler`` it asks for rounds.

A gate is a strategy object. It asks the sampler for rounds of paired rollouts
(candidate and incumbent on the same val tasks, one new replicate per task and arm
each round; a training run's sampler may hand it incumbent rollouts an earlier
decision of the same incumbent ran) until it can decide. Decisions use complete rounds
only, in task order, so parallelism cannot change them. A round holding infra errors
or crashed rollouts is contaminated: no gate decides on it.

Gates declare their options as a pydantic model, as agent backends do; a plug-in gate
subclasses ``Gate`` and registers under the ``skilltune.gates`` entry-point group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, Protocol, cast

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from skilltune.metric import Metric, as_metric
from skilltune.rollout.tally import per_task_scores
from skilltune.runfiles import UNDECIDED, Decision, RolloutRecord, Round, Verdict
from skilltune.stats import mean, paired_differences, task_means


class Sampler(Protocol):
    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        """Run round ``index``: (candidate records, incumbent records) on every val task."""


class GateOptions(BaseModel):
    """Options of a gate (none for the one-pass gates); unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")

    def smallest_gain(self) -> float | None:
        """The smallest gain on the gate metric the gate stops looking for (None: it names none)."""
        return None


def contaminated(records: list[RolloutRecord]) -> bool:
    return any(r.status in UNDECIDED for r in records)


# A gate's options type (its ``Options`` model); a bare ``Gate`` is a gate of whichever options.
GateOptionsT = TypeVar("GateOptionsT", bound=GateOptions, default=Any)


class Gate(ABC, Generic[GateOptionsT]):
    """``decide(sampler) -> Verdict``. Subclasses set ``name`` and their ``Options`` model, which
    they also name as the type parameter (``SequentialGate(Gate[SequentialOptions])``).

    What a training run hands a gate follows from its ``Options`` (gate/run.py): an ``alpha``
    field makes the gate's level the run's to set (each decision's, from its error-control
    policy), a ``seed`` field its seed, and a ``harm_tolerance`` field (a gate that looks at val
    tasks one by one) the decision's ``HarmScope`` (gate/veto.py), as the constructor's
    ``scope`` keyword.
    """

    name: str
    Options: ClassVar[type[GateOptions]] = GateOptions

    def __init__(self, metric: Metric = "mixed", reps: int = 1, **settings: Any) -> None:
        self.metric = as_metric(metric)
        self.reps = reps
        # Options and the type parameter name the same model (a ClassVar cannot hold a type parameter)
        self.options = cast(GateOptionsT, self.Options.model_validate(settings))

    @property
    def max_replicates(self) -> int:
        """Replicates per val task per arm a decision may use (the rollouts it may cost)."""
        return self.reps

    @abstractmethod
    def decide(self, sampler: Sampler) -> Verdict: ...

    def cannot_accept(self, tasks: int) -> str | None:
        """Why a decision on ``tasks`` val tasks could never accept, whatever the rollouts showed
        (it is then rejected without running any); None when it can."""
        return None

    def _one_pass(self, sampler: Sampler) -> tuple[Round, list[float], Verdict | None]:
        cand, inc = sampler.round(0, self.reps)
        rollouts = len(cand) + len(inc)
        a = task_means(per_task_scores(inc, self.metric))
        b = task_means(per_task_scores(cand, self.metric))
        paired = sorted(set(a) & set(b))  # a task one side failed to score says nothing about either
        diffs = paired_differences(a, b)
        rnd = Round(
            index=0,
            replicates=self.reps,
            candidate=round(mean([b[t] for t in paired]), 6) if paired else None,
            incumbent=round(mean([a[t] for t in paired]), 6) if paired else None,
            n_pairs=len(diffs),
            rollouts=rollouts,
        )
        early = None
        if contaminated(cand + inc):
            early = self._verdict(
                "contaminated", "infra errors remain in the gate batch after retries", [rnd]
            )
        elif not diffs:
            early = self._verdict("reject", "no val task was scored for both skills", [rnd])
        return rnd, diffs, early

    def _verdict(self, decision: Decision, reason: str, rounds: list[Round]) -> Verdict:
        last = rounds[-1]
        return Verdict(
            decision=decision,
            reason=reason,
            metric=self.metric,
            val_candidate=last.candidate,
            val_incumbent=last.incumbent,
            rounds=rounds,
            rollouts=sum(r.rollouts for r in rounds),
        )
