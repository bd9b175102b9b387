"""Several agents' jobs through one executor map (skilltune/rollout/routes.py's ``Router``): the jobs
interleaved, each run by its agent's runner, each record traced back to its job and agent; and a
training run and a comparison with two agents whose rollouts overlap, which one agent after another
could not do.

The proof of overlap needs no clock: each ``rendezvous`` agent's rollout writes its own marker file,
then waits (at most ``WAIT_S``) for the other agent's. With two workers, one agent after another
leaves the first agent's rollouts waiting for a marker no running rollout writes: they give up and
say so (``Rendezvous.missed``). Side by side, the agents' first rollouts run at once and meet."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from skilltune.agents import AGENTS, AgentRequest, AgentResult
from skilltune.agents.mock import MockAgent, MockOptions
from skilltune.execute.local import LocalExecutor
from skilltune.measure.transfer import compare_agents
from skilltune.rollout.routes import Router, runner_for
from skilltune.rollout.runner import RolloutJob, RolloutRunner
from skilltune.runfiles import AgentSpec, RolloutRecord, Transfer
from skilltune.skill import load_skill
from skilltune.suite import load_suite
from skilltune.training import train
from tests.helpers import GOOD_SKILL, MOCK_SKILL, MOCK_SUITE, quiet

WAIT_S = 60.0  # how long a rollout waits for the other agent's marker (the two meet in milliseconds)


class RendezvousOptions(MockOptions):
    me: str = ""  # the marker this agent's rollouts write
    other: str = ""  # the marker they wait for
    markers: str = ""  # the folder of the markers


class Rendezvous(MockAgent):
    """The mock agent, whose every rollout first meets a rollout of the other agent (or gives up)."""

    name: ClassVar[str] = "rendezvous"
    Options = RendezvousOptions
    missed: ClassVar[list[str]] = []  # the agents whose rollout waited in vain
    lock: ClassVar[threading.Lock] = threading.Lock()

    def run(self, request: AgentRequest) -> AgentResult:
        options = request.options
        folder = Path(options.markers)
        (folder / options.me).touch()
        deadline = time.monotonic() + WAIT_S
        while not (folder / options.other).exists() and not type(self).missed:
            if time.monotonic() > deadline:
                with type(self).lock:
                    type(self).missed.append(options.me)  # one miss ends every wait: fail fast
                break
            time.sleep(0.01)
        return super().run(request)


@pytest.fixture
def rendezvous(tmp_path: Path) -> Iterator[list[dict[str, Any]]]:
    """Two rendezvous agents (as ``agents`` entries) meeting in a fresh folder."""
    Rendezvous.missed = []
    AGENTS.register(Rendezvous.name, Rendezvous)
    markers = tmp_path / "markers"
    markers.mkdir()
    try:
        yield [
            {
                "label": me,
                "agent": "rendezvous",
                "options": {"me": me, "other": other, "markers": str(markers)},
            }
            for me, other in (("a", "b"), ("b", "a"))
        ]
    finally:
        AGENTS.unregister(Rendezvous.name)


def test_a_training_runs_its_agents_rollouts_side_by_side(
    tmp_path: Path, rendezvous: list[dict[str, Any]]
) -> None:
    result = train(
        MOCK_SUITE, MOCK_SKILL, tag="meet", runs_dir=str(tmp_path / "runs"), agents=rendezvous,
        reporter=quiet(), proposer="mock", max_steps=1, seed=1, metric="hard", test_reps=1, workers=2,
    )  # fmt: skip
    assert Rendezvous.missed == []  # one agent after another: ["a"], the first agent waited alone
    assert result.state == "success", result.reason
    records = [RolloutRecord.read(p) for p in Path(result.run_dir).rglob("record.json")]
    assert {r.target for r in records} == {"a", "b"} and all(r.status != "infra_error" for r in records)


def test_compare_runs_its_agents_rollouts_side_by_side(
    tmp_path: Path, rendezvous: list[dict[str, Any]]
) -> None:
    arms = {"seed": load_skill(MOCK_SKILL), "good": load_skill(GOOD_SKILL)}
    agents = [AgentSpec.model_validate(a) for a in rendezvous]
    table = compare_agents(MOCK_SUITE, arms, agents, reps=1, out=tmp_path / "out", workers=2)
    assert Rendezvous.missed == []
    assert table == Transfer.read(tmp_path / "out" / "transfer.json")
    for column in table.agents:  # every record in its own agent's folder, all of them scored
        records = [RolloutRecord.read(p) for p in (tmp_path / "out" / column.label).rglob("record.json")]
        assert len(records) == column.n_rollouts == column.n_scored > 0
        assert {r.options_hash for r in records} == {records[0].options_hash}
    assert table.agents[0].n_rollouts == table.agents[1].n_rollouts


def _runner(tmp_path: Path, name: str, **options: Any) -> RolloutRunner:
    from skilltune.agents import get_backend

    backend = get_backend("mock")
    return RolloutRunner(
        suite=load_suite(MOCK_SUITE), backend=backend, options=MockOptions(**options), out=tmp_path / name
    )


def _jobs(count: int, agent: str | None, labelled: bool = False) -> list[RolloutJob]:
    task = load_suite(MOCK_SUITE).tasks("train")[0]
    return [RolloutJob(task, "train", None, replicate, 0, agent, labelled) for replicate in range(count)]


def test_a_router_interleaves_the_jobs_and_routes_each_to_its_agents_runner(tmp_path: Path) -> None:
    one, two = _runner(tmp_path, "one"), _runner(tmp_path, "two", crn=True)
    first, second = _jobs(3, "x"), _jobs(1, "y")
    router = Router(first + second, {"x": one, "y": two})
    assert router.jobs == [first[0], second[0], first[1], first[2]]
    assert [runner_for(router, job).out.name for job in router.jobs] == ["one", "two", "one", "one"]
    assert runner_for(one, second[0]) is one  # a plain runner runs every job itself
    assert router.runner(_jobs(1, "x")[0]) is one  # by the label a job carries, not by its identity
    with pytest.raises(ValueError, match="names agent 'z', none of"):
        router.runner(_jobs(1, "z")[0])


def test_equal_jobs_of_two_agents_land_in_their_own_folders_and_come_back_to_them(tmp_path: Path) -> None:
    """A comparison's agents ask for the same rollouts, none named in its files (each agent's folder
    names it): each record lands in its own agent's folder and is traced back to its job."""
    one, two = _runner(tmp_path, "one"), _runner(tmp_path, "two", crn=True)
    router = Router(_jobs(2, "a") + _jobs(2, "b"), {"a": one, "b": two})
    records = list(LocalExecutor(2).map(router.jobs, router))
    assert len(records) == 4 and all(r.target is None for r in records)
    folders = sorted(p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("record.json"))
    assert folders == ["one", "one", "two", "two"]
    back = sorted((router.job(r).agent, r.replicate, r.options_hash) for r in records)
    assert [(a, k) for a, k, _ in back] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert {h for a, _, h in back if a == "a"} == {one.options_hash} != {two.options_hash}


def test_a_router_refuses_what_would_mix_its_agents_records(tmp_path: Path) -> None:
    one = _runner(tmp_path, "one")
    with pytest.raises(ValueError, match="share an options hash"):  # the same agent under two labels
        Router(_jobs(1, "a"), {"a": one, "b": _runner(tmp_path, "two")})
    with pytest.raises(ValueError, match="same rollout"):
        Router(_jobs(1, "a") + _jobs(1, "a"), {"a": one})
    with pytest.raises(ValueError, match="names agent None, none of"):
        Router(_jobs(1, None), {"a": one})
