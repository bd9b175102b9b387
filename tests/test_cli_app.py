"""The CLI's error handling (skilltune/cli/app.py): bad input exits 2 with a message, no traceback, no files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from skilltune.cli import app
from tests.helpers import MOCK_SKILL, MOCK_SUITE, tree

cli = CliRunner()


def test_cli_bad_input_exits_2_without_traceback_or_files(tmp_path: Path) -> None:
    """Bad --config, --runs-dir and single-file native skills exit 2 with a message and write nothing."""
    suite = tmp_path / "suite"
    shutil.copytree(MOCK_SUITE, suite)
    runs = tmp_path / "runs"
    base = ["train", str(suite), "--skill", str(MOCK_SKILL), "--tag", "x", "--max-steps", "1"]
    not_table = tmp_path / "not-table.toml"
    not_table.write_text('agent_options = "x"\n')
    config_dir = tmp_path / "config-dir"
    config_dir.mkdir()
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes(b"max_steps = 1\n# caf\xe9\n")
    a_file = tmp_path / "runs-file"
    a_file.write_text("not a folder\n")
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Open with a three-sentence summary.\n")
    cases = [
        ([*base, "--runs-dir", str(runs), "--config", str(not_table)], "agent_options must be a table"),
        ([*base, "--runs-dir", str(runs), "--config", str(config_dir)], "is a folder"),
        ([*base, "--runs-dir", str(runs), "--config", str(latin1)], "not UTF-8"),
        ([*base, "--runs-dir", str(a_file)], "is a file"),
        ([*base, "--runs-dir", str(suite / "runs")], "inside the suite"),
        (
            ["train", str(suite), "--skill", str(prompt), "--tag", "x", "--runs-dir", str(runs)],
            "placement=system",
        ),
        (["run", str(suite), "--skill", str(prompt), "--out", str(tmp_path / "out")], "placement=system"),
        (
            ["compare", str(suite), f"a={prompt}", "--no-skill", "--out", str(tmp_path / "out")],
            "placement=system",
        ),
    ]
    for args, message in cases:
        before = tree(tmp_path)
        result = cli.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (message, result.output)
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit), (args, result.exception)
        assert tree(tmp_path) == before, args
    assert a_file.read_text() == "not a folder\n"


def test_the_command_table_names_each_command_and_the_module_that_registers_it() -> None:
    """COMMAND_MODULES is how the lazy root group finds a command without importing every module: it
    lists every command the modules register, in --help's order, each beside its own module, and
    the group builds each from the module it names."""
    import importlib

    import typer

    from skilltune.cli.app import COMMAND_MODULES

    for module in set(COMMAND_MODULES.values()):
        importlib.import_module(module)
    registered = {
        command.name or command.callback.__name__.replace("_", "-"): command.callback.__module__
        for command in app.registered_commands
        if command.callback is not None
    }
    for group in app.registered_groups:
        assert group.name is not None and group.typer_instance is not None
        first = group.typer_instance.registered_commands[0].callback
        assert first is not None
        registered[group.name] = first.__module__
    assert registered == COMMAND_MODULES
    root = typer.main.get_command(app)
    assert list(root.commands) == list(COMMAND_MODULES)  # type: ignore[attr-defined]
    listing = cli.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    rows = [line.split()[1] for line in listing.splitlines() if line.startswith("│ ")]
    assert [row for row in rows if not row.startswith("-")] == list(COMMAND_MODULES)


def test_python_dash_m_skilltune_is_the_command() -> None:
    """``python -m skilltune`` runs the CLI as ``skilltune`` does (it said "No module named
    skilltune.__main__" before)."""
    done = subprocess.run(
        [sys.executable, "-m", "skilltune", "validate", str(MOCK_SUITE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: ") and "tasks: train" in done.stdout, done.stdout
