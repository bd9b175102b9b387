"""One training run for several agents (issue 22, items 1-2), on examples/mock-demo with three mock
agents: ``follows`` (the plain mock) and ``crn`` (common random numbers) follow the rules the demo's
seed lacks; ``harmed`` does not follow ``link-evidence`` and fails every task once the skill says
how long an incident ran (``harmed_by``), which the mock proposer's detection-gap line does. Step 1's
edit so helps two agents and hurts one: ``--agents-gate no-worse`` (the default) does not keep it,
``mean`` does (the pooled mean is positive). Also: per-agent figures in gate.json and results.tsv,
each agent's rollouts in their own folders and the budget counting them all, the proposer told which
agent ran each trajectory, a stopped run resumed to the same end, and a one-agent run as before."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.progress import PlainReporter, RunProgress
from skilltune.propose.prompts import render_trajectories
from skilltune.propose.reflect import build_packet
from skilltune.rundir import RESULTS_HEADER, RunDir
from skilltune.runfiles import AgentSpec, RolloutRecord, Transfer, UnitRecord, Verdict
from skilltune.suite import load_suite
from skilltune.training import resume, train
from skilltune.training.budget import spent
from tests.helpers import FAST, MOCK_SKILL, MOCK_SUITE, quiet

HARM = "how long it ran"  # a phrase of the mock proposer's detection-gap line
AGENT_VALUES = ["follows=mock", "crn=mock:crn=true", f"harmed=mock:ignores=link-evidence,harmed_by={HARM}"]
AGENTS = [
    AgentSpec(label="follows", agent="mock"),
    AgentSpec(label="crn", agent="mock", options={"crn": True}),
    AgentSpec(label="harmed", agent="mock", options={"ignores": ["link-evidence"], "harmed_by": [HARM]}),
]
LABELS = [a.label for a in AGENTS]
# One ask a step: its candidate holds the line that hurts one agent (several asks screen each rule on
# every agent's rollouts, and the rule that breaks the harmed agent's tasks would not reach the gate).
SETTINGS: dict[str, Any] = {
    "proposer": "mock", "max_steps": 1, "seed": 1, "metric": "hard", "test_reps": 1, "proposals": 1,
}  # fmt: skip


def _train(runs: Path, tag: str, reporter: PlainReporter | None = None, **settings: Any) -> Any:
    agents = [a.model_dump(mode="json") for a in AGENTS]
    return train(
        MOCK_SUITE, MOCK_SKILL, tag=tag, runs_dir=str(runs), agents=agents, reporter=reporter or quiet(),
        **SETTINGS | settings,
    )  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The no-worse run (the API, the default gate) and the mean run (the CLI)."""
    root = tmp_path_factory.mktemp("multitrain")
    _train(root, "no-worse")
    agents = [arg for value in AGENT_VALUES for arg in ("--agent", value)]
    result = CliRunner().invoke(
        app,
        ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--proposer", "mock", "--tag", "mean",
         "--runs-dir", str(root), "--max-steps", "1", "--seed", "1", "--metric", "hard", "--test-reps", "1",
         "--agents-gate", "mean", "--proposals", "1", "--quiet", *agents],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # each agent's figures printed, from the incumbent to the candidate: harmed falls to 0
    assert re.search(r"harmed \d\.\d{3} -> 0\.000", result.output) and "HURT" in result.output
    return root


def _gate(run: RunDir) -> Verdict:
    return Verdict.read(run.unit_dir("step", 1) / "gate.json")


def _evidence(verdict: Verdict) -> dict[str, Any]:
    return {a.label: a for a in verdict.agents}


def test_no_worse_does_not_keep_an_edit_that_hurts_one_agent(runs: Path) -> None:
    run = RunDir(runs / "no-worse")
    verdict = _gate(run)
    assert verdict.decision == "reject" and verdict.agents_gate == "no-worse"
    by = _evidence(verdict)
    assert list(by) == LABELS
    for helped in ("follows", "crn"):
        assert by[helped].val_candidate > by[helped].val_incumbent and not by[helped].hurt
    assert by["harmed"].hurt and by["harmed"].val_candidate < by["harmed"].val_incumbent
    assert "harmed" in verdict.reason
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").verdict == "discard"
    assert run.terminal() is not None and run.terminal().state == "no-progress"  # type: ignore[union-attr]


def test_mean_keeps_it_when_the_pooled_mean_is_positive(runs: Path) -> None:
    run = RunDir(runs / "mean")
    verdict = _gate(run)
    assert verdict.accept and verdict.agents_gate == "mean"
    assert verdict.val_candidate is not None and verdict.val_incumbent is not None
    assert verdict.val_candidate > verdict.val_incumbent  # the pooled mean over (agent, task) units
    by = _evidence(verdict)
    assert by["harmed"].hurt and not by["follows"].hurt  # the same evidence as under no-worse
    assert {p.task.split("/")[0] for r in verdict.rounds for p in r.pairs} == set(LABELS)
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").verdict == "keep"
    # the held-out test: the pooled comparison over (agent, task) units, and the skill x agent table
    comparison = json.loads(run.comparison.read_text())
    assert {task.split("/")[0] for task in comparison["arms"]["S0"]["per_task"]} == set(LABELS)
    transfer = Transfer.read(run.final / "transfer.json")
    assert [c.label for c in transfer.agents] == LABELS
    assert transfer.agent("follows").pairs[0].diff > 0 > transfer.agent("harmed").pairs[0].diff
    assert all((run.final / label / "comparison.json").is_file() for label in LABELS)


