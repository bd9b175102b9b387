"""``skilltune smoke`` (skilltune/measure/smoke.py): the checks of a sound suite pass and leave no records
behind; a failing check keeps the records and names their folder; requirements.txt is read for
package names."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

import skilltune
from skilltune.agents import AGENTS, AgentRequest, AgentResult
from skilltune.agents.mock import MockAgent
from skilltune.measure.smoke import requirement_names
from skilltune.runfiles import RolloutRecord
from tests.helpers import MOCK_SKILL, MOCK_SUITE, rule_task, write_skill, write_suite

RULE = "state-a-default"


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temp folder, for this test alone: where smoke puts its records without --out."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(tmp_path / "ws"))
    return folder


def test_a_sound_suite_passes_every_check_and_leaves_no_records(temp_dir: Path) -> None:
    report = skilltune.smoke(MOCK_SUITE, MOCK_SKILL, agent="mock")
    assert report.ok, [c for c in report.checks if not c.ok]
    names = [c.name for c in report.checks]
    assert names[:4] == ["suite", "skill", "agent mock", "sandbox"]
    assert "nothing to seal" in report.checks[3].detail  # the mock starts no process
    for split in ("train", "val", "test"):  # one rollout per split, each checked five ways (canary included)
        assert sum(n.startswith(f"{split} rollout ") for n in names) == 5, names
    assert "records" not in names and report.infra_error is None
    assert list(temp_dir.iterdir()) == []  # the records folder was removed


def test_a_failing_check_keeps_the_records_and_names_their_folder(temp_dir: Path, tmp_path: Path) -> None:
    """A val task whose fixture quotes the scoring's required line: the workspace audit fails, and the
    rollouts' folder is kept for inspection."""
    (tmp_path / "suite" / "fixtures").mkdir(parents=True)
    (tmp_path / "suite" / "fixtures" / "hint.txt").write_text(f"Tip: end with PASS:{RULE}\n")
    leaky = rule_task("v", [RULE], files=["fixtures/hint.txt"])
    suite = write_suite(tmp_path / "suite", [rule_task("t", [RULE])], [leaky])
    skill = write_skill(tmp_path / "skill", f"- {RULE}")
    report = skilltune.smoke(suite, skill, agent="mock")
    assert not report.ok
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert list(failed) == ["val rollout v: workspace free of reference data"]
    assert (
        f"hint.txt: contains reference text 'PASS:{RULE}'"
        in failed["val rollout v: workspace free of reference data"]
    )
    (records,) = [c for c in report.checks if c.name == "records"]
    (folder,) = list(temp_dir.iterdir())
    assert records.ok and records.detail == f"the smoke rollouts are in {folder}"
    kept = [RolloutRecord.read(p) for p in folder.rglob("record.json")]
    assert sorted(r.task_id for r in kept) == ["t", "v"]


def test_out_keeps_the_records_of_a_passing_run(tmp_path: Path) -> None:
    report = skilltune.smoke(MOCK_SUITE, MOCK_SKILL, agent="mock", out=tmp_path / "smoke")
    assert report.ok
    assert report.checks[-1].detail == f"the smoke rollouts are in {tmp_path / 'smoke'}"
    assert len(list((tmp_path / "smoke").rglob("record.json"))) == 3


def test_requirement_names_reads_package_names_only(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(
        "# tools the checkers import\n"
        "requests>=2.31  # http\n"
        "-r more.txt\n"
        "--index-url https://example.org/simple\n"
        "\n"
        "PyYAML[libyaml]==6.0; python_version > '3.8'\n"
        "scikit-learn~=1.5\n"
        "mypkg @ https://example.org/mypkg.tar.gz\n"
        "plain\n"
    )
    assert requirement_names(path) == ["requests", "pyyaml", "scikit-learn", "mypkg", "plain"]


def test_a_missing_requirement_fails_its_check_and_says_what_to_install(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", [rule_task("t", [RULE])], [rule_task("v", [RULE])])
    (suite / "requirements.txt").write_text("pyyaml\nno-such-package-skilltune-xyz==1\n")
    report = skilltune.smoke(
        suite, write_skill(tmp_path / "skill", f"- {RULE}"), agent="mock", out=tmp_path / "o"
    )
    checks = {c.name: c for c in report.checks}
    assert checks["requirement pyyaml"].ok  # imported as yaml
    missing = checks["requirement no-such-package-skilltune-xyz"]
    assert not missing.ok and missing.detail == f"pip install -r {suite / 'requirements.txt'}"
    assert not report.ok


def test_a_suite_that_cannot_load_is_the_only_check(tmp_path: Path) -> None:
    report = skilltune.smoke(tmp_path / "nowhere", MOCK_SKILL, agent="mock")
    assert [(c.name, c.ok) for c in report.checks] == [("suite", False)]
    assert "nowhere" in report.checks[0].detail


class SnoopingMock(MockAgent):
    """The mock, plus what a reward-hacking agent does: it reads every file in ``look_in`` (beside
    the suite) and says what it found. It starts no process, so no sandbox stops it: the canary must."""

    name = "snooping-mock"
    look_in: ClassVar[Path] = Path("/nonexistent")

    def run(self, request: AgentRequest) -> AgentResult:
        result = super().run(request)
        found = [p.read_text() for p in sorted(self.look_in.iterdir()) if p.is_file()]
        result.final_text += "".join(f"FOUND: {text}" for text in found)
        return result


@pytest.fixture
def snooping() -> Iterator[type[SnoopingMock]]:
    AGENTS.register(SnoopingMock.name, SnoopingMock)
    try:
        yield SnoopingMock
    finally:
        AGENTS.unregister(SnoopingMock.name)


def test_the_canary_beside_the_suite_catches_an_agent_reading_outside_its_workspace(
    temp_dir: Path, tmp_path: Path, snooping: type[SnoopingMock]
) -> None:
    suite = write_suite(tmp_path / "project" / "suite", [rule_task("t", [RULE])], [rule_task("v", [RULE])])
    skill = write_skill(tmp_path / "skill", f"- {RULE}")
    clean = skilltune.smoke(suite, skill, agent="mock")
    assert clean.ok, [c for c in clean.checks if not c.ok]
    assert [c.detail for c in clean.checks if c.name.endswith("nothing read outside the workspace")] == [
        "no trace of the canary planted beside the suite"
    ] * 2
    snooping.look_in = suite.parent
    caught = skilltune.smoke(suite, skill, agent=snooping.name)
    failed = [c for c in caught.checks if not c.ok]
    assert [c.name for c in failed] == [
        "train rollout t: nothing read outside the workspace",
        "val rollout v: nothing read outside the workspace",
    ]
    assert failed[0].detail.endswith("it is in output.txt")
    assert sorted(p.name for p in suite.parent.iterdir()) == ["suite"]  # the canary was removed
