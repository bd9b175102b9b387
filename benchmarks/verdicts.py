"""Verdicts benchmark: how often each gate is fooled, what it finds, and what it costs.

All gates side by side, in one run:

(a) null: whole runs of gate decisions on a pure-noise suite (20 val tasks, 0/1
    outcomes near 50%, arm-independent noise); the fraction of runs that accept
    anything. Simulated in memory through the real gate classes.
(b) planted: a rule ablated from the good mock-demo skill; real training runs
    (mock agent, mock proposer) with each gate; the fraction of runs that recover
    at least 2/3 of the lost held-out score, and the rollouts they spent.
(c) fixed true effects of +5, +10, +20 points on 20 val tasks: power, mean
    rollouts per decision, and that divided by the rollouts of the optimal
    fixed-sample test at the same error rates (the gate's own false-accept rate
    and power). In memory, through the real gate classes.

    python benchmarks/verdicts.py --quick     # minutes; the README's table
    python benchmarks/verdicts.py             # >= 200 runs per gate

Writes benchmarks/results/verdicts.json and prints the table.
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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skilltune.alpha import RunAlpha  # noqa: E402
from skilltune.gate import make_gate  # noqa: E402
from skilltune.runfiles import RolloutRecord  # noqa: E402
from skilltune.score import Score  # noqa: E402

GATES = ("strict", "paired-z", "sequential")
N_TASKS = 20
DECISIONS = 12  # a 10-step run with epoch updates every 5 steps
SUITE = ROOT / "examples" / "mock-demo" / "suite"
GOOD = ROOT / "examples" / "mock-demo" / "good-skill"
ABLATE = "Quantify customer impact"  # the planted defect: this rule line is removed
PRESETS = {
    "quick": {
        "null_runs": 1000,
        "null_test_runs": 10000,
        "decisions": 1000,
        "planted_runs": 8,
        "planted_steps": 5,
    },
    "full": {
        "null_runs": 2000,
        "null_test_runs": 40000,
        "decisions": 4000,
        "planted_runs": 200,
        "planted_steps": 6,
    },
}


def _record(task: str, rep: int, value: float, candidate: str) -> RolloutRecord:
    score = Score.model_construct(hard=int(value), soft=value, mixed=value, checks=[], contract="sim")
    return RolloutRecord.model_construct(
        task_id=task, split="val", phase="gate", replicate=rep, seed=0, candidate=candidate, agent="sim",
        options_hash="sim", task_hash="sim", status="ok", score=score, wall_s=0.0, started_at="", attempts=1,
    )  # fmt: skip


class SimSampler:
    """Independent 0/1 outcomes per arm; per-task base rates near 50%; candidate = base + effect."""

    def __init__(self, rng: np.random.Generator, effect: float) -> None:
        self.rng = rng
        self.base = rng.uniform(0.35, 0.65, N_TASKS)
        self.effect = effect
        self.rollouts = 0

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        cand, inc = [], []
        for k in range(replicates):
            rep = index * replicates + k
            c = self.rng.random(N_TASKS) < np.clip(self.base + self.effect, 0, 1)
            i = self.rng.random(N_TASKS) < self.base
            for t in range(N_TASKS):
                cand.append(_record(f"t{t:02d}", rep, float(c[t]), "cand"))
                inc.append(_record(f"t{t:02d}", rep, float(i[t]), "inc"))
        self.rollouts += 2 * N_TASKS * replicates
        return cand, inc


def decide(gate: str, level: float, effect: float, rng: np.random.Generator) -> tuple[bool, int]:
    settings: dict[str, Any] = {"alpha": level} if gate == "sequential" else {}
    sampler = SimSampler(rng, effect)
    verdict = make_gate(gate, "mixed", 1, **settings).decide(sampler)
    return verdict.accept, sampler.rollouts


def null_study(gate: str, runs: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    policy = RunAlpha(0.05, "lord", DECISIONS)
    accepted_runs, rollouts, accepts = 0, 0, 0
    for _ in range(runs):
        history: list[bool] = []
        for _ in range(DECISIONS):
            ok, spent = decide(gate, policy.level(history), 0.0, rng)
            history.append(ok)
            rollouts += spent
        accepted_runs += any(history)
        accepts += sum(history)
    return {
        "runs": runs,
        "runs_accepting": accepted_runs / runs,
        "accepts_per_run": accepts / runs,
        "rollouts_per_decision": rollouts / (runs * DECISIONS),
    }


def null_test_study(runs: int, seed: int) -> dict[str, float]:
    """(a) for the sequential test alone, without records: many more runs, a tighter estimate."""
    from skilltune.stats import SequentialTest

    rng = np.random.default_rng(seed)
    policy = RunAlpha(0.05, "lord", DECISIONS)
    hits = 0
    for _ in range(runs):
        history: list[bool] = []
        for _ in range(DECISIONS):
            test = SequentialTest(policy.level(history))
            base = rng.uniform(0.35, 0.65, N_TASKS)
            diffs: list[float] = []
            for k in range(test.max_looks):
                c = rng.random(N_TASKS) < base
                i = rng.random(N_TASKS) < base
                diffs.extend((c.astype(float) - i).tolist())
                outcome, _ = test.look(k, diffs)
                if outcome is not None:
                    break
            history.append(outcome == "accept")
        hits += any(history)
    rate = hits / runs
    return {"runs": runs, "runs_accepting": rate, "se": math.sqrt(rate * (1 - rate) / runs)}


def fixed_sample_rollouts(alpha: float, power: float, effect: float) -> float | None:
    """Rollouts (both arms) of the optimal one-sided fixed-sample paired test at these error rates."""
    if not 0 < alpha < 1 or not 0 < power < 1 or effect <= 0:
        return None
    p = 0.5
    sd = math.sqrt(p * (1 - p) + (p + effect) * (1 - p - effect))
    z = float(sps.norm.isf(alpha) + sps.norm.isf(1 - power))
    if z <= 0:
        return None
    return 2 * (z * sd / effect) ** 2


def effect_study(gate: str, effects: tuple[float, ...], decisions: int, seed: int) -> dict[str, Any]:
    """Decisions at the level of a run's first decision; the false-accept rate at effect 0 too."""
    level = RunAlpha(0.05, "lord", DECISIONS).level([])
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"level": level}
    null = [decide(gate, level, 0.0, rng) for _ in range(decisions)]
    false_accept = sum(ok for ok, _ in null) / decisions
    out["false_accept"] = false_accept
    out["null_rollouts_per_decision"] = float(np.mean([r for _, r in null]))
    for effect in effects:
        runs = [decide(gate, level, effect, rng) for _ in range(decisions)]
        power = sum(ok for ok, _ in runs) / decisions
        mean_rollouts = float(np.mean([r for _, r in runs]))
        fixed = fixed_sample_rollouts(max(false_accept, 1.0 / decisions), power, effect)
        out[f"+{round(effect * 100)}"] = {
            "power": power,
            "rollouts_per_decision": mean_rollouts,
            "reps_per_task_per_arm": mean_rollouts / (2 * N_TASKS),
            "fixed_sample_rollouts": fixed,
            "ratio_to_fixed": None if not fixed else mean_rollouts / fixed,
        }
    return out


