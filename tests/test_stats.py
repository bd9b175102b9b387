"""Paired statistics: the t-interval by hand and against scipy, task means, and simulated coverage."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from skilltune.stats import (
    PairedResult,
    mean,
    p_below_zero,
    paired_differences,
    paired_t,
    sample_sd,
    sample_variance,
    task_means,
)

DIFFS = [0.5, -0.25, 1.0, 0.75, 0.0, 0.25, 0.5, -0.5]


def test_paired_t_matches_hand_computation() -> None:
    n = len(DIFFS)
    d = sum(DIFFS) / n
    sd = math.sqrt(sum((x - d) ** 2 for x in DIFFS) / (n - 1))
    se = sd / math.sqrt(n)
    q = float(sps.t.ppf(0.975, n - 1))
    res = paired_t(DIFFS)
    assert res.n == n
    assert res.diff == pytest.approx(d)
    assert res.se == pytest.approx(se)
    assert res.ci95 is not None
    assert res.ci95[0] == pytest.approx(d - q * se)
    assert res.ci95[1] == pytest.approx(d + q * se)
    # The interval is symmetric about the mean with half-width q * se.
    assert (res.ci95[1] - res.ci95[0]) / 2 == pytest.approx(q * se)
    assert res.p_value == pytest.approx(2 * float(sps.t.sf(abs(d / se), n - 1)))


def test_paired_t_confidence_level_changes_the_quantile() -> None:
    n = len(DIFFS)
    res90 = paired_t(DIFFS, confidence=0.90)
    res95 = paired_t(DIFFS)
    assert res90.ci95 is not None and res95.ci95 is not None
    assert res90.se is not None
    q90 = float(sps.t.ppf(0.95, n - 1))
    assert res90.ci95[1] - res90.diff == pytest.approx(q90 * res90.se)
    assert res90.ci95[1] - res90.ci95[0] < res95.ci95[1] - res95.ci95[0]
    assert res90.p_value == res95.p_value


def test_paired_t_p_value_agrees_with_scipy() -> None:
    a = [0.2, 0.5, 0.1, 0.9, 0.4, 0.6, 0.3, 0.7, 0.0, 1.0]
    b = [0.4, 0.5, 0.3, 1.0, 0.3, 0.9, 0.6, 0.7, 0.2, 1.0]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    res = paired_t(diffs)
    rel = sps.ttest_rel(b, a)
    one = sps.ttest_1samp(diffs, 0.0)
    assert res.p_value == pytest.approx(float(rel.pvalue), rel=1e-9)
    assert res.p_value == pytest.approx(float(one.pvalue), rel=1e-9)
    assert res.se is not None
    assert res.diff / res.se == pytest.approx(float(rel.statistic), rel=1e-9)
    ci = one.confidence_interval(0.95)
    assert res.ci95 is not None
    assert res.ci95 == pytest.approx((float(ci.low), float(ci.high)), rel=1e-9)
    assert res.verdict == "b_better"


@pytest.mark.parametrize("diffs", [[], [0.4]])
def test_too_few_tasks_give_no_interval(diffs: list[float]) -> None:
    res = paired_t(diffs)
    assert res.n == len(diffs)
    assert res.diff == (diffs[0] if diffs else 0.0)
    assert res.se is None and res.ci95 is None and res.p_value is None
    assert res.verdict == "no_difference"


@pytest.mark.parametrize(("value", "verdict", "p"), [(0.25, "b_better", 0.0), (-0.5, "a_better", 0.0)])
def test_equal_differences_have_zero_se(value: float, verdict: str, p: float) -> None:
    res = paired_t([value] * 6)
    assert res.diff == value
    assert res.se == 0.0
    assert res.ci95 == (value, value)
    assert res.p_value == p
    assert res.verdict == verdict


def test_all_zero_differences() -> None:
    res = paired_t([0.0] * 5)
    assert (res.diff, res.se, res.ci95, res.p_value) == (0.0, 0.0, (0.0, 0.0), 1.0)
    assert res.verdict == "no_difference"


def test_equal_inexact_differences_have_zero_se() -> None:
    res = paired_t([0.1] * 3)
    assert res.se == 0.0
    assert res.ci95 == (res.diff, res.diff)
    assert res.p_value == 0.0


def test_verdict_from_interval() -> None:
    assert PairedResult(8, 0.2, 0.05, (0.1, 0.3), 0.01).verdict == "b_better"
    assert PairedResult(8, -0.2, 0.05, (-0.3, -0.1), 0.01).verdict == "a_better"
    assert PairedResult(8, 0.05, 0.05, (-0.05, 0.15), 0.3).verdict == "no_difference"
    # An interval touching 0 is not a difference.
    assert PairedResult(8, 0.1, 0.05, (0.0, 0.2), 0.05).verdict == "no_difference"


def test_mean_is_exact_sum() -> None:
    assert mean([0.1] * 10) == pytest.approx(0.1, abs=1e-17)
    assert mean([1.0, 2.0]) == 1.5


def test_task_means_skip_unscored_replicates() -> None:
    per_task: dict[str, list[float | None]] = {
        "t1": [1.0, None, 0.0],
        "t2": [None, None],
        "t3": [0.5],
        "t4": [],
        "t5": [0.25, 0.75, None, 1.0],
    }
    assert task_means(per_task) == {"t1": 0.5, "t3": 0.5, "t5": pytest.approx(2.0 / 3.0)}


def test_paired_differences_use_shared_tasks_in_sorted_order() -> None:
    a = {"t3": 0.5, "t1": 0.0, "t2": 1.0, "only-a": 0.9}
    b = {"t2": 0.25, "only-b": 0.1, "t1": 1.0, "t3": 0.75}
    assert paired_differences(a, b) == [1.0, -0.75, 0.25]  # t1, t2, t3: b - a
    assert paired_differences(b, a) == [-1.0, 0.75, -0.25]
    assert paired_differences(a, {}) == []


def test_paired_differences_order_does_not_depend_on_insertion() -> None:
    a = {f"t{i:02d}": i / 10 for i in range(10)}
    b = {f"t{i:02d}": 1 - i / 10 for i in reversed(range(10))}
    expected = [b[t] - a[t] for t in sorted(a)]
    assert paired_differences(a, b) == expected
    assert paired_differences(dict(reversed(a.items())), dict(reversed(b.items()))) == expected


# --- simulation -----------------------------------------------------------------------------------

REPLICATIONS = 2000
REPLICATES = 3


def _simulate(n_tasks: int, effect: str, seed: int) -> tuple[float, float, float]:
    """(coverage of the true mean difference, rate of p < 0.05, true mean difference).

    Per-task base rates p_i ~ U(0.2, 0.8); arm b's rate is p_i + delta_i; each arm runs
    ``REPLICATES`` 0/1 replicates per task; the analysis goes through task_means,
    paired_differences and paired_t, as compare does.
    """
    rng = np.random.default_rng(seed)
    covered = 0
    rejected = 0
    truth = {"null": 0.0, "shift": 0.1, "mixed": 0.1}[effect]
    tasks = [f"t{i:02d}" for i in range(n_tasks)]
    for _ in range(REPLICATIONS):
        base = rng.uniform(0.2, 0.8, n_tasks)
        # "mixed": heterogeneous effects delta_i ~ U(0, 0.2) with population mean 0.1.
        delta = rng.uniform(0.0, 0.2, n_tasks) if effect == "mixed" else np.full(n_tasks, truth)
        a_out = rng.random((n_tasks, REPLICATES)) < base[:, None]
        b_out = rng.random((n_tasks, REPLICATES)) < (base + delta)[:, None]
        a = task_means({t: [float(x) for x in row] for t, row in zip(tasks, a_out, strict=True)})
        b = task_means({t: [float(x) for x in row] for t, row in zip(tasks, b_out, strict=True)})
        res = paired_t(paired_differences(a, b))
        assert res.ci95 is not None
        covered += res.ci95[0] <= truth <= res.ci95[1]
        rejected += res.p_value is not None and res.p_value < 0.05
    return covered / REPLICATIONS, rejected / REPLICATIONS, truth


@pytest.mark.parametrize("n_tasks", [8, 12, 20])
@pytest.mark.parametrize("effect", ["null", "shift", "mixed"])
def test_t_interval_coverage(n_tasks: int, effect: str) -> None:
    seed = 1000 * n_tasks + ["null", "shift", "mixed"].index(effect)
    coverage, reject_rate, truth = _simulate(n_tasks, effect, seed)
    assert coverage >= 0.93, (
        f"95% t-interval covered the true difference {truth} in {coverage:.2%} of "
        f"{REPLICATIONS} replications (n_tasks={n_tasks}, effect={effect})"
    )
    if effect == "null":
        limit = 0.05 + 3 * math.sqrt(0.05 * 0.95 / REPLICATIONS)
        assert reject_rate <= limit, (
            f"under the null p < 0.05 in {reject_rate:.2%} of {REPLICATIONS} replications "
            f"(limit {limit:.2%}, n_tasks={n_tasks})"
        )
        # Coverage and the test agree: the interval misses 0 exactly when p < 0.05.
        assert reject_rate == pytest.approx(1 - coverage, abs=1e-12)


# --- the sample sd and the one-sided p the secondary suite's veto uses -----------------------------


@pytest.mark.parametrize("values", [[0.2, 0.5, 0.9], [1.0, 0.0, 1.0, 1.0], [0.3] * 5, [0.1, 0.1 + 1e-15]])
def test_sample_sd_and_variance_agree_with_the_standard_library(values: list[float]) -> None:
    assert sample_variance(values) == pytest.approx(statistics.variance(values), abs=1e-15)
    assert sample_sd(values) == pytest.approx(statistics.stdev(values), abs=1e-12)
    assert sample_sd(values[:1]) == sample_variance([]) == 0.0


@pytest.mark.parametrize(
    "diffs",
    [[-0.5, -0.25, 0.0, -0.75], [0.5, -0.25, 0.25], [0.1, -0.1], [-0.2, 0.3, 0.1, -0.4, 0.0, 0.05]],
)
def test_p_below_zero_is_scipys_one_sided_t_test_and_half_the_two_sided_p(diffs: list[float]) -> None:
    p = p_below_zero(diffs)
    assert p == pytest.approx(sps.ttest_1samp(diffs, 0.0, alternative="less").pvalue, rel=1e-12)
    two_sided = paired_t(diffs).p_value
    assert two_sided is not None
    # what the secondary check computed by hand before: half the two-sided p on the side of the mean
    assert p == pytest.approx(two_sided / 2 if mean(diffs) < 0 else 1 - two_sided / 2, abs=1e-12)


def test_p_below_zero_when_every_task_moved_alike_or_too_few() -> None:
    assert [p_below_zero([d] * 3) for d in (-0.25, 0.0, 0.25)] == [0.0, 0.5, 1.0]
    assert p_below_zero([-0.5]) is None and p_below_zero([]) is None
