"""Isolated workspaces: create, place the skill, baseline commit, diff, audit, clean up.

A workspace holds the task's files and the skill placed where the agent expects
it, nothing else: no task.json, no expected answers, no path back into the
suite. It lives outside the suite and outside the run directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from skilltune.agents.base import AgentBackend, AgentOptions, Placement
from skilltune.errors import UsageError
from skilltune.skill import Candidate
from skilltune.suite import Suite, Task
from skilltune.suite.catalogue import check_catalogue

WORKSPACES_ENV = "SKILLTUNE_WORKSPACES"
MAX_DIFF_BYTES = 5_000_000
_AUDIT_READ_BYTES = 1_000_000
_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "skilltune",
    "GIT_AUTHOR_EMAIL": "skilltune@localhost",
    "GIT_COMMITTER_NAME": "skilltune",
    "GIT_COMMITTER_EMAIL": "skilltune@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_TERMINAL_PROMPT": "0",
}


_SIGNATURE = pygit2.Signature(
    "skilltune", "skilltune@localhost", 946684800, 0
)  # fixed: same baseline every time


# libgit2 must not read the user's git configuration (global ignores, filters, autocrlf):
# its global, XDG and system search paths become empty, once per process (at import, under the
# import lock, so no rollout thread can read them half set). libgit2 searches no folder at all for
# an empty path (sysdir.c), so nothing needs to exist: importing this module writes nothing.
for _level in (
    pygit2.enums.ConfigLevel.GLOBAL,
    pygit2.enums.ConfigLevel.XDG,
    pygit2.enums.ConfigLevel.SYSTEM,
):
    pygit2.settings.search_path[_level] = ""


_HIDDEN_GIT = ".git.skilltune-hidden"  # a nested repository's .git, set aside while the diff is made


def _stage_everything(repo: pygit2.Repository, root: Path, exclude: Sequence[str] = ()) -> pygit2.Oid:
    """Make the index exactly the work tree's files (ignore rules do not apply) and write its tree;
    ``exclude``: relative paths (files, or folders with all they hold) left out.

    Regular files and symlinks only (a symlink to a folder is staged as the link): a FIFO or a
    socket the agent left cannot be read as a file (opening a FIFO would block for ever)."""
    index = repo.index
    index.clear()
    skip = set(exclude)
    for folder, dirs, files in os.walk(root):
        rel_folder = Path(folder).relative_to(root)
        entries = list(files)
        kept_dirs = []
        for name in dirs:
            if name in (".git", _HIDDEN_GIT) or (rel_folder / name).as_posix() in skip:
                continue
            if (Path(folder) / name).is_symlink():
                entries.append(name)  # os.walk does not descend into it; git records the link
            else:
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in entries:
            rel = (rel_folder / name).as_posix()
            if name in (".git", _HIDDEN_GIT) or rel in skip:  # .git: the repository, or a gitlink file
                continue
            try:
                mode = os.lstat(Path(folder) / name).st_mode
            except FileNotFoundError:  # removed since the walk listed it
                continue
            if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                index.add(rel)
    index.write()
    tree: pygit2.Oid = index.write_tree()
    return tree


def workspaces_root() -> Path:
    """Where workspaces are made: $SKILLTUNE_WORKSPACES, else the system temp folder."""
    root = Path(os.environ.get(WORKSPACES_ENV) or Path(tempfile.gettempdir()) / "skilltune-workspaces")
    root.mkdir(parents=True, exist_ok=True)
    return root


def git(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run git isolated from the user's configuration (no hooks, no signing, fixed identity)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), **_GIT_ENV, **(env or {})}
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL, check=False
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed in {cwd}: {proc.stderr.decode(errors='replace').strip()}"
        )
    return proc


@dataclass
class PlacedSkill:
    prompt: str
    system_prompt: str | None


class Workspace:
    """One rollout's private directory, under ``workspaces_root()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.baseline: str | None = None
        self.exclude: tuple[str, ...] = ()

    @classmethod
    def create(cls, label: str, forbidden: list[Path] | None = None) -> Workspace:
        root = workspaces_root().resolve()
        for folder in forbidden or []:
            outside = folder.resolve()
            if root.is_relative_to(outside):
                raise UsageError(
                    f"workspaces would be made inside {outside}; set {WORKSPACES_ENV} to a folder outside it"
                )
        path = Path(tempfile.mkdtemp(prefix=f"{label[:40]}-", dir=root))
        return cls(path)

    def commit_baseline(self, exclude: Sequence[str] = ()) -> str:
        """Make the starting state a fresh single-commit repository (history from prepare is dropped).

        ``exclude``: paths the agent CLI itself writes (its housekeeping, not the agent's work),
        left out of the baseline and of the diff."""
        # Every .git (nested repositories and gitlink files too): no history may leak, and
        # the agent's edits inside a nested repository must show in the diff.
        for found in sorted(self.path.rglob(".git"), key=lambda p: len(p.parts), reverse=True):
            if found.is_dir() and not found.is_symlink():
                shutil.rmtree(found, ignore_errors=True)
            else:
                found.unlink(missing_ok=True)
        # In-process git (libgit2): a fraction of the time of four git processes per rollout.
        repo = pygit2.init_repository(str(self.path))
        self.exclude = tuple(exclude)
        tree = _stage_everything(repo, self.path, self.exclude)
        self.baseline = str(
            repo.create_commit("HEAD", _SIGNATURE, _SIGNATURE, "skilltune baseline", tree, [])
        )
        return self.baseline

    def diff(self) -> str:
        """The agent's own changes against the baseline: new, changed and deleted files, ignored
        ones included; repositories the agent made inside the workspace count as plain folders."""
        if self.baseline is None:
            return ""
        hidden: list[Path] = []
        try:
            # libgit2 will not stage files inside another repository: the agent's own repositories
            # are set aside while the index is built (their .git is never staged) and put back.
            for found in [g for g in self.path.rglob(".git") if g.parent != self.path and g.is_dir()]:
                hidden.append(found.rename(found.with_name(_HIDDEN_GIT)))
            # NO_SEARCH: if the agent removed .git, never fall back to a repository above the workspace.
            repo = pygit2.Repository(str(self.path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
            if Path(repo.workdir or "").resolve() != self.path.resolve():
                raise ValueError("the workspace is no longer the repository's work tree")
            _stage_everything(repo, self.path, self.exclude)
            baseline = repo.get(self.baseline)
            if not isinstance(baseline, pygit2.Commit):
                raise KeyError(self.baseline)
            text = repo.diff(baseline, cached=True).patch or ""
        except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
            return f"# skilltune: no diff (the agent changed the git repository): {exc}\n"
        finally:
            for moved in hidden:  # put the agent's own repositories back for the scorer
                with contextlib.suppress(OSError):
                    moved.rename(moved.with_name(".git"))
        if len(text) > MAX_DIFF_BYTES:
            return text[:MAX_DIFF_BYTES] + f"\n# skilltune: diff truncated at {MAX_DIFF_BYTES} characters\n"
        return text

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def check_placement(candidate: Candidate | None, backend: AgentBackend, placement: Placement) -> None:
    """Refuse a placement the agent cannot honour (checked before anything is written)."""
    if candidate is None or candidate.kind == "folder" or placement != "native":
        return
    if candidate.main not in backend.native_files:
        raise UsageError(
            f"the {backend.name} agent reads no {candidate.main} from its workspace "
            f"(it reads {', '.join(backend.native_files)}); use --agent-opt placement=system or prepend"
        )


def placed_prompts(candidate: Candidate | None, placement: Placement, task_prompt: str) -> PlacedSkill:
    """The prompt and system prompt the agent gets for ``placement`` (the skill's files aside); with
    ``tool`` the backend lists the skill and hands it over when asked (agents/loadtool.py)."""
    if candidate is None or placement == "tool":
        return PlacedSkill(task_prompt, None)
    if placement == "system":
        return PlacedSkill(task_prompt, candidate.text)
    if placement == "prepend":
        return PlacedSkill(f"{candidate.text}\n\n---\n\n{task_prompt}", None)
    return PlacedSkill(task_prompt, None)


def check_target(
    backend: AgentBackend,
    options: AgentOptions,
    tasks: Sequence[Task],
    candidates: Sequence[Candidate | None] = (),
    executor: str = "local",
    suite: Suite | None = None,
    preflight: bool = True,
) -> None:
    """Refuse, before anything is written, what the backend cannot run: its own preflight (a key, a
    model), a skill or task it cannot take (a chat target and task files), or the Ray executor for a
    backend whose rate limits hold within this process."""
    if executor == "ray" and backend.runs_in_process:
        raise UsageError(
            f"--executor ray cannot run the {backend.name} target: its rate limits (max_concurrent, "
            "requests_per_minute, tokens_per_minute) hold within one process and a chat call needs no "
            "worker of its own; use --executor local with --workers N"
        )
    if preflight:
        if executor == "local" and (missing := backend.missing_executable(options)):
            raise UsageError(missing)
        backend.preflight(options)
    problems = [
        f"skill {c.name}: {p}" for c in candidates if c is not None and (p := backend.skill_problem(c))
    ]
    if suite is not None:
        names = [c.name for c in candidates if c is not None]
        problems += [p] if (p := check_catalogue(suite.catalogue, names, suite.root)) else []
    loads = _load_problem(backend, options, candidates)
    for task in tasks:
        problem = backend.task_problem(task) or _trigger_problem(loads, suite, task)
        if problem:
            problems.append(f"{task_location(suite, task)}: task {task.id}: {problem}")
    if problems:
        shown = "\n".join(f"  {p}" for p in problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise UsageError(f"the {backend.name} agent cannot run this:\n{shown}{more}")


def _load_problem(
    backend: AgentBackend, options: AgentOptions, candidates: Sequence[Candidate | None]
) -> str | None:
    """Why ``backend`` cannot report whether the agent loaded a skill of ``candidates`` as placed
    (None: it can, for each)."""
    for candidate in candidates or [None]:
        problem = backend.skill_load_problem(options, candidate)
        if problem:
            return problem
    return None


def _trigger_problem(load_problem: str | None, suite: Suite | None, task: Task) -> str | None:
    """Why a trigger task cannot run: the backend cannot report the load decision (``load_problem``)."""
    if suite is None or load_problem is None or suite.scoring_mode(task) != "trigger":
        return None
    return (
        f"trigger mode scores whether the agent loaded the skill, and {load_problem} (`skilltune agents` "
        "lists the backends that report it: the mock, openai and anthropic, and each agent "
        "CLI with the skill folder placed natively); run this suite with one (--agent mock, say), or move its trigger tasks to a suite of "
        "their own"
    )


def task_location(suite: Suite | None, task: Task) -> str:
    """``<split>.jsonl:<line>`` of ``task`` in a folder suite (else the suite's source, or the split)."""
    if suite is None:
        return task.split or "task"
    if task.id in suite.locations:
        return suite.locations[task.id]
    path = suite.root / f"{task.split}.jsonl"
    if path.is_file() and suite.kind == "jsonl":
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            with contextlib.suppress(ValueError):
                if line.strip() and json.loads(line).get("id") == task.id:
                    return f"{path}:{number}"
    return str(suite.source)


def place_skill(
    candidate: Candidate | None,
    workspace: Path,
    backend: AgentBackend,
    placement: Placement,
    task_prompt: str,
    catalogue: Sequence[Candidate] = (),
) -> PlacedSkill:
    """Put the skill where ``placement`` says; return the prompt and system prompt to give the agent.

    With placement ``native`` the suite's catalogue skills are installed beside it, where the agent
    discovers skills (also for the no-skill arm: the catalogue is the user's setup, not the skill)."""
    if placement == "native":
        for other in catalogue:
            _install(other, workspace / backend.native_skill_dir(other.name))
    if candidate is not None and candidate.kind == "folder":
        if placement == "native" or len(candidate.files) > 1:
            # Supporting files are installed natively in every mode so the skill's links resolve.
            _install(candidate, workspace / backend.native_skill_dir(candidate.name))
    elif candidate is not None and placement == "native":
        check_placement(candidate, backend, placement)
        (workspace / candidate.main).write_text(candidate.text, encoding="utf-8")
    return placed_prompts(candidate, placement, task_prompt)


def _install(skill: Candidate, folder: Path) -> None:
    for rel, text in skill.files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def audit_workspace(workspace: Path, suite: Suite, task: Task) -> list[str]:
    """Reference data found in a workspace (empty when clean): task.json, contract files, answers.

    A file the task lists in ``files`` is its input, not a leak, even under refs/ (where
    skill-trainer keeps fixtures); the task's reference and every other file of refs/ are leaks."""
    findings = []
    strings = suite.reference_strings(task)
    hashes = suite.reference_hashes(task)
    for path in sorted(workspace.rglob("*")):
        rel = path.relative_to(workspace)
        if (rel.parts and rel.parts[0] == ".git") or not path.is_file():
            continue
        if path.name == "task.json":
            findings.append(f"{rel}: a task.json is in the workspace")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() in hashes:
            findings.append(
                f"{rel}: a copy of a scoring-contract file (scoring.md, rubric.py, judge.md or refs/)"
            )
        text = data[:_AUDIT_READ_BYTES].decode("utf-8", "ignore")
        findings += [f"{rel}: contains reference text {s[:40]!r}" for s in strings if s in text]
    return findings
