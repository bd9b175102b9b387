"""The Ray executor on a local Ray instance: same contract, same scores as local workers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skilltune.execute.ray import RayExecutor
from skilltune.measure.compare import compare
from skilltune.measure.evaluate import evaluate
from skilltune.skill import load_skill
from tests.helpers import GOOD_SKILL, MOCK_SKILL, MOCK_SUITE, PYENV_SUITE

pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[RayExecutor]:
    executor = RayExecutor(workers=2)
    try:
        yield executor
    finally:
        executor.shutdown()


def _records(out: Path) -> dict[str, dict[str, object]]:
    found = {}
    for path in sorted(out.glob("rollouts/*/*/*/record.json")):
        record = json.loads(path.read_text())
        key = f"{record['candidate'][:12]}/{record['task_id']}#{record['replicate']}"
        found[key] = {"status": record["status"], "score": record["score"], "phase": record["phase"]}
        for name in ("conversation.json", "events.jsonl", "diff.patch", "output.txt"):
            assert (path.parent / name).is_file(), path.parent / name
    return found


def test_ray_gives_the_same_scores_as_local_workers(tmp_path: Path, ray_executor: RayExecutor) -> None:
    local = evaluate(MOCK_SUITE, MOCK_SKILL, split="val", reps=2, out=tmp_path / "local", workers=2)
    remote = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="val", reps=2, out=tmp_path / "ray", shared_executor=ray_executor
    )
    assert remote.per_task == local.per_task
    assert (remote.hard_acc, remote.mixed) == (local.hard_acc, local.mixed)
    assert _records(tmp_path / "ray") == _records(tmp_path / "local")


def test_ray_compare_and_python_env_suites(tmp_path: Path, ray_executor: RayExecutor) -> None:
    from skilltune.measure.compare import build_comparison, run_arms
    from skilltune.session import RolloutSession
    from skilltune.settings import RolloutSettings
    from skilltune.suite import load_suite

    suite = load_suite(MOCK_SUITE)
    arms = {"seed": load_skill(MOCK_SKILL), "good": load_skill(GOOD_SKILL)}
    session = RolloutSession.open(
        suite, RolloutSettings(), tasks=suite.tasks("test"), candidates=list(arms.values()),
        out=tmp_path / "cmp", executor=ray_executor,
    )  # fmt: skip
    on_ray = build_comparison(suite, "test", "mock", 2, "mixed", run_arms(session, arms, "test", 2, "test"))
    local = compare(MOCK_SUITE, arms, split="test", reps=2, out=tmp_path / "local")
    assert on_ray.arms == local.arms and on_ray.pairs == local.pairs
    env_local = evaluate(
        PYENV_SUITE, PYENV_SUITE / "skill", split="train", out=tmp_path / "env-local", workers=1
    )
    env_ray = evaluate(
        PYENV_SUITE,
        PYENV_SUITE / "skill",
        split="train",
        out=tmp_path / "env-ray",
        shared_executor=ray_executor,
    )
    assert env_ray.per_task == env_local.per_task


def test_ray_fills_and_reads_the_cache_on_the_driver(tmp_path: Path, ray_executor: RayExecutor) -> None:
    cache = tmp_path / "cache"
    first = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="test", out=tmp_path / "a", shared_executor=ray_executor, cache=cache
    )
    assert len(list(cache.rglob("record.json"))) == len(first.per_task)
    again = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="test", out=tmp_path / "b", shared_executor=ray_executor, cache=cache
    )
    assert again.per_task == first.per_task
    records = [json.loads(p.read_text()) for p in (tmp_path / "b").glob("rollouts/eval/*/*/record.json")]
    assert records and all(r["cached_from"] for r in records)


def test_a_worker_that_dies_is_requeued_once_then_recorded_as_crashed(
    tmp_path: Path, ray_executor: RayExecutor
) -> None:
    """An agent that kills its Ray worker: the rollout runs twice, then it is a crashed record (never a
    task failure), the batch is contaminated, and the other rollouts land as usual."""
    import stat
    import textwrap

    from tests.helpers import write_suite

    counter = tmp_path / "starts.txt"
    killer = tmp_path / "killer"
    killer.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            [ "$1" = --version ] && echo 1.0 && exit 0
            echo start >> {counter}
            kill -9 $PPID
            """)
    )
    killer.chmod(killer.stat().st_mode | stat.S_IXUSR)
    task = {"id": "t", "prompt": "p", "scoring": {"mode": "exact", "expected": "x"}}
    suite = write_suite(tmp_path / "suite", [dict(task, id="train-t")], [task])
    summary = evaluate(
        suite,
        None,
        agent="claude",
        out=tmp_path / "out",
        shared_executor=ray_executor,
        agent_options={"executable": str(killer), "wall_limit_s": 60},
        sandbox="none",  # sealed, the agent cannot reach its worker at all (it is alone in a PID namespace)
    )
    assert counter.read_text().split() == ["start", "start"]
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("record.json")]
    assert record["status"] == "crashed" and record["score"] is None and record["attempts"] == 2
    assert "Ray lost this rollout twice" in record["reason"]
    assert summary.contaminated and summary.statuses == {"crashed": 1}
    after = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="test", out=tmp_path / "after", shared_executor=ray_executor
    )
    assert after.n_scored == after.n_rollouts  # the executor still works


