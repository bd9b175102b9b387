"""The lineage of kept versions: the commits of the run's skill-repo/, read with ``git log`` only.

Reading never writes: no command here touches the index or the work tree, and
``GIT_OPTIONAL_LOCKS=0`` keeps git from refreshing anything it would otherwise cache.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from skilltune.report.model import Version

_LABEL = re.compile(r"^\[(?P<label>[^\]]+)\]\s*(?P<rest>.*)$")


def _git(repo: Path, *args: str) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, env=env, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


def read_lineage(repo: Path) -> list[Version]:
    """Kept versions, oldest first (the seed, then each accepted unit); ``best`` marks the tagged one."""
    if not (repo / ".git").exists():
        return []
    log = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x1f%aI%x1f%s", "HEAD")
    if log is None:
        return []
    best = (_git(repo, "rev-parse", "--verify", "-q", "best^{commit}") or "").strip()
    versions = []
    for line in log.splitlines():
        commit, date, subject = [*line.split("\x1f"), "", ""][:3]
        match = _LABEL.match(subject)
        label, rest = (match["label"], match["rest"]) if match else ("", subject)
        versions.append(Version(commit=commit, label=label, date=date, subject=rest, best=commit == best))
    return versions
