"""Several agents in one comparison (issue 22, the transfer table): the --agent syntax, each agent's
folder, transfer.json, the printed table, a single --agent unchanged, and the mock-demo example
where the good skill's gain carries to one mock agent and not to another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.cli.app import parse_agent_spec, parse_agent_specs
from skilltune.errors import UsageError
from skilltune.measure.compare import compare
from skilltune.measure.transfer import TRANSFER_FILE, compare_agents
from skilltune.runfiles import SCHEMA_VERSION, AgentSpec, Comparison, RolloutRecord, Transfer
from skilltune.skill import Candidate, load_skill
from tests.helpers import GOOD_SKILL, MOCK_SKILL, MOCK_SUITE

runner = CliRunner()
# the three rules the demo's seed lacks and its good skill states (examples/mock-demo/README.md)
PLANTED = "quantify-impact,detection-gap,owned-action-items"
N_TEST = 14


def _arms() -> dict[str, Candidate | None]:
    return {"seed": load_skill(MOCK_SKILL), "good": load_skill(GOOD_SKILL)}


# --- the --agent syntax --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "label", "agent", "options"),
    [
        ("claude", "claude", "claude", {}),
        ("codex:model=gpt-5.5", "codex", "codex", {"model": "gpt-5.5"}),
        ("fast=mock:crn=true,sleep_s=0.5", "fast", "mock", {"crn": True, "sleep_s": 0.5}),
        ("stubborn=mock:ignores=a,b", "stubborn", "mock", {"ignores": ["a", "b"]}),
        ('m=mock:ignores=["a","b"],crn=false', "m", "mock", {"ignores": ["a", "b"], "crn": False}),
        (
            "local=openai:base_url=http://127.0.0.1:8000/v1,model=qwen2.5-0.5b,api_key_env=LOCAL_KEY",
            "local",
            "openai",
            {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen2.5-0.5b", "api_key_env": "LOCAL_KEY"},
        ),
    ],
)
def test_an_agent_value_names_a_backend_and_its_options(
    value: str, label: str, agent: str, options: dict[str, Any]
) -> None:
    assert parse_agent_spec(value) == AgentSpec(label=label, agent=agent, options=options)


def test_agent_opt_joins_the_only_agent_and_defaults_to_the_mock() -> None:
    assert parse_agent_specs(None, None) == [AgentSpec(label="mock", agent="mock")]
    merged = parse_agent_specs(["mock:crn=true"], ["sleep_s=0"])
    assert merged == [AgentSpec(label="mock", agent="mock", options={"crn": True, "sleep_s": 0})]


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        (["--agent", "mock", "--agent", "mock:crn=true"], "2 agents are named 'mock'"),
        (["--agent", "a=mock", "--agent", "b=mock", "--agent-opt", "crn=true"], "--agent-opt is ambiguous"),
        (["--agent", "mock:crn=true", "--agent-opt", "crn=false"], "given both in --agent and in --agent-opt"),
        (["--agent", "fast=", "--agent", "mock"], "write [NAME=]BACKEND"),
        (["--agent", "codex=model=gpt-5.5", "--agent", "mock"], "options follow a colon: --agent codex:model"),
        (["--agent", "a/b=mock", "--agent", "mock"], "a name is letters, digits"),
        (["--agent", "mock:crn", "--agent", "b=mock"], "option 'crn' is not key=value"),
        (["--agent", "mock:crn=true,crn=false", "--agent", "b=mock"], "option 'crn' is given twice"),
        (["--agent", "nosuch", "--agent", "mock"], "unknown agent 'nosuch' (known: "),
        (["--agent", "mock", "--agent", "b=mock:ignore=x"], "ignore"),
    ],
    ids=["same-name", "agent-opt", "opt-twice", "no-backend", "no-colon", "bad-name", "no-value",
         "option-twice", "unknown-backend", "unknown-option"],
)  # fmt: skip
def test_bad_agents_exit_2_with_the_fix_and_write_nothing(
    tmp_path: Path, agents: list[str], message: str
) -> None:
    out = tmp_path / "DIR"
    args = ["compare", str(MOCK_SUITE), f"seed={MOCK_SKILL}", f"good={GOOD_SKILL}", *agents]
    result = runner.invoke(app, [*args, "--out", str(out), "--quiet"])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_run_directory_as_an_arm_is_refused_with_its_skills_paths(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "demo"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "seed.json").write_text("{}")
    out = tmp_path / "DIR"
    result = runner.invoke(
        app, ["compare", str(MOCK_SUITE), f"best={run}", f"good={GOOD_SKILL}", "--out", str(out), "-q"]
    )
    assert result.exit_code == 2, result.output
    text = "".join(result.output.split())
    assert f"best={run / 'best_skill'}" in text and f"best={run / 'seed'}" in text
    assert not out.exists()


# --- the transfer table --------------------------------------------------------------------------

AGENTS = [
    AgentSpec(label="follows", agent="mock"),
    AgentSpec(label="stubborn", agent="mock", options={"ignores": PLANTED.split(",")}),
    AgentSpec(label="harmed", agent="mock", options={"harmed_by": ["quantify customer impact"]}),
]


@pytest.fixture(scope="module")
def transfer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Transfer, Path]:
    out = tmp_path_factory.mktemp("transfer") / "out"
    return compare_agents(MOCK_SUITE, _arms(), AGENTS, reps=2, seed=3, metric="hard", out=out), out


def test_each_agent_has_its_folder_and_comparison(transfer: tuple[Transfer, Path]) -> None:
    table, out = transfer
    assert sorted(p.name for p in out.iterdir()) == ["follows", "harmed", "stubborn", TRANSFER_FILE]
    for column in table.agents:
        comparison = Comparison.read(out / column.comparison)
        assert comparison.agent == "mock" and list(comparison.arms) == ["seed", "good"]
        assert column.scores == {name: arm.hard_acc for name, arm in comparison.arms.items()}
        assert column.pairs == comparison.pairs
        records = list((out / column.label / "rollouts" / "test").glob("*/*/record.json"))
        assert len(records) == column.n_rollouts == 2 * 2 * N_TEST


def test_transfer_json_holds_what_each_single_agent_comparison_computes(
    transfer: tuple[Transfer, Path], tmp_path: Path
) -> None:
    table, out = transfer
    raw = json.loads((out / TRANSFER_FILE).read_text())
    assert raw["schema_version"] == SCHEMA_VERSION
    assert Transfer.read(out / TRANSFER_FILE) == table
    assert (table.split, table.reps, table.metric) == ("test", 2, "hard")
    assert table.arms == {"seed": load_skill(MOCK_SKILL).hash, "good": load_skill(GOOD_SKILL).hash}
    assert [c.label for c in table.agents] == ["follows", "stubborn", "harmed"]
    assert table.agent("stubborn").options == {"ignores": PLANTED.split(",")}
    alone = compare(
        MOCK_SUITE, _arms(), reps=2, seed=3, metric="hard", out=tmp_path / "alone",
        agent="mock", agent_options={"ignores": PLANTED.split(",")},
    )  # fmt: skip
    assert table.agent("stubborn").pairs == alone.pairs
    assert Comparison.read(out / "stubborn" / "comparison.json").arms == alone.arms


def test_the_good_skills_gain_transfers_to_one_agent_and_not_the_others(
    transfer: tuple[Transfer, Path],
) -> None:
    table, _ = transfer
    verdicts = {c.label: c.pairs[0].verdict for c in table.agents}  # seed -> good
    assert verdicts == {"follows": "b_better", "stubborn": "no_difference", "harmed": "a_better"}
    assert table.agent("follows").scores["good"] > table.agent("follows").scores["seed"]  # type: ignore[operator]
    assert table.agent("harmed").scores["good"] == 0.0  # stating the phrase fails every task for it


def test_two_agents_never_share_records_in_a_shared_cache_and_force_replaces(tmp_path: Path) -> None:
    agents = AGENTS[:2]
    first = compare_agents(MOCK_SUITE, _arms(), agents, reps=1, out=tmp_path / "a", cache=tmp_path / "c")
    assert [c.n_cached for c in first.agents] == [0, 0]  # the second agent got none of the first's
    again = compare_agents(MOCK_SUITE, _arms(), agents, reps=1, out=tmp_path / "b", cache=tmp_path / "c")
    assert [c.n_cached for c in again.agents] == [2 * N_TEST, 2 * N_TEST]
    assert [c.pairs for c in again.agents] == [c.pairs for c in first.agents]
    forced = compare_agents(
        MOCK_SUITE, _arms(), agents[::-1], reps=1, out=tmp_path / "b", cache=tmp_path / "c", force=True
    )
    assert [c.label for c in forced.agents] == ["stubborn", "follows"]
    assert Transfer.read(tmp_path / "b" / TRANSFER_FILE) == forced


def test_compare_agents_refuses_a_used_out(transfer: tuple[Transfer, Path]) -> None:
    _, out = transfer
    before = (out / TRANSFER_FILE).read_text()
    with pytest.raises(UsageError, match="already holds results"):
        compare_agents(MOCK_SUITE, _arms(), AGENTS, reps=2, seed=3, metric="hard", out=out)
    assert (out / TRANSFER_FILE).read_text() == before


def test_cli_prints_the_skill_by_agent_table(tmp_path: Path) -> None:
    out = tmp_path / "DIR"
    args = [f"seed={MOCK_SKILL}", f"good={GOOD_SKILL}", "--no-skill", "--reps", "1"]
    agents = ["--agent", "follows=mock", "--agent", f"stubborn=mock:ignores={PLANTED}"]
    result = runner.invoke(app, ["compare", str(MOCK_SUITE), *args, *agents, "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    table = Transfer.read(out / TRANSFER_FILE)
    assert sorted(p.name for p in out.iterdir()) == ["follows", "stubborn", TRANSFER_FILE]
    rows = {
        cells[0]: cells[1:]
        for line in result.output.splitlines()
        if line.startswith("│") and (cells := [c.strip() for c in line.strip("│").split("│")])[0]
    }
    header = next(line for line in result.output.splitlines() if line.startswith("┃"))
    assert "follows (mock)" in header and "stubborn (mock)" in header
    for name in ("seed", "good"):
        row = rows[f"{name} {table.arms[name][:12]}"]
        assert row == [f"{c.scores[name]:.3f}" for c in table.agents]
    assert rows["noskill"] == ["0.000", "0.000"]
    seed_good = rows["seed -> good"]
    assert [cell.split()[0] for cell in seed_good] == [f"{c.pairs[0].diff:+.3f}" for c in table.agents]
    verdicts = [c.pairs[0].verdict for c in table.agents]
    assert verdicts == ["b_better", "no_difference"]
    assert rows["rollouts"] == ["42", "42"]
    assert f"stubborn: --agent stubborn=mock:ignores={PLANTED}" in result.output
    assert str(out / TRANSFER_FILE) in result.output


def test_one_agent_writes_what_compare_always_wrote(tmp_path: Path) -> None:
    arms = [f"seed={MOCK_SKILL}", f"good={GOOD_SKILL}", "--reps", "1", "-q"]
    inline = runner.invoke(
        app, ["compare", str(MOCK_SUITE), *arms, "--agent", "mock:crn=true", "--out", str(tmp_path / "a")]
    )
    flags = runner.invoke(
        app, ["compare", str(MOCK_SUITE), *arms, "--agent", "mock", "--agent-opt", "crn=true", "--out", str(tmp_path / "b")]
    )  # fmt: skip
    assert inline.exit_code == flags.exit_code == 0, inline.output + flags.output
    for folder in ("a", "b"):
        assert sorted(p.name for p in (tmp_path / folder).iterdir()) == ["comparison.json", "rollouts"]
    a, b = (Comparison.read(tmp_path / f / "comparison.json") for f in ("a", "b"))
    assert a == b and a.agent == "mock"
    assert "transfer" not in inline.output and "comparison.json" in inline.output


def test_a_direct_target_and_the_mock_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--agent local=openai:base_url=...,model=...`` (the fake OpenAI server) beside the mock: the
    endpoint's options (a URL, a JSON dict) parse in the several-agents syntax; cost per agent."""
    from skilltune.modelcalls import forget_endpoints
    from tests.helpers import write_skill
    from tests.test_direct_targets import DONE_RULE, LABEL_RULE, router_suite, serve

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    forget_endpoints()
    suite = router_suite(tmp_path / "suite")
    seed = write_skill(tmp_path / "seed", "- Route support tickets.", name="router")
    good = write_skill(
        tmp_path / "good", f"- Route support tickets.\n- {LABEL_RULE}\n- {DONE_RULE}", name="router"
    )
    out = tmp_path / "out"
    with serve() as server:
        local = f'local=openai:base_url={server.url}/v1,model=tiny-router,backoff_s=0.01,prices={{"tiny":[1.0,2.0]}}'
        args = ["compare", str(suite), f"seed={seed}", f"good={good}", "--reps", "1", "--agent", local]
        result = runner.invoke(app, [*args, "--agent", "mock", "--out", str(out), "-q"])
    forget_endpoints()
    assert result.exit_code == 0, result.output
    table = Transfer.read(out / TRANSFER_FILE)
    model, mock = table.agents
    assert (model.label, model.agent, mock.label) == ("local", "openai", "mock")
    assert model.options["base_url"] == f"{server.url}/v1" and model.options["prices"] == {"tiny": [1.0, 2.0]}
    assert model.scores == {"seed": 0.0, "good": 1.0} and model.pairs[0].diff == 1.0
    assert len(server.requests) == model.n_rollouts == 8  # the mock sent none
    assert model.cost_usd > 0 and mock.cost_usd == 0.0
    assert {r.agent for r in (RolloutRecord.read(p) for p in (out / "local").rglob("record.json"))} == {
        "openai"
    }


