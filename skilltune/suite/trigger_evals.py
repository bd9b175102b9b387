"""skill-creator's trigger evals, read unchanged: ``trigger_evals.json`` beside a suite's splits.

Anthropic's skill-creator keeps the queries its description optimiser runs as a JSON list of
``{"query": "...", "should_trigger": true|false}`` objects. A folder suite may hold such a file
as ``trigger_evals.json``: each object becomes a trigger task (``prompt`` = its query, its
``should_trigger`` kept, any other key kept as a task field), with the id ``trigger-<n>`` (its
1-based position in the file, three digits).

The split is deterministic and stratified, as skill-creator stratifies its holdout: within
each class (should trigger, should not) the queries are ordered by the sha256 of their text and
dealt in turn to train, val and test. A query keeps its split whatever the file's order; adding
or removing a query can move others of its class.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from skilltune.suite.checks import check_task
from skilltune.suite.model import SPLITS, Problem, Task

TRIGGER_EVALS_FILE = "trigger_evals.json"
_FORMAT = 'a JSON list of {"query": "...", "should_trigger": true|false} objects (skill-creator\'s format)'


def deal(queries: list[tuple[str, bool]]) -> list[str]:
    """The split of each ``(query, should_trigger)``, in the order given (see the module's docstring)."""
    splits = [""] * len(queries)
    for cls in (True, False):
        members = [i for i, (_, should) in enumerate(queries) if should is cls]
        members.sort(key=lambda i: (hashlib.sha256(queries[i][0].encode("utf-8")).hexdigest(), i))
        for rank, i in enumerate(members):
            splits[i] = SPLITS[rank % len(SPLITS)]
    return splits


def _items(text: str) -> list[tuple[int, Any]]:
    """The top-level list's items with the line each starts on; ValueError(message, line) when the
    text is not a JSON list."""
    decoder = json.JSONDecoder()
    index = _skip(text, 0)
    if index >= len(text) or text[index] != "[":
        raise ValueError(f"expected {_FORMAT}", text.count("\n", 0, index) + 1)
    index = _skip(text, index + 1)
    items: list[tuple[int, Any]] = []
    if index < len(text) and text[index] == "]":
        return items
    while True:
        line = text.count("\n", 0, index) + 1
        try:
            item, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON: {exc.msg}", exc.lineno) from None
        items.append((line, item))
        index = _skip(text, index)
        if index < len(text) and text[index] == ",":
            index = _skip(text, index + 1)
            continue
        if index < len(text) and text[index] == "]" and not text[index + 1 :].strip():
            return items
        raise ValueError(
            "invalid JSON: expected ',' or the list's closing ']'", text.count("\n", 0, index) + 1
        )


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def read_trigger_evals(
    root: Path, seen: dict[str, str], problems: list[Problem]
) -> tuple[dict[str, list[Task]], dict[str, str]]:
    """The tasks of ``root/trigger_evals.json`` by split, and where each lies (``file:line``).

    Problems (file and line, with the fix) go to ``problems``; ``seen`` holds the suite's ids so far."""
    path = root / TRIGGER_EVALS_FILE
    by_split: dict[str, list[Task]] = {}
    locations: dict[str, str] = {}

    def report(message: str, line: int | None) -> None:
        problems.append(Problem(file=str(path), line=line, message=message))

    try:
        items = _items(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        report("not UTF-8 text: save the file as UTF-8", None)
        return by_split, locations
    except ValueError as exc:
        message, line = exc.args
        report(message, line)
        return by_split, locations
    if not items:
        report(f"no queries: {TRIGGER_EVALS_FILE} holds {_FORMAT}; add some, or remove the file", 1)
        return by_split, locations
    width = max(3, len(str(len(items))))
    valid: list[tuple[int, int, dict[str, Any]]] = []
    for position, (line, item) in enumerate(items, start=1):
        if not isinstance(item, dict):
            report(f"query {position} is a {type(item).__name__}: each item is an object, {_FORMAT}", line)
            continue
        query, should = item.get("query"), item.get("should_trigger")
        if not isinstance(query, str) or not query.strip():
            report(f"query {position} has no 'query' (a non-empty string: the user's prompt)", line)
            continue
        if not isinstance(should, bool):
            report(
                f"query {position}: 'should_trigger' must be true or false (JSON booleans, not "
                f"{json.dumps(should)}): whether the skill should be loaded for this query",
                line,
            )
            continue
        valid.append((position, line, item))
    splits = deal([(item["query"], item["should_trigger"]) for _, _, item in valid])
    for (position, line, item), split in zip(valid, splits, strict=True):
        where = f"{path}:{line}"
        obj = {k: v for k, v in item.items() if k != "query"}
        obj |= {"id": f"trigger-{position:0{width}d}", "prompt": item["query"]}
        task, messages = check_task(obj, split, f"{TRIGGER_EVALS_FILE}:{line}", seen)
        for message in messages:
            report(f"query {position}: {message}", line)
        if task is not None:
            by_split.setdefault(split, []).append(task)
            locations[task.id] = where
    return by_split, locations
