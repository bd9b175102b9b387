"""The harm veto of issue 33, before -> after (verdicts.py part j).

Three vetoes decide on the same simulated data (benchmarks/gatesim.py's ``settle``): none, the
veto before issue 33 (an absolute tolerance of 0.5, looked at once at the crossing, the noise
pooled over every task) and today's (stats/harm.py: a fall of more than half the task's score
and more than 0.1, looked at after every round while a suspect is unresolved, each suspect
judged against its own noise or that of the noisy tasks).

- Asymmetric laws of issue 33 (benchmarks/asymmetric.py's ``law_runs``: 12-decision runs on the
  same val tasks, the incumbent's rollouts shared, the spend policy's levels): 80% of tasks
  +0.1375 / 20% -0.55 and issue 20's 80% +0.15 / 20% -0.6, graded scores (0.01 grid, replicate sd
  0.05, unclipped as the issue simulated them) and 0/1 scores, on 20 and 60 val tasks; graded laws
  clipped at the task's score whose harms an absolute tolerance of 0.5 could not see (20% of tasks
  -1, 35% -0.5, the others helped for a zero mean); beside them the symmetric (+-0.2) and strong
  (exchangeable arms) nulls. The bound the README states for a harm beyond the tolerance with
  little replicate noise is k (1 - h)^n (k = 12 decisions).
- Issue 33's good 0/1 edit with flaky tasks (``flaky_power``): 12 of 20 val tasks fixed every
  time, none harmed, 0, 4 or 8 of the others unchanged 50/50 tasks, the rest unchanged and
  deterministic; single decisions at a 12-decision run's first level.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any

import numpy as np

from benchmarks.asymmetric import SYMMETRIC, Law, cell, decided, law_runs, mean_effect, rollouts
from benchmarks.efficiency import MODELS, real_gate, summarise, versus
from benchmarks.gatesim import NEW, NEW_VETO, OLD_VETO
from benchmarks.runsim import Gating, RunShape, training_runs
from skilltune.gate.run import RunAlpha

LAWS = (Law(0.20, 0.55, 0.1375), Law(0.20, 0.60, 0.15))  # issue 33's and issue 20's
# graded, clipped at the task's score: harms of tasks at 0.3-0.8 that an absolute tolerance of 0.5 missed
LOW = (Law.null(0.20, 1.0, graded=True), Law.null(0.35, 0.5, graded=True))
TASKS = (20, 60)
FLAKY = (0, 4, 8)


def flaky_power(flaky: int, decisions: int, alpha: float, seed: int, n: int = 20) -> dict[str, Any]:
    """Issue 33's good 0/1 edit: 12 of ``n`` val tasks fixed (0 -> 1 every time), none harmed,
    ``flaky`` unchanged 50/50 tasks, the others unchanged and deterministic (half solved, half
    not): power and rollouts without the veto, before issue 33 and today."""
    rng = np.random.default_rng(seed)
    rest = n - 12 - flaky
    inc_rate = np.array([0.0] * 12 + [0.5] * flaky + [1.0] * (rest // 2) + [0.0] * (rest - rest // 2))
    cand_rate = np.where(np.arange(n) < 12, 1.0, inc_rate)
    looks = NEW.max_looks
    inc = rollouts(rng, np.tile(inc_rate, (decisions, 1)), looks, False).astype(np.int64)
    out = rollouts(rng, np.tile(cand_rate, (decisions, 1)), looks, False).astype(np.int64)
    return {"flaky": flaky, "tasks": n, **decided(NEW, np.full(decisions, alpha), inc, out, rng)}


def efficiency(runs: int, seed: int = 11) -> dict[str, Any]:
    """Part (i)'s figure for the default (``--carry screen``) and ``--carry off`` with the veto before
    issue 33 and today's: ``runs`` simulated training runs each (the same seeds), both proposal
    models, and today's figure over the former's (paired bootstrap over the run indices)."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for model, proposals in MODELS.items():
        arrays, rows = {}, {}
        for carry in ("screen", "off"):
            for label, design in (("before", OLD_VETO), ("today", NEW_VETO)):
                extra = {"carry": "screen"} if carry == "screen" else {}
                gating = Gating(label, design, prefetch=False, screen=True, extra=extra)
                got = training_runs(
                    gating, RunShape(), proposals, runs, seed, real_gate(design), per_run=True
                )
                name = f"--carry {carry}, {label}"
                arrays[name] = got.pop("per_run")
                rows[name] = summarise(arrays[name], rng)
            today, before = f"--carry {carry}, today", f"--carry {carry}, before"
            rows[today]["vs_before"] = versus(arrays[today], arrays[before], rng)
            print(
                f"  (j) {model} --carry {carry}: {rows[today]['vs_before'][0]:.2f}",
                file=sys.stderr,
                flush=True,
            )
        out[model] = rows
    return {"runs": runs, "models": out}


