"""The sequential gate's statistics: the sign-flip reference, exactness, power, run-wide control."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from skilltune.gate import HarmScope, make_gate
from skilltune.gate.run import RunAlpha
from skilltune.gate.sequential import SequentialGate
from skilltune.runfiles import RolloutRecord, SignFlipStatistic, Verdict
from skilltune.score import Score
from skilltune.stats import SequentialTest
from skilltune.stats.alpha import harmonic_weights
from skilltune.stats.signflip import Crossings, Reference, budgets, lattice, p_value, reference_size, tail


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def run_test(
    test: SequentialTest, rng: np.random.Generator, p_inc: np.ndarray, p_cand: np.ndarray
) -> tuple[str, int]:
    """One decision on 0/1 outcomes (one replicate per task per arm and look): (outcome, looks)."""
    sums = np.zeros(p_inc.size)
    for k in range(test.max_looks):
        sums += (rng.random(p_inc.size) < p_cand).astype(float) - (rng.random(p_inc.size) < p_inc)
        outcome, _ = test.look(k, list(sums / (k + 1)))
        if outcome is not None:
            return outcome, k + 1
    raise AssertionError("undecided after the last look")


# --- the reference distribution -------------------------------------------------------------------


def test_tail_is_the_exact_sign_flip_distribution() -> None:
    rng = np.random.default_rng(1)
    rows = rng.integers(-4, 5, size=(40, 7))
    thresholds = rng.integers(-10, 11, size=40)
    got = tail(rows, thresholds)
    signs = np.array(list(itertools.product((-1, 1), repeat=7)))
    for row, threshold, p in zip(rows, thresholds, got, strict=True):
        assert p == pytest.approx(float(np.mean(signs @ row >= threshold)), abs=1e-15)
        assert tail(row[None, :], np.array([threshold]))[0] == p  # a row does not depend on the batch


def test_equal_float_differences_are_equal_values() -> None:
    noisy = np.array([0.2 - 0.1, 0.1, 0.3 - 0.2, 0.7 - 0.6])
    assert len(set(noisy.tolist())) > 1  # they differ in the last bits
    assert lattice(noisy).tolist() == [1, 1, 1, 1]
    assert p_value(lattice(noisy)) == 2.0**-4  # all four positive: the smallest p of four tasks
    odd = np.array([0.1234567, -0.7654321, 0.5])
    assert lattice(-odd).tolist() == (-lattice(odd)).tolist()  # off any lattice, rounding is odd


def test_reference_is_every_sign_vector_for_few_tasks_else_seeded() -> None:
    assert reference_size(8, 0.01) == (256, True)
    assert reference_size(16, 0.001) == (65536, True)
    size, exact = reference_size(40, 0.01)
    assert not exact and size >= 128 / 0.01
    assert reference_size(40, 1e-4)[0] == 1 << 20
    a, b = Reference(40, 0.01, seed=3), Reference(40, 0.01, seed=3)
    assert (a.signs == b.signs).all() and (a.signs[0] == 1).all()
    assert not (Reference(40, 0.01, seed=4).signs == a.signs).all()


def test_at_most_the_budget_crosses_and_ties_cross_whole() -> None:
    crossings = Crossings(8)
    values = np.array([5.0, 5.0, 5.0, 1.0, 0.0, -1.0, -5.0, -5.0])
    assert not crossings.look(values, 2)  # the tie of three at 5 does not fit in 2
    assert crossings.count == 0
    assert crossings.look(values, 3) and crossings.count == 3
    assert budgets(0.05, 8, 2.0, 1 << 16) == tuple(
        math.floor(0.05 * (k / 8) ** 2 * 65536 + 1e-9) for k in range(1, 9)
    )


def _decide(diffs_per_look: list[list[float]], alpha: float, seed: int = 0) -> str | None:
    test = SequentialTest(
        alpha, len(diffs_per_look[0]), max_looks=len(diffs_per_look), seed=seed, min_effect=-9
    )
    for k, diffs in enumerate(diffs_per_look):
        outcome, _ = test.look(k, diffs)
        if outcome is not None:
            return outcome
    return None


def test_the_test_is_exact_over_every_sign_flip_of_a_data_set() -> None:
    """Conditional on the data up to sign, at most alpha of the 2^n flips are accepted: the guarantee
    itself, checked through look() on every flipped data set (8 tasks, 4 looks, 0/1 outcomes)."""
    rng = np.random.default_rng(5)
    for _ in range(3):
        steps = rng.integers(-1, 2, size=(4, 8)) + (rng.random((4, 8)) < 0.3)  # tilted to the candidate
        paths = np.cumsum(np.clip(steps, -1, 1), axis=0) / np.arange(1, 5)[:, None]
        for alpha in (0.05, 0.02):
            accepted = sum(
                _decide([list(np.array(flip) * look) for look in paths], alpha) == "accept"
                for flip in itertools.product((-1, 1), repeat=8)
            )
            assert accepted <= alpha * 256, (accepted, alpha)


def test_equal_float_differences_below_the_minimum_pairs_never_accept() -> None:
    """Equal differences are zero variance: 2^-n is their p-value, so with n < log2(1/alpha)
    tasks no look accepts; with enough tasks they accept as exact equal differences do."""
    alpha = 0.01  # log2(100) = 6.6: seven tasks are the minimum
    for n in range(1, 7):
        looks = [[0.3 - 0.2] * n for _ in range(8)]
        test = SequentialTest(alpha, n, min_effect=-1.0)
        assert all(test.look(k, d)[0] in (None, "cap") for k, d in enumerate(looks)), n
    for diff in (0.1, 0.3 - 0.2, 1.0):
        test = SequentialTest(alpha, 12)
        outcomes = [test.look(k, [diff] * 12)[0] for k in range(3)]
        assert "accept" in outcomes, (diff, outcomes)
    assert SequentialTest(0.05, 20).look(0, [0.0] * 20)[0] == "futility"  # all ties: no gain to find
    later = SequentialTest(0.05, 20, futility_from=2)
    assert later.look(0, [0.0] * 20)[0] is None and later.look(1, [0.0] * 20)[0] == "futility"


# Rates below come from benchmarks/gatesim.py, which decides many decisions at once with the gate's own
# signflip code (test_the_benchmark_simulates_the_gate_itself checks it against SequentialTest).


def _simulate(
    rng: np.random.Generator, base: np.ndarray, cand: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    from benchmarks.gatesim import NEW, decide, outcomes

    diffs = (outcomes(rng, np.clip(cand, 0, 1), 8) - outcomes(rng, base, 8)).astype(np.int8)
    seeds = rng.integers(0, 2**31, 16)[rng.integers(0, 16, base.shape[0])]
    return decide(NEW, np.full(base.shape[0], alpha), diffs, seeds, rng)


@pytest.mark.parametrize(
    ("tasks", "lo", "hi", "alpha"),
    [(8, 0.1, 0.9, 0.05), (20, 0.02, 0.25, 0.05), (20, 0.05, 0.95, 0.01), (60, 0.3, 0.7, 0.01)],
)
def test_type_one_error_at_most_alpha(tasks: int, lo: float, hi: float, alpha: float) -> None:
    """Skewed and mixed per-task rates, the arms exchangeable on each task."""
    rng = np.random.default_rng(11)
    sims = 20_000
    base = rng.uniform(lo, hi, (sims, tasks))
    rate = float(_simulate(rng, base, base, alpha)[0].mean())
    assert rate <= alpha + 3 * _se(alpha, sims), (
        f"false accepts {rate:.4f} at alpha {alpha} with {tasks} tasks"
    )


@pytest.mark.parametrize("tasks", [6, 20])
def test_zero_mean_heterogeneous_effects_are_rarely_accepted(tasks: int) -> None:
    """Each task +0.2 or -0.2 (zero mean over the task population): at most about alpha; the
    per-replicate t test accepted such edits at 1.4-2.2x alpha."""
    rng = np.random.default_rng(17)
    sims = 20_000
    base = rng.uniform(0.3, 0.7, (sims, tasks))
    cand = base + 0.2 * rng.choice((-1.0, 1.0), (sims, tasks))
    rate = float(_simulate(rng, base, cand, 0.05)[0].mean())
    assert rate <= 0.05 + 3 * _se(0.05, sims), f"{rate:.4f} with {tasks} tasks"


def test_power_and_cost_at_plus_twenty_points_on_twenty_tasks() -> None:
    """The design target: >= 80% power at +20 points at a 12-decision run's first level, with at most
    6 replicates per task per arm on average."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0.35, 0.65, (4000, 20))
    accepted, used = _simulate(rng, base, base + 0.2, RunAlpha(planned=12).level([]))
    assert accepted.mean() - 3 * _se(0.8, 4000) >= 0.80, f"power {accepted.mean():.3f}"
    assert used.mean() <= 6.0, f"mean replicates {used.mean():.2f}"


