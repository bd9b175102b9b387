"""Test-wide set-up: the agent CLIs installed by `make agent-clis` are on PATH; Ray stays on loopback;
a Ctrl-C reaches the tests that simulate one."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLI_BIN = REPO / "agentclis" / "node_modules" / ".bin"
if CLI_BIN.is_dir():
    os.environ["PATH"] = f"{CLI_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
# Ray reads this when it is first imported (whichever test module does so first): it keeps every socket
# of the local Ray instance on loopback (../shared/ENV-NOTES.md); tests must not listen elsewhere.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(scope="session", autouse=True)
def _sigint_raises() -> Iterator[None]:
    """pytest started as a background job of a shell without job control (``pytest &`` in a script)
    inherits SIGINT ignored, and Python then leaves it ignored: the tests that simulate a Ctrl-C
    (interrupt_main, pthread_kill) would interrupt nothing. Python's own handler for the session."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def require_cli(executable: str) -> str:
    """The path of an agent CLI; skip when it is missing, unless SKILLTUNE_REQUIRE_CLIS is set (CI)."""
    path = shutil.which(executable)
    if path is None:
        message = f"{executable} is not installed: run `make agent-clis`"
        if os.environ.get("SKILLTUNE_REQUIRE_CLIS"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-step mock run (strict gate, ``carry="off"``: both steps decided, where the default
    --carry screen would carry step 1's candidate into step 2 ungated) for tests that only read it; a
    test that changes files works on a copy."""
    from skilltune.progress import PlainReporter
    from skilltune.training import train
    from tests.helpers import FAST, MOCK_SKILL, MOCK_SUITE

    runs = tmp_path_factory.mktemp("finished")
    result = train(
        MOCK_SUITE,
        MOCK_SKILL,
        tag="done",
        runs_dir=str(runs),
        max_steps=2,
        carry="off",
        proposals=1,  # one ask a step: each step's edits decide alone, both keep (what its readers check)
        reporter=PlainReporter(quiet=True),
        **FAST,
    )
    assert result.state == "success", result.reason
    return runs / "done"
