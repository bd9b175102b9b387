"""Verdicts: compare and meta-eval.

Each command imports what it runs when it runs (registering the commands loads none of it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from skilltune.cli.app import app, command_group, out, progress_bar
from skilltune.cli.options import ForceOpt, NoProgressOpt, SuiteArg, no_skill_option, out_folder, out_option
from skilltune.cli.settings import command_settings, settings_command
from skilltune.errors import UsageError

if TYPE_CHECKING:
    from skilltune.meta_eval import MetaEval
    from skilltune.runfiles import Comparison, PairResult, Transfer
    from skilltune.score.trigger import Proportion, TriggerStats
    from skilltune.skill import Candidate


def print_trigger(records: Path, phase: str, arms: Mapping[str, tuple[str, TriggerStats | None]]) -> None:
    """The trigger table: precision, recall and accuracy of each arm's load decisions with Wilson
    95% intervals, each query counted once as the report, status and findings count it (by its
    replicates' majority: ``report.trigger.per_query`` over the records in ``records``'
    ``rollouts/<phase>/``). ``arms``: name -> (candidate hash, the file's statistics, one decision
    per rollout), the fallback for an arm whose records are not at hand. Arms without trigger
    statistics are left out; nothing when none has any."""
    from skilltune.report.trigger import QueryTrigger, decisions, per_query

    rollouts = {name: (skill, s) for name, (skill, s) in arms.items() if s is not None}
    if not rollouts:
        return
    loads = decisions(records, phase)
    rows: dict[str, tuple[QueryTrigger | TriggerStats, TriggerStats]] = {}
    for name, (skill, file) in rollouts.items():
        rows[name] = (per_query(loads.get(skill, {})) or file, file)
    title = "trigger decisions (each query counted once, by its replicates' majority; an even split counts as wrong)"
    if not any(isinstance(stats, QueryTrigger) for stats, _ in rows.values()):
        title = (
            "trigger decisions (one per rollout: the records are not at hand, so replicates count as trials)"
        )
    table = Table(title=title, title_justify="left")
    for col in ("arm", "measure", "value", "95% CI (Wilson)", "k / n"):
        table.add_column(col, justify="right" if col in ("value", "k / n") else "left")
    for name, (stats, file) in rows.items():
        for measure in ("precision", "recall", "accuracy"):
            p: Proportion = getattr(stats, measure)
            ci = f"[{p.ci95[0]:.3f}, {p.ci95[1]:.3f}]" if p.ci95 else "-"
            value = "-" if p.value is None else f"{p.value:.3f}"
            table.add_row(name if measure == "precision" else "", measure, value, ci, f"{p.k} / {p.n}")
        counts = f"TP {stats.tp}, FP {stats.fp}, FN {stats.fn}, TN {stats.tn}"
        none = f"; {file.undecided} rollout(s) without a decision" if file.undecided else ""
        if isinstance(stats, QueryTrigger):
            even = f", {stats.split} split evenly" if stats.split else ""
            label, n = "queries", stats.queries
            detail = f"{counts} on {stats.queries} queries ({stats.decisions} decisions{even}){none}"
        else:  # the file's figures: replicates count as trials, so the interval is too narrow
            label, n = "decisions", stats.n
            detail = f"{counts}, one per rollout, on {stats.n_tasks} task(s){none}"
        table.add_row("", label, str(n), detail, "", end_section=True)
    out.print(table)


def print_comparison(comparison: Comparison, records: Path) -> None:
    """The comparison's tables; ``records``: the folder holding its rollouts (the run's final/, or
    the compare's --out), read for the trigger decisions per query."""
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
    phase = "test" if comparison.split == "test" else "eval"
    print_trigger(
        records, phase, {name: (arm.skill_hash, arm.trigger) for name, arm in comparison.arms.items()}
    )
    if comparison.contaminated:
        out.print("[yellow]warning:[/yellow] infra errors remain: some rollouts are not scored", markup=True)


