"""The command line: run, smoke, agents; exit codes and determinism."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from skilltune.cli import app
from tests.helpers import MOCK_SKILL, MOCK_SUITE, rule_task, write_skill, write_suite

runner = CliRunner()


def _scores(out: Path) -> dict[str, float]:
    found = {}
    for record in sorted((out / "rollouts" / "eval").glob("*/*/record.json")):
        data = json.loads(record.read_text())
        found[f"{data['task_id']}#{data['replicate']}"] = data["score"]["mixed"]
    return found


def test_run_writes_one_record_per_task_and_replicate(tmp_path: Path) -> None:
    out = tmp_path / "OUT"
    args = [
        "run",
        str(MOCK_SUITE),
        "--skill",
        str(MOCK_SKILL),
        "--agent",
        "mock",
        "--split",
        "val",
        "--reps",
        "3",
    ]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "summary.json" in result.output
    folders = sorted((out / "rollouts" / "eval").glob("*/*_r*"))
    n_val = len((MOCK_SUITE / "val.jsonl").read_text().splitlines())
    assert len(folders) == n_val * 3
    for folder in folders:
        for name in ("record.json", "conversation.json", "diff.patch", "events.jsonl", "output.txt"):
            assert (folder / name).is_file(), folder / name
        score = json.loads((folder / "score.json").read_text())
        assert len(score["contract"]) == 64
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_rollouts"] == n_val * 3 and summary["reps"] == 3
    assert 0.0 < summary["hard_acc"] < 1.0

    again = tmp_path / "AGAIN"
    assert runner.invoke(app, [*args, "--out", str(again)]).exit_code == 0
    assert _scores(out) == _scores(again)
    other = tmp_path / "OTHER"
    assert runner.invoke(app, [*args, "--seed", "5", "--out", str(other)]).exit_code == 0
    assert _scores(out) != _scores(other)


def test_run_refuses_existing_out_without_force(tmp_path: Path) -> None:
    out = tmp_path / "OUT"
    args = ["run", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--split", "test", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    before = (out / "summary.json").read_text()
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2
    assert "--force" in refused.output
    assert (out / "summary.json").read_text() == before
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0


def test_run_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "OUT"
    base = ["run", str(MOCK_SUITE), "--out", str(out)]
    cases = [
        ([*base, "--skill", str(MOCK_SKILL), "--agent", "nope"], "unknown agent 'nope'"),
        ([*base, "--skill", str(MOCK_SKILL), "--agent-opt", "colour=blue"], "unknown agent option 'colour'"),
        ([*base, "--skill", str(MOCK_SKILL), "--agent-opt", "placement"], "key=value"),
        ([*base, "--skill", str(tmp_path / "missing")], "no such skill"),
        ([*base], "--no-skill"),
        (["run", str(tmp_path / "nosuite"), "--skill", str(MOCK_SKILL), "--out", str(out)], "does not exist"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (message, result.output)
        assert "Traceback" not in result.output
        assert not out.exists()


def test_run_without_skill(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(MOCK_SUITE), "--no-skill", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "rollouts" / "eval" / "noskill").is_dir()
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["hard_acc"] == 0.0


def test_run_with_single_file_skill_and_system_placement(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "suite", [rule_task("t", ["state-a-default"])], [rule_task("v", ["state-a-default"])]
    )
    agents_md = tmp_path / "AGENTS.md"
    agents_md.write_text("Always state a default.\n")
    prompt_file = tmp_path / "system-prompt.txt"
    prompt_file.write_text("Always state a default.\n")
    ok = runner.invoke(app, ["run", str(suite), "--skill", str(agents_md), "--out", str(tmp_path / "a")])
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["hard_acc"] == 1.0
    refused = runner.invoke(
        app, ["run", str(suite), "--skill", str(prompt_file), "--out", str(tmp_path / "b")]
    )
    assert refused.exit_code == 2 and "placement=system" in refused.output
    system = runner.invoke(
        app,
        [
            "run",
            str(suite),
            "--skill",
            str(prompt_file),
            "--agent-opt",
            "placement=system",
            "--out",
            str(tmp_path / "c"),
        ],
    )
    assert system.exit_code == 0, system.output
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["hard_acc"] == 1.0


def test_smoke_passes_on_the_example_and_fails_on_missing_tool(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["smoke", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--agent", "mock"])
    assert ok.exit_code == 0, ok.output
    assert "workspace free of reference data" in ok.output
    assert ok.output.count("FAIL") == 0
    suite = write_suite(
        tmp_path / "suite",
        [rule_task("t", ["state-a-default"])],
        [rule_task("v", ["state-a-default"])],
        config={"smoke_tools": ["definitely-not-a-tool-xyz"]},
    )
    (suite / "requirements.txt").write_text("pydantic>=2\nno-such-package-xyz==1.0  # comment\n")
    skill = write_skill(tmp_path / "skill", "State a default.")
    bad = runner.invoke(app, ["smoke", str(suite), "--skill", str(skill)])
    assert bad.exit_code == 1
    assert "FAIL tool definitely-not-a-tool-xyz" in bad.output
    assert "FAIL requirement no-such-package-xyz" in bad.output
    assert "ok   requirement pydantic" in bad.output
    # a failed smoke keeps its rollouts and says where; a passing one removes them unless --out is given
    kept = bad.output.split("the smoke rollouts are in ")[1].split()[0]
    assert list(Path(kept).rglob("record.json")), kept
    assert "smoke rollouts are in" not in ok.output
    out = tmp_path / "smoke-out"
    kept_ok = runner.invoke(app, ["smoke", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--out", str(out)])
    assert kept_ok.exit_code == 0 and len(list(out.rglob("record.json"))) == 3, kept_ok.output


def test_agents_lists_the_mock() -> None:
    result = runner.invoke(app, ["agents"])
    assert result.exit_code == 0
    assert "mock" in result.output


def test_every_command_has_an_example_in_its_help() -> None:
    import typer

    def paths(group: Any, prefix: list[str]) -> list[list[str]]:
        found = []
        for name, command in group.commands.items():
            found.append([*prefix, name])
            if hasattr(command, "commands"):  # a group (typer's own click types: duck-typed)
                found += paths(command, [*prefix, name])
        return found

    commands = paths(typer.main.get_command(app), [])
    assert ["train"] in commands and ["meta-eval", "null"] in commands
    for command in commands:
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, command
        assert "Example: skilltune " + command[0] in " ".join(result.output.split()), command