def _planted_run(args: tuple[str, int, int, str]) -> dict[str, Any]:
    """One real training run from the ablated skill; returns held-out scores and rollouts spent."""
    gate, seed, steps, seed_skill = args
    from skilltune.progress import PlainReporter
    from skilltune.train import train

    runs = Path(tempfile.mkdtemp(prefix="verdicts-"))
    try:
        os.environ["SKILLTUNE_WORKSPACES"] = str(runs / "ws")
        result = train(
            SUITE, seed_skill, tag="r", runs_dir=str(runs), gate=gate, max_steps=steps, epoch_steps=100,
            seed=seed, test_reps=2, workers=1, reporter=PlainReporter(quiet=True),
        )  # fmt: skip
        rollouts = len(list((runs / "r").rglob("record.json")))
        arms = result.comparison.arms if result.comparison else None
        return {
            "gate": gate,
            "seed": seed,
            "kept": result.kept,
            "seed_test": arms["S0"].mixed if arms else None,
            "best_test": arms["best"].mixed if arms else None,
            "rollouts": rollouts,
        }
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def planted_study(runs: int, steps: int, workers: int) -> dict[str, Any]:
    from skilltune.compare import compare
    from skilltune.skill import load_skill

    good = load_skill(GOOD)
    text = good.text
    lines = [line for line in text.splitlines(keepends=True) if ABLATE not in line]
    assert len(lines) < len(text.splitlines()), "the planted rule was not found in the good skill"
    tmp = Path(tempfile.mkdtemp(prefix="verdicts-seed-"))
    ablated = good.replace_file(good.main, "".join(lines))
    ablated.save(tmp / "skill")
    reference = compare(
        SUITE, {"ablated": ablated, "good": good}, split="test", reps=4, out=tmp / "ref", workers=2
    )
    lost = (reference.arms["good"].mixed or 0) - (reference.arms["ablated"].mixed or 0)
    jobs = [(gate, seed, steps, str(tmp / "skill")) for gate in GATES for seed in range(runs)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_planted_run, jobs))
    shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, Any] = {"lost_test_score": lost, "ablated_rule": ABLATE, "steps": steps}
    for gate in GATES:
        mine = [r for r in results if r["gate"] == gate]
        recovered = [
            r["best_test"] is not None
            and r["seed_test"] is not None
            and (r["best_test"] - r["seed_test"]) >= 2 / 3 * lost
            for r in mine
        ]
        out[gate] = {
            "runs": len(mine),
            "recovered": sum(recovered) / len(mine),
            "rollouts_per_run": float(np.mean([r["rollouts"] for r in mine])),
            "kept_per_run": float(np.mean([r["kept"] for r in mine])),
        }
    return out


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if pct else (f"{value:.0f}" if value >= 100 else f"{value:.2f}")


