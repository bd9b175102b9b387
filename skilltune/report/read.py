"""Turn a run directory into a ``RunSummary``: the one reading layer of report, view and status.

It only reads (through the run files' models and ``RunDir``), so it is safe on a run that is
going on in another process: a unit without its record yet is the one running. Three depths:
``light`` (the small files and the records of the baseline and the held-out test: the list of runs), ``rollouts`` (every rollout record
tallied as well: status), ``detail`` (edits, diffs and cited trajectories too: the report).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Literal

from skilltune.errors import UsageError
from skilltune.report.lineage import read_lineage
from skilltune.report.model import (
    ArmView,
    AuditFinding,
    BudgetLine,
    Heatmap,
    HeldOut,
    InfraError,
    PairView,
    RunState,
    RunSummary,
    StageCost,
    Totals,
    UnitView,
)
from skilltune.report.rollouts import RunRollouts, read_rollouts
from skilltune.report.units import SkillVersions, add_detail, unit_view
from skilltune.report.warnings import run_warnings
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    AuditFile,
    Comparison,
    JournalEvent,
    RunConfigFile,
    RunFileError,
    RunStart,
    SeedFile,
    SessionEnd,
    SessionStart,
    StageDone,
    UnitRecord,
    active_seconds,
)
from skilltune.skill import Candidate

Depth = Literal["light", "rollouts", "detail"]
# The stage a rollout phase belongs to, per kind of unit folder (for USD per stage).
_PHASE_STAGE = {"train": "rollout", "screen": "screen", "gate": "gate", "eval": "baseline", "test": "compare"}


def is_run(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "seed.json").is_file()


def summarize(root: Path | str, depth: Depth = "detail") -> RunSummary:
    """Read the run at ``root``. Raises UsageError (exit 2) when it is not a run directory."""
    run = RunDir(Path(root))
    if not is_run(run.root):
        raise UsageError(f"{run.root}: not a run directory (no config.json and seed.json); pass runs/<tag>")
    stored = RunConfigFile.read(run.config)
    config = stored.settings()
    journal = run.read_journal()
    state, reason = _state(run, journal)
    records = _unit_records(run)
    metric = config.metric
    rollouts = read_rollouts(run, metric, "*" if depth != "light" else "step_0000")
    seed_meta = SeedFile.read(run.seed_json)

    units = [unit_view(record, run.unit_dir(record.kind, record.index)) for record in records]
    stages = _stages(journal, rollouts)
    seconds: defaultdict[str, float] = defaultdict(float)
    for stage in stages:
        seconds[stage.unit] += stage.seconds
    for view in units:
        view.seconds = round(seconds[view.name], 3)
    current = _current(run, records, journal) if state == "running" else None
    if current is not None:
        units.append(current)

    summary = RunSummary(
        root=str(run.root), tag=config.tag, state=state, reason=reason, suite=config.suite,
        agent=config.agent, proposer=config.proposer, gate=config.gate, mode=config.mode, metric=metric,
        min_effect=_min_effect(config.gate, config.gate_options),
        started=journal[0].ts if journal else None, updated=journal[-1].ts if journal else None,
        planned_steps=config.total_steps, planned_units=config.total_steps + config.total_epochs,
        planned_rollouts=next((e.planned_rollouts for e in journal if isinstance(e, RunStart)), None),
        seed_val=rollouts.accuracy("step_0000", "eval", seed_meta.hash), units=units, stages=stages,
    )  # fmt: skip
    kept = [u for u in units if u.verdict == "keep"]
    summary.best_val = next((u.val_candidate for u in reversed(kept)), summary.seed_val)
    summary.best = kept[-1].candidate if kept else seed_meta.hash
    if current is not None:
        summary.current = f"{current.name}: {current.decision}" if current.decision else current.name
        summary.eta_seconds = _eta(summary)
    if run.comparison.is_file():
        summary.held_out = _held_out(Comparison.read(run.comparison), summary, with_ci=depth != "light")
    summary.totals = _totals(rollouts, units, journal, depth == "light")
    summary.budgets = _budgets(config, summary.totals)
    summary.audit = read_audit(run)
    if depth == "light":
        return summary
    summary.heatmap = _heatmap(rollouts, [u for u in units if u.verdict != "running"])
    summary.lineage = read_lineage(run.skill_repo)
    summary.infra_errors = [
        InfraError(where=f.unit, task_id=f.task_id, status=f.status, reason=f.reason)
        for f in rollouts.failures
    ]
    summary.warnings = run_warnings(summary, rollouts)
    if depth == "detail":
        seed_stub = Candidate({seed_meta.main: ""}, seed_meta.main, seed_meta.kind, seed_meta.fallback_name)
        versions = SkillVersions(run, Candidate.load(run.seed_dir, seed_stub))
        for view in units:
            versions.add(view.candidate, run.unit_dir(view.kind, view.index))
        for view in units:
            if view.verdict != "running":
                add_detail(view, run, rollouts, versions)
    return summary


def _state(run: RunDir, journal: list[JournalEvent]) -> tuple[RunState, str]:
    terminal = run.terminal()
    if terminal is not None:
        return terminal
    starts = [i for i, e in enumerate(journal) if isinstance(e, SessionStart)]
    if not starts:
        return "interrupted", "no session has started"
    last = starts[-1]
    start = journal[last]
    assert isinstance(start, SessionStart)
    ended = any(isinstance(e, SessionEnd) for e in journal[last:])
    if not ended and process_alive(start.pid):
        return "running", f"pid {start.pid}"
    return (
        "interrupted",
        f"the process ended without a TERMINAL line: `skilltune resume {run.root}` continues",
    )


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unit_folders(run: RunDir) -> list[tuple[str, int, Path]]:
    """(kind, index, folder) of every unit folder (step_0000, the seed's baseline, is no unit)."""
    found = []
    for folder in run.steps.glob("*_*"):
        kind, _, index = folder.name.partition("_")
        if kind in ("step", "epoch") and index.isdigit() and int(index) > 0:
            found.append((kind, int(index), folder))
    return found


def _unit_records(run: RunDir) -> list[UnitRecord]:
    """The finished units in run order (an epoch update follows the step it closes)."""
    found = [run.unit_record(kind, index) for kind, index, _ in _unit_folders(run)]
    return sorted((r for r in found if r is not None), key=lambda r: (r.step, r.kind == "epoch"))


def _current(run: RunDir, done: list[UnitRecord], journal: list[JournalEvent]) -> UnitView | None:
    """The unit a live run is in: the newest unit folder without a record, and its last stage."""
    finished = {(r.kind, r.index) for r in done}
    pending = [
        (folder.stat().st_mtime, kind, index, folder.name)
        for kind, index, folder in _unit_folders(run)
        if (kind, index) not in finished
    ]
    if not pending:
        return None
    _, kind, index, name = max(pending)
    stages = [e.stage for e in journal if isinstance(e, StageDone) and e.unit == name]
    return UnitView(
        name=name,
        kind="step" if kind == "step" else "epoch",
        index=index,
        epoch=0 if kind == "step" else index,
        verdict="running",
        decision=f"after {stages[-1]}" if stages else "starting",
    )


def _stages(journal: list[JournalEvent], rollouts: RunRollouts) -> list[StageCost]:
    """Per (unit, stage): wall seconds summed over sessions; rollouts, tokens and calls of the stage's
    last event (a resumed stage reports the whole stage again); USD from the rollouts of its phase."""
    found: dict[tuple[str, str], StageCost] = {}
    for event in journal:
        if not isinstance(event, StageDone):
            continue
        key = (event.unit, event.stage)
        cost = found.setdefault(key, StageCost(unit=event.unit, stage=event.stage))
        cost.seconds = round(cost.seconds + event.seconds, 3)
        cost.rollouts = event.rollouts or 0
        cost.tokens = (event.tokens_in or 0) + (event.tokens_out or 0)
        cost.calls = event.calls or 0
    for (unit, phase), tally in rollouts.phases.items():
        stage = "compare" if unit.startswith("epoch") and phase == "train" else _PHASE_STAGE.get(phase, phase)
        cost = found.setdefault((unit, stage), StageCost(unit=unit, stage=stage))
        cost.usd = round(cost.usd + tally.usd, 6)
    return list(found.values())


def _eta(summary: RunSummary) -> float | None:
    done = summary.finished_units
    if not done:
        return None
    per_unit = sum(u.seconds for u in done) / len(done)
    return max(0, summary.planned_units - len(done)) * per_unit


def _min_effect(gate: str, settings: dict[str, object]) -> float | None:
    from skilltune.gate import gate_options

    options = gate_options(gate, settings)
    return options.smallest_gain() if options is not None else None


def _held_out(comparison: Comparison, summary: RunSummary, with_ci: bool) -> HeldOut:
    vals = {"S0": summary.seed_val, "best": summary.best_val}
    arms = []
    for name, arm in comparison.arms.items():
        value = {"hard": arm.hard_acc, "soft": arm.soft_acc}.get(comparison.metric, arm.mixed)
        low = high = None
        if with_ci:
            low, high = _mean_ci([s for s in _task_means(arm.per_task)])
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
        contaminated=comparison.contaminated, arms=arms, pairs=pairs,
    )  # fmt: skip


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


