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
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skilltune import __version__
from skilltune.agents import AGENTS, get_backend
from skilltune.errors import SkilltuneError, UsageError
from skilltune.evaluate import EvalSummary, evaluate
from skilltune.rollout import RolloutRecord
from skilltune.skill import lint_candidate, load_skill
from skilltune.smoke import smoke as run_smoke
from skilltune.suite import load_suite, validate_suite

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
        table.add_row(task_id, str(s.n), _fmt(s.hard), _fmt(s.soft), _fmt(s.mixed), statuses)
    statuses = ", ".join(f"{k} {v}" for k, v in summary.statuses.items())
    table.add_section()
    table.add_row(
        "overall",
        str(summary.n_rollouts),
        _fmt(summary.hard_acc),
        _fmt(summary.soft_acc),
        _fmt(summary.mixed),
        statuses,
    )
    out.print(table)
    if summary.contaminated:
        out.print(
            "[yellow]warning:[/yellow] infra errors remain after retries: these rollouts are not scored",
            markup=True,
        )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


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


def main() -> None:
    app(prog_name="skilltune")


if __name__ == "__main__":
    main()
    sys.exit(0)
