"""``skilltune.train`` and ``skilltune.resume``: start or continue a training run.

``train`` checks every setting before anything is written, lays the run directory out
beside its final place and renames it in (config.json with secrets redacted, the seed,
allocation.md), then runs the loop under the run's lock. ``resume`` continues a run with
the settings it started with (see ``config.settings_for_resume``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skilltune.errors import UsageError
from skilltune.execute import Executor
from skilltune.progress import PlainReporter, Reporter
from skilltune.rollout.runner import RetryPolicy
from skilltune.rundir import RunDir, Terminal, TerminalState
from skilltune.runfiles import AuditFile, Comparison, Resumed, RunConfigFile, RunStart, SeedFile
from skilltune.skill import lint_candidate, load_skill
from skilltune.store import write_text
from skilltune.suite import Suite
from skilltune.textfmt import count
from skilltune.training.config import absolute_paths, config_file, make_config, settings_for_resume
from skilltune.training.context import RunContext, Setup
from skilltune.training.loop import execute
from skilltune.training.units import best_val, finished, incumbent, load_seed

# A run that ended so is over: resume refuses it (the others continue).
FINISHED: tuple[TerminalState, ...] = ("success", "no-progress")


class TrainResult(BaseModel):
    run_dir: str
    state: TerminalState
    reason: str
    seed_val: float | None
    best_val: float | None
    seed_hash: str
    best_hash: str
    steps: int
    kept: int
    comparison: Comparison | None = None
    audit_findings: int | None = None  # what the audit at the end found (None: no audit ran)


def _result(ctx: RunContext) -> TrainResult:
    done = finished(ctx.run, ctx.order)
    # execute() writes TERMINAL on every ending it returns from
    state, reason = ctx.run.terminal() or Terminal("crash", "the session wrote no TERMINAL line")
    comparison = Comparison.read(ctx.run.comparison) if ctx.run.comparison.is_file() else None
    audit = AuditFile.read(ctx.run.audit) if ctx.run.audit.is_file() else None
    return TrainResult(
        run_dir=str(ctx.run.root),
        state=state,
        reason=reason,
        seed_val=ctx.progress.seed_val,
        best_val=best_val(done, ctx.progress.seed_val),
        seed_hash=ctx.seed.hash,
        best_hash=incumbent(ctx.run, done, ctx.seed).hash,
        steps=sum(1 for r in done if r.kind == "step"),
        kept=sum(1 for r in done if r.verdict == "keep"),
        comparison=comparison,
        audit_findings=len(audit.findings) if audit is not None else None,
    )


def _allocation(setup: Setup) -> str:
    info = setup.proposer.allocation(setup.config.mode)
    lines = ["# Proposer allocation", "", f"- proposer: {info['proposer']}", f"- mode: {setup.config.mode}"]
    lines += [f"- {role}: {model}" for role, model in info["roles"].items()]
    lines.append("- the roles run as separate calls")
    return "\n".join(lines) + "\n"


def _check_places(runs_dir: str, suite: Suite) -> None:
    """Refuse run directories that would be written into the suite, or onto a file."""
    runs = Path(runs_dir)
    if runs.exists() and not runs.is_dir():
        raise UsageError(f"--runs-dir {runs} is a file; give a folder")
    if runs.resolve().is_relative_to(suite.root.resolve()):
        raise UsageError(
            f"--runs-dir {runs} lies inside the suite {suite.root}: runs would change the suite under themselves"
        )


def _check_findings(findings: str | None) -> None:
    if findings and Path(findings).is_dir():
        raise UsageError(f"--findings {findings} is a folder; give a file (runs append their findings to it)")


def _check_evidence(evidence_from: str | None, suite_hash: str) -> None:
    if not evidence_from:
        return
    source = RunDir(Path(evidence_from))
    if not source.config.is_file():
        raise UsageError(f"--evidence-from {source.root}: not a skilltune run directory (no config.json)")
    if RunConfigFile.read(source.config).suite_hash != suite_hash:
        raise UsageError(
            f"--evidence-from {source.root} ran on a different suite (its content hash differs): arms must share evidence of one suite"
        )


def train(
    suite: str | Path,
    skill: str | Path,
    *,
    tag: str,
    force: bool = False,
    reporter: Reporter | None = None,
    retry: RetryPolicy | None = None,
    shared_executor: Executor | None = None,
    **settings: Any,
) -> TrainResult:
    """Train ``skill`` on ``suite`` into ``runs_dir/tag``; see TrainConfig for ``settings``.
    ``shared_executor``: an executor to run on (e.g. one Ray cluster for several runs) instead of
    one made from the settings' ``executor``.

    Everything is checked before anything is written. Refuses an existing run
    directory unless ``force`` (then it starts over).
    """
    config = make_config(**absolute_paths({"suite": suite, "skill": skill, "tag": tag, **settings}))
    seed = load_skill(config.skill)
    setup = Setup.of(config, seed, retry, shared_executor)
    refused = setup.rollouts.refusal(seed)
    if refused is not None:
        raise UsageError(f"the seed skill: {refused}")
    _check_places(config.runs_dir, setup.suite)
    _check_evidence(config.evidence_from, setup.suite.content_hash)
    _check_findings(config.findings)
    plan = setup.plan
    first = plan.baseline + plan.step
    if config.budget_rollouts is not None and config.budget_rollouts < first:
        raise UsageError(
            f"--budget-rollouts {config.budget_rollouts} cannot pay for the seed's val pass and one full step "
            f"({first} rollouts: val {plan.val}x{plan.reps}, then {plan.explain_step()}); "
            f"raise it to at least {first} or lower --batch/--reps/--proposals"
        )
    run = RunDir(Path(config.runs_dir) / config.tag)
    reporter = reporter or PlainReporter()
    with run.lock():  # held from the existence check to the end: no second process can interleave
        if run.root.exists() and any(run.root.iterdir()):
            if not force:
                raise UsageError(
                    f"{run.root} exists: continue it with `skilltune resume {run.root}`, or pass --force to start over"
                )
            if not run.config.is_file():
                raise UsageError(
                    f"{run.root} is not a skilltune run directory; refusing to delete it with --force"
                )
        # Lay the run out beside its final place and rename it in: a kill never leaves half a run.
        staging = RunDir(run.root.parent / f".{config.tag}.staging")
        shutil.rmtree(staging.root, ignore_errors=True)
        try:
            seed.save(staging.seed_dir)
            SeedFile(main=seed.main, kind=seed.kind, fallback_name=seed.fallback_name, hash=seed.hash).write(
                staging.seed_json
            )
            config_file(config, setup.suite.content_hash, setup.suite.contract_hash).write(staging.config)
            write_text(staging.allocation, _allocation(setup))
            staging.journal(
                RunStart(tag=config.tag, planned_rollouts=setup.planned_rollouts, per_step=plan.step)
            )
            if run.root.exists():
                shutil.rmtree(run.root)
            staging.root.rename(run.root)
        finally:
            shutil.rmtree(staging.root, ignore_errors=True)
        ctx = RunContext(setup, run, reporter, setup.suite.content_hash)
        reporter.line(
            f"train {config.tag}: up to {plan.step} rollouts per step ({plan.explain_step()}), "
            f"at most {setup.planned_rollouts} in all for {count(config.total_steps, 'step')}, "
            f"{config.total_epochs} epoch update(s) and the held-out test"
        )
        if any(setup.suite.scoring_mode(t) == "judge" for t in setup.suite.all_tasks()):
            judge = setup.suite.judge
            reporter.line(
                f"judge: {judge.provider} {judge.effective_model or '(its default model)'}, "
                f"{judge.samples} verdict(s) per rollout (their tokens and USD count in the budgets)"
            )
        for issue in lint_candidate(seed):
            reporter.line(f"warning: the seed skill has a lint error (edits may not add new ones): {issue}")
        execute(ctx)
        return _result(ctx)


def resume(
    run_dir: str | Path,
    *,
    reporter: Reporter | None = None,
    retry: RetryPolicy | None = None,
    shared_executor: Executor | None = None,
    **given: Any,
) -> TrainResult:
    """Continue a run without TERMINAL, or one that ended stopped, exhausted, blocked or crash.

    ``given``: settings as ``train`` takes them. Only what cannot change the run's results may
    differ from the stored ones (budgets, workers, executor; redacted secrets must come back
    this way or through the environment); anything else is refused (UsageError).
    """
    run = RunDir(Path(run_dir))
    if not run.config.is_file():
        raise UsageError(f"{run_dir}: not a skilltune run directory (no config.json)")
    terminal = run.terminal()
    if terminal is not None and terminal.state in FINISHED:
        raise UsageError(
            f"{run_dir} already ended ({terminal.state}: {terminal.reason}); train a new tag to go further"
        )
    run.check_files()
    stored = RunConfigFile.read(run.config)
    config = settings_for_resume(stored, absolute_paths(given))
    _check_findings(config.findings)
    setup = Setup.of(config, load_seed(run), retry, shared_executor)
    reporter = reporter or PlainReporter()
    with run.lock():
        run.terminal_path.unlink(missing_ok=True)
        if run.stop_file.exists():  # the STOP that ended the last session must not end this one
            run.stop_file.unlink()
        if config != stored.settings():
            config_file(config, stored.suite_hash, stored.contract).write(run.config)
        ctx = RunContext(setup, run, reporter, stored.suite_hash)
        done = finished(run, ctx.order)
        run.journal(Resumed(units_done=len(done)))
        reporter.line(f"resume {config.tag}: {len(done)} unit(s) done")
        execute(ctx)
        return _result(ctx)
