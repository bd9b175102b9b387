"""The train and resume commands."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from skilltune.cli.app import (
    AgentOpts,
    CacheOpt,
    JudgeOpts,
    SuiteArg,
    app,
    err,
    guarded,
    out,
    parse_agent_opts,
)
from skilltune.cli.compare import print_comparison
from skilltune.errors import UsageError
from skilltune.score.base import Metric
from skilltune.textfmt import one_line

if TYPE_CHECKING:  # the training stack loads when a command runs, not for --help or --version
    from skilltune.progress import Reporter
    from skilltune.train import TrainResult

# Options of both train and resume (a resumed run may raise its budgets and change its workers).
BudgetRolloutsOpt = Annotated[int | None, typer.Option(min=1, help="Most rollouts to spend (default: none).")]
BudgetTokensOpt = Annotated[
    int | None, typer.Option(min=1, help="Most tokens, agents and proposer (default: none).")
]
BudgetUsdOpt = Annotated[
    float | None, typer.Option(min=0.0, help="Most USD, reported or estimated (default: none).")
]
BudgetHoursOpt = Annotated[float | None, typer.Option(min=0.0, help="Most active hours (default: none).")]
WorkersOpt = Annotated[int | None, typer.Option(min=1, help="Rollouts in parallel (default 4).")]
SuperviseOpt = Annotated[
    bool, typer.Option("--supervise", help="Relaunch on a crash; keep the machine awake.")
]
FindingsOpt = Annotated[
    Path | None,
    typer.Option(
        "--findings", help="A findings file shared across runs: the finished run appends its entry once."
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="No live view and no progress lines; warnings and the result are still printed."
    ),
]


def _reporter(quiet: bool) -> Reporter:
    from skilltune.progress import LiveReporter, PlainReporter

    if not quiet and err.is_terminal:
        return LiveReporter(err)
    return PlainReporter(quiet=quiet)


def read_config_file(path: Path) -> dict[str, Any]:
    """A TOML file of train settings (keys as the flags, with - or _), flags override it."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--config {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--config {path} is a folder; give a TOML file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; save the TOML file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    settings = {key.replace("-", "_"): value for key, value in raw.items()}
    from skilltune.train import TrainConfig

    known = set(TrainConfig.model_fields) | {"suite"}
    unknown = sorted(key for key in settings if key not in known)
    if unknown:
        raise UsageError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    for table in ("agent_options", "proposer_options", "gate_options", "judge_options", "edit_budget"):
        if table in settings and not isinstance(settings[table], dict):
            raise UsageError(f"{path}: {table} must be a table ([{table}] with key = value lines)")
    return settings


def print_units(run_dir: Path) -> None:
    """The run's results.tsv as a table (the figures come from the run directory)."""
    results = run_dir / "results.tsv"
    if not results.is_file():
        return
    rows = [line.split("\t") for line in results.read_text(encoding="utf-8").splitlines()]
    header, body = rows[0], rows[1:]
    index = {name: i for i, name in enumerate(header)}
    table = Table(title="units (results.tsv)", title_justify="left", caption_justify="left")
    for col in ("step", "phase", "verdict", "cand", "inc", "rollouts"):
        table.add_column(
            col, no_wrap=True, min_width=len(col), justify="left" if col in ("phase", "verdict") else "right"
        )
    table.add_column("edits / reason")

    def num(text: str) -> str:
        return f"{float(text):.3f}" if text else "-"

    for row in body:
        get = {name: row[i] for name, i in index.items()}
        table.add_row(
            get["step"], get["phase"], get["verdict"], num(get["val_candidate"]), num(get["val_incumbent"]),
            get["rollouts"], one_line(get["description"], 44),
        )  # fmt: skip
    table.caption = "cand / inc: val score of the candidate and the incumbent"
    out.print(table)


def _finish_run(result: TrainResult) -> None:
    from skilltune.textfmt import fmt

    print_units(Path(result.run_dir))
    out.print(f"\n[bold]{result.state}[/bold]: {result.reason}", markup=True)
    out.print(
        f"seed val {fmt(result.seed_val)}, best val {fmt(result.best_val)}; {result.kept} unit(s) kept in {result.steps} step(s)"
    )
    if result.comparison is not None:
        print_comparison(result.comparison)
    if result.audit_findings:
        out.print(
            f"\n[yellow]warning:[/yellow] the audit found {result.audit_findings} problem(s) "
            f"(audit.json): `skilltune audit {result.run_dir}` lists them",
            markup=True,
        )
    run = Path(result.run_dir)
    print_gate_share(run)
    files = [f"run: {run}", f"results: {run / 'results.tsv'}"]
    if (run / "best_skill").exists():
        files.append(f"best skill: {run / 'best_skill'}")
    out.print("\n" + "\n".join(files))
    if result.state in ("blocked", "crash"):
        raise typer.Exit(3)