def _option_text(value: object) -> str:
    """An agent option as written on the command line (a list at commas)."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return json.dumps(value) if isinstance(value, bool | int | float) or value is None else str(value)


def _pair_cell(pair: PairResult) -> str:
    ci = f" [{pair.ci95[0]:+.3f}, {pair.ci95[1]:+.3f}]" if pair.ci95 else ""
    return f"{pair.diff:+.3f}{ci} {pair.verdict}"


def print_transfer(transfer: Transfer) -> None:
    """The skill x agent table: per arm each agent's score, per pair each agent's paired difference
    with its 95% CI and verdict, then each agent's rollouts, tokens and USD."""
    from skilltune.textfmt import fmt

    table = Table(
        title=f"transfer: {transfer.split}, {transfer.reps} rep(s) per task, {transfer.metric} "
        "(pairs: diff = b - a, 95% CI, verdict)",
        title_justify="left",
    )
    table.add_column("arm / pair")
    for column in transfer.agents:
        head = column.label if column.label == column.agent else f"{column.label} ({column.agent})"
        table.add_column(head, justify="right")
    arms = list(transfer.arms)
    for i, name in enumerate(arms):
        table.add_row(
            name if transfer.arms[name] == name else f"{name} {transfer.arms[name][:12]}",
            *(fmt(c.scores.get(name)) for c in transfer.agents),
            end_section=i == len(arms) - 1,
        )
    for k, pair in enumerate(transfer.agents[0].pairs):
        table.add_row(
            f"{pair.a} -> {pair.b}",
            *(_pair_cell(c.pairs[k]) for c in transfer.agents),
            end_section=k == len(transfer.agents[0].pairs) - 1,
        )
    table.add_row(
        "rollouts",
        *(
            f"{c.n_rollouts} ({c.n_cached} cached)" if c.n_cached else str(c.n_rollouts)
            for c in transfer.agents
        ),
    )
    table.add_row("tokens", *(f"{c.tokens:,}" for c in transfer.agents))
    table.add_row("USD", *(f"{c.cost_usd:.4f}" for c in transfer.agents))
    out.print(table)
    for column in transfer.agents:
        options = ",".join(f"{k}={_option_text(v)}" for k, v in column.options.items())
        named = column.agent if column.label == column.agent else f"{column.label}={column.agent}"
        out.print(f"{column.label}: --agent {named}{':' + options if options else ''}")
    dirty = [c.label for c in transfer.agents if c.contaminated]
    if dirty:
        out.print(
            f"[yellow]warning:[/yellow] infra errors remain for {', '.join(dirty)}: some rollouts are not scored",
            markup=True,
        )


def _arm_skill(name: str, path: str) -> Candidate:
    """An arm's skill; a run directory is refused with the paths of its best and seed skills."""
    from skilltune.skill import load_skill

    folder = Path(path)
    if (folder / "config.json").is_file() and (folder / "seed.json").is_file():
        raise UsageError(
            f"arm {name}={path}: {path} is a run directory, not a skill: its best skill is "
            f"{name}={folder / 'best_skill'}, its seed {name}={folder / 'seed'}"
        )
    return load_skill(path)


_COMPARE_OUT = "runs/compare-<split>-s<seed>"  # --out when not given