def study(runs: int, decisions: int, eff_runs: int = 0) -> dict[str, Any]:
    """The cells: ``runs`` 12-decision runs a law cell, ``decisions`` decisions a flaky cell, and
    ``eff_runs`` simulated training runs a design for part (i)'s figure (0: none)."""
    rows = []
    for graded in (True, False):
        for law in (*LAWS, *(LOW if graded else ()), *SYMMETRIC):
            for n in TASKS:
                clip = not graded or law not in LAWS  # issue 33's graded laws unclipped, as it simulated
                seed = zlib.crc32(repr(("issue33", graded, law, n, clip)).encode())
                row = law_runs(law, graded, n, runs, seed, clip)
                bound = 12 * (1 - law.share) ** n if law.share else None  # k (1 - h)^n, k = 12
                what = {
                    "scores": "graded" if graded else "0/1",
                    "law": law.label,
                    "tasks": n,
                    "clipped": clip,
                }
                what |= {"share": law.share, "harm": law.harm, "gain": law.gain}
                rows.append(what | {"mean": mean_effect(law, graded, clip), "bound": bound, **row})
                print(
                    f"  (j) {rows[-1]['scores']} {law.label} {n}: {row['keep_off']:.3f} / "
                    f"{row['keep_before']:.3f} -> {row['keep_on']:.3f}",
                    file=sys.stderr,
                    flush=True,
                )
    level = RunAlpha(0.05, "spend", 12).level([])
    flaky = [flaky_power(f, decisions, level, seed=zlib.crc32(f"flaky{f}".encode())) for f in FLAKY]
    result: dict[str, Any] = {"laws": rows, "flaky": flaky}
    if eff_runs:
        result["efficiency"] = efficiency(eff_runs)
    return {"harm_veto": result}


def report(result: dict[str, Any]) -> list[str]:
    """(j) tables: runs keeping any edit and the flaky-task power, without / before / with the veto."""
    got = result.get("harm_veto")
    if not got:
        return []
    lines = [
        "(j) issue 33: 12-decision runs keeping any edit, % (95%): without the veto | the veto before "
        "issue 33 | today's; rollouts a decision (both arms) before -> today",
        "| scores | law (helped / harmed) | mean | tasks | runs | k (1-h)^n | without | before | today | "
        "rollouts/decision |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in got["laws"]:
        bound = "-" if row["bound"] is None else f"{100 * row['bound']:.1f}"
        lines.append(
            f"| {row['scores']} | {row['law']} | {row['mean']:+.4f} | {row['tasks']} | {row['runs']} | "
            f"{bound} | "
            f"{cell(row, 'keep_off')} | {cell(row, 'keep_before')} | {cell(row, 'keep_on')} | "
            f"{row['rollouts_before']:.0f} -> {row['rollouts_on']:.0f} (waiting for every suspect: "
            f"{cell(row, 'keep_all')}, {row['rollouts_all']:.0f}) |"
        )
    lines += [
        "",
        "(j) the good 0/1 edit (12 of 20 fixed, none harmed) with flaky unchanged tasks, single decisions "
        "at the first level: power % (95%) | rollouts a decision",
        "| flaky tasks | decisions | without the veto | rollouts | before issue 33 | rollouts | today "
        "| rollouts | waiting for every suspect | rollouts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in got["flaky"]:
        cells = [
            f"{cell(row[k], 'power')} | {row[k]['rollouts_per_decision']:.0f}"
            for k in ("off", "before", "on", "all")
        ]
        lines.append(f"| {row['flaky']} | {row['off']['decisions']} | " + " | ".join(cells) + " |")
    eff = got.get("efficiency")
    if eff:
        lines += [
            "",
            f"(j) part (i)'s figure, held-out gain per 1,000 training rollouts ({eff['runs']} runs a "
            "design): the veto before issue 33 -> today's; today's over the former's [95%]",
            "| model | design | before | today | today / before | rollouts a run | (a) useless keeps % "
            "| (b) worse % |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for model, rows in eff["models"].items():
            for carry in ("screen", "off"):
                a, b = rows[f"--carry {carry}, before"], rows[f"--carry {carry}, today"]
                ratio, lo, hi = b["vs_before"]
                lines.append(
                    f"| {model} | --carry {carry} | {a['gain_per_1000']['value']:.3f} | "
                    f"{b['gain_per_1000']['value']:.3f} | {ratio:.2f} [{lo:.2f}, {hi:.2f}] | "
                    f"{a['training_rollouts_per_run']:.0f} -> {b['training_rollouts_per_run']:.0f} | "
                    f"{100 * a['useless_keep']:.1f} -> {100 * b['useless_keep']:.1f} | "
                    f"{100 * a['worse_than_seed']:.1f} -> {100 * b['worse_than_seed']:.1f} |"
                )
    return lines
