"""Start-up: the quick commands load no heavy library, and validate (or an import) writes nothing.

Each check runs in a fresh interpreter: in this one every module is long imported. Timings live
in benchmarks/startup.py, not here.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MOCK_SUITE, REPO

# What --version, --help and validate must never load (numpy and scipy are for statistics, LangChain
# and the vendor SDKs for model proposers, Ray for scale-out).
HEAVY = ("scipy", "numpy", "langchain", "openai", "anthropic", "ray")

_RUN_CLI = """
import json, sys
out, *args = sys.argv[1:]
sys.argv = ["skilltune", *args]
from skilltune.cli import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m.split(".")[0].startswith(h) for h in HEAVY)]


def _python(
    code: str, *args: str, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=120,
    )


def _tree(root: Path) -> dict[str, Any]:
    """Every path under ``root`` with what it holds (files: size, mtime and content hash)."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file():
            st = path.stat()
            found[rel] = (st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            found[rel] = "dir"
    return found


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["validate", str(MOCK_SUITE)]],
    ids=["version", "help", "validate"],
)
def test_quick_commands_load_no_heavy_library(args: list[str], tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = _python(_RUN_CLI, str(report), *args)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(report.read_text())
    assert result["code"] in (0, None), proc.stdout + proc.stderr
    assert _heavy(result["modules"]) == []
    assert "skilltune.cli" in result["modules"]  # the command itself did run


# The skilltune modules each quick command may load: --version the app alone (no command's module),
# validate its own command module and what checks a suite (the suite, its tasks, the scorers whose
# fields it checks). No other command's module, no rollout, training, agent or git code, no YAML
# (a suite without a skill catalogue parses no skill's front matter).
QUICK_MODULES = {
    "version": ("skilltune", "skilltune.errors", "skilltune.cli", "skilltune.cli.app"),
    "validate": (
        "skilltune",
        "skilltune.errors",
        "skilltune.cli",
        "skilltune.cli.app",
        "skilltune.cli.evaluate",
        "skilltune.cli.options",
        "skilltune.cli.settings",
        "skilltune.contracts",
        "skilltune.metric",
        "skilltune.plugins",
        "skilltune.process",
        "skilltune.skill",
        "skilltune.store",
        "skilltune.validation",
        "skilltune.score.*",
        "skilltune.suite.*",
    ),
}
NOT_FOR_VALIDATE = ("yaml", "pygit2", "jinja2", "plotly", "httpx", "httpx2")


def _allowed(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or (a.endswith(".*") and (module + ".").startswith(a[:-1])) for a in allowed)


@pytest.mark.parametrize(
    ("name", "args"),
    [("version", ["--version"]), ("validate", ["validate", str(MOCK_SUITE)])],
    ids=["version", "validate"],
)
def test_quick_commands_load_only_what_they_use(name: str, args: list[str], tmp_path: Path) -> None:
    """``--version`` loads no command's module; ``validate`` loads its own and what checks a suite:
    not the other commands (their modules import on use: skilltune.cli.app.COMMAND_MODULES), not
    pygit2, not the rollout or training stack, not YAML."""
    report = tmp_path / "report.json"
    proc = _python(_RUN_CLI, str(report), *args)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(report.read_text())
    assert result["code"] in (0, None), proc.stdout + proc.stderr
    ours = [m for m in result["modules"] if m == "skilltune" or m.startswith("skilltune.")]
    assert [m for m in ours if not _allowed(m, QUICK_MODULES[name])] == []
    assert [m for m in result["modules"] if m.split(".")[0] in NOT_FOR_VALIDATE] == []
    assert _heavy(result["modules"]) == []


def test_the_api_loads_on_first_use_and_its_functions_keep_their_names() -> None:
    """``import skilltune`` loads no heavy library; every public name resolves to the object its
    module defines; ``skilltune.measure.compare`` (evaluate, smoke, train) stays the function once the module
    that defines it (and every module of the loop) is loaded."""
    code = """
