"""Commands that check and measure one skill: validate, lint, smoke, agents, run, calibrate.

Each command imports what it runs when it runs: registering the commands (``--help``,
``--version``) loads none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from skilltune.cli.app import app, err, out, progress_bar
from skilltune.cli.options import (
    ForceOpt,
    NoProgressOpt,
    RequiredSkillOpt,
    SkillOpt,
    SuiteArg,
    no_skill_option,
    out_folder,
    out_option,
    skill_or_none,
)
from skilltune.cli.settings import command_settings, settings_command
from skilltune.errors import SkilltuneError

if TYPE_CHECKING:
    from skilltune.measure.evaluate import EvalSummary


@app.command(epilog="Example: skilltune validate examples/mock-demo/suite --agent openai")
def validate(
    suite: SuiteArg,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Also check that this agent can run every task.")
    ] = None,
) -> None:
    """Check a suite and report every problem as file:line: message. Writes nothing."""
    from skilltune.suite import load_suite, read_suite

    loaded, found = read_suite(suite)
    for problem in found:
        err.print(str(problem))
    problems = [p for p in found if not p.warning]
    if problems:
        warned = len(found) - len(problems)
        err.print(
            f"{len(problems)} problem(s) in {suite}" + (f" (and {warned} warning(s))" if warned else "")
        )
        raise typer.Exit(2)
    if loaded is None:  # not valid, yet no problem says why: load_suite's error does
        loaded = load_suite(suite)
    if agent is not None:
        from skilltune.agents import get_backend, parse_agent_options
        from skilltune.rollout.workspace import check_target

        backend = get_backend(agent)
        options = parse_agent_options(backend, {})
        check_target(backend, options, loaded.all_tasks(), suite=loaded, preflight=False)
    counts = ", ".join(f"{s} {len(t)}" for s, t in loaded.splits.items() if t)
    out.print(f"ok: {suite} ({loaded.kind} suite; tasks: {counts}; contract {loaded.contract_hash[:12]})")


_RUN_OUT = "runs/eval-<skill>-<split>-s<seed>"  # --out when not given


@app.command(
    cls=settings_command("RunSettings"),
    epilog="Example: skilltune run examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock --split val --reps 3 --out runs/demo-eval",
)
def run(
    ctx: typer.Context,
    suite: SuiteArg,
    skill: SkillOpt = None,
    no_skill: Annotated[bool, no_skill_option("Evaluate")] = False,
    out_dir: Annotated[Path | None, out_option(_RUN_OUT)] = None,
    force: ForceOpt = False,
    quiet: NoProgressOpt = False,
) -> None:
    """Evaluate one skill: one rollout per (task, replicate), a table, and summary.json."""
    from skilltune.measure.evaluate import evaluate
    from skilltune.settings import RunSettings

    settings = command_settings(ctx, RunSettings)
    candidate = skill_or_none(skill, no_skill, "run the agent")
    name = candidate.name if candidate else "noskill"
    target = out_folder(out_dir, _RUN_OUT, skill=name, split=settings.split, seed=settings.seed)
    with progress_bar(quiet) as report:
        summary = evaluate(suite, candidate, settings, out=target, force=force, on_record=report)
    print_summary(summary, target)
    out.print(f"\nrecords: {target / 'rollouts' / 'eval'}\nsummary: {target / 'summary.json'}")


def print_summary(summary: EvalSummary, folder: Path) -> None:
    """The evaluation's tables; ``folder``: the run's --out (its records give the trigger decisions
    per query)."""
    from skilltune.textfmt import fmt

    title = f"{summary.skill_name or 'no skill'} on {summary.split} ({summary.agent}, {summary.reps} rep(s), seed {summary.seed})"
    table = Table(title=title, title_justify="left")
    for col in ("task", "n", "hard", "soft", "mixed", "status"):
        table.add_column(col, justify="left" if col in ("task", "status") else "right")
    for task_id, s in summary.per_task.items():
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()))
        table.add_row(task_id, str(s.n), fmt(s.hard), fmt(s.soft), fmt(s.mixed), statuses)
    statuses = ", ".join(f"{k} {v}" for k, v in summary.statuses.items())
    table.add_section()
    table.add_row(
        "overall",
        str(summary.n_rollouts),
        fmt(summary.hard_acc),
        fmt(summary.soft_acc),
        fmt(summary.mixed),
        statuses,
    )
    out.print(table)
    from skilltune.cli.compare import print_trigger

    print_trigger(folder, "eval", {summary.skill_name or "no skill": (summary.skill_hash, summary.trigger)})
    for name, totals in summary.per_suite.items():
        out.print(
            f"suite {name}: {totals.n_tasks} task(s), hard {fmt(totals.hard)}, soft {fmt(totals.soft)}, "
            f"mixed {fmt(totals.mixed)}"
        )
    if summary.judge_tokens:
        out.print(f"judge: {summary.judge_tokens} tokens, {summary.judge_cost_usd:.4f} USD")
    if summary.n_cached:
        out.print(f"{summary.n_cached} of {summary.n_rollouts} rollouts came from the cache (not run again)")
    if summary.contaminated:
        out.print(
            "[yellow]warning:[/yellow] infra errors (or unscored rollouts) remain after retries: "
            "these rollouts are not scored",
            markup=True,
        )


@app.command(
    cls=settings_command(
        "RolloutSettings", ("agent", "agent_options", "sandbox", "prompt_variant", "judge_options")
    ),
    epilog="Example: skilltune smoke examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock",
)
def smoke(
    ctx: typer.Context,
    suite: SuiteArg,
    skill: RequiredSkillOpt,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Keep the smoke rollouts here (default: a temporary folder, kept only on a failure).",
        ),
    ] = None,
) -> None:
    """Preflight (requirements, tools, agent CLI, judge, sandbox) and one rollout per split, with a
    canary planted beside the suite; exit 1 on any problem."""
    from skilltune.measure.smoke import smoke as run_smoke
    from skilltune.settings import RolloutSettings

    report = run_smoke(suite, skill, command_settings(ctx, RolloutSettings), out=out_dir)
    for check in report.checks:
        mark = "[green]ok  [/green]" if check.ok else "[red]FAIL[/red]"
        out.print(f"{mark} {check.name}" + (f": {check.detail}" if check.detail else ""), markup=True)
    if report.infra_error is not None:  # nothing about the suite was learnt: the endpoint failed
        err.print(
            f"[red]error:[/red] every smoke rollout ended infra_error; the last error: {report.infra_error}",
            markup=True,
        )
        raise typer.Exit(3)
    if not report.ok:
        raise typer.Exit(1)


@app.command(epilog="Example: skilltune agents")
def agents() -> None:
    """List agent backends: installed or not, version, sealed or not, what to fix, what each cannot do."""
    from skilltune.agents import AGENTS, get_backend
    from skilltune.sandbox import resolve, rollout_sandbox

    seal = resolve("auto")
    sealed = {"bwrap": "yes (bwrap)", "inert": "no process", "none": "NO"}
    table = Table()
    for col in ("agent", "installed", "version", "sealed", "skill loads", "fix / notes"):
        table.add_column(col, overflow="fold")
    for name in AGENTS.names():
        try:
            backend = get_backend(name)
            status = backend.check()
        except SkilltuneError as exc:  # a broken plug-in is reported, not fatal to the listing
            table.add_row(name, "error", "-", "-", "-", str(exc))
            continue
        notes = [*([status.fix] if status.fix else []), *status.notes]
        if seal.sealed and backend.seal_support == "none":
            notes.append("this backend cannot run sealed")
        kind = rollout_sandbox(seal, backend.seal_support)
        loads = (
            "no" if not backend.reports_skill_loads else "native" if backend.loads_need_native else "reported"
        )
        installed = "yes" if status.installed else "no"
        table.add_row(name, installed, status.version or "-", sealed[kind], loads, "; ".join(notes))
    out.print(table)
    out.print(
        "skill loads: whether the backend reports if the agent loaded the skill (trigger tasks need it); "
        "native: with the skill folder placed natively (placement=native, the default), read from the CLI's events"
    )
    out.print(f"sandbox (--sandbox auto): {seal.describe()}")


@app.command(epilog="Example: skilltune lint examples/mock-demo/skill")
def lint(skill: Annotated[Path, typer.Argument(help="Skill folder or single instruction file.")]) -> None:
    """Lint a skill: front matter, body size, links to files that exist, protected blocks."""
    from skilltune.skill import lint_candidate, load_skill

    candidate = load_skill(skill, check_front_matter=False)
    issues = lint_candidate(candidate)
    for issue in issues:
        out.print(
            f"{skill / issue.file if candidate.kind == 'folder' else skill}{':' + str(issue.line) if issue.line else ''}: error: {issue.message}"
        )
    if issues:
        raise typer.Exit(1)
    out.print(f"ok: {candidate.name} ({candidate.short}), {len(candidate.files)} file(s)")


# --- train / resume / compare -----------------------------------------------------------------


_CALIBRATE_OUT = "runs/calibrate-<skill>-<split>"  # --out when not given


@app.command(
    cls=settings_command("CalibrateSettings"),
    epilog="Example: skilltune calibrate examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock --reps 3 --out runs/calibrate-demo",
)
def calibrate(
    ctx: typer.Context,
    suite: SuiteArg,
    skill: SkillOpt = None,
    no_skill: Annotated[bool, no_skill_option("Calibrate")] = False,
    out_dir: Annotated[Path | None, out_option(_CALIBRATE_OUT)] = None,
    force: ForceOpt = False,
) -> None:
    """Pass rates, regime, flaky and non-discriminating tasks, noise, and levers: can a gate select here?"""
    from skilltune.measure.calibrate import calibrate as skilltune_calibrate
    from skilltune.settings import CalibrateSettings
    from skilltune.textfmt import fmt

    settings = command_settings(ctx, CalibrateSettings)
    split, reps, metric = settings.split, settings.reps, settings.metric
    candidate = skill_or_none(skill, no_skill, "calibrate the agent")
    name = candidate.name if candidate else "noskill"
    target = out_folder(out_dir, _CALIBRATE_OUT, skill=name, split=split)
    result = skilltune_calibrate(suite, candidate, settings, out=target, force=force)
    table = Table(
        title=f"calibration on {split}: {reps} rep(s) per task, {result.agent}", title_justify="left"
    )
    for col in ("task", "pass rate", metric, "sd", "flags"):
        table.add_column(col, justify="left" if col in ("task", "flags") else "right")
    for task_id, t in result.tasks.items():
        flags = ", ".join(f for f, on in (("flaky", t.flaky), ("flat", not t.discriminates)) if on)
        table.add_row(task_id, fmt(t.pass_rate), fmt(t.mean), fmt(t.sd), flags)
    out.print(table)
    out.print(
        f"overall pass rate {fmt(result.pass_rate)}, {metric} {fmt(result.mean)}: regime [bold]{result.regime}[/bold]",
        markup=True,
    )
    out.print(f"noise (within-task sd of {metric}): {fmt(result.noise_sd)}")
    n_tasks = max(1, len(result.tasks))
    detect = ", ".join(
        f"{k}: {v} ({v // n_tasks} pass{'es' if v // n_tasks != 1 else ''})" if v is not None else f"{k}: -"
        for k, v in result.rollouts_to_detect.items()
    )
    out.print(
        "paired rollouts per arm a fixed test needs (alpha 0.01, power 0.8; whole passes over the "
        f"{n_tasks} tasks) to see a gain of {detect}"
    )
    for lever in result.levers:
        out.print(f"- {lever}")
    for line in result.suite_size:
        out.print(line, markup=False)
    if result.judge is not None:
        if result.judge.rollouts:
            out.print(f"judge noise: {result.judge.summary()}")
        else:
            out.print(
                f"judge noise: not measured ({result.judge.suite_samples} verdict per rollout); run "
                f"`skilltune judge agreement {suite} --rollouts {target}` to re-judge these rollouts and measure it"
            )
    out.print(f"\ncalibration: {target / 'calibration.json'}")