def print_gate_share(run_dir: Path) -> None:
    """What the gate cost of the run's training rollouts (from the journal)."""
    from skilltune.rundir import RunDir
    from skilltune.train.budget import stage_rollouts

    stages = stage_rollouts(RunDir(run_dir))
    training = sum(n for stage, n in stages.items() if stage != "test")
    if training:
        gate = stages.get("gate", 0)
        out.print(
            f"rollouts: {training} in training, {gate} of them in the gate ({gate / training:.0%}); "
            f"{stages.get('test', 0)} in the held-out test"
        )


@app.command(
    epilog="Example: skilltune train examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock --proposer mock --tag demo --max-steps 8 --seed 1"
)
@guarded
def train(
    suite: SuiteArg,
    skill: Annotated[
        Path | None, typer.Option("--skill", "-s", help="Seed skill folder or instruction file.")
    ] = None,
    tag: Annotated[str | None, typer.Option(help="Run name: the run lives in RUNS_DIR/TAG.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Target agent (default mock).")] = None,
    proposer: Annotated[
        str | None, typer.Option(help="Proposer: mock, or a model backend (default mock).")
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="patch (anchored edits) or rewrite (whole document).")
    ] = None,
    gate: Annotated[str | None, typer.Option(help="Gate: sequential (default), paired-z or strict.")] = None,
    gate_opt: Annotated[
        list[str] | None,
        typer.Option(
            "--gate-opt", help="Gate option key=value: max_reps, min_effect, futility_confidence, rho."
        ),
    ] = None,
    alpha: Annotated[
        float | None, typer.Option(help="Run-wide error rate of the sequential gate (default 0.05).")
    ] = None,
    alpha_policy: Annotated[
        str | None,
        typer.Option(help="spend (default: family-wise, any dependence) or lord (alpha-investing)."),
    ] = None,
    metric: Annotated[
        Metric | None, typer.Option(help="Gate metric: hard, soft or mixed (default mixed).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Steps to run (default 10).")] = None,
    epochs: Annotated[
        int | None,
        typer.Option(min=1, help="Epochs to run: at most epochs x --epoch-steps steps (and --max-steps)."),
    ] = None,
    epoch_steps: Annotated[
        int | None, typer.Option(min=1, help="Steps per epoch; a slow update follows each (default 5).")
    ] = None,
    batch: Annotated[int | None, typer.Option(min=1, help="Train minibatch size (default 8).")] = None,
    reps: Annotated[
        int | None, typer.Option(min=1, help="Replicates per task in train and gate passes (default 1).")
    ] = None,
    test_reps: Annotated[
        int | None, typer.Option(min=1, help="Replicates per task in the final test (default 3).")
    ] = None,
    screen: Annotated[
        bool | None,
        typer.Option("--screen/--no-screen", help="Screen candidates on the train batch first (default on)."),
    ] = None,
    budget_rollouts: BudgetRolloutsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_usd: BudgetUsdOpt = None,
    budget_hours: BudgetHoursOpt = None,
    patience: Annotated[
        int | None, typer.Option(min=1, help="Discarded candidates in a row that end the run (default 5).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed (default 0).")] = None,
    workers: WorkersOpt = None,
    runs_dir: Annotated[Path | None, typer.Option(help="Where runs live (default ./runs).")] = None,
    evidence_from: Annotated[
        Path | None, typer.Option(help="Use the train rollouts recorded by another run.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file with any of these settings; flags override it.")
    ] = None,
    agent_opt: AgentOpts = None,
    proposer_opt: Annotated[
        list[str] | None, typer.Option("--proposer-opt", help="Proposer option key=value (repeatable).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Start over if the tag exists.")] = False,
    cache: CacheOpt = None,
    executor: Annotated[str | None, typer.Option(help="Where rollouts run: local (default) or ray.")] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="A Ray cluster to join (default: a local one).")
    ] = None,
    prompt_variant: Annotated[
        str | None,
        typer.Option(help="skill-trainer's prompt variant: cheap (default) or full; reaches rubric.py."),
    ] = None,
    judge_opt: JudgeOpts = None,
    fresh: Annotated[
        bool | None, typer.Option("--fresh/--no-fresh", help="Run rollouts even when --cache holds them.")
    ] = None,
    resume_run: Annotated[
        bool, typer.Option("--resume", help="Continue the run under this tag (as skilltune resume).")
    ] = False,
    findings: FindingsOpt = None,
    supervise_run: SuperviseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train a skill: steps of rollout, reflect, merge, edit, gate; then a held-out comparison."""
    from skilltune.supervise import supervise
    from skilltune.train import resume as skilltune_resume
    from skilltune.train import train as skilltune_train

    if resume_run and force:
        raise UsageError("--resume continues the run and --force starts it over: give one of them")
    settings: dict[str, Any] = read_config_file(config) if config else {}
    flags = dict(
        skill=skill,
        tag=tag,
        agent=agent,
        proposer=proposer,
        mode=mode,
        gate=gate,
        metric=metric,
        alpha=alpha,
        alpha_policy=alpha_policy,
        max_steps=max_steps,
        epochs=epochs,
        epoch_steps=epoch_steps,
        batch=batch,
        reps=reps,
        test_reps=test_reps,
        screen=screen,
        budget_rollouts=budget_rollouts,
        budget_tokens=budget_tokens,
        budget_usd=budget_usd,
        budget_hours=budget_hours,
        patience=patience,
        seed=seed,
        workers=workers,
        runs_dir=runs_dir,
        evidence_from=evidence_from,
        cache=cache,
        fresh=fresh,
        executor=executor,
        ray_address=ray_address,
        prompt_variant=prompt_variant,
        findings=findings,
    )
    settings.update({k: str(v) if isinstance(v, Path) else v for k, v in flags.items() if v is not None})
    settings["agent_options"] = settings.get("agent_options", {}) | parse_agent_opts(agent_opt)
    settings["proposer_options"] = settings.get("proposer_options", {}) | parse_agent_opts(proposer_opt)
    settings["gate_options"] = settings.get("gate_options", {}) | parse_agent_opts(gate_opt)
    settings["judge_options"] = settings.get("judge_options", {}) | parse_agent_opts(judge_opt, "--judge-opt")
    settings.pop("suite", None)
    if "skill" not in settings or "tag" not in settings:
        raise UsageError("give --skill (the seed skill) and --tag (the run's name)")
    if supervise_run:
        run_dir = Path(settings.get("runs_dir", "runs")) / str(settings["tag"])
        first = [a for a in sys.argv[1:] if a != "--supervise"]
        raise typer.Exit(supervise(first, run_dir))
    skill_path = settings.pop("skill")
    tag_name = settings.pop("tag")
    reporter = _reporter(quiet)
    try:
        if resume_run:  # the settings given must be the run's, but for what a resume may change
            run_dir = Path(settings.get("runs_dir", "runs")) / str(tag_name)
            result = skilltune_resume(run_dir, reporter=reporter, suite=suite, skill=skill_path, **settings)
        else:
            result = skilltune_train(
                suite, skill_path, tag=tag_name, force=force, reporter=reporter, **settings
            )
    finally:
        reporter.close()
    _finish_run(result)


@app.command(epilog="Example: skilltune resume runs/demo")
@guarded
def resume(
    run_dir: Annotated[Path, typer.Argument(help="The run directory (RUNS_DIR/TAG).")],
    budget_rollouts: BudgetRolloutsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_usd: BudgetUsdOpt = None,
    budget_hours: BudgetHoursOpt = None,
    workers: WorkersOpt = None,
    agent_opt: AgentOpts = None,
    findings: FindingsOpt = None,
    supervise_run: SuperviseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Continue a run that was killed, stopped, blocked or ran out of budget (raise it with --budget-*).

    It keeps the run's settings; --budget-*, --workers, --findings and redacted secrets
    (--agent-opt KEY=...) may be given."""
    from skilltune.supervise import supervise
    from skilltune.train import resume as skilltune_resume

    if supervise_run:
        raise typer.Exit(supervise([a for a in sys.argv[1:] if a != "--supervise"], run_dir))
    overrides: dict[str, Any] = dict(
        budget_rollouts=budget_rollouts,
        budget_tokens=budget_tokens,
        budget_usd=budget_usd,
        budget_hours=budget_hours,
        workers=workers,
        findings=str(findings) if findings else None,
    )
    if agent_opt:
        overrides["agent_options"] = parse_agent_opts(agent_opt)
    reporter = _reporter(quiet)
    try:
        result = skilltune_resume(
            run_dir, reporter=reporter, **{k: v for k, v in overrides.items() if v is not None}
        )
    finally:
        reporter.close()
    _finish_run(result)
