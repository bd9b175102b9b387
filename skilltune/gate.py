"""Gates: should a candidate replace the incumbent? Decided on val, paired by task.

A gate is a strategy object. It asks the sampler for rounds of paired rollouts
(candidate and incumbent on the same val tasks, fresh replicate indices each
round) until it can decide. Decisions use complete rounds only, in canonical
(task, replicate) order, so parallelism cannot change them. A round holding
infra errors or crashed rollouts is contaminated: no gate decides on it.

A training run's gate is a ``RunGate``: the gate's options are checked once, when the
run is set up, and each decision's level comes from the run's error-control policy
(alpha.py). Gates declare their options as a pydantic model, as agent backends do.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltune.alpha import Policy, RunAlpha
from skilltune.errors import UsageError
from skilltune.plugins import Registry
from skilltune.rollout import per_task_scores
from skilltune.runfiles import UNDECIDED, Decision, RolloutRecord, Round, Verdict
from skilltune.stats import SequentialTest, mean, paired_differences, task_means


class Sampler(Protocol):
    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        """Run round ``index``: (candidate records, incumbent records) on every val task."""
        ...


class GateOptions(BaseModel):
    """Options of a gate (none for the one-pass gates); unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


def contaminated(records: list[RolloutRecord]) -> bool:
    return any(r.status in UNDECIDED for r in records)


class Gate(ABC):
    """``decide(sampler) -> Verdict``. Subclasses set ``name`` and their ``Options`` model.

    ``Options`` holding an ``alpha`` field makes the gate's level the run's to set: a
    training run gives each decision its level from its error-control policy.
    """

    name: str
    Options: ClassVar[type[GateOptions]] = GateOptions

    def __init__(self, metric: str = "mixed", reps: int = 1, **settings: Any) -> None:
        self.metric = metric
        self.reps = reps
        self.options = self.Options.model_validate(settings)

    @property
    def max_replicates(self) -> int:
        """Replicates per val task per arm a decision may use (the rollouts it may cost)."""
        return self.reps

    @abstractmethod
    def decide(self, sampler: Sampler) -> Verdict: ...

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


class StrictGate(Gate):
    """One pass over val; accept when the candidate's mean over the paired tasks is strictly greater.

    Cheap and noisy: on a pure-noise suite of 0/1 tasks it accepts about 40% of the steps.
    """

    name = "strict"

    def decide(self, sampler: Sampler) -> Verdict:
        rnd, diffs, early = self._one_pass(sampler)
        if early is not None:
            return early
        better = (rnd.candidate or 0.0) > (rnd.incumbent or 0.0)
        rnd.statistic = {"mean_diff": round(mean(diffs), 6)}
        reason = f"val {rnd.candidate:.3f} vs {rnd.incumbent:.3f}"
        return self._verdict("accept" if better else "reject", reason, [rnd])


class PairedZGate(Gate):
    """One pass; accept when the mean paired gain is at least 1.645 standard errors (>= 6 pairs)."""

    name = "paired-z"
    MIN_PAIRS = 6
    Z = 1.645

    def decide(self, sampler: Sampler) -> Verdict:
        rnd, diffs, early = self._one_pass(sampler)
        if early is not None:
            return early
        n = len(diffs)
        d = mean(diffs)
        sd = math.sqrt(sum((x - d) ** 2 for x in diffs) / (n - 1)) if n > 1 else 0.0
        se = sd / math.sqrt(n) if n else 0.0
        rnd.statistic = {
            "mean_diff": round(d, 6),
            "se": round(se, 6),
            "z": None if se == 0 else round(d / se, 4),
        }
        if n < self.MIN_PAIRS:
            return self._verdict("reject", f"only {n} paired tasks (needs {self.MIN_PAIRS})", [rnd])
        accept = d > 0 and (se == 0 or d >= self.Z * se)
        reason = f"gain {d:+.3f}, se {se:.3f}" + (" >= 1.645 se" if accept else " below 1.645 se")
        return self._verdict("accept" if accept else "reject", reason, [rnd])


GATES: Registry[type[Gate]] = Registry("skilltune.gates", "gate")


def make_gate(name: str, metric: str, reps: int, **settings: Any) -> Gate:
    """The gate ``name`` with its options; unknown or invalid options are bad input."""
    cls = GATES.get(name)
    try:
        return cls(metric=metric, reps=reps, **settings)
    except ValidationError as exc:
        raise UsageError(_options_problem(name, cls, exc)) from None


