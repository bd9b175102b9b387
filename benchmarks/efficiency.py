"""Held-out gain per 1,000 training rollouts, per gate design (verdicts.py part i; issue 20 item 2).

Every design runs the same simulated 10-step runs (benchmarks/runsim.py: 20 val tasks, 12 planned
decisions, the same seeds: the same seed rates and, until the designs' decisions differ, the
same proposals). The figure: the true gain of the skill a run ends with on a held-out population
of 200 tasks (no rollouts: their rates are known), summed over runs, per 1,000 training rollouts
(baseline, train batches, screen, gate, epoch updates; not the final held-out comparison), with a
95% percentile bootstrap interval over runs (runs resampled, the ratio of sums recomputed). Beside
it, with Wilson 95% upper limits: (a) runs that keep an edit that does not help the task
population (its mean effect over the population is zero or less) and (b) runs that end with a
skill worse than S0 on the population. A design is eligible when both upper limits are at most 5%.

Designs: today's default as skilltune runs it (the sequential sign-flip test with the harm veto,
spend, shared incumbent rollouts, nothing run ahead, the screen on train, no rollouts for a decision
that cannot accept, ``stop_on_repeat``), the same without those two stops (what gatesim modelled
before), the former default (the incumbent's next round run ahead), the gate before issue 12, skill-trainer's strict gate at K=3 replicates, a one-pass gate
(the fixed-sample task-level sign-flip test at the level) and variants of the default (``--carry
screen`` among them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.random import Generator

from benchmarks.asymmetric import Law
from benchmarks.gatesim import NEW_VETO, TODAY, Design, crossings, settle, wilson
from benchmarks.runsim import Decider, Gating, Proposals, RunShape, training_runs
from skilltune.stats.signflip import tail

ONE_PASS = Design(max_looks=1, harm_tolerance=None)  # verdicts._fixed_sample's test at r = 1
STRICT_K = 3


def repeat_limit(cand: np.ndarray, inc: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """The look (0-based) after which the gate's ``stop_on_repeat`` rejects, else the last look.

    stats/rounds.py on 0/1 outcomes (rows, looks, tasks): from the second round on, the gate stops
    when the tasks not tied in every round so far can give at best p = 2^-open above the level, or
    when every task's pair of outcomes repeated exactly and the round's p is above the level."""
    rows, looks, n = cand.shape
    if looks < 2 or rows == 0:
        return np.full(rows, looks - 1)
    same = np.logical_and.accumulate((cand == cand[:, :1]) & (inc == inc[:, :1]), axis=1)
    tied = same & (cand[:, :1] == inc[:, :1])
    stop: np.ndarray = np.asarray(2.0 ** -(n - tied.sum(axis=2)).astype(float) > alphas[:, None])
    everyone: np.ndarray = np.asarray(same.all(axis=2))
    maybe = np.nonzero(everyone[:, 1])[0]  # repeats at a later look need a repeat at the second
    if maybe.size:
        d = (cand[maybe, 0] - inc[maybe, 0]).astype(np.int64)
        p = tail(d, d.sum(axis=1))  # every round the same differences: the same p at every look
        stop[maybe] |= everyone[maybe] & (p > alphas[maybe])[:, None]
    stop[:, 0] = False
    out: np.ndarray = np.where(stop.any(axis=1), stop.argmax(axis=1), looks - 1)
    return out


def real_gate(design: Design, stops: bool = True) -> Decider:
    """The sequential gate as skilltune runs it: a decision whose level is below 2^-n runs no
    rollouts (Gate.cannot_accept); with ``stops`` also stop_on_repeat (``repeat_limit``)."""

    def decider(
        alphas: np.ndarray, cand: np.ndarray, inc: np.ndarray, seeds: np.ndarray, rng: Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        rows, _, n = cand.shape
        accepted, used = np.zeros(rows, dtype=bool), np.zeros(rows, dtype=int)
        ok = np.nonzero(alphas >= 2.0**-n)[0]
        if ok.size == 0:
            return accepted, used
        units = (cand[ok] - inc[ok]).astype(np.int64)
        limit = repeat_limit(cand[ok], inc[ok], alphas[ok]) if stops else None
        crossed, stop = crossings(design, alphas[ok], np.cumsum(units, axis=1), 1, seeds[ok], rng, limit)
        accepted[ok], used[ok] = settle(design, crossed, stop, inc[ok], cand[ok], 1)
        return accepted, used

    return decider


def strict(
    alphas: np.ndarray, cand: np.ndarray, inc: np.ndarray, seeds: np.ndarray, rng: Generator
) -> tuple[np.ndarray, np.ndarray]:
    """skill-trainer's strict gate: keep when the candidate's val mean over K replicates per task
    is strictly above the incumbent's (no level: ``alphas`` unused)."""
    k = STRICT_K
    better = cand[:, :k].astype(np.int64).sum(axis=(1, 2)) > inc[:, :k].astype(np.int64).sum(axis=(1, 2))
    return better, np.full(cand.shape[0], k)


