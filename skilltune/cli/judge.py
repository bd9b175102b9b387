"""The ``judge`` command group: ``judge check`` (is a judged suite ready?) and ``judge agreement``
(how noisy is its judge?)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from skilltune.cli.app import command_group, out
from skilltune.cli.options import SuiteArg
from skilltune.cli.settings import command_settings, settings_command
from skilltune.metric import Metric

if TYPE_CHECKING:
    from skilltune.suite import Suite

judge_app = command_group(
    "judge",
    help="Judged suites: readiness of the judge, and how much its verdicts vary.",
    epilog="Example: skilltune judge check examples/judged-reviews/suite",
)


def _judged_suite(ctx: typer.Context, suite: Path) -> Suite:
    from skilltune.measure import read_suite
    from skilltune.settings import RolloutSettings

    return read_suite(suite, command_settings(ctx, RolloutSettings))


@judge_app.command(
    "check",
    cls=settings_command("RolloutSettings", ("judge_options",)),
    epilog="Example: skilltune judge check examples/judged-reviews/suite --judge-opt base_url=http://127.0.0.1:8080/v1",
)
def check(ctx: typer.Context, suite: SuiteArg) -> None:
    """Is the judge ready? Its settings, client, key source, judge.md, references per split (exit 1: not ready)."""
    from skilltune.judge.check import judge_check

    report = judge_check(_judged_suite(ctx, suite))

    def mark(ok: bool) -> str:
        return "[green]ok  [/green]" if ok else "[red]FAIL[/red]"

    out.print(f"judge readiness: {'READY' if report.ready else 'NOT READY'}")
    out.print(
        f"  judge: {report.provider} {report.model or '(the CLI default model)'}"
        + (f" at {report.base_url}" if report.base_url else "")
        + f", {report.samples} sample(s) per rollout"
    )
    out.print(f"  {mark(report.client_ok)} client: {report.client}", markup=True)
    out.print(f"  {mark(report.key_ok)} key: {report.key}", markup=True)
    out.print(
        f"  {mark(report.judge_md)} judge.md: {'present' if report.judge_md else 'missing'}", markup=True
    )
    out.print(f"  judged tasks: {report.judged_tasks}")
    for split, counts in report.by_split.items():
        out.print(f"    {split}: {counts.dataset} with a reference, {counts.rubric} judged by judge.md alone")
    for warning in report.warnings:
        out.print(f"  warning: {warning}")
    if not report.ready:
        raise typer.Exit(1)


@judge_app.command(
    "agreement",
    cls=settings_command("RolloutSettings", ("prompt_variant", "judge_options")),
    epilog="Example: skilltune judge agreement examples/judged-reviews/suite --rollouts runs/reviews-eval --samples 4",
)
def agreement(
    ctx: typer.Context,
    suite: SuiteArg,
    rollouts: Annotated[
        Path,
        typer.Option("--rollouts", help="A folder of finished rollouts (a run directory or a run --out)."),
    ],
    samples: Annotated[
        int | None,
        typer.Option(min=2, help="Verdicts per rollout (default: twice the suite's samples, at least 3)."),
    ] = None,
    metric: Annotated[Metric, typer.Option(help="The gate metric: hard, soft or mixed.")] = "mixed",
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where the verdicts and agreement.json go (default runs/agreement-<the rollouts folder's name>).",
        ),
    ] = None,
) -> None:
    """Re-judge finished rollouts: verdict agreement, spread of soft, the judge's share of the gate's noise."""
    from skilltune.judge.agreement import judge_agreement

    loaded = _judged_suite(ctx, suite)
    target = out_dir or Path("runs") / f"agreement-{rollouts.resolve().name}"
    report = judge_agreement(loaded, rollouts, out=target, samples=samples, metric=metric)
    noise = report.noise
    out.print(
        f"re-judged {report.rejudged} rollout(s) {report.samples} times each ({report.tokens} tokens, {report.cost_usd:.4f} USD)"
    )
    if report.unusable:
        out.print(
            f"  {report.unusable} verdict(s) never came in a usable form (after max_attempts tries each)"
        )
    for reason, count in report.skipped.items():
        out.print(f"  skipped {count}: {reason}")
    out.print(
        f"pass/fail agreement between verdicts on one output: {_pct(noise.hard_agreement)} of pairs, {_pct(noise.unanimous)} of rollouts unanimous"
    )
    out.print(f"spread of soft on one output: sd {_num(noise.soft_sd)} (max {_num(noise.soft_sd_max)})")
    if noise.judge_var is not None:
        out.print(
            f"variance the judge adds to a rollout's {noise.metric} ({noise.suite_samples} sample(s) per rollout): "
            f"{_num(noise.judge_var)}"
        )
    if noise.gate_var is not None:
        out.print(
            f"variance of {noise.metric} between replicates of a task (the gate's noise): {_num(noise.gate_var)}; "
            f"the judge's share: {_pct(noise.judge_share)}"
        )
    else:
        out.print("the gate's noise needs two replicates of a task: run the rollouts with --reps 2 or more")
    out.print(f"\nagreement: {target / 'agreement.json'}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
