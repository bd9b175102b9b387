"""Edits that help most tasks a little and break a few badly: verdicts.py's asymmetric nulls and the
harm veto's cost (issue 20).

A per-task effect law: each val task of a decision's edit is harmed by ``harm`` with chance
``share`` and helped by ``gain`` otherwise, drawn afresh for every decision. Scores are 0/1 (a
task's rate U(0.3, 0.8), the candidate's clip(rate + effect, 0, 1)) or graded (a skill's
expected score on a task, clipped the same way; a rollout scores clip(expected + N(0, 0.05), 0, 1)
on a 0.01 grid, a judge's 0-100). Clipping shrinks large harms (a task at 0.4 loses 0.4, not
0.6), so the grid's ``gain`` is solved for a mean effect of exactly zero over the task population
after clipping (``Law.null``): without it most cells would be edits that help on average. Runs
of 12 decisions on the same val tasks share the incumbent's rollouts as a run does
(verdicts.run_study), at the spend policy's levels; a decision whose level is below 2^-n is
rejected without rollouts (Gate.cannot_accept).

A run's incumbent changes only at a keep, so until its first keep a run is the same without the
veto, with the veto before issue 33 and with today's: all are decided on one path (a veto only
turns crossings into rejections, and today's runs more rounds only after a crossing), and the share
of runs that keep any edit is exact for each. Later keeps are not simulated.
"""

from __future__ import annotations

import math
import sys
import zlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from benchmarks.gatesim import NEW, NEW_VETO, OLD_VETO, Design, crossings, settle, wilson
from skilltune.gate.run import RunAlpha

GRID = 100  # graded scores lie on a 0.01 grid: gatesim's task sums are then the gate's own lattice
NOISE = 0.05  # a graded rollout's replicate noise (sd)
BASE = (0.3, 0.8)
SHARES = (0.05, 0.10, 0.20, 0.25, 0.35)
TASKS = (6, 20, 60)
HARMS = (0.2, 0.5, 0.6, 1.0)


