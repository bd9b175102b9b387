"""How noisy the judge is, measured: sample-to-sample agreement, the spread of soft, and the share
of the gate's noise that comes from the judge rather than from the agent.

A rollout judged ``K`` times gives ``K`` verdicts on one fixed output: their disagreement is the
judge's alone. The gate sees each rollout's aggregate over the suite's ``samples`` S; how much
that aggregate varies is estimated by drawing S of the K verdicts with replacement (a seeded
bootstrap), and compared with the variance of the gate metric between replicates of a task
(agent and judge together).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from skilltune.judge.verdict import sample_passed, sample_soft
from skilltune.metric import Metric
from skilltune.runfiles.judge import JudgeVerdict
from skilltune.stats import sample_sd, sample_variance

if TYPE_CHECKING:
    from skilltune.suite import Suite

BOOTSTRAP = 400


class JudgeNoise(BaseModel):
    metric: Metric
    suite_samples: int  # S: the verdicts each rollout's score aggregates
    rollouts: int  # rollouts with at least two verdicts
    verdicts_per_rollout: float | None
    hard_agreement: float | None  # share of verdict pairs on one output that agree on pass/fail
    unanimous: float | None  # share of rollouts whose verdicts all agree on pass/fail
    soft_sd: float | None  # mean spread (sd) of one verdict's soft score on one output
    soft_sd_max: float | None
    judge_var: float | None  # variance the judge adds to a rollout's gate metric (S verdicts)
    gate_var: float | None  # variance of the gate metric between replicates of a task
    judge_share: float | None  # judge_var / gate_var: the judge's share of the gate's noise

    def summary(self) -> str:
        if self.rollouts == 0:
            return "no rollout has two verdicts or more: nothing to measure"
        parts = [
            f"{self.rollouts} rollout(s), {self.verdicts_per_rollout:g} verdicts each",
            f"pass/fail agreement {_pct(self.hard_agreement)} of verdict pairs ({_pct(self.unanimous)} unanimous)",
            f"soft spread sd {_num(self.soft_sd)} (max {_num(self.soft_sd_max)})",
        ]
        if self.judge_var is not None:
            share = f", {_pct(self.judge_share)} of the gate's" if self.judge_share is not None else ""
            parts.append(
                f"judge variance of {self.metric} with {self.suite_samples} sample(s) {_num(self.judge_var)}"
                f" (gate noise between replicates {_num(self.gate_var)}{share})"
            )
        return "; ".join(parts)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def suite_judge_noise(
    suite: Suite,
    verdicts: Sequence[Sequence[JudgeVerdict]],
    *,
    metric: Metric,
    replicate_scores: Mapping[str, Sequence[float]] | None = None,
) -> JudgeNoise:
    """``judge_noise`` with the suite's judge settings (criteria weights, pass threshold, samples)."""
    settings = suite.judge
    return judge_noise(
        verdicts,
        weights=settings.criteria_weights,
        threshold=settings.pass_threshold,
        suite_samples=settings.samples,
        mixed_weight=suite.config.mixed_weight,
        metric=metric,
        replicate_scores=replicate_scores,
    )


def judge_noise(
    verdicts: Sequence[Sequence[JudgeVerdict]],
    *,
    weights: dict[str, float] | None,
    threshold: float,
    suite_samples: int,
    mixed_weight: float,
    metric: Metric,
    replicate_scores: Mapping[str, Sequence[float]] | None = None,
    seed: int = 0,
) -> JudgeNoise:
    """The judge's noise over rollouts judged several times each (``verdicts``: one list per rollout).

    ``replicate_scores``: the gate metric of each replicate, by (arm, task) key, for the gate's noise.
    """
    judged = [list(v) for v in verdicts if len(v) >= 2]
    agreements, unanimous, sds, variances = [], [], [], []
    for index, samples in enumerate(judged):
        passed = [sample_passed(s, weights, threshold) for s in samples]
        softs = [sample_soft(s, weights) for s in samples]
        pairs = len(passed) * (len(passed) - 1) / 2
        agree = sum(
            1 for i in range(len(passed)) for j in range(i + 1, len(passed)) if passed[i] == passed[j]
        )
        agreements.append(agree / pairs)
        unanimous.append(float(len(set(passed)) == 1))
        sds.append(sample_sd(softs))
        rng = random.Random(f"{seed}|judge-noise|{index}")
        draws = []
        for _ in range(BOOTSTRAP):
            picks = [rng.randrange(len(samples)) for _ in range(suite_samples)]
            hard = float(sum(passed[i] for i in picks) * 2 > suite_samples)
            soft = math.fsum(softs[i] for i in picks) / suite_samples
            draws.append(
                {"hard": hard, "soft": soft, "mixed": (1 - mixed_weight) * hard + mixed_weight * soft}[metric]
            )
        variances.append(sample_variance(draws))
    gate = [sample_variance(v) for v in (replicate_scores or {}).values() if len(v) >= 2]
    gate_var = math.fsum(gate) / len(gate) if gate else None
    judge_var = math.fsum(variances) / len(variances) if variances else None

    def mean(values: list[float]) -> float | None:
        return round(math.fsum(values) / len(values), 6) if values else None

    return JudgeNoise(
        metric=metric,
        suite_samples=suite_samples,
        rollouts=len(judged),
        verdicts_per_rollout=mean([float(len(v)) for v in judged]),
        hard_agreement=mean(agreements),
        unanimous=mean(unanimous),
        soft_sd=mean(sds),
        soft_sd_max=round(max(sds), 6) if sds else None,
        judge_var=None if judge_var is None else round(judge_var, 6),
        gate_var=None if gate_var is None else round(gate_var, 6),
        judge_share=(
            round(min(1.0, judge_var / gate_var), 4) if judge_var is not None and gate_var else None
        ),
    )
