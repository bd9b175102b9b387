"""Executors and liveness: stuck agents, wall limits, orphan reaping, the rollout cache."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from skilltune.agents import AGENTS, AgentRequest, AgentResult, Message
from skilltune.agents.cli import CLIBackend
from skilltune.measure.evaluate import evaluate
from skilltune.process import _LIVE, ProcessOutcome, reap_orphans
from tests.helpers import growing_limit, write_suite

STAND_IN = Path(__file__).parent / "stand_ins" / "agent.py"
# The wall limit of agents that an interrupt must kill at once: an interrupt that waited for it would
# take at least WALL_S minus ctrl_c_when's 120 s, far beyond the WALL_S / 4 a loaded machine needs.
WALL_S = 240.0


class StandInAgent(CLIBackend):
    """A real subprocess agent (tests/stand_ins/agent.py) registered like any backend."""

    name = "stand-in"
    executable = sys.executable
    marker: ClassVar[str] = ""
    counter: ClassVar[Path] = Path("/dev/null")

    def command(self, request: AgentRequest, home: Path) -> list[str]:
        return [
            sys.executable,
            str(STAND_IN),
            str(request.task.field("stand_in")),
            self.marker,
            str(self.counter),
        ]

    def sealed_command(
        self, argv: list[str], request: AgentRequest, home: Path, files: Sequence[Path] = ()
    ) -> list[str]:
        # sealed (the default where bwrap runs), it still needs its script and its counter files: bound
        return super().sealed_command(argv, request, home, [*files, STAND_IN.parent, self.counter.parent])

    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest
    ) -> AgentResult:
        said = [
            Message(role="assistant", content=str(e["text"])) for e in events if e.get("type") == "assistant"
        ]
        final = next((str(e["text"]) for e in reversed(events) if e.get("type") == "result"), "")
        status = "ok" if outcome.returncode == 0 else "task_failed"
        return AgentResult(status=status, final_text=final, events=events, messages=said, turns=len(said))


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[type[StandInAgent]]:
    StandInAgent.marker = f"skilltune-test-{uuid.uuid4().hex}"
    StandInAgent.counter = tmp_path / "runs.txt"
    AGENTS.register("stand-in", StandInAgent)
    try:
        yield StandInAgent
    finally:
        AGENTS.unregister("stand-in")
        subprocess.run(["pkill", "-f", StandInAgent.marker], check=False)


def _suite(tmp_path: Path, mode: str) -> Path:
    task = {
        "id": "t",
        "prompt": "say hello",
        "stand_in": mode,
        "scoring": {"mode": "command", "command": "test -f hello.txt"},
    }
    return write_suite(tmp_path / f"suite-{mode}", [dict(task, id="train-t")], [task])


def _alive(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, check=False).returncode == 0


def _wait_until_gone(marker: str, seconds: float = 60.0) -> None:
    """Fail unless every process tagged ``marker`` is gone within ``seconds`` (a kill lands asynchronously;
    a survivor sleeps 300 s, so waiting a little longer tells the two apart on any machine)."""
    deadline = time.monotonic() + seconds
    while _alive(marker):
        if time.monotonic() > deadline:
            pytest.fail(f"a process tagged {marker} survived")
        time.sleep(0.05)


def _children(stand_in: type[StandInAgent]) -> list[int]:
    """The pids of the children the stand-in agents have started so far (tests/stand_ins/agent.py)."""
    path = Path(f"{stand_in.counter}.children")
    return [int(pid) for pid in path.read_text().split()] if path.is_file() else []


def _running(pids: list[int]) -> bool:
    try:
        for pid in pids:
            os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _main_thread_in(function: str) -> bool:
    """Whether the main thread is inside a call of ``function`` (by name) right now."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


@dataclass
class CtrlC:
    condition_held: bool = False
    sent_at: float | None = None


