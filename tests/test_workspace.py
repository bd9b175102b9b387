"""Isolated workspaces (skilltune/rollout/workspace.py): the skill's placement, the baseline commit, the
agent's diff (changed, new, deleted and ignored files; nested repositories), the refusal of a
workspace inside the suite, and the audit that finds reference data."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from skilltune.agents import get_backend
from skilltune.agents.mock import MockOptions
from skilltune.errors import UsageError
from skilltune.rollout.runner import RolloutJob, RolloutRunner
from skilltune.rollout.workspace import (
    Workspace,
    audit_workspace,
    check_placement,
    git,
    place_skill,
    workspaces_root,
)
from skilltune.skill import Candidate, load_skill
from skilltune.suite import load_suite
from tests.helpers import MOCK_SKILL, MOCK_SUITE, PYENV_SUITE, rule_task, write_suite


def _candidate(files: dict[str, str], main: str = "SKILL.md", kind: str = "folder") -> Candidate:
    return Candidate(files, main, kind)  # type: ignore[arg-type]


FOLDER_SKILL = {
    "SKILL.md": "---\nname: greeter\ndescription: Greets.\n---\n\n- Greet first.\n",
    "notes.md": "Greetings by region.\n",
}


@pytest.mark.parametrize("placement", ["native", "system", "prepend"])
def test_a_folder_skill_is_installed_natively_and_the_prompts_follow_the_placement(
    tmp_path: Path, placement: str
) -> None:
    """A skill with supporting files is installed in the agent's skill folder in every placement (its
    links must resolve); the placement decides only where SKILL.md's text goes."""
    skill = _candidate(FOLDER_SKILL)
    backend = get_backend("claude")
    placed = place_skill(skill, tmp_path, backend, placement, "Say hello.")  # type: ignore[arg-type]
    folder = tmp_path / backend.native_skill_dir("greeter")
    assert {p.name: p.read_text() for p in folder.iterdir()} == FOLDER_SKILL
    expected = {
        "native": ("Say hello.", None),
        "system": ("Say hello.", skill.text),
        "prepend": (f"{skill.text}\n\n---\n\nSay hello.", None),
    }[placement]
    assert (placed.prompt, placed.system_prompt) == expected


def test_a_single_file_skill_is_placed_natively_only_where_the_agent_reads_it(tmp_path: Path) -> None:
    agents_md = _candidate({"AGENTS.md": "- Greet first.\n"}, "AGENTS.md", "file")
    placed = place_skill(agents_md, tmp_path, get_backend("mock"), "native", "Say hello.")
    assert (tmp_path / "AGENTS.md").read_text() == "- Greet first.\n"
    assert (placed.prompt, placed.system_prompt) == ("Say hello.", None)
    with pytest.raises(UsageError, match=r"reads no AGENTS.md .*placement=system or prepend"):
        place_skill(agents_md, tmp_path / "other", get_backend("claude"), "native", "Say hello.")
    assert not (tmp_path / "other").exists()
    check_placement(agents_md, get_backend("claude"), "system")  # the text goes in the prompt: fine
    none = place_skill(None, tmp_path / "none", get_backend("mock"), "native", "Say hello.")
    assert (none.prompt, none.system_prompt) == ("Say hello.", None)


def test_the_baseline_is_one_commit_the_same_for_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workspaces with the same files get the same baseline commit (fixed author and date), made in
    a fresh repository: the history a task's files came with is dropped."""
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(tmp_path / "ws"))
    commits = []
    for label in ("a", "b"):
        workspace = Workspace.create(label)
        try:
            (workspace.path / "data.txt").write_text("same\n")
            git(workspace.path, "init", "-q")
            git(workspace.path, "add", "-A")
            git(workspace.path, "commit", "-q", "-m", f"history of {label}")
            commits.append(workspace.commit_baseline())
            log = git(workspace.path, "log", "--format=%H %s").stdout.decode().splitlines()
            assert log == [f"{commits[-1]} skilltune baseline"]
        finally:
            workspace.cleanup()
    assert commits[0] == commits[1]
    assert not any((tmp_path / "ws").iterdir())  # cleanup removed both


def test_diff_shows_changed_new_and_deleted_files_and_nothing_before_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(tmp_path / "ws"))
    workspace = Workspace.create("t")
    try:
        ws = workspace.path
        (ws / "changed.txt").write_text("old\n")
        (ws / "deleted.txt").write_text("bye\n")
        assert workspace.diff() == ""  # no baseline yet: nothing is the agent's
        workspace.commit_baseline()
        assert workspace.diff() == ""  # the agent did nothing
        (ws / "changed.txt").write_text("new\n")
        (ws / "deleted.txt").unlink()
        (ws / "sub").mkdir()
        (ws / "sub" / "added.txt").write_text("hello\n")
        diff = workspace.diff()
        assert diff.count("diff --git ") == 3, diff
        assert "-old\n+new" in diff
        assert "deleted file mode" in diff and "-bye" in diff
        assert "new file mode" in diff and "b/sub/added.txt" in diff and "+hello" in diff
    finally:
        workspace.cleanup()
    assert not workspace.path.exists()


