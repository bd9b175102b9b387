"""The training loop end to end with the mock agent and the mock proposer."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from skilltune.agents import AGENTS, AgentRequest, AgentResult
from skilltune.agents.mock import MockAgent
from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.rollout.runner import RetryPolicy
from skilltune.rundir import RESULTS_HEADER, RunDir
from skilltune.runfiles import StageDone, UnitRecord, Verdict
from skilltune.skill import load_skill
from skilltune.store import read_json
from skilltune.training import resume, train
from tests.helpers import FAST, MOCK_SKILL, MOCK_SUITE, NULL_SUITE, REPO, quiet, stopped_run, tree

runner = CliRunner()
NO_RETRY = RetryPolicy(max_attempts=1, base_s=0, cap_s=0)


def _quiet() -> dict[str, Any]:
    from skilltune.progress import PlainReporter

    return {"reporter": PlainReporter(quiet=True)}


def test_demo_run_improves_and_leaves_a_complete_run_directory(tmp_path: Path) -> None:
    from skilltune.progress import PlainReporter

    lines = io.StringIO()
    result = train(
        MOCK_SUITE, MOCK_SKILL, tag="demo", runs_dir=str(tmp_path), max_steps=8, seed=1,
        reporter=PlainReporter(lines),
    )  # fmt: skip
    run = RunDir(tmp_path / "demo")
    assert result.state == "success", result.reason
    assert run.terminal() is not None and run.terminal_path.read_text().startswith("success: ")
    assert result.best_val is not None and result.seed_val is not None and result.best_val > result.seed_val
    rows = [line.split("\t") for line in run.results.read_text().splitlines()]
    assert tuple(rows[0]) == RESULTS_HEADER
    steps = [r for r in rows[1:] if r[2] == "step"]
    assert [int(r[0]) for r in steps] == list(range(1, 9))
    assert {r[5] for r in rows[1:]} <= {"keep", "discard", "carried"}
    comparison = json.loads(run.comparison.read_text())
    assert set(comparison["arms"]) == {"S0", "best"} and comparison["split"] == "test"
    assert comparison["arms"]["best"]["mixed"] > comparison["arms"]["S0"]["mixed"]
    for name in (
        "config.json",
        "journal.jsonl",
        "META.md",
        "allocation.md",
        "best_skill.md",
        "best_skill/SKILL.md",
    ):
        assert (run.root / name).is_file(), name
    epoch = json.loads((run.unit_dir("epoch", 1) / "epoch.json").read_text())
    assert epoch["decision"] == "skip", epoch  # --carry run: nothing is kept before the run's last step
    # under the default --carry run, each step's candidate beats its parent on the train screen (or the
    # step adds nothing) and is carried on ungated (verdict carried, no gate.json); the run's last step
    # gates the chain with its own edits and keeps it
    step1, last = run.unit_dir("step", 1), run.unit_dir("step", 8)
    for name in ("reflections.json", "asks/ask_01.json", "candidate_skill.md", "step.json"):
        assert (step1 / name).is_file(), name
    first = UnitRecord.read(step1 / "step.json")
    assert first.verdict == "carried" and first.decision == "carry" and not (step1 / "gate.json").exists()
    assert list((step1 / "rollouts" / "train").glob("*/*/record.json"))
    assert list((step1 / "rollouts" / "screen").glob("*/*/record.json"))
    assert not (step1 / "rollouts" / "gate").exists()
    assert [r[5] for r in rows[1:] if r[2] == "step"] == ["carried"] * 7 + ["keep"]
    last_record = UnitRecord.read(last / "step.json")
    assert last_record.carried == 7 and last_record.verdict == "keep" and (last / "gate.json").is_file()
    # a carried step: results.tsv says carried, its description ending with why, as a gated discard's
    # does; the progress line and META.md (the proposer's memory) say carried, not failed
    reason = first.reason
    assert reason.startswith("carried on ungated: train ")
    assert rows[1][5] == "carried" and rows[1][-1].endswith(f" ({reason})")
    assert f"step 1 (epoch 1): {reason}; {len(first.edits)} edit(s)" in lines.getvalue().splitlines()
    assert "step 8 (epoch 2): keep, val " in lines.getvalue()
    memory = run.meta.read_text()
    failed, carried_part = memory.split("### Failed", 1)[1].split("### Carried on ungated", 1)
    assert "- step 1:" not in failed and "- epoch 1:" in failed  # nothing was kept in epoch 1: skipped
    assert f"- step 1: {'; '.join(first.edits)} ({reason})" in carried_part
    assert list((last / "rollouts" / "gate").glob("*/*/record.json"))
    # accepted versions are commits on skilltune/<name>/<tag>; best is tagged
    log = subprocess.run(
        ["git", "log", "--format=%s", "skilltune/incident-postmortem/demo"],
        cwd=run.skill_repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    kept = [r for r in rows[1:] if r[5] == "keep"]
    assert len(log) == len(kept) + 1 and log[-1].startswith("[seed]")
    best_tag = subprocess.run(
        ["git", "rev-parse", "best", "HEAD"], cwd=run.skill_repo, capture_output=True, text=True, check=True
    ).stdout.split()
    assert best_tag[0] == best_tag[1]
    assert load_skill(run.best_dir).hash == result.best_hash
    # per-stage wall time in the journal, also for a backend that reports no tokens
    stage_events = [e for e in run.read_journal() if isinstance(e, StageDone)]
    stages = {(e.unit, e.stage) for e in stage_events}
    assert {("step_0001", "rollout"), ("step_0001", "reflect"), ("step_0008", "gate")} <= stages
    assert ("step_0001", "gate") not in stages
    assert all(e.seconds >= 0 for e in stage_events)
    # and the agents' tokens of each stage that ran rollouts (the mock reports some)
    by_stage = {(e.unit, e.stage): e for e in stage_events}
    train_tokens = sum(
        json.loads(p.read_text())["tokens_in"]
        for p in (run.unit_dir("step", 1) / "rollouts" / "train").rglob("record.json")
    )
    assert by_stage[("step_0001", "rollout")].tokens_in == train_tokens > 0
    assert (by_stage[("step_0008", "gate")].tokens_in or 0) > 0 and (
        by_stage[("final", "compare")].tokens_out or 0
    ) > 0
    # proposer prompts hold train evidence only: no val or test task id appears in them
    suite_ids = {
        json.loads(line)["id"]
        for split in ("val", "test")
        for line in (MOCK_SUITE / f"{split}.jsonl").read_text().splitlines()
    }
    for reflections in run.steps.rglob("reflections.json"):
        text = reflections.read_text()
        assert not [i for i in suite_ids if i in text]


def test_same_seed_same_run(tmp_path: Path) -> None:
    a = train(MOCK_SUITE, MOCK_SKILL, tag="a", runs_dir=str(tmp_path), max_steps=2, seed=4, **_quiet())
    b = train(
        MOCK_SUITE, MOCK_SKILL, tag="b", runs_dir=str(tmp_path), max_steps=2, seed=4, workers=1, **_quiet()
    )
    assert a.best_hash == b.best_hash
    assert (tmp_path / "a" / "results.tsv").read_text() == (tmp_path / "b" / "results.tsv").read_text()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "skilltune.cli", *args]


KILL_SLEEP_S = 0.03  # the mock agent's latency per rollout: a floor under the run's length
KILL_WORKERS = 2
KILLS = 6


def _journal(run: RunDir) -> list[dict[str, Any]]:
    """journal.jsonl's complete lines as written (a line torn by a kill is left out)."""
    if not run.journal_path.is_file():
        return []
    rows = []
    for line in run.journal_path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def _session_started(
    run: RunDir, nth: int, proc: subprocess.Popen[bytes], deadline: float, log: Path
) -> None:
    """Wait until the journal shows the ``nth`` session_start, written by ``proc``; fail clearly if it never
    does."""

    def started() -> bool:
        starts = [e for e in _journal(run) if e["event"] == "session_start"]
        return len(starts) >= nth and starts[nth - 1].get("pid") == proc.pid

    while not started():
        if proc.poll() is not None:
            pytest.fail(f"the session ended (rc {proc.returncode}) before session_start:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no session_start of pid {proc.pid} in {run.journal_path} before the deadline")
        time.sleep(0.01)


