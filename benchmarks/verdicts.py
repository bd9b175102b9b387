"""Verdicts benchmark: how often the gate is fooled, what it finds, what it costs; today's design beside it.

"today" is the gate before issue 12 (a t test on pooled per-(task, replicate) differences, a
fresh incumbent batch every decision, LORD++); "new" is skilltune's gate (the task-level
sequential sign-flip test, the incumbent's rollouts shared while it stays, alpha spending).
Everything in (a)-(d) and (f) is simulated in memory by benchmarks/gatesim.py on 0/1 outcomes
through skilltune's own signflip/alpha code; (e) runs real training runs (mock agent, mock
proposer).

(a) per-decision level: decisions on null data (the arms exchangeable on each task, or
    per-task effects of +-0.2 with zero mean over the task population) at alpha 0.05 to 1e-4,
    6/20/60 tasks; the false-accept rate over alpha with a 95% interval (full preset: about
    400 expected false accepts per cell).
(b) run-wide: whole runs of 12 and 60 decisions on null data, the incumbent's rollouts shared
    across decisions as in a run; the share of runs that keep any edit (95% upper limit) and
    of runs with two or more false keeps.
(c) power: +5/+10/+20 points on 20 tasks at the first, median and last level of a 12-decision
    run, without and with the harm veto (the same decisions); power at +20 per level at 6/20/60
    tasks; rollouts per decision and their ratio to the fixed-sample task-level test (the
    gate's sign-flip test at one look on task means over r replicates) at the same level and power.
(d) training runs: rollouts per run by stage and the gate's share, keeps, false keeps and the
    true val gain, under a stated model of what proposals do; today beside the new design and
    its options (screen, futility, alpha policy), each saving reported.
(e) planted recovery: the mock-demo good skill with a rule removed, real training runs; the
    share of runs that win back 2/3 of the lost test score (Wilson 95% interval).
(f) adaptive replicate allocation (measured, not adopted): a task tied on both arms in each of
    its first r rounds is sampled no more; rollouts per decision and power beside the gate's.
(g), (h) asymmetric nulls (benchmarks/asymmetric.py, printed as (b')): edits that help most tasks
    a little and break a few badly, mean effect zero over the task population; 12-decision runs
    keeping any edit without and with the harm veto, 0/1 scores (g, and a decision on 1-2 val
    tasks) and graded scores (h), 6/20/60 tasks.
(i) the figure of issue 20 item 2 (benchmarks/efficiency.py): the true held-out gain of the skill a
    simulated run ends with per 1,000 training rollouts, per gate design on the same runs, with the
    runs keeping a useless edit and ending worse than S0; two proposal models.
(j) the harm veto of issue 33 (benchmarks/harmveto.py): its laws, the symmetric and strong nulls and
    a good edit beside flaky tasks, without the veto, with the veto before issue 33 and today's.

    python benchmarks/verdicts.py --quick     # make bench-verdicts: minutes
    python benchmarks/verdicts.py             # the full preset: see "seconds" in the JSON

Writes benchmarks/results/verdicts.json (or verdicts-quick.json) and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import asymmetric, efficiency, harmveto  # noqa: E402
from benchmarks.gatesim import NEW, TODAY, Design, decide, outcomes, wilson  # noqa: E402
from benchmarks.runsim import Gating, Proposals, RunShape, training_runs  # noqa: E402
from skilltune.gate.run import RunAlpha  # noqa: E402

SUITE = ROOT / "examples" / "mock-demo" / "suite"
GOOD = ROOT / "examples" / "mock-demo" / "good-skill"
SLOW = Design(futility_confidence=0.90, futility_from=2)  # the new test with a later futility stop
ABLATE = "Quantify customer impact"  # the planted defect: this rule line is removed
LEVELS = (0.05, 0.01, 1e-3, 1e-4)
TASKS = (6, 20, 60)
NULLS = {
    "balanced": (0.35, 0.65, 0.0),  # per-task rates U(lo, hi), effect +-het per task (zero mean)
    "skewed": (0.02, 0.25, 0.0),
    "mixed": (0.02, 0.98, 0.0),
    "heterogeneous": (0.35, 0.65, 0.2),
}
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"expected_false": 40, "max_decisions": 100_000, "runs": 1000, "power": 1000, "training": 300,
              "planted": 8, "planted_steps": 5, "levels": (0.05, 0.01), "asym_runs": 300, "asym_grid": False,
              "eff_runs": 300, "harm_runs": 300, "harm_decisions": 1000},
    "full": {"expected_false": 400, "max_decisions": 4_000_000, "runs": 10_000, "power": 6000,
             "training": 3000, "planted": 100, "planted_steps": 5, "levels": LEVELS, "asym_runs": 2000,
             "asym_grid": True, "eff_runs": 2000, "harm_runs": 2000, "harm_decisions": 4000},
}  # fmt: skip


def stable_seed(*parts: object) -> int:
    """A seed from ``parts`` that is the same in every process (str hashes are salted per process)."""
    return zlib.crc32(repr(parts).encode())


def _null_rates(rng: np.random.Generator, case: str, rows: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi, het = NULLS[case]
    base = rng.uniform(lo, hi, (rows, n))
    if case == "mixed":  # half the tasks near the floor, half near the ceiling
        base = np.where(
            rng.random((rows, n)) < 0.5,
            rng.uniform(0.02, 0.15, (rows, n)),
            rng.uniform(0.85, 0.98, (rows, n)),
        )
    cand = np.clip(base + het * rng.choice((-1.0, 1.0), (rows, n)), 0.0, 1.0) if het else base
    return base, cand


SEEDS = np.arange(8) + 1000  # Monte Carlo references a cell's decisions draw from (few: each is costly)


def _decisions(
    design: Design, alpha: float, base: np.ndarray, cand: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    diffs = (outcomes(rng, cand, design.max_looks) - outcomes(rng, base, design.max_looks)).astype(np.int8)
    seeds = SEEDS[rng.integers(0, SEEDS.size, base.shape[0])]  # the cell's decisions share 8 references
    return decide(design, np.full(base.shape[0], alpha), diffs, seeds, rng)


def level_study(design: Design, case: str, n: int, alpha: float, decisions: int, seed: int) -> dict[str, Any]:
    """(a): the false-accept rate of single decisions at ``alpha`` on null data."""
    rng = np.random.default_rng(seed)
    accepts, rounds, done = 0, 0, 0
    chunk = max(1000, min(100_000, 16_000_000 // (n * design.max_looks)))
    while done < decisions:
        rows = min(chunk, decisions - done)
        base, cand = _null_rates(rng, case, rows, n)
        acc, used = _decisions(design, alpha, base, cand, rng)
        accepts += int(acc.sum())
        rounds += int(used.sum())
        done += rows
    lo, hi = wilson(accepts, decisions)
    return {
        "decisions": decisions, "accepts": accepts, "rate": accepts / decisions,
        "ratio": accepts / decisions / alpha, "ratio_ci95": [lo / alpha, hi / alpha],
        "expected_false": decisions * alpha, "rounds_per_decision": rounds / decisions,
    }  # fmt: skip


def run_study(gating: Gating, case: str, n: int, decisions: int, runs: int, seed: int) -> dict[str, Any]:
    """(b): whole runs of ``decisions`` gated decisions on null data, the incumbent's rollouts shared
    while it stays (a false keep makes the candidate the incumbent: its own rollouts, fresh)."""
    rng = np.random.default_rng(seed)
    looks = gating.design.max_looks
    base, _ = _null_rates(rng, case, runs, n)
    pool = outcomes(rng, base, looks)
    history: list[list[bool]] = [[] for _ in range(runs)]
    keeps = np.zeros(runs, dtype=int)
    policy = RunAlpha(gating.alpha, gating.policy, decisions)  # type: ignore[arg-type]
    planned = policy.planned_levels()
    for j in range(decisions):
        # under spend a level does not depend on earlier outcomes
        alphas = (
            np.full(runs, planned[j])
            if gating.policy == "spend"
            else np.array([policy.level(h) for h in history])
        )
        live = np.nonzero(alphas > 0)[0]
        _, cand = _null_rates(rng, case, runs, n)
        cand = np.where(NULLS[case][2] > 0, cand, base)
        cand_out = outcomes(rng, cand[live], looks)
        inc_out = pool[live] if gating.reuse else outcomes(rng, base[live], looks)
        seeds = rng.integers(0, 2**31, 32)[rng.integers(0, 32, live.size)]
        acc, _ = decide(gating.design, alphas[live], (cand_out - inc_out).astype(np.int8), seeds, rng)
        accepted = np.zeros(runs, dtype=bool)
        accepted[live] = acc
        for i in range(runs):
            history[i].append(bool(accepted[i]))
        keeps += accepted
        if accepted.any():  # the kept candidate is the incumbent now (a null edit: same rates)
            base = np.where(accepted[:, None], cand, base)
            pool[accepted] = outcomes(rng, base[accepted], looks)
    any_keep = int((keeps > 0).sum())
    return {
        "runs": runs, "decisions": decisions, "runs_keeping": any_keep / runs,
        "runs_keeping_ci95": list(wilson(any_keep, runs)), "runs_with_2plus": float((keeps >= 2).mean()),
        "keeps_per_run": float(keeps.mean()),
    }  # fmt: skip


ONE_LOOK = Design(max_looks=1)  # the fixed-sample test: the gate's sign-flip test at one look


def _fixed_sample(
    n: int, effect: float, alpha: float, power: float, decisions: int, seed: int
) -> float | None:
    """Rollouts (both arms) of the fixed-sample task-level test at ``alpha`` with ``power``: the
    one-look sign-flip test on task means over r replicates per task per arm, at the smallest r
    reaching ``power`` (linear between integers; 2n when one replicate does). Rates U(0.35, 0.65)."""
    if power <= 0:
        return None
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.35, 0.65, (decisions, n))
    most = 16
    diffs = (outcomes(rng, np.clip(base + effect, 0, 1), most) - outcomes(rng, base, most)).astype(np.int64)
    sums = np.cumsum(diffs, axis=1)  # the same rollouts at every r: a smooth power curve
    seeds = SEEDS[rng.integers(0, SEEDS.size, decisions)]
    before = 0.0
    for r in range(1, most + 1):
        acc, _ = decide(ONE_LOOK, np.full(decisions, alpha), sums[:, r - 1 : r], seeds, rng, grid=r)
        now = float(acc.mean())
        if now >= power:
            return 2 * n * (r if r == 1 else r - 1 + (power - before) / (now - before))
        before = now
    return None


def power_study(
    design: Design, n: int, effect: float, alpha: float, decisions: int, seed: int
) -> dict[str, Any]:
    """(c): decisions at ``alpha`` with a true effect of ``effect`` on every task (rates U(0.35, 0.65)),
    for today's design (the new one: ``veto_power``, without and with the harm veto)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.35, 0.65, (decisions, n))
    acc, used = _decisions(design, alpha, base, np.clip(base + effect, 0, 1), rng)
    power = float(acc.mean())
    per_decision = 2 * n * float(used.mean())
    fixed = _fixed_sample(n, effect, alpha, power, decisions, seed + 1)
    return {
        "decisions": decisions, "alpha": alpha, "power": power, "power_ci95": list(wilson(int(acc.sum()), decisions)),
        "rollouts_per_decision": per_decision, "reps_per_task_per_arm": float(used.mean()),
        "fixed_sample_rollouts": fixed, "ratio_to_fixed": None if not fixed else per_decision / fixed,
    }  # fmt: skip


