"""One training run for three real agent CLIs (issue 22, must-show 1): claude, codex and gemini,
each against a scripted fake model server of its own, an edit that helps two and hurts the third.

The skill is placed natively for each CLI (its own skill folder in the workspace). Each server's
scripted model loads it the CLI's own way (claude ``Skill``, codex reading its SKILL.md, gemini
``activate_skill``), then answers from the skill text the load brought and from which CLI it
serves (``Script``): the two *helped* ones fail every task without the rule (printing the
``SYMPTOM:`` line the mock proposer turns into that very rule) and solve it with the rule; the
*hurt* one solves every task without the rule and fails with it. Step 1's edit (the rule) so
moves val, per agent, 0 -> 1, 0 -> 1 and 1 -> 0: ``--agents-gate no-worse`` rejects it (the hurt
agent's regression test, p 0), ``mean`` keeps it (pooled 1/3 -> 2/3; the strict gate, as two val
tasks per agent are too few for the sequential one). ``max_steps`` 1 makes the step's candidate
gated whatever ``--carry`` says (a last step is never carried on ungated). The second run shares
the first's rollout cache: it runs the CLIs only for the held-out test (the no-worse run, keeping
nothing, ran none).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.report import render_report
from skilltune.rundir import RESULTS_HEADER, RunDir
from skilltune.runfiles import AgentEvidence, RolloutRecord, Transfer, UnitRecord, Verdict
from tests.conftest import require_cli
from tests.fakeserver import FakeModelServer, ModelRequest, Reply, ToolCall
from tests.fakeserver.skills import listed_description, strings
from tests.helpers import write_skill, write_suite
from tests.integration.test_trigger_clis import CLIS

SYMPTOM = "the ticket number is missing"
# The mock proposer's rule from that symptom (skilltune/propose/mock.py, a suite with no pool).
RULE = f"Check before you finish that this does not happen: {SYMPTOM}."
SOLVED = "RESULT: solved"
SKILL = "tickets"
# label -> the CLI (the backend), and whether the rule helps it
AGENTS = {"sonnet": "claude", "gpt": "codex", "flash": "gemini"}
HELPED = {"sonnet": True, "gpt": True, "flash": False}
LABELS = list(AGENTS)
HURT = "flash"


@dataclass
class Script:
    """The scripted model of one CLI's server. First turn: it loads the skill the CLI listed to it
    (the CLI's own way of loading one, ``load``); then it answers from the skill text the load
    brought (whether it holds the rule) and from whether the rule helps this CLI. ``seen``: (prompt,
    rule present) of each answer, so a test can tell the edit reached the model."""

    helped: bool
    load: Callable[[str], ToolCall]
    seen: list[tuple[str, bool]] = field(default_factory=list)

    def __call__(self, request: ModelRequest) -> Reply:
        text = "\n".join(strings(request.body))
        if request.tool_results == 0 and listed_description(text, SKILL) is not None:
            return Reply(tool_calls=[self.load(SKILL)])
        ruled = RULE in text
        prompt = next((p for p in PROMPTS if p in text), "?")
        self.seen.append((prompt, ruled))
        if ruled == self.helped:
            return Reply(text=f"Ticket closed.\n{SOLVED}")
        why = SYMPTOM if self.helped else "the new rule sent me the wrong way"
        return Reply(text=f"SYMPTOM: {why}\nRESULT: incomplete")


def ticket(task_id: str, number: int) -> dict[str, Any]:
    return {
        "id": task_id,
        "prompt": f"Close ticket T-{number} and report the outcome.",
        "scoring": {"mode": "exact", "expected": SOLVED},
    }


TRAIN = [ticket("t-close", 100)]
VAL = [ticket("v-close-a", 201), ticket("v-close-b", 202)]
TEST = [ticket("x-close", 301)]
PROMPTS = [t["prompt"] for t in [*TRAIN, *VAL, *TEST]]


@dataclass
class Runs:
    """The runs folder (runs ``no-worse`` and ``mean``), each label's script, what train printed per run."""

    root: Path
    scripts: dict[str, Script]
    outputs: dict[str, str]


def agent_values() -> list[str]:
    """The three --agent values: each CLI's model and no retries (tests/integration/test_trigger_clis.py),
    the skill placed natively (the default)."""
    values = []
    for label, cli in AGENTS.items():
        options = {**CLIS[cli].options, "wall_limit_s": "180"}
        values.append(f"{label}={cli}:" + ",".join(f"{k}={v}" for k, v in options.items()))
    return values


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The no-worse run, then the mean run (the CLI both times), the three servers up throughout."""
    for cli in AGENTS.values():
        require_cli(CLIS[cli].executable)
    root = tmp_path_factory.mktemp("multitrain-clis")
    suite = write_suite(root / "suite", TRAIN, VAL, TEST)
    skill = write_skill(root / "seed", "- Close the ticket the user names.", name=SKILL)
    scripts = {label: Script(HELPED[label], CLIS[cli].load) for label, cli in AGENTS.items()}
    outputs: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as env, ExitStack() as up:
        env.setenv("HOME", str(root / "home"))
        (root / "home").mkdir()
        for label, script in scripts.items():
            server = up.enter_context(FakeModelServer(script))
            target = CLIS[AGENTS[label]]
            for variable in target.unset:
                env.delenv(variable, raising=False)
            for variable, value in target.env(server.url).items():
                env.setenv(variable, value)
        for gate in ("no-worse", "mean"):
            args = [
                "train", str(suite), "--skill", str(skill), "--proposer", "mock", "--tag", gate,
                "--runs-dir", str(root / "runs"), "--max-steps", "1", "--seed", "1", "--metric", "hard",
                "--gate", "strict", "--reps", "1", "--test-reps", "1", "--workers", "3",
                "--cache", str(root / "cache"), "--agents-gate", gate, "--quiet",
                *(arg for value in agent_values() for arg in ("--agent", value)),
            ]  # fmt: skip
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, result.output
            outputs[gate] = result.output
    return Runs(root / "runs", scripts, outputs)


def _gate(run: RunDir) -> Verdict:
    return Verdict.read(run.unit_dir("step", 1) / "gate.json")


def _evidence(verdict: Verdict) -> dict[str, AgentEvidence]:
    return {a.label: a for a in verdict.agents}


def _records(run: RunDir) -> list[tuple[Path, RolloutRecord]]:
    return [(p, RolloutRecord.read(p)) for p in sorted(run.root.rglob("record.json"))]


def test_each_cli_ran_and_the_edit_reached_its_model(runs: Runs) -> None:
    candidate = (RunDir(runs.root / "mean").unit_dir("step", 1) / "candidate_skill.md").read_text()
    assert RULE in candidate  # the mock proposer's rule from the helped CLIs' symptom
    for label, script in runs.scripts.items():
        val = {(p, ruled) for p, ruled in script.seen if p in [t["prompt"] for t in VAL]}
        assert val == {(t["prompt"], ruled) for t in VAL for ruled in (False, True)}, (label, script.seen)


def test_no_worse_rejects_the_edit_that_hurts_one_cli(runs: Runs) -> None:
    run = RunDir(runs.root / "no-worse")
    verdict = _gate(run)
    assert verdict.decision == "reject" and verdict.agents_gate == "no-worse", verdict.reason
    by = _evidence(verdict)
    assert list(by) == LABELS
    for label in LABELS:
        before, after = (1.0, 0.0) if label == HURT else (0.0, 1.0)
        assert (by[label].val_incumbent, by[label].val_candidate) == (before, after), by[label]
        assert by[label].hurt is (label == HURT) and by[label].n_tasks == len(VAL)
    assert by[HURT].p_value == 0.0 and by[HURT].mean_diff == -1.0
    assert f"hurt: {HURT} " in verdict.reason
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").verdict == "discard"
    assert "HURT" in runs.outputs["no-worse"]


def test_mean_keeps_it_on_the_pooled_gain(runs: Runs) -> None:
    run = RunDir(runs.root / "mean")
    verdict = _gate(run)
    assert verdict.accept and verdict.agents_gate == "mean", verdict.reason
    assert verdict.val_incumbent == pytest.approx(1 / 3) and verdict.val_candidate == pytest.approx(2 / 3)
    assert [r.n_pairs for r in verdict.rounds] == [len(LABELS) * len(VAL)]  # (agent, task) units
    assert _evidence(verdict)[HURT].hurt  # the same evidence; mean does not veto on it
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").verdict == "keep"
    assert RULE in (run.root / "best_skill.md").read_text()
    # the held-out test's skill x agent table: the kept edit's gain for two CLIs, its loss for the third
    transfer = Transfer.read(run.final / "transfer.json")
    assert [(c.label, c.agent) for c in transfer.agents] == list(AGENTS.items())
    assert [transfer.agent(label).pairs[0].diff for label in LABELS] == [1.0, 1.0, -1.0]


def test_results_tsv_gate_and_step_json_hold_each_clis_figures(runs: Runs) -> None:
    for tag, kept in (("no-worse", "discard"), ("mean", "keep")):
        lines = (runs.root / tag / "results.tsv").read_text().splitlines()
        header, row = lines[0].split("\t"), lines[1].split("\t")
        assert header == [*RESULTS_HEADER, "agents"]
        assert kept in row
        cells = row[-1].split("; ")
        assert cells == ["sonnet 0.000 -> 1.000", "gpt 0.000 -> 1.000", "flash 1.000 -> 0.000 HURT p=0"], row[
            -1
        ]
        step = RunDir(runs.root / tag).unit_dir("step", 1)
        raw = json.loads((step / "gate.json").read_text())
        assert [a["label"] for a in raw["agents"]] == LABELS
        assert [a["hurt"] for a in raw["agents"]] == [label == HURT for label in LABELS]
        assert UnitRecord.read(step / "step.json").agents == Verdict.read(step / "gate.json").agents


def test_each_clis_rollouts_lie_in_their_own_folders_and_name_it(runs: Runs) -> None:
    for tag in ("no-worse", "mean"):
        records = _records(RunDir(runs.root / tag))
        assert records
        for path, record in records:
            assert record.target in AGENTS and path.parent.parent.name.endswith(f"@{record.target}")
            assert record.agent == AGENTS[record.target], (path, record.agent)
            assert record.status == "ok", (path, record.reason)
            assert record.tokens_in and record.tokens_out  # what each CLI reported of its model calls
            assert record.skill_loaded is True  # read from the CLI's own events: the native load
        phases = {(r.target, r.phase) for _, r in records}
        # nothing kept (no-worse): no held-out test
        ran = {"eval", "train", "screen", "gate"} | ({"test"} if tag == "mean" else set())
        assert phases == {(label, phase) for label in LABELS for phase in ran}
        per_agent = [sum(1 for _, r in records if r.target == label) for label in LABELS]
        assert len(set(per_agent)) == 1, per_agent  # the same jobs for each CLI
    # the mean run took what the no-worse run had run from the shared cache, and ran its new test
    mean = _records(RunDir(runs.root / "mean"))
    assert any(r.cached_from for _, r in mean) and any(not r.cached_from for _, r in mean)
    assert {r.phase for _, r in mean if not r.cached_from} == {"test"}


def test_the_report_shows_each_clis_evidence_and_the_held_out_test_per_cli(runs: Runs) -> None:
    """The report of each run: the agents in its header, the step's "Per agent" table with each CLI's
    val figures and the veto (no-worse) or the hurt flag that did not veto (mean), and the kept
    run's held-out table per CLI."""
    for tag, badge in (("no-worse", "hurt: veto"), ("mean", "hurt")):
        html = render_report(runs.root / tag)
        assert f"agents <b>{', '.join(LABELS)}</b>" in html
        start = html.index("<h3>Per agent</h3>")
        table = html[start : html.index("</table>", start)]
        rows = re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", table, re.S)
        assert [label for label, _ in rows] == LABELS
        for label, row in rows:
            before, after = ("1.000", "0.000") if label == HURT else ("0.000", "1.000")
            assert before in row and after in row, (tag, label, row)
        badges = re.findall(r'class="badge ([\w-]+)">([^<]*)<', table)
        assert badges == [("not-hurt", "not hurt"), ("not-hurt", "not hurt"), ("hurt", badge)]
    held_out = render_report(runs.root / "mean")
    section = held_out[held_out.index('id="transfer-1"') : held_out.index('id="val"')]
    assert "The held-out test per agent" in section and "final/transfer.json" in section
    heads = re.findall(r'<th class="n">(\w+) <span class="muted">\((\w+)\)</span></th>', section)
    assert heads == list(AGENTS.items())  # each label with its CLI
    diffs = re.findall(r'<td class="n">([+-]\d\.\d{3})', section)  # one test task each: no verdict
    assert diffs == ["+1.000", "+1.000", "-1.000"], diffs
