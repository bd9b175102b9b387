"""The ``skilltune`` command line: a thin layer over the Python API.

Exit codes: 0 done; 1 the command ran and its answer is negative (smoke found
a problem, lint found errors); 2 bad input or usage (nothing written); 3 a run
ended ``blocked`` or ``crash`` (or skilltune itself failed).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skilltune import __version__
from skilltune.agents import AGENTS, get_backend
from skilltune.calibrate import calibrate as skilltune_calibrate
from skilltune.compare import Comparison
from skilltune.compare import compare as skilltune_compare
from skilltune.errors import SkilltuneError, UsageError
from skilltune.evaluate import EvalSummary, evaluate
from skilltune.progress import LiveReporter, PlainReporter, Reporter, fmt
from skilltune.rollout import RolloutRecord
from skilltune.skill import Candidate, lint_candidate, load_skill
from skilltune.smoke import smoke as run_smoke
from skilltune.suite import load_suite, validate_suite
from skilltune.supervise import supervise
from skilltune.train import TrainResult
from skilltune.train import resume as skilltune_resume
from skilltune.train import train as skilltune_train

app = typer.Typer(
    name="skilltune",
    help="Tune agent skills by evidence: isolated rollouts, measured scores, gated edits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """Print a SkilltuneError's message (no traceback) and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SkilltuneError as exc:
            err.print(f"[red]error:[/red] {exc}", markup=True)
            raise typer.Exit(exc.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if os.environ.get("SKILLTUNE_DEBUG"):
                raise
            err.print(
                f"internal error: {type(exc).__name__}: {exc}\n(a bug in skilltune: rerun with SKILLTUNE_DEBUG=1 for the traceback)"
            )
            raise typer.Exit(3) from None

    return wrapper  # type: ignore[return-value]


def parse_agent_opts(pairs: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values are JSON when they parse (numbers, true, lists), else text."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--agent-opt {pair!r}: write key=value, e.g. --agent-opt model=sonnet")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = [v.strip() for v in value.split(",")] if "," in value else value
    return options


def _version(value: bool) -> None:
    if value:
        out.print(f"skilltune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Tune agent skills by evidence: isolated rollouts, measured scores, gated edits."""


SuiteArg = Annotated[
    Path, typer.Argument(help="Suite folder (train/val/test.jsonl + scoring.md) or a Python env (.py).")
]
AgentOpt = Annotated[
    str, typer.Option("--agent", "-a", help="Target agent backend (see `skilltune agents`).")
]
AgentOpts = Annotated[
    list[str] | None,
    typer.Option("--agent-opt", help="Backend option key=value (repeatable), e.g. placement=system."),
]


@app.command(epilog="Example: skilltune validate examples/mock-demo/suite")
@guarded
def validate(suite: SuiteArg) -> None:
    """Check a suite and report every problem as file:line: message. Writes nothing."""
    problems = validate_suite(suite)
    if problems:
        for problem in problems:
            err.print(str(problem))
        err.print(f"{len(problems)} problem(s) in {suite}")
        raise typer.Exit(2)
    loaded = load_suite(suite)
    counts = ", ".join(f"{s} {len(t)}" for s, t in loaded.splits.items() if t)
    out.print(f"ok: {suite} ({loaded.kind} suite; tasks: {counts}; contract {loaded.contract_hash[:12]})")


@app.command(
    epilog="Example: skilltune run examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock --split val --reps 3 --out runs/demo-eval"
)
@guarded
def run(
    suite: SuiteArg,
    skill: Annotated[
        Path | None, typer.Option("--skill", "-s", help="Skill folder or single instruction file.")
    ] = None,
    no_skill: Annotated[
        bool, typer.Option("--no-skill", help="Evaluate the agent without any skill.")
    ] = False,
    agent: AgentOpt = "mock",
    split: Annotated[str, typer.Option(help="train, val or test.")] = "val",
    reps: Annotated[int, typer.Option(min=1, help="Replicates per task.")] = 1,
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Parallel rollouts.")] = 4,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/eval-<skill>-<split>-s<seed>).")
    ] = None,
    agent_opt: AgentOpts = None,
    force: Annotated[bool, typer.Option(help="Replace results already in --out.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Evaluate one skill: one rollout per (task, replicate), a table, and summary.json."""
    if (skill is None) == (not no_skill):
        raise UsageError("give --skill DIR, or --no-skill to run the agent without a skill")
    loaded = load_suite(suite)
    candidate = load_skill(skill) if skill is not None else None
    name = candidate.name if candidate else "noskill"
    target = out_dir or Path("runs") / f"eval-{name}-{split}-s{seed}"
    with _progress(quiet) as report:
        summary = evaluate(
            loaded,
            candidate,
            agent=agent,
            split=split,
            reps=reps,
            seed=seed,
            workers=workers,
            out=target,
            agent_options=parse_agent_opts(agent_opt),
            force=force,
            on_record=report,
        )
    print_summary(summary)
    out.print(f"\nrecords: {target / 'rollouts' / 'eval'}\nsummary: {target / 'summary.json'}")


def print_summary(summary: EvalSummary) -> None:
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
    if summary.contaminated:
        out.print(
            "[yellow]warning:[/yellow] infra errors remain after retries: these rollouts are not scored",
            markup=True,
        )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _progress:
    """A Rich progress bar on a terminal; nothing otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and err.is_terminal
        self.bar: Progress | None = None
        self.task_id: Any = None

    def __enter__(self) -> Callable[[RolloutRecord, int, int], None]:
        if self.enabled:
            self.bar = Progress(
                TextColumn("rollouts"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
            self.bar.start()
        return self.update

    def update(self, record: RolloutRecord, done: int, total: int) -> None:
        if self.bar is None:
            return
        if self.task_id is None:
            self.task_id = self.bar.add_task("rollouts", total=total)
        self.bar.update(self.task_id, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


@app.command(
    epilog="Example: skilltune smoke examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock"
)
@guarded
def smoke(
    suite: SuiteArg,
    skill: Annotated[Path, typer.Option("--skill", "-s", help="Skill folder or single instruction file.")],
    agent: AgentOpt = "mock",
    agent_opt: AgentOpts = None,
) -> None:
    """Preflight (requirements, tools, agent CLI) and one rollout per split; exit 1 on any problem."""
    report = run_smoke(suite, skill, agent=agent, agent_options=parse_agent_opts(agent_opt))
    for check in report.checks:
        mark = "[green]ok  [/green]" if check.ok else "[red]FAIL[/red]"
        out.print(f"{mark} {check.name}" + (f": {check.detail}" if check.detail else ""), markup=True)
    if not report.ok:
        raise typer.Exit(1)


@app.command(epilog="Example: skilltune agents")
@guarded
def agents() -> None:
    """List agent backends: installed or not, version, and how to fix what is missing."""
    table = Table()
    for col in ("agent", "installed", "version", "fix"):
        table.add_column(col)
    for name in AGENTS.names():
        status = get_backend(name).check()
        table.add_row(name, "yes" if status.installed else "no", status.version or "-", status.fix or "")
    out.print(table)


@app.command(epilog="Example: skilltune lint examples/mock-demo/skill")
@guarded
def lint(skill: Annotated[Path, typer.Argument(help="Skill folder or single instruction file.")]) -> None:
    """Lint a skill: front matter, body size, links to files that exist, protected blocks."""
    candidate = load_skill(skill)
    issues = lint_candidate(candidate)
    for issue in issues:
        out.print(
            f"{skill / issue.file if candidate.kind == 'folder' else skill}{':' + str(issue.line) if issue.line else ''}: {issue.severity}: {issue.message}"
        )
    if any(i.severity == "error" for i in issues):
        raise typer.Exit(1)
    out.print(f"ok: {candidate.name} ({candidate.short}), {len(candidate.files)} file(s)")


# --- train / resume / compare -----------------------------------------------------------------

RunOpt = Annotated[int | None, typer.Option(min=1)]


def _reporter(quiet: bool) -> Reporter:
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
    for table in ("agent_options", "proposer_options", "gate_options", "edit_budget"):
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
            get["rollouts"], _clip(get["description"], 44),
        )  # fmt: skip
    table.caption = "cand / inc: val score of the candidate and the incumbent"
    out.print(table)


def _finish_run(result: TrainResult) -> None:
    print_units(Path(result.run_dir))
    out.print(f"\n[bold]{result.state}[/bold]: {result.reason}", markup=True)
    out.print(
        f"seed val {fmt(result.seed_val)}, best val {fmt(result.best_val)}; {result.kept} unit(s) kept in {result.steps} step(s)"
    )
    if result.comparison is not None:
        print_comparison(result.comparison)
    run = Path(result.run_dir)
    out.print(f"\nrun: {run}\nresults: {run / 'results.tsv'}\nbest skill: {run / 'best_skill'}")
    if result.state in ("blocked", "crash"):
        raise typer.Exit(3)


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
    gate: Annotated[str | None, typer.Option(help="Gate strategy: strict or paired-z.")] = None,
    metric: Annotated[
        str | None, typer.Option(help="Gate metric: hard, soft or mixed (default mixed).")
    ] = None,
    max_steps: RunOpt = None,
    epochs: RunOpt = None,
    epoch_steps: RunOpt = None,
    batch: Annotated[int | None, typer.Option(min=1, help="Train minibatch size (default 8).")] = None,
    reps: Annotated[
        int | None, typer.Option(min=1, help="Replicates per task in train and gate passes.")
    ] = None,
    test_reps: Annotated[
        int | None, typer.Option(min=1, help="Replicates per task in the final test (default 3).")
    ] = None,
    screen: Annotated[
        bool | None, typer.Option("--screen/--no-screen", help="Screen candidates on the train batch first.")
    ] = None,
    budget_rollouts: RunOpt = None,
    budget_tokens: RunOpt = None,
    budget_usd: Annotated[float | None, typer.Option(min=0.0)] = None,
    budget_hours: Annotated[float | None, typer.Option(min=0.0)] = None,
    patience: Annotated[
        int | None, typer.Option(min=1, help="Discarded candidates in a row that end the run (default 5).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed (default 0).")] = None,
    workers: RunOpt = None,
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
    resume_run: Annotated[
        bool, typer.Option("--resume", help="Continue the run under this tag (as skilltune resume).")
    ] = False,
    supervise_run: Annotated[
        bool, typer.Option("--supervise", help="Relaunch on a crash; keep the machine awake.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Plain lines only, no live view.")] = False,
) -> None:
    """Train a skill: steps of rollout, reflect, merge, edit, gate; then a held-out comparison."""
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
    )
    settings.update({k: str(v) if isinstance(v, Path) else v for k, v in flags.items() if v is not None})
    settings["agent_options"] = settings.get("agent_options", {}) | parse_agent_opts(agent_opt)
    settings["proposer_options"] = settings.get("proposer_options", {}) | parse_agent_opts(proposer_opt)
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
        if resume_run:
            run_dir = Path(settings.get("runs_dir", "runs")) / str(tag_name)
            raised = {k: v for k, v in settings.items() if k.startswith("budget_") or k == "workers"}
            result = skilltune_resume(run_dir, reporter=reporter, **raised)
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
    budget_rollouts: RunOpt = None,
    budget_tokens: RunOpt = None,
    budget_usd: Annotated[float | None, typer.Option(min=0.0)] = None,
    budget_hours: Annotated[float | None, typer.Option(min=0.0)] = None,
    workers: RunOpt = None,
    agent_opt: AgentOpts = None,
    supervise_run: Annotated[
        bool, typer.Option("--supervise", help="Relaunch on a crash; keep the machine awake.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Plain lines only, no live view.")] = False,
) -> None:
    """Continue a run that was killed, stopped, blocked or ran out of budget (raise it with --budget-*)."""
    if supervise_run:
        raise typer.Exit(supervise([a for a in sys.argv[1:] if a != "--supervise"], run_dir))
    overrides: dict[str, Any] = dict(
        budget_rollouts=budget_rollouts,
        budget_tokens=budget_tokens,
        budget_usd=budget_usd,
        budget_hours=budget_hours,
        workers=workers,
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


def print_comparison(comparison: Comparison) -> None:
    table = Table(
        title=f"{comparison.split}: {comparison.reps} rep(s) per task, {comparison.agent}",
        title_justify="left",
    )
    for col in ("arm", "skill", "tasks", "rollouts", "hard", "soft", "mixed"):
        table.add_column(col, justify="left" if col in ("arm", "skill") else "right")
    for name, arm in comparison.arms.items():
        table.add_row(
            name,
            arm.skill_hash[:12],
            str(arm.n_tasks),
            str(arm.n_rollouts),
            fmt(arm.hard_acc),
            fmt(arm.soft_acc),
            fmt(arm.mixed),
        )
    out.print(table)
    pairs = Table(title=f"paired by task ({comparison.metric}; diff = b - a)", title_justify="left")
    for col in ("a", "b", "diff", "95% CI", "p", "verdict"):
        pairs.add_column(col)
    for pair in comparison.pairs:
        ci = f"[{pair.ci95[0]:+.3f}, {pair.ci95[1]:+.3f}]" if pair.ci95 else "-"
        p = "-" if pair.p_value is None else f"{pair.p_value:.3g}"
        pairs.add_row(pair.a, pair.b, f"{pair.diff:+.3f}", ci, p, pair.verdict)
    out.print(pairs)
    if comparison.contaminated:
        out.print("[yellow]warning:[/yellow] infra errors remain: some rollouts are not scored", markup=True)


@app.command(
    epilog="Example: skilltune compare examples/mock-demo/suite seed=examples/mock-demo/skill good=examples/mock-demo/good-skill --no-skill --reps 3 --out runs/compare-demo"
)
@guarded
def compare(
    suite: SuiteArg,
    arms: Annotated[
        list[str], typer.Argument(help="NAME=SKILL for each arm (a folder or instruction file).")
    ],
    no_skill: Annotated[
        bool, typer.Option("--no-skill", help="Add the arm 'noskill': the agent without any skill.")
    ] = False,
    agent: AgentOpt = "mock",
    split: Annotated[str, typer.Option(help="train, val or test.")] = "test",
    reps: Annotated[int, typer.Option(min=1, help="Replicates per task and arm.")] = 3,
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Parallel rollouts.")] = 4,
    metric: Annotated[str, typer.Option(help="hard, soft or mixed.")] = "mixed",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/compare-<split>-s<seed>).")
    ] = None,
    agent_opt: AgentOpts = None,
    force: Annotated[bool, typer.Option(help="Replace results already in --out.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Held-out comparison of skills: per-arm scores, paired differences with 95% CIs and verdicts."""
    loaded = load_suite(suite)
    candidates: dict[str, Candidate | None] = {}
    for spec in arms:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"arm {spec!r}: write NAME=SKILL, e.g. seed=examples/mock-demo/skill")
        if name in candidates or name == "noskill":
            raise UsageError(f"arm name {name!r} is used twice (or is the reserved 'noskill')")
        candidates[name] = load_skill(path)
    if no_skill:
        candidates["noskill"] = None
    target = out_dir or Path("runs") / f"compare-{split}-s{seed}"
    with _progress(quiet) as report:
        comparison = skilltune_compare(
            loaded,
            candidates,
            agent=agent,
            split=split,
            reps=reps,
            seed=seed,
            workers=workers,
            metric=metric,
            out=target,
            agent_options=parse_agent_opts(agent_opt),
            force=force,
            on_record=report,
        )
    print_comparison(comparison)
    phase = "test" if split == "test" else "eval"
    out.print(f"\ncomparison: {target / 'comparison.json'}\nrecords: {target / 'rollouts' / phase}")


@app.command(
    epilog="Example: skilltune calibrate examples/mock-demo/suite --skill examples/mock-demo/skill --agent mock --reps 3 --out runs/calibrate-demo"
)
@guarded
def calibrate(
    suite: SuiteArg,
    skill: Annotated[
        Path | None, typer.Option("--skill", "-s", help="Skill folder or single instruction file.")
    ] = None,
    no_skill: Annotated[
        bool, typer.Option("--no-skill", help="Calibrate the agent without any skill.")
    ] = False,
    agent: AgentOpt = "mock",
    split: Annotated[str, typer.Option(help="train, val or test.")] = "val",
    reps: Annotated[int, typer.Option(min=1, help="Replicates per task.")] = 3,
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Parallel rollouts.")] = 4,
    metric: Annotated[str, typer.Option(help="hard, soft or mixed (the gate's metric).")] = "mixed",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/calibrate-<skill>-<split>).")
    ] = None,
    agent_opt: AgentOpts = None,
    force: Annotated[bool, typer.Option(help="Replace results already in --out.")] = False,
) -> None:
    """Pass rates, regime, flaky and non-discriminating tasks, noise, and levers: can a gate select here?"""
    if (skill is None) == (not no_skill):
        raise UsageError("give --skill DIR, or --no-skill to calibrate the agent without a skill")
    if metric not in ("hard", "soft", "mixed"):
        raise UsageError(f"unknown metric {metric!r}: use hard, soft or mixed")
    loaded = load_suite(suite)
    candidate = load_skill(skill) if skill is not None else None
    target = out_dir or Path("runs") / f"calibrate-{candidate.name if candidate else 'noskill'}-{split}"
    result = skilltune_calibrate(
        loaded, candidate, agent=agent, split=split, reps=reps, seed=seed, workers=workers, metric=metric,
        out=target, agent_options=parse_agent_opts(agent_opt), force=force,
    )  # fmt: skip
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
    detect = ", ".join(f"{k}: {v if v is not None else '-'}" for k, v in result.rollouts_to_detect.items())
    out.print(f"paired rollouts per arm a fixed test needs (alpha 0.01, power 0.8) to see a gain of {detect}")
    for lever in result.levers:
        out.print(f"- {lever}")
    out.print(f"\ncalibration: {target / 'calibration.json'}")


def main() -> None:
    app(prog_name="skilltune")


if __name__ == "__main__":
    main()
    sys.exit(0)