def _planted_run(args: tuple[str, int, int, str, dict[str, Any]]) -> dict[str, Any]:
    """One real training run from the ablated skill; held-out scores and rollouts spent."""
    gate, seed, steps, seed_skill, settings = args
    from skilltune.progress import PlainReporter
    from skilltune.training import train

    runs = Path(tempfile.mkdtemp(prefix="verdicts-"))
    try:
        os.environ["SKILLTUNE_WORKSPACES"] = str(runs / "ws")
        result = train(
            SUITE, seed_skill, tag="r", runs_dir=str(runs), gate=gate, max_steps=steps, epoch_steps=100,
            seed=seed, test_reps=2, workers=1, reporter=PlainReporter(quiet=True), **settings,
        )  # fmt: skip
        arms = result.comparison.arms if result.comparison else None
        return {
            "gate": gate, "seed": seed, "kept": result.kept,
            "seed_test": arms["S0"].mixed if arms else None, "best_test": arms["best"].mixed if arms else None,
            "rollouts": sum(1 for _ in (runs / "r").rglob("record.json")),
        }  # fmt: skip
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def planted_study(
    runs: int, steps: int, workers: int, settings: dict[str, Any] | None = None, only: tuple[str, ...] = ()
) -> dict[str, Any]:
    """(e): recovery of a removed rule by real training runs (the sequential gate, and strict for scale);
    ``settings``: train settings for every run beside the defaults (``--carry``), ``only``: these gates alone."""
    from skilltune.measure.compare import compare
    from skilltune.skill import load_skill

    good = load_skill(GOOD)
    lines = [line for line in good.text.splitlines(keepends=True) if ABLATE not in line]
    assert len(lines) < len(good.text.splitlines()), "the planted rule was not found in the good skill"
    tmp = Path(tempfile.mkdtemp(prefix="verdicts-seed-"))
    ablated = good.replace_file(good.main, "".join(lines))
    ablated.save(tmp / "skill")
    reference = compare(
        SUITE, {"ablated": ablated, "good": good}, split="test", reps=4, out=tmp / "ref", workers=2
    )
    lost = (reference.arms["good"].mixed or 0) - (reference.arms["ablated"].mixed or 0)
    gates = {"sequential": runs, "strict": max(8, runs // 5)}
    gates = {gate: count for gate, count in gates.items() if not only or gate in only}
    jobs = [
        (gate, seed, steps, str(tmp / "skill"), settings or {})
        for gate, count in gates.items()
        for seed in range(count)
    ]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_planted_run, jobs))
    shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, Any] = {
        "lost_test_score": lost,
        "ablated_rule": ABLATE,
        "steps": steps,
        "settings": settings or {},
    }
    for gate in gates:
        mine = [r for r in results if r["gate"] == gate]
        won = sum(
            r["best_test"] is not None
            and r["seed_test"] is not None
            and r["best_test"] - r["seed_test"] >= 2 / 3 * lost
            for r in mine
        )
        out[gate] = {
            "runs": len(mine), "recovered": won / len(mine), "recovered_ci95": list(wilson(won, len(mine))),
            "rollouts_per_run": float(np.mean([r["rollouts"] for r in mine])),
            "kept_per_run": float(np.mean([r["kept"] for r in mine])),
        }  # fmt: skip
    return out


