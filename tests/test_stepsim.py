"""benchmarks/stepsim.py (issue 31's simulator): its task model and its accounting, on tiny runs."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.gatesim import wilson
from benchmarks.runsim import RunShape
from benchmarks.stepsim import (
    HARM,
    RIGHT,
    S0,
    STAGES,
    TRADE,
    USELESS,
    WRONG,
    Analyst,
    StepDesign,
    Tasks,
    World,
    simulate,
)

TINY = RunShape(val=16, population=60, steps=4, epoch_steps=2, batch=6)
KEEN = Analyst(empty=0.1, focused=(0.6, 0.1, 0.0, 0.0), sample=(0.4, 0.1, 0.1, 0.0))
DESIGNS = [
    StepDesign("many"),
    StepDesign("many, split, idle", proposals=6, passing=2, split=True, idle="carry", loo="always"),
    StepDesign("many, to the run's end", passing=2, split=True, idle="carry", horizon="run", margin=2),
    StepDesign("many, focused only", passing=2, split=True, samples=False, idle="carry", horizon="run"),
    StepDesign("one", kind="one"),
    StepDesign("strict", kind="strict", carry=False),
    StepDesign("gepa", kind="gepa"),
    StepDesign("gepa end", kind="gepa", pick="end"),
]


@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: d.name)
def test_rollouts_by_stage_add_up(design: StepDesign) -> None:
    got = simulate(design, KEEN, Tasks(), TINY, 24, seed=5)
    stages = sum(got[f"cost_{stage}"] for stage in STAGES)
    assert np.array_equal(got["training"], stages)
    assert (got["cost_baseline"] == TINY.val).all()
    assert (got["cost_train"] == TINY.batch * TINY.steps).all()  # one base run of the batch a step
    assert (got["cost_screen"] <= got["screened"] * TINY.batch).all()  # a screen runs batch tasks only
    if design.kind == "gepa":
        assert (got["cost_gate"] == 0).all() and (got["cost_epoch"] == 0).all()
        per_keep = TINY.val if design.pick == "gepa" else 0  # each kept candidate's val pass
        assert (got["cost_val"] >= per_keep * got["kept"]).all()
    else:
        assert (got["cost_val"] == 0).all()
        assert (got["cost_epoch"] % (2 * TINY.slow_sample) == 0).all()
        assert (got["cost_gate"] % TINY.val == 0).all()  # whole rounds of the val split
    if design.kind in ("one", "strict"):
        assert (got["calls"] == TINY.steps).all() and (got["cost_loo"] == 0).all()
    assert got["kept"].sum() > 0  # not vacuous


def test_the_same_seed_gives_the_same_runs() -> None:
    a = simulate(DESIGNS[0], Analyst(), Tasks(), TINY, 12, seed=3)
    b = simulate(DESIGNS[0], Analyst(), Tasks(), TINY, 12, seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_an_analyst_that_never_answers_costs_only_the_batches() -> None:
    mute = Analyst(empty=1.0)
    for design in (StepDesign("many", proposals=3), StepDesign("one", kind="one")):
        got = simulate(design, mute, Tasks(), TINY, 10, seed=1)
        assert (got["training"] == TINY.val + TINY.batch * TINY.steps).all()
        assert (got["gain"] == 0).all() and (got["kept"] == 0).all()
        assert (got["calls"] == (design.proposals if design.kind == "many" else 1) * TINY.steps).all()


def test_without_right_rules_nothing_useful_is_kept_beyond_alpha() -> None:
    """No rule can help: every keep is a useless one, and the gate keeps in at most alpha of runs
    (the screen and the carry choose on train rollouts only); skill-trainer's strict gate keeps often."""
    hopeless = Analyst(empty=0.1, focused=(0.0, 0.3, 0.2, 0.0), sample=(0.0, 0.3, 0.2, 0.0))
    shape = RunShape(val=12, population=40, steps=4, epoch_steps=2, batch=6)
    for design in (StepDesign("many", proposals=4), StepDesign("one", kind="one")):
        got = simulate(design, hopeless, Tasks(), shape, 200, seed=2)
        assert (got["gain"] <= 1e-12).all()
        keeping = int((got["kept"] > 0).sum())
        assert np.array_equal(got["kept"] > 0, got["bad_candidate"] > 0)  # each keep counted in (a)
        assert wilson(keeping, 200)[0] <= 0.05, keeping
    loose = simulate(StepDesign("strict", kind="strict", carry=False), hopeless, Tasks(), shape, 200, seed=2)
    assert (loose["kept"] > 0).mean() > 0.2


def test_rules_act_on_their_cluster() -> None:
    tasks = Tasks(clusters=3, flaky=0.0)
    world = World(tasks, RunShape(val=30, population=300), 4, seed=0)
    for r in range(4):
        seed_pop, _, seed_mean = world.rates(r, S0)
        cl = world.pop_cluster[r]
        right = world.rates(r, frozenset({(RIGHT, 1, -1, 0)}))[0]
        assert (right[cl != 1] == seed_pop[cl != 1]).all() and (right[cl == 1] >= seed_pop[cl == 1]).all()
        assert world.rates(r, frozenset({(USELESS, -1, -1, 2)}))[2] == seed_mean
        wrong = world.rates(r, frozenset({(WRONG, 0, -1, 0)}))[0]
        assert (wrong[cl != 0] == seed_pop[cl != 0]).all() and (wrong[cl == 0] <= seed_pop[cl == 0]).all()
        assert world.rates(r, frozenset({(HARM, -1, -1, 0)}))[2] <= seed_mean
        trade = world.rates(r, frozenset({(TRADE, 1, 2, 0)}))[0]
        assert (trade[cl == 0] == seed_pop[cl == 0]).all() and (trade[cl == 2] <= seed_pop[cl == 2]).all()
        two = frozenset({(RIGHT, 1, -1, 0), (RIGHT, 1, -1, 1)})  # two texts of the same fix
        assert world.useless_rules(r, two, two) == 2  # neither adds anything beside the other