def test_futility_stops_null_decisions_early() -> None:
    rng = np.random.default_rng(5)
    base = np.full((4000, 20), 0.5)
    assert _simulate(rng, base, base, 0.01)[1].mean() < 3.5
    accepted, used = _simulate(rng, base[:500], base[:500] - 0.2, 0.01)
    assert not accepted.any() and used.mean() <= 2.0


# --- run-wide control ---------------------------------------------------------------------------


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


@pytest.mark.parametrize("planned", [1, 3, 12])
def test_decisions_past_the_plan_never_spend_more_than_alpha(planned: int) -> None:
    """24 decisions on a 12-decision plan once spent 0.0597 (the weights were renormalised)."""
    for policy in ("spend", "lord"):
        run = RunAlpha(0.05, policy, planned)
        history: list[bool] = []
        total = 0.0
        for _ in range(2 * planned + 12):
            total += run.level(history)
            history.append(False)
        assert total <= 0.05 + 1e-12, (policy, total)
        assert run.level([False] * planned) == 0.0  # past the plan nothing is left
    # under spend, whatever the outcomes, the levels of any number of decisions sum to at most alpha
    rng = np.random.default_rng(2)
    outcomes = list(rng.random(3 * planned) < 0.5)
    spend = RunAlpha(0.05, "spend", planned)
    assert sum(spend.level(outcomes[:j]) for j in range(3 * planned)) <= 0.05 + 1e-12