@dataclass(frozen=True)
class Law:
    share: float  # of tasks harmed
    harm: float
    gain: float  # to the others

    @classmethod
    def null(cls, share: float, harm: float, graded: bool) -> Law:
        """The gain that makes the mean effect over the task population zero after clipping."""
        gain = optimize.brentq(lambda g: mean_effect(cls(share, harm, g), graded), 0.0, 1.0)
        return cls(share, harm, math.floor(float(gain) * 1e4) / 1e4)  # rounded down: mean <= 0

    @property
    def mean(self) -> float:
        """The mean effect over the task population, before clipping."""
        return (1 - self.share) * self.gain - self.share * self.harm

    @property
    def label(self) -> str:
        if self.share == 0:
            return "exchangeable (no effect)"
        return f"{1 - self.share:.0%} +{self.gain:g} / {self.share:.0%} -{self.harm:g}"

    def effects(self, rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
        return np.where(rng.random((rows, n)) < self.share, -self.harm, self.gain)


_B = BASE[0] + (np.arange(4000) + 0.5) / 4000 * (BASE[1] - BASE[0])  # U(0.3, 0.8) by midpoints


def _score(expected: np.ndarray, graded: bool, clip: bool = True) -> np.ndarray:
    """A rollout's mean score at a skill's expected score: E clip(expected + N(0, NOISE), 0, 1) graded."""
    if not graded or not clip:
        return expected

    def f(x: np.ndarray) -> np.ndarray:  # an integral of the normal cdf
        out: np.ndarray = x * sps.norm.cdf(x) + sps.norm.pdf(x)
        return out

    out: np.ndarray = NOISE * (f(expected / NOISE) - f((expected - 1) / NOISE))
    return out


def mean_effect(law: Law, graded: bool, clip: bool = True) -> float:
    """The law's mean effect on a rollout's score over the task population (rates U(0.3, 0.8))."""

    def edge(x: np.ndarray) -> np.ndarray:
        return np.clip(x, 0.0, 1.0) if clip or not graded else x

    before = _score(_B, graded, clip)
    up = _score(edge(_B + law.gain), graded, clip) - before
    down = _score(edge(_B - law.harm), graded, clip) - before
    return float(((1 - law.share) * up + law.share * down).mean())


ISSUE = (Law(0.20, 0.60, 0.15), Law(0.25, 0.50, 0.15), Law(0.35, 0.28, 0.15))  # issue 20's table
SYMMETRIC = (Law(0.0, 0.0, 0.0), Law(0.5, 0.2, 0.2))  # exchangeable arms; +-0.2 with zero mean


def laws(graded: bool) -> list[Law]:
    """The zero-mean grid (harmed share x harm), then the symmetric nulls."""
    return [Law.null(h, harm, graded) for h in SHARES for harm in HARMS] + list(SYMMETRIC)


def rollouts(
    rng: np.random.Generator, expected: np.ndarray, looks: int, graded: bool, clip: bool = True
) -> np.ndarray:
    """(rows, looks, tasks) outcomes: 0/1 at rate ``expected``, or graded scores in units of 1/GRID
    (``clip=False``: graded scores may leave [0, 1], as issue 20's did)."""
    shape = (expected.shape[0], looks, expected.shape[1])
    if not graded:
        return (rng.random(shape) < expected[:, None, :]).astype(np.int16)
    noisy = expected[:, None, :] + rng.normal(0.0, NOISE, shape)
    return np.rint(GRID * (np.clip(noisy, 0.0, 1.0) if clip else noisy)).astype(np.int16)


# no veto; issue 20's (one look); issue 33's; issue 33's waiting for every suspect (measured, not adopted)
VETOES = {"off": NEW, "before": OLD_VETO, "on": NEW_VETO, "all": replace(NEW_VETO, harm_wait="all")}


def law_runs(
    law: Law, graded: bool, n: int, runs: int, seed: int, clip: bool = True, decisions: int = 12
) -> dict[str, Any]:
    """Runs keeping any edit without the veto, with the veto before issue 33 and with today's; the
    decisions the test crossed and those each veto turned into rejections, and the rollouts a
    decision used (until a run's first keep under each)."""
    rng = np.random.default_rng(seed)
    looks, grid = NEW.max_looks, GRID if graded else 1
    base = rng.uniform(*BASE, (runs, n))
    pool = rollouts(rng, base, looks, graded, clip)  # the incumbent's, shared until a keep
    kept = {name: np.zeros(runs, dtype=bool) for name in VETOES}
    vetoed = dict.fromkeys(VETOES, 0)
    used = dict.fromkeys(VETOES, 0.0)
    crossed_total = decided = 0
    for level in RunAlpha(0.05, "spend", decisions).planned_levels():
        vetoing = [hits for name, hits in kept.items() if name != "off"]  # a keep with a veto is one without
        live = np.nonzero(~np.logical_and.reduce(vetoing))[0]
        if 2.0**-n > level or live.size == 0:  # Gate.cannot_accept: no rollouts, no keep
            continue
        cand = base[live] + law.effects(rng, live.size, n)
        cand = np.clip(cand, 0.0, 1.0) if clip or not graded else cand
        out = rollouts(rng, cand, looks, graded, clip).astype(np.int64)
        inc = pool[live].astype(np.int64)
        seeds = rng.integers(0, 2**31, 8)[rng.integers(0, 8, live.size)]
        alphas = np.full(live.size, level)
        crossed, stops = crossings(NEW, alphas, np.cumsum(out - inc, axis=1), grid, seeds, rng)
        got = {name: settle(design, crossed, stops, inc, out, grid) for name, design in VETOES.items()}
        crossed_total += int((crossed >= 0).sum())
        decided += live.size
        for name, (acc, rounds) in got.items():
            vetoed[name] += int(((crossed >= 0) & ~acc).sum())
            used[name] += float(rounds.sum())
            kept[name][live] |= acc
    row: dict[str, Any] = {"runs": runs, "crossed": crossed_total, "vetoed": vetoed["on"]}
    row["vetoed_before"] = vetoed["before"]
    for name, hits in kept.items():
        row[f"keep_{name}"] = float(hits.mean())
        row[f"keep_{name}_ci95"] = list(wilson(int(hits.sum()), runs))
        row[f"rollouts_{name}"] = 2 * n * used[name] / max(decided, 1)  # per decision, both arms
    return row


def veto_power(
    n: int, effect: float, alpha: float, decisions: int, seed: int, design: Design = NEW
) -> dict[str, dict[str, Any]]:
    """A true effect of ``effect`` on every task (0/1, rates U(0.35, 0.65)), decided without the
    veto, with the veto before issue 33 and with today's on the same data: power and rollouts per
    decision (both arms)."""
    rng = np.random.default_rng(seed)
    looks = design.max_looks
    base = rng.uniform(0.35, 0.65, (decisions, n))
    cand = np.clip(base + effect, 0.0, 1.0)
    out = rollouts(rng, cand, looks, False).astype(np.int64)
    inc = rollouts(rng, base, looks, False).astype(np.int64)
    return decided(design, np.full(decisions, alpha), inc, out, rng)


def decided(
    design: Design, alphas: np.ndarray, inc: np.ndarray, out: np.ndarray, rng: np.random.Generator
) -> dict[str, dict[str, Any]]:
    """0/1 decisions without the veto, with the veto before issue 33 and with today's."""
    decisions, _, n = inc.shape
    seeds = rng.integers(0, 2**31, 16)[rng.integers(0, 16, decisions)]
    crossed, stops = crossings(design, alphas, np.cumsum(out - inc, axis=1), 1, seeds, rng)
    result = {}
    for name, veto in VETOES.items():
        harm = ("harm_tolerance", "harm_confidence", "harm_floor", "harm_rule", "harm_wait")
        chosen = replace(design, **{key: getattr(veto, key) for key in harm})
        acc, used = settle(chosen, crossed, stops, inc, out, 1)
        result[name] = {
            "decisions": decisions, "alpha": float(alphas[0]), "power": float(acc.mean()),
            "power_ci95": list(wilson(int(acc.sum()), decisions)),
            "rollouts_per_decision": 2 * n * float(used.mean()), "reps_per_task_per_arm": float(used.mean()),
        }  # fmt: skip
    return result


def few_tasks(decisions: int, seed: int) -> dict[str, Any]:
    """A decision on 1 or 2 val tasks at a 12-decision run's first level: what the gate does, and
    what it cost when it ran anyway (the arms exchangeable, 0/1 rates U(0.3, 0.8))."""
    from benchmarks.gatesim import decide
    from skilltune.gate import make_gate

    level = RunAlpha(0.05, "spend", 12).level([])
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"level": level}
    for n in (1, 2):
        base = rng.uniform(*BASE, (decisions, n))
        diffs = rollouts(rng, base, NEW.max_looks, False) - rollouts(rng, base, NEW.max_looks, False)
        acc, used = decide(NEW, np.full(decisions, level), diffs, None, rng)
        out[str(n)] = {
            "gate": make_gate("sequential", "mixed", 1, alpha=level).cannot_accept(n),
            "accepts_if_run": int(acc.sum()), "rollouts_if_run": 2 * n * float(used.mean()),
        }  # fmt: skip
    return out