import json, sys
import skilltune
light = sorted(sys.modules)
import skilltune.measure.compare, skilltune.measure.evaluate, skilltune.measure.smoke, skilltune.training.api
import importlib
same = {name: getattr(skilltune, name) is getattr(importlib.import_module(module), name)
        for name, module in skilltune._LAZY.items()}
namespace = {}
exec("from skilltune import *", namespace)
print(json.dumps({
    "light": light,
    "same": same,
    "functions": [callable(skilltune.compare), callable(skilltune.evaluate),
                  callable(skilltune.smoke), callable(skilltune.train)],
    "star": sorted(k for k in namespace if k != "__builtins__"),
    "all": sorted(skilltune.__all__),
    "dir_has_all": set(skilltune.__all__) <= set(dir(skilltune)),
}))
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert _heavy(result["light"]) == []
    assert [m for m in result["light"] if m.startswith("skilltune")] == ["skilltune", "skilltune.errors"]
    assert result["same"] and all(result["same"].values()), result["same"]
    assert result["functions"] == [True, True, True, True]
    assert result["star"] == result["all"]
    assert result["dir_has_all"]
    missing = _python("import skilltune; skilltune.no_such_name")
    assert missing.returncode == 1 and "has no attribute 'no_such_name'" in missing.stderr


def test_validate_writes_nothing(tmp_path: Path) -> None:
    """Not in $TMPDIR, not in the suite, not in the working folder, not where workspaces go."""
    tmp = tmp_path / "tmp"
    cwd = tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    workspaces = tmp_path / "workspaces"
    before = _tree(MOCK_SUITE)
    env = {"TMPDIR": str(tmp), "SKILLTUNE_WORKSPACES": str(workspaces)}
    proc = _python(_RUN_CLI, str(tmp_path / "report.json"), "validate", str(MOCK_SUITE), env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "report.json").read_text())["code"] in (0, None)
    assert "ok: " in proc.stdout
    assert list(tmp.iterdir()) == []
    assert list(cwd.iterdir()) == []
    assert not workspaces.exists()
    assert _tree(MOCK_SUITE) == before


def test_workspaces_ignore_the_users_git_configuration_and_the_import_writes_nothing(
    tmp_path: Path,
) -> None:
    """A user's global and XDG git configuration (autocrlf, a global excludes file, global attributes)
    would change what libgit2 stages; the workspace diff shows the agent's bytes as written. The
    control at the start proves libgit2 does read this HOME when skilltune does not intervene."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text("[core]\n\tautocrlf = true\n\texcludesFile = ~/.gitignore_global\n")
    (home / ".gitignore_global").write_text("*.log\n")
    (home / ".config" / "git" / "attributes").write_text("*.txt -diff\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = """
import json, os, sys
from pathlib import Path
import pygit2
probe = pygit2.init_repository(sys.argv[1])
control = ["core.autocrlf" in probe.config, probe.path_is_ignored("run.log"),
           probe.get_attr("notes.txt", "diff") is False]
from skilltune.rollout.workspace import Workspace
after_import = os.listdir(os.environ["TMPDIR"])
workspace = Workspace.create("t")
(workspace.path / "notes.txt").write_bytes(b"one\\r\\n")
workspace.commit_baseline()
(workspace.path / "run.log").write_text("log\\n")
(workspace.path / "notes.txt").write_bytes(b"one\\r\\ntwo\\r\\n")
diff = workspace.diff()
workspace.cleanup()
print(json.dumps({"control": control, "after_import": after_import, "diff": diff,
                  "tmp": os.listdir(os.environ["TMPDIR"])}))
"""
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "TMPDIR": str(tmp),
        "SKILLTUNE_WORKSPACES": str(tmp_path / "workspaces"),
    }
    proc = _python(code, str(tmp_path / "probe"), env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["control"] == [True, True, True]  # without skilltune, libgit2 reads all three
    assert result["after_import"] == [] and result["tmp"] == []
    diff = result["diff"]
    assert "+two\r\n" in diff  # staged as written: no autocrlf, no global -diff attribute
    assert "Binary files" not in diff
    assert "b/run.log" in diff  # a globally ignored file is still the agent's work