def test_an_exhausted_plan_rejects_without_rollouts() -> None:
    from skilltune.gate.run import RunGate

    gate = RunGate("sequential", "mixed", 1, {}, 0.05, "spend", 2)
    assert gate.for_decision([False])[0] is not None
    assert gate.for_decision([False, False]) == (None, 0.0)


def test_a_pure_noise_run_accepts_anything_with_probability_at_most_alpha() -> None:
    """Run-wide control: 12 decisions on pure noise sharing the incumbent's rollouts, as a run's do;
    P(any keep) <= alpha + 3 SE."""
    from benchmarks.gatesim import NEW, decide, outcomes

    rng = np.random.default_rng(23)
    runs, tasks = 6000, 20
    base = rng.uniform(0.3, 0.7, (runs, tasks))
    pool = outcomes(rng, base, 8)  # the incumbent's rounds, shared by every decision of a run
    kept = np.zeros(runs, dtype=bool)
    for level in RunAlpha(0.05, "spend", 12).planned_levels():  # spend: levels do not depend on outcomes
        diffs = (outcomes(rng, base, 8) - pool).astype(np.int8)
        seeds = rng.integers(0, 2**31, 16)[rng.integers(0, 16, runs)]
        kept |= decide(NEW, np.full(runs, level), diffs, seeds, rng)[0]
    rate = float(kept.mean())
    assert rate <= 0.05 + 3 * _se(0.05, runs), f"{rate:.4f} of pure-noise runs kept an edit"


# --- the gate -----------------------------------------------------------------------------------


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
    """Outcomes per (arm, task, round) from a seeded generator; the incumbent's replicates are
    numbered apart from the candidate's (as a shared incumbent pool's are); records every call."""

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
                inc.append(_rec(f"t{t}", 500 + rep, value, "inc", status))
        return cand, inc


def test_gate_records_every_round_with_its_pairs() -> None:
    gate = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=6)
    assert isinstance(gate, SequentialGate)
    sampler = ScriptedSampler(0.45, tasks=12, seed=1)
    verdict = gate.decide(sampler)
    assert verdict.decision == "accept" and verdict.test == "signflip"
    assert sampler.calls == [(k, 1) for k in range(len(verdict.rounds))]
    assert [r.replicates for r in verdict.rounds] == list(range(1, len(verdict.rounds) + 1))
    assert verdict.rollouts == 24 * len(verdict.rounds)
    first = verdict.rounds[0]
    assert [p.task for p in first.pairs] == sorted(f"t{t}" for t in range(12))
    assert all(p.incumbent_replicate == 500 + p.candidate_replicate for p in first.pairs)
    last = verdict.rounds[-1].statistic
    assert isinstance(last, SignFlipStatistic)
    assert last.crossed <= last.budget and last.alpha == 0.05 and last.reference == 4096
    assert "crossed the sign-flip boundary" in verdict.reason


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


@pytest.mark.parametrize(("tasks", "alpha"), [(12, 0.02), (24, 0.01)])
def test_the_benchmark_simulates_the_gate_itself(tasks: int, alpha: float) -> None:
    """benchmarks/gatesim.py decides in bulk; each decision equals SequentialTest's on the same data."""
    from benchmarks.gatesim import NEW, decide

    rng = np.random.default_rng(tasks)
    rows = 80
    base = rng.uniform(0.2, 0.8, (rows, tasks))
    effect = rng.choice((0.0, 0.3), (rows, 1))
    diffs = ((rng.random((rows, 8, tasks)) < base[:, None, :] + effect[:, None, :]).astype(np.int8)
             - (rng.random((rows, 8, tasks)) < base[:, None, :]))  # fmt: skip
    seeds = rng.integers(0, 4, rows)
    accepted, used = decide(NEW, np.full(rows, alpha), diffs.astype(np.int8), seeds)
    assert 0 < accepted.sum() < rows
    for d in range(rows):
        test = SequentialTest(alpha, tasks, seed=int(seeds[d]))
        sums = np.cumsum(diffs[d], axis=0)
        for k in range(8):
            outcome, _ = test.look(k, list(sums[k] / (k + 1)))
            if outcome is not None:
                break
        assert (outcome == "accept", k + 1) == (bool(accepted[d]), int(used[d])), d


