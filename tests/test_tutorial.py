"""docs/tutorial.md runs as written: every command of its ```sh blocks, in order, offline.

The commands run in a scratch folder that holds links to the checkout's ``examples/`` and
``.venv/``, so the runs they write (``runs/...``) land there. ``skilltune`` lines run in
process; ``make`` lines run in the checkout (``make install`` only when it has nothing
left to do: a test installs nothing); any other line runs with bash. A line ending in
``# exits N`` must exit N, every other one 0. An ```output block right after a ```sh block
must match what that block's commands printed: whitespace is normalised (tables wrap with
the terminal's width) and ``...`` stands for anything.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from tests.helpers import REPO

TUTORIAL = REPO / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
EXITS = re.compile(r"\s+#\s*exits (\d+)\s*$")


def blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(TUTORIAL.read_text())]


def commands(body: str) -> list[tuple[str, int]]:
    """(command, expected exit code) for each line of a ```sh block."""
    out = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = EXITS.search(line)
        out.append((line[: found.start()] if found else line, int(found.group(1)) if found else 0))
    return out


def normalised(text: str) -> str:
    return " ".join(text.split())


def output_pattern(expected: str) -> re.Pattern[str]:
    pieces = [re.escape(normalised(piece)) for piece in expected.split("...")]
    return re.compile(r".*?".join(pieces), re.S)


def run(command: str, cwd: Path) -> tuple[int, str]:
    if command.startswith("skilltune "):
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        return result.exit_code, result.output
    if command.startswith("make "):
        target = shlex.split(command)[1:]
        fresh = subprocess.run(["make", "-q", *target], cwd=REPO, capture_output=True, check=False)
        if fresh.returncode != 0:
            pytest.skip(f"`{command}` would install packages here: run it first (make test does)")
        proc = subprocess.run(["make", *target], cwd=REPO, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout + proc.stderr
    env = dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_the_tutorial_covers_install_validate_calibrate_train_compare_in_order() -> None:
    text = TUTORIAL.read_text()
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    order = [
        next(i for i, h in enumerate(heads) if word in h.lower())
        for word in ("install", "validate", "calibrate", "train", "compare")
    ]
    assert order == sorted(order), heads
    sh = [c for lang, body in blocks() if lang == "sh" for c, _ in commands(body)]
    for verb in (
        "validate",
        "smoke",
        "calibrate",
        "train",
        "compare",
        "run",
        "report",
        "status",
        "audit",
        "promote",
    ):
        assert any(c.startswith(f"skilltune {verb} ") for c in sh), verb
    assert not [c for c in sh if c.startswith("skilltune view")], (
        "view serves until stopped: never in a sh block"
    )
    assert not [c for c in sh if "--agent" in c and "--agent mock" not in c], (
        "only the mock agent runs offline"
    )


def test_every_command_of_the_tutorial_runs_and_prints_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("examples", ".venv"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    found = blocks()
    ran = 0
    for index, (lang, body) in enumerate(found):
        if lang != "sh":
            continue
        printed = []
        for command, expected_exit in commands(body):
            code, output = run(command, tmp_path)
            assert code == expected_exit, (
                f"{command}\nexit {code}, expected {expected_exit}\n{output[-3000:]}"
            )
            printed.append(output)
            ran += 1
        follows = found[index + 1] if index + 1 < len(found) else ("", "")
        if follows[0] == "output":
            shown = "\n".join(printed)
            assert output_pattern(follows[1]).search(normalised(shown)), (
                f"the tutorial shows, after `{body.strip()}`:\n{follows[1]}\nbut the commands printed:\n{shown[-4000:]}"
            )
    assert ran >= 15
    trained = tmp_path / "runs" / "sqlite-tutorial"
    assert (trained / "comparison.json").is_file() and (trained / "report.html").is_file()
    assert "<script" in (trained / "report.html").read_text()
