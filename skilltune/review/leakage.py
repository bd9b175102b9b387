"""Leakage: val/test task ids and passages found in what the proposer read or wrote, or in the skill.

The secrets are the val and test tasks: their ids, and every passage of ``NGRAM`` words or
more from their prompts, scoring references and expected answers, other task fields, the
files they bring and the ``refs/`` files only they name, that does not also occur in the
train tasks, the seed skill, the proposer pool or skilltune's own prompt templates (those
may reach a proposer by design). Words are lowercase ``\\w+`` runs, so punctuation, layout and
JSON escaping inside a prompt do not hide a passage.

Train text is no secret, but a best version that quotes one train task's prompt holds a rule that
fits that task alone: ``train_quotes`` finds it (the audit's warning ``train-quote``) with the
rule vet applies to each proposed edit. Both searches read words, windows and passages with
propose/quotes.py's code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from skilltune.proposal import ProposerCall
from skilltune.propose.quotes import RUN_WORDS, Gram, TrainPrompts, passages, windows, words
from skilltune.review.lineage import History, hunks
from skilltune.runfiles import AuditFinding, ReflectionsFile, SlowUpdateFile
from skilltune.skill import Candidate
from skilltune.store import iter_tree
from skilltune.suite import Suite, Task
from skilltune.textfmt import one_line

# words: promote.py reads text as the searches do
__all__ = ["NGRAM", "Hit", "Secrets", "search", "train_quotes", "words"]

NGRAM = RUN_WORDS  # eight words in a row are copied text, not phrasing two texts happen to share
MIN_ID_LEN = 4  # shorter ids (and numbers) match too much ordinary text to call a leak
_MAX_FILE_BYTES = 1_000_000
_ID_TOKEN = re.compile(r"[\w.:-]+")


def _grams(text: str) -> Iterator[Gram]:
    return windows(words(text), NGRAM)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            return ""
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""  # a binary or unreadable file holds no passage a proposer could quote


def _task_texts(suite: Suite, task: Task) -> Iterator[tuple[str, str]]:
    """(field, text) of everything a task holds: its fields and the files it brings."""
    for key, value in task.as_json().items():
        if key != "id":
            for text in _strings(value):
                yield key, text
    for name, path in suite.task_files(task):
        if path.is_file():
            yield f"file {name}", _read(path)
        elif path.is_dir():
            for inner in iter_tree(path):
                yield f"file {name}/{inner.relative_to(path).as_posix()}", _read(inner)


def _refs(suite: Suite, tasks: list[Task]) -> Iterator[tuple[str, str]]:
    """(name, text) of the files under refs/ whose path one of ``tasks`` names."""
    refs = suite.root / "refs"
    if not refs.is_dir():
        return
    named = "\n".join(text for task in tasks for _, text in _task_texts(suite, task))
    for path in iter_tree(refs):
        rel = path.relative_to(suite.root).as_posix()
        if rel in named or path.relative_to(refs).as_posix() in named:
            yield rel, _read(path)


def _templates() -> Iterator[str]:
    folder = resources.files("skilltune.prompts")
    for entry in folder.iterdir():
        if entry.name.endswith(".md"):
            yield entry.read_text(encoding="utf-8")


@dataclass
class Secrets:
    """What must not reach a proposer: passages (n-gram -> where it comes from) and task ids."""

    grams: dict[Gram, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)  # task id -> its split
    unsearched_ids: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, suite: Suite, seed_texts: Iterable[str]) -> Secrets:
        train = suite.splits.get("train") or []
        held = [t for split in ("val", "test") for t in suite.splits.get(split) or []]
        allowed_texts = [text for task in train for _, text in _task_texts(suite, task)]
        allowed_texts += [r for _, r in _refs(suite, train)]
        allowed_texts += list(seed_texts)
        allowed_texts += list(_strings((suite.config.model_extra or {}).get("proposer_pool")))
        allowed_texts += list(_templates())
        allowed = {g for text in allowed_texts for g in _grams(text)}
        allowed_ids = {tok for text in allowed_texts for tok in _ID_TOKEN.findall(text)}
        allowed_ids |= {t.id for t in train}
        secrets = cls()
        for task in held:
            for name, text in _task_texts(suite, task):
                for gram in _grams(text):
                    if gram not in allowed:
                        secrets.grams.setdefault(gram, f"{task.split} task {task.id} ({name})")
            if task.id in allowed_ids:
                continue  # train text uses it as an ordinary word
            if len(task.id) < MIN_ID_LEN or task.id.isdigit():
                secrets.unsearched_ids.append(task.id)
            else:
                secrets.ids[task.id] = task.split
        for name, text in _refs(suite, held):
            if any(name in t or name.removeprefix("refs/") in t for t in allowed_texts):
                continue  # a train task names it too
            for gram in _grams(text):
                if gram not in allowed:
                    secrets.grams.setdefault(gram, f"reference {name}")
        return secrets


@dataclass(frozen=True)
class Hit:
    """Secrets found in one document: passages (their text, and where they come from) and ids."""

    passages: list[tuple[str, str]]
    ids: list[str]


def search(secrets: Secrets, text: str) -> Hit | None:
    """The secret passages (merged where 8-word windows overlap) and ids in ``text``."""
    found = passages(words(text), NGRAM, secrets.grams.get)
    ids = _ids_in(secrets, text)
    return Hit(found, ids) if found or ids else None


def _ids_in(secrets: Secrets, text: str) -> list[str]:
    found = {tok.strip(".:-") for tok in _ID_TOKEN.findall(text)} | set(_ID_TOKEN.findall(text))
    hits = [task_id for task_id in secrets.ids if task_id in found]
    # An id holding characters no token holds (a space, a slash) is looked for as a substring.
    hits += [
        task_id
        for task_id in secrets.ids
        if task_id not in hits and not _ID_TOKEN.fullmatch(task_id) and task_id in text
    ]
    return sorted(hits)


def train_quotes(history: History, suite: Suite) -> tuple[list[AuditFinding], int]:
    """Warnings: each change from the seed to the best version whose added text quotes one train
    task's prompt, with the kept units that made it; and how many train prompts were searched."""
    train = suite.splits.get("train") or []
    prompts = TrainPrompts({task.id: suite.prompt(task) for task in train})  # as the proposer saw them
    seed = list(history.seed.files.values())
    found = []
    for hunk in hunks(history.chain):
        quotes = prompts.quotes("".join(hunk.added), seed)
        if not quotes:
            continue
        units = ", ".join(hunk.units) or "an unknown unit"
        shown = "; ".join(f"{one_line(q.text, 100)!r} (train task {q.task_id})" for q in quotes[:3])
        more = f" and {len(quotes) - 3} more" if len(quotes) > 3 else ""
        message = (
            f"added by {units}, quotes the prompt of a single train task (a rule keyed on it fits that "
            f"task alone): {shown}{more}"
        )
        details = {"units": hunk.units, "quotes": [{"text": q.text, "task": q.task_id} for q in quotes]}
        found.append(
            AuditFinding(
                check="train-quote", where=f"best_skill/{hunk.path}", message=message, details=details
            )
        )
    return found, len(train)