def test_results_tsv_shows_each_agents_val_figures_and_its_veto(runs: Path) -> None:
    for tag in ("no-worse", "mean"):
        lines = (runs / tag / "results.tsv").read_text().splitlines()
        header, row = lines[0].split("\t"), lines[1].split("\t")
        assert header == [*RESULTS_HEADER, "agents"]
        cell = row[-1]
        assert [part.split()[0] for part in cell.split("; ")] == LABELS
        assert "harmed " in cell and " HURT p=" in cell.split("; ")[2]
        assert "HURT" not in cell.split("; ")[0]


def _records(run: RunDir) -> list[tuple[Path, RolloutRecord]]:
    return [(p, RolloutRecord.read(p)) for p in sorted(run.root.rglob("record.json"))]


def test_every_agent_runs_every_stage_in_folders_of_its_own_and_the_budget_counts_them_all(
    runs: Path,
) -> None:
    run = RunDir(runs / "mean")
    records = _records(run)
    for path, record in records:
        assert record.target in LABELS and path.parent.parent.name.endswith(f"@{record.target}")
    phases = {(r.target, r.phase) for _, r in records}
    assert phases == {
        (label, phase) for label in LABELS for phase in ("eval", "train", "screen", "gate", "test")
    }
    per_agent = [sum(1 for _, r in records if r.target == label) for label in LABELS]
    assert len(set(per_agent)) == 1  # the same jobs for each agent
    assert spent(run).rollouts == len(records) == sum(per_agent)
    step = UnitRecord.read(run.unit_dir("step", 1) / "step.json")
    assert step.rollouts == sum(1 for p, _ in records if "step_0001" in p.parts)


def test_a_budget_too_small_for_every_agents_first_step_is_refused(tmp_path: Path) -> None:
    suite = load_suite(MOCK_SUITE)
    one_agent_first = len(suite.tasks("val")) + 8 * 2 + 2 * len(suite.tasks("val")) * 8
    with pytest.raises(UsageError, match=r"cannot pay for .* each x3 agents") as caught:
        _train(tmp_path, "poor", budget_rollouts=one_agent_first)
    assert str(3 * one_agent_first) in str(caught.value)
    assert not (tmp_path / "poor").exists()


def test_the_proposer_is_told_which_agent_ran_each_trajectory(runs: Path) -> None:
    run = RunDir(runs / "no-worse")
    folders = sorted(run.unit_dir("step", 1).glob("rollouts/train/*/*"))
    evidence = [(RolloutRecord.read(f / "record.json"), f) for f in folders]
    packet = build_packet(
        step=1, mode="patch", incumbent=_seed(), records=evidence, suite=load_suite(MOCK_SUITE), rejected=[],
        memory="", max_edits=4, seed=0,
    )  # fmt: skip
    trajectories = [*packet.failures, *packet.successes]
    assert {t.agent for t in trajectories} == set(LABELS)
    assert all(t.id.startswith(f"{t.agent}/{t.task_id}#r") for t in trajectories)
    rendered = render_trajectories(trajectories)
    assert all(f'agent="{label}"' in rendered for label in LABELS)
    reflections = json.loads((run.unit_dir("step", 1) / "reflections.json").read_text())
    cited = {s for edit in reflections["edits"] for s in edit["support"]}
    assert cited and all(c.split("/")[0] in LABELS for c in cited)  # the edits cite labelled trajectories


def _seed() -> Any:
    from skilltune.skill import load_skill

    return load_skill(MOCK_SKILL)


class StopMidGate(PlainReporter):
    """Writes the run's STOP file once the session ran ``after`` rollouts (in step 1's gate)."""

    def __init__(self, stop: Path, after: int) -> None:
        super().__init__(quiet=True)
        self.stop, self.after = stop, after

    def update(self, progress: RunProgress) -> None:
        if progress.session_rollouts >= self.after:
            self.stop.write_text("")


def test_a_run_stopped_in_its_gate_resumes_to_the_same_end_reusing_what_was_recorded(
    runs: Path, tmp_path: Path
) -> None:
    whole = RunDir(runs / "no-worse")
    # baseline 3x48, train and screen 3x8 each: 192 rollouts before step 1's gate
    stopped = _train(tmp_path, "no-worse", StopMidGate(tmp_path / "no-worse" / "STOP", 250))
    assert stopped.state == "stopped"
    run = RunDir(tmp_path / "no-worse")
    assert not (run.unit_dir("step", 1) / "gate.json").exists()
    before = len(_records(run))
    assert 250 <= before < len(_records(whole))
    result = resume(run.root, reporter=quiet())
    assert result.state == "no-progress"
    assert len(_records(run)) == len(_records(whole))  # nothing run twice
    assert _gate(run) == _gate(whole)
    assert (run.root / "results.tsv").read_text() == (whole.root / "results.tsv").read_text()


def test_one_agent_run_has_no_labels_anywhere(tmp_path: Path) -> None:
    result = train(
        MOCK_SUITE, MOCK_SKILL, tag="one", runs_dir=str(tmp_path), agent="mock", max_steps=1,
        reporter=quiet(), **FAST,
    )  # fmt: skip
    run = RunDir(Path(result.run_dir))
    config = json.loads(run.config.read_text())
    assert "agents" not in config and "agents_gate" not in config
    for path in run.root.rglob("record.json"):
        assert "target" not in json.loads(path.read_text()) and "@" not in str(path)
    assert (run.root / "results.tsv").read_text().splitlines()[0].split("\t") == list(RESULTS_HEADER)
    assert "agents" not in json.loads((run.unit_dir("step", 1) / "gate.json").read_text())
    assert not (run.final / "transfer.json").exists()


def test_several_agents_with_agent_opt_are_refused_on_the_command_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--tag", "x", "--runs-dir", str(tmp_path),
         "--agent", "a=mock", "--agent", "b=mock", "--agent-opt", "crn=true"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--agent-opt is ambiguous" in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []
