"""Simulated training runs on gatesim's decisions (verdicts.py parts d and i).

A run of ``RunShape.steps`` steps and an epoch update every ``epoch_steps``: each step proposes
a candidate (``Proposals``: its per-task effects on the val tasks and on a held-out task
population), optionally screened on a train batch, then gated against the incumbent on the val
tasks at the level the run's alpha policy gives it; a keep makes the candidate the incumbent.
Rollouts are counted by stage. The true gain is known: the val tasks' rates, and those of
``RunShape.population`` held-out tasks drawn from the same population (the gain a user gets).
A ``Decider`` replaces gatesim's ``decide`` for designs it does not hold (efficiency.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.random import Generator

from benchmarks.gatesim import Design, decide, outcomes

# (levels, candidate outcomes, incumbent outcomes (rows, looks, tasks), reference seeds, rng)
# -> (accepted, rounds used per arm; 0: no rollout run)
Decider = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Generator], tuple[np.ndarray, np.ndarray]]


def halves(rng: Generator, rows: int, n: int) -> np.ndarray:
    """(rows, n) signs, half -1 and half +1 (one more +1 for odd n), in random order per row."""
    return rng.permuted(np.tile(np.repeat([-1.0, 1.0], n // 2 + 1)[:n], (rows, 1)), axis=1)


@dataclass(frozen=True)
class Proposals:
    """What a proposer's candidates do to the tasks (a model, stated in the README).

    Each step proposes nothing with chance ``empty``; else a candidate whose per-task effect is
    its kind's mean plus +-``spread`` (half the tasks each way): ``helpful`` (+``gain``),
    ``harmful`` (-``loss``) or neutral (zero mean)."""

    empty: float = 0.10
    helpful: float = 0.25
    harmful: float = 0.30
    gain: float = 0.20
    loss: float = 0.15
    spread: float = 0.10

    def draw(self, rng: Generator, runs: int, n: int, held: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One candidate per run: its per-task effects on the n val tasks and on the ``held``
        others, and whether it helps the task population (its mean effect is above zero)."""
        kind = rng.random(runs)
        mean = np.where(
            kind < self.helpful,
            self.gain,
            np.where(kind < self.helpful + self.harmful, -self.loss, 0.0),
        )[:, None]
        val, others = mean + self.spread * halves(rng, runs, n), mean + self.spread * halves(rng, runs, held)
        return val, others, mean[:, 0] > 0


@dataclass(frozen=True)
class RunShape:
    val: int = 20
    test: int = 20
    steps: int = 10
    epoch_steps: int = 5
    batch: int = 8
    slow_sample: int = 6
    test_reps: int = 3
    base_lo: float = 0.3
    base_hi: float = 0.8
    population: int = 200  # held-out tasks per run whose rates give the true gain (no rollouts)

    @property
    def planned(self) -> int:
        return self.steps + self.steps // self.epoch_steps


@dataclass(frozen=True)
class Gating:
    """A gate design and the run's policy around it.

    ``extra``: ``levels_by="step"`` gives a decision the level of its planned step (steps and
    epoch updates in order, gated or not) rather than of the gated decisions before it;
    ``winner_reference=True`` makes a kept candidate's own gate rollouts the new incumbent's
    (skill-trainer's reference set) instead of fresh ones; ``carry="screen"`` is ``--carry
    screen`` (a candidate that beats its parent on the train screen, before an epoch's last step,
    is not gated: the next step's candidate adds its effects to it; a step with nothing new, or
    whose own candidate the screen drops, gates the carried one)."""

    name: str
    design: Design
    policy: str = "spend"  # "lord", or "equal" (alpha / planned for each planned decision)
    reuse: bool = True  # the incumbent's gate rollouts shared across decisions (and the baseline)
    prefetch: bool = True  # round k also runs the incumbent's round k+1 when the pool lacks it
    screen: bool = False  # candidate on the step's train batch first; discard when worse
    alpha: float = 0.05
    extra: dict[str, Any] = field(default_factory=dict)


def _levels(policy: str, alpha: float, planned: int, histories: list[list[bool]]) -> np.ndarray:
    if policy == "equal":  # not a RunAlpha policy: the same share for every planned decision
        return np.array([alpha / planned if len(h) < planned else 0.0 for h in histories])
    from skilltune.gate.run import RunAlpha

    run = RunAlpha(alpha, policy, planned)  # type: ignore[arg-type]
    return np.array([run.level(h) for h in histories])


def training_runs(
    gating: Gating,
    shape: RunShape,
    proposals: Proposals,
    runs: int,
    seed: int,
    decider: Decider | None = None,
    per_run: bool = False,
) -> dict[str, Any]:
    """``runs`` simulated training runs: rollouts by stage, keeps, false keeps, the true val gain
    (``per_run``: also each run's arrays under "per_run": the population gain, training rollouts,
    keeps of edits that do not help the population)."""
    rng = np.random.default_rng(seed)
    n, held, looks = shape.val, shape.population, gating.design.max_looks
    rates = rng.uniform(shape.base_lo, shape.base_hi, (runs, n))
    pop = rng.uniform(shape.base_lo, shape.base_hi, (runs, held))
    start, pop_start = rates.mean(axis=1), pop.mean(axis=1)
    cost = {k: np.zeros(runs) for k in ("baseline", "train", "screen", "gate", "epoch", "final")}
    cost["baseline"] += n
    pool = outcomes(rng, rates, looks)  # the seed's val rollouts: round 0 is the baseline
    depth = np.ones(runs, dtype=int) if gating.reuse else np.zeros(runs, dtype=int)
    history: list[list[bool]] = [[] for _ in range(runs)]  # gated decisions only, as in a run
    kept, false_kept, useless = np.zeros(runs), np.zeros(runs), np.zeros(runs)
    kept_epoch = np.zeros(runs, dtype=bool)
    by_step = gating.extra.get("levels_by") == "step"
    carry = gating.extra.get("carry") == "screen"
    pending = np.zeros(runs, dtype=bool)  # a carried candidate not gated yet (--carry screen)
    pend_val, pend_pop, pend_helps = rates.copy(), pop.copy(), np.zeros(runs, dtype=bool)
    if decider is None:

        def decider(
            alphas: np.ndarray, cand: np.ndarray, inc: np.ndarray, seeds: np.ndarray, rng: Generator
        ) -> tuple[np.ndarray, np.ndarray]:
            return decide(gating.design, alphas, (cand - inc).astype(np.int8), seeds, rng, inc=inc)

    units = []
    for step in range(1, shape.steps + 1):
        units.append("step")
        if step % shape.epoch_steps == 0:
            units.append("epoch")
    for number, unit in enumerate(units):
        base, pop_base = rates, pop  # what the unit builds on
        if unit == "step":
            cost["train"] += shape.batch
            present = rng.random(runs) >= proposals.empty
            effect, pop_effect, helps = proposals.draw(rng, runs, n, held)
            if carry:
                base = np.where(pending[:, None], pend_val, rates)
                pop_base = np.where(pending[:, None], pend_pop, pop)
        else:
            cost["epoch"] += np.where(kept_epoch, 2 * shape.slow_sample, 0)
            present = kept_epoch.copy()  # a slow update restates what was kept: no effect on average
            kept_epoch[:] = False
            neutral = Proposals(helpful=0.0, harmful=0.0, spread=proposals.spread)
            effect, pop_effect, helps = neutral.draw(rng, runs, n, held)
        cand = np.clip(base + effect, 0.0, 1.0)
        pop_cand = np.clip(pop_base + pop_effect, 0.0, 1.0)
        if carry and unit == "step":  # a candidate on top of a carried one: does the sum help?
            helps = np.where(pending, (pop_cand - pop).mean(axis=1) > 1e-9, helps)
        if gating.screen and unit == "step":
            cost["screen"] += np.where(present, shape.batch, 0)
            tasks = rng.integers(0, held, (runs, shape.batch))  # train tasks: the population's, not val's
            rows = np.arange(runs)[:, None]
            before = (rng.random((runs, shape.batch)) < pop_base[rows, tasks]).mean(axis=1)
            after = (rng.random((runs, shape.batch)) < pop_cand[rows, tasks]).mean(axis=1)
            if carry:
                last = units[number + 1 :].count("step") == 0 or (
                    number + 1 < len(units) and units[number + 1] == "epoch"
                )
                defer = present & (after > before) & (not last)
                alone = pending & (~present | (after < before))  # the carried candidate gated as it is
                cand = np.where(alone[:, None], pend_val, cand)
                pop_cand = np.where(alone[:, None], pend_pop, pop_cand)
                helps = np.where(alone, pend_helps, helps)
                pend_val = np.where(defer[:, None], cand, pend_val)
                pend_pop = np.where(defer[:, None], pop_cand, pend_pop)
                pend_helps = np.where(defer, helps, pend_helps)
                present = (present & ~(after < before) & ~defer) | alone
                pending = (pending | defer) & ~present
            else:
                present &= ~(after < before)
        truth = (cand - rates).mean(axis=1)
        idx = np.nonzero(present)[0]
        accepted = np.zeros(runs, dtype=bool)
        live = idx[:0]
        if idx.size:
            alphas = _levels(gating.policy, gating.alpha, shape.planned, [history[i] for i in idx])
            live = idx[alphas > 0]
            alphas = alphas[alphas > 0]
            cand_out = outcomes(rng, cand[live], looks)
            inc_out = pool[live] if gating.reuse else outcomes(rng, rates[live], looks)
            seeds = rng.integers(0, 2**31, 8)[rng.integers(0, 8, live.size)]  # 8 references a decision
            acc, used = decider(alphas, cand_out, inc_out, seeds, rng)
            accepted[live] = acc
            if gating.reuse:
                before = depth[live]
                after = np.maximum(before, used)
                if gating.prefetch:  # the last round run also ran the next one's incumbent side
                    ahead = np.maximum(before, np.minimum(used + 1, looks))
                    after = np.where((used >= before) & (used > 0), ahead, before)
                cost["gate"][live] += n * used + n * (after - before)
                depth[live] = after
            else:
                cost["gate"][live] += 2 * n * used
            for i in live:
                history[i].append(bool(accepted[i]))
        if by_step:  # every planned unit takes its step's share, gated or not
            for i in np.setdiff1d(np.arange(runs), live):
                history[i].append(False)
        kept += accepted
        false_kept += accepted & (truth <= 0)
        useless += accepted & ~helps
        kept_epoch |= accepted & (unit == "step")
        rates = np.where(accepted[:, None], cand, rates)
        pop = np.where(accepted[:, None], pop_cand, pop)
        if accepted.any():
            if gating.extra.get("winner_reference"):  # the candidate's gate rollouts are the reference
                fresh = np.zeros((runs, looks, n), dtype=pool.dtype)
                fresh[live] = cand_out
                pool[accepted] = fresh[accepted]
                depth[accepted] = looks
            else:
                pool[accepted] = outcomes(rng, rates[accepted], looks)
                depth[accepted] = 0
    cost["final"] += np.where(kept > 0, 2 * shape.test * shape.test_reps, 0)
    total: np.ndarray = np.sum(list(cost.values()), axis=0)
    training = total - cost["final"]
    out: dict[str, Any] = {
        "runs": runs,
        "rollouts": {k: float(v.mean()) for k, v in cost.items()},
        "rollouts_per_run": float(total.mean()),
        "training_rollouts_per_run": float(training.mean()),
        "gate_rollouts_per_run": float(cost["gate"].mean()),
        "gate_rollouts_sd": float(cost["gate"].std(ddof=1)),
        "gate_share": float(cost["gate"].sum() / training.sum()),
        "kept_per_run": float(kept.mean()),
        "kept_sd": float(kept.std(ddof=1)),
        "false_kept_per_run": float(false_kept.mean()),
        "runs_with_false_keep": float((false_kept > 0).mean()),
        "true_val_gain": float((rates.mean(axis=1) - start).mean()),
        "true_val_gain_sd": float((rates.mean(axis=1) - start).std(ddof=1)),
    }
    if per_run:
        out["per_run"] = {
            "gain": pop.mean(axis=1) - pop_start,
            "training": training,
            "useless_keeps": useless,
            "kept": kept,
        }
    return out
