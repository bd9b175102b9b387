"""The sequential gate's statistics: bounds, error rates, power, run-wide control (seeded simulations)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skilltune.alpha import RunAlpha, harmonic_weights
from skilltune.gate import SequentialGate, make_gate
from skilltune.runfiles import RolloutRecord
from skilltune.score import Score
from skilltune.stats import SequentialTest, group_sequential_bounds

SIMS = 2000


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def run_test(
    test: SequentialTest, rng: np.random.Generator, p_inc: np.ndarray, effect: float
) -> tuple[str, int]:
    """One decision on 0/1 outcomes: returns (outcome, looks used)."""
    diffs: list[float] = []
    for k in range(test.max_looks):
        cand = rng.random(p_inc.size) < np.clip(p_inc + effect, 0, 1)
        inc = rng.random(p_inc.size) < p_inc
        diffs.extend((cand.astype(float) - inc).tolist())
        outcome, _ = test.look(k, diffs)
        if outcome is not None:
            return outcome, k + 1
    raise AssertionError("undecided after the last look")


@pytest.mark.parametrize(
    ("alpha", "looks", "rho"), [(0.05, 8, 1.0), (0.05, 8, 2.0), (0.05, 8, 3.0), (0.01, 5, 2.0)]
)
def test_bounds_spend_exactly_alpha_under_the_null(alpha: float, looks: int, rho: float) -> None:
    bounds = np.array(group_sequential_bounds(alpha, looks, rho))
    rng = np.random.default_rng(7)
    paths = 200_000
    steps = rng.standard_normal((paths, looks)) * math.sqrt(1 / looks)
    brownian = np.cumsum(steps, axis=1)
    z = brownian / np.sqrt(np.arange(1, looks + 1) / looks)
    crossed = (z >= bounds).any(axis=1).mean()
    assert abs(crossed - alpha) < 3 * _se(alpha, paths), f"crossing rate {crossed:.4f} vs alpha {alpha}"
    assert group_sequential_bounds(alpha, 1, rho)[0] == pytest.approx(
        1.6448536 if alpha == 0.05 else 2.3263479, abs=1e-6
    )


@pytest.mark.parametrize("alpha", [0.05, 0.017])
@pytest.mark.parametrize("tasks", [8, 20])
def test_type_one_error_at_most_alpha(alpha: float, tasks: int) -> None:
    rng = np.random.default_rng(11)
    test = SequentialTest(alpha)
    accepts = 0
    for _ in range(SIMS):
        base = rng.uniform(0.2, 0.8, tasks)
        accepts += run_test(test, rng, base, 0.0)[0] == "accept"
    rate = accepts / SIMS
    assert rate <= alpha + 3 * _se(alpha, SIMS), (
        f"false accepts {rate:.4f} at alpha {alpha} with {tasks} tasks"
    )


def test_power_and_cost_at_plus_twenty_points_on_twenty_tasks() -> None:
    """The design target: >= 80% power at +20 points with <= 6 replicates per task per arm on average."""
    rng = np.random.default_rng(3)
    test = SequentialTest(RunAlpha(planned=12).level([]))  # the first decision of a 10-step run
    results = [run_test(test, rng, np.full(20, 0.4), 0.2) for _ in range(SIMS)]
    power = sum(o == "accept" for o, _ in results) / SIMS
    looks = float(np.mean([k for _, k in results]))
    assert power >= 0.80, f"power {power:.3f}"
    assert looks <= 6.0, f"mean replicates {looks:.2f}"


def test_futility_stops_null_decisions_early() -> None:
    rng = np.random.default_rng(5)
    test = SequentialTest(0.01)
    looks = [run_test(test, rng, np.full(20, 0.5), 0.0)[1] for _ in range(SIMS)]
    assert float(np.mean(looks)) < 4.5
    worse = [run_test(test, rng, np.full(20, 0.5), -0.2) for _ in range(200)]
    assert all(o == "futility" for o, _ in worse)
    assert float(np.mean([k for _, k in worse])) < 2.0


def test_constant_differences_use_a_sign_test() -> None:
    test = SequentialTest(0.01)  # log2(100) = 6.6: seven equal positive differences are needed
    assert test.look(0, [1.0] * 6)[0] is None
    assert test.look(0, [1.0] * 7)[0] == "accept"
    assert test.look(0, [0.0] * 20)[0] == "futility"
    assert test.look(7, [0.05] * 2)[0] == "futility"


def test_run_alpha_policies() -> None:
    weights = harmonic_weights(10)
    assert sum(weights) == pytest.approx(1.0)
    assert weights == sorted(weights, reverse=True)
    spend = RunAlpha(0.05, "spend", 10)
    lord = RunAlpha(0.05, "lord", 10)
    assert sum(spend.level([False] * j) for j in range(10)) == pytest.approx(0.05)
    for history in ([], [False], [False, False, False]):
        assert lord.level(history) == spend.level(history)
    # the first accept earns nothing back (W0 = alpha); the second earns alpha * gamma
    assert lord.level([True]) == spend.level([True])
    assert lord.level([True, True]) == pytest.approx(0.05 * weights[2] + 0.05 * weights[0])
    assert lord.level([True, True]) > spend.level([True, True])
    assert all(lord.level([True] * j) <= 0.05 for j in range(12))
    assert RunAlpha(0.05, "spend", 3).level([False] * 5) > 0  # past the plan, levels keep shrinking but exist


def test_a_pure_noise_run_accepts_anything_with_probability_at_most_alpha() -> None:
    """Run-wide control: 12 gated decisions on pure noise; P(any accept) <= alpha + 3 SE."""
    rng = np.random.default_rng(23)
    policy = RunAlpha(0.05, "lord", 12)
    runs_with_accept = 0
    for _ in range(SIMS):
        history: list[bool] = []
        for _ in range(12):
            outcome, _ = run_test(SequentialTest(policy.level(history)), rng, rng.uniform(0.3, 0.7, 20), 0.0)
            history.append(outcome == "accept")
        runs_with_accept += any(history)
    rate = runs_with_accept / SIMS
    assert rate <= 0.05 + 3 * _se(0.05, SIMS), f"{rate:.4f} of pure-noise runs accepted an edit"


def _rec(task: str, rep: int, value: float | None, candidate: str, status: str = "ok") -> RolloutRecord:
    score = (
        None
        if value is None
        else Score(hard=int(value >= 1), soft=value, mixed=value, checks=[], contract="c")
    )
    return RolloutRecord(
        task_id=task, split="val", phase="gate", replicate=rep, seed=0, candidate=candidate, agent="mock",
        options_hash="o", task_hash="t", status=status, score=score, wall_s=0.0, started_at="2026-01-01",
    )  # fmt: skip


class ScriptedSampler:
    """Outcomes per (arm, task, replicate) from a seeded generator; records every call."""

    def __init__(self, effect: float, tasks: int = 10, seed: int = 0, infra_at: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.effect, self.tasks, self.infra_at = effect, tasks, infra_at
        self.calls: list[tuple[int, int]] = []

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        self.calls.append((index, replicates))
        cand, inc = [], []
        for t in range(self.tasks):
            for r in range(replicates):
                rep = index * replicates + r
                cand.append(_rec(f"t{t}", rep, float(self.rng.random() < 0.5 + self.effect), "cand"))
                status = "infra_error" if self.infra_at == index and t == 0 else "ok"
                value = None if status != "ok" else float(self.rng.random() < 0.5)
                inc.append(_rec(f"t{t}", rep, value, "inc", status))
        return cand, inc


def test_gate_records_every_round_and_uses_fresh_replicates() -> None:
    gate = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=6)
    assert isinstance(gate, SequentialGate)
    sampler = ScriptedSampler(0.45, tasks=12, seed=1)
    verdict = gate.decide(sampler)
    assert verdict.decision == "accept"
    assert sampler.calls == [(k, 1) for k in range(len(verdict.rounds))]
    assert [r.replicates for r in verdict.rounds] == list(range(1, len(verdict.rounds) + 1))
    assert verdict.rollouts == 24 * len(verdict.rounds)
    last = verdict.rounds[-1].statistic
    assert last["t"] >= last["bound_t"] and last["alpha"] == 0.05
    assert "crossed the bound" in verdict.reason


def test_gate_rejects_for_futility_and_at_the_cap() -> None:
    futile = make_gate("sequential", "mixed", 1, alpha=0.05).decide(ScriptedSampler(-0.4, seed=2))
    assert futile.decision == "reject" and "futility" in futile.reason
    capped = make_gate("sequential", "mixed", 1, alpha=0.001, max_reps=2, min_effect=-1.0).decide(
        ScriptedSampler(0.1, seed=3)
    )
    assert capped.decision == "reject" and "cap of 2" in capped.reason and len(capped.rounds) == 2


def test_gate_never_decides_on_a_contaminated_round() -> None:
    verdict = make_gate("sequential", "mixed", 1, alpha=0.05).decide(
        ScriptedSampler(0.45, seed=4, infra_at=1)
    )
    assert verdict.decision == "contaminated"
    assert len(verdict.rounds) == 2
