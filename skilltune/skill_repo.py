"""The skill's git repository: accepted versions as commits in a repository the run owns.

Branch ``skilltune/<name>/<tag>``; every accepted step is a commit whose message
starts with ``[step N]`` (``[epoch N]`` for slow updates); tag ``best`` marks the
best version. The candidate under test is written to the work tree before the
gate (so ``git diff`` in skill-repo shows it); a reject resets the tree. Every
operation is idempotent, so a run killed at any instant resumes cleanly.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from skilltune.rollout.workspace import git
from skilltune.skill import Candidate


class SkillRepo:
    def __init__(self, path: Path, branch: str) -> None:
        self.path = path
        self.branch = branch

    def _git(self, *args: str, check: bool = True) -> str:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
        proc = git(self.path, *args, check=check, env={"GIT_AUTHOR_DATE": now, "GIT_COMMITTER_DATE": now})
        return proc.stdout.decode("utf-8", "replace").strip()

    def ensure(self, seed: Candidate) -> None:
        """Create the repository with the seed as its first commit (tagged ``best``)."""
        if (self.path / ".git").is_dir() and self._git("rev-parse", "--verify", "-q", "HEAD", check=False):
            if not self._git("rev-parse", "--verify", "-q", "best", check=False):
                self._git("tag", "-f", "best", self.find("seed") or "HEAD")  # killed before the first tag
            return
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        self._git("init", "-q", "-b", self.branch)
        self._write(seed)
        self._git("add", "-A")
        self._git("commit", "-q", "--no-verify", "-m", f"[seed] {seed.name} {seed.short}")
        self._git("tag", "-f", "best")

    def _write(self, candidate: Candidate) -> None:
        for child in self.path.iterdir():
            if child.name == ".git":
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        candidate.write(self.path)

    def clean(self) -> None:
        """Drop uncommitted changes (a candidate under test when the process died)."""
        # Lock files a killed git left behind (we hold the run lock: no other git runs here).
        for stale in (self.path / ".git").rglob("*.lock"):
            stale.unlink(missing_ok=True)
        self._git("reset", "-q", "--hard", "HEAD")
        self._git("clean", "-q", "-fdx")

    def stage(self, candidate: Candidate) -> None:
        """Put the candidate under test in the work tree (not committed)."""
        self.clean()
        self._write(candidate)

    def find(self, label: str) -> str | None:
        """The commit whose message starts with ``[label]`` on the branch, if any."""
        out = self._git("log", "--format=%H %s", self.branch, check=False)
        for line in out.splitlines():
            sha, _, subject = line.partition(" ")
            if subject.startswith(f"[{label}]"):
                return sha
        return None

    def accept(self, candidate: Candidate, label: str, message: str) -> str:
        """Commit the candidate as ``[label] message`` and move ``best`` to it (once per label)."""
        sha = self.find(label)
        if sha is None:
            self.stage(candidate)
            self._git("add", "-A")
            self._git("commit", "-q", "--no-verify", "--allow-empty", "-m", f"[{label}] {message}")
            sha = self._git("rev-parse", "HEAD")
        self._git("tag", "-f", "best", sha)
        return sha

    def reject(self) -> None:
        self.clean()
