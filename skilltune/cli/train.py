"""The train and resume commands."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from skilltune.cli.app import app, err, out
from skilltune.cli.compare import print_comparison
from skilltune.cli.options import RunArg, SuiteArg
from skilltune.cli.settings import ResumeCommand, given_settings, settings_command
from skilltune.errors import UsageError
from skilltune.textfmt import one_line

if TYPE_CHECKING:  # the training stack loads when a command runs, not for --help or --version
    from skilltune.progress import Reporter
    from skilltune.training import TrainResult

SuperviseOpt = Annotated[
    bool, typer.Option("--supervise", help="Relaunch on a crash; keep the machine awake.")
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
    from skilltune.training import TrainConfig

    known = set(TrainConfig.model_fields) | {"suite"}
    unknown = sorted(key for key in settings if key not in known)
    if unknown:
        raise UsageError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    for table in ("agent_options", "proposer_options", "gate_options", "judge_options", "edit_budget"):
        if table in settings and not isinstance(settings[table], dict):
            raise UsageError(f"{path}: {table} must be a table ([{table}] with key = value lines)")
    _check_values(path, settings, TrainConfig)
    return settings


def _check_values(path: Path, settings: dict[str, Any], model: type[Any]) -> None:
    """Each value of the file checked as its setting, refused with the file and line that set it
    (the flags' own errors name the flag; a file's must name the file)."""
    from pydantic import ValidationError

    from skilltune.validation import field_problem

    required = {name: "-" for name, info in model.model_fields.items() if info.is_required()}
    try:
        model(**(required | settings))
    except ValidationError as exc:
        lines = path.read_text(encoding="utf-8").splitlines()
        problems = []
        for err in exc.errors():
            key = str(err["loc"][0]) if err["loc"] else ""
            if key not in settings:
                continue  # a value given as a flag, or one that only the whole run can check
            at = next((i for i, line in enumerate(lines, 1) if _sets(line, key)), None)
            where = f"{path}:{at}" if at else str(path)
            problems.append(f"{where}: {field_problem(err, model=model)}")
        if problems:
            raise UsageError(
                "\n".join(problems) + "\n(fix the value in the file, or give the flag)"
            ) from None


def _sets(line: str, key: str) -> bool:
    """Whether a TOML line sets ``key`` (written with - or _) or opens its table."""
    head = line.strip().split("=", 1)[0].strip().strip("[]").replace("-", "_")
    return head == key


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
    several = "agents" in index  # a run with several agents: each one's val figures, and its veto
    if several:
        table.add_column("agents (val inc -> cand)", min_width=24)

    def num(text: str) -> str:
        return f"{float(text):.3f}" if text else "-"

    for row in body:
        get = {name: row[i] for name, i in index.items()}
        agents = [get.get("agents", "").replace("; ", "\n")] if several else []
        table.add_row(
            get["step"], get["phase"], get["verdict"], num(get["val_candidate"]), num(get["val_incumbent"]),
            get["rollouts"], one_line(get["description"], 44), *agents,
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
        print_comparison(result.comparison, Path(result.run_dir) / "final")
    print_hurt(Path(result.run_dir), result.best_hash)
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


def print_hurt(run_dir: Path, best: str) -> None:
    """A warning per agent the held-out test says ``best`` hurts (the pooled comparison may hide it)."""
    from rich.markup import escape

    from skilltune.report.heldout import hurt_agents
    from skilltune.rundir import RunDir

    for harm in hurt_agents(RunDir(run_dir), best):
        out.print(
            f"[red]warning:[/red] {escape(harm.line())}: the pooled figure hides it; `skilltune promote` "
            "refuses the skill unless given --accept-harm",
            markup=True,
        )


def print_gate_share(run_dir: Path) -> None:
    """What the gate cost of the run's training rollouts, counted from the records on disk as the
    report and ``status`` count them (each rollout run once): a stage the run ended in (a gate
    stopped by Ctrl-C) has no stage event in the journal, but its rollouts were run and paid for."""
    from skilltune.report.rollouts import read_rollouts
    from skilltune.rundir import RunDir

    phases = read_rollouts(RunDir(run_dir), "mixed").phases
    training = sum(t.rollouts for (unit, _), t in phases.items() if unit != "final")
    if training:
        gate = sum(t.rollouts for (unit, phase), t in phases.items() if phase == "gate" and unit != "final")
        test = sum(t.rollouts for (unit, _), t in phases.items() if unit == "final")
        out.print(
            f"rollouts: {training} in training, {gate} of them in the gate ({gate / training:.0%}); "
            f"{test} in the held-out test"
        )


@app.command(
    cls=settings_command("skilltune.runfiles:TrainConfig"),
    epilog="Example: skilltune train examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock --proposer mock --tag demo --max-steps 8 --seed 1",
)
def train(
    ctx: typer.Context,
    suite: SuiteArg,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="A TOML file of settings (keys as the flags, - or _); flags override it."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Start over if the tag exists.")] = False,
    resume_run: Annotated[
        bool, typer.Option("--resume", help="Continue the run under this tag (as skilltune resume).")
    ] = False,
    supervise_run: SuperviseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train a skill: steps of rollout, reflect, merge, edit, gate; then a held-out comparison.

    Every setting below is also a key of the --config file; a setting not given takes its default.
    """
    from skilltune.runfiles import TrainConfig
    from skilltune.supervise import supervise
    from skilltune.training import resume as skilltune_resume
    from skilltune.training import train as skilltune_train

    if resume_run and force:
        raise UsageError("--resume continues the run and --force starts it over: give one of them")
    settings: dict[str, Any] = read_config_file(config) if config else {}
    for name, value in given_settings(ctx).items():
        settings[name] = settings.get(name, {}) | value if isinstance(value, dict) else value
    for table in ("agent_options", "proposer_options", "gate_options", "judge_options"):
        settings.setdefault(table, {})
    settings.pop("suite", None)
    if "skill" not in settings or "tag" not in settings:
        raise UsageError("give --skill (the seed skill) and --tag (the run's name)")
    runs_dir = Path(settings.get("runs_dir", TrainConfig.model_fields["runs_dir"].default))
    if supervise_run:
        first = [a for a in sys.argv[1:] if a != "--supervise"]
        raise typer.Exit(supervise(first, runs_dir / str(settings["tag"])))
    skill_path = settings.pop("skill")
    tag_name = settings.pop("tag")
    reporter = _reporter(quiet)
    try:
        if resume_run:  # the settings given must be the run's, but for what a resume may change
            result = skilltune_resume(
                runs_dir / str(tag_name), reporter=reporter, suite=suite, skill=skill_path, **settings
            )
        else:
            result = skilltune_train(
                suite, skill_path, tag=tag_name, force=force, reporter=reporter, **settings
            )
    finally:
        reporter.close()
    _finish_run(result)


@app.command(cls=ResumeCommand, epilog="Example: skilltune resume runs/demo --budget-rollouts 2000")
def resume(
    ctx: typer.Context,
    run_dir: RunArg,
    supervise_run: SuperviseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Continue a run that was killed, stopped, blocked or ran out of budget (raise it with --budget-*).

    It keeps the run's settings but for the ones below: what cannot change its results, and
    secrets that config.json holds redacted (e.g. --agent-opt api_key=...).
    """
    from skilltune.supervise import supervise
    from skilltune.training import resume as skilltune_resume

    if supervise_run:
        raise typer.Exit(supervise([a for a in sys.argv[1:] if a != "--supervise"], run_dir))
    reporter = _reporter(quiet)
    try:
        result = skilltune_resume(run_dir, reporter=reporter, **given_settings(ctx))
    finally:
        reporter.close()
    _finish_run(result)
