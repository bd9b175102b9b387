"""After a run: audit (can its verdict be trusted?) and promote (carry its kept changes home).

Each command imports what it runs when it runs (registering the commands loads none of it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from skilltune.cli.app import app, out
from skilltune.cli.options import RunArg

if TYPE_CHECKING:
    from skilltune.review.promote import HunkPlan, PromotePlan
    from skilltune.runfiles import AuditFile

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def print_audit(run_dir: Path, result: AuditFile) -> None:
    searched = result.searched
    scope = (
        f"{searched.get('documents', 0)} document(s) searched for {searched.get('passages', 0)} val/test "
        f"passage(s) and {searched.get('ids', 0)} id(s)"
    )
    if result.clean:
        out.print(f"audit of {run_dir}: clean ({len(result.checks)} checks; {scope})")
    else:
        counts = Counter(f.check for f in result.findings)
        out.print(f"audit of {run_dir}: {len(result.findings)} finding(s) ({scope})")
        for check in result.checks:
            if counts[check]:
                out.print(f"\n{check} ({counts[check]})")
                for finding in (f for f in result.findings if f.check == check):
                    out.print(f"  {finding.where}: {finding.message}", markup=False)
    for warning in result.warnings:  # allowed, worth a look: they leave the run clean
        out.print(f"warning: {warning.check}: {warning.where}: {warning.message}", markup=False)
    for note in result.notes:
        out.print(f"note: {note}", markup=False)


@app.command(epilog="Example: skilltune audit runs/demo")
def audit(
    run_dir: RunArg,
    suite: Annotated[
        Path | None, typer.Option("--suite", help="The run's suite, if it moved since the run.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a run after the fact: can its verdict be trusted? Writes audit.json.

    The checks: val/test leakage into what the proposer saw or wrote (ids and passages of 8+
    words), the best moving only by gate accepts, PROTECTED blocks changed outside epoch updates,
    scoring-contract and agent/model/CLI drift, rejected edits proposed again, and gates that
    decided on contaminated rounds. Exit 1 with findings, 0 when clean.

    A warning (the best skill quoting one train task's prompt) leaves a run clean.
    """
    from skilltune.review.audit import audit as run_audit

    result = run_audit(run_dir, suite=suite)
    if as_json:
        out.print_json(result.model_dump_json())
    else:
        print_audit(run_dir, result)
    if result.findings:
        raise typer.Exit(1)


def _evidence_lines(hunk: HunkPlan) -> list[str]:
    from skilltune.textfmt import fmt

    lines = []
    for unit in hunk.units:
        alpha = f", alpha {unit.alpha:.3g}" if unit.alpha is not None else ""
        lines.append(
            f"  {unit.unit}: gate {unit.decision}, val {fmt(unit.val_candidate)} vs incumbent "
            f"{fmt(unit.val_incumbent)} ({unit.rounds} round(s), {unit.rollouts} rollouts{alpha}): {unit.reason}"
        )
        for note in unit.edits:
            support = f" [{', '.join(note.support[:3])}]" if note.support else ""
            lines.append(f"    {note.edit}" + (f" - {note.rationale}" if note.rationale else "") + support)
    return lines or ["  (no kept unit found for this change)"]


