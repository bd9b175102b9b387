"""Skills and candidates: a skill folder or instruction file as ``{path: text}`` with a content hash.

A skill is a folder with ``SKILL.md`` (YAML front matter ``name`` and
``description``, then a markdown body) plus optional supporting files, or a
single instruction file (AGENTS.md, CLAUDE.md, a system prompt). Either way it
becomes a *candidate*: ``{relative path: text}``, identified by the sha256 of
its sorted items. Everything that stores or caches a skill keys on that hash.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from skilltune.errors import UsageError
from skilltune.store import canonical_json, iter_tree, write_text

SKILL_FILE = "SKILL.md"
NAME_MAX = 64
DESCRIPTION_MAX = 1024
BODY_MAX_LINES = 500
MAX_SKILL_BYTES = 2_000_000
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# Protected blocks, in skilltune's form (<!-- PROTECTED:name --> ... <!-- /PROTECTED -->) and in
# skill-trainer's (<!-- PROTECTED:NAME:START --> ... <!-- PROTECTED:NAME:END -->); block_key makes
# their names one (SLOW_UPDATE and slow-update are the same block).
_NAME = r"[A-Za-z0-9_.-]+"
_PROTECTED_OPEN = re.compile(rf"<!--\s*PROTECTED:({_NAME})(:START)?\s*-->")
_PROTECTED_CLOSE = re.compile(rf"<!--\s*(?:/PROTECTED|PROTECTED:({_NAME}):END)\s*-->")
PROTECTED_BLOCK = re.compile(
    rf"<!--\s*PROTECTED:(?P<name>{_NAME})\s*-->.*?<!--\s*/PROTECTED\s*-->"
    rf"|<!--\s*PROTECTED:(?P<st>{_NAME}):START\s*-->.*?<!--\s*PROTECTED:(?P=st):END\s*-->",
    re.S,
)
MEMORY_FILE = (
    "META.md"  # skill-trainer's optimizer memory, kept in the skill folder: never shown to the agent
)


def block_key(name: str) -> str:
    """One name for a protected block whichever form wrote it (SLOW_UPDATE -> slow-update)."""
    return name.lower().replace("_", "-")


@dataclass(frozen=True)
class FrontMatter:
    data: dict[str, Any] | None  # None: no front matter block
    body: str
    body_line: int  # 1-based line of the body's first line in the file
    error: str | None = None


def split_front_matter(text: str) -> FrontMatter:
    """Split ``---``-fenced YAML front matter from the body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return FrontMatter(None, text, 1)
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            raw = "".join(lines[1:i])
            body = "".join(lines[i + 1 :])
            import yaml  # here: a command that reads no skill (validate) loads no YAML

            try:
                data = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError as exc:
                return FrontMatter({}, body, i + 2, f"front matter is not valid YAML: {exc}")
            if not isinstance(data, dict):
                return FrontMatter(
                    {}, body, i + 2, "front matter must be a YAML mapping (name: ..., description: ...)"
                )
            return FrontMatter(data, body, i + 2)
    return FrontMatter({}, text, 1, "front matter opened with '---' is never closed")


@dataclass(frozen=True)
class Candidate:
    """A skill version: ``files`` maps relative POSIX paths to text.

    ``main`` is the file the agent loads (SKILL.md, or the single instruction
    file); ``kind`` says which form the skill takes. The content hash covers
    ``files`` only.
    """

    files: Mapping[str, str]
    main: str = SKILL_FILE
    kind: Literal["folder", "file"] = "folder"
    fallback_name: str = field(default="skill", compare=False)

    def __post_init__(self) -> None:
        if self.main not in self.files:
            raise UsageError(f"candidate has no {self.main} (files: {', '.join(sorted(self.files))})")

    @cached_property
    def hash(self) -> str:
        return hashlib.sha256(canonical_json(sorted(self.files.items())).encode("utf-8")).hexdigest()

    @property
    def short(self) -> str:
        return self.hash[:12]

    @property
    def text(self) -> str:
        return self.files[self.main]

    @cached_property
    def front_matter(self) -> FrontMatter:
        return split_front_matter(self.text)

    @property
    def name(self) -> str:
        data = self.front_matter.data or {}
        name = data.get("name")
        return name if isinstance(name, str) and _NAME_RE.match(name) else self.fallback_name

    @property
    def description(self) -> str:
        data = self.front_matter.data or {}
        value = data.get("description")
        return value if isinstance(value, str) else ""

    def replace_file(self, path: str, text: str) -> Candidate:
        files = dict(self.files)
        files[path] = text
        return Candidate(files, self.main, self.kind, self.fallback_name)

    def write(self, folder: Path) -> None:
        """Write the candidate's files under ``folder`` (a skill folder, or the file's folder)."""
        for rel, text in self.files.items():
            write_text(folder / rel, text)

    def save(self, folder: Path) -> None:
        """Replace ``folder`` with exactly this candidate, all at once (a kill leaves the old or the new)."""
        staging = folder.with_name(f".{folder.name}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        self.write(staging)
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)

    @classmethod
    def load(cls, folder: Path, like: Candidate) -> Candidate:
        """A candidate saved with ``save``, of the same form (main file, kind) as ``like``."""
        files = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in iter_tree(folder)}
        return cls(files, like.main, like.kind, like.fallback_name)


