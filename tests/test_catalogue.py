"""The suite's skill catalogue (skilltune/suite/catalogue.py): read and validated with the suite, part of
its content and task hashes, installed beside the candidate in every native rollout and handed to the
backend, and refused when a catalogue skill has the candidate's name."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from skilltune.agents import AgentRequest, AgentResult, get_backend
from skilltune.agents.mock import MockAgent, MockOptions
from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.rollout.runner import RolloutJob, RolloutRunner
from skilltune.rollout.workspace import check_target
from skilltune.skill import load_skill
from skilltune.suite import load_suite, validate_suite
from skilltune.suite.catalogue import read_catalogue
from tests.helpers import rule_task, write_skill, write_suite

runner = CliRunner()


def _other(
    root: Path, name: str, description: str = "Formats SQL. Use when the user asks to tidy a query."
) -> Path:
    folder = root / "catalogue" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n- Body of {name}.\n"
    )
    return folder


def _suite(root: Path) -> Path:
    return write_suite(root, [rule_task("tr", ["a"])], [rule_task("va", ["a"])])


def test_the_catalogue_is_read_in_name_order_and_a_suite_without_one_has_none(tmp_path: Path) -> None:
    bare = load_suite(_suite(tmp_path / "bare"))
    assert bare.catalogue == ()
    root = _suite(tmp_path / "s")
    _other(root, "sql-format")
    _other(root, "api-docs", "Writes API reference pages. Use when the user documents an endpoint.")
    suite = load_suite(root)
    assert [s.name for s in suite.catalogue] == ["api-docs", "sql-format"]
    assert suite.catalogue[0].description.startswith("Writes API reference pages.")
    assert validate_suite(root) == []


def test_catalogue_problems_name_the_file_and_stop_the_suite(tmp_path: Path) -> None:
    root = _suite(tmp_path / "s")
    _other(root, "fine")
    broken = root / "catalogue" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: broken\n---\n\nno description\n")
    (root / "catalogue" / "stray.md").write_text("not a folder\n")
    twin = _other(root, "zz-twin")
    (twin / "SKILL.md").write_text("---\nname: fine\ndescription: Same name. Use when never.\n---\n\nx\n")
    found = [str(p) for p in validate_suite(root)]
    assert any(f"{broken / 'SKILL.md'}:1:" in p and "description" in p for p in found), found
    assert any(str(root / "catalogue" / "stray.md") in p and "<name>/SKILL.md" in p for p in found), found
    assert any(f"{twin / 'SKILL.md'}:1:" in p and "'fine'" in p for p in found), found
    with pytest.raises(UsageError, match="catalogue"):
        load_suite(root)
    assert [s.name for s in read_catalogue(root)[0]] == ["fine"]  # what is valid is still read


def test_validate_reports_a_broken_catalogue_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    root = _suite(tmp_path / "s")
    (root / "catalogue").write_text("a file where a folder belongs\n")
    result = runner.invoke(app, ["validate", str(root)])
    assert result.exit_code == 2, result.output
    assert f"{root / 'catalogue'}: must be a folder of skill folders" in result.output
    assert "Traceback" not in result.output


def test_the_catalogue_is_part_of_every_task_hash_and_the_content_hash(tmp_path: Path) -> None:
    root = _suite(tmp_path / "s")
    before = load_suite(root)
    task_before, content_before = before.task_hash(before.task("va")), before.content_hash
    _other(root, "sql-format")
    with_one = load_suite(root)
    assert with_one.task_hash(with_one.task("va")) != task_before
    assert with_one.content_hash != content_before
    _other(root, "sql-format", "Formats SQL. Use when a query is hard to read.")  # an edit of its description
    edited = load_suite(root)
    assert edited.task_hash(edited.task("va")) not in (task_before, with_one.task_hash(with_one.task("va")))
    assert edited.contract_hash == before.contract_hash  # scenery, not the scoring contract


class _Recording(MockAgent):
    seen: ClassVar[list[tuple[str, ...]]] = []

    def run(self, request: AgentRequest[MockOptions]) -> AgentResult:
        type(self).seen.append(tuple(s.name for s in request.catalogue))
        return super().run(request)


def test_a_rollout_installs_the_catalogue_beside_the_candidate_and_hands_it_to_the_backend(
    tmp_path: Path,
) -> None:
    root = _suite(tmp_path / "s")
    _other(root, "sql-format")
    suite = load_suite(root)
    skill = load_skill(write_skill(tmp_path / "skill", "- State a.\n"))
    installed: list[dict[str, str]] = []

    def look(job: RolloutJob, ws: Path) -> None:
        skills = ws / get_backend("mock").native_skill_dir("x").rsplit("/", 1)[0]
        installed.append({p.parent.name: p.read_text() for p in skills.glob("*/SKILL.md")})

    _Recording.seen = []
    out = RolloutRunner(
        suite=suite, backend=_Recording(), options=MockOptions(), out=tmp_path / "out", on_baseline=look
    )
    for candidate in (skill, None):  # the no-skill arm has the catalogue too: it is the user's setup
        record = out.run(RolloutJob(suite.task("va"), "eval", candidate, 0, 0))
        assert record.status == "ok"
    assert set(installed[0]) == {"demo-skill", "sql-format"}
    assert set(installed[1]) == {"sql-format"}
    assert "- Body of sql-format." in installed[0]["sql-format"]
    assert _Recording.seen == [("sql-format",), ("sql-format",)]


def test_a_catalogue_skill_with_the_candidates_name_is_refused_up_front(tmp_path: Path) -> None:
    root = _suite(tmp_path / "s")
    _other(root, "demo-skill")
    suite = load_suite(root)
    skill = load_skill(write_skill(tmp_path / "skill", "- State a.\n"))
    with pytest.raises(UsageError, match="catalogue has a skill named 'demo-skill'"):
        check_target(get_backend("mock"), MockOptions(), suite.all_tasks(), [skill], suite=suite)
    check_target(get_backend("mock"), MockOptions(), suite.all_tasks(), [None], suite=suite)  # no skill: fine
