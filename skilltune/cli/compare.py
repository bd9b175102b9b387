"""Verdicts: compare and meta-eval.

Each command imports what it runs when it runs (registering the commands loads none of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from skilltune.cli.app import (
    AgentOpt,
    AgentOpts,
    CacheOpt,
    ExecutorOpt,
    FreshOpt,
    JudgeOpts,
    PromptVariantOpt,
    RayAddressOpt,
    SandboxOpt,
    SuiteArg,
    Typer,
    app,
    guarded,
    load_suite_for,
    out,
    parse_agent_opts,
    progress_bar,
    rollout_settings,
)
from skilltune.errors import UsageError
from skilltune.metric import Metric

if TYPE_CHECKING:
    from skilltune.meta_eval import MetaEval
    from skilltune.runfiles import Comparison
    from skilltune.score.trigger import Proportion, TriggerStats
    from skilltune.skill import Candidate


def print_trigger(stats: Mapping[str, TriggerStats | None]) -> None:
    """The trigger table: precision, recall and accuracy of each arm's load decisions, with Wilson
    95% intervals (arms with no trigger statistics are left out; nothing when none has any)."""
    rows = {name: s for name, s in stats.items() if s is not None}
    if not rows:
        return
    table = Table(
        title="trigger decisions (one per rollout of a task with should_trigger)", title_justify="left"
    )
    for col in ("arm", "measure", "value", "95% CI (Wilson)", "k / n"):
        table.add_column(col, justify="right" if col in ("value", "k / n") else "left")
    for name, s in rows.items():
        for measure in ("precision", "recall", "accuracy"):
            p: Proportion = getattr(s, measure)
            ci = f"[{p.ci95[0]:.3f}, {p.ci95[1]:.3f}]" if p.ci95 else "-"
            value = "-" if p.value is None else f"{p.value:.3f}"
            table.add_row(name if measure == "precision" else "", measure, value, ci, f"{p.k} / {p.n}")
        counts = f"TP {s.tp}, FP {s.fp}, FN {s.fn}, TN {s.tn}"
        none = f"; {s.undecided} without a decision" if s.undecided else ""
        table.add_row(
            "", "decisions", str(s.n), f"{counts} on {s.n_tasks} task(s){none}", "", end_section=True
        )
    out.print(table)


def print_comparison(comparison: Comparison) -> None:
    from skilltune.textfmt import fmt

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
        p = "-" if pair.p_value is None else ("<1e-6" if pair.p_value < 1e-6 else f"{pair.p_value:.3g}")
        pairs.add_row(pair.a, pair.b, f"{pair.diff:+.3f}", ci, p, pair.verdict)
    out.print(pairs)
    print_trigger({name: arm.trigger for name, arm in comparison.arms.items()})
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
    metric: Annotated[Metric, typer.Option(help="hard, soft or mixed.")] = "mixed",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/compare-<split>-s<seed>).")
    ] = None,
    agent_opt: AgentOpts = None,
    force: Annotated[bool, typer.Option("--force", help="Replace results already in --out.")] = False,
    cache: CacheOpt = None,
    fresh: FreshOpt = False,
    sandbox: SandboxOpt = "auto",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    prompt_variant: PromptVariantOpt = "cheap",
    judge_opt: JudgeOpts = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Held-out comparison of skills: per-arm scores, paired differences with 95% CIs and verdicts."""
    from skilltune.measure.compare import compare as skilltune_compare
    from skilltune.skill import load_skill

    loaded = load_suite_for(suite, prompt_variant, judge_opt)
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
    with progress_bar(quiet) as report:
        comparison = skilltune_compare(
            loaded, candidates, split=split, reps=reps, metric=metric, out=target, force=force,
            on_record=report,
            settings=rollout_settings(agent, agent_opt, seed, workers, cache, fresh, executor, ray_address, sandbox),
        )  # fmt: skip
    print_comparison(comparison)
    phase = "test" if split == "test" else "eval"
    out.print(f"\ncomparison: {target / 'comparison.json'}\nrecords: {target / 'rollouts' / phase}")


meta_app = Typer(
    help="Meta-evaluations: does training with this suite, proposer and gate work?",
    epilog="Example: skilltune meta-eval null examples/mock-demo/suite --skill examples/mock-demo/skill "
    "--runs 3 --out runs/meta-null",
    no_args_is_help=True,
)
app.add_typer(meta_app, name="meta-eval")

