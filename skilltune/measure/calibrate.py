"""``skilltune calibrate``: is this suite a place where a gate can tell skills apart?

Runs one skill with replicates and reads the result as a gate would: the pass
rate per task and overall, the regime (saturated above 0.8, too hard below 0.3,
else gradient), flaky tasks (their replicates disagree), tasks that do not
discriminate (every replicate the same at the ceiling or the floor), the noise
the gate will face, and levers to move a suite into the gradient regime.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skilltune.gate import suite_size_notes, trigger_size_notes, val_size_notes
from skilltune.gate.run import RunAlpha
from skilltune.judge.noise import JudgeNoise
from skilltune.measure import read_suite
from skilltune.measure.evaluate import evaluate
from skilltune.metric import Metric
from skilltune.settings import CalibrateSettings
from skilltune.skill import Candidate
from skilltune.stats import sample_sd, tasks_to_accept
from skilltune.stats.regime import FLAKY_SD, Regime, regime_of
from skilltune.store import read_json, write_json
from skilltune.suite import Suite

CALIBRATION_SCHEMA_VERSION = 2  # 2: gate_levels, tasks_to_accept
DEFAULT_ALPHA = 0.05  # train's defaults: the run-wide alpha and its decisions (10 steps, 2 epoch updates)
DEFAULT_DECISIONS = 12


class TaskCalibration(BaseModel):
    pass_rate: float | None
    mean: float | None  # gate metric
    sd: float | None  # within-task, across replicates
    n: int
    flaky: bool
    discriminates: bool


class Calibration(BaseModel):
    schema_version: int = CALIBRATION_SCHEMA_VERSION
    suite: str
    split: str
    agent: str
    reps: int
    metric: Metric
    skill_hash: str
    pass_rate: float | None
    mean: float | None
    regime: Regime | None
    noise_sd: float | None  # pooled within-task sd of the metric
    flaky: list[str]
    non_discriminating: list[str]
    rollouts_to_detect: dict[str, int | None]  # effect -> paired rollouts per arm, fixed-sample, 80% power
    # the sequential gate of a default run (10 steps, 2 epoch updates, alpha 0.05): the first and the
    # last decision's level, and how many tasks an edit must improve (the rest unchanged) to be kept
    gate_levels: dict[str, float] = {}
    tasks_to_accept: dict[str, int] = {}
    suite_size: list[str] = []  # what a default run's gate asks of the split's size (gate.suite_size_notes)
    levers: list[str]
    tasks: dict[str, TaskCalibration]
    judge: JudgeNoise | None = None  # judged suites: the judge's own noise, from each rollout's verdicts


def rollouts_to_detect(
    noise_sd: float | None, n_tasks: int, effect: float, alpha: float = 0.01
) -> int | None:
    """Paired rollouts per arm a fixed-sample one-sided test needs for 80% power (normal approximation)."""
    if noise_sd is None or noise_sd <= 0 or n_tasks == 0:
        return None
    from scipy import stats as sps

    z = float(sps.norm.isf(alpha) + sps.norm.isf(0.2))
    pairs = (z * math.sqrt(2) * noise_sd / effect) ** 2
    return math.ceil(max(pairs, n_tasks) / n_tasks) * n_tasks


def levers(regime: Regime | None, flaky: list[str], flat: list[str], n_tasks: int, reps: int) -> list[str]:
    out = []
    if regime == "saturated":
        out += [
            "restrict the agent's tools (e.g. --agent-opt tools=Read,Edit) so the skill has to carry more",
            "add harder items (longer tasks, stricter checks) or drop the ones every run passes",
        ]
    elif regime == "too hard":
        out += [
            "check the scorer on a known-good output first (skilltune smoke)",
            "give the agent the tools the tasks need, or split tasks into smaller ones",
        ]
    if flaky:
        out.append(
            f"{len(flaky)} flaky task(s): raise --reps, or make their scoring less sensitive to wording"
        )
    if flat and len(flat) > n_tasks / 2:
        out.append("most tasks give the same result on every replicate: they cannot show an improvement")
    if reps < 3:
        out.append("use --reps 3 or more: flakiness cannot be seen with fewer replicates")
    return out


def calibrate(
    suite: Suite | Path | str,
    skill: Candidate | Path | str | None,
    settings: CalibrateSettings | None = None,
    *,
    out: Path | str,
    force: bool = False,
    **given: Any,
) -> Calibration:
    """Evaluate ``skill`` with ``reps`` replicates and write ``out/calibration.json``.

    ``settings`` and ``given`` as ``evaluate`` takes them, for a CalibrateSettings (its ``metric``
    too: checked before any rollout runs).
    """
    chosen = CalibrateSettings.of(settings, **given)
    split, reps, metric = chosen.split, chosen.reps, chosen.metric
    suite = read_suite(suite, chosen)
    summary = evaluate(suite, skill, chosen, out=out, force=force)
    out = Path(out)
    values: dict[str, list[float]] = {}
    hards: dict[str, list[int]] = {}
    for path in sorted((out / "rollouts" / "eval").glob("*/*/record.json")):
        record = read_json(path)
        if record.get("score") is None:
            continue
        values.setdefault(record["task_id"], []).append(float(record["score"][metric]))
        hards.setdefault(record["task_id"], []).append(int(record["score"]["hard"]))
    tasks: dict[str, TaskCalibration] = {}
    for task_id in summary.per_task:
        vals = values.get(task_id, [])
        sd = sample_sd(vals) if vals else None
        constant = len(set(vals)) == 1 and len(vals) >= 2 and vals[0] in (0.0, 1.0)
        tasks[task_id] = TaskCalibration(
            pass_rate=sum(hards[task_id]) / len(hards[task_id]) if vals else None,
            mean=sum(vals) / len(vals) if vals else None,
            sd=sd,
            n=len(vals),
            flaky=sd is not None and sd >= FLAKY_SD,
            discriminates=bool(vals) and not constant,
        )
    scored = [t for t in tasks.values() if t.pass_rate is not None]
    rate = sum(t.pass_rate or 0.0 for t in scored) / len(scored) if scored else None
    mean_metric = sum(t.mean or 0.0 for t in scored) / len(scored) if scored else None
    variances = [t.sd**2 for t in scored if t.sd is not None and t.n >= 2]
    noise = math.sqrt(sum(variances) / len(variances)) if variances else None
    flaky = [tid for tid, t in tasks.items() if t.flaky]
    flat = [tid for tid, t in tasks.items() if t.pass_rate is not None and not t.discriminates]
    regime = regime_of(rate)
    levels = RunAlpha(DEFAULT_ALPHA, "spend", DEFAULT_DECISIONS).planned_levels()
    _, gate_warning = val_size_notes(len(tasks), levels, DEFAULT_ALPHA)
    calibration = Calibration(
        suite=summary.suite,
        split=split,
        agent=summary.agent,
        reps=reps,
        metric=metric,
        skill_hash=summary.skill_hash,
        pass_rate=None if rate is None else round(rate, 6),
        mean=None if mean_metric is None else round(mean_metric, 6),
        regime=regime,
        noise_sd=None if noise is None else round(noise, 6),
        flaky=flaky,
        non_discriminating=flat,
        rollouts_to_detect={
            f"+{e:.2f}": rollouts_to_detect(noise, len(scored), e) for e in (0.05, 0.10, 0.20)
        },
        levers=levers(regime, flaky, flat, len(tasks), reps) + ([gate_warning] if gate_warning else []),
        gate_levels={"first": round(levels[0], 6), "last": round(levels[-1], 6)},
        tasks_to_accept={"first": tasks_to_accept(levels[0]), "last": tasks_to_accept(levels[-1])},
        suite_size=suite_size_notes(len(tasks), levels, DEFAULT_ALPHA, _vetoed(suite, split, len(tasks)))
        + trigger_size_notes(_triggers(suite, split), levels),
        tasks=tasks,
        judge=_judge_noise(suite, out, metric, values),
    )
    write_json(out / "calibration.json", calibration)
    return calibration


def _triggers(suite: Suite, split: str) -> int:
    """The split's trigger tasks (queries)."""
    return sum(suite.scoring_mode(t) == "trigger" for t in suite.tasks(split))


def _vetoed(suite: Suite, split: str, n: int) -> int | None:
    """The split's tasks the harm veto looks at (its body tasks) when it holds trigger tasks, else None."""
    trigger = _triggers(suite, split)
    return n - trigger if trigger else None


def _judge_noise(
    suite: Suite, out: Path, metric: Metric, values: dict[str, list[float]]
) -> JudgeNoise | None:
    """The judge's noise, from the verdicts each judged rollout kept (needs samples >= 2 to show)."""
    from skilltune.judge.noise import suite_judge_noise
    from skilltune.runfiles import JudgeFile

    if not any(suite.scoring_mode(t) == "judge" for t in suite.all_tasks()):
        return None
    verdicts = [JudgeFile.read(p).samples for p in sorted((out / "rollouts" / "eval").glob("*/*/judge.json"))]
    return suite_judge_noise(suite, verdicts, metric=metric, replicate_scores=values)