def _heatmap(rollouts: RunRollouts, units: list[UnitView]) -> Heatmap:
    tasks = rollouts.task_order
    cand = [[_cell(rollouts, u.name, u.candidate, t) for u in units] for t in tasks]
    inc = [[_cell(rollouts, u.name, u.parent, t) for u in units] for t in tasks]
    return Heatmap(tasks=tasks, units=[u.name for u in units], candidate=cand, incumbent=inc)


def _cell(rollouts: RunRollouts, unit: str, candidate: str, task: str) -> float | None:
    value = rollouts.task_mean(unit, "gate", candidate, task)
    return None if value is None else round(value, 4)


def _totals(rollouts: RunRollouts, units: list[UnitView], journal: list[JournalEvent], light: bool) -> Totals:
    """Rollouts, tokens and USD of every record, and the proposer's tokens (which the unit records
    count); a light read (the records of the baseline and the held-out test only) adds what the
    unit records count instead."""
    tally = rollouts.total
    seconds = round(active_seconds(journal), 3)
    if light:
        return Totals(
            rollouts=tally.rollouts + sum(u.rollouts for u in units),
            tokens=tally.tokens + sum(u.tokens for u in units),
            usd=round(tally.usd + sum(u.cost_usd for u in units), 6),
            seconds=seconds,
        )
    agents = sum(rollouts.units[u.name].tokens for u in units if u.name in rollouts.units)
    proposer = max(0, sum(u.tokens for u in units) - agents)
    return Totals(
        rollouts=tally.rollouts, cached=tally.cached, tokens=tally.tokens + proposer,
        usd=round(tally.usd, 6), usd_estimated=tally.usd_estimated, seconds=seconds,
        statuses=dict(sorted(tally.statuses.items())),
    )  # fmt: skip


def _budgets(config: RunConfigFile | object, totals: Totals) -> list[BudgetLine]:
    lines = []
    for name, limit, spent in (
        ("rollouts", getattr(config, "budget_rollouts", None), totals.rollouts),
        ("tokens", getattr(config, "budget_tokens", None), totals.tokens),
        ("USD", getattr(config, "budget_usd", None), totals.usd),
        ("hours", getattr(config, "budget_hours", None), totals.seconds / 3600),
    ):
        if limit is not None:
            lines.append(BudgetLine(name=name, limit=float(limit), spent=round(float(spent), 4)))
    return lines


def read_audit(run: RunDir) -> list[AuditFinding] | None:
    """The findings of ``skilltune audit`` (audit.json, written by train at the end); None when the
    run has none. A damaged or unreadable audit.json is shown as a finding, not an error."""
    if not run.audit.is_file():
        return None
    try:
        audit = AuditFile.read(run.audit)
    except RunFileError as exc:
        return [AuditFinding(check="audit.json", message=str(exc))]
    findings = []
    for item in audit.findings:
        detail = "; ".join(f"{k}: {v}" for k, v in item.details.items())
        findings.append(
            AuditFinding(check=item.check, message=f"{item.where}: {item.message}", detail=detail)
        )
    return findings