def test_a_workspace_root_inside_a_forbidden_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_dir = tmp_path / "suite"
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(suite_dir / "deep" / "ws"))
    with pytest.raises(UsageError, match=r"inside .*suite; set SKILLTUNE_WORKSPACES"):
        Workspace.create("t", forbidden=[tmp_path / "runs", suite_dir])
    assert not list((suite_dir / "deep" / "ws").iterdir())  # no workspace was made
    Workspace.create("t", forbidden=[tmp_path / "runs"]).cleanup()  # elsewhere: fine


def test_baseline_commit_flattens_nested_repositories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit_baseline removes nested .git dirs and .git files; their files are tracked and edits show in diff()."""
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(tmp_path / "ws"))
    workspace = Workspace.create("nested")
    try:
        nested = workspace.path / "vendor" / "lib"
        nested.mkdir(parents=True)
        (nested / "code.py").write_text("x = 1\n")
        git(nested, "init", "-q")
        git(nested, "add", "-A")
        git(nested, "commit", "-q", "-m", "nested history")
        linked = workspace.path / "sub"
        linked.mkdir()
        (linked / ".git").write_text("gitdir: /nowhere/.git/modules/sub\n")
        (linked / "data.txt").write_text("data\n")
        (workspace.path / "top.txt").write_text("top\n")
        workspace.commit_baseline()
        gits = [p.relative_to(workspace.path).as_posix() for p in workspace.path.rglob(".git")]
        assert gits == [".git"]
        tracked = git(workspace.path, "ls-files").stdout.decode().split()
        assert {"top.txt", "vendor/lib/code.py", "sub/data.txt"} <= set(tracked)
        (nested / "code.py").write_text("x = 2\n")
        diff = workspace.diff()
        assert "vendor/lib/code.py" in diff and "+x = 2" in diff
    finally:
        workspace.cleanup()


def test_workspace_diff_sees_everything_and_never_touches_an_outer_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ignored files (global or the task's), deletions and a repository the agent made all show in the
    diff; with the workspace's .git gone, no repository above it is staged."""
    import shutil
    import subprocess

    from skilltune.rollout.workspace import Workspace

    outer = tmp_path / "outer"
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(outer / "ws"))
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/.gitignore_global\n")
    (home / ".gitignore_global").write_text("*.log\n")
    monkeypatch.setenv("HOME", str(home))
    workspace = Workspace.create("t")
    ws = workspace.path
    (ws / ".gitignore").write_text("build/\n")
    (ws / "keep.txt").write_text("k")
    (ws / "gone.txt").write_text("g")
    workspace.commit_baseline()
    (ws / "run.log").write_text("log")
    (ws / "build").mkdir()
    (ws / "build" / "answer.txt").write_text("a")
    (ws / "gone.txt").unlink()
    (ws / "app").mkdir()
    git = ["git", "-c", "user.name=x", "-c", "user.email=x@y"]
    subprocess.run(["git", "init", "-q"], cwd=ws / "app", check=True)
    (ws / "app" / "main.rs").write_text("fn main() {}\n")
    subprocess.run([*git, "add", "."], cwd=ws / "app", check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=ws / "app", check=True)
    diff = workspace.diff()
    for path in ("run.log", "build/answer.txt", "gone.txt", "app/main.rs"):
        assert f"b/{path}" in diff or f"a/{path}" in diff, path
    assert diff.count("diff --git ") == 4, diff  # none of the agent's repository's internals
    assert ".git" not in diff.replace("b/.gitignore", "").replace("a/.gitignore", ""), diff
    assert (ws / "app" / ".git").is_dir()  # the agent's repository is back for the scorer
    # a FIFO and a socket are not files (reading a FIFO would block for ever); a link to a folder
    # is recorded as the link
    import os
    import socket

    os.mkfifo(ws / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(ws / "agent.sock"))
    (ws / "data").mkdir()
    (ws / "data" / "x.txt").write_text("x")
    (ws / "link").symlink_to("data", target_is_directory=True)
    diff = workspace.diff()
    server.close()
    assert "b/link" in diff and "b/data/x.txt" in diff and "pipe" not in diff and "sock" not in diff
    shutil.rmtree(ws / ".git")
    assert workspace.diff().startswith("# skilltune: no diff")
    status = subprocess.run(
        ["git", "status", "--porcelain"], check=True, cwd=outer, capture_output=True, text=True
    ).stdout
    assert not [line for line in status.splitlines() if not line.startswith("??")], status


