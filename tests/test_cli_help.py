"""Every command's --help: flags from the config model, no value placeholder beside a flag, help
texts that read as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

import skilltune.runfiles
from skilltune.cli import app
from skilltune.cli.app import reflow
from skilltune.cli.settings import SettingsCommand
from skilltune.runfiles import TrainConfig
from skilltune.training.config import MAY_CHANGE_ON_RESUME
from tests.helpers import MOCK_SKILL, MOCK_SUITE, REPO

runner = CliRunner()
WIDE = {"COLUMNS": "400"}  # one row per option, one line per paragraph


def _commands(group: Any = None, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every command and group under the app, by its words (the root is ())."""
    group = group if group is not None else typer.main.get_command(app)
    found = {prefix: group}
    for name, command in getattr(group, "commands", {}).items():
        found |= _commands(command, (*prefix, name))
    return found


def _help(*words: str, env: dict[str, str] | None = None) -> str:
    result = runner.invoke(app, [*words, "--help"], env=env or WIDE)
    assert result.exit_code == 0, (words, result.output)
    return result.output


def _row(output: str, flag: str) -> str:
    """The help table's row of a flag, on one line (the wide terminal wraps only a very long help
    text: its lines are joined)."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip("│ ").startswith(f"{flag} ")]
    assert len(starts) == 1, (flag, starts)
    row = [lines[starts[0]]]
    for line in lines[starts[0] + 1 :]:
        text = line.strip("│ ")
        if not line.startswith("│") or not text or text.startswith("-"):
            break
        row.append(text)
    return " ".join(" ".join(part.strip("│ ").split()) for part in row)


def _shown(value: Any) -> str:
    return f"[default: {value}]"


def test_no_help_shows_a_value_placeholder_beside_a_flag() -> None:
    commands = _commands()
    assert ("train",) in commands and ("judge", "check") in commands
    for words in commands:
        output = _help(*words)
        assert "<bool>" not in output, words
        assert "--no-force" not in output, words  # a plain flag has no negative twin


def test_every_help_paragraph_reads_as_written() -> None:
    """A docstring's line breaks never reach the screen: each paragraph renders as one line on a wide
    terminal, in the command's own help and in its group's list of commands."""
    for words, command in _commands().items():
        output = _help(*words)
        for paragraph in (reflow(command.help) or "").split("\n\n"):
            assert any(paragraph in line for line in output.splitlines()), (words, paragraph)
        for name, sub in getattr(command, "commands", {}).items():
            summary = (sub.short_help or reflow(sub.help) or "").split("\n\n")[0]
            assert "\n" not in summary and any(summary in line for line in output.splitlines()), (words, name)


def test_long_help_wraps_between_words_at_100_columns() -> None:
    output = _help("audit", env={"COLUMNS": "100"})
    assert "<bool>" not in output
    assert "can its verdict be trusted? Writes audit.json." in output
    listing = _help(env={"COLUMNS": "100"})
    audit = next(line for line in listing.splitlines() if "│ audit " in line)
    assert audit.rstrip(" │").endswith("Writes audit.json."), audit  # the summary is one line


def _setting_commands() -> dict[tuple[str, ...], Any]:
    """Every command whose setting flags are generated from a settings model."""
    return {words: c for words, c in _commands().items() if isinstance(c, SettingsCommand)}


def test_every_rollout_command_takes_its_settings_from_a_model() -> None:
    models = {words: c.settings_model().__name__ for words, c in _setting_commands().items()}
    assert models == {
        ("run",): "RunSettings",
        ("smoke",): "RolloutSettings",
        ("calibrate",): "CalibrateSettings",
        ("train",): "TrainConfig",
        ("resume",): "TrainConfig",
        ("compare",): "CompareSettings",
        ("meta-eval", "planted"): "PlantedSettings",
        ("meta-eval", "null"): "MetaEvalSettings",
        ("judge", "check"): "RolloutSettings",
        ("judge", "agreement"): "RolloutSettings",
        ("draft", "triggers"): "DraftSettings",
    }


SETTING_COMMANDS = [
    ("train",), ("run",), ("calibrate",), ("compare",), ("smoke",), ("meta-eval", "planted"), ("draft", "triggers")
]  # fmt: skip


@pytest.mark.parametrize("words", SETTING_COMMANDS, ids="-".join)
def test_every_setting_flag_shows_the_model_default_and_help(words: tuple[str, ...]) -> None:
    command = _setting_commands()[words]
    model = command.settings_model()
    output = _help(*words)
    names = [p.name for p in command.params if p.param_type_name == "option" and p.name in model.model_fields]
    assert names == [n for n in model.flag_names() if n in names]  # in the model's order
    if words == ("train",):
        assert len(names) >= 30 and "suite" not in names and "edit_budget" not in names
    for name in names:
        info = model.model_fields[name]
        row = _row(output, model.flags(name)[0])
        assert info.description and info.description in row, (name, row)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        if isinstance(default, bool):
            flag = model.flags(name)[0].removeprefix("--")
            assert _shown(flag if default else f"no-{flag}") in row, (name, row)
        elif default not in (None, {}):
            assert _shown(default) in row, (name, row)
            assert row.count("default") == 1, row  # the help text does not repeat it
        else:
            assert "[default:" not in row, row


@pytest.mark.parametrize("words", SETTING_COMMANDS[:5], ids="-".join)
def test_literal_settings_offer_their_choices(words: tuple[str, ...]) -> None:
    output = _help(*words)
    assert "<auto|bwrap|none>" in _row(output, "--sandbox")
    assert "<cheap|full>" in _row(output, "--prompt-variant")
    if words != ("smoke",):
        assert "<local|ray>" in _row(output, "--executor")
    if words in (("calibrate",), ("compare",), ("train",)):
        assert "<hard|soft|mixed>" in _row(output, "--metric")
    if words in (("run",), ("calibrate",), ("compare",)):
        assert "<train|val|test>" in _row(output, "--split")
    if words == ("train",):
        assert "<patch|rewrite>" in _row(output, "--mode")


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--skill", "SKILL", "--tag", "t", "--mode", "rewirte"],
        ["run", "--skill", "SKILL", "--sandbox", "sealed"],
        ["run", "--skill", "SKILL", "--executor", "dask"],
        ["calibrate", "--skill", "SKILL", "--split", "dev"],
        ["compare", "a=SKILL", "--no-skill", "--metric", "f1"],
        ["compare", "a=SKILL", "--no-skill", "--prompt-variant", "short"],
        ["smoke", "--skill", "SKILL", "--prompt-variant", "short"],
        ["smoke", "--skill", "SKILL", "--sandbox", "sealed"],
    ],
    ids=lambda args: f"{args[0]}{args[-2]}",
)
def test_a_value_outside_the_choices_exits_2_naming_the_flag_and_writes_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    command, *rest = (a.replace("SKILL", str(MOCK_SKILL)) for a in args)
    out = tmp_path / "out"
    where = ["--runs-dir", str(out)] if command == "train" else ["--out", str(out)]
    result = runner.invoke(app, [command, str(MOCK_SUITE), *rest, *where])
    flag, value = args[-2:]
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{flag}'" in text and value in text and "Traceback" not in text, text
    assert not out.exists()


def test_a_changed_default_in_the_model_changes_the_help(monkeypatch: pytest.MonkeyPatch) -> None:
    class Changed(TrainConfig):
        max_steps: int = Field(default=17, ge=2, description="Steps to run, changed.")
        screen: bool = Field(default=False, description="Screen, changed.")
        proposals: int = Field(default=2, ge=1, description="Proposals a step asks for.")  # a new setting

    before = _row(_help("train"), "--max-steps")
    assert _shown(10) in before and "[x>=1]" in before
    monkeypatch.setattr(skilltune.runfiles, "TrainConfig", Changed)
    output = _help("train")
    row = _row(output, "--max-steps")
    assert _shown(17) in row and "[x>=2]" in row and "Steps to run, changed." in row
    assert _shown("no-screen") in _row(output, "--screen")
    added = _row(output, "--proposals")
    assert _shown(2) in added and "[x>=1]" in added and "Proposals a step asks for." in added
    (train,) = [c for w, c in _commands().items() if w == ("train",)]
    params = {p.name: p for p in train.params}
    assert params["max_steps"].default == 17 and params["screen"].default is False


def test_resume_offers_what_a_resume_may_change_without_defaults() -> None:
    output = _help("resume")
    for name in [*MAY_CHANGE_ON_RESUME, "agent_options", "proposer_options", "gate_options"]:
        row = _row(output, TrainConfig.flags(name)[0])
        assert "[default:" not in row, row  # a setting not given stays as the run had it
    for flag in ("--max-steps", "--batch", "--seed", "--mode"):
        assert f"{flag} " not in output


def test_the_flags_parse_into_the_run_config(tmp_path: Path) -> None:
    """Each kind of generated flag (number, choice, bool pair, path, key=value table) lands in
    config.json; one equal to the model default still counts as given over --config."""
    config = tmp_path / "train.toml"
    config.write_text("batch = 2\nworkers = 3\n[agent_options]\ncrn = true\n")
    cache, findings = tmp_path / "cache", tmp_path / "findings.md"
    args = [
        "train", "examples/mock-demo/suite", "-s", "examples/mock-demo/skill", "--tag", "flags",
        "--runs-dir", str(tmp_path / "runs"), "--config", str(config), "--max-steps", "1",
        "--metric", "hard", "--alpha", "0.1", "--alpha-policy", "lord", "--batch", "8", "--test-reps", "1",
        "--no-screen", "--budget-rollouts", "5000", "--budget-usd", "2.5", "--seed", "3",
        "--growth-cap", "0.25", "--patience", "2", "--cache", str(cache), "--findings", str(findings),
        "--agent-opt", "sleep_s=0", "--proposer-opt", "p_right=1.0", "--gate-opt", "max_reps=2", "-q",
        "--executor", "local",  # a setting, not train()'s executor object (it crashed the run)
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "runs" / "flags" / "config.json").read_text())
    expected = {
        "max_steps": 1, "metric": "hard", "alpha": 0.1, "alpha_policy": "lord", "batch": 8, "test_reps": 1,
        "screen": False, "budget_rollouts": 5000, "budget_usd": 2.5, "seed": 3, "growth_cap": 0.25,
        "patience": 2, "workers": 3, "agent_options": {"crn": True, "sleep_s": 0},
        "proposer_options": {"p_right": 1.0}, "gate_options": {"max_reps": 2}, "mode": "patch",
        "executor": "local",
    }  # fmt: skip
    assert {key: stored[key] for key in expected} == expected
    assert Path(stored["cache"]) == cache.resolve() and Path(stored["findings"]) == findings.resolve()


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["validate", "examples/mock-demo/suite"]])
def test_the_quick_commands_do_not_build_the_setting_flags(args: list[str]) -> None:
    """The flags are generated when train or resume needs them: the quick commands never import the model."""
    code = (
        "import sys\nsys.argv = ['skilltune', *sys.argv[1:]]\nfrom skilltune.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODEL LOADED' if 'skilltune.runfiles' in sys.modules else 'MODEL NOT LOADED')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert proc.stdout.strip().endswith("MODEL NOT LOADED"), (proc.stdout[-500:], proc.stderr[-2000:])
