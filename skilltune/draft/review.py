"""The review file a draft writes, and ``apply_review``: a drafted suite's split files written from it.

The file (``draft_review.md``, read by skilltune/suite/draft_review.py) is a markdown table, one row
per drafted query: ``| mark | id | should_trigger | split | query | why | check |``. The draft
writes every mark ``?``; a person sets each to ``ok``, ``drop`` or ``flip``, may correct a query's
text, and may add rows. ``apply_review`` then writes train/val/test.jsonl and
skill-creator/trigger_evals.json from the table: every row but the dropped ones, with its label
(flipped for ``flip``) and its split (its text's for ``-``). It never writes the review file, keeps
the fields a task of the split files holds beyond id, prompt and should_trigger, and refuses a
suite whose split files hold a task the review does not (it would be lost), so applying twice
gives the same suite.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltune.errors import UsageError
from skilltune.store import write_jsonl, write_text
from skilltune.suite.checks import check_task
from skilltune.suite.draft_review import COLUMNS, REVIEW_FILE, ReviewRow, cell, read_review
from skilltune.suite.model import REQUIRED_SPLITS, SPLITS

SKILL_CREATOR_FILE = Path("skill-creator") / "trigger_evals.json"
_SHOWN = 15


def review_text(skill: str, suite: Path, rows: Iterable[ReviewRow]) -> str:
    """The review file of a draft: what to do, then the table."""
    lines = [
        f"# Review of the trigger queries drafted for `{skill}`",
        "",
        "Read each row before the suite is used, and set its **mark**: `ok` (keep it), `drop` (leave it",
        "out of the suite), `flip` (keep it with the other label); `?` is not reviewed yet (`skilltune",
        "validate` counts those). You may correct a query's text, or add a row (a new id, `true` or",
        "`false`, split `-`: its text decides). Write a `|` inside a query as `\\|`.",
        "",
        "- **should_trigger**: the label the query was drafted for: should the skill load for it?",
        "- **why**: what it was drafted as (a phrasing of a request for the skill, a near miss that",
        "  belongs to another skill of the catalogue, an unrelated request).",
        "- **check**: which skill the label check found fits it best; `DISAGREES` marks a query it",
        "  gave to another skill than its label says (the drafted label may be wrong: read it first).",
        "",
        f"Then write the suite from this file: `skilltune draft apply {suite}`",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        values = [r.mark, r.id, str(r.should_trigger).lower(), r.split or "-", r.query, r.why, r.check]
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines) + "\n"


def skill_creator_list(tasks: Iterable[dict[str, Any]]) -> str:
    """skill-creator's trigger eval format: a JSON list of {"query", "should_trigger"}, one a line."""
    items = [json.dumps({"query": t["prompt"], "should_trigger": t["should_trigger"]}) for t in tasks]
    return "[\n" + ",\n".join(f"  {item}" for item in items) + "\n]\n"


def write_splits(root: Path, by_split: dict[str, list[dict[str, Any]]]) -> None:
    """train/val/test.jsonl (a split with no task has no file) and skill-creator's list, each atomically."""
    for split in SPLITS:
        path = root / f"{split}.jsonl"
        if by_split.get(split):
            write_jsonl(path, by_split[split])
        else:
            path.unlink(missing_ok=True)
    write_text(root / SKILL_CREATOR_FILE, skill_creator_list(t for s in SPLITS for t in by_split.get(s, [])))


@dataclass
class Applied:
    """What ``apply_review`` wrote: tasks per split and class, and the rows by mark."""

    suite: Path
    splits: dict[str, Counter[bool]] = field(default_factory=dict)
    marks: Counter[str] = field(default_factory=Counter)
    placed_by_text: int = 0

    @property
    def tasks(self) -> int:
        return sum(sum(c.values()) for c in self.splits.values())


def _current(root: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """The tasks of the split files by id: (the object, where it is)."""
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for split in SPLITS:
        path = root / f"{split}.jsonl"
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{path}:{number}: invalid JSON ({exc.msg}): fix it, then apply again"
                ) from None
            if isinstance(obj, dict) and "id" in obj:
                found[str(obj["id"])] = (obj, f"{path}:{number}")
    return found


def apply_review(suite: Path | str) -> Applied:
    """Write the split files of a drafted suite from its review (see the module's docstring); UsageError
    with the file, the line and the fix when the review is not valid or a task would be lost."""
    root = Path(suite)
    path = root / REVIEW_FILE
    if not path.is_file():
        raise UsageError(
            f"{path}: no review file: `skilltune draft apply` writes a suite drafted by "
            "`skilltune draft triggers` from its review"
        )
    rows, problems = read_review(path)
    if problems:
        shown = "\n".join(f"  {p}" for p in problems[:_SHOWN])
        raise UsageError(f"the review is not valid, nothing was written:\n{shown}\nfix it and apply again")
    current = _current(root)
    reviewed = {r.id for r in rows}
    lost = [(task_id, where) for task_id, (_, where) in current.items() if task_id not in reviewed]
    if lost:
        shown = "\n".join(f"  {where}: task {task_id!r}" for task_id, where in lost[:_SHOWN])
        raise UsageError(
            f"the split files hold task(s) that {path} does not, which apply would lose:\n{shown}\n"
            "add a row for each to the review (mark it drop to leave it out), then apply again"
        )
    applied = Applied(root, {s: Counter() for s in SPLITS})
    by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    seen: dict[str, str] = {}
    errors: list[str] = []
    for row in rows:
        applied.marks[row.mark] += 1
        if not row.kept:
            continue
        obj = {**current.get(row.id, ({}, ""))[0], **row.task()}
        _, messages = check_task(obj, row.task_split, f"{REVIEW_FILE}:{row.line}", seen)
        errors += [f"  {path}:{row.line}: {m}" for m in messages]
        by_split[row.task_split].append(obj)
        applied.splits[row.task_split][row.label] += 1
        applied.placed_by_text += row.split is None
    if errors:
        raise UsageError("the review is not valid, nothing was written:\n" + "\n".join(errors[:_SHOWN]))
    empty = [s for s in REQUIRED_SPLITS if not by_split[s]]
    if empty:
        raise UsageError(
            f"after the review no query is left in {' and '.join(empty)}: a suite needs train and val; "
            f"mark fewer rows drop in {path}, or add rows, then apply again"
        )
    write_splits(root, by_split)
    return applied