def test_a_backends_workspace_noise_stays_out_of_the_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paths the CLI writes for itself (opencode's .opencode/ plugin set-up) are not the agent's work."""
    from skilltune.agents.opencode import OpencodeAgent
    from skilltune.rollout.workspace import Workspace

    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(tmp_path / "ws"))
    workspace = Workspace.create("t")
    (workspace.path / ".opencode" / "skills" / "s").mkdir(parents=True)
    (workspace.path / ".opencode" / "skills" / "s" / "SKILL.md").write_text("skill\n")
    workspace.commit_baseline(exclude=OpencodeAgent.workspace_noise)
    (workspace.path / ".opencode" / ".gitignore").write_text("node_modules\n")
    (workspace.path / ".opencode" / "node_modules" / "x").mkdir(parents=True)
    (workspace.path / ".opencode" / "node_modules" / "x" / "index.js").write_text("1\n")
    (workspace.path / ".opencode" / "skills" / "s" / "SKILL.md").write_text("edited\n")
    (workspace.path / "answer.txt").write_text("42\n")
    diff = workspace.diff()
    assert "b/answer.txt" in diff and "b/.opencode/skills/s/SKILL.md" in diff  # the agent's own edits
    assert "node_modules" not in diff and ".opencode/.gitignore" not in diff


def test_workspaces_are_isolated_single_commit_and_cleaned(tmp_path: Path) -> None:
    suite = load_suite(MOCK_SUITE)
    skill = load_skill(MOCK_SKILL)
    seen: list[Path] = []
    findings: list[str] = []

    def audit(job: RolloutJob, ws: Path) -> None:
        seen.append(ws)
        assert not ws.resolve().is_relative_to(MOCK_SUITE.resolve())
        assert not ws.resolve().is_relative_to((tmp_path / "out").resolve())
        log = subprocess.run(
            ["git", "rev-list", "--count", "HEAD"], cwd=ws, capture_output=True, text=True, check=True
        )
        assert log.stdout.strip() == "1"
        findings.extend(audit_workspace(ws, suite, job.task))

    runner = RolloutRunner(
        suite=suite,
        backend=get_backend("mock"),
        options=MockOptions(),
        out=tmp_path / "out",
        on_baseline=audit,
    )
    for task in suite.all_tasks():
        runner.run(RolloutJob(task, "eval", skill, 0, 0))
    assert len(seen) == len(suite.all_tasks())
    assert findings == []
    assert not any(ws.exists() for ws in seen)


def test_audit_finds_planted_reference_data(tmp_path: Path) -> None:
    refs = tmp_path / "suite" / "refs"
    refs.mkdir(parents=True)
    (refs / "gold.md").write_text("the gold answer text\n")
    task = {"id": "t", "prompt": "p", "scoring": {"mode": "exact", "expected": "forty-two exactly"}}
    suite = load_suite(write_suite(tmp_path / "suite", [task], [rule_task("v", ["x"])]))
    ws = tmp_path / "ws"
    ws.mkdir()
    assert audit_workspace(ws, suite, suite.task("t")) == []
    (ws / "copy.md").write_text("the gold answer text\n")
    (ws / "notes.txt").write_text(f"see {suite.root.resolve()}/val.jsonl and forty-two exactly\n")
    (ws / "task.json").write_text("{}")
    found = "\n".join(audit_workspace(ws, suite, suite.task("t")))
    assert "copy.md: a copy of a scoring-contract file" in found
    assert "forty-two exactly" in found
    assert str(suite.root.resolve())[:30] in found
    assert "task.json" in found


def test_python_env_history_is_replaced_by_one_commit(tmp_path: Path) -> None:
    suite = load_suite(PYENV_SUITE)
    counts: list[str] = []

    def count(job: RolloutJob, ws: Path) -> None:
        out = subprocess.run(
            ["git", "rev-list", "--count", "HEAD"], cwd=ws, capture_output=True, text=True, check=True
        )
        counts.append(out.stdout.strip())

    runner = RolloutRunner(
        suite=suite,
        backend=get_backend("mock"),
        options=MockOptions(),
        out=tmp_path / "out",
        on_baseline=count,
    )
    record = runner.run(
        RolloutJob(suite.task("train-slugify"), "eval", load_skill(PYENV_SUITE / "skill"), 0, 0)
    )
    assert counts == ["1"]
    assert record.status == "ok" and record.score is not None


def test_workspace_root_inside_the_suite_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from skilltune.errors import UsageError

    suite_dir = write_suite(tmp_path / "suite", [rule_task("t", ["x"])], [rule_task("v", ["x"])])
    monkeypatch.setenv("SKILLTUNE_WORKSPACES", str(suite_dir / "ws"))
    assert workspaces_root() == suite_dir / "ws"
    runner = RolloutRunner(
        suite=load_suite(suite_dir), backend=get_backend("mock"), options=MockOptions(), out=tmp_path / "out"
    )
    with pytest.raises(UsageError, match="SKILLTUNE_WORKSPACES"):
        runner.run(RolloutJob(runner.suite.task("t"), "train", None, 0, 0))