def load_skill(path: Path | str, *, check_front_matter: bool = True) -> Candidate:
    """Read a skill folder or single instruction file; raise UsageError with the fix when unusable.

    A path to a folder's SKILL.md (skill-trainer's ``--skill skills/X/SKILL.md``) is that folder.
    A ``META.md`` at the folder's top (skill-trainer's optimizer memory) is not part of the skill.

    ``check_front_matter=False`` (``skilltune lint``) reads a folder whose SKILL.md front matter is
    broken, so that its problems are reported with all the others."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such skill: give a folder with SKILL.md or an instruction file")
    if path.is_file() and path.name == SKILL_FILE:
        path = (
            path.parent
        )  # skill-trainer names the skill by its SKILL.md: the folder holding it is the skill
    if path.is_dir():
        if not (path / SKILL_FILE).is_file():
            raise UsageError(
                f"{path}: no {SKILL_FILE}: a skill folder needs SKILL.md with front matter (name, description)"
            )
        files: dict[str, str] = {}
        total = 0
        for file in iter_tree(path):
            rel = file.relative_to(path).as_posix()
            if rel == MEMORY_FILE:
                continue  # the optimizer's memory, not the skill: never placed where the agent reads
            files[rel] = _read_text(file)
            total += len(files[rel])
        if total > MAX_SKILL_BYTES:
            raise UsageError(
                f"{path}: the skill holds {total} bytes of text; keep it under {MAX_SKILL_BYTES}"
            )
        candidate = Candidate(files, SKILL_FILE, "folder", fallback_name=_slug(path.resolve().name))
        errors = [i for i in lint_candidate(candidate) if i.kind == "front-matter"]
        if errors and check_front_matter:
            raise UsageError("\n".join(f"{path / str(i)}" for i in errors))
        return candidate
    text = _read_text(path)
    return Candidate({path.name: text}, path.name, "file", fallback_name=_slug(path.stem))


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            f"{file}: not UTF-8 text; skills are tuned as text, so keep binary assets out of the skill folder"
        ) from None


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:NAME_MAX] or "skill"


@dataclass(frozen=True)
class LintIssue:
    file: str
    line: int | None
    message: str
    kind: str = "lint"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


def lint_candidate(candidate: Candidate) -> list[LintIssue]:
    """Front matter, body size, links to files that exist, well-formed protected blocks."""
    issues: list[LintIssue] = []
    main = candidate.main
    fm = candidate.front_matter

    def issue(
        message: str,
        line: int | None = None,
        *,
        kind: str = "lint",
    ) -> None:
        issues.append(LintIssue(main, line, message, kind))

    if candidate.kind == "folder" or fm.data is not None:
        if fm.error:
            issue(fm.error, 1, kind="front-matter")
        elif fm.data is None:
            issue(
                "no front matter: start SKILL.md with ---, name: ..., description: ..., ---",
                1,
                kind="front-matter",
            )
        else:
            _lint_front_matter(fm.data, issue)
    body_lines = fm.body.splitlines()
    if len(body_lines) > BODY_MAX_LINES:
        issue(
            f"body is {len(body_lines)} lines; keep it under {BODY_MAX_LINES} and move detail into linked files",
            fm.body_line,
        )
    base = PurePosixPath(main).parent
    for offset, line in enumerate(body_lines):
        for target in _LINK_RE.findall(line):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                continue
            rel = target.split("#", 1)[0]
            if not rel:
                continue
            resolved = _normalise(base / rel)
            if resolved is None or not any(
                f == resolved or f.startswith(resolved + "/") for f in candidate.files
            ):
                issue(f"links to {rel!r}, which is not in the skill", fm.body_line + offset)
    issues += _lint_protected(candidate.text, main)
    return issues


def _lint_front_matter(data: dict[str, Any], issue: Any) -> None:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        issue("front matter has no 'name'", 1, kind="front-matter")
    elif len(name) > NAME_MAX or not _NAME_RE.match(name):
        issue(
            f"name {name!r} must be at most {NAME_MAX} characters of a-z, 0-9 and '-'", 1, kind="front-matter"
        )
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        issue(
            "front matter has no 'description' (what the skill does and when to use it)",
            1,
            kind="front-matter",
        )
    elif len(description) > DESCRIPTION_MAX:
        issue(
            f"description is {len(description)} characters; keep it within {DESCRIPTION_MAX}",
            1,
            kind="front-matter",
        )


# A description's "use when" clause (also "use this skill when", "use it for", "trigger whenever"...).
WHEN_CLAUSE = re.compile(
    r"\b(?:use|trigger|load|invoke)\b(?:\s+(?:it|this|this skill|the skill))?\s+(?:when|whenever|for|if)\b",
    re.IGNORECASE,
)
RESERVED_WORDS = ("anthropic", "claude")
_FIRST_OR_SECOND_PERSON = re.compile(
    r"(?:^|[.!?]\s+)(?:I|I'm|I'll|We|We'll|You|You'll|You're)\b|\b(?:I can|I will|you can|you should)\b"
)


def lint_description(description: str, name: str = "") -> list[str]:
    """Why ``description`` (with the skill's ``name``) breaks the skill platforms' limits, the
    rules a proposed description is held to: not empty, at most 1024 characters, no XML tags,
    no reserved word in the name, third person, and a "use when" clause."""
    problems = []
    if not description.strip():
        problems.append("the description is empty")
    if len(description) > DESCRIPTION_MAX:
        problems.append(f"the description is {len(description)} characters; keep it within {DESCRIPTION_MAX}")
    if "<" in description or ">" in description:
        problems.append("the description holds '<' or '>' (no XML tags)")
    reserved = [w for w in RESERVED_WORDS if w in name.lower()]
    if reserved:
        problems.append(f"the name {name!r} holds the reserved word {reserved[0]!r}")
    if _FIRST_OR_SECOND_PERSON.search(description.strip()):
        problems.append("the description speaks in the first or second person; write it in the third")
    if description.strip() and not WHEN_CLAUSE.search(description):
        problems.append(
            'the description has no "use when" clause (say when to use the skill: "Use when ...")'
        )
    return problems


def set_description(text: str, description: str) -> str:
    """``text`` (a SKILL.md) with its front matter's ``description`` replaced by ``description``
    (added when it has none); every other line as it was. ValueError when there is no valid
    front matter to hold it."""
    fm = split_front_matter(text)
    if fm.data is None or fm.error:
        raise ValueError(fm.error or "the skill has no front matter to hold a description")
    lines = text.splitlines(keepends=True)
    close = fm.body_line - 2  # the index of the closing '---' line
    import yaml

    dumped = yaml.safe_dump({"description": description}, width=1_000_000, allow_unicode=True)
    head = list(lines[1:close])
    start = next((i for i, line in enumerate(head) if re.match(r"description\s*:", line)), None)
    if start is None:
        head.append(dumped)
    else:
        end = start + 1
        while end < len(head) and (head[end][:1] in (" ", "\t") or not head[end].strip()):
            end += 1  # the value's continuation lines (a folded or quoted multi-line value)
        head[start:end] = [dumped]
    out = lines[0] + "".join(head) + "".join(lines[close:])
    if (split_front_matter(out).data or {}).get("description") != description:
        raise ValueError("the new description does not read back from the front matter")
    return out


def _normalise(path: PurePosixPath) -> str | None:
    parts: list[str] = []
    for part in path.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def _lint_protected(text: str, main: str) -> list[LintIssue]:
    issues = []
    open_name: str | None = None
    open_line = 0
    open_form = ""  # how the open block must close: "" (/PROTECTED) or its skill-trainer name
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _PROTECTED_OPEN.search(line)
        closed = _PROTECTED_CLOSE.search(line)
        if opened:
            if open_name is not None:
                issues.append(
                    LintIssue(main, number, f"PROTECTED:{opened.group(1)} opens inside PROTECTED:{open_name}")
                )
            open_name, open_line = opened.group(1), number
            open_form = opened.group(1) if opened.group(2) else ""
        elif closed:
            closing = closed.group(1) or ""
            if open_name is None:
                issues.append(LintIssue(main, number, f"{closed.group(0)} closes no block"))
            elif closing != open_form:
                issues.append(
                    LintIssue(main, number, f"{closed.group(0)} does not close PROTECTED:{open_name}")
                )
            open_name = None
    if open_name is not None:
        closer = f"<!-- PROTECTED:{open_form}:END -->" if open_form else "<!-- /PROTECTED -->"
        issues.append(LintIssue(main, open_line, f"PROTECTED:{open_name} is never closed with {closer}"))
    return issues