def table(result: dict[str, Any]) -> str:
    head = (
        "| gate | (a) null runs accepting | (b) planted recovered | (b) rollouts/run | "
        "(c) power +5 / +10 / +20 | (c) rollouts/decision at +20 | reps/task/arm at +20 | ratio to fixed at +20 |"
    )
    lines = [head, "|" + "---|" * 8]
    for gate in GATES:
        a = result["null"][gate]
        b = result.get("planted", {}).get(gate, {})
        c = result["effects"][gate]
        powers = " / ".join(_fmt(c[k]["power"], pct=True) for k in ("+5", "+10", "+20"))
        lines.append(
            f"| {gate} | {_fmt(a['runs_accepting'], pct=True)} | {_fmt(b.get('recovered'), pct=True)} | "
            f"{_fmt(b.get('rollouts_per_run'))} | {powers} | {_fmt(c['+20']['rollouts_per_decision'])} | "
            f"{_fmt(c['+20']['reps_per_task_per_arm'])} | {_fmt(c['+20']['ratio_to_fixed'])} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the fast preset (README table)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--skip-planted", action="store_true", help="only the in-memory parts")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "verdicts.json")
    args = parser.parse_args()
    preset = PRESETS["quick" if args.quick else "full"]
    started = time.monotonic()
    result: dict[str, Any] = {
        "preset": "quick" if args.quick else "full",
        "settings": preset,
        "tasks": N_TASKS,
    }
    result["null"] = {g: null_study(g, preset["null_runs"], seed=1) for g in GATES}
    result["null_test"] = null_test_study(preset["null_test_runs"], seed=3)
    print(f"(a) null done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    result["effects"] = {g: effect_study(g, (0.05, 0.10, 0.20), preset["decisions"], seed=2) for g in GATES}
    print(f"(c) effects done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if not args.skip_planted:
        result["planted"] = planted_study(preset["planted_runs"], preset["planted_steps"], args.workers)
        print(f"(b) planted done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    result["seconds"] = round(time.monotonic() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    seq = result["effects"]["sequential"]
    print(
        f"\nsequential test alone on pure noise: {100 * result['null_test']['runs_accepting']:.2f}% "
        f"+- {100 * result['null_test']['se']:.2f}% of {result['null_test']['runs']} runs kept an edit"
        f"\nsequential: level of a run's first decision {seq['level']:.4f}; false accepts per decision "
        f"{seq['false_accept']:.4f}; rollouts per null decision {seq['null_rollouts_per_decision']:.0f}; "
        f"{result['seconds']:.0f} s in all; JSON: {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