def _calls(rel: str, calls: Sequence[ProposerCall]) -> Iterator[tuple[str, str]]:
    for i, call in enumerate(calls):
        yield f"{rel} calls[{i}] ({call.role}) prompt", call.prompt
        yield f"{rel} calls[{i}] ({call.role}) response", call.response


def documents(history: History) -> Iterator[tuple[str, str]]:
    """(where, text) of everything a proposer read or wrote, the memory, and every skill version."""
    run = history.run
    for path in sorted(run.steps.glob("*/reflections.json")):
        rel = path.relative_to(run.root).as_posix()
        reflections = ReflectionsFile.read(path)
        yield from _calls(rel, reflections.calls)
        for i, edit in enumerate(reflections.edits):
            yield f"{rel} edits[{i}]", "\n".join([edit.anchor or "", edit.text, edit.rationale])
        for i, dropped in enumerate(reflections.dropped):  # proposer output too, though never applied
            edit = dropped.edit
            yield f"{rel} dropped[{i}]", "\n".join([edit.anchor or "", edit.text, edit.rationale])
        for name, text in sorted((reflections.files or {}).items()):
            yield f"{rel} files[{name}]", text
    for path in sorted(run.steps.glob("*/slow_update.json")):
        rel = path.relative_to(run.root).as_posix()
        update = SlowUpdateFile.read(path)
        yield from _calls(rel, update.calls)
        yield f"{rel} guidance", update.guidance
    if run.meta.is_file():
        yield "META.md", run.meta.read_text(encoding="utf-8")
    for name, candidate in history.saved.items():
        for file, text in sorted(candidate.files.items()):
            yield f"steps/{name}/candidate/{file}", text
    if run.best_dir.is_dir():
        for file, text in sorted(Candidate.load(run.best_dir, history.seed).files.items()):
            yield f"best_skill/{file}", text