@app.command(
    cls=settings_command("CompareSettings"),
    epilog="Example: skilltune compare examples/mock-demo/suite seed=examples/mock-demo/skill good=examples/mock-demo/good-skill --no-skill --reps 3 --out runs/compare-demo\n\n"
    "Several agents (a transfer table): skilltune compare examples/mock-demo/suite seed=examples/mock-demo/skill good=examples/mock-demo/good-skill --agent follows=mock --agent stubborn=mock:ignores=quantify-impact,detection-gap,owned-action-items --out runs/compare-transfer",
)
def compare(
    ctx: typer.Context,
    suite: SuiteArg,
    arms: Annotated[
        list[str], typer.Argument(help="NAME=SKILL for each arm (a folder or instruction file).")
    ],
    no_skill: Annotated[bool, no_skill_option("Add the arm 'noskill':")] = False,
    out_dir: Annotated[Path | None, out_option(_COMPARE_OUT)] = None,
    force: ForceOpt = False,
    quiet: NoProgressOpt = False,
) -> None:
    """Held-out comparison of skills: per-arm scores, paired differences with 95% CIs and verdicts.

    With several --agent, every arm runs on every agent: each agent's comparison in its own folder
    under --out, and the transfer table (transfer.json): does a skill's gain carry to the others?
    """
    from skilltune.measure.compare import compare as skilltune_compare
    from skilltune.measure.transfer import TRANSFER_FILE, compare_agents
    from skilltune.settings import CompareSettings

    settings = command_settings(ctx, CompareSettings)
    candidates: dict[str, Candidate | None] = {}
    for spec in arms:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"arm {spec!r}: write NAME=SKILL, e.g. seed=examples/mock-demo/skill")
        if name in candidates or name == "noskill":
            raise UsageError(f"arm name {name!r} is used twice (or is the reserved 'noskill')")
        candidates[name] = _arm_skill(name, path)
    if no_skill:
        candidates["noskill"] = None
    target = out_folder(out_dir, _COMPARE_OUT, split=settings.split, seed=settings.seed)
    phase = "test" if settings.split == "test" else "eval"
    if settings.several:
        with progress_bar(quiet) as report:
            transfer = compare_agents(
                suite, candidates, settings.agents, settings, out=target, force=force, on_record=report
            )
        print_transfer(transfer)
        out.print(
            f"\ntransfer table: {target / TRANSFER_FILE}\ncomparisons: {target}/<agent>/comparison.json"
            f"\nrecords: {target}/<agent>/rollouts/{phase}"
        )
        return
    with progress_bar(quiet) as report:
        comparison = skilltune_compare(suite, candidates, settings, out=target, force=force, on_record=report)
    print_comparison(comparison, target)
    out.print(f"\ncomparison: {target / 'comparison.json'}\nrecords: {target / 'rollouts' / phase}")


meta_app = command_group(
    "meta-eval",
    help="Meta-evaluations: does training with this suite, proposer and gate work?",
    epilog="Example: skilltune meta-eval null examples/mock-demo/suite --skill examples/mock-demo/skill "
    "--runs 3 --out runs/meta-null",
)


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


MetaOut = Annotated[Path, typer.Option("--out", help="Output folder.")]


@meta_app.command(
    "planted",
    cls=settings_command("PlantedSettings"),
    epilog="Example: skilltune meta-eval planted examples/mock-demo/suite --skill examples/mock-demo/good-skill --ablate 'Quantify customer impact in numbers' --runs 2 --out runs/meta-planted",
)
def meta_planted(
    ctx: typer.Context,
    suite: SuiteArg,
    skill: Annotated[Path, typer.Option("--skill", "-s", help="A good skill (the rule is removed from it).")],
    ablate_text: Annotated[str, typer.Option("--ablate", help="Text of the rule line(s) to remove.")],
    out_dir: MetaOut = Path("runs/meta-planted"),
    force: ForceOpt = False,
) -> None:
    """Remove a rule from a good skill, train from there, and report whether runs win it back."""
    from skilltune import meta_eval
    from skilltune.settings import PlantedSettings

    settings = command_settings(ctx, PlantedSettings)
    report = meta_eval.planted(suite, skill, settings, ablate_text=ablate_text, out=out_dir, force=force)
    _print_meta(report, out_dir)


@meta_app.command(
    "null",
    cls=settings_command("MetaEvalSettings"),
    epilog="Example: skilltune meta-eval null examples/mock-demo/suite --skill examples/mock-demo/skill --runs 3 --out runs/meta-null",
)
def meta_null(
    ctx: typer.Context,
    suite: SuiteArg,
    skill: Annotated[Path, typer.Option("--skill", "-s", help="The seed skill.")],
    out_dir: MetaOut = Path("runs/meta-null"),
    force: ForceOpt = False,
) -> None:
    """Train on a pure-noise copy of the suite: every edit kept is a false accept."""
    from skilltune import meta_eval
    from skilltune.settings import MetaEvalSettings

    report = meta_eval.null(suite, skill, command_settings(ctx, MetaEvalSettings), out=out_dir, force=force)
    _print_meta(report, out_dir)
