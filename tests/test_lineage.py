"""A run's skill versions read back (skilltune/review/lineage.py): the History of a finished mock run, and
the hunks from the seed to the best version, each with the kept units that made it."""

from __future__ import annotations

from pathlib import Path

from skilltune.review.lineage import History, Hunk, apply_hunks, hunks, unit_name
from skilltune.rundir import RunDir
from skilltune.skill import Candidate, load_skill


def test_history_of_a_finished_run_chains_the_kept_versions(finished_run: Path) -> None:
    run = RunDir(finished_run)
    history = History.read(run)
    assert history.seed.hash == load_skill(run.seed_dir).hash
    assert [unit_name(u) for u in history.units] == ["step_0001", "step_0002"]  # step 0 is the baseline pass
    assert [unit_name(u) for u in history.kept] == ["step_0001", "step_0002"]  # the demo's steps both keep
    assert [name for name, _ in history.chain] == ["seed", "step_0001", "step_0002"]
    for name, version in history.chain[1:]:
        unit = history.unit(name)
        assert unit is not None and unit.candidate == version.hash
        assert history.folder(name) == run.unit_dir("step", unit.index)
    assert history.best.hash == load_skill(run.best_dir).hash
    assert set(history.by_hash()) == {history.seed.hash} | {c.hash for _, c in history.chain[1:]}
    assert history.unit("step_0009") is None


def test_hunks_from_seed_to_best_name_the_units_that_made_them(finished_run: Path) -> None:
    history = History.read(RunDir(finished_run))
    found = hunks(history.chain)
    assert {h.path for h in found} == {"SKILL.md"}
    by_unit: dict[str, str] = {}
    for hunk in found:
        assert len(hunk.units) == 1 and not hunk.removed  # the mock proposer appends
        by_unit[hunk.units[0]] = by_unit.get(hunk.units[0], "") + "".join(hunk.added)
    assert set(by_unit) == {"step_0001", "step_0002"}
    for name, added in by_unit.items():
        unit = history.unit(name)
        assert unit is not None and unit.edit_texts
        assert all(text in added for text in unit.edit_texts), (name, added)
    seed = history.seed.files["SKILL.md"].splitlines(keepends=True)
    assert apply_hunks(seed, found) == history.best.files["SKILL.md"].splitlines(keepends=True)
    first = [h for h in found if h.units == ["step_0001"]]
    step1 = dict(history.chain)["step_0001"]
    assert apply_hunks(seed, first) == step1.files["SKILL.md"].splitlines(keepends=True)


def _version(text: str, **others: str) -> Candidate:
    return Candidate({"SKILL.md": text, **others})


def test_a_hunk_credits_who_removed_a_seed_line_and_who_wrote_what_stayed() -> None:
    """u1 removes b and appends d; u2 replaces d with e and adds notes.md; u3 writes x where b was.
    d never reaches the best version, so u1 is credited only for removing b."""
    chain = [
        ("seed", _version("a\nb\nc\n", old="gone\n")),
        ("u1", _version("a\nc\nd\n", old="gone\n")),
        ("u2", _version("a\nc\ne\n", notes="new\n")),
        ("u3", _version("a\nx\nc\ne\n", notes="new\n")),
    ]
    found = hunks(chain)
    assert found == [
        Hunk("SKILL.md", 1, 2, ["b\n"], ["x\n"], ["u1", "u3"]),
        Hunk("SKILL.md", 3, 3, [], ["e\n"], ["u2"]),
        Hunk("notes", 0, 0, [], ["new\n"], ["u2"]),
        Hunk("old", 0, 1, ["gone\n"], [], ["u2"]),
    ]
    assert apply_hunks(["a\n", "b\n", "c\n"], found[:2]) == ["a\n", "x\n", "c\n", "e\n"]
    assert apply_hunks(["a\n", "b\n", "c\n"], found[1:2]) == ["a\n", "b\n", "c\n", "e\n"]  # one hunk alone


def test_lines_added_by_two_units_in_one_place_are_two_hunks() -> None:
    chain = [
        ("seed", _version("a\n")),
        ("u1", _version("a\none\n")),
        ("u2", _version("a\none\ntwo\n")),
    ]
    assert [(h.added, h.units) for h in hunks(chain)] == [(["one\n"], ["u1"]), (["two\n"], ["u2"])]
