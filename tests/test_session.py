"""The rollout session (skilltune/session.py): one settings model, every check before anything is
written, executors from the plug-in registry, one executor shared by every batch of a session, and
its target agents by label, whose labels reach the files only when there are several."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path

import pytest

from skilltune.errors import UsageError
from skilltune.execute import EXECUTORS, make_executor
from skilltune.execute.local import LocalExecutor
from skilltune.measure.compare import compare
from skilltune.measure.evaluate import evaluate
from skilltune.rollout.routes import JobRunner
from skilltune.rollout.runner import RolloutJob
from skilltune.rollout.tally import Unit
from skilltune.runfiles import AgentSpec, RolloutRecord
from skilltune.session import RolloutSession, Target
from skilltune.settings import RolloutSettings
from skilltune.skill import load_skill
from skilltune.suite import load_suite
from tests.helpers import MOCK_SKILL, MOCK_SUITE, write_skill


def test_settings_refuse_an_unknown_keyword_by_name_and_keep_what_was_given() -> None:
    with pytest.raises(
        UsageError,
        match=r"unknown setting 'wokers' \(known: agent, agent_options, cache, executor, fresh",
    ):
        RolloutSettings.of(wokers=2)
    with pytest.raises(UsageError, match="setting workers: Input should be greater than or equal to 1"):
        RolloutSettings.of(workers=0)
    base = RolloutSettings(agent="mock", seed=3, workers=2)
    merged = RolloutSettings.of(base, seed=5, cache=None)  # None means "not given"
    assert (merged.seed, merged.workers, merged.cache) == (5, 2, None)


def test_an_unknown_keyword_of_the_api_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(UsageError, match="unknown setting 'agnet'"):
        evaluate(MOCK_SUITE, MOCK_SKILL, out=out, agnet="mock")
    with pytest.raises(UsageError, match="setting reps: Input should be greater than or equal to 1"):
        evaluate(MOCK_SUITE, MOCK_SKILL, out=out, reps=0)
    with pytest.raises(UsageError, match="unknown agent 'nope'"):
        compare(MOCK_SUITE, {"a": load_skill(MOCK_SKILL), "b": None}, out=out, agent="nope")
    assert not out.exists()


def test_open_refuses_what_the_target_cannot_run_and_writes_nothing(tmp_path: Path) -> None:
    """A single GEMINI.md placed natively for the mock agent (it reads AGENTS.md and CLAUDE.md): the
    placement check refuses it in open(), before the output folder exists."""
    suite = load_suite(MOCK_SUITE)
    gemini_md = tmp_path / "GEMINI.md"
    gemini_md.write_text("# Rules\n\n- answer briefly\n")
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=r"reads no GEMINI\.md"):
        RolloutSession.open(
            suite, RolloutSettings(), tasks=suite.tasks("val"), candidates=[load_skill(gemini_md)], out=out
        )
    assert not out.exists()
    with pytest.raises(UsageError, match="lies inside the suite"):
        RolloutSession.open(suite, RolloutSettings(), tasks=suite.tasks("val"), out=MOCK_SUITE / "out")
    assert not (MOCK_SUITE / "out").exists()


def test_executors_come_from_the_registry() -> None:
    assert {"local", "ray"} <= set(EXECUTORS.names())
    assert isinstance(make_executor(3, None, "local"), LocalExecutor)
    assert make_executor(8, 2, "local").workers == 2  # type: ignore[attr-defined]  # the suite's cap
    with pytest.raises(UsageError, match=r"unknown executor 'dask' \(known: local, ray"):
        make_executor(2, None, "dask")
    with pytest.raises(UsageError, match=r"--ray-address 127\.0\.0\.1:1 needs --executor ray"):
        make_executor(2, None, "local", "127.0.0.1:1")


class CountingExecutor:
    """A registered executor that runs jobs in this thread and counts how often it was made."""

    made = 0

    def __init__(self, workers: int, address: str | None = None) -> None:
        CountingExecutor.made += 1
        self.workers = workers

    def map(self, jobs: Sequence[RolloutJob], runner: JobRunner) -> Generator[RolloutRecord, None, None]:
        for job in jobs:
            yield runner.run(job)


def test_a_session_makes_its_executor_once_on_first_use_and_shares_it(tmp_path: Path) -> None:
    EXECUTORS.register("local", CountingExecutor)  # a run-time registration wins over the entry point
    try:
        CountingExecutor.made = 0
        suite = load_suite(MOCK_SUITE)
        skill = load_skill(MOCK_SKILL)
        session = RolloutSession.open(
            suite, RolloutSettings(executor="local", seed=7), tasks=suite.tasks("val"),
            candidates=[skill], out=tmp_path / "out",
        )  # fmt: skip
        assert CountingExecutor.made == 0  # nothing run yet: no executor (smoke runs none)
        first = session.run(session.jobs(suite.tasks("val")[:2], skill, "eval", 1))
        second = session.run(session.jobs(suite.tasks("val")[:2], None, "eval", 2), out=tmp_path / "other")
        assert CountingExecutor.made == 1
        assert [r.replicate for r in second] == [0, 1, 0, 1] and len(first) == 2
        assert all(r.seed == 7 for r in first + second)
        assert (tmp_path / "other" / "rollouts" / "eval" / "noskill").is_dir()
    finally:
        EXECUTORS.unregister("local")


def test_target_refusal_names_the_backend_limit(tmp_path: Path) -> None:
    """A skill with a second file, for a direct chat target (it gets the skill as text): refused by
    name, the check train runs on every candidate before it is gated; a one-file skill is not."""
    suite = load_suite(MOCK_SUITE)
    target = Target.of("openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    single = load_skill(write_skill(tmp_path / "single", "- answer briefly"))
    folder = write_skill(tmp_path / "two", "- see notes.md")
    (folder / "notes.md").write_text("more rules\n")
    assert target.refusal(suite, single) is None
    refused = target.refusal(suite, load_skill(folder))
    assert refused is not None and "notes.md" in refused


TWO = [AgentSpec(label="a", agent="mock"), AgentSpec(label="b", agent="mock", options={"crn": True})]


def test_a_lone_agents_jobs_name_it_and_its_files_do_not() -> None:
    suite, skill = load_suite(MOCK_SUITE), load_skill(MOCK_SKILL)
    val = suite.tasks("val")[:2]
    session = RolloutSession.open(suite, RolloutSettings(), tasks=val, candidates=[skill])
    assert [(j.agent, j.target, j.arm) for j in session.jobs(val[:1], skill, "eval", 1)] == [
        ("mock", None, skill.short)
    ]
    assert session.units(val) == [Unit(t.id) for t in val] and session.describe() == "mock"
    assert session.target.label == "mock" and not session.named


def test_a_session_of_two_agents_runs_them_side_by_side_and_names_them(tmp_path: Path) -> None:
    suite, skill = load_suite(MOCK_SUITE), load_skill(MOCK_SKILL)
    val = suite.tasks("val")[:2]
    session = RolloutSession.open(suite, RolloutSettings(workers=2), TWO, tasks=val, candidates=[skill])
    jobs = session.jobs(val, skill, "eval", 1)
    assert [(j.agent, j.target) for j in jobs] == [("a", "a"), ("a", "a"), ("b", "b"), ("b", "b")]
    assert [str(u) for u in session.units(val)] == [f"{a}/{t.id}" for a in "ab" for t in val]
    assert session.describe() == "a (mock), b (mock)"
    back = sorted((job.agent, job.task.id, r.target, r.task_id) for job, r in session.stream(jobs, tmp_path))
    assert back == sorted((a, t.id, a, t.id) for a in "ab" for t in val)
    arms = {p.parent.parent.name for p in tmp_path.rglob("record.json")}
    assert arms == {f"{skill.short}@a", f"{skill.short}@b"}
    with pytest.raises(ValueError, match="ask for one by label"):
        _ = session.target


def test_agents_in_folders_of_their_own_write_no_label_and_a_refusal_names_its_agent(tmp_path: Path) -> None:
    """compare's layout: OUT/<label>/rollouts/..., records without a label; an agent that cannot run
    is named, and nothing is written."""
    suite, skill = load_suite(MOCK_SUITE), load_skill(MOCK_SKILL)
    val = suite.tasks("val")[:2]
    out = tmp_path / "out"
    bad = [TWO[0], AgentSpec(label="b", agent="mock", options={"ignore": "x"})]
    with pytest.raises(UsageError, match=r"--agent b=mock: .*ignore"):
        RolloutSession.open(
            suite, RolloutSettings(), bad, tasks=val, candidates=[skill], out=out, folders="own"
        )
    assert not out.exists()
    session = RolloutSession.open(
        suite, RolloutSettings(), TWO, tasks=val, candidates=[skill], out=out, folders="own"
    )
    records = session.run(session.jobs(val, skill, "eval", 1))
    assert len(records) == 4 and all(r.target is None for r in records)
    where = sorted(p.relative_to(out).parts[:4] for p in out.rglob("record.json"))
    assert where == [(a, "rollouts", "eval", skill.short) for a in "aabb"]