def test_the_benchmark_simulates_the_one_look_test() -> None:
    """verdicts.py's fixed-sample reference: gatesim at one look on task means over r replicates (sums
    in units of 1/r) decides as SequentialTest(max_looks=1) does."""
    from benchmarks.gatesim import Design, decide

    rng = np.random.default_rng(4)
    rows, tasks, reps = 150, 20, 3
    base = rng.uniform(0.35, 0.65, (rows, tasks))
    effect = rng.choice((0.0, 0.2), (rows, 1))
    diffs = ((rng.random((rows, reps, tasks)) < base[:, None, :] + effect[:, None, :]).astype(np.int64)
             - (rng.random((rows, reps, tasks)) < base[:, None, :]))  # fmt: skip
    sums = diffs.sum(axis=1, keepdims=True)
    seeds = rng.integers(0, 4, rows)
    accepted, _ = decide(Design(max_looks=1), np.full(rows, 0.01), sums, seeds, grid=reps)
    assert 0 < accepted.sum() < rows
    for d in range(rows):
        outcome, _ = SequentialTest(0.01, tasks, max_looks=1, seed=int(seeds[d])).look(
            0, list(sums[d, 0] / reps)
        )
        assert (outcome == "accept") == bool(accepted[d]), d


class ArraySampler:
    """Rounds from arrays: ``inc[k, i]`` and ``cand[k, i]`` are task i's scores in round k."""

    def __init__(self, inc: np.ndarray, cand: np.ndarray) -> None:
        self.inc, self.cand = inc, cand

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        tasks = range(self.inc.shape[1])
        return (
            [_rec(f"t{i:02d}", index, float(self.cand[index, i]), "cand") for i in tasks],
            [_rec(f"t{i:02d}", 500 + index, float(self.inc[index, i]), "inc") for i in tasks],
        )


@pytest.mark.parametrize(
    ("graded", "tasks", "alpha"), [(False, 16, 0.05), (True, 16, 0.05), (True, 24, 0.01)]
)
def test_the_benchmark_simulates_the_harm_veto(graded: bool, tasks: int, alpha: float) -> None:
    """gatesim's decisions with the harm veto equal the gate's own (SequentialGate, without the
    stop_on_repeat stops gatesim leaves to benchmarks/efficiency.py), on edits that help most tasks
    and break a planted few: 0/1 outcomes, and graded scores on a 0.01 grid passed as floats. The
    veto fires, and some decisions run rounds past their crossing for an unresolved suspect."""
    from benchmarks.gatesim import NEW_VETO, decide

    rng = np.random.default_rng(tasks + graded)
    rows = 90
    base = rng.uniform(0.05, 0.3, (rows, tasks)) if not graded else rng.uniform(0.3, 0.8, (rows, tasks))
    planted = np.arange(tasks)[None, :] < rng.integers(0, 3, (rows, 1))  # 0-2 broken tasks a row
    lift = rng.choice((0.0, 0.2, 0.7), (rows, 1))
    if graded:

        def score(rate: np.ndarray) -> np.ndarray:
            return np.rint(100 * np.clip(rate + rng.normal(0, 0.05, (rows, 8, tasks)), 0, 1)) / 100

        cand = score(np.where(planted, base - 0.6, base + lift)[:, None, :])
        inc = score(base[:, None, :])
    else:
        cand_rate = np.where(planted, 0.0, np.clip(base + lift, 0, 0.97))[:, None, :]
        inc_rate = np.where(planted, 1.0, base)[:, None, :]
        cand = (rng.random((rows, 8, tasks)) < cand_rate).astype(float)
        inc = (rng.random((rows, 8, tasks)) < inc_rate).astype(float)
    seeds = rng.integers(0, 4, rows)
    accepted, used = decide(NEW_VETO, np.full(rows, alpha), cand - inc, seeds, inc=inc)
    plain, crossed_at = decide(
        replace(NEW_VETO, harm_tolerance=None), np.full(rows, alpha), cand - inc, seeds
    )
    vetoed = waited = 0
    for d in range(rows):
        gate = make_gate("sequential", "mixed", 1, alpha=alpha, seed=int(seeds[d]), stop_on_repeat=False)
        verdict = gate.decide(ArraySampler(inc[d], cand[d]))
        assert (verdict.accept, len(verdict.rounds)) == (bool(accepted[d]), int(used[d])), (d, verdict.reason)
        vetoed += verdict.reason.startswith("harm veto")
        waited += bool(plain[d]) and int(used[d]) > int(crossed_at[d])
    assert vetoed >= 3 and accepted.sum() >= 3, (vetoed, int(accepted.sum()))  # the veto fired, not always
    assert waited >= 3, waited  # suspects held a keep back for more rounds


