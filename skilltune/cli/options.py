"""The parameters several commands declare alike, each declared once: the suite, a run directory,
``--skill`` / ``--no-skill``, ``--out``, ``--force`` and ``--quiet``. A command that words one its
own way gives its words to the function that declares it (``no_skill_option``, ``out_option``).

Typer reads these when it builds a command; nothing here imports what a command runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from skilltune.errors import UsageError

if TYPE_CHECKING:
    from skilltune.skill import Candidate

SuiteArg = Annotated[
    Path, typer.Argument(help="Suite folder (train/val/test.jsonl + scoring.md) or a Python env (.py).")
]
RunArg = Annotated[Path, typer.Argument(help="The run directory (RUNS_DIR/TAG).")]
_SKILL = typer.Option("--skill", "-s", help="Skill folder or single instruction file.")
SkillOpt = Annotated[Path | None, _SKILL]
RequiredSkillOpt = Annotated[Path, _SKILL]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace results already in --out.")]
NoProgressOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]


def no_skill_option(lead: str) -> Any:
    """``--no-skill``, the agent without any skill; ``lead`` says what the command does with it
    ("Evaluate")."""
    return typer.Option("--no-skill", help=f"{lead} the agent without any skill.")


def out_option(default: str) -> Any:
    """``--out``, the output folder; its help names ``default``, the pattern ``out_folder`` fills."""
    return typer.Option("--out", help=f"Output folder (default {default}).")


def out_folder(given: Path | None, default: str, **fields: object) -> Path:
    """``--out`` as given, else the ``default`` pattern of its help with each ``<field>`` filled in
    (``runs/eval-<skill>-<split>``: ``skill=`` and ``split=``)."""
    if given is not None:
        return given
    return Path(re.sub(r"<(\w+)>", lambda match: str(fields[match[1]]), default))


def skill_or_none(skill: Path | None, no_skill: bool, without: str) -> Candidate | None:
    """The skill of ``--skill``, or None for ``--no-skill`` (one of them, not both); ``without``
    says what --no-skill does ("run the agent")."""
    from skilltune.skill import load_skill

    if skill is not None and no_skill:
        raise UsageError("--skill and --no-skill exclude each other: give one")
    if skill is None and not no_skill:
        raise UsageError(f"give --skill DIR, or --no-skill to {without} without a skill")
    return load_skill(skill) if skill is not None else None