def test_an_out_inside_a_run_directory_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "demo"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "seed.json").write_text("{}")
    with pytest.raises(UsageError, match=r"inside the run .*--out .*demo-transfer"):
        compare_agents(MOCK_SUITE, _arms(), AGENTS[:2], reps=1, out=run / "transfer")
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "seed.json"]


def test_an_agent_whose_every_rollout_fails_exits_3_after_the_table_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake server refuses the key: the openai agent's column is empty, the mock's is not; the
    table is written all the same, and the command says which agent failed (exit 3)."""
    from skilltune.modelcalls import forget_endpoints
    from tests.fakeserver import Failure
    from tests.helpers import write_skill
    from tests.test_direct_targets import router_suite, serve

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    forget_endpoints()
    suite = router_suite(tmp_path / "suite")
    seed = write_skill(tmp_path / "seed", "- Route support tickets.", name="router")
    out = tmp_path / "out"
    with serve([Failure(status=401, message="invalid api key")] * 100) as server:
        dead = f"dead=openai:base_url={server.url}/v1,model=tiny-router"
        args = ["compare", str(suite), f"seed={seed}", "--no-skill", "--reps", "1", "--agent", "mock"]
        result = runner.invoke(app, [*args, "--agent", dead, "--out", str(out), "-q"])
    forget_endpoints()
    assert result.exit_code == 3, result.output
    assert "dead: " in result.output and "HTTP 401: invalid api key" in result.output
    table = Transfer.read(out / TRANSFER_FILE)
    assert table.agent("dead").n_scored == 0 and table.agent("dead").scores == {"seed": None, "noskill": None}
    assert table.agent("mock").n_scored == table.agent("mock").n_rollouts == 8


def test_progress_counts_every_agents_rollouts_once(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    compare_agents(
        MOCK_SUITE, _arms(), AGENTS[:2], reps=1, out=tmp_path / "out",
        on_record=lambda _record, done, total: seen.append((done, total)),
    )  # fmt: skip
    total = 2 * 2 * N_TEST
    assert seen == [(k, total) for k in range(1, total + 1)]


def test_two_labels_of_the_very_same_agent_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Two labels with one backend, options and environment share rollout cache keys: their columns
    would hold one agent's draws, shared out between them. compare refuses them as train does."""
    out = tmp_path / "DIR"
    args = [f"seed={MOCK_SKILL}", f"good={GOOD_SKILL}", "--reps", "1", "--out", str(out)]
    agents = ["--agent", "one=mock", "--agent", "two=mock"]
    result = runner.invoke(app, ["compare", str(MOCK_SUITE), *args, *agents])
    assert result.exit_code == 2 and not out.exists()
    assert "--agent one and --agent two are the same agent" in result.output
    assert "Traceback" not in result.output
    differ = ["--agent", "one=mock", "--agent", "two=mock:crn=true"]  # options that differ: two agents
    assert runner.invoke(app, ["compare", str(MOCK_SUITE), *args, *differ, "-q"]).exit_code == 0