class RepeatingSampler:
    """A near-deterministic target: every round repeats the first exactly (``improved`` of ``tasks``
    tasks go 0 -> 1, the others stay at 0.5)."""

    def __init__(self, improved: int, tasks: int = 12) -> None:
        self.improved, self.tasks = improved, tasks
        self.calls = 0

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        self.calls += 1
        cand = [_rec(f"t{t}", index, 1.0 if t < self.improved else 0.5, "cand") for t in range(self.tasks)]
        inc = [
            _rec(f"t{t}", 500 + index, 0.0 if t < self.improved else 0.5, "inc") for t in range(self.tasks)
        ]
        return cand, inc


def test_a_decision_whose_further_rounds_cannot_change_its_outcome_stops() -> None:
    """What a 1.5B local target did: 5 of 12 val tasks fixed, none broken, replicates identical. The
    p of 5 changed tasks is 1/32 at every round, above the level 0.024: once the second round
    repeats the first, the gate rejects (it ran to the cap of 3, 48 more rollouts for nothing);
    6 fixed tasks (p 1/64) can still cross at a later look, and the gate goes on until they do."""
    settings = {"alpha": 0.024, "max_reps": 3}
    stopped = make_gate("sequential", "mixed", 1, **settings).decide(sampler := RepeatingSampler(5))
    assert stopped.decision == "reject" and len(stopped.rounds) == 2 and sampler.calls == 2
    assert stopped.reason.startswith("replicates repeat exactly after 2 replicate(s) of 12 task(s)")
    assert "p 0.0312 is above the decision's level 0.024" in stopped.reason
    capped = make_gate("sequential", "mixed", 1, **settings, stop_on_repeat=False).decide(RepeatingSampler(5))
    assert capped.decision == "reject" and len(capped.rounds) == 3 and "cap of 3" in capped.reason
    assert stopped.rollouts == capped.rollouts - 24
    kept = make_gate("sequential", "mixed", 1, **settings).decide(RepeatingSampler(6))
    assert kept.decision == "accept" and len(kept.rounds) >= 2


def test_a_gate_says_when_a_decision_cannot_accept() -> None:
    gate = make_gate("sequential", "mixed", 1, alpha=0.05)
    assert gate.cannot_accept(5) is None
    assert gate.cannot_accept(4) == (
        "cannot accept: with 4 val task(s) the smallest sign-flip p is 2^-4 = 0.0625, above this decision's "
        "level 0.05 (it needs 5 val tasks); no rollout was run"
    )
    assert make_gate("strict", "mixed", 1).cannot_accept(1) is None


class TableSampler:
    """Rounds from a table: ``scores[task]`` is a list of (incumbent, candidate) per round (the last
    one repeats past its end)."""

    def __init__(self, scores: dict[str, list[tuple[float, float]]]) -> None:
        self.scores = scores
        self.calls = 0

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        self.calls += 1
        cand, inc = [], []
        for task, rounds in self.scores.items():
            a, b = rounds[min(index, len(rounds) - 1)]
            cand.append(_rec(task, index, b, "cand"))
            inc.append(_rec(task, 500 + index, a, "inc"))
        return cand, inc


def _helps_twelve(harmed: list[tuple[float, float]]) -> dict[str, list[tuple[float, float]]]:
    """12 tasks fixed (0 -> 1), 3 unchanged at 0.5, and t_harm whose rounds are ``harmed``."""
    table = {f"t{t:02d}": [(0.0, 1.0)] for t in range(12)} | {f"u{t}": [(0.5, 0.5)] for t in range(3)}
    return table | {"t_harm": harmed}


