"""benchmarks/efficiency.py (verdicts part i): its gate models and the figure's bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.random import Generator

from benchmarks.efficiency import ONE_PASS, figure, real_gate, repeat_limit, strict, summarise
from benchmarks.gatesim import NEW_VETO, Design, decide
from benchmarks.runsim import Gating, Proposals, RunShape, training_runs
from skilltune.stats.rounds import all_repeat, open_tasks
from skilltune.stats.signflip import tail


def test_repeat_limit_is_the_gates_stop_on_repeat() -> None:
    """Each row's stop look equals the first round at which stats/rounds.py says the gate stops."""
    rng = np.random.default_rng(4)
    rows, looks, n = 3000, 5, 6
    rates = rng.choice([0.0, 0.05, 0.5, 0.95, 1.0], (rows, 2, n))  # many tasks that repeat
    cand = (rng.random((rows, looks, n)) < rates[:, :1]).astype(np.int8)
    inc = (rng.random((rows, looks, n)) < rates[:, 1:]).astype(np.int8)
    alphas = rng.choice([0.05, 0.02, 0.004], rows)
    got = repeat_limit(cand, inc, alphas)
    stopped = 0
    for r in range(rows):
        want = looks - 1
        for k in range(1, looks):
            scores = {
                str(i): [(float(inc[r, j, i]), float(cand[r, j, i])) for j in range(k + 1)] for i in range(n)
            }
            d = (cand[r, 0] - inc[r, 0]).astype(np.int64)[None, :]
            p = float(tail(d, d.sum(axis=1))[0])
            if (all_repeat(scores) and p > alphas[r]) or 2.0 ** -open_tasks(scores) > alphas[r]:
                want = k
                break
        stopped += want < looks - 1
        assert got[r] == want, r
    assert stopped > 100  # the case is not vacuous


def test_one_pass_accepts_as_the_fixed_sample_test() -> None:
    """The one-pass design: the one-look task-level sign-flip test at the level (verdicts._fixed_sample
    at r = 1): accept exactly when the exact sign-flip p of the differences is at most the level."""
    rng = np.random.default_rng(2)
    rows, n = 4000, 10  # 2^10 sign vectors: the reference is exact
    base = rng.uniform(0.3, 0.8, (rows, n))
    cand = (rng.random((rows, 1, n)) < np.clip(base + 0.3, 0, 1)[:, None, :]).astype(np.int8)
    inc = (rng.random((rows, 1, n)) < base[:, None, :]).astype(np.int8)
    alphas = np.full(rows, 0.02)
    seeds = np.zeros(rows, dtype=np.int64)
    acc, used = real_gate(ONE_PASS)(alphas, cand, inc, seeds, rng)
    d = (cand[:, 0] - inc[:, 0]).astype(np.int64)
    p = tail(d, d.sum(axis=1))
    assert (acc == (p <= 0.02 + 1e-12)).all()
    assert 0.03 < acc.mean() < 0.97  # not vacuous
    assert (used == 1).all()
    fixed, _ = decide(Design(max_looks=1), alphas, d[:, None, :], seeds, rng, grid=1)
    assert (acc == fixed).all()


def test_a_decision_that_cannot_accept_runs_nothing() -> None:
    rng = np.random.default_rng(0)
    cand = np.ones((5, 8, 4), dtype=np.int8)
    inc = np.zeros((5, 8, 4), dtype=np.int8)
    acc, used = real_gate(NEW_VETO)(np.full(5, 0.01), cand, inc, np.zeros(5, dtype=np.int64), rng)
    assert not acc.any() and (used == 0).all()  # 2^-4 > 0.01


def _never(
    alphas: np.ndarray, cand: np.ndarray, inc: np.ndarray, seeds: np.ndarray, rng: Generator
) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(cand.shape[0], dtype=bool), np.full(cand.shape[0], 2)


def _always(
    alphas: np.ndarray, cand: np.ndarray, inc: np.ndarray, seeds: np.ndarray, rng: Generator
) -> tuple[np.ndarray, np.ndarray]:
    return np.ones(cand.shape[0], dtype=bool), np.full(cand.shape[0], 1)


def test_the_figures_bookkeeping_adds_up_by_hand() -> None:
    """Every step proposes a +0.1 edit on every task (no spread, no screen): by hand, rollouts and gains."""
    shape = RunShape(val=4, steps=2, epoch_steps=100, batch=3, base_lo=0.5, base_hi=0.5, population=10)
    helpful = Proposals(empty=0.0, helpful=1.0, harmful=0.0, gain=0.1, spread=0.0)
    design = Design(max_looks=2)
    never = training_runs(Gating("n", design, prefetch=False), shape, helpful, 3, 1, _never, per_run=True)
    runs = never["per_run"]
    # baseline 4; train 2 x 3; each decision: candidate 2 rounds x 4, incumbent round 2 once (round 1: baseline)
    assert runs["training"].tolist() == [4 + 6 + 8 + 4 + 8] * 3
    assert np.allclose(runs["gain"], 0.0) and (runs["kept"] == 0).all()
    kept = training_runs(Gating("a", design, prefetch=False), shape, helpful, 3, 1, _always, per_run=True)
    runs = kept["per_run"]
    # decision 1: candidate 4, incumbent nothing new; keep -> fresh pool; decision 2: candidate 4, incumbent 4
    assert runs["training"].tolist() == [4 + 6 + 4 + 8] * 3
    assert np.allclose(runs["gain"], 0.2) and (runs["kept"] == 2).all() and (runs["useless_keeps"] == 0).all()
    rng = np.random.default_rng(0)
    row = summarise(runs, rng)
    assert row["gain_per_1000"]["value"] == pytest.approx(1000 * 0.2 / 22)
    assert (
        row["useless_keep"] == 0 and row["worse_than_seed"] == 0 and row["eligible"] is False
    )  # 3 runs only
    same = figure(np.full(50, 0.2), np.full(50, 22.0), rng)
    assert same["ci95"] == pytest.approx([same["value"]] * 2)


def test_strict_keeps_on_a_higher_mean() -> None:
    cand = np.zeros((2, 3, 4), dtype=np.int8)
    inc = np.zeros((2, 3, 4), dtype=np.int8)
    cand[0, 2, 1] = 1
    acc, used = strict(np.zeros(2), cand, inc, np.zeros(2), np.random.default_rng(0))
    assert acc.tolist() == [True, False] and used.tolist() == [3, 3]