def print_plan(plan: PromotePlan) -> None:
    from skilltune.textfmt import fmt

    out.print(
        f"promote {plan.run} -> {plan.live} (run {plan.state or 'not ended'}; seed {plan.seed[:12]} -> best "
        f"{plan.best[:12]})",
        markup=False,
    )
    for number, hunk in enumerate(plan.hunks, start=1):
        out.print(
            f"\nhunk {number}/{len(plan.hunks)} {hunk.file} at seed line {hunk.seed_line}: "
            + ("present (already applied)" if hunk.status == "present" else hunk.status)
        )
        body = [f"  -{line.rstrip(chr(10))}" for line in hunk.removed]
        body += [f"  +{line.rstrip(chr(10))}" for line in hunk.added]
        out.print("\n".join(body + _evidence_lines(hunk)), markup=False)
        if hunk.conflict:
            out.print("  conflict with the live skill:\n" + hunk.conflict.rstrip("\n"), markup=False)
    if plan.held_out is not None:
        pair = plan.held_out
        ci = f"[{pair.ci95[0]:+.3f}, {pair.ci95[1]:+.3f}]" if pair.ci95 else "[-]"
        p = "-" if pair.p_value is None else f"{pair.p_value:.3g}"
        scores = plan.held_out_scores
        out.print(
            f"\nheld-out ({plan.held_out_split}, {plan.held_out_metric}) for the whole patch: {pair.a} "
            f"{fmt(scores.get(pair.a))} -> {pair.b} {fmt(scores.get(pair.b))}, {pair.diff:+.3f}, 95% CI {ci}, "
            f"p {p} ({pair.verdict}) over {pair.n_tasks} tasks",
            markup=False,
        )
    else:
        out.print(
            "\nheld-out: none (the run has no comparison.json): the changes have only their gate evidence"
        )
    for harm in plan.hurt:
        out.print(f"warning: {harm.line()}: the best skill hurts this agent", markup=False)
    if plan.conflicts:
        one = len(plan.conflicts) == 1
        left = f"{len(plan.conflicts)} hunk{'' if one else 's'} conflict{'s' if one else ''} with the live skill and "
        left += "is left out" if one else "are left out"
        if plan.patch:  # the clean hunks alone: not what the held-out test measured
            left += ": the patch below is not the version the held-out test measured"
        out.print(f"warning: {left}")
    if plan.audit_findings:
        out.print(
            f"warning: the run's audit has {plan.audit_findings} finding(s): `skilltune audit {plan.run}`"
        )
    elif plan.audit_findings is None:
        out.print(f"note: the run has no audit.json: `skilltune audit {plan.run}` checks it for leakage")
    clean = sum(1 for h in plan.hunks if h.status == "clean")
    if plan.patch:
        out.print("\npatch against the live skill:\n" + plan.patch.rstrip("\n"), markup=False)
    if plan.up_to_date:
        out.print(f"\nup to date: {plan.live} already holds every change of the run; nothing written")
    elif plan.applied:
        out.print(
            f"\napplied {clean} hunk(s) to {plan.live} ({', '.join(plan.files)}); nothing was committed",
            markup=False,
        )
        if plan.hurt:
            agents = ", ".join(harm.agent for harm in plan.hurt)
            out.print(
                f"applied despite the harm to {agents} on the held-out test (--accept-harm)", markup=False
            )
    elif plan.files:
        flags = "--apply --accept-harm" if plan.hurt else "--apply"
        out.print(f"\nnothing written: add {flags} to write the {clean} clean hunk(s) into {plan.live}")
    else:
        out.print(_all_left_out(plan), markup=False)


def _all_left_out(plan: PromotePlan) -> str:
    """No clean hunk and not up to date: every hunk the live skill lacks conflicts. Says so, and how
    to carry them over by hand."""
    conflicts, present = len(plan.conflicts), len(plan.hunks) - len(plan.conflicts)
    by_hand = (
        "merge it by hand from the conflict above"
        if conflicts == 1
        else "merge each by hand from the conflicts above"
    )
    fix = f"{by_hand}, or compare {plan.live} with {Path(plan.run) / 'best_skill'} (the run's best version)"
    if not present:
        which = "the run's one hunk conflicts" if conflicts == 1 else f"all {conflicts} hunks conflict"
        return f"\nnothing written: {which} with the live skill: {fix}"
    held = f"{present} hunk" + ("s" if present > 1 else "")
    rest = f"{conflicts} conflict" + ("s" if conflicts == 1 else "")
    return f"\nnothing written: the live skill already holds {held}; the other {rest}: {fix}"


@app.command(epilog="Example: skilltune promote runs/demo --to examples/mock-demo/skill")
def promote(
    run_dir: RunArg,
    to: Annotated[Path, typer.Option("--to", help="The live skill (folder or instruction file).")],
    apply: Annotated[
        bool, typer.Option("--apply", help="Write the clean hunks into the live skill (commits nothing).")
    ] = False,
    accept_harm: Annotated[
        bool,
        typer.Option(
            "--accept-harm",
            help="With --apply: write the skill even though the held-out test says it hurts an agent.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a run's kept changes as a patch against the live skill, with their evidence.

    Hunk by hunk: the rationale and gate evidence of the unit that made each, then the held-out
    comparison of the whole patch. Each hunk is merged three-way (git merge-file, the seed as
    base); conflicts are named, never forced. Writes nothing without --apply. Exit 1 when a hunk
    conflicts.

    When the held-out test says the best skill hurts an agent (per agent, for a run with several;
    the seed significantly better, for a run of one), --apply refuses (exit 2, nothing written)
    unless given --accept-harm.
    """
    from skilltune.review.promote import promote as run_promote

    plan = run_promote(run_dir, to, apply=apply, accept_harm=accept_harm)
    if as_json:
        out.print_json(plan.model_dump_json())
    elif not plan.hunks:
        out.print(f"nothing to promote: the run kept no change to the seed ({plan.seed[:12]})")
    else:
        print_plan(plan)
    if plan.conflicts:
        raise typer.Exit(1)
