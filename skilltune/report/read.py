"""Turn a run directory into a ``RunSummary``: the one reading layer of report, view and status.

It only reads (through the run files' models and ``RunDir``), so it is safe on a run that is
going on in another process: a unit without its record yet is the one running (or, once the run
has ended, the one it ended in). Three depths: ``light`` (the small files, and the records of the
folders that may still grow: the seed's baseline, the unit without a record, the held-out test;
the list of runs and the live counts of ``view``), ``rollouts`` (every rollout record tallied as
well: status), ``detail`` (edits, diffs and cited trajectories too: the report).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Literal

from skilltune.errors import UsageError
from skilltune.report.heldout import held_out, heldout_dir, missing, run_comparison, transfers
from skilltune.report.lineage import read_lineage
from skilltune.report.model import (
    AuditFinding,
    BudgetLine,
    Heatmap,
    InfraError,
    RunState,
    RunSummary,
    StageCost,
    Totals,
    UnitView,
)
from skilltune.report.rollouts import RolloutTally, read_rollouts
from skilltune.report.sessions import unjournaled
from skilltune.report.units import (
    ProposerUsage,
    SkillVersions,
    add_detail,
    describe_pending,
    proposer_usage,
    set_origins,
    unit_view,
)
from skilltune.report.warnings import run_warnings
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    AuditFile,
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
from skilltune.textfmt import one_line

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
    pending = _pending(run, records, journal, state)
    light = depth == "light"
    metric = config.metric
    rollouts = read_rollouts(run, metric, ["step_0000", *(u.name for u in pending)] if light else None)
    seed_meta = SeedFile.read(run.seed_json)

    units = [unit_view(record, run.unit_dir(record.kind, record.index)) for record in records]
    proposer = {
        u.name: proposer_usage(run.unit_dir(u.kind, u.index)) for u in (pending if light else units + pending)
    }
    for view in pending:  # no record yet: what its folder holds
        tally = rollouts.units.get(view.name)
        if tally is not None:
            view.rollouts, view.tokens, view.cost_usd = tally.rollouts, tally.tokens, round(tally.usd, 6)
        view.tokens += proposer[view.name].tokens
        if (view.name, "gate") in rollouts.phases and view.decision != "after gate":
            view.decision = "in gate"  # the gate's stage event comes at its end
        if view.verdict == "unfinished":
            view.reason = f"the run ended {state} before this unit's verdict ({view.decision})"
    units = sorted(units + pending, key=lambda u: _position(u, config.epoch_steps))
    for view in units:
        usage = proposer.get(view.name)
        view.proposal_counts = usage.proposals if usage is not None else None
    set_origins(units)
    for position, view in enumerate(units):
        if not view.finished and not light:  # what it is testing: its candidate and edits
            done = [u for u in units[:position] if u.finished]
            describe_pending(view, run.unit_dir(view.kind, view.index), done, seed_meta.hash)
            if view.verdict == "unfinished" and view.edits:
                view.reason += f"; its candidate holds {len(view.edits)} edit(s)"
    asked = {name for name, usage in proposer.items() if usage.proposals is not None}
    stages = _stages(journal, rollouts, proposer, [u.name for u in units], asked)
    seconds: defaultdict[str, float] = defaultdict(float)
    for stage in stages:
        seconds[stage.unit] += stage.seconds
    for view in units:
        view.seconds = round(seconds[view.name], 3)

    summary = RunSummary(
        root=str(run.root), tag=config.tag, state=state, reason=reason, suite=config.suite,
        agent=config.agent, agents=[a.label for a in config.agents] if config.several else [],
        agents_gate=config.agents_gate if config.several else "", proposer=config.proposer, gate=config.gate, mode=config.mode,
        component=config.component, metric=metric,
        min_effect=_min_effect(config.gate, config.gate_options),
        started=journal[0].ts if journal else None, updated=journal[-1].ts if journal else None,
        planned_steps=config.total_steps, planned_units=config.total_steps + config.total_epochs,
        planned_rollouts=next((e.planned_rollouts for e in journal if isinstance(e, RunStart)), None),
        seed_val=rollouts.accuracy("step_0000", "eval", seed_meta.hash), units=units, stages=stages,
    )  # fmt: skip
    kept = [u for u in units if u.verdict == "keep"]
    summary.best_val = next((u.val_candidate for u in reversed(kept)), summary.seed_val)
    summary.best = kept[-1].candidate if kept else seed_meta.hash
    current = next((u for u in pending if u.verdict == "running"), None)
    if current is not None:
        summary.current = f"{current.name}: {current.decision}" if current.decision else current.name
        summary.eta_seconds = _eta(summary)
    comparison, source, note = run_comparison(run, seed_meta.hash, summary.best)
    if comparison is not None:
        tested = heldout_dir(run) if source else run.final  # where the comparison's rollouts are
        summary.held_out = held_out(comparison, summary, with_ci=not light, records=tested, source=source)
    else:
        summary.held_out_missing, summary.held_out_commands = missing(summary, config, run)
        summary.held_out_missing = " ".join(filter(None, [summary.held_out_missing, note]))
    summary.transfers = transfers(run, {seed_meta.hash, summary.best})
    summary.totals = _totals(rollouts, units, proposer, active_seconds(journal), light)
    summary.budgets = _budgets(config, summary.totals)
    summary.audit = read_audit(run)
    if light:
        return summary
    summary.heatmap = _heatmap(rollouts, summary.finished_units)
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
            folder = run.unit_dir(view.kind, view.index)
            if not view.finished and (folder / "candidate").is_dir():  # no record: its saved candidate
                view.candidate = versions.load(folder)
            versions.add(view.candidate, folder)
        for view in units:
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


def _pending(
    run: RunDir, done: list[UnitRecord], journal: list[JournalEvent], state: RunState
) -> list[UnitView]:
    """The units with a folder but no record: the one a live run is in (``running``: the newest), or
    the one a run ended in before its record (``unfinished``: stopped, out of budget, blocked, killed)."""
    finished = {(r.kind, r.index) for r in done}
    found = sorted(
        (folder.stat().st_mtime, kind, index, folder.name)
        for kind, index, folder in _unit_folders(run)
        if (kind, index) not in finished
    )
    views = []
    for position, (_, kind, index, name) in enumerate(found):
        stages = [e.stage for e in journal if isinstance(e, StageDone) and e.unit == name]
        running = state == "running" and position == len(found) - 1
        view = UnitView(
            name=name, kind="step" if kind == "step" else "epoch", index=index,
            epoch=0 if kind == "step" else index, verdict="running" if running else "unfinished",
            decision=f"after {stages[-1]}" if stages else "starting",
        )  # fmt: skip
        views.append(view)
    return views


def _position(unit: UnitView, epoch_steps: int) -> tuple[int, bool]:
    """Where a unit stands in the run: its step (an epoch update follows the step it closes)."""
    step = unit.index if unit.kind == "step" else unit.index * epoch_steps
    return step, unit.kind == "epoch"


def _stages(
    journal: list[JournalEvent],
    rollouts: RolloutTally,
    proposer: dict[str, ProposerUsage],
    order: list[str],
    asked: set[str],
) -> list[StageCost]:
    """Per (unit, stage): wall seconds from journal.jsonl's stage events, summed over sessions, and
    the time a session spent in a stage it never journaled (stopped or killed in it: sessions.py);
    rollouts, tokens and USD of the records of the stage's phase, each rollout run counted once (a
    record read back from disk or copied from a shared cache costs nothing again); the proposer's
    tokens and calls from the unit's reflections.json or slow_update.json. So the stages add up to
    the run's totals, a stage that never ended (a run stopped in it) included."""
    found: dict[tuple[str, str], StageCost] = {}
    for event in journal:
        if isinstance(event, StageDone):
            cost = found.setdefault((event.unit, event.stage), StageCost(unit=event.unit, stage=event.stage))
            cost.seconds = round(cost.seconds + event.seconds, 3)
            cost.calls = event.calls or 0
    for unit, stage, seconds in unjournaled(journal, order, rollouts.phases.keys(), asked):
        cost = found.setdefault((unit, stage), StageCost(unit=unit, stage=stage))
        cost.seconds = round(cost.seconds + seconds, 3)
    for (unit, phase), tally in rollouts.phases.items():
        stage = "compare" if unit.startswith("epoch") and phase == "train" else _PHASE_STAGE.get(phase, phase)
        cost = found.setdefault((unit, stage), StageCost(unit=unit, stage=stage))
        cost.rollouts += tally.rollouts
        cost.tokens += tally.tokens
        cost.usd = round(cost.usd + tally.usd, 6)
    for unit, usage in proposer.items():
        if usage.found:
            cost = found.setdefault((unit, usage.stage), StageCost(unit=unit, stage=usage.stage))
            cost.tokens += usage.tokens
            cost.calls = usage.calls
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


