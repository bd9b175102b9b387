"""The ``draft`` command group: ``draft triggers`` (a trigger suite drafted for a person to review) and
``draft apply`` (the suite's split files written from the reviewed file)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from skilltune.cli.app import command_group, err, out
from skilltune.cli.settings import command_settings, settings_command

if TYPE_CHECKING:
    from skilltune.draft import DraftResult

draft_app = command_group(
    "draft",
    help="Draft suites from a skill for a person to review: trigger queries, and applying the review.",
    epilog="Example: skilltune draft triggers examples/trigger-demo/skill --catalogue "
    "examples/trigger-demo/suite/catalogue --out drafts/release-notes",
)


@draft_app.command(
    "triggers",
    cls=settings_command("skilltune.draft.settings:DraftSettings"),
    epilog="Example: skilltune draft triggers examples/trigger-demo/skill --catalogue "
    "examples/trigger-demo/suite/catalogue --out drafts/release-notes --drafter api "
    "--drafter-opt model=qwen2.5-coder-1.5b --drafter-opt base_url=http://127.0.0.1:8080/v1",
)
def triggers(
    ctx: typer.Context,
    skill: Annotated[
        Path, typer.Argument(help="The skill folder the queries are for (SKILL.md with a description).")
    ],
    catalogue: Annotated[
        Path,
        typer.Option(
            "--catalogue", help="The user's other skills: a folder of skill folders (<name>/SKILL.md each)."
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="The suite folder to write; it must not exist (a draft never overwrites)."
        ),
    ],
) -> None:
    """Draft a trigger suite: should-trigger queries in four phrasings, near misses for each of the
    catalogue's skills, unrelated requests; deduplicated, balanced, split by each query's text, each
    checked once more against the catalogue; with draft_review.md for a person to review."""
    from skilltune.draft import DraftSettings, draft_triggers

    settings = command_settings(ctx, DraftSettings)
    result = draft_triggers(skill, catalogue, out_dir, settings, report=lambda line: err.print(f"  {line}"))
    _print_draft(result)


def _print_draft(result: DraftResult) -> None:
    m, target = result.manifest, result.out
    half = m.written // 2
    near = sum(b.kept for b in m.buckets if b.kind == "near-miss")
    out.print(
        f"drafted {m.written} queries for {m.skill} into {target}: {half} should trigger, {half} should not "
        f"({near} near misses, {half - near} unrelated)"
    )
    if m.written < m.asked:
        short = {True: 0, False: 0}
        for b in m.buckets:
            short[b.kind == "should-trigger"] += b.distinct
        out.print(
            f"  asked for {m.asked}: the drafter gave {short[True]} distinct should-trigger and {short[False]} "
            f"should-not queries; both classes are cut to {half}"
        )
    splits = ", ".join(
        f"{s} {c['true'] + c['false']} ({c['true']} + {c['false']})" for s, c in m.splits.items()
    )
    out.print(f"  splits (should + should not): {splits}")
    out.print(f"  left out: {len(m.duplicates)} duplicate(s), {len(m.surplus)} distinct beyond the balance")
    if m.checker is not None:
        out.print(
            f"  label check ({m.checker}): {len(m.flagged)} disagreement(s) flagged"
            + (f", {len(m.unanswered)} without a usable answer" if m.unanswered else "")
        )
    out.print(
        f"  {m.calls} call(s), {m.tokens_in} tokens in, {m.tokens_out} out, {m.seconds:.1f} s: {target / 'draft_log.jsonl'}"
    )
    for problem in result.problems:
        if not problem.warning:
            err.print(str(problem))
    out.print(
        f"next: review {target / 'draft_review.md'} (set each mark to ok, drop or flip), "
        f"then skilltune draft apply {target}"
    )


@draft_app.command("apply", epilog="Example: skilltune draft apply drafts/release-notes")
def apply(
    suite: Annotated[Path, typer.Argument(help="A suite written by `skilltune draft triggers`.")],
) -> None:
    """Write a drafted suite's train/val/test.jsonl (and skill-creator's list) from its reviewed
    draft_review.md: every row but those marked drop, flip's with the other label. The review is
    never rewritten; a task the review does not hold is refused (it would be lost)."""
    from skilltune.draft import apply_review
    from skilltune.suite.draft_review import UNREVIEWED

    applied = apply_review(suite)
    marks = applied.marks
    counts = ", ".join(
        f"{s} {sum(c.values())} ({c[True]} + {c[False]})"
        for s, c in applied.splits.items()
        if sum(c.values())
    )
    out.print(
        f"wrote {applied.tasks} queries to {suite} (should + should not: {counts}); "
        f"ok {marks['ok']}, flip {marks['flip']}, drop {marks['drop']}, not reviewed {marks[UNREVIEWED]}"
    )
    if applied.placed_by_text:
        out.print(f"  {applied.placed_by_text} added row(s) placed in the split of their text")
    if marks[UNREVIEWED]:
        out.print(
            f"  {marks[UNREVIEWED]} row(s) still marked ? are in the suite as drafted: `skilltune validate {suite}` lists them"
        )
