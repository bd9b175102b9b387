"""A training run for several agents killed with SIGKILL in the middle of its gate, then resumed,
ends where an uninterrupted run ends, reusing the rollouts it had recorded (issue 22).

The run is tests/test_multitrain.py's three mock agents under ``--agents-gate mean`` (step 1 is
kept, so the held-out test per agent runs too). No timing assumption decides the outcome: the test
waits for files (generous deadlines), freezes the process group with SIGSTOP as soon as a gate
rollout of step 1 is recorded, checks there that the gate is not done, then kills it. Each rollout
of the mock sleeps SLEEP_S, so the gate lasts at least gate rollouts * SLEEP_S / WORKERS seconds
(seconds, on any machine): the poll, every 10 ms, sees its first record long before its last."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.rundir import RunDir
from skilltune.runfiles import Transfer, UnitRecord, Verdict
from skilltune.skill import load_skill
from tests.helpers import MOCK_SKILL, MOCK_SUITE, REPO
from tests.test_multitrain import AGENT_VALUES

SLEEP_S = 0.02
WORKERS = 2


def _args(tag: str, runs: Path) -> list[str]:
    agents = [
        arg
        for value in AGENT_VALUES
        for arg in ("--agent", f"{value}{',' if ':' in value else ':'}sleep_s={SLEEP_S}")
    ]
    return [
        "train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--proposer", "mock", "--tag", tag,
        "--runs-dir", str(runs), "--max-steps", "1", "--seed", "1", "--metric", "hard", "--test-reps", "1",
        "--agents-gate", "mean", "--carry", "off", "--workers", str(WORKERS), "--quiet", *agents,
    ]  # fmt: skip


def _gate_records(run: RunDir) -> dict[Path, bytes]:
    folder = run.unit_dir("step", 1) / "rollouts" / "gate"
    return {p: p.read_bytes() for p in sorted(folder.glob("*/*/record.json"))}


def _records(run: RunDir) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run.root.rglob("record.json"))}


def _relative(run: RunDir, records: dict[Path, bytes]) -> set[Path]:
    return {p.relative_to(run.root) for p in records}


def test_sigkill_in_the_gate_of_several_agents_then_resume_ends_as_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    env = dict(os.environ, SKILLTUNE_WORKSPACES=str(tmp_path / "ws"))
    whole = CliRunner().invoke(
        app, _args("whole", tmp_path / "a"), env={"SKILLTUNE_WORKSPACES": str(tmp_path / "ws")}
    )
    assert whole.exit_code == 0, whole.output
    reference = RunDir(tmp_path / "a" / "whole")
    gate_total = len(_gate_records(reference))
    assert gate_total > 100  # every agent's gate rollouts: the gate lasts seconds at SLEEP_S each

    run = RunDir(tmp_path / "b" / "whole")
    log = tmp_path / "session.log"
    deadline = time.monotonic() + 600
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skilltune.cli", *_args("whole", tmp_path / "b")],
            env=env, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        while not _gate_records(run):
            assert proc.poll() is None, (
                f"the run ended (rc {proc.returncode}) before its gate:\n{log.read_text()}"
            )
            assert time.monotonic() < deadline, "step 1's gate recorded no rollout before the deadline"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGSTOP)  # frozen: what is on disk now is what the kill interrupts
        recorded = _gate_records(run)
        assert 0 < len(recorded) < gate_total, (len(recorded), gate_total)
        assert not (run.unit_dir("step", 1) / "gate.json").exists()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert run.terminal() is None and not run.comparison.exists()  # the run had not finished
    before = _records(run)

    resumed = CliRunner().invoke(
        app, ["resume", str(run.root), "--quiet"], env={"SKILLTUNE_WORKSPACES": str(tmp_path / "ws")}
    )
    assert resumed.exit_code == 0, resumed.output

    after = _records(run)
    assert _relative(run, after) == _relative(reference, _records(reference))  # nothing run twice or missing
    assert all(after[p] == content for p, content in before.items())  # the recorded rollouts were reused
    assert run.terminal() == reference.terminal()
    assert run.results.read_text() == reference.results.read_text()  # decisions and per-agent column
    step, ref_step = (RunDir(r.root).unit_dir("step", 1) for r in (run, reference))
    assert Verdict.read(step / "gate.json") == Verdict.read(ref_step / "gate.json")
    assert UnitRecord.read(step / "step.json").agents == UnitRecord.read(ref_step / "step.json").agents
    assert load_skill(run.best_dir).hash == load_skill(reference.best_dir).hash
    ours, theirs = (json.loads(r.comparison.read_text()) for r in (run, reference))
    assert ours["arms"] == theirs["arms"] and ours["pairs"] == theirs["pairs"]
    table = Transfer.read(run.final / "transfer.json")
    assert [(c.label, c.scores, c.pairs) for c in table.agents] == [
        (c.label, c.scores, c.pairs) for c in Transfer.read(reference.final / "transfer.json").agents
    ]