def training_study(runs: int, seed: int) -> dict[str, Any]:
    """(d): simulated 10-step runs (12 decisions, 20 val tasks), today beside the new design and its options."""
    variants = {
        "today": Gating("today", TODAY, policy="lord", reuse=False),
        "task-level test only": Gating("t", SLOW, policy="lord", reuse=False),
        "+ shared incumbent rollouts": Gating("r", SLOW, policy="lord", prefetch=False),
        "+ its next round run ahead (no idle workers)": Gating("p", SLOW, policy="lord"),
        "+ spend (the default policy)": Gating("s", SLOW),
        "+ futility 0.85 from round 1 (default)": Gating("f", NEW),
        "+ screen on train (default)": Gating("c", NEW, screen=True),
    }
    return {name: training_runs(g, RunShape(), Proposals(), runs, seed) for name, g in variants.items()}


def allocation_study(decisions: int, seed: int) -> dict[str, Any]:
    """(f): retire a task after ``r`` rounds tied on both arms (a sign-invariant rule: the test stays
    exact); mid-range and saturated rates, null and +20, at a 12-decision run's first level."""
    level = RunAlpha(0.05, "spend", 12).level([])
    out: dict[str, Any] = {"level": level}
    for regime, lo, hi in (("mid", 0.35, 0.65), ("saturated", 0.6, 0.98)):
        for effect in (0.0, 0.2):
            for retire in (0, 2, 3):
                rng = np.random.default_rng(stable_seed(seed, regime, effect))  # same data for each rule
                base = rng.uniform(lo, hi, (decisions, 20))
                c = outcomes(rng, np.clip(base + effect, 0, 1), NEW.max_looks)
                diffs = (c - outcomes(rng, base, NEW.max_looks)).astype(np.int8)
                active = np.ones(diffs.shape, dtype=bool)
                if retire:
                    tied = np.cumprod(diffs == 0, axis=1).astype(bool)
                    active[:, retire:, :] = ~tied[:, retire - 1 : retire, :]
                    diffs = np.where(active, diffs, 0).astype(np.int8)
                seeds = rng.integers(0, 2**31, 16)[rng.integers(0, 16, decisions)]
                acc, used = decide(NEW, np.full(decisions, level), diffs, seeds, rng)
                ran = np.arange(NEW.max_looks)[None, :] < used[:, None]
                cost = 2 * (active.sum(axis=2) * ran).sum(axis=1)
                out[f"{regime} +{round(effect * 100)} retire {retire}"] = {
                    "accept": float(acc.mean()), "accept_ci95": list(wilson(int(acc.sum()), decisions)),
                    "rollouts_per_decision": float(cost.mean()),
                }  # fmt: skip
    return out


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _report_levels(result: dict[str, Any]) -> list[str]:
    lines = ["(a) per-decision false accepts / alpha (95% interval), null data"]
    lines.append("| design | case | tasks | alpha | decisions | accepts | rate / alpha |")
    lines.append("|---|---|---|---|---|---|---|")
    for row in result["levels"]:
        lo, hi = row["ratio_ci95"]
        shown = "never (below 2^-n)" if row.get("unreachable") else f"{row['ratio']:.2f} [{lo:.2f}, {hi:.2f}]"
        lines.append(
            f"| {row['design']} | {row['case']} | {row['tasks']} | {row['alpha']:g} | {row['decisions']} | "
            f"{row['accepts']} | {shown} |"
        )
    return lines


