"""The rollout cache (skilltune/rollout/cache.py): a key that changes with every input that determines a
rollout, a hit that copies the record folder instead of running the agent, --fresh, and what is
never stored."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from skilltune.agents import AGENTS, AgentRequest, AgentResult, get_backend
from skilltune.agents.mock import MockAgent, MockOptions
from skilltune.errors import InfraFailure, UsageError
from skilltune.measure.evaluate import evaluate
from skilltune.rollout.cache import RolloutCache, rollout_key
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, rollout_dir
from skilltune.rundir import RunDir
from skilltune.runfiles import AgentSpec, RolloutRecord, Transfer, Verdict
from skilltune.skill import load_skill
from skilltune.suite import load_suite
from skilltune.training.budget import spent
from tests.helpers import MOCK_SUITE, rule_task, write_skill, write_suite

RULE = "state-a-default"


class CountingMock(MockAgent):
    """The mock agent, counting the rollouts it really runs (a cache hit runs none)."""

    name: ClassVar[str] = "counting-mock"
    runs: ClassVar[list[str]] = []

    def run(self, request: AgentRequest) -> AgentResult:
        type(self).runs.append(request.task.id)
        return super().run(request)


@pytest.fixture
def counting() -> Iterator[type[CountingMock]]:
    CountingMock.runs = []
    AGENTS.register(CountingMock.name, CountingMock)
    try:
        yield CountingMock
    finally:
        AGENTS.unregister(CountingMock.name)


def _rule_suite(root: Path, prompt_extra: str = "", **config: object) -> Path:
    task = rule_task("t", [RULE])
    task["prompt"] += prompt_extra
    return write_suite(root, [rule_task("train-t", [RULE])], [task], config=dict(config) or None)


def test_the_key_changes_with_every_input_that_determines_a_rollout() -> None:
    base = ["cand", "task", 0, 0, "options", "contract"]
    keys = {rollout_key(*base)}  # type: ignore[arg-type]
    for i, other in enumerate(["cand2", "task2", 1, 1, "options2", "contract2"]):
        changed = [*base]
        changed[i] = other
        keys.add(rollout_key(*changed))  # type: ignore[arg-type]
    assert len(keys) == 7
    assert rollout_key(*base) == rollout_key(*base)  # type: ignore[arg-type]


def test_a_runner_keys_the_candidate_the_task_the_options_and_the_contract(tmp_path: Path) -> None:
    """What RolloutRunner feeds the key: each of these changes it, and nothing else does."""
    skill = load_skill(write_skill(tmp_path / "skill", f"- {RULE}"))
    other = load_skill(write_skill(tmp_path / "other", "- Be brief."))

    def key(suite_root: Path, options: MockOptions, candidate: object = skill, replicate: int = 0) -> str:
        suite = load_suite(suite_root)
        runner = RolloutRunner(suite=suite, backend=get_backend("mock"), options=options, out=tmp_path / "o")
        return runner.cache_key(RolloutJob(suite.task("t"), "eval", candidate, replicate, 0))  # type: ignore[arg-type]

    plain = _rule_suite(tmp_path / "plain")
    same = _rule_suite(tmp_path / "same")  # the same files elsewhere
    reworded = _rule_suite(tmp_path / "reworded", " Politely.")
    stricter = _rule_suite(tmp_path / "stricter", mixed_weight=0.9)
    first = key(plain, MockOptions())
    assert key(same, MockOptions()) == first
    others = {
        key(plain, MockOptions(), other),
        key(plain, MockOptions(), None),
        key(plain, MockOptions(), replicate=1),
        key(reworded, MockOptions()),
        key(plain, MockOptions(crn=True)),
        key(stricter, MockOptions()),
    }
    assert first not in others and len(others) == 6


def _one_rollout(tmp_path: Path) -> tuple[RolloutRecord, Path]:
    suite = load_suite(MOCK_SUITE)
    runner = RolloutRunner(suite=suite, backend=get_backend("mock"), options=MockOptions(), out=tmp_path)
    job = RolloutJob(suite.tasks("val")[0], "gate", None, 0, 0)
    return runner.run(job), rollout_dir(tmp_path, job)


def test_a_hit_copies_the_record_folder_relabelled_and_a_miss_copies_nothing(tmp_path: Path) -> None:
    record, folder = _one_rollout(tmp_path / "run")
    cache = RolloutCache(tmp_path / "cache")
    cache.store("k1", folder, record.status)
    dest = tmp_path / "elsewhere" / "t_r0"
    dest.parent.mkdir()
    assert not cache.fetch("k2", dest, "eval") and not dest.exists()
    assert cache.fetch("k1", dest, "eval")
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in folder.iterdir())
    assert (dest / "diff.patch").read_text() == (folder / "diff.patch").read_text()
    copied = RolloutRecord.read(dest / "record.json")
    assert (copied.phase, copied.cached_from) == ("eval", "k1")
    assert copied.model_copy(update={"phase": record.phase, "cached_from": None}) == record
    # a record this skilltune cannot read (a newer one's, sharing the cache) is a miss
    stored = tmp_path / "cache" / "k3"[:2] / "k3"
    shutil.copytree(folder, stored)
    (stored / "record.json").write_text(json.dumps({"schema_version": 999}))
    assert not cache.fetch("k3", tmp_path / "elsewhere" / "x_r0", "eval")


def test_only_finished_rollouts_are_stored_and_the_first_stays(tmp_path: Path) -> None:
    record, folder = _one_rollout(tmp_path / "run")
    cache = RolloutCache(tmp_path / "cache")
    for status in ("infra_error", "crashed", "scoring_error", "unscored"):
        cache.store(f"k-{status}", folder, status)
    assert not (tmp_path / "cache").exists()
    cache.store("k", folder, record.status)
    (folder / "output.txt").write_text("changed later\n")
    cache.store("k", folder, record.status)  # already there: kept as it was
    dest = tmp_path / "d" / "t_r0"
    dest.parent.mkdir()
    assert cache.fetch("k", dest, "gate")
    assert (dest / "output.txt").read_text() != "changed later\n"


def test_cache_hits_skip_work(tmp_path: Path, counting: type[CountingMock]) -> None:
    suite = _rule_suite(tmp_path / "suite")
    skill = write_skill(tmp_path / "skill", f"- {RULE}")
    cache = tmp_path / "cache"
    first = evaluate(suite, skill, agent=counting.name, out=tmp_path / "a", reps=2, cache=cache)
    assert first.hard_acc == 1.0
    assert len(counting.runs) == 2
    second = evaluate(suite, skill, agent=counting.name, out=tmp_path / "b", reps=2, cache=cache)
    assert len(counting.runs) == 2  # nothing ran again
    assert second.per_task == first.per_task
    assert (first.n_cached, second.n_cached) == (0, 2)
    records = [json.loads(p.read_text()) for p in (tmp_path / "b").glob("rollouts/eval/*/*/record.json")]
    assert len(records) == 2 and all(r["cached_from"] for r in records)
    assert all(
        (p.parent / "diff.patch").is_file() for p in (tmp_path / "b").glob("rollouts/eval/*/*/record.json")
    )
    evaluate(suite, skill, agent=counting.name, out=tmp_path / "c", reps=2, cache=cache, fresh=True)
    assert len(counting.runs) == 4  # --fresh runs them again
    evaluate(suite, skill, agent=counting.name, out=tmp_path / "d", reps=3, cache=cache)
    assert len(counting.runs) == 5  # only the new replicate runs


def test_infra_errors_and_crashes_are_never_cached(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "s", [rule_task("t", ["x"])], [rule_task("v", ["x"], mock_infra_errors=99)]
    )
    cache = tmp_path / "cache"
    no_wait = RetryPolicy(max_attempts=1, base_s=0, cap_s=0)
    with pytest.raises(InfraFailure):  # every rollout ended infra_error: exit 3, the records kept
        evaluate(suite, None, out=tmp_path / "a", cache=cache, retry=no_wait)
    assert not list(cache.rglob("record.json"))


def test_cache_key_covers_the_agents_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A model or endpoint taken from the environment is part of the rollout's cache key (secrets are not)."""
    from skilltune.agents import get_backend
    from skilltune.rollout.runner import RolloutRunner

    backend = get_backend("claude")

    def key() -> str:
        options = backend.parse_options({})
        return RolloutRunner(
            suite=load_suite(MOCK_SUITE), backend=backend, options=options, out=tmp_path
        ).options_hash

    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "one")
    haiku = key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "two")
    assert key() == haiku  # a different key does not change what the agent does
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-sonnet-4-6")
    assert key() != haiku
    identity = backend.cache_identity(backend.parse_options({}))
    assert (
        "ANTHROPIC_API_KEY" not in identity["env"]
        and identity["env"]["ANTHROPIC_MODEL"] == "claude-sonnet-4-6"
    )
    # per-session values never change the key (resume and a shared cache must still hit)
    sonnet = key()
    monkeypatch.setenv("AWS_SESSION_TOKEN", "s1")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "b1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA1")
    assert key() == sonnet
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.internal")
    assert key() != sonnet
    copilot = get_backend("copilot")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus")
    assert copilot.cache_identity(copilot.parse_options({}))["env"] == {}


