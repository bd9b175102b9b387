"""The held-out comparison as the report shows it, or why a run has none and the command that makes one."""

from __future__ import annotations

import glob
import json
import math
import shlex
from pathlib import Path
from typing import Any

from skilltune.report.model import ArmView, HeldOut, PairView, RunSummary, TransferView
from skilltune.report.trigger import decisions, per_query
from skilltune.rundir import RunDir
from skilltune.runfiles import Comparison, Harm, RunFileError, TrainConfig, Transfer
from skilltune.store import REDACTED

# The prefix of an exhausted run's reason (training/budget.py's BudgetExhausted) -> the flag that raises it.
_BUDGET_FLAGS = {
    "rollout budget": "--budget-rollouts",
    "token budget": "--budget-tokens",
    "USD budget": "--budget-usd",
    "time budget": "--budget-hours",
}
_ENDED = {
    "exhausted": "ran out of budget",
    "stopped": "was stopped",
    "interrupted": "ended without finishing (its process died)",
    "blocked": "ended blocked",
    "crash": "crashed",
}


HELDOUT_SUFFIX = "-heldout"  # the --out of the compare command ``missing`` suggests: RUNDIR-heldout/


def heldout_dir(run: RunDir) -> Path:
    """Where the suggested ``skilltune compare`` writes (beside the run, so its rollouts never count
    in the run's budgets)."""
    return run.root.parent / f"{run.root.name}{HELDOUT_SUFFIX}"


def run_comparison(run: RunDir, seed: str, best: str) -> tuple[Comparison | None, str, str]:
    """The run's held-out comparison: its own comparison.json, else the one the suggested command
    wrote beside it when that compared this run's seed and best (arms S0 and best by skill hash).
    Returns (comparison, where it came from: "" for the run's own, else the folder's name, and a note
    on a file beside the run that was not taken: damaged, or of another best)."""
    if run.comparison.is_file():
        return Comparison.read(run.comparison), "", ""
    path = heldout_dir(run) / "comparison.json"
    if not path.is_file():
        return None, "", ""
    where = f"{path.parent.name}/comparison.json"
    try:
        comparison = Comparison.read(path)
    except RunFileError as exc:
        return None, "", f"{where} could not be read ({exc})."
    arms = {name: arm.skill_hash for name, arm in comparison.arms.items()}
    if arms.get("S0") != seed or arms.get("best") != best:
        tested = (arms.get("best") or "?")[:12]
        return None, "", f"{where} compares another best skill ({tested}, not {best[:12]}): run it again."
    return comparison, path.parent.name, ""


def held_out(
    comparison: Comparison, summary: RunSummary, with_ci: bool, records: Path, source: str = ""
) -> HeldOut:
    """The comparison as the report shows it; ``records``: the folder holding its rollouts (the
    run's final/, or the compare's folder beside the run), read for trigger decisions per query."""
    vals = {"S0": summary.seed_val, "best": summary.best_val}
    # trigger decisions per query from the records: not for a light read (the view's polls)
    loads = decisions(records) if with_ci and any(arm.trigger for arm in comparison.arms.values()) else {}
    arms = []
    for name, arm in comparison.arms.items():
        value = {"hard": arm.hard_acc, "soft": arm.soft_acc}.get(comparison.metric, arm.mixed)
        low = high = None
        if with_ci:
            low, high = _mean_ci(_task_means(arm.per_task))
        arms.append(
            ArmView(
                name=name,
                skill=arm.skill_hash[:12],
                mean=value,
                low=low,
                high=high,
                n_tasks=arm.n_tasks,
                n_rollouts=arm.n_rollouts,
                val=vals.get(name),
                trigger=per_query(loads.get(arm.skill_hash, {})),
                trigger_rollouts=arm.trigger,
            )
        )
    pairs = [
        PairView(
            a=p.a,
            b=p.b,
            diff=p.diff,
            low=p.ci95[0] if p.ci95 else None,
            high=p.ci95[1] if p.ci95 else None,
            p_value=p.p_value,
            verdict=p.verdict,
        )
        for p in comparison.pairs
    ]
    return HeldOut(
        split=comparison.split, metric=comparison.metric, reps=comparison.reps,
        contaminated=comparison.contaminated, arms=arms, pairs=pairs, source=source,
    )  # fmt: skip


def transfers(run: RunDir, skills: set[str]) -> list[TransferView]:
    """The transfer tables of this run's skills: first the run's own held-out test when it ran
    several agents (``final/transfer.json``), then ``RUNDIR-*/transfer.json`` beside the run
    (``skilltune compare S0=RUNDIR/seed best=RUNDIR/best_skill --agent A --agent B --out
    RUNDIR-transfer``) whose arms hold one of ``skills`` (hashes: the seed's, the best's), by
    folder name. Beside the run, not in it: the run's budgets and audit never count those rollouts."""
    views = []
    own = run.final / "transfer.json"
    if own.is_file():
        try:
            views.append(TransferView(folder=run.final.name, table=Transfer.read(own), own=True))
        except RunFileError as exc:
            views.append(TransferView(folder=run.final.name, table=None, problem=str(exc), own=True))
    for path in sorted(run.root.parent.glob(f"{glob.escape(run.root.name)}-*/transfer.json")):
        try:
            table = Transfer.read(path)
        except RunFileError as exc:  # someone else's file beside the run: said, not fatal to the report
            views.append(TransferView(folder=path.parent.name, table=None, problem=str(exc)))
            continue
        if skills & set(table.arms.values()):
            views.append(TransferView(folder=path.parent.name, table=table))
    return views