def test_a_task_hurt_beyond_the_tolerance_blocks_a_keep() -> None:
    """The sum crosses in round 1 (12 tasks up, one down: p 14/8192); the task that fell from 1 to 0
    is a suspect with no noise estimate, so the gate runs a second round instead of keeping; it falls
    again, every task repeats (a deterministic target: noise 0), and the keep is blocked, the task
    named in the reason and in gate.json's harm record. Off (tolerance above 1), the same data is kept
    in round 1."""
    settings = {"alpha": 0.05, "max_reps": 3}
    vetoed = make_gate("sequential", "mixed", 1, **settings).decide(
        sampler := TableSampler(_helps_twelve([(1.0, 0.0)]))
    )
    assert vetoed.decision == "reject" and sampler.calls == 2
    assert vetoed.reason.startswith("harm veto after 2 replicate(s) of 16 task(s)")
    assert (
        "1 val task(s) fell by more than 50% of its score and more than 0.1 with confidence: t_harm -1.00"
        in vetoed.reason
    )
    assert vetoed.harm is not None and vetoed.harm.harmed == {"t_harm": -1.0} and vetoed.harm.noise == 0.0
    assert vetoed.harm.suspects == {"t_harm": -1.0} and vetoed.harm.floor == 0.1
    off = make_gate("sequential", "mixed", 1, **settings, harm_tolerance=1.5).decide(
        TableSampler(_helps_twelve([(1.0, 0.0)]))
    )
    assert off.decision == "accept" and len(off.rounds) == 1 and off.harm is None


def test_a_trigger_query_lost_by_a_rewrite_is_a_trade_off_not_a_harm() -> None:
    """The same data as above, but t_harm is a trigger task (a trade-off in the decision's
    ``HarmScope``): a description that wins 12 queries and loses one for good is kept in round 1, with
    no harm record naming it; a body task beside it that falls the same way still blocks the keep."""
    scope = HarmScope(trade_offs=frozenset({"t_harm"}))
    gate = make_gate("sequential", "mixed", 1, scope, alpha=0.05, max_reps=3)
    kept = gate.decide(sampler := TableSampler(_helps_twelve([(1.0, 0.0)])))
    assert kept.decision == "accept" and sampler.calls == 1
    assert kept.harm is not None and kept.harm.suspects == {} and kept.harm.harmed == {}
    body = make_gate("sequential", "mixed", 1, scope, alpha=0.05, max_reps=3)
    table = _helps_twelve([(1.0, 0.0)]) | {"b_hurt": [(1.0, 0.0)]}
    vetoed = body.decide(TableSampler(table))
    assert vetoed.decision == "reject" and vetoed.harm is not None and set(vetoed.harm.harmed) == {"b_hurt"}


def _three_agents(harm: dict[str, float]) -> dict[str, list[tuple[float, float]]]:
    """Units ``agent/task`` of agents a, b and c: t00-t03 fixed (0 -> 1) on every agent, and t_harm
    whose candidate score on each agent is ``harm[agent]`` (incumbent 1)."""
    table = {f"{a}/t{t:02d}": [(0.0, 1.0)] for a in "abc" for t in range(4)}
    return table | {f"{a}/t_harm": [(1.0, harm[a])] for a in "abc"}


def test_under_agents_gate_mean_the_veto_weighs_a_task_over_the_agents() -> None:
    """The scope's ``groups`` (--agents-gate mean) pool a task's units across the agents before the
    veto looks. t_harm lost on agent a and won on b and c (mean +1/3) is a trade-off: kept. Lost on every
    agent it blocks the keep, named by its task (the sum still crosses: 12 units up, 3 down, p
    576/32768). Without the pooling (no-worse), a's one lost unit is vetoed on its own."""
    groups = {unit: unit.split("/")[1] for unit in _three_agents(dict.fromkeys("abc", 0.0))}

    def decide(harm: dict[str, float], pooled: bool) -> Verdict:
        scope = HarmScope(groups=groups if pooled else {})
        gate = make_gate("sequential", "mixed", 1, scope, alpha=0.05, max_reps=3)
        return gate.decide(TableSampler(_three_agents(harm)))

    traded = decide({"a": 0.0, "b": 1.0, "c": 1.0}, pooled=True)
    assert traded.decision == "accept" and traded.harm is not None and traded.harm.suspects == {}
    everywhere = decide(dict.fromkeys("abc", 0.0), pooled=True)
    assert everywhere.decision == "reject" and everywhere.harm is not None
    assert set(everywhere.harm.harmed) == {"t_harm"} and "t_harm -1.00" in everywhere.reason
    unit = decide({"a": 0.0, "b": 1.0, "c": 1.0}, pooled=False)
    assert unit.decision == "reject" and unit.harm is not None and set(unit.harm.harmed) == {"a/t_harm"}


def _graded_twelve(harmed: list[tuple[float, float]]) -> dict[str, list[tuple[float, float]]]:
    """12 tasks fixed, their graded scores a little noisy (0 -> 1.0, 0.9, 1.0, ...), 3 unchanged at
    0.5, and t_harm whose rounds are ``harmed``."""
    fixed = [(0.0, 1.0), (0.0, 0.9)] * 4
    table = {f"t{t:02d}": fixed for t in range(12)} | {f"u{t}": [(0.5, 0.5)] for t in range(3)}
    return table | {"t_harm": harmed}