MetaRuns = Annotated[int, typer.Option(min=1, help="Training runs.")]


def _meta_settings(
    agent: str, proposer: str, gate: str | None, max_steps: int, proposer_opt: list[str] | None, seed: int
) -> dict[str, Any]:
    settings: dict[str, Any] = {"agent": agent, "proposer": proposer, "max_steps": max_steps, "seed": seed}
    if gate:
        settings["gate"] = gate
    if proposer_opt:
        settings["proposer_options"] = parse_agent_opts(proposer_opt)
    return settings


def _print_meta(report: MetaEval, out_dir: Path) -> None:
    from skilltune.textfmt import fmt

    planted = report.kind == "planted"
    table = Table(title=f"meta-eval {report.kind}", title_justify="left")
    extra = ["S0 test", "best test", "recovered", "same text"] if planted else []
    for col in ["run", "state", "kept", "rollouts", *extra]:
        table.add_column(col, no_wrap=True)
    for r in report.runs:
        row = [r.run, r.state, str(r.kept), str(r.rollouts)]
        if planted:
            row += [
                fmt(r.seed_test),
                fmt(r.best_test),
                "yes" if r.recovered else "no",
                "yes" if r.text_restored else "no",
            ]
        table.add_row(*row)
    out.print(table)
    for key, value in report.summary.items():
        out.print(f"{key}: {value}")
    out.print(f"\nreport: {out_dir / 'meta_eval.json'}")


@meta_app.command(
    "planted",
    epilog="Example: skilltune meta-eval planted examples/mock-demo/suite --skill examples/mock-demo/good-skill --ablate 'Quantify customer impact in numbers' --runs 2 --out runs/meta-planted",
)
@guarded
def meta_planted(
    suite: SuiteArg,
    skill: Annotated[Path, typer.Option("--skill", "-s", help="A good skill (the rule is removed from it).")],
    ablate_text: Annotated[str, typer.Option("--ablate", help="Text of the rule line(s) to remove.")],
    runs: MetaRuns = 3,
    agent: AgentOpt = "mock",
    proposer: Annotated[str, typer.Option(help="Proposer under test.")] = "mock",
    proposer_opt: Annotated[
        list[str] | None, typer.Option("--proposer-opt", help="Proposer option key=value.")
    ] = None,
    gate: Annotated[str | None, typer.Option(help="Gate (default: train's default).")] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Steps of each training run.")] = 6,
    seed: Annotated[int, typer.Option(help="Seed of the first run (run k uses seed + k).")] = 0,
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("runs/meta-planted"),
    force: Annotated[bool, typer.Option("--force", help="Replace results already in --out.")] = False,
) -> None:
    """Remove a rule from a good skill, train from there, and report whether runs win it back."""
    from skilltune import meta_eval

    settings = _meta_settings(agent, proposer, gate, max_steps, proposer_opt, seed)
    report = meta_eval.planted(
        suite, skill, ablate_text=ablate_text, out=out_dir, runs=runs, force=force, **settings
    )
    _print_meta(report, out_dir)


@meta_app.command(
    "null",
    epilog="Example: skilltune meta-eval null examples/mock-demo/suite --skill examples/mock-demo/skill --runs 3 --out runs/meta-null",
)
@guarded
def meta_null(
    suite: SuiteArg,
    skill: Annotated[Path, typer.Option("--skill", "-s", help="The seed skill.")],
    runs: MetaRuns = 5,
    proposer: Annotated[str, typer.Option(help="Proposer under test.")] = "mock",
    proposer_opt: Annotated[
        list[str] | None, typer.Option("--proposer-opt", help="Proposer option key=value.")
    ] = None,
    gate: Annotated[str | None, typer.Option(help="Gate (default: train's default).")] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Steps of each training run.")] = 6,
    seed: Annotated[int, typer.Option(help="Seed of the first run (run k uses seed + k).")] = 0,
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("runs/meta-null"),
    force: Annotated[bool, typer.Option("--force", help="Replace results already in --out.")] = False,
) -> None:
    """Train on a pure-noise copy of the suite: every edit kept is a false accept."""
    from skilltune import meta_eval

    settings = _meta_settings("mock", proposer, gate, max_steps, proposer_opt, seed)
    report = meta_eval.null(suite, skill, out=out_dir, runs=runs, force=force, **settings)
    _print_meta(report, out_dir)