@contextlib.contextmanager
def ctrl_c_when(condition: Callable[[], bool], within: float = 120.0) -> Iterator[CtrlC]:
    """A SIGINT to the main thread (as a Ctrl-C) as soon as ``condition()`` holds, unless the block ended
    first. If it does not hold within ``within`` seconds the SIGINT is sent anyway (the block must not hang)
    and ``condition_held`` stays False: the test then fails on it rather than pass without having
    interrupted what it names."""
    main = threading.main_thread().ident
    assert main is not None
    state = CtrlC()
    done = threading.Event()
    lock = threading.Lock()

    def watch() -> None:
        deadline = time.monotonic() + within
        while not done.is_set():
            held = condition()
            if held or time.monotonic() > deadline:
                with lock:
                    if not done.is_set():
                        state.condition_held, state.sent_at = held, time.monotonic()
                        signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield state
    finally:
        with lock:
            done.set()
        watcher.join()


def _record(out: Path) -> dict[str, Any]:
    (path,) = list(out.glob("rollouts/eval/*/*/record.json"))
    return dict(json.loads(path.read_text()))


def _said_something(folder: Path) -> bool:
    """Whether the stand-in agent printed its assistant event (it starts its child just before)."""
    log = folder / "agent-stdout.jsonl"
    return log.is_file() and '"assistant"' in log.read_text()


def _limited_run(
    tmp_path: Path, stand_in: type[StandInAgent], mode: str, options: dict[str, float]
) -> tuple[dict[str, Any], Path]:
    """One evaluate of the stand-in in ``mode``, in folders of its own (counter included); the record
    and its folder."""
    name = "-".join(f"{k}{v:g}" for k, v in options.items())
    stand_in.counter = tmp_path / f"runs-{name}.txt"
    out = tmp_path / f"out-{name}"
    evaluate(_suite(tmp_path, mode), None, agent="stand-in", out=out, agent_options=options)
    return _record(out), next(out.glob("rollouts/eval/*/*/record.json")).parent


def test_a_stuck_agent_is_killed_with_its_group_and_requeued_once(
    tmp_path: Path, stand_in: type[StandInAgent]
) -> None:
    """The stall limit is the point: it grows only while a loaded machine had not let the stand-in
    print its first event (then the rollout would be an infra error, a different case)."""
    record, _ = growing_limit(
        lambda stall: _limited_run(tmp_path, stand_in, "hang", {"stall_s": stall, "wall_limit_s": 120}),
        lambda done: _said_something(done[1]) and _said_something(done[1] / "attempts" / "1"),
        (2, 6, 18),
        "the stand-in's first event in both attempts",
    )
    assert record["status"] == "crashed"
    assert "stalled twice" in record["reason"] and "(stuck)" in record["reason"]
    assert record["attempts"] == 2
    assert [a["stalled"] for a in record["attempt_history"]] == [True]
    assert stand_in.counter.read_text().split() == ["hang", "hang"]  # requeued exactly once
    assert len(_children(stand_in)) == 2, "the stand-in was killed before it started its child"
    assert record["score"] is None
    _wait_until_gone(stand_in.marker)  # no child of the stuck agent survived


def test_a_timeout_kills_the_group_and_is_scored_as_it_stands(
    tmp_path: Path, stand_in: type[StandInAgent]
) -> None:
    """The wall limit is the point: it grows only while a loaded machine had not let the stand-in print
    its first event before it struck."""
    record, _ = growing_limit(
        lambda limit: _limited_run(tmp_path, stand_in, "busy", {"stall_s": 120, "wall_limit_s": limit}),
        lambda done: _said_something(done[1]),
        (3, 9, 27),
        "the stand-in's first event",
    )
    assert record["status"] == "timeout"  # not an infra error: the agent's first turn came before the limit
    assert "wall limit" in record["reason"]
    assert record["score"] is not None and record["score"]["hard"] == 0  # scored as it stands: no hello.txt
    assert record["attempts"] == 1
    assert len(_children(stand_in)) == 1
    _wait_until_gone(stand_in.marker)


def test_reap_orphans_kills_registered_groups() -> None:
    marker = f"skilltune-orphan-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep(300)  # {marker}"], start_new_session=True
    )
    _LIVE.add(proc.pid)
    assert reap_orphans() >= 1
    proc.wait(timeout=60)
    assert not _alive(marker)