def test_a_suspect_the_rounds_left_could_confirm_gets_them_before_a_keep() -> None:
    """Issue 33, item 1. The sum crosses in round 1; t_harm (0.8 -> 0.3 every round: a fall of 62% of
    its score) is a suspect. After round 2 its upper bound is not confident yet against the noise of
    the fixed tasks (sd 0.07), but the rounds left could confirm it: the gate runs round 3 instead of
    keeping, where it is confirmed and the keep is blocked. The veto before issue 33 looked once, after
    round 2 (the first with a noise estimate), and kept this edit."""
    verdict = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=8).decide(
        sampler := TableSampler(_graded_twelve([(0.8, 0.3)]))
    )
    assert verdict.decision == "reject" and sampler.calls == 3
    assert verdict.reason.startswith("harm veto after 3 replicate(s) of 16 task(s)")
    assert verdict.harm is not None and set(verdict.harm.harmed) == {"t_harm"}
    stat = verdict.rounds[0].statistic
    assert isinstance(stat, SignFlipStatistic) and stat.crossed > 0  # crossed in round 1: the veto held it
    from skilltune.stats.harm import harm

    table = _graded_twelve([(0.8, 0.3)])
    two = {task: [rounds[min(k, len(rounds) - 1)] for k in range(2)] for task, rounds in table.items()}
    after_two = harm(two, 0.5, 0.9, 0.1, looks=8, grow=4.0)  # what the gate saw after round 2
    assert after_two.harmed == {} and after_two.open == ["t_harm"]


def _flaky(dropping: list[tuple[float, float]]) -> dict[str, list[tuple[float, float]]]:
    """12 tasks fixed (0 -> 1 every round), 4 unchanged and deterministic, an unchanged flaky 0/1 task
    that shows its noise, and f_drop, the same kind of task, whose rounds are ``dropping``."""
    table = {f"t{t:02d}": [(0.0, 1.0)] for t in range(12)}
    table |= {f"d{t}": [(float(t % 2), float(t % 2))] for t in range(4)}
    return table | {"f_noisy": [(0.0, 1.0), (1.0, 0.0), (0.0, 0.0), (1.0, 1.0)], "f_drop": dropping}


def test_an_unchanged_flaky_task_that_fell_twice_does_not_veto() -> None:
    """Issue 33, item 2. f_drop, a 50/50 task the edit leaves alone, happens to fall from 1 to 0 in
    both of the first two rounds (1 in 16). Judged against the noise of the tasks that vary (f_noisy)
    rather than a noise pooled with the deterministic tasks' zeros, its fall is within what a flaky
    task does, and no round left could confirm it: kept after round 2. The same fall on a target
    where no task varies (every replicate repeats) is a harm."""
    kept = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=8).decide(
        sampler := TableSampler(_flaky([(1.0, 0.0), (1.0, 0.0), (0.0, 1.0)]))
    )
    assert kept.decision == "accept" and sampler.calls == 2
    assert kept.harm is not None and kept.harm.suspects == {"f_drop": -1.0} and kept.harm.harmed == {}
    assert kept.harm.noise is not None and kept.harm.noise > 1.0  # f_noisy's: -1 and +1 by turns
    assert "1 task(s) fell by more than 50% of its score and more than 0.1, within the replicate noise" in (
        kept.reason
    )
    steady = _flaky([(1.0, 0.0)]) | {"f_noisy": [(0.0, 1.0)]}
    vetoed = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=8).decide(TableSampler(steady))
    assert vetoed.decision == "reject" and vetoed.harm is not None and set(vetoed.harm.harmed) == {"f_drop"}


def test_a_harm_on_a_task_the_incumbent_scores_low_is_seen() -> None:
    """Issue 33, item 3. t_harm scores 0.4 under the incumbent and 0.05 under the candidate: it lost
    nearly all of its score, yet by 0.35, less than the former absolute tolerance of 0.5, which no
    task at 0.5 or below could ever exceed. Relative to its score it is a harm: vetoed. A task at
    0.06 that falls to 0 lost all of a score too small to matter (less than the floor, 0.1): kept."""
    vetoed = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=8).decide(
        TableSampler(_helps_twelve([(0.4, 0.05)]))
    )
    assert vetoed.decision == "reject" and vetoed.harm is not None
    assert vetoed.harm.harmed == {"t_harm": pytest.approx(-0.35)}
    tiny = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=8).decide(
        TableSampler(_helps_twelve([(0.06, 0.0)]))
    )
    assert tiny.decision == "accept" and len(tiny.rounds) == 1 and tiny.harm is not None
    assert tiny.harm.suspects == {}
    clean = make_gate("sequential", "mixed", 1, alpha=0.05, max_reps=3).decide(
        TableSampler(_helps_twelve([(0.5, 0.5)]))
    )
    assert clean.decision == "accept" and len(clean.rounds) == 1 and clean.harm is not None
    assert clean.harm.suspects == {} and clean.reason.endswith("at this round)")