def test_closing_early_keeps_the_rollouts_already_running(tmp_path: Path, ray_executor: RayExecutor) -> None:
    """As with local workers: a consumer that stops after the first record (a decided gate) gets the
    rollouts Ray was already running written to disk, and nothing more is started."""
    from skilltune.agents import get_backend
    from skilltune.agents.mock import MockOptions
    from skilltune.rollout.runner import RolloutRunner, jobs_for
    from skilltune.suite import load_suite

    suite = load_suite(MOCK_SUITE)
    runner = RolloutRunner(
        suite=suite, backend=get_backend("mock"), options=MockOptions(sleep_s=0.5), out=tmp_path / "out"
    )
    jobs = jobs_for(suite.tasks("val")[:6], load_skill(MOCK_SKILL), "eval", 1, 0)
    batch = ray_executor.map(jobs, runner)
    first = next(batch)
    batch.close()
    records = sorted((tmp_path / "out").glob("rollouts/eval/*/*/record.json"))
    assert len(records) == ray_executor.workers == 2  # the first, and the one still running when it came
    assert first.task_id in {json.loads(p.read_text())["task_id"] for p in records}


def test_a_ray_worker_runs_a_cli_rollout_sealed_as_the_driver_decided(
    tmp_path: Path, ray_executor: RayExecutor
) -> None:
    """The seal travels with the job: a worker runs the agent process under bwrap (the claude backend
    driving the benchmarks' instant stand-in), and the records say so."""
    from skilltune.agents import get_backend
    from skilltune.rollout.runner import RolloutRunner, jobs_for
    from skilltune.sandbox import UNSEALED, Seal, bwrap_problem
    from skilltune.suite import load_suite

    if bwrap_problem() is not None:
        pytest.skip(f"bwrap cannot run here: {bwrap_problem()}")
    suite = load_suite(MOCK_SUITE)
    backend = get_backend("claude")
    stand_in = Path(__file__).resolve().parents[1] / "benchmarks" / "stand_ins" / "claude-instant.sh"
    options = backend.parse_options({"executable": str(stand_in), "wall_limit_s": 60})
    jobs = jobs_for(suite.tasks("val")[:2], None, "eval", 1, 0)
    for name, seal in (("sealed", Seal("bwrap")), ("unsealed", UNSEALED)):
        runner = RolloutRunner(suite=suite, backend=backend, options=options, out=tmp_path / name, seal=seal)
        records = list(ray_executor.map(jobs, runner))
        assert [r.status for r in records] == ["ok", "ok"], [r.reason for r in records]
        assert {r.sandbox for r in records} == {"bwrap" if seal.sealed else "none"}
        assert {r.options_hash for r in records} == {runner.options_hash}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_joining_a_cluster_started_with_ray_start_with_token_authentication(tmp_path: Path) -> None:
    """What a user does: `ray start --head` (token authentication on, Ray 2.60's default when a token
    exists), then `--executor ray --ray-address HOST:PORT`. Without a token the join is refused with
    what to set; with the head's token it runs (skilltune turns RAY_AUTH_MODE=token on)."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    ray_bin = Path(sys.executable).parent / "ray"
    home = tmp_path / "home"
    home.mkdir()
    scratch = Path(tempfile.mkdtemp(prefix="st-ray-", dir="/tmp"))  # short: Ray's socket paths are limited
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env = {**base, "HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    subprocess.run([str(ray_bin), "get-auth-token", "--generate"], env=env, capture_output=True, check=True)
    port = _free_port()
    log = tmp_path / "ray-start.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            [str(ray_bin), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
             "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
             "--temp-dir", str(scratch)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "ray start did not come up in 600 s"
            time.sleep(0.5)
        assert "Token authentication is enabled" in log.read_text(errors="replace")

        def run(home_dir: Path, out: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "skilltune.cli", "run", str(MOCK_SUITE), "--skill", str(MOCK_SKILL),
                 "--agent", "mock", "--split", "val", "--executor", "ray",
                 "--ray-address", f"127.0.0.1:{port}", "--out", str(tmp_path / out), "-q"],
                env={**env, "HOME": str(home_dir)}, capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip

        stranger = tmp_path / "stranger"
        stranger.mkdir()
        refused = run(stranger, "refused")
        assert refused.returncode == 2, refused.stderr
        assert "could not join the Ray cluster" in refused.stderr and "RAY_AUTH_MODE=token" in refused.stderr
        assert "Traceback" not in refused.stderr
        joined = run(home, "joined")
        assert joined.returncode == 0, joined.stderr
        assert len(list((tmp_path / "joined").glob("rollouts/eval/*/*/record.json"))) == 48
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            subprocess.run(["pkill", "-9", "-f", str(scratch)], check=False)
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)
        subprocess.run(["pkill", "-9", "-f", str(scratch)], check=False)  # what ray start left behind
        shutil.rmtree(scratch, ignore_errors=True)


def test_ray_runs_several_agents_as_local_workers_do(tmp_path: Path, ray_executor: RayExecutor) -> None:
    """compare with two agents on one shared Ray executor: the transfer table local workers give."""
    from skilltune.measure.transfer import compare_agents
    from skilltune.runfiles import AgentSpec

    arms = {"seed": load_skill(MOCK_SKILL), "good": load_skill(GOOD_SKILL)}
    agents = [
        AgentSpec(label="follows", agent="mock"),
        AgentSpec(label="stubborn", agent="mock", options={"ignores": ["quantify-impact", "detection-gap"]}),
    ]
    on_ray = compare_agents(
        MOCK_SUITE, arms, agents, reps=1, out=tmp_path / "ray", shared_executor=ray_executor
    )
    local = compare_agents(MOCK_SUITE, arms, agents, reps=1, out=tmp_path / "local", workers=2)
    assert on_ray.agents == local.agents
    for label in ("follows", "stubborn"):
        assert _records(tmp_path / "ray" / label) == _records(tmp_path / "local" / label)


def test_a_training_run_for_several_agents_on_ray_decides_as_local_workers_do(
    tmp_path: Path, ray_executor: RayExecutor
) -> None:
    """train with two mock agents (one that ignores the rules the proposer adds): on the shared Ray
    executor every stage runs each agent and the run ends with the same decisions, per-agent gate
    evidence and rollouts as with local workers; each Ray record names the agent that ran it."""
    from skilltune.training import train
    from tests.helpers import quiet

    agents = [
        {"label": "follows", "agent": "mock"},
        {"label": "stubborn", "agent": "mock", "options": {"ignores": ["quantify-impact", "detection-gap"]}},
    ]
    settings: dict[str, Any] = {
        "proposer": "mock",
        "max_steps": 1,
        "seed": 1,
        "metric": "hard",
        "test_reps": 1,
    }
    runs = {}
    ways: list[tuple[str, dict[str, Any]]] = [
        ("ray", {"shared_executor": ray_executor}),
        ("local", {"workers": 2}),
    ]
    for name, how in ways:
        result = train(
            MOCK_SUITE, MOCK_SKILL, tag=name, runs_dir=str(tmp_path), agents=agents, reporter=quiet(),
            **settings, **how,
        )  # fmt: skip
        runs[name] = Path(result.run_dir)
    gates = {
        name: json.loads((run / "steps" / "step_0001" / "gate.json").read_text())
        for name, run in runs.items()
    }
    assert gates["ray"]["decision"] == gates["local"]["decision"]
    assert gates["ray"]["agents"] == gates["local"]["agents"] and gates["ray"]["agents"]
    targets = {
        name: sorted(
            (r["target"], r["phase"], r["task_id"], r["replicate"], json.dumps(r["score"]))
            for r in (json.loads(p.read_text()) for p in run.rglob("record.json"))
        )
        for name, run in runs.items()
    }
    assert targets["ray"] == targets["local"]
    assert {t for t, *_ in targets["ray"]} == {"follows", "stubborn"}