def _heatmap(rollouts: RolloutTally, units: list[UnitView]) -> Heatmap:
    tasks = rollouts.task_order
    cand = [[_cell(rollouts.task_mean(u.name, "gate", u.candidate, t)) for u in units] for t in tasks]
    inc = [[_cell(_incumbent_mean(rollouts, u, t)) for u in units] for t in tasks]
    return Heatmap(tasks=tasks, units=[u.name for u in units], candidate=cand, incumbent=inc)


def _incumbent_mean(rollouts: RolloutTally, unit: UnitView, task: str) -> float | None:
    """The incumbent's score on ``task`` over the replicates the unit's gate paired, in whichever
    folder they lie (the seed's baseline, an earlier decision's gate, this one's); a gate.json of
    schema 5 or older names none: the unit's own gate rollouts of the incumbent then."""
    if unit.incumbent_replicates:
        return rollouts.replicate_mean(unit.parent, task, unit.incumbent_replicates)
    return rollouts.task_mean(unit.name, "gate", unit.parent, task)


def _cell(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _totals(
    rollouts: RolloutTally,
    units: list[UnitView],
    proposer: dict[str, ProposerUsage],
    seconds: float,
    light: bool,
) -> Totals:
    """Rollouts, tokens and USD of every record (each rollout run counted once: what the budgets
    count) and the proposer's tokens; a light read tallies only the folders that may still grow (the
    baseline, the unit without a record, the held-out test) and adds what each unit record counts."""
    tally = rollouts.total
    proposed = sum(usage.tokens for usage in proposer.values())
    if light:
        done = [u for u in units if u.finished]
        return Totals(
            rollouts=tally.rollouts + sum(u.rollouts for u in done),
            tokens=tally.tokens + proposed + sum(u.tokens for u in done),
            usd=round(tally.usd + sum(u.cost_usd for u in done), 6),
            seconds=round(seconds, 3),
        )
    return Totals(
        rollouts=tally.rollouts, cached=tally.cached, tokens=tally.tokens + proposed,
        usd=round(tally.usd, 6), usd_estimated=tally.usd_estimated, seconds=round(seconds, 3),
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
        detail = "; ".join(
            f"{k}: {_in_words(v)}" for k, v in item.details.items() if v not in ([], {}, "", None)
        )
        findings.append(
            AuditFinding(check=item.check, message=f"{item.where}: {item.message}", detail=detail)
        )
    return findings


def _in_words(value: object, limit: int = 5) -> str:
    """A detail of an audit finding as a reader wants it, not as Python prints it: a list joined (the
    first ``limit``, then how many more), a quoted text in quotes with the rest of its mapping after it."""
    if isinstance(value, dict):
        rest = ", ".join(_in_words(v) for k, v in value.items() if k != "text")
        if isinstance(value.get("text"), str):
            return f"\u201c{one_line(value['text'], 120)}\u201d" + (f" ({rest})" if rest else "")
        return ", ".join(f"{k} {_in_words(v)}" for k, v in value.items())
    if isinstance(value, list):
        joiner = "; " if any(isinstance(v, dict) for v in value) else ", "
        more = f" and {len(value) - limit} more" if len(value) > limit else ""
        return joiner.join(_in_words(v) for v in value[:limit]) + more
    return str(value)