@dataclass(frozen=True)
class Mix(Proposals):
    """Harder proposals: each candidate's per-task effects follow an asymmetric law
    (benchmarks/asymmetric.py: a share of the tasks harmed, the others helped), drawn task by task
    on the val split and in exact proportions on the held-out population."""

    laws: tuple[tuple[float, Law], ...] = ()

    def draw(self, rng: Generator, runs: int, n: int, held: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        chances = np.cumsum([p for p, _ in self.laws])
        which = np.minimum(np.searchsorted(chances, rng.random(runs), side="right"), len(self.laws) - 1)
        share, harm, gain = (
            np.array([getattr(law, k) for _, law in self.laws])[which] for k in ("share", "harm", "gain")
        )
        val_hit = rng.random((runs, n)) < share[:, None]
        ranks = rng.permuted(np.tile(np.arange(held), (runs, 1)), axis=1)
        held_hit = ranks < np.rint(share * held)[:, None]
        helps = np.array([law.mean > 0 for _, law in self.laws])[which]
        return (
            np.where(val_hit, -harm[:, None], gain[:, None]),
            np.where(held_hit, -harm[:, None], gain[:, None]),
            helps,
        )


HARD = Mix(
    laws=(
        (0.25, Law(0.20, 0.20, 0.25)),  # helps: 80% of tasks +0.25, 20% -0.2 (mean +0.16)
        (0.35, Law.null(0.20, 0.60, graded=False)),  # 80% +g, 20% -0.6, mean zero after clipping
        (0.10, Law(0.50, 0.20, 0.20)),  # symmetric +-0.2
        (0.30, Law(0.50, 0.25, 0.05)),  # harms: half -0.25, half +0.05 (mean -0.10)
    )
)
MODELS: dict[str, Proposals] = {"base": Proposals(), "hard": HARD}


DEFAULT = "default (sequential + veto, spend, shared, screen, stops)"
FORMER = "former default (the incumbent's next round run ahead)"
CARRY = "default, --carry screen"


def designs() -> dict[str, tuple[Gating, Decider | None]]:
    """The designs compared, each with the decider that runs it (None: gatesim's decide). The
    default runs nothing ahead (the gate no longer does); the variants change one thing of it."""
    default = NEW_VETO
    variant = {
        "max_reps 4": replace(default, max_looks=4),
        "rho 1": replace(default, rho=1.0),
        "max_reps 4 + rho 1": replace(default, max_looks=4, rho=1.0),
    }
    out: dict[str, tuple[Gating, Decider | None]] = {
        DEFAULT: (Gating("default", default, prefetch=False, screen=True), real_gate(default)),
        "default without the early stops (gatesim before)": (
            Gating("d0", default, prefetch=False, screen=True),
            None,
        ),
        FORMER: (Gating("former", default, screen=True), real_gate(default)),
        "before issue 12 (replicate-t, lord, no reuse)": (Gating("today", TODAY, "lord", reuse=False), None),
        f"skill-trainer strict K={STRICT_K}": (
            Gating(
                "strict",
                Design(max_looks=STRICT_K),
                prefetch=False,
                screen=True,
                extra={"winner_reference": True},
            ),
            strict,
        ),
        "one pass (fixed-sample sign-flip, 1 replicate)": (
            Gating("one", ONE_PASS, screen=True),
            real_gate(ONE_PASS),
        ),
    }
    for name, design in variant.items():
        out[f"default, {name}"] = (Gating(name, design, prefetch=False, screen=True), real_gate(design))
    out[CARRY] = (
        Gating("carry", default, prefetch=False, screen=True, extra={"carry": "screen"}),
        real_gate(default),
    )
    out["default, equal split"] = (
        Gating("eq", default, "equal", prefetch=False, screen=True),
        real_gate(default),
    )
    out["default, levels by planned step"] = (
        Gating("step", default, prefetch=False, screen=True, extra={"levels_by": "step"}),
        real_gate(default),
    )
    return out


def figure(gain: np.ndarray, training: np.ndarray, rng: Generator, boots: int = 2000) -> dict[str, Any]:
    """Held-out gain per 1,000 training rollouts (ratio of sums) and its percentile bootstrap 95%."""
    runs = gain.size
    value = 1000.0 * gain.sum() / training.sum()
    picks = rng.integers(0, runs, (boots, runs))
    draws = 1000.0 * gain[picks].sum(axis=1) / training[picks].sum(axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {"value": float(value), "ci95": [float(lo), float(hi)]}


def summarise(per_run: dict[str, np.ndarray], rng: Generator) -> dict[str, Any]:
    gain, training = per_run["gain"], per_run["training"]
    runs = gain.size
    useless = int((per_run["useless_keeps"] > 0).sum())
    worse = int((gain < -1e-9).sum())
    a_hi, b_hi = wilson(useless, runs)[1], wilson(worse, runs)[1]
    return {
        "runs": runs,
        "gain_per_1000": figure(gain, training, rng),
        "gain_per_run": float(gain.mean()),
        "gain_per_run_sd": float(gain.std(ddof=1)),
        "training_rollouts_per_run": float(training.mean()),
        "kept_per_run": float(per_run["kept"].mean()),
        "useless_keep": useless / runs,
        "useless_keep_upper": a_hi,
        "worse_than_seed": worse / runs,
        "worse_than_seed_upper": b_hi,
        "eligible": bool(a_hi <= 0.05 and b_hi <= 0.05),
    }


def versus(
    a: dict[str, np.ndarray], b: dict[str, np.ndarray], rng: Generator, boots: int = 2000
) -> list[float]:
    """The ratio of design a's figure to b's with a paired bootstrap 95% interval (the same run indices)."""
    picks = rng.integers(0, a["gain"].size, (boots, a["gain"].size))

    def fig(x: dict[str, np.ndarray]) -> np.ndarray:
        out: np.ndarray = x["gain"][picks].sum(axis=1) / x["training"][picks].sum(axis=1)
        return out

    ratio = (a["gain"].sum() / a["training"].sum()) / (b["gain"].sum() / b["training"].sum())
    lo, hi = np.percentile(fig(a) / fig(b), [2.5, 97.5])
    return [float(ratio), float(lo), float(hi)]


def study(runs: int, seed: int) -> dict[str, Any]:
    """Part i: every design on every proposal model, ``runs`` runs each (the same seeds)."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"runs": runs, "models": {}}
    for model, proposals in MODELS.items():
        rows: dict[str, Any] = {}
        arrays: dict[str, dict[str, np.ndarray]] = {}
        for name, (gating, decider) in designs().items():
            got = training_runs(gating, RunShape(), proposals, runs, seed, decider, per_run=True)
            arrays[name] = got.pop("per_run")
            rows[name] = summarise(arrays[name], rng)
            print(
                f"  (i) {model} {name}: {rows[name]['gain_per_1000']['value']:.3f}",
                file=sys.stderr,
                flush=True,
            )
        default = next(iter(rows))
        eligible = [k for k, r in rows.items() if r["eligible"]]
        winner = max(eligible, key=lambda k: rows[k]["gain_per_1000"]["value"]) if eligible else None
        for name, row in rows.items():
            row["vs_default"] = versus(arrays[name], arrays[default], rng)
        out["models"][model] = {"designs": rows, "winner": winner}
    return out


def _fmt_ci(x: dict[str, Any]) -> str:
    lo, hi = x["ci95"]
    return f"{x['value']:.3f} [{lo:.3f}, {hi:.3f}]"


def _verdict(model: str, got: dict[str, Any]) -> str:
    """The winner (the eligible design with the highest figure) and whether it beats the default:
    the paired bootstrap interval of its ratio to the default's figure above 1."""
    winner = got["winner"]
    if winner is None:
        return f"winner ({model}): none eligible"
    ratio, lo, hi = got["designs"][winner]["vs_default"]
    default = next(iter(got["designs"]))
    if winner == default:
        return f"winner ({model}): the default"
    if lo > 1:
        beats = "above the default's"
    elif hi < 1:
        beats = "below the default's"
    else:
        beats = "not distinguishable from the default's (the interval holds 1)"
    if not got["designs"][default]["eligible"]:
        beats += "; the default is not eligible here (an upper limit above 5%)"
    return f"winner ({model}): {winner}, {ratio:.2f} [{lo:.2f}, {hi:.2f}] times the default's figure: {beats}"


def report(result: dict[str, Any]) -> list[str]:
    eff = result.get("efficiency")
    if not eff:
        return []
    lines = [
        "(i) held-out gain per 1,000 training rollouts (95% bootstrap over runs); (a) runs keeping an edit that",
        "    does not help the population, (b) runs ending worse than S0 on it: % [Wilson 95% upper]",
    ]
    for model, got in eff["models"].items():
        lines += [f"proposal model: {model} ({eff['runs']} runs a design)"]
        lines += ["| design | gain/1000 training rollouts [95%] | vs default [95%] | training rollouts/run | "
                  "gain/run | kept/run | (a) % | (b) % | eligible |"]  # fmt: skip
        lines += ["|---|---|---|---|---|---|---|---|---|"]
        for name, r in got["designs"].items():
            ratio, lo, hi = r["vs_default"]
            lines.append(
                f"| {name} | {_fmt_ci(r['gain_per_1000'])} | {ratio:.2f} [{lo:.2f}, {hi:.2f}] | "
                f"{r['training_rollouts_per_run']:.0f} | {r['gain_per_run']:+.3f} | {r['kept_per_run']:.2f} | "
                f"{100 * r['useless_keep']:.1f} [{100 * r['useless_keep_upper']:.1f}] | "
                f"{100 * r['worse_than_seed']:.1f} [{100 * r['worse_than_seed_upper']:.1f}] | "
                f"{'yes' if r['eligible'] else 'no'} |"
            )
        lines.append(_verdict(model, got))
    return lines
