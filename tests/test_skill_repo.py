"""The skill's git repository of a run (skilltune/skill_repo.py)."""

from __future__ import annotations

from pathlib import Path

from skilltune.rollout.workspace import git
from skilltune.skill import load_skill
from skilltune.skill_repo import SkillRepo
from tests.helpers import MOCK_SKILL


def test_skill_repo_ensure_restores_a_missing_best_tag(tmp_path: Path) -> None:
    """SkillRepo.ensure on an existing repository without tag best puts best back on the seed commit."""
    seed = load_skill(MOCK_SKILL)
    repo = SkillRepo(tmp_path / "repo", "skilltune/incident-postmortem/t")
    repo.ensure(seed)
    seed_commit = repo.find("seed")
    assert seed_commit is not None
    git(repo.path, "tag", "-d", "best")
    assert git(repo.path, "rev-parse", "--verify", "-q", "best", check=False).returncode != 0
    repo.ensure(seed)
    assert git(repo.path, "rev-parse", "best").stdout.decode().strip() == seed_commit
    assert repo.find("seed") == seed_commit  # the repository was kept, not rebuilt