def hurt_agents(run: RunDir, best: str) -> list[Harm]:
    """The agents the run's held-out test per agent (final/transfer.json) says the skill ``best``
    (its hash) hurts: none when the run tested one agent, or tested another best."""
    path = run.final / "transfer.json"
    if not path.is_file():
        return []
    table = Transfer.read(path)
    return table.hurt() if table.arms.get("best") == best else []


def _task_means(per_task: dict[str, list[float | None]]) -> list[float]:
    out = []
    for scores in per_task.values():
        got = [s for s in scores if s is not None]
        if got:
            out.append(sum(got) / len(got))
    return out


def _mean_ci(values: list[float]) -> tuple[float | None, float | None]:
    """A 95% t-interval on the mean of per-task means, clipped to [0, 1] (a score's range)."""
    from skilltune.stats import mean, upper_bound

    if len(values) < 2:
        return None, None
    centre = mean(values)
    half = upper_bound(values, 0.975) - centre
    if not math.isfinite(half):
        return None, None
    return round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)


def missing(summary: RunSummary, config: TrainConfig, run: RunDir) -> tuple[str, list[str]]:
    """Why the run has no comparison.json (train writes it after the last unit, when something was
    kept and the suite has a test split), and the commands that make one."""
    root = shlex.quote(str(run.root))
    if summary.state == "running":
        return "The run is still going: the held-out test runs after its last unit.", []
    ended = _ENDED.get(summary.state)
    if ended is None:  # success or no-progress: the run ended as planned
        if summary.kept == 0:
            return "Nothing was kept: the best skill is the seed, so there is nothing to compare.", []
        return (
            "The suite has no test split, so the run held nothing out. Add one (test.jsonl) and compare "
            "the best skill with the seed:",
            [_compare(config, run)],
        )
    resume = f"skilltune resume {root}{_raise(summary, config)}"
    why = f"The run {ended} ({summary.reason}) before its held-out test, which runs after its last unit."
    if summary.state == "exhausted":
        how = "Raise the budget and resume: the remaining units run, then the held-out test."
    elif summary.state in ("blocked", "crash"):
        how = "Once the cause is fixed, resume: the remaining units run, then the held-out test."
    else:
        how = "Resume it: the remaining units run, then the held-out test."
    if summary.kept == 0:
        return f"{why} Nothing has been kept yet. {how}", [resume]
    return f"{why} {how} Or test the best skill kept so far as it is:", [resume, _compare(config, run)]


def _raise(summary: RunSummary, config: TrainConfig) -> str:
    """The flag raising the budget that ran out (`` --budget-rollouts N``), or nothing."""
    if summary.state != "exhausted":
        return ""
    kind = next((k for k in _BUDGET_FLAGS if summary.reason.startswith(k)), None)
    if kind is None:
        return ""
    flag = _BUDGET_FLAGS[kind]
    planned = summary.planned_rollouts
    if kind == "rollout budget" and planned and planned > (config.budget_rollouts or 0):
        return f" {flag} {planned}"  # the plan counts every gate at its cap: always enough
    limit = {
        "token budget": config.budget_tokens, "USD budget": config.budget_usd,
        "time budget": config.budget_hours, "rollout budget": config.budget_rollouts,
    }.get(kind)  # fmt: skip
    return f" {flag} N  (N above the {limit:g} set)" if limit is not None else f" {flag} N"


def _compare(config: TrainConfig, run: RunDir) -> str:
    """``skilltune compare`` of the seed and best_skill/ on the test split, as the run's own test."""
    words = [
        "skilltune", "compare", config.suite, f"S0={run.seed_dir}", f"best={run.best_dir}",
        "--agent", config.agent, *_options("--agent-opt", config.agent_options),
        "--split", "test", "--reps", str(config.test_reps), "--seed", str(config.seed),
        "--metric", config.metric, "--out", str(heldout_dir(run)),
    ]  # fmt: skip
    if config.prompt_variant != "cheap":
        words += ["--prompt-variant", config.prompt_variant]
    words += _options("--judge-opt", config.judge_options)
    # A secret is stored redacted in config.json: the user supplies it, not the redaction mark.
    secret = [
        f"{flag} {key}=..."
        for flag, options in (("--agent-opt", config.agent_options), ("--judge-opt", config.judge_options))
        for key, value in options.items()
        if value == REDACTED
    ]
    return shlex.join(words) + (f"  # and {', '.join(secret)} (not kept in config.json)" if secret else "")


def _options(flag: str, options: dict[str, Any]) -> list[str]:
    """The option flags as given, but for a secret (redacted in config.json: see ``_compare``)."""
    return [
        word
        for key, value in options.items()
        if value != REDACTED
        for word in (flag, f"{key}={_value(value)}")
    ]


def _value(value: Any) -> str:
    """``value`` as the option flags read it back (cli.app.parse_agent_opts: JSON when it parses,
    a list when it holds a comma, else text): plain text as it is, anything else as JSON."""
    if isinstance(value, str) and "," not in value:
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value)
