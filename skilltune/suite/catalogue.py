"""A suite's skill catalogue: the other skills installed beside the one being tuned.

Whether an agent loads a skill is decided among the descriptions of every skill it has, so a
trigger suite can bring a realistic catalogue: ``<suite>/catalogue/<name>/SKILL.md`` (each a
skill folder as the agent would install it: front matter ``name`` and ``description``, a body,
any supporting files). Every rollout installs them where the agent discovers skills, beside the
candidate (``placement=native``), and a direct chat target lists them with the candidate (see
docs/trigger.md). They are part of the suite: their text is in the suite's content hash and in
every task's hash, so editing one ends a training run and never hits the rollout cache.

A catalogue skill is never tuned, never shown to the proposer and never scored: it is scenery.
Its name must differ from the candidate's (``check_catalogue``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from skilltune.errors import UsageError
from skilltune.skill import Candidate, load_skill
from skilltune.store import canonical_json
from skilltune.suite.model import Problem

CATALOGUE_DIR = "catalogue"


def catalogue_folder(root: Path) -> Path:
    return root / CATALOGUE_DIR


def read_catalogue(root: Path) -> tuple[tuple[Candidate, ...], list[Problem]]:
    """The catalogue's skills in name order, and the problems that keep any of them out.

    No ``catalogue/`` folder: no skills, no problems (a suite without a catalogue runs as before)."""
    folder = catalogue_folder(root)
    if not folder.exists():
        return (), []
    return read_skill_folders(folder)


def read_skill_folders(
    folder: Path, leave_out: Path | None = None
) -> tuple[tuple[Candidate, ...], list[Problem]]:
    """The skills of a folder of skill folders (``<name>/SKILL.md``) in name order, and the problems
    that keep any of them out; ``leave_out`` (a skill folder) is passed over."""
    if not folder.is_dir():
        return (), [Problem(file=str(folder), message="must be a folder of skill folders (<name>/SKILL.md)")]
    skills: list[Candidate] = []
    problems: list[Problem] = []
    seen: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or (leave_out is not None and entry.resolve() == leave_out.resolve()):
            continue
        if not entry.is_dir():
            problems.append(
                Problem(
                    file=str(entry), message="not a skill folder: put each catalogue skill in <name>/SKILL.md"
                )
            )
            continue
        try:
            skill = load_skill(entry)
        except UsageError as exc:
            problems.append(
                Problem(file=str(entry / "SKILL.md"), line=1, message=_first_line(str(exc), entry))
            )
            continue
        if skill.name in seen:
            problems.append(
                Problem(
                    file=str(entry / "SKILL.md"),
                    line=1,
                    message=f"name {skill.name!r} is also the name of {seen[skill.name]}: each skill needs its own",
                )
            )
            continue
        seen[skill.name] = entry
        skills.append(skill)
    return tuple(skills), problems


def _first_line(message: str, entry: Path) -> str:
    """A load_skill message without the path it starts with (the Problem names the file)."""
    text = message.splitlines()[0]
    for prefix in (f"{entry / 'SKILL.md'}:", f"{entry}:"):
        if text.startswith(prefix):
            return text[len(prefix) :].strip().removeprefix("1:").strip()
    return text


def catalogue_hash(skills: tuple[Candidate, ...]) -> str:
    """sha256 over the catalogue's skills (name and content hash of each)."""
    return hashlib.sha256(canonical_json([[s.name, s.hash] for s in skills]).encode("utf-8")).hexdigest()


def check_catalogue(skills: tuple[Candidate, ...], candidate_names: list[str], root: Path) -> str | None:
    """Why the catalogue cannot sit beside these candidates (a skill of the same name), else None."""
    clash = sorted({s.name for s in skills} & set(candidate_names))
    if not clash:
        return None
    return (
        f"{catalogue_folder(root)}: the catalogue has a skill named {', '.join(repr(n) for n in clash)}, "
        "the name of the skill being tuned; rename the catalogue's skill (its folder and front-matter name)"
    )
