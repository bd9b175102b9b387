"""skilltune promote: a run's kept changes merged into a live skill that moved on since the seed;
clean hunks apply, conflicting ones are named and left out, nothing is written without --apply."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.progress import PlainReporter
from skilltune.proposal import Edit, EvidencePacket, Proposal
from skilltune.propose.base import PROPOSERS
from skilltune.propose.mock import MockProposer
from skilltune.review.promote import merge_file, promote
from skilltune.rundir import RunDir
from skilltune.runfiles import Comparison
from skilltune.training import train
from tests.helpers import MOCK_SKILL, MOCK_SUITE

runner = CliRunner()
SUMMARY = "- Open with a three-sentence summary: what broke, who was affected, and how it was resolved."
IMPACT = (
    "- Put numbers on the customer impact: how many users, how many minutes, how many requests failed.\n"
    "- Say how the problem was detected and how long it ran before anyone was alerted."
)
OWNERS = "- Give each action item an owner and a due date so follow-ups actually get done."


class ScriptedProposer(MockProposer):
    """Step 1 inserts two rules after the summary rule; step 2 appends one at the end of the body."""

    name = "scripted"

    def propose(self, packet: EvidencePacket) -> Proposal:
        support = [t.id for t in packet.failures[:1]]
        script = {
            1: Edit(op="insert_after", file=packet.skill_main, anchor=SUMMARY, text=IMPACT,
                    rationale="readers could not size the impact", support=support),
            2: Edit(op="append", file=packet.skill_main, text=OWNERS, rationale="action items had no owners",
                    support=support),
        }  # fmt: skip
        return Proposal(edits=[script[packet.step]] if packet.step in script else [])


class AppendingProposer(MockProposer):
    """Both steps append at the end of the body: two hunks at one seed line, from two units."""

    name = "appending"

    def propose(self, packet: EvidencePacket) -> Proposal:
        texts = {1: IMPACT, 2: OWNERS}
        if packet.step not in texts:
            return Proposal(edits=[])
        support = [t.id for t in packet.failures[:1]]  # an edit citing no trajectory is dropped
        return Proposal(
            edits=[Edit(op="append", file=packet.skill_main, text=texts[packet.step], support=support)]
        )


@pytest.fixture(scope="module")
def scripted() -> Iterator[str]:
    for proposer in (ScriptedProposer, AppendingProposer):
        PROPOSERS.register(proposer.name, proposer)
    try:
        yield ScriptedProposer.name
    finally:
        for proposer in (ScriptedProposer, AppendingProposer):
            PROPOSERS.unregister(proposer.name)


def _train(skill: Path, runs: Path, proposer: str) -> RunDir:
    """Two steps, both kept (the strict gate keeps what the mock agent shows to be better; carry="off"
    so that each step is gated and kept on its own, where the default would carry step 1 into step 2)."""
    result = train(
        MOCK_SUITE, skill, tag="p", runs_dir=str(runs), max_steps=2, seed=1, gate="strict", proposer=proposer,
        carry="off", reporter=PlainReporter(quiet=True),
    )  # fmt: skip
    assert result.state == "success" and result.kept == 2, result.reason
    return RunDir(runs / "p")


@pytest.fixture(scope="module")
def run(scripted: str, tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return _train(MOCK_SKILL, tmp_path_factory.mktemp("runs"), scripted)


def _git(folder: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=folder, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _moved_on(tmp_path: Path) -> Path:
    """The user's skill in their own repository, changed since the run's seed was taken: the summary
    rule reworded (the line step 1 inserted after) and the introduction edited (nothing the run touched)."""
    live = tmp_path / "live"
    shutil.copytree(MOCK_SKILL, live)
    _git(live, "init", "-q")
    _git(live, "add", "-A")
    _git(live, "commit", "-q", "-m", "seed")
    text = (live / "SKILL.md").read_text()
    text = text.replace(SUMMARY, "- Open with a two-sentence summary: what broke and for whom.")
    text = text.replace("plain prose plus a timeline table", "plain prose, a timeline table and a glossary")
    (live / "SKILL.md").write_text(text)
    _git(live, "commit", "-q", "-am", "moved on")
    return live


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_clean_hunks_apply_a_conflict_is_named_and_nothing_is_written_without_apply(
    run: RunDir, tmp_path: Path
) -> None:
    live = _moved_on(tmp_path)
    before = _tree(live)  # the repository's own files included
    result = runner.invoke(app, ["promote", str(run.root), "--to", str(live)])
    assert result.exit_code == 1, result.output  # a hunk conflicts
    assert _tree(live) == before
    output = " ".join(result.output.split())
    assert "hunk 1/2 SKILL.md at seed line 13: conflict" in output
    assert "hunk 2/2 SKILL.md at seed line 18: clean" in output
    assert "step_0001: gate accept" in output and "readers could not size the impact" in output
    assert "step_0002: gate accept" in output and "action items had no owners" in output
    assert "<<<<<<< live - Open with a two-sentence summary: what broke and for whom." in output
    assert output.count("held-out (test, mixed) for the whole patch: S0 0.") == 1
    assert "left out" in output and "nothing written: add --apply" in output
    assert "warning: 1 hunk conflicts with the live skill and is left out: the patch below is not" in output

    plan = promote(run.root, live)
    assert [h.status for h in plan.hunks] == ["conflict", "clean"]
    assert [[u.unit for u in h.units] for h in plan.hunks] == [["step_0001"], ["step_0002"]]
    assert plan.hunks[0].added == [line + "\n" for line in IMPACT.splitlines()]
    assert plan.held_out is not None and plan.held_out.verdict == "b_better"
    # the patch is one git can apply to the live skill as it is
    (tmp_path / "patch").write_text(plan.patch)
    _git(live, "apply", "--check", str(tmp_path / "patch"))


def test_apply_writes_the_clean_hunks_keeps_the_live_changes_and_commits_nothing(
    run: RunDir, tmp_path: Path
) -> None:
    live = _moved_on(tmp_path)
    head = _git(live, "rev-parse", "HEAD")
    expected = tmp_path / "expected"
    shutil.copytree(live, expected)
    (tmp_path / "patch").write_text(promote(run.root, live).patch)
    _git(expected, "apply", str(tmp_path / "patch"))

    result = runner.invoke(app, ["promote", str(run.root), "--to", str(live), "--apply"])
    assert result.exit_code == 1, result.output
    assert "applied 1 hunk(s)" in result.output and "nothing was committed" in result.output
    text = (live / "SKILL.md").read_text()
    assert OWNERS in text and "two-sentence summary" in text and "and a glossary" in text
    assert "Put numbers on the customer impact" not in text  # the conflicting hunk is not forced
    assert "<<<<<<<" not in text
    assert text == (expected / "SKILL.md").read_text()
    assert _git(live, "rev-parse", "HEAD") == head
    assert _git(live, "diff", "--cached", "--name-only") == ""  # nothing staged
    assert _git(live, "status", "--porcelain") == " M SKILL.md\n"


def test_a_live_skill_equal_to_the_seed_takes_the_whole_best(run: RunDir, tmp_path: Path) -> None:
    live = tmp_path / "live"
    shutil.copytree(MOCK_SKILL, live)
    result = runner.invoke(app, ["promote", str(run.root), "--to", str(live), "--apply"])
    assert result.exit_code == 0, result.output
    assert _tree(live) == _tree(run.best_dir)


def test_a_change_the_live_skill_already_holds_is_present_not_added_twice(
    run: RunDir, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    shutil.copytree(run.best_dir, live)  # someone copied the best version by hand
    plan = promote(run.root, live, apply=True)
    assert [h.status for h in plan.hunks] == ["present", "present"]
    assert plan.files == {} and plan.patch == ""
    assert _tree(live) == _tree(run.best_dir)


@pytest.fixture(scope="module")
def appended(scripted: str, tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return _train(MOCK_SKILL, tmp_path_factory.mktemp("runs"), AppendingProposer.name)


def test_promote_again_after_apply_is_up_to_date_and_writes_nothing(appended: RunDir, tmp_path: Path) -> None:
    live = tmp_path / "live"
    shutil.copytree(MOCK_SKILL, live)
    first = promote(appended.root, live, apply=True)
    assert [(h.seed_line, h.status) for h in first.hunks] == [(18, "clean"), (18, "clean")]
    assert _tree(live) == _tree(appended.best_dir)
    before = {p: p.stat().st_mtime_ns for p in live.rglob("*")}

    result = runner.invoke(app, ["promote", str(appended.root), "--to", str(live), "--apply"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert output.count(": present (already applied)") == 2 and "conflict" not in output
    assert f"up to date: {live} already holds every change of the run; nothing written" in output
    assert "patch against" not in output
    assert {p: p.stat().st_mtime_ns for p in live.rglob("*")} == before
    plan = promote(appended.root, live, apply=True)
    assert plan.up_to_date and not plan.applied and plan.files == {} and plan.patch == ""


def test_a_live_skill_equal_to_the_best_is_up_to_date(appended: RunDir, tmp_path: Path) -> None:
    live = tmp_path / "live"
    shutil.copytree(appended.best_dir, live)
    before = _tree(live)
    result = runner.invoke(app, ["promote", str(appended.root), "--to", str(live)])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output and "conflict" not in result.output
    assert _tree(live) == before


def test_a_changed_line_among_applied_hunks_stays_a_conflict(appended: RunDir, tmp_path: Path) -> None:
    live = tmp_path / "live"
    shutil.copytree(appended.best_dir, live)
    text = (live / "SKILL.md").read_text()  # the live skill edited step 1's rule since the copy
    (live / "SKILL.md").write_text(text.replace("how many minutes, ", ""))
    before = _tree(live)
    result = runner.invoke(app, ["promote", str(appended.root), "--to", str(live), "--apply"])
    assert result.exit_code == 1, result.output
    assert "hunk 1/2 SKILL.md at seed line 18: conflict" in result.output
    assert "hunk 2/2 SKILL.md at seed line 18: present (already applied)" in result.output
    assert "up to date" not in result.output
    output = " ".join(result.output.split())
    assert "nothing written: the live skill already holds 1 hunk; the other 1 conflicts" in output
    assert "merge it by hand from the conflict above" in output  # one hunk: not "each"
    assert "warning: 1 hunk conflicts with the live skill and is left out" in output
    assert "patch below" not in output and "patch against" not in output  # no patch is printed
    assert _tree(live) == before


def test_every_hunk_in_conflict_is_said_plainly_with_what_to_do(run: RunDir, tmp_path: Path) -> None:
    live = _moved_on(tmp_path)  # step 1's anchor reworded
    text = (live / "SKILL.md").read_text()  # and a rule of its own where step 2 appended
    (live / "SKILL.md").write_text(
        text.replace("\n<!-- PROTECTED", "- Name the on-call team.\n<!-- PROTECTED")
    )
    before = _tree(live)
    result = runner.invoke(app, ["promote", str(run.root), "--to", str(live), "--apply"])
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "hunk 1/2 SKILL.md at seed line 13: conflict" in output
    assert "hunk 2/2 SKILL.md at seed line 18: conflict" in output
    assert "does not conflict" not in output
    assert "nothing written: all 2 hunks conflict with the live skill" in output
    assert f"merge each by hand from the conflicts above, or compare {live} with {run.best_dir}" in output
    assert "warning: 2 hunks conflict with the live skill and are left out" in output
    assert "patch below" not in output and "patch against" not in output  # no patch is printed
    assert _tree(live) == before


def test_a_single_instruction_file_is_promoted_into_the_users_file(scripted: str, tmp_path: Path) -> None:
    seed = tmp_path / "AGENTS.md"
    shutil.copy(MOCK_SKILL / "SKILL.md", seed)
    file_run = _train(seed, tmp_path / "runs", scripted)
    live = tmp_path / "repo" / "CLAUDE.md"  # the same instructions under the user's own file name
    live.parent.mkdir()
    shutil.copy(seed, live)
    plan = promote(file_run.root, live)
    assert [h.status for h in plan.hunks] == ["clean", "clean"] and list(plan.files) == [str(live)]
    assert plan.patch.startswith("--- a/CLAUDE.md\n+++ b/CLAUDE.md\n")
    assert live.read_text() == seed.read_text()  # not applied
    promote(file_run.root, live, apply=True)
    assert live.read_text() == file_run.best_md.read_text()
    assert sorted(p.name for p in live.parent.iterdir()) == ["CLAUDE.md"]


def test_one_agent_whose_held_out_test_favours_the_seed_is_refused_unless_accepted(
    run: RunDir, tmp_path: Path
) -> None:
    """With one agent, a held-out test where the seed is significantly better (a_better) is a harm
    as one agent of several is: --apply refuses, exit 2, nothing written; --accept-harm applies."""
    copy = tmp_path / "run"
    shutil.copytree(run.root, copy)
    comparison = Comparison.read(RunDir(copy).comparison)
    [pair] = [p for p in comparison.pairs if (p.a, p.b) == ("S0", "best")]
    pair.diff, pair.ci95, pair.verdict = (
        -0.25,
        [-0.4, -0.1],
        "a_better",
    )  # the file as a harmful run writes it
    comparison.write(RunDir(copy).comparison)
    live = tmp_path / "live"
    shutil.copytree(MOCK_SKILL, live)
    before = _tree(live)
    figure = "agent mock: best is worse than S0 on test, -0.250 [-0.400, -0.100] (a_better)"
    refused = runner.invoke(app, ["promote", str(copy), "--to", str(live), "--apply"], env={"COLUMNS": "400"})
    assert refused.exit_code == 2, refused.output
    assert (
        figure in refused.output
        and "Nothing was written" in refused.output
        and "--accept-harm" in refused.output
    )
    assert _tree(live) == before
    accepted = runner.invoke(
        app, ["promote", str(copy), "--to", str(live), "--apply", "--accept-harm"], env={"COLUMNS": "400"}
    )
    assert accepted.exit_code == 0, accepted.output
    assert "applied despite the harm to mock on the held-out test (--accept-harm)" in accepted.output
    assert (live / "SKILL.md").read_text() == (RunDir(copy).best_dir / "SKILL.md").read_text()
    # a held-out file of an earlier best (a resumed run that kept more has not tested again) is not read
    comparison.arms["best"].skill_hash = "0" * 64
    comparison.write(RunDir(copy).comparison)
    shutil.rmtree(live)
    shutil.copytree(MOCK_SKILL, live)
    earlier = runner.invoke(app, ["promote", str(copy), "--to", str(live), "--apply"], env={"COLUMNS": "400"})
    assert earlier.exit_code == 0, earlier.output
    assert "worse than" not in earlier.output and "accept-harm" not in earlier.output


def test_bad_input_is_refused_with_the_fix(run: RunDir, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["promote", str(run.root), "--to", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "give the live skill folder (with SKILL.md)" in result.output
    result = runner.invoke(app, ["promote", str(tmp_path), "--to", str(MOCK_SKILL)])
    assert result.exit_code == 2 and "not a skilltune run directory" in result.output
    assert not any((tmp_path / "empty").iterdir())


def test_merge_file_is_gits_three_way_merge() -> None:
    assert merge_file("a\nB\nc\n", "a\nb\nc\n", "a\nb\nc\nd\n") == ("a\nB\nc\nd\n", 0)
    merged, conflicts = merge_file("a\nB\nc\n", "a\nb\nc\n", "a\nX\nc\n")
    assert conflicts == 1 and "<<<<<<< live\nB\n||||||| seed\nb\n=======\nX\n>>>>>>> run\n" in merged
