"""What the judge reads: judge.md with the verdict protocol, then the task, the reference, the
input files and the output; and the inputs themselves, collected from a workspace (capped)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skilltune.errors import ScoringError
from skilltune.runfiles.judge import JudgeInputsFile
from skilltune.suite.model import Task

INPUT_CAP = 16_000  # characters per input file, as skill-trainer: keeps the prompt bounded
MAX_INPUT_FILES = 50  # a glob such as **/* must not pull a whole tree into one prompt
PROMPT_VERSION = "1"  # part of the verdict cache key: a change to this wording is a new judge

PROTOCOL = """

## How to answer

Call the `record_verdict` tool once. Give every criterion named above a score from 0.0
to 1.0 and say what in the output earned it, quoting where you can. `overall` combines
the criteria as the rubric says; `passed` applies the rubric's pass rule; `reasoning`
names the biggest gap first, in two to five sentences. If you cannot call tools, answer
with one JSON object with the same fields (criteria, overall, passed, reasoning) and
nothing else.
"""

CORRECTION = """

## Correction (attempt {attempt})

Your previous answer could not be used: {problem}. Each criterion needs a name and a
numeric score from 0.0 to 1.0, `overall` is a number, `passed` is true or false,
`reasoning` is text. Call the tool again, or answer with that one JSON object only.
"""


@dataclass(frozen=True)
class JudgeCase:
    """Everything one verdict depends on (its hash is the verdict cache's key, with the judge)."""

    rubric: str
    prompt: str
    reference: str | None
    inputs: dict[str, str]
    output: str

    @property
    def mode(self) -> str:
        """dataset: scored against a reference; rubric: judge.md alone defines good."""
        return "dataset" if self.reference is not None else "rubric"


def messages(case: JudgeCase) -> tuple[str, str]:
    """(system, user) for one verdict."""
    system = case.rubric.rstrip() + PROTOCOL
    parts = ["## The task given to the agent\n\n", case.prompt.rstrip(), "\n"]
    if case.reference is not None:
        parts += [
            "\n## Reference: what a good output achieves for this task\n\n",
            "Score the output by how well it achieves what the reference achieves; the reference ",
            "is the target, not a text to match word for word.\n\n",
            case.reference.rstrip(),
            "\n",
        ]
    else:
        parts += ["\n## Reference\n\nThis task has no reference: judge the output by the rubric alone.\n"]
    for rel, text in case.inputs.items():
        parts += [f"\n## Input file: {rel}\n\n```\n", text.rstrip(), "\n```\n"]
    parts += ["\n## The output under evaluation\n\n```\n", case.output.rstrip(), "\n```\n"]
    return system, "".join(parts)


def correction(user: str, attempt: int, problem: str) -> str:
    """The user message again, with why the last answer was refused (the same prompt at temperature
    0 would give the same malformed answer)."""
    return user + CORRECTION.format(attempt=attempt, problem=shorten(problem, 300))


def shorten(problem: str, limit: int) -> str:
    """``problem`` in at most about ``limit`` characters, its last parenthesis kept whole (where
    ``ask_structured`` says that the answer was cut at the token limit and should be shorter)."""
    if len(problem) <= limit:
        return problem
    cut = problem.rfind(" (")
    tail = problem[cut:] if cut > 0 and problem.endswith(")") and len(problem) - cut < limit // 2 else ""
    return problem[: limit - len(tail)].rstrip() + "..." + tail


def reference_text(task: Task, suite_root: Path) -> str | None:
    """The task's reference (inline ``reference_text``, else the file ``reference``), None for rubric mode."""
    inline = task.field("reference_text")
    if isinstance(inline, str) and inline:
        return inline
    rel = task.field("reference")
    if not rel:
        return None
    path = suite_root / str(rel)
    if not path.is_file():
        raise ScoringError(f"task {task.id}: reference {rel!r} is not a file under {suite_root}")
    return path.read_text(encoding="utf-8", errors="replace")


def collect_inputs(task: Task, workspace: Path) -> JudgeInputsFile:
    """The workspace files matching the task's ``judge_inputs`` globs, each capped at INPUT_CAP."""
    files: dict[str, str] = {}
    truncated: list[str] = []
    dropped = 0
    root = workspace.resolve()
    for pattern in task.field("judge_inputs") or []:
        for path in sorted(workspace.glob(str(pattern))):
            if not path.is_file() or not path.resolve().is_relative_to(root):
                continue
            rel = path.relative_to(workspace).as_posix()
            if rel in files:
                continue
            if len(files) >= MAX_INPUT_FILES:
                dropped += 1
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if len(text) > INPUT_CAP:
                text = text[:INPUT_CAP] + f"\n... [truncated at {INPUT_CAP} characters]"
                truncated.append(rel)
            files[rel] = text
    return JudgeInputsFile(files=files, truncated=truncated, dropped=dropped)