def test_sigkill_at_random_moments_then_resume_ends_identical(tmp_path: Path) -> None:
    """SIGKILL each session at a seeded random moment after the journal shows it started (so every kill
    interrupts a live session, however slow the machine), resume, and again; the end equals an
    uninterrupted run's.

    Why the run cannot end before the last kill: each rollout of the mock sleeps KILL_SLEEP_S, so the
    sessions together last at least rollouts * KILL_SLEEP_S / KILL_WORKERS seconds (a slower machine
    only adds to it), and the killed sessions together last less than that."""
    env = dict(os.environ, SKILLTUNE_WORKSPACES=str(tmp_path / "ws"))
    args = [
        "train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--agent", "mock", "--proposer", "mock",
        "--max-steps", "6", "--epoch-steps", "3", "--seed", "3", "--workers", str(KILL_WORKERS), "--quiet",
        "--agent-opt", f"sleep_s={KILL_SLEEP_S}",
    ]  # fmt: skip
    deadline = time.monotonic() + 600  # every wait below is bounded by it (pytest's own limit is 900 s)
    ref = subprocess.run(
        _cli(*args, "--tag", "ref", "--runs-dir", str(tmp_path / "a")),
        env=env,
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=540,
    )
    assert ref.returncode == 0, ref.stderr
    reference = RunDir(tmp_path / "a" / "ref")
    floor_s = len(list(reference.root.rglob("record.json"))) * KILL_SLEEP_S / KILL_WORKERS
    rng = random.Random(20261129)
    delays = [rng.uniform(0.1, 0.7) for _ in range(KILLS)]
    # each killed session lasts its delay plus the latency of polling and signalling (0.1 s allowed; a
    # machine slow enough to take longer slows the sessions' own work as much): well under the floor
    assert sum(delays) + 0.1 * KILLS < 0.75 * floor_s, (delays, floor_s)

    run = RunDir(tmp_path / "b" / "killed")
    log = tmp_path / "session.log"
    kills = 0
    while True:
        cmd = (
            _cli("resume", str(run.root), "--quiet")
            if run.config.is_file()
            else _cli(*args, "--tag", "killed", "--runs-dir", str(tmp_path / "b"))
        )
        with log.open("wb") as err:
            proc = subprocess.Popen(
                cmd, env=env, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err
            )
        try:
            _session_started(run, kills + 1, proc, deadline, log)
            if kills == KILLS:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                assert proc.returncode == 0, log.read_text()
                break
            time.sleep(delays[kills])
            assert proc.poll() is None, f"session {kills + 1} ended before its kill:\n{log.read_text()}"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=120)
            assert proc.returncode == -signal.SIGKILL
            kills += 1
        except subprocess.TimeoutExpired:
            pytest.fail(f"a session did not end in time:\n{log.read_text()}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    events = _journal(run)
    starts = [e for e in events if e["event"] == "session_start"]
    ends = [e for e in events if e["event"] == "session_end"]
    assert len(starts) == KILLS + 1 >= 5, [e["event"] for e in events]  # every kill interrupted a session
    assert len(ends) == 1  # SIGKILL writes nothing: only the last session ended on its own
    assert run.results.read_text() == reference.results.read_text()
    assert load_skill(run.best_dir).hash == load_skill(reference.best_dir).hash
    assert run.terminal() == reference.terminal()
    ours = json.loads(run.comparison.read_text())
    theirs = json.loads(reference.comparison.read_text())
    assert ours["arms"] == theirs["arms"] and ours["pairs"] == theirs["pairs"]
    # decisions shared the incumbent's rollouts (none run ahead), so resuming did not change those
    verdicts = [json.loads(p.read_text()) for p in sorted(run.steps.glob("*/gate.json"))]
    assert sum(v["reused"] for v in verdicts) > 0 and sum(v["prefetched"] for v in verdicts) == 0
    ref_verdicts = [json.loads(p.read_text()) for p in sorted(reference.steps.glob("*/gate.json"))]
    assert verdicts == ref_verdicts


def test_decisions_share_the_incumbents_rollouts_never_those_that_selected_it(tmp_path: Path) -> None:
    """While an incumbent stays, every decision's round r uses the same incumbent replicate; a kept
    candidate is judged on a new block of replicates, never on its own gate's (those were selected for
    being high); the seed's first round is its val baseline."""
    # carry off: a decision every step (--carry run makes one, at the run's end)
    result = train(
        MOCK_SUITE,
        MOCK_SKILL,
        tag="pool",
        runs_dir=str(tmp_path),
        max_steps=8,
        seed=1,
        carry="off",
        **_quiet(),
    )
    run = RunDir(tmp_path / "pool")
    records = [json.loads((run.unit_dir(k, i) / f"{k}.json").read_text()) for k, i in _units(run)]
    assert result.kept >= 1
    incumbent_reps: dict[str, set[int]] = {}
    origin = 0  # position of the unit that made the incumbent
    own_reps: set[int] = set()
    for position, record in enumerate(records, start=1):
        gate = run.unit_dir(record["kind"], record["index"]) / "gate.json"
        if gate.is_file():
            verdict = json.loads(gate.read_text())
            reps = {p["incumbent_replicate"] for r in verdict["rounds"] for p in r["pairs"]}
            assert reps.isdisjoint(own_reps)
            expected = (
                set(range(0, 8)) if origin == 0 else set(range(origin * 1000 + 500, origin * 1000 + 508))
            )
            assert reps <= expected
            incumbent_reps.setdefault(record["parent"], set()).update(reps)
            if record["verdict"] == "keep":
                own_reps = {p["candidate_replicate"] for r in verdict["rounds"] for p in r["pairs"]}
                origin = position
    gates = [run.unit_dir(kind, index) / "gate.json" for kind, index in _units(run)]
    reused = [json.loads(p.read_text())["reused"] for p in gates if p.is_file()]
    assert reused[0] == 48  # the seed's val baseline served its first round
    assert sum(reused[1:]) > 0
    gate_dirs = list(run.steps.glob("*/rollouts/gate/*/*"))
    assert len({d.parent.name + "/" + d.name for d in gate_dirs}) == len(gate_dirs)  # none run twice
    # nothing is run ahead: every gate rollout on disk is one arm of a pair some decision used
    paired = set()
    for gate in (p for p in gates if p.is_file()):
        for r in json.loads(gate.read_text())["rounds"]:
            for q in r["pairs"]:
                paired.add((q["task"], q["incumbent_replicate"]))
                paired.add((q["task"], q["candidate_replicate"]))
    on_disk = {
        (r["task_id"], r["replicate"])
        for r in (json.loads((d / "record.json").read_text()) for d in gate_dirs)
    }
    assert on_disk <= paired
    assert {rep for _, rep in paired - on_disk} == {0}  # the rest: the seed's val baseline


def test_train_warns_when_the_val_split_is_too_small_for_some_levels(tmp_path: Path) -> None:
    """Five val tasks: the smallest sign-flip p-value is 1/32, above the second level of a 2-decision run
    at alpha 0.05 (0.033, 0.017): the warning names it, even in a quiet run; the demo's 48 tasks give none."""
    import io

    from skilltune.progress import PlainReporter
    from tests.helpers import rule_task, write_suite

    tasks = [rule_task(f"t{i}", ["state-a-default"], noise=0.3) for i in range(5)]
    suite = write_suite(tmp_path / "suite", tasks, [t | {"id": f"v{i}"} for i, t in enumerate(tasks)])
    stream = io.StringIO()
    train(suite, MOCK_SKILL, tag="small", runs_dir=str(tmp_path), max_steps=2, epoch_steps=5, seed=1,
          reporter=PlainReporter(stream, quiet=True))  # fmt: skip
    assert (
        "warning: with 5 val tasks the gate cannot keep any edit at decision 2 of 2 "
        "(levels below 2^-5 = 0.0312): add val tasks (6 for every level of this run) or plan fewer steps"
    ) in stream.getvalue()
    stream = io.StringIO()
    train(MOCK_SUITE, MOCK_SKILL, tag="big", runs_dir=str(tmp_path), max_steps=2, seed=1,
          reporter=PlainReporter(stream))  # fmt: skip
    assert "gate: to be kept, an edit must improve at least 5 of the 48 val tasks" in stream.getvalue()
    assert (
        "suite size: an edit is kept only if it changes at least 5 val tasks at this run's first decision"
        in (stream.getvalue())
    )
    assert (
        "harm: an edit that breaks 10% (20%) of the task population finds none of those tasks among 48 val"
        in (stream.getvalue())
    )
    assert "cannot keep any edit" not in stream.getvalue()


def test_a_decision_that_cannot_accept_runs_no_rollouts(tmp_path: Path) -> None:
    """Three val tasks: the smallest sign-flip p is 1/8, above the level 0.05 of a one-decision run.
    The candidate reaches the gate and is rejected with the reason, and no val rollout is run."""
    from tests.helpers import rule_task, write_suite

    tasks = [rule_task(f"t{i}", ["state-a-default"]) for i in range(3)]
    suite = write_suite(tmp_path / "suite", tasks, [t | {"id": f"v{i}"} for i, t in enumerate(tasks)])
    result = train(
        suite, MOCK_SKILL, tag="tiny", runs_dir=str(tmp_path), max_steps=1, seed=1, reporter=quiet()
    )
    run = RunDir(Path(result.run_dir))
    verdict = Verdict.read(run.unit_dir("step", 1) / "gate.json")
    assert verdict.decision == "reject" and verdict.rollouts == 0 and verdict.rounds == []
    assert verdict.reason.startswith(
        "cannot accept: with 3 val task(s) the smallest sign-flip p is 2^-3 = 0.125"
    )
    assert verdict.alpha == 0.05
    step = run.unit_dir("step", 1)
    assert list(step.glob("rollouts/gate/**/record.json")) == []
    assert list(step.glob("rollouts/*/*/*/record.json")), "the step ran its train rollouts"


def _units(run: RunDir) -> list[tuple[str, int]]:
    """The run's units in run order (results.tsv's rows)."""
    rows = [line.split("\t") for line in run.results.read_text().splitlines()[1:]]
    return [("step", int(r[0])) if r[2] == "step" else ("epoch", int(r[1])) for r in rows]


def test_stop_file_ends_stopped_and_resume_continues(tmp_path: Path) -> None:
    from skilltune.progress import PlainReporter

    class StopAfterFirstUnit(PlainReporter):
        def line(self, text: str) -> None:
            if text.startswith("step 1 "):
                (tmp_path / "s" / "STOP").write_text("")

    result = train(
        MOCK_SUITE,
        MOCK_SKILL,
        tag="s",
        runs_dir=str(tmp_path),
        max_steps=4,
        seed=0,
        reporter=StopAfterFirstUnit(quiet=True),
    )
    assert result.state == "stopped"
    assert result.steps == 1
    (tmp_path / "s" / "STOP").unlink()
    resumed = resume(tmp_path / "s", **_quiet())
    assert resumed.state in ("success", "no-progress")
    assert resumed.steps == 4
    train(MOCK_SUITE, MOCK_SKILL, tag="u", runs_dir=str(tmp_path), max_steps=4, seed=0, **_quiet())
    assert (tmp_path / "s" / "results.tsv").read_text() == (tmp_path / "u" / "results.tsv").read_text()


def _pids(marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]


def _wait_for(condition: Any, seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail saying ``what`` did not happen within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.05)


def test_ctrl_c_twice_stops_at_once_and_kills_the_agents(tmp_path: Path) -> None:
    """The first Ctrl-C asks for a stop after the running rollouts (and says so); the second kills the
    agents (each would sleep 300 s), leaves no record of them, writes TERMINAL and exits 130.

    Each Ctrl-C waits for what it acts on: the first for both agents to be running (their processes,
    which carry a marker), the second for the first's message."""
    marker = f"skilltune-test-slow-{uuid.uuid4().hex}"
    agent = tmp_path / "slow-agent"
    agent.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && echo 1.0.0 && exit 0\n'
        'echo \'{"type":"system","subtype":"init","model":"m"}\'\n'
        f"exec {sys.executable} -c 'import time; time.sleep(300)' {marker}\n"
    )
    agent.chmod(0o755)
    args = ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--agent", "claude", "--agent-opt",
            f"executable={agent}", "--agent-opt", f"sandbox_ro={Path(sys.executable).parent},{Path(sys.executable).resolve().parents[1]}", "--proposer", "mock", "--tag", "c", "--runs-dir", str(tmp_path / "runs"),
            "--max-steps", "1", "--workers", "2"]  # fmt: skip
    proc = subprocess.Popen(_cli(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        _wait_for(lambda: len(_pids(marker)) == 2, 120, "both agents running")
        proc.send_signal(signal.SIGINT)
        _wait_for(lambda: "Ctrl-C again to stop at once" in "".join(lines), 60, "the first Ctrl-C's message")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)  # the agents would sleep 300 s: an exit now means they were not waited for
        reader.join(timeout=30)
        output = "".join(lines)
        assert proc.returncode == 130, output
        assert "skilltune resume" in output
        assert (tmp_path / "runs" / "c" / "TERMINAL").read_text().startswith("stopped: interrupted")
        assert not list((tmp_path / "runs" / "c").rglob("record.json"))
        _wait_for(lambda: not _pids(marker), 120, "the end of the agents after the second Ctrl-C")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _pids(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_every_way_of_resuming_refuses_a_changed_setting_and_takes_a_raised_budget(tmp_path: Path) -> None:
    """One rule, in resume: `train --resume`, `skilltune resume` and the Python API refuse a setting that
    would make the run another one (nothing written), and take what cannot change its results."""
    # --carry off: the run must exhaust its budget to be resumable, and the smallest budget train takes
    # (896: a step's screens of four proposals counted at most) pays for a whole 2-step run under the
    # default --carry screen (no gate in step 1)
    base = ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--tag", "r", "--runs-dir", str(tmp_path),
            "--agent-opt", "sleep_s=0", "--max-steps", "2", "--carry", "off", "-q"]  # fmt: skip
    first = subprocess.run(
        _cli(*base, "--budget-rollouts", "950"), capture_output=True, text=True, check=False
    )
    assert first.returncode == 0, first.stderr
    run = RunDir(tmp_path / "r")
    assert (run.terminal() or ("",))[0] == "exhausted"
    config_before = run.config.read_text()

    changed = subprocess.run(
        _cli(*base, "--batch", "4", "--resume"), capture_output=True, text=True, check=False
    )
    assert changed.returncode == 2, changed.stderr
    assert "--batch" in changed.stderr and "keeps the settings it started with" in changed.stderr
    option = subprocess.run(
        _cli("resume", str(run.root), "--agent-opt", "sleep_s=1"), capture_output=True, text=True, check=False
    )
    assert option.returncode == 2 and "--agent-opt" in option.stderr, option.stderr
    with pytest.raises(UsageError, match="--agent-opt"):
        resume(run.root, agent_options={"sleep_s": 1}, **_quiet())
    with pytest.raises(UsageError, match="--max-steps"):
        resume(run.root, max_steps=3, **_quiet())
    assert (run.terminal() or ("",))[0] == "exhausted"  # nothing was written
    assert run.config.read_text() == config_before

    # the same settings spelled differently, and a raised budget: the run goes on to its end
    same = subprocess.run(
        _cli(*base, "--agent-opt", "sleep_s=0.0", "--budget-rollouts", "5000", "--resume"),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert same.returncode == 0, same.stderr
    assert (run.terminal() or ("",))[0] in ("success", "no-progress")
    assert json.loads(run.config.read_text())["budget_rollouts"] == 5000


def test_budgets_refuse_too_small_and_exhaust_then_resume_with_a_raise(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot pay for the seed's val pass and one full step"):
        train(MOCK_SUITE, MOCK_SKILL, tag="tiny", runs_dir=str(tmp_path), budget_rollouts=10, **_quiet())
    assert not (tmp_path / "tiny").exists()
    result = train(
        MOCK_SUITE,
        MOCK_SKILL,
        tag="b",
        runs_dir=str(tmp_path),
        max_steps=5,
        gate="strict",
        budget_rollouts=260,
        **_quiet(),
    )
    assert result.state == "exhausted"
    assert "rollout budget" in result.reason
    spent = len(list((tmp_path / "b").rglob("record.json")))
    assert spent <= 260
    more = resume(tmp_path / "b", budget_rollouts=1000, **_quiet())
    assert more.state in ("success", "no-progress")
    assert json.loads((tmp_path / "b" / "config.json").read_text())["budget_rollouts"] == 1000


def test_resume_and_train_refusals(tmp_path: Path) -> None:
    train(MOCK_SUITE, MOCK_SKILL, tag="done", runs_dir=str(tmp_path), max_steps=1, **_quiet())
    with pytest.raises(UsageError, match="already ended"):
        resume(tmp_path / "done")
    with pytest.raises(UsageError, match="skilltune resume"):
        train(MOCK_SUITE, MOCK_SKILL, tag="done", runs_dir=str(tmp_path), max_steps=1, **_quiet())
    with pytest.raises(UsageError, match=r"no config\.json"):
        resume(tmp_path / "nothing-here")
    forced = train(
        MOCK_SUITE, MOCK_SKILL, tag="done", runs_dir=str(tmp_path), max_steps=2, force=True, **_quiet()
    )
    assert forced.steps == 2
    with pytest.raises(UsageError, match="max_steps"):
        train(MOCK_SUITE, MOCK_SKILL, tag="bad", runs_dir=str(tmp_path), max_steps=0, **_quiet())
    with pytest.raises(UsageError, match="unknown gate"):
        train(MOCK_SUITE, MOCK_SKILL, tag="bad", runs_dir=str(tmp_path), gate="nope", **_quiet())
    assert not (tmp_path / "bad").exists()


def test_a_suite_changed_under_the_run_blocks_it(tmp_path: Path) -> None:
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(MOCK_SUITE, suite)
    from skilltune.progress import PlainReporter

    class EditSuite(PlainReporter):
        def line(self, text: str) -> None:
            if text.startswith("step 1 "):
                with (suite / "train.jsonl").open("a") as f:
                    f.write(
                        json.dumps(
                            {
                                "id": "train-new",
                                "prompt": "p",
                                "requires": [],
                                "scoring": {"required": ["RESULT: solved"]},
                            }
                        )
                        + "\n"
                    )

    result = train(
        suite, MOCK_SKILL, tag="c", runs_dir=str(tmp_path), max_steps=3, reporter=EditSuite(quiet=True)
    )
    assert result.state == "blocked"
    assert "changed under the run" in result.reason


def test_rewrite_mode_and_evidence_from(tmp_path: Path) -> None:
    patch = train(
        MOCK_SUITE, MOCK_SKILL, tag="arm-a", runs_dir=str(tmp_path), max_steps=3, seed=2, **_quiet()
    )
    rewrite = train(
        MOCK_SUITE, MOCK_SKILL, tag="arm-b", runs_dir=str(tmp_path), max_steps=3, seed=2, mode="rewrite",
        evidence_from=str(tmp_path / "arm-a"), **_quiet(),
    )  # fmt: skip
    assert patch.state == "success" and rewrite.state in ("success", "no-progress")
    allocation = (tmp_path / "arm-b" / "allocation.md").read_text()
    assert "author" in allocation and "red-team reviewer" in allocation and "separate calls" in allocation
    calls = json.loads((tmp_path / "arm-b" / "steps" / "step_0001" / "reflections.json").read_text())["calls"]
    assert [c["role"] for c in calls] == ["failure analyst", "author", "red-team reviewer"]
    # arm B read arm A's recorded train rollouts and ran none of its own
    assert not list((tmp_path / "arm-b" / "steps").glob("step_*/rollouts/train"))
    a_ids = sorted(
        p.parent.name
        for p in (tmp_path / "arm-a" / "steps" / "step_0001").glob("rollouts/train/*/*/record.json")
    )
    assert a_ids and all(
        i.split("_r")[0] in (tmp_path / "arm-b" / "steps" / "step_0001" / "reflections.json").read_text()
        for i in a_ids
    )


def test_null_suite_with_strict_gate_accepts_noise(tmp_path: Path) -> None:
    """Documents the weakness the verdicts issue fixes: strict accepts pure noise."""
    result = train(
        NULL_SUITE,
        REPO / "examples" / "null-demo" / "skill",
        tag="n",
        runs_dir=str(tmp_path),
        max_steps=4,
        seed=0,
        patience=10,
        **_quiet(),
    )
    assert result.steps == 4


def test_cli_train_with_config_file_and_flags(tmp_path: Path) -> None:
    config = tmp_path / "train.toml"
    config.write_text(
        "max-steps = 2\nseed = 5\nbatch = 4\n[agent_options]\ncrn = true\n[proposer_options]\np_right = 1.0\n"
    )
    result = runner.invoke(
        app,
        [
            "train",
            str(MOCK_SUITE),
            "--skill",
            str(MOCK_SKILL),
            "--tag",
            "cfg",
            "--runs-dir",
            str(tmp_path),
            "--config",
            str(config),
            "--seed",
            "6",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "cfg" / "config.json").read_text())
    assert stored["max_steps"] == 2 and stored["batch"] == 4 and stored["seed"] == 6
    assert stored["agent_options"] == {"crn": True} and stored["proposer_options"] == {"p_right": 1.0}
    assert "results.tsv" in result.output
    for name, text, named in (
        ("bad", "max_steps = [\n", "not valid TOML"),
        ("unknown", "colour = 'blue'\n", "colour"),
        ("value", "max_steps = 2\n\nreps = 'many'\n[agent_options]\ncrn = true\n", "value.toml:3: 'reps'"),
    ):
        bad = tmp_path / f"{name}.toml"
        bad.write_text(text)
        args = [
            "train",
            str(MOCK_SUITE),
            "--skill",
            str(MOCK_SKILL),
            "--tag",
            "x",
            "--runs-dir",
            str(tmp_path),
        ]
        refused = runner.invoke(app, [*args, "--config", str(bad)])
        assert refused.exit_code == 2 and named in refused.output, (name, refused.output)
    assert not (tmp_path / "x").exists()


def test_secrets_are_redacted_in_config_json(tmp_path: Path) -> None:
    from skilltune.store import REDACTED, redact

    assert redact({"api_key": "sk-1", "nested": {"auth_token": "t", "model": "m"}}) == {
        "api_key": REDACTED,
        "nested": {"auth_token": REDACTED, "model": "m"},
    }
    train(
        MOCK_SUITE,
        MOCK_SKILL,
        tag="r",
        runs_dir=str(tmp_path),
        max_steps=1,
        proposer_options={"roles": {"author": "x"}},
        **_quiet(),
    )
    stored = json.loads((tmp_path / "r" / "config.json").read_text())
    assert stored["proposer_options"] == {"roles": {"author": "x"}}  # "author" is no auth secret
    assert REDACTED not in json.dumps(stored)  # nothing redacted: resume needs nothing back


def test_resume_rebuilds_results_and_meta_from_unit_records(tmp_path: Path) -> None:
    """A resumed run rebuilds results.tsv and META.md from step.json files, and step 2's proposer sees step 1
    (one ask a step: its prompt of the whole batch holds the memory; focused asks leave it out)."""
    run = stopped_run(tmp_path, "s", max_steps=3, proposals=1)
    run.results.write_text(run.results.read_text().splitlines()[0] + "\n")
    run.meta.unlink()
    run.stop_file.unlink()
    resumed = resume(run.root, reporter=quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    reference = train(
        MOCK_SUITE, MOCK_SKILL, tag="ref", runs_dir=str(tmp_path), max_steps=3, proposals=1, reporter=quiet(),
        **FAST,
    )  # fmt: skip
    ref = RunDir(Path(reference.run_dir))
    assert run.results.read_text() == ref.results.read_text()
    assert run.meta.read_text() == ref.meta.read_text()
    assert "## Epoch 1" in run.meta.read_text()
    prompt = read_json(run.unit_dir("step", 2) / "reflections.json")["calls"][0]["prompt"]
    assert "## Epoch 1" in prompt and "step 1" in prompt


def test_a_contaminated_gate_verdict_is_not_memoised(tmp_path: Path) -> None:
    """A gate that saw infra errors blocks the run without writing gate.json; resume decides afresh."""
    flag = tmp_path / "gate-down"
    flag.write_text("")

    class GateDownAgent(MockAgent):
        name: ClassVar[str] = "gate-down-test"

        def run(self, request: AgentRequest) -> AgentResult:
            if "/rollouts/gate/" in request.log_dir.as_posix() and flag.exists():
                return AgentResult(status="infra_error", reason="test: gate backend down")
            return super().run(request)

    AGENTS.register(GateDownAgent.name, GateDownAgent)
    try:
        blocked = train(
            MOCK_SUITE,
            MOCK_SKILL,
            tag="g",
            runs_dir=str(tmp_path / "runs"),
            max_steps=1,
            agent=GateDownAgent.name,
            retry=NO_RETRY,
            reporter=quiet(),
            **FAST,
        )
        run = RunDir(Path(blocked.run_dir))
        assert blocked.state == "blocked", blocked.reason
        assert not (run.unit_dir("step", 1) / "gate.json").exists()
        flag.unlink()
        done = resume(run.root, retry=NO_RETRY, reporter=quiet())
    finally:
        AGENTS.unregister(GateDownAgent.name)
    assert done.state in ("success", "no-progress"), done.reason
    gate = read_json(run.unit_dir("step", 1) / "gate.json")
    assert gate["decision"] in ("accept", "reject")


def test_evidence_from_a_run_of_another_suite_is_refused(tmp_path: Path) -> None:
    """--evidence-from a run of a different suite raises UsageError and creates nothing for the new tag."""
    other = tmp_path / "other-suite"
    shutil.copytree(MOCK_SUITE, other)
    lines = (other / "train.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["prompt"] += " (changed)"
    (other / "train.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    runs = tmp_path / "runs"
    train(other, MOCK_SKILL, tag="a", runs_dir=str(runs), max_steps=1, reporter=quiet(), **FAST)
    before = tree(runs)
    with pytest.raises(UsageError, match="different suite"):
        train(
            MOCK_SUITE,
            MOCK_SKILL,
            tag="b",
            runs_dir=str(runs),
            max_steps=1,
            evidence_from=str(runs / "a"),
            reporter=quiet(),
            **FAST,
        )
    assert tree(runs) == before
    assert not (runs / "b").exists() and not (runs / ".b.lock").exists()


def test_resume_clears_the_stop_file_of_the_previous_stop(tmp_path: Path) -> None:
    """After a STOP-file stop, resume (STOP left in place) runs to the end and removes STOP."""
    run = stopped_run(tmp_path, "s", max_steps=2)
    assert run.stop_file.exists()
    resumed = resume(run.root, reporter=quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    assert resumed.steps == 2
    assert not run.stop_file.exists()


def test_config_stores_absolute_paths_and_resume_works_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative suite, skill and runs_dir are stored absolute; resume works from another working directory."""
    shutil.copytree(MOCK_SUITE, tmp_path / "suite")
    shutil.copytree(MOCK_SKILL, tmp_path / "skill")
    monkeypatch.chdir(tmp_path)
    run = stopped_run(Path("runs"), "rel", max_steps=2, suite=Path("suite"), skill=Path("skill"))
    stored = read_json(tmp_path / "runs" / "rel" / "config.json")
    assert stored["suite"] == str((tmp_path / "suite").resolve())
    assert stored["skill"] == str((tmp_path / "skill").resolve())
    assert stored["runs_dir"] == str((tmp_path / "runs").resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resumed = resume(tmp_path / run.root, reporter=quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    assert resumed.steps == 2
    assert not (elsewhere / "runs").exists()


def test_a_seed_with_an_old_lint_error_can_still_improve(tmp_path: Path) -> None:
    """Candidates of a seed that links to a missing file are not discarded for that pre-existing error."""
    skill = tmp_path / "skill"
    shutil.copytree(MOCK_SKILL, skill)
    with (skill / "SKILL.md").open("a") as handle:
        handle.write("\nSee [the checklist](missing-checklist.md) before publishing.\n")
    result = train(
        MOCK_SUITE, skill, tag="l", runs_dir=str(tmp_path / "runs"), max_steps=2, reporter=quiet(), **FAST
    )
    run = RunDir(Path(result.run_dir))
    steps = [read_json(run.unit_dir("step", n) / "step.json") for n in (1, 2)]
    assert any(s["decision"] != "lint" for s in steps), steps
    assert not [s for s in steps if "missing-checklist" in s["reason"]], steps