def _report_runs(result: dict[str, Any]) -> list[str]:
    lines = ["(b) runs on null data that keep any edit (95% interval); runs with 2+ false keeps"]
    lines.append("| design | case | tasks | decisions | runs | keep any | 2+ keeps |")
    lines.append("|---|---|---|---|---|---|---|")
    for row in result["runs"]:
        lo, hi = row["runs_keeping_ci95"]
        lines.append(
            f"| {row['design']} | {row['case']} | {row['tasks']} | {row['decisions']} | {row['runs']} | "
            f"{_pct(row['runs_keeping'], 2)} [{_pct(lo, 2)}, {_pct(hi, 2)}] | {_pct(row['runs_with_2plus'], 2)} |"
        )
    return lines


def _report_power(result: dict[str, Any]) -> list[str]:
    lines = [
        "(c) power on 20 tasks at the levels of a 12-decision run (first / median / last); the fixed-sample"
    ]
    lines.append("    reference: the one-look task-level sign-flip test at the same level and power")
    lines.append(
        "| design | effect | level | power (95%) | reps/task/arm | rollouts/decision | fixed-sample | ratio to fixed |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    for row in result["power"]:
        lo, hi = row["power_ci95"]
        fixed = row.get("fixed_sample_rollouts")
        ratio = "-" if row["ratio_to_fixed"] is None else f"{row['ratio_to_fixed']:.2f}"
        lines.append(
            f"| {row['design']} | +{round(row['effect'] * 100)} | {row['which']} {row['alpha']:.4f} | "
            f"{_pct(row['power'])} [{_pct(lo)}, {_pct(hi)}] | {row['reps_per_task_per_arm']:.2f} | "
            f"{row['rollouts_per_decision']:.0f} | {'-' if fixed is None else f'{fixed:.0f}'} | {ratio} |"
        )
    lines.append(
        "\n(c') power at +20 by task count and level (new design; without the veto -> with it; "
        "[with the veto before issue 33])"
    )
    lines.append("| tasks | first | median | last | rollouts/decision at first |")
    lines.append("|---|---|---|---|---|")
    for n, row in result["power_by_tasks"].items():
        cells = [
            f"{_pct(row[w]['off']['power'])} -> {_pct(row[w]['on']['power'])}"
            + (f" [{_pct(row[w]['before']['power'])}]" if "before" in row[w] else "") if "off" in row[w]
            else _pct(row[w]["power"])
            for w in ("first", "median", "last")
        ]  # fmt: skip
        first = row["first"].get("off", row["first"])
        cost = f"{first['rollouts_per_decision']:.0f}"
        if "on" in row["first"]:
            cost += f" -> {row['first']['on']['rollouts_per_decision']:.0f}"
        if "before" in row["first"]:
            cost += f" [{row['first']['before']['rollouts_per_decision']:.0f}]"
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {cost} |")
    return lines


def _vs_today(row: dict[str, Any], today: dict[str, Any]) -> str:
    """The gate's rollouts per run over today's, minus 1, with a 95% interval (delta method)."""
    if row is today:
        return "-"
    ratio = row["gate_rollouts_per_run"] / today["gate_rollouts_per_run"]
    if "gate_rollouts_sd" not in row:
        return f"{ratio - 1:+.0%}"
    rel = math.hypot(
        row["gate_rollouts_sd"] / row["gate_rollouts_per_run"] / math.sqrt(row["runs"]),
        today["gate_rollouts_sd"] / today["gate_rollouts_per_run"] / math.sqrt(today["runs"]),
    )
    return f"{ratio - 1:+.1%} [{ratio * (1 - 1.96 * rel) - 1:+.1%}, {ratio * (1 + 1.96 * rel) - 1:+.1%}]"


def _pm(row: dict[str, Any], key: str, digits: int, sign: str = "") -> str:
    """A mean per run with its 95% half-width when the sd was recorded."""
    sd = row.get(f"{key}_sd")
    value = f"{row[key if key != 'kept' else 'kept_per_run']:{sign}.{digits}f}"
    return value if sd is None else f"{value} ± {1.96 * sd / math.sqrt(row['runs']):.{digits}f}"


def _report_training(result: dict[str, Any]) -> list[str]:
    lines = ["(d) simulated training runs (20 val tasks, 10 steps + 2 epoch updates; ± 95% half-width)"]
    lines.append(
        "| design | rollouts/run | gate/run | gate share | gate vs today (95%) | kept/run | false keeps/run | true val gain |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    today = result["training"]["today"]
    for name, row in result["training"].items():
        gate = row["gate_rollouts_per_run"]
        gate_sd = row.get("gate_rollouts_sd")
        gate_cell = (
            f"{gate:.0f}"
            if gate_sd is None
            else f"{gate:.0f} ± {1.96 * gate_sd / math.sqrt(row['runs']):.0f}"
        )
        lines.append(
            f"| {name} | {row['rollouts_per_run']:.0f} | {gate_cell} | {_pct(row['gate_share'])} | "
            f"{_vs_today(row, today)} | {_pm(row, 'kept', 2)} | {row['false_kept_per_run']:.3f} | "
            f"{_pm(row, 'true_val_gain', 3, '+')} |"
        )
    return lines


def _report_planted(result: dict[str, Any]) -> list[str]:
    p = result["planted"]
    lines = [
        f"(e) planted recovery (rule removed: {p['ablated_rule']!r}, test score lost {p['lost_test_score']:.3f})"
    ]
    for gate in [gate for gate in ("sequential", "strict") if gate in p]:
        g = p[gate]
        lo, hi = g["recovered_ci95"]
        lines.append(
            f"- {gate}: {_pct(g['recovered'])} [{_pct(lo)}, {_pct(hi)}] of {g['runs']} runs, "
            f"{g['rollouts_per_run']:.0f} rollouts and {g['kept_per_run']:.2f} keeps per run"
        )
    return lines


def _report_allocation(result: dict[str, Any]) -> list[str]:
    lines = ["(f) retiring tasks tied on both arms (20 tasks, first level; not adopted)"]
    lines.append("| case | retire after | accept (95%) | rollouts/decision |")
    lines.append("|---|---|---|---|")
    for key, row in result["allocation"].items():
        if key == "level":
            continue
        case, _, r = key.rpartition(" retire ")
        lo, hi = row["accept_ci95"]
        lines.append(
            f"| {case} | {r if r != '0' else 'never'} | {_pct(row['accept'])} [{_pct(lo)}, {_pct(hi)}] | "
            f"{row['rollouts_per_decision']:.0f} |"
        )
    return lines


def report(result: dict[str, Any]) -> str:
    sections = {
        "levels": _report_levels,
        "runs": _report_runs,
        "asymmetric": asymmetric.report,
        "harm_veto": harmveto.report,
        "power": _report_power,
        "training": _report_training,
        "planted": _report_planted,
        "allocation": _report_allocation,
        "efficiency": efficiency.report,
    }
    lines: list[str] = []
    for key, section in sections.items():
        if any(k.startswith(key) for k in result):
            lines += [*section(result), ""]
    audit = result.get("prescreen_audit", {})
    lines.append(
        f"pre-screen audit: {audit.get('missed', 0)} of {audit.get('checked', 0)} ruled-out decision looks could cross"
    )
    lines.append(f"{result['preset']} preset: {result['seconds']:.0f} s on {os.cpu_count()} cores")
    return "\n".join(lines)


def part_levels(preset: dict[str, Any]) -> dict[str, Any]:
    levels = []
    for design_name, design in (("new", NEW), ("today", TODAY)):
        for case in NULLS:
            for n in TASKS:
                for alpha in preset["levels"]:
                    if design_name == "today" and (n != 20 or alpha < 1e-3):
                        continue  # today's design: enough to see where it stood
                    if alpha < 1e-3 and case not in ("skewed", "heterogeneous"):
                        continue  # the smallest level: the two hardest nulls (each cell ~4M decisions)
                    key = {"design": design_name, "case": case, "tasks": n, "alpha": alpha}
                    if design_name == "new" and alpha < 2.0**-n:  # below the smallest p-value: never accepts
                        zero = {
                            "decisions": 0,
                            "accepts": 0,
                            "rate": 0.0,
                            "ratio": 0.0,
                            "ratio_ci95": [0.0, 0.0],
                        }
                        levels.append(key | zero | {"unreachable": True})
                        continue
                    count = min(preset["max_decisions"], math.ceil(preset["expected_false"] / alpha))
                    row = level_study(design, case, n, alpha, count, stable_seed(design_name, case, n, alpha))
                    levels.append(key | row)
                    print(
                        f"  (a) {design_name} {case} {n} {alpha:g}: {row['ratio']:.2f}",
                        file=sys.stderr,
                        flush=True,
                    )
    return {"levels": levels}


def part_runs(preset: dict[str, Any]) -> dict[str, Any]:
    runs = []
    for design_name, gating in (
        ("new", Gating("new", NEW)),
        ("today", Gating("today", TODAY, "lord", False)),
    ):
        for case in ("balanced", "skewed", "heterogeneous"):
            for n in TASKS:
                for decisions in (12, 60):
                    if design_name == "today" and (n == 60 or decisions == 60):
                        continue
                    seed = stable_seed(design_name, case, n, decisions)
                    row = run_study(gating, case, n, decisions, preset["runs"], seed)
                    runs.append({"design": design_name, "case": case, "tasks": n, **row})
                    print(
                        f"  (b) {design_name} {case} {n} {decisions}: {row['runs_keeping']:.4f}",
                        file=sys.stderr,
                        flush=True,
                    )
    return {"runs": runs}


def veto_power(n: int, effect: float, alpha: float, decisions: int, seed: int) -> dict[str, dict[str, Any]]:
    """(c) for the new design without and with the harm veto (the same decisions), with the
    fixed-sample test's rollouts at each one's power."""
    both = asymmetric.veto_power(n, effect, alpha, decisions, seed)
    fixed: dict[float, float | None] = {}
    for row in both.values():
        if row["power"] not in fixed:  # the veto seldom changes the power: one search for both
            fixed[row["power"]] = _fixed_sample(n, effect, alpha, row["power"], decisions, seed + 1)
        rollouts = fixed[row["power"]]
        ratio = None if not rollouts else row["rollouts_per_decision"] / rollouts
        row |= {"fixed_sample_rollouts": rollouts, "ratio_to_fixed": ratio}
    return both


def part_power(preset: dict[str, Any]) -> dict[str, Any]:
    plan = RunAlpha(0.05, "spend", 12).planned_levels()
    which = {"first": plan[0], "median": plan[len(plan) // 2], "last": plan[-1]}
    power = []
    for effect in (0.05, 0.10, 0.20):
        for label, alpha in which.items():
            both = veto_power(20, effect, alpha, preset["power"], stable_seed("new", effect, label))
            for design_name, key in (
                ("new", "off"),
                ("new+veto before issue 33", "before"),
                ("new+veto", "on"),
            ):
                power.append({"design": design_name, "effect": effect, "which": label, **both[key]})
        today = {"first": RunAlpha(0.05, "lord", 12).level([])}
        for label, alpha in today.items():
            row = power_study(TODAY, 20, effect, alpha, preset["power"], stable_seed("today", effect, label))
            power.append({"design": "today", "effect": effect, "which": label, **row})
        print(f"  (c) +{round(effect * 100)} done", file=sys.stderr, flush=True)
    by_tasks = {
        str(n): {
            label: veto_power(n, 0.2, alpha, preset["power"] // 2, seed=n) for label, alpha in which.items()
        }
        for n in TASKS
    }
    return {"power": power, "power_by_tasks": by_tasks}


PARTS: dict[str, Callable[[dict[str, Any], int], dict[str, Any]]] = {
    "a": lambda preset, workers: part_levels(preset),
    "b": lambda preset, workers: part_runs(preset),
    "c": lambda preset, workers: part_power(preset),
    "d": lambda preset, workers: {"training": training_study(preset["training"], seed=5)},
    "e": lambda preset, workers: {
        "planted": planted_study(
            preset["planted"],
            preset["planted_steps"],
            workers,
            preset.get("train"),
            preset.get("planted_gates", ()),
        )
    },
    "f": lambda preset, workers: {"allocation": allocation_study(preset["power"], seed=9)},
    # (b') asymmetric nulls, without and with the harm veto: 0/1 scores (and 1-2 val tasks), graded scores
    "g": lambda preset, workers: (
        asymmetric.part(preset, graded=False)
        | {"few_tasks": asymmetric.few_tasks(preset["asym_runs"], seed=3)}
    ),
    "h": lambda preset, workers: asymmetric.part(preset, graded=True),
    # (i) held-out gain per 1,000 training rollouts by gate design (issue 20 item 2)
    "i": lambda preset, workers: {"efficiency": efficiency.study(preset["eff_runs"], seed=11)},
    # (j) the harm veto before and after issue 33: its laws, the nulls, flaky tasks
    "j": lambda preset, workers: harmveto.study(
        preset["harm_runs"], preset["harm_decisions"], preset["eff_runs"]
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the fast preset (make bench-verdicts)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--parts", default="abcdefghij", help="which parts to run (default all); others are kept"
    )
    parser.add_argument(
        "--carry", choices=["off", "screen", "gate"], default=None, help="(e): train's --carry"
    )
    parser.add_argument(
        "--planted-gates",
        nargs="+",
        choices=["sequential", "strict"],
        default=[],
        help="(e): these gates only",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    name = "quick" if args.quick else "full"
    preset = dict(PRESETS[name])
    if args.carry is not None:
        preset["train"] = {"carry": args.carry}
    if args.planted_gates:
        preset["planted_gates"] = tuple(args.planted_gates)
    default = "verdicts-quick.json" if args.quick else "verdicts.json"
    out_path = args.out or ROOT / "benchmarks" / "results" / default
    result: dict[str, Any] = {"preset": name, "settings": dict(preset), "part_seconds": {}}
    if set(args.parts) != set(PARTS) and out_path.is_file():  # a partial run updates the stored result
        result = json.loads(out_path.read_text()) | {"preset": name, "settings": dict(preset)}
        result.setdefault("part_seconds", {"a-e": result.get("seconds", 0.0)})
    from benchmarks.gatesim import AUDITS

    for part in sorted(set(args.parts)):
        started = time.monotonic()
        result.update(PARTS[part](preset, args.workers))
        result["part_seconds"][part] = round(time.monotonic() - started, 1)
        print(f"({part}) done in {result['part_seconds'][part]:.0f} s", file=sys.stderr, flush=True)
    audit = result.get("prescreen_audit", {"checked": 0, "missed": 0})
    result["prescreen_audit"] = {k: audit.get(k, 0) + AUDITS[k] for k in AUDITS}
    result["seconds"] = round(sum(result["part_seconds"].values()), 1)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print(report(result))
    print(f"JSON: {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