def _options_problem(name: str, cls: type[Gate], exc: ValidationError) -> str:
    unknown = sorted(str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden")
    if unknown:
        known = ", ".join(sorted(cls.Options.model_fields)) or "none"
        return f"unknown option(s) {', '.join(unknown)} for the {name} gate (known: {known})"
    details = "; ".join(f"{'.'.join(str(p) for p in e['loc'])} {e['msg']}" for e in exc.errors())
    return f"{name} gate options: {details}"


class RunGate:
    """The gate of a training run: built and checked once, then one gate per decision.

    A gate whose options hold ``alpha`` tests each decision at the level the run's
    error-control policy gives it from the outcomes of the decisions before (so a resumed
    run computes the same levels); ``alpha`` is then the run's to set, never an option.
    """

    def __init__(
        self,
        name: str,
        metric: str,
        reps: int,
        options: dict[str, Any],
        alpha: float,
        policy: Policy,
        planned: int,
    ) -> None:
        self.name = name
        cls = GATES.get(name)
        self.leveled = "alpha" in cls.Options.model_fields
        if "alpha" in options:
            raise UsageError(
                "gate option alpha: a training run sets each decision's level from the run-wide alpha "
                "(--alpha, default 0.05, spent over the run's decisions); drop alpha from the gate options"
            )
        self._options = dict(options)
        self.run_alpha = RunAlpha(alpha, policy, planned)
        # Checked now, before anything runs: an unknown or invalid option is bad input.
        self._template = make_gate(name, metric, reps, **self._with_level(alpha))

    def _with_level(self, level: float) -> dict[str, Any]:
        return self._options | {"alpha": level} if self.leveled else self._options

    @property
    def max_replicates(self) -> int:
        return self._template.max_replicates

    def for_decision(self, earlier: list[bool]) -> tuple[Gate, float | None]:
        """The gate of the next decision and its level (None for a gate without one), given the
        outcomes of the run's earlier decisions (True = accepted)."""
        if not self.leveled:
            return self._template, None
        level = self.run_alpha.level(earlier)
        gate = make_gate(self.name, self._template.metric, self._template.reps, **self._with_level(level))
        return gate, level


class SequentialOptions(GateOptions):
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5, description="the decision's level")
    max_reps: int = Field(default=8, ge=1, description="replicates per val task per arm at most")
    min_effect: float = Field(default=0.10, description="futility: the smallest gain worth keeping")
    futility_confidence: float = Field(default=0.90, gt=0.0, lt=1.0)
    rho: float = Field(default=2.0, gt=0.0, description="power-family spending exponent")


class SequentialGate(Gate):
    """Group-sequential paired test with early accept, futility stop and a replicate cap.

    Each round adds one replicate per val task per arm (fresh replicate indices).
    After round k, the paired differences ``d = candidate - incumbent`` of every
    (task, replicate) scored on both sides give a t statistic; the candidate is
    accepted when it crosses the k-th efficacy bound of a group-sequential design
    at level ``alpha`` with ``max_reps`` looks (power-family spending, ``rho``).
    It is rejected for futility once the one-sided ``futility_confidence`` upper
    bound of the mean gain falls below ``min_effect``, and at the cap otherwise.

    Defaults (documented in the README): ``alpha`` is set per decision by the run's
    error-control policy (0.05 for a lone decision); ``max_reps`` 8; ``min_effect``
    0.10 on the gate metric; ``futility_confidence`` 0.90; ``rho`` 2.
    """

    name = "sequential"
    Options = SequentialOptions

    def __init__(self, metric: str = "mixed", reps: int = 1, **settings: Any) -> None:
        super().__init__(metric, reps, **settings)
        options = self.options
        assert isinstance(options, SequentialOptions)
        self.alpha = options.alpha
        self.max_reps = options.max_reps
        self.min_effect = options.min_effect
        self.futility_confidence = options.futility_confidence
        self.rho = options.rho

    @property
    def max_replicates(self) -> int:
        return self.max_reps

    def decide(self, sampler: Sampler) -> Verdict:
        test = SequentialTest(self.alpha, self.max_reps, self.min_effect, self.futility_confidence, self.rho)
        cand_all: list[RolloutRecord] = []
        inc_all: list[RolloutRecord] = []
        rounds: list[Round] = []
        for k in range(self.max_reps):
            cand, inc = sampler.round(k, 1)
            cand_all += cand
            inc_all += inc
            outcome, info = test.look(k, _paired_by_replicate(cand_all, inc_all, self.metric))
            a = task_means(per_task_scores(inc_all, self.metric))
            b = task_means(per_task_scores(cand_all, self.metric))
            paired = sorted(set(a) & set(b))
            rounds.append(
                Round(
                    index=k,
                    replicates=k + 1,
                    candidate=round(mean([b[x] for x in paired]), 6) if paired else None,
                    incumbent=round(mean([a[x] for x in paired]), 6) if paired else None,
                    n_pairs=info["n"],
                    rollouts=len(cand) + len(inc),
                    statistic=info,
                )
            )
            if contaminated(cand + inc):
                return self._verdict(
                    "contaminated", "infra errors remain in the gate batch after retries", rounds
                )
            gain = info["mean_gain"]
            if outcome == "accept":
                return self._verdict(
                    "accept",
                    f"gain {gain:+.3f} crossed the bound after {k + 1} replicate(s) (alpha {self.alpha:.3g})",
                    rounds,
                )
            if outcome == "futility":
                return self._verdict(
                    "reject",
                    f"futility after {k + 1} replicate(s): gain {gain:+.3f}, upper bound {info['upper']:+.3f} < {self.min_effect}",
                    rounds,
                )
            if outcome == "cap":
                return self._verdict(
                    "reject", f"undecided at the cap of {self.max_reps} replicates (gain {gain:+.3f})", rounds
                )
        raise AssertionError("the sequential test always decides by its last look")


def _paired_by_replicate(cand: list[RolloutRecord], inc: list[RolloutRecord], metric: str) -> list[float]:
    """candidate - incumbent for every (task, replicate) both sides scored, in canonical order."""
    a = {(r.task_id, r.replicate): r.score.metric(metric) for r in inc if r.score is not None}
    b = {(r.task_id, r.replicate): r.score.metric(metric) for r in cand if r.score is not None}
    return [b[key] - a[key] for key in sorted(set(a) & set(b))]
