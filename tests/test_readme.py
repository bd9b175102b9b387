"""The README's examples run as written (output folders redirected to tmp).

Every ```sh block line starting with ``skilltune`` runs; templates with
placeholders (SUITE, SKILL) live in ```text blocks and are not run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from tests.helpers import REPO

README = (REPO / "README.md").read_text()
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(README) if kind == lang]


def _commands() -> list[str]:
    return [
        line.strip()
        for body in _blocks("sh")
        for line in body.splitlines()
        if line.strip().startswith("skilltune ")
    ]


def _train_first(args: list[str], tmp_path: Path) -> list[str]:
    """A command reading ``runs/TAG`` (audit, promote, report, status) after the README's train command for TAG."""
    tag = Path(args[1]).name
    (train,) = [c for c in _commands() if c.startswith("skilltune train ") and f"--tag {tag} " in f"{c} "]
    trained = CliRunner().invoke(app, [*shlex.split(train)[1:], "--runs-dir", str(tmp_path), "--quiet"])
    assert trained.exit_code == 0, trained.output
    return [args[0], str(tmp_path / tag), *args[2:]]


@pytest.mark.parametrize("command", _commands())
def test_readme_command_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    args = shlex.split(command.split("#", 1)[0])[1:]
    if "--out" in args:
        args[args.index("--out") + 1] = str(tmp_path / "out")
    if args[0] == "train":
        args += ["--runs-dir", str(tmp_path), "--quiet"]
    if args[0] in ("audit", "promote", "report", "status"):  # they read a run the README trains
        args = _train_first(args, tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{command}\n{result.output}"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    (code,) = _blocks("python")
    code = code.replace('"runs/api-eval"', repr(str(tmp_path / "api")))
    code = code.replace('runs_dir="runs"', f"runs_dir={str(tmp_path)!r}")
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "api" / "summary.json").is_file()


def test_readme_quickstart_starts_with_make_demo_and_make_test() -> None:
    quickstart = README.split("## Quickstart", 1)[1]
    first = _blocks("sh")[0].strip().splitlines()
    assert first[0].startswith("make demo") and first[1].startswith("make test")
    assert quickstart.index("make demo") < quickstart.index("make test")


def test_readme_quotes_the_end_of_make_demo_as_it_prints_it() -> None:
    """The Quickstart's quoted ending and gate share are `make demo`'s own output (the golden copy that
    tests/test_runfiles.py compares with a fresh run), so a change of default cannot leave them stale."""
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    (quoted,) = [body for kind, body in BLOCK.findall(quickstart) if kind == "text"]
    lines = [line for line in quoted.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith("success: "), lines
    golden = (REPO / "tests" / "golden" / "demo_stdout.txt").read_text().splitlines()
    assert all(line in golden for line in lines), lines
    (share,) = [line for line in golden if line.startswith("rollouts: ")]
    numbers = re.match(r"rollouts: (\d+) in training, (\d+) of them in the gate \((\d+%)\)", share)
    assert numbers is not None, share
    assert f"{numbers[2]} of {numbers[1]}, {numbers[3]}" in quickstart