def test_cli_version_in_the_cache_key_is_the_number_and_a_failure_is_not_remembered(tmp_path: Path) -> None:
    from skilltune.agents.base import version_number

    exe = tmp_path / "agent"
    exe.write_text("#!/bin/sh\necho 'Claude Code 2.1.4 (build 77)'\n")
    exe.chmod(0o755)
    assert version_number(str(exe)) == "2.1.4"
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'error: cannot read config' >&2\nexit 1\n")
    broken.chmod(0o755)
    assert version_number(str(broken)) is None
    broken.write_text("#!/bin/sh\necho 0.9.1\n")
    assert version_number(str(broken)) == "0.9.1"  # asked again: the failure was not cached


def _two_agents_train(runs: Path, suite: Path, skill: Path, cache: Path, agents: list[AgentSpec]) -> RunDir:
    from skilltune.training import train
    from tests.helpers import quiet

    result = train(
        suite, skill, tag="two", runs_dir=str(runs), agents=[a.model_dump(mode="json") for a in agents],
        proposer="mock", max_steps=1, seed=2, metric="hard", test_reps=1, carry="off", cache=str(cache),
        reporter=quiet(),
    )  # fmt: skip
    return RunDir(Path(result.run_dir))


TWO_AGENTS = [
    AgentSpec(label="follows", agent="mock"),
    AgentSpec(label="deaf", agent="mock", options={"ignores": ["rule-b"]}),
]


