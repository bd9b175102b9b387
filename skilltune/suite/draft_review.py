"""The review file of a drafted trigger suite (``draft_review.md``): its rows, and what validate says.

``skilltune draft triggers`` writes the file beside the suite's split files: a markdown table with
one row per drafted query (``| mark | id | should_trigger | split | query | why | check |``). A
person reads each row and sets its mark: ``?`` (not reviewed yet, as drafted), ``ok`` (keep it),
``drop`` (leave it out of the suite), ``flip`` (keep it with the other label); they may also
correct a query's text, or add a row (a new id, ``true`` or ``false``, split ``-``).
``skilltune draft apply SUITE`` then writes the split files from the table (skilltune/draft/review.py).

The suite's split files are what runs; the table is the record of the review and is never
rewritten by skilltune. ``review_problems`` holds the two together for ``validate`` and every
command that loads the suite: rows still marked ``?`` are one warning (their count and the lines
of the first ones); a row whose decision the split files do not show yet (a ``drop`` still in
them, a ``flip`` not applied, an edited query, a row missing) is an error naming the fix
(``skilltune draft apply SUITE``), so a query a person judged wrong is never run by mistake.

The split of a row is its ``split`` cell; ``-`` (a row a person added) is ``split_of`` its text:
the sha256 of the query's text, modulo three, as train, val, test. It depends on the query alone,
so adding or removing queries never moves another one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltune.suite.model import SPLITS, Problem, Task

REVIEW_FILE = "draft_review.md"
COLUMNS = ("mark", "id", "should_trigger", "split", "query", "why", "check")
MARKS = ("?", "ok", "drop", "flip")
UNREVIEWED = "?"
DISAGREES = "DISAGREES"  # how the label check's cell opens when it gave the query to another skill
_SHOWN_LINES = 5
_RULE = re.compile(r"\|?(?:\s*:?-+:?\s*\|)*\s*:?-+:?\s*\|?")


def split_of(query: str) -> str:
    """The split of a query by its text alone: the sha256 of the text, modulo three (train, val, test)."""
    return SPLITS[int(hashlib.sha256(query.encode("utf-8")).hexdigest(), 16) % len(SPLITS)]


def cell(text: str) -> str:
    """``text`` as one table cell: on one line, a backslash and a ``|`` escaped."""
    flat = " ".join(text.split())
    return flat.replace("\\", "\\\\").replace("|", "\\|")


def cells(line: str) -> list[str]:
    """The cells of a table row ``| a | b\\|c |``: unescaped and stripped, the outer pipes dropped."""
    found: list[str] = []
    current: list[str] = []
    chars = iter(line.strip())
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            current.append(nxt if nxt in ("\\", "|") else char + nxt)
        elif char == "|":
            found.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    found.append("".join(current).strip())
    if found and found[0] == "":
        found = found[1:]
    if found and found[-1] == "":
        found = found[:-1]
    return found


@dataclass(frozen=True)
class ReviewRow:
    """One query of the review: ``should_trigger`` is the label as drafted (or as the person wrote it);
    ``label`` is the one the suite gets (inverted by ``flip``)."""

    line: int
    mark: str
    id: str
    should_trigger: bool
    split: str | None  # None: "-", the split of the query's text
    query: str
    why: str
    check: str

    @property
    def label(self) -> bool:
        return self.should_trigger != (self.mark == "flip")

    @property
    def kept(self) -> bool:
        return self.mark != "drop"

    @property
    def flagged(self) -> bool:
        return self.check.startswith(DISAGREES)

    @property
    def task_split(self) -> str:
        return self.split or split_of(self.query)

    def task(self) -> dict[str, Any]:
        """The task the suite holds for this row (a kept one)."""
        return {"id": self.id, "prompt": self.query, "should_trigger": self.label}


def read_review(path: Path) -> tuple[list[ReviewRow], list[Problem]]:
    """The rows of the review table at ``path`` and the problems in it (file, line and the fix)."""
    rows: list[ReviewRow] = []
    problems: list[Problem] = []

    def report(line: int | None, message: str) -> None:
        problems.append(Problem(file=str(path), line=line, message=message))

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        report(None, "not UTF-8 text: save the file as UTF-8")
        return rows, problems
    table = [(number, line) for number, line in enumerate(lines, start=1) if line.lstrip().startswith("|")]
    header = " | ".join(COLUMNS)
    if not table or [c.lower() for c in cells(table[0][1])] != list(COLUMNS):
        report(table[0][0] if table else None, f"no review table: its first row must be | {header} |")
        return rows, problems
    seen: dict[str, int] = {}
    for number, line in table[1:]:
        if _RULE.fullmatch(line.strip()):  # the table's header rule
            continue
        row = _row(number, cells(line), seen, report)
        if row is not None:
            rows.append(row)
    return rows, problems


def _row(number: int, found: list[str], seen: dict[str, int], report: Any) -> ReviewRow | None:
    if len(found) != len(COLUMNS):
        report(
            number,
            f"{len(found)} cells, a row has {len(COLUMNS)}: | {' | '.join(COLUMNS)} | "
            "(write a | inside a query as \\|)",
        )
        return None
    mark, task_id, label, split, query, why, check = found
    errors = []
    if mark.lower() not in MARKS:
        errors.append(
            f"mark {mark!r} is not one of ? (not reviewed), ok (keep), drop (leave out), flip (keep, the other label)"
        )
    if not task_id:
        errors.append("no id: give the query an id no other row has")
    elif task_id in seen:
        errors.append(f"id {task_id!r} is also the id of line {seen[task_id]}: give each row its own")
    if label.lower() not in ("true", "false"):
        errors.append(f"should_trigger {label!r} must be true or false (whether the skill should load)")
    if split not in (*SPLITS, "-", ""):
        errors.append(f"split {split!r} must be train, val, test, or - (the split of the query's text)")
    if not query:
        errors.append("no query: write the user's request, or mark the row drop")
    for message in errors:
        report(number, message)
    if task_id and task_id not in seen:
        seen[task_id] = number
    if errors:
        return None
    return ReviewRow(
        line=number, mark=mark.lower(), id=task_id, should_trigger=label.lower() == "true",
        split=split if split in SPLITS else None, query=query, why=why, check=check,
    )  # fmt: skip


def _lines(rows: list[ReviewRow]) -> str:
    shown = ", ".join(str(r.line) for r in rows[:_SHOWN_LINES])
    return shown + (", ..." if len(rows) > _SHOWN_LINES else "")


def review_problems(root: Path, splits: dict[str, list[Task]], *, complete: bool = True) -> list[Problem]:
    """What the review file of the suite at ``root`` says about it: its own problems, one warning for
    the rows not reviewed yet, and (``complete``: every task of the split files was read) an error
    for each row whose decision the split files do not show."""
    path = root / REVIEW_FILE
    rows, problems = read_review(path)
    if problems:
        return problems
    unreviewed = [r for r in rows if r.mark == UNREVIEWED]
    if unreviewed:
        flagged = [r for r in unreviewed if r.flagged]
        also = (
            f"; {len(flagged)} of them flagged by the label check (lines {_lines(flagged)})"
            if flagged
            else ""
        )
        problems.append(
            Problem(
                file=str(path),
                line=unreviewed[0].line,
                message=f"{len(unreviewed)} drafted quer{'y is' if len(unreviewed) == 1 else 'ies are'} not "
                f"reviewed yet (lines {_lines(unreviewed)}{also}): set each mark to ok, drop or flip, "
                f"then run `skilltune draft apply {root}`",
                warning=True,
            )
        )
    if not complete:
        return problems
    tasks = {t.id: t for tasks in splits.values() for t in tasks}
    fix = f"run `skilltune draft apply {root}` to write the suite from the review"
    for row in rows:
        task = tasks.get(row.id)
        if not row.kept:
            if task is not None:
                problems.append(
                    Problem(
                        file=str(path),
                        line=row.line,
                        message=f"{row.id} is marked drop, but {task.split}.jsonl still holds it: {fix}",
                    )
                )
            continue
        if task is None:
            problems.append(
                Problem(file=str(path), line=row.line, message=f"{row.id} is in no split file: {fix}")
            )
            continue
        differs = []
        if task.should_trigger != row.label:
            differs.append(
                f"should_trigger {str(task.should_trigger).lower()} (the review: {str(row.label).lower()})"
            )
        if task.prompt != row.query:
            differs.append("another prompt than the review's query")
        if task.split != row.task_split:
            differs.append(f"its split {task.split} (the review: {row.task_split})")
        if differs:
            problems.append(
                Problem(
                    file=str(path),
                    line=row.line,
                    message=f"{row.id}: {task.split}.jsonl holds {', '.join(differs)}: {fix}",
                )
            )
    return problems
