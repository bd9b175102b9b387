"""One task object checked by the Task model (and ids across the suite), errors as fix-it messages."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skilltune.suite.model import SUITE_ROOT, Task, safe_id
from skilltune.validation import field_problems

# The fix for a key a task's model does not declare.
BESIDE_SCORING = (
    "fix the spelling or remove it; data for backends belongs in the task object, beside 'scoring'"
)


def claim_id(task_id: str, where: str, seen: dict[str, str]) -> str | None:
    """Record ``task_id`` as found at ``where``; why it cannot be used (taken, or its file name is), or None.

    ``seen`` maps the ids of the suite found so far (and their file-name forms) to where they are.
    """
    if task_id in seen:
        return (
            f"duplicate id {task_id!r} (first at {seen[task_id]}): ids are unique across train, val and test"
        )
    file_name = f"safe:{safe_id(task_id)}"
    if file_name in seen:
        return (
            f"id {task_id!r} and the id at {seen[file_name]} both become {safe_id(task_id)!r} "
            "in file names: rename one"
        )
    seen[task_id] = seen[file_name] = where
    return None


def check_task(
    obj: Mapping[str, Any], split: str, where: str, seen: dict[str, str], suite_root: Path | None = None
) -> tuple[Task | None, list[str]]:
    """``obj`` as a Task of ``split``, and every problem with it (the Task is None when there is one).

    ``where`` names the object in messages about other tasks ("val.jsonl:2"); its id
    joins ``seen`` when valid (see ``claim_id``), even if another field is not, so a
    later duplicate is still reported. ``suite_root`` is where ``files`` must be.
    """
    context = {SUITE_ROOT: suite_root} if suite_root is not None else None
    task: Task | None = None
    messages: list[str] = []
    id_refused = False
    try:
        task = Task.model_validate({**obj, "split": split}, context=context)
    except ValidationError as exc:
        messages = field_problems(exc, model=Task, raw=obj, described=True, unknown_hint=BESIDE_SCORING)
        id_refused = any(err["loc"][:1] == ("id",) for err in exc.errors())
    if not id_refused:
        taken = claim_id(str(obj["id"]), where, seen)
        if taken:
            messages.insert(0, taken)
    return (task if not messages else None), messages