def part(preset: dict[str, Any], graded: bool) -> dict[str, Any]:
    """The null grid of ``laws`` at 6/20/60 tasks (the full preset), and issue 20's cells as it
    simulated them (graded scores unclipped, the gain not adjusted for clipping) to check the
    simulation against its table."""
    runs = preset["asym_runs"]
    grid = [(law, n, True) for law in laws(graded) for n in TASKS] if preset["asym_grid"] else []
    issue = [(law, n, not graded) for n in ((20, 60, 6) if graded else (20,)) for law in ISSUE]
    rows = []
    for law, n, clip in grid + issue[: None if preset["asym_grid"] else len(ISSUE)]:
        seed = zlib.crc32(repr(("asymmetric", graded, law, n, clip)).encode())
        row = law_runs(law, graded, n, runs, seed, clip)
        rows.append({
            "scores": "graded" if graded else "0/1", "law": law.label, "share": law.share, "harm": law.harm,
            "gain": law.gain, "nominal_mean": law.mean, "mean": mean_effect(law, graded, clip),
            "clipped": clip or not graded, "issue": law in ISSUE, "tasks": n, **row,
        })  # fmt: skip
        print(
            f"  {law.label} {n}: {row['keep_off']:.3f} -> {row['keep_on']:.3f}", file=sys.stderr, flush=True
        )
    return {f"asymmetric_{'graded' if graded else 'binary'}": rows}


def cell(row: dict[str, Any], key: str) -> str:
    lo, hi = row[f"{key}_ci95"]
    return f"{100 * row[key]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def report(result: dict[str, Any]) -> list[str]:
    """(b') tables: runs keeping any edit, today's gate -> with the harm veto (% of runs, Wilson 95%)."""
    lines: list[str] = []
    for kind in ("binary", "graded"):
        rows = result.get(f"asymmetric_{kind}")
        if not rows:
            continue
        name = "0/1 scores" if kind == "binary" else "graded scores (0.01 grid, replicate sd 0.05)"
        lines += [
            f"(b') {name}: 12-decision runs keeping any edit, % (95%): without the veto | with the veto "
            "before issue 33 | with it"
        ]
        lines += [
            "| law (helped / harmed) | mean | clipped | tasks | runs | without veto | veto before issue 33 | "
            "with veto | vetoed |"
        ]
        lines += ["|---|---|---|---|---|---|---|---|---|"]
        for row in rows:
            before = cell(row, "keep_before") if "keep_before" in row else "-"
            lines.append(
                f"| {row['law']}{' (issue 20)' if row['issue'] else ''} | {row['mean']:+.4f} | "
                f"{'yes' if row['clipped'] else 'no'} | {row['tasks']} | {row['runs']} | {cell(row, 'keep_off')} | "
                f"{before} | {cell(row, 'keep_on')} | {row['vetoed']} of {row['crossed']} |"
            )
        lines.append("")
    few = result.get("few_tasks")
    if few:
        for n in ("1", "2"):
            got = few[n]
            lines.append(
                f"- {n} val task(s) at level {few['level']:.4f}: {got['gate'] or 'the gate runs the decision'} "
                f"(run anyway: {got['rollouts_if_run']:.1f} rollouts a decision, {got['accepts_if_run']} accepts)"
            )
    return lines