def _decisions(run: RunDir) -> list[dict[str, str]]:
    """results.tsv's rows but for what this run paid (a cached rollout costs nothing here)."""
    header, *rows = (line.split("\t") for line in (run.root / "results.tsv").read_text().splitlines())
    paid = {"rollouts", "tokens", "cost_usd", "seconds"}
    return [{k: v for k, v in zip(header, row, strict=True) if k not in paid} for row in rows]


def _small_suite(root: Path) -> tuple[Path, Path]:
    rules = ["rule-a", "rule-b"]
    tasks = {
        split: [rule_task(f"{split}-{i}", [rules[i % 2]], noise=0.2) for i in range(n)]
        for split, n in (("train", 4), ("val", 6), ("test", 4))
    }
    suite = write_suite(root / "suite", tasks["train"], tasks["val"], tasks["test"])
    return suite, write_skill(root / "skill", "- Be brief.")


def test_a_second_run_of_several_agents_takes_every_agents_rollouts_from_the_cache(tmp_path: Path) -> None:
    """Issue 22: two agents, the same run twice with one cache: the second runs no rollout, each of
    its records is its own agent's (relabelled, never the other agent's), and it ends the same."""
    suite, skill = _small_suite(tmp_path)
    first = _two_agents_train(tmp_path / "a", suite, skill, tmp_path / "cache", TWO_AGENTS)
    second = _two_agents_train(tmp_path / "b", suite, skill, tmp_path / "cache", TWO_AGENTS)
    assert spent(first).rollouts > 0 and spent(second).rollouts == 0  # nothing ran again
    ours = {p.relative_to(second.root): RolloutRecord.read(p) for p in second.root.rglob("record.json")}
    theirs = {p.relative_to(first.root): RolloutRecord.read(p) for p in first.root.rglob("record.json")}
    assert set(ours) == set(theirs)
    assert {r.target for r in ours.values()} == {"follows", "deaf"}
    for path, record in ours.items():
        assert record.cached_from and record.target == path.parts[-3].split("@")[1]
        assert record.model_copy(update={"cached_from": None}) == theirs[path]  # its own agent's draw
    assert _decisions(second) == _decisions(first)
    gate = second.unit_dir("step", 1) / "gate.json"
    assert (
        gate.is_file()
        and Verdict.read(gate).agents == Verdict.read(first.unit_dir("step", 1) / "gate.json").agents
    )
    tables = [Transfer.read(run.final / "transfer.json") for run in (first, second)]
    assert [[(c.label, c.scores, c.pairs) for c in t.agents] for t in tables[:1]] == [
        [(c.label, c.scores, c.pairs) for c in t.agents] for t in tables[1:]
    ]
    assert [c.n_cached for c in tables[1].agents] == [c.n_rollouts for c in tables[1].agents]


def test_the_same_agent_under_two_labels_is_refused(tmp_path: Path) -> None:
    """Two labels of one backend with the same options share cache keys: with the cache one label's
    draws would be the other's copies, counted twice by the pooled gate. Refused, nothing written."""
    suite, skill = _small_suite(tmp_path)
    same = [AgentSpec(label="a", agent="mock"), AgentSpec(label="b", agent="mock", options={"sleep_s": 0})]
    with pytest.raises(UsageError, match="--agent a and --agent b are the same agent"):
        _two_agents_train(tmp_path / "runs", suite, skill, tmp_path / "cache", same)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "cache").exists()
    from typer.testing import CliRunner

    from skilltune.cli import app

    args = ["train", str(suite), "--skill", str(skill), "--proposer", "mock", "--tag", "x"]
    result = CliRunner().invoke(
        app, [*args, "--runs-dir", str(tmp_path / "runs"), "--agent", "a=mock", "--agent", "b=mock"]
    )
    assert (
        result.exit_code == 2 and "are the same agent" in result.output and "Traceback" not in result.output
    )
    assert not (tmp_path / "runs").exists()