def test_an_interrupt_kills_running_agents_at_once_and_leaves_no_record(
    tmp_path: Path, stand_in: type[StandInAgent]
) -> None:
    """Ctrl-C while two agents run (both have started their children): they die now (not at their WALL_S
    wall limit), no rollout is recorded as a failure of any kind, and the next batch runs normally."""
    tasks = [
        {"id": f"t{i}", "prompt": "p", "stand_in": "busy", "scoring": {"mode": "command", "command": "true"}}
        for i in range(4)
    ]
    suite = write_suite(tmp_path / "suite", [dict(tasks[0], id="train-t")], tasks)
    out = tmp_path / "out"

    def both_running() -> bool:
        return len(_children(stand_in)) == 2 and _running(_children(stand_in))

    with pytest.raises(KeyboardInterrupt), ctrl_c_when(both_running) as ctrl_c:
        evaluate(suite, None, agent="stand-in", out=out, workers=2, agent_options={"wall_limit_s": WALL_S})
    assert ctrl_c.condition_held, "the two agents were not both running within 120 s"
    assert ctrl_c.sent_at is not None and time.monotonic() - ctrl_c.sent_at < WALL_S / 4, (
        "the interrupt waited for the agents' wall limit"
    )
    _wait_until_gone(stand_in.marker)  # no agent survived the interrupt
    assert not list(out.rglob("record.json"))  # neither a task failure nor an infra error
    assert stand_in.counter.read_text().split() == ["busy", "busy"]  # the queued ones never started
    fine = [dict(task, stand_in="ok") for task in tasks]
    again = evaluate(write_suite(tmp_path / "fine", [dict(fine[0], id="train-t")], fine), None, agent="stand-in",
                     out=tmp_path / "again", workers=2)  # fmt: skip
    assert again.n_rollouts == 4 and again.hard_acc == 1.0


def test_a_second_interrupt_while_a_decided_batch_drains_kills_the_agents(
    tmp_path: Path, stand_in: type[StandInAgent]
) -> None:
    """A gate decided (the consumer closes the iterator) and the running rollouts are left to finish;
    Ctrl-C then kills them at once, and they leave no record."""
    from skilltune.agents import get_backend
    from skilltune.execute.local import LocalExecutor
    from skilltune.rollout.runner import RolloutJob, RolloutRunner
    from skilltune.suite import load_suite

    tasks = [
        {"id": "fast", "prompt": "p", "stand_in": "ok", "scoring": {"mode": "command", "command": "true"}},
        {"id": "slow", "prompt": "p", "stand_in": "busy", "scoring": {"mode": "command", "command": "true"}},
    ]
    suite = load_suite(write_suite(tmp_path / "suite", [dict(tasks[0], id="train-t")], tasks))
    backend = get_backend("stand-in")
    runner = RolloutRunner(
        suite=suite,
        backend=backend,
        options=backend.parse_options({"wall_limit_s": WALL_S}),
        out=tmp_path / "out",
    )
    jobs = [RolloutJob(task, "eval", None, 0, 0) for task in suite.tasks("val")]
    batch = LocalExecutor(2).map(jobs, runner)
    first = next(batch)
    assert first.task_id == "fast"

    def draining() -> bool:  # close() waits for "slow", which only its WALL_S wall limit would end
        return len(_children(stand_in)) == 1 and _running(_children(stand_in)) and _main_thread_in("_drain")

    with pytest.raises(KeyboardInterrupt), ctrl_c_when(draining) as ctrl_c:
        batch.close()
    assert ctrl_c.condition_held, "close() was not waiting for the running slow agent within 120 s"
    assert ctrl_c.sent_at is not None and time.monotonic() - ctrl_c.sent_at < WALL_S / 4, (
        "the second interrupt waited for the agent's wall limit"
    )
    _wait_until_gone(stand_in.marker)  # no agent survived the interrupt
    records = sorted(p.parent.name for p in (tmp_path / "out").rglob("record.json"))
    assert records == ["fast_r0"], records
    assert sorted(stand_in.counter.read_text().split()) == ["busy", "ok"]  # not restarted after the kill