def test_a_decision_stops_when_the_tasks_left_to_differ_cannot_reach_its_level() -> None:
    """What the bundled demo did with 16 val tasks: a rule fixed 6 and the other 10 were solved by both
    skills in every round. Whatever the 6 do later, 2^-6 is above the level 0.008, so no later round could accept: the gate
    stops after the second round (it ran to the cap of 8, 256 rollouts). Ties that do not repeat
    (both arms at 1, then both at 0) may still become differences: no stop there."""
    fixed = [(0.0, 1.0), (0.0, 0.75)]  # improved in both rounds, not alike: the differences may change
    table = {f"f{t}": fixed for t in range(6)} | {f"s{t}": [(1.0, 1.0)] for t in range(10)}
    stopped = make_gate("sequential", "mixed", 1, alpha=0.008, max_reps=8).decide(
        sampler := TableSampler(table)
    )
    assert stopped.decision == "reject" and sampler.calls == 2
    assert stopped.reason.startswith("10 task(s) tied in every round after 2 replicate(s) of 16 task(s)")
    assert (
        "the 6 other(s) can give a p of 2^-6 = 0.0156 at best, above the decision's level 0.008"
        in stopped.reason
    )
    moving = table | {f"s{t}": [(1.0, 1.0), (0.0, 0.0)] for t in range(10)}
    went_on = make_gate("sequential", "mixed", 1, alpha=0.008, max_reps=8).decide(
        sampler := TableSampler(moving)
    )
    assert sampler.calls > 2 and "tied in every round" not in went_on.reason


def test_the_harm_rule() -> None:
    from skilltune.stats.harm import harm

    first = harm({"a": [(0.8, 0.2)], "b": [(0.2, 0.4)]}, 0.5, 0.9, 0.1, looks=8, grow=8.0)
    assert first.suspects == {"a": pytest.approx(-0.6)} and first.harmed == {} and first.noise is None
    assert first.open == ["a"]  # no noise estimate yet: another round may tell
    graded = harm({"a": [(0.8, 0.2), (0.8, 0.18)], "b": [(0.2, 0.4), (0.2, 0.41)]}, 0.5, 0.9, 0.1)
    assert set(graded.harmed) == {"a"} and graded.open == []
    # relative: 0.4 -> 0.1 lost three quarters of the score (an absolute tolerance of 0.5 never saw it);
    # 0.4 -> 0.25 lost 38%, within the tolerance of 50%; 0.08 -> 0 is a fall below the floor
    low = {"a": [(0.4, 0.1)] * 2, "b": [(0.4, 0.25)] * 2, "c": [(0.08, 0.0)] * 2}
    assert harm(low, 0.5, 0.9, 0.1).suspects.keys() == {"a"} and set(harm(low, 0.5, 0.9, 0.1).harmed) == {"a"}
    # the noise: a task that fell twice among deterministic tasks is harmed (noise 0: every task repeated);
    # beside a task that varies, its fall is judged against that noise, not against the zeros
    steady = {f"s{i}": [(1.0, 1.0)] * 2 for i in range(10)} | {"f": [(1.0, 0.0)] * 2}
    assert set(harm(steady, 0.5, 0.9, 0.1).harmed) == {"f"} and harm(steady, 0.5, 0.9, 0.1).noise == 0.0
    flaky = steady | {"g": [(0.0, 1.0), (1.0, 0.0)]}
    seen = harm(flaky, 0.5, 0.9, 0.1)
    assert seen.suspects.keys() == {"f"} and seen.harmed == {} and seen.noise == pytest.approx(math.sqrt(2))
    # Bonferroni over the suspects and the looks: a fall confirmed at one look of one suspect is not
    # when the decision may look 8 times, nor beside a second suspect
    noise = {f"n{i}": [(0.0, 1.0), (0.5, 0.5), (1.0, 0.0), (0.5, 0.5)] for i in range(6)}
    fell = noise | {"a": [(1.0, 0.0)] * 4}
    assert set(harm(fell, 0.5, 0.9, 0.1).harmed) == {"a"}
    assert harm(fell, 0.5, 0.9, 0.1, looks=8).harmed == {}
    assert harm(fell | {"b": [(1.0, 0.0)] * 4}, 0.5, 0.9, 0.1).harmed == {}
    # open: a suspect the cap's rounds could confirm, its mean and noise staying as they are
    assert harm(fell, 0.5, 0.9, 0.1, looks=8, grow=2.0).open == ["a"]
    assert harm(fell, 0.5, 0.9, 0.1, looks=8, grow=1.0).open == []
