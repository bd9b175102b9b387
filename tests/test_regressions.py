"""Regression tests: one per defect a review found (and that is now fixed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from skilltune.agents import AGENTS, AgentRequest, AgentResult, get_backend
from skilltune.agents.mock import MockAgent, MockOptions
from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.plugins import Registry
from skilltune.progress import PlainReporter
from skilltune.proposal import Edit
from skilltune.propose.merge import merge_edits
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, rollout_dir
from skilltune.rollout.workspace import Workspace, git
from skilltune.rundir import RunDir
from skilltune.runfiles import SessionStart
from skilltune.skill import Candidate, load_skill
from skilltune.skill_repo import SkillRepo
from skilltune.store import REDACTED, is_secret_key, read_json, write_json
from skilltune.suite import load_suite, validate_suite
from skilltune.supervise import supervise
from skilltune.training import resume, train
from skilltune.training.budget import Budget, BudgetExhausted
from tests.helpers import MOCK_SKILL, MOCK_SUITE, REPO, rule_task, write_skill, write_suite

cli = CliRunner()
NO_RETRY = RetryPolicy(max_attempts=1, base_s=0, cap_s=0)
FAST: dict[str, Any] = {"gate": "strict", "seed": 0}


def _quiet() -> PlainReporter:
    return PlainReporter(quiet=True)


class _StopAfterStep1(PlainReporter):
    """Creates the run's STOP file when step 1 is reported: the run stops before step 2."""

    def __init__(self, run_root: Path) -> None:
        super().__init__(quiet=True)
        self.stop_file = run_root / "STOP"

    def line(self, text: str) -> None:
        if text.startswith("step 1 "):
            self.stop_file.write_text("")


def _stopped_run(runs: Path, tag: str, max_steps: int, suite: Path = MOCK_SUITE, **settings: Any) -> RunDir:
    """A run of ``max_steps`` steps stopped by a STOP file after step 1."""
    run = RunDir(runs / tag)
    result = train(
        suite,
        settings.pop("skill", MOCK_SKILL),
        tag=tag,
        runs_dir=str(runs),
        max_steps=max_steps,
        reporter=_StopAfterStep1(run.root),
        **{**FAST, **settings},
    )
    assert result.state == "stopped", result.reason
    assert result.steps == 1
    return run


def _tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


# 1 -------------------------------------------------------------------------------------------------
def test_resume_rebuilds_results_and_meta_from_unit_records(tmp_path: Path) -> None:
    """A resumed run rebuilds results.tsv and META.md from step.json files, and step 2's proposer sees step 1."""
    run = _stopped_run(tmp_path, "s", max_steps=3)
    run.results.write_text(run.results.read_text().splitlines()[0] + "\n")
    run.meta.unlink()
    run.stop_file.unlink()
    resumed = resume(run.root, reporter=_quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    reference = train(
        MOCK_SUITE, MOCK_SKILL, tag="ref", runs_dir=str(tmp_path), max_steps=3, reporter=_quiet(), **FAST
    )
    ref = RunDir(Path(reference.run_dir))
    assert run.results.read_text() == ref.results.read_text()
    assert run.meta.read_text() == ref.meta.read_text()
    assert "## Epoch 1" in run.meta.read_text()
    prompt = read_json(run.unit_dir("step", 2) / "reflections.json")["calls"][0]["prompt"]
    assert "## Epoch 1" in prompt and "step 1" in prompt


# 2 -------------------------------------------------------------------------------------------------
def test_candidate_load_ignores_temp_files_and_save_replaces_the_folder(tmp_path: Path) -> None:
    """Candidate.load skips dot-files (an interrupted write's temp file); Candidate.save leaves no old file."""
    seed = load_skill(MOCK_SKILL)
    folder = tmp_path / "candidate"
    seed.save(folder)
    (folder / ".SKILL.md.abc.tmp").write_text("half a write")
    loaded = Candidate.load(folder, seed)
    assert loaded.hash == seed.hash and set(loaded.files) == {"SKILL.md"}
    bigger = seed.replace_file("notes.md", "extra\n")
    bigger.save(folder)
    assert Candidate.load(folder, seed).hash == bigger.hash
    seed.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["SKILL.md"]
    assert Candidate.load(folder, seed).hash == seed.hash


# 3 -------------------------------------------------------------------------------------------------
def test_a_contaminated_gate_verdict_is_not_memoised(tmp_path: Path) -> None:
    """A gate that saw infra errors blocks the run without writing gate.json; resume decides afresh."""
    flag = tmp_path / "gate-down"
    flag.write_text("")

    class GateDownAgent(MockAgent):
        name: ClassVar[str] = "gate-down-test"

        def run(self, request: AgentRequest) -> AgentResult:
            if "/rollouts/gate/" in request.log_dir.as_posix() and flag.exists():
                return AgentResult(status="infra_error", reason="test: gate backend down")
            return super().run(request)

    AGENTS.register(GateDownAgent.name, GateDownAgent)
    try:
        blocked = train(
            MOCK_SUITE,
            MOCK_SKILL,
            tag="g",
            runs_dir=str(tmp_path / "runs"),
            max_steps=1,
            agent=GateDownAgent.name,
            retry=NO_RETRY,
            reporter=_quiet(),
            **FAST,
        )
        run = RunDir(Path(blocked.run_dir))
        assert blocked.state == "blocked", blocked.reason
        assert not (run.unit_dir("step", 1) / "gate.json").exists()
        flag.unlink()
        done = resume(run.root, retry=NO_RETRY, reporter=_quiet())
    finally:
        AGENTS.unregister(GateDownAgent.name)
    assert done.state in ("success", "no-progress"), done.reason
    gate = read_json(run.unit_dir("step", 1) / "gate.json")
    assert gate["decision"] in ("accept", "reject")


# 4 -------------------------------------------------------------------------------------------------
def _record_json(tmp_path: Path) -> str:
    suite = load_suite(MOCK_SUITE)
    runner = RolloutRunner(suite=suite, backend=get_backend("mock"), options=MockOptions(), out=tmp_path)
    job = RolloutJob(suite.tasks("val")[0], "gate", load_skill(MOCK_SKILL), 0, 0)
    runner.run(job)
    return (rollout_dir(tmp_path, job) / "record.json").read_text()


def _place_records(run: RunDir, unit: str, n: int, text: str) -> None:
    for i in range(n):
        path = run.steps / unit / "rollouts" / "gate" / "c" / f"t_r{i}" / "record.json"
        path.parent.mkdir(parents=True)
        path.write_text(text)


def test_rollout_budget_counts_a_resumed_units_own_rollouts_once(tmp_path: Path) -> None:
    """Budget.check raises only when (spent - already) + need > budget, with the message of an uninterrupted run."""
    text = _record_json(tmp_path / "one")
    run = RunDir(tmp_path / "run")
    _place_records(run, "step_0001", 5, text)  # earlier units
    fresh_message = ""
    try:
        Budget(rollouts=8).check(run, need=4, already=0)
    except BudgetExhausted as exc:
        fresh_message = str(exc)
    assert "rollout budget" in fresh_message
    Budget(rollouts=9).check(run, need=4, already=0)

    _place_records(run, "step_0002", 3, text)  # the interrupted unit's own rollouts
    Budget(rollouts=9).check(run, need=4, already=3)  # 8 - 3 + 4 = 9: paid
    with pytest.raises(BudgetExhausted) as caught:
        Budget(rollouts=8).check(run, need=4, already=3)
    assert str(caught.value) == fresh_message
    with pytest.raises(BudgetExhausted):
        Budget(rollouts=9).check(run, need=4, already=0)  # the same 8 records, not the unit's own


# 5 -------------------------------------------------------------------------------------------------
def test_evidence_from_a_run_of_another_suite_is_refused(tmp_path: Path) -> None:
    """--evidence-from a run of a different suite raises UsageError and creates nothing for the new tag."""
    other = tmp_path / "other-suite"
    shutil.copytree(MOCK_SUITE, other)
    lines = (other / "train.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["prompt"] += " (changed)"
    (other / "train.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    runs = tmp_path / "runs"
    train(other, MOCK_SKILL, tag="a", runs_dir=str(runs), max_steps=1, reporter=_quiet(), **FAST)
    before = _tree(runs)
    with pytest.raises(UsageError, match="different suite"):
        train(
            MOCK_SUITE,
            MOCK_SKILL,
            tag="b",
            runs_dir=str(runs),
            max_steps=1,
            evidence_from=str(runs / "a"),
            reporter=_quiet(),
            **FAST,
        )
    assert _tree(runs) == before
    assert not (runs / "b").exists() and not (runs / ".b.lock").exists()


# 6 -------------------------------------------------------------------------------------------------
def test_secret_keys_match_whole_key_names_and_roles_do_not_block_resume(tmp_path: Path) -> None:
    """is_secret_key flags api_key-like names only; a run with proposer roles {"author": ...} resumes."""
    for key in ("api_key", "apiKey", "auth_token", "password", "secret", "OPENAI_API_KEY"):
        assert is_secret_key(key), key
    for key in ("author", "roles", "tokens_in", "api_key_env", "model"):
        assert not is_secret_key(key), key
    run = _stopped_run(tmp_path, "r", max_steps=2, proposer_options={"roles": {"author": "x"}})
    stored = read_json(run.config)
    assert stored["proposer_options"] == {"roles": {"author": "x"}}
    assert REDACTED not in run.config.read_text()
    resumed = resume(run.root, reporter=_quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    assert resumed.steps == 2


# 7 -------------------------------------------------------------------------------------------------
def test_run_lock_beside_the_run_dir_blocks_force(tmp_path: Path) -> None:
    """The lock is runs/.TAG.lock; while held, train --force refuses ("in use"), stages nothing, deletes nothing."""
    train(MOCK_SUITE, MOCK_SKILL, tag="t", runs_dir=str(tmp_path), max_steps=1, reporter=_quiet(), **FAST)
    run = RunDir(tmp_path / "t")
    assert run.lock().path == tmp_path / ".t.lock"
    before = _tree(run.root)
    results = run.results.read_text()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys,time;f=open(sys.argv[1],'a+');fcntl.flock(f,fcntl.LOCK_EX);"
            "print('locked',flush=True);time.sleep(30)",
            str(run.lock().path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        with pytest.raises(UsageError, match="in use"):
            train(
                MOCK_SUITE,
                MOCK_SKILL,
                tag="t",
                runs_dir=str(tmp_path),
                max_steps=1,
                force=True,
                reporter=_quiet(),
                **FAST,
            )
    finally:
        holder.kill()
        holder.wait()
    assert not list(tmp_path.glob(".t.staging*"))
    assert _tree(run.root) == before and run.results.read_text() == results


# 8 -------------------------------------------------------------------------------------------------
def test_records_are_reused_only_for_the_same_job(tmp_path: Path) -> None:
    """RolloutRunner.reusable: same runner and job -> the record; other options, seed or infra_error -> None."""
    suite = load_suite(MOCK_SUITE)
    skill = load_skill(MOCK_SKILL)

    def runner(options: MockOptions) -> RolloutRunner:
        return RolloutRunner(suite=suite, backend=get_backend("mock"), options=options, out=tmp_path)

    job = RolloutJob(suite.tasks("val")[0], "gate", skill, 3, 7)
    record = runner(MockOptions()).run(job)
    assert runner(MockOptions()).reusable(job) == record
    assert runner(MockOptions(placement="system")).reusable(job) is None
    other_seed = RolloutJob(job.task, job.phase, skill, job.replicate, 8)
    assert rollout_dir(tmp_path, other_seed) == rollout_dir(tmp_path, job)
    assert runner(MockOptions()).reusable(other_seed) is None
    broken = record.model_copy(update={"status": "infra_error", "score": None})
    write_json(rollout_dir(tmp_path, job) / "record.json", broken)
    assert runner(MockOptions()).reusable(job) is None


# 9 -------------------------------------------------------------------------------------------------
def test_resume_clears_the_stop_file_of_the_previous_stop(tmp_path: Path) -> None:
    """After a STOP-file stop, resume (STOP left in place) runs to the end and removes STOP."""
    run = _stopped_run(tmp_path, "s", max_steps=2)
    assert run.stop_file.exists()
    resumed = resume(run.root, reporter=_quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    assert resumed.steps == 2
    assert not run.stop_file.exists()


# 10 ------------------------------------------------------------------------------------------------
def test_python_env_ids_that_collide_as_file_names_are_invalid(tmp_path: Path) -> None:
    """A Python env whose task ids "val a" and "val_a" share a safe id fails validation ("file names")."""
    env = tmp_path / "env.py"
    env.write_text(
        "def tasks(split):\n"
        "    ids = {'train': ['t1'], 'val': ['val a', 'val_a'], 'test': []}[split]\n"
        "    return [{'id': i, 'prompt': 'Do it.'} for i in ids]\n"
        "\n"
        "def prepare(task, workspace):\n"
        "    pass\n"
        "\n"
        "def score(task, workspace, agent_result):\n"
        "    return {'hard': 1, 'soft': 1.0}\n"
    )
    problems = [str(p) for p in validate_suite(env)]
    assert any("file names" in p and "val_a" in p for p in problems), problems
    with pytest.raises(UsageError, match="file names"):
        load_suite(env)


# 11 ------------------------------------------------------------------------------------------------
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


# 12 ------------------------------------------------------------------------------------------------
def test_config_stores_absolute_paths_and_resume_works_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative suite, skill and runs_dir are stored absolute; resume works from another working directory."""
    shutil.copytree(MOCK_SUITE, tmp_path / "suite")
    shutil.copytree(MOCK_SKILL, tmp_path / "skill")
    monkeypatch.chdir(tmp_path)
    run = _stopped_run(Path("runs"), "rel", max_steps=2, suite=Path("suite"), skill=Path("skill"))
    stored = read_json(tmp_path / "runs" / "rel" / "config.json")
    assert stored["suite"] == str((tmp_path / "suite").resolve())
    assert stored["skill"] == str((tmp_path / "skill").resolve())
    assert stored["runs_dir"] == str((tmp_path / "runs").resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resumed = resume(tmp_path / run.root, reporter=_quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    assert resumed.steps == 2
    assert not (elsewhere / "runs").exists()


# 13 ------------------------------------------------------------------------------------------------
def test_supervise_does_not_resume_a_run_when_the_first_command_is_bad_input(tmp_path: Path) -> None:
    """supervise returns 2 on a refused first command and leaves an existing unfinished run alone."""
    runs = tmp_path / "runs"
    train(MOCK_SUITE, MOCK_SKILL, tag="t", runs_dir=str(runs), max_steps=1, reporter=_quiet(), **FAST)
    run = RunDir(runs / "t")
    run.terminal_path.unlink()  # looks like a run that died
    sessions = sum(1 for e in run.read_journal() if isinstance(e, SessionStart))
    first = ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--tag", "t", "--runs-dir", str(runs)]
    assert supervise(first, run.root, max_restarts=2, backoff_s=0) == 2
    assert sum(1 for e in run.read_journal() if isinstance(e, SessionStart)) == sessions
    assert run.terminal() is None


# 14 ------------------------------------------------------------------------------------------------
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
        before = _tree(tmp_path)
        result = cli.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (message, result.output)
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit), (args, result.exception)
        assert _tree(tmp_path) == before, args
    assert a_file.read_text() == "not a folder\n"


# 15 ------------------------------------------------------------------------------------------------
def test_a_seed_with_an_old_lint_error_can_still_improve(tmp_path: Path) -> None:
    """Candidates of a seed that links to a missing file are not discarded for that pre-existing error."""
    skill = tmp_path / "skill"
    shutil.copytree(MOCK_SKILL, skill)
    with (skill / "SKILL.md").open("a") as handle:
        handle.write("\nSee [the checklist](missing-checklist.md) before publishing.\n")
    result = train(
        MOCK_SUITE, skill, tag="l", runs_dir=str(tmp_path / "runs"), max_steps=2, reporter=_quiet(), **FAST
    )
    run = RunDir(Path(result.run_dir))
    steps = [read_json(run.unit_dir("step", n) / "step.json") for n in (1, 2)]
    assert any(s["decision"] != "lint" for s in steps), steps
    assert not [s for s in steps if "missing-checklist" in s["reason"]], steps


# 16 ------------------------------------------------------------------------------------------------
def test_a_broken_plugin_only_breaks_itself() -> None:
    """A registry with a good and a broken entry point loads the good one; get("bad") names the bad one."""
    group = "skilltune.regression-test"
    registry: Registry[Any] = Registry(group, "widget")
    registry._points = {
        "good": EntryPoint(name="good", value="json:dumps", group=group),
        "bad": EntryPoint(name="bad", value="no_such_module_xyz:Thing", group=group),
    }
    assert registry.names() == ["bad", "good"]
    with pytest.raises(UsageError, match=r"widget plug-in 'bad'.*no_such_module_xyz"):
        registry.get("bad")
    assert registry.get("good") is json.dumps
    with pytest.raises(UsageError, match="'bad'"):
        registry.find("bad")


# 17 ------------------------------------------------------------------------------------------------
def test_a_scoring_errors_reason_stays_out_of_the_conversation(tmp_path: Path) -> None:
    """A timed-out scoring command quoting an answer is in record.json's reason, not in conversation.json."""
    secret = "ANSWER-XYZZY-42"
    scoring = {"mode": "command", "command": f'sleep 5; grep -q {secret} "$TASK_OUTPUT"', "timeout": 0.3}
    task = rule_task("t", ["state-a-default"], scoring=scoring)
    suite = load_suite(write_suite(tmp_path / "suite", [task], [rule_task("v", ["state-a-default"])]))
    skill = load_skill(write_skill(tmp_path / "skill", "State a default."))
    runner = RolloutRunner(
        suite=suite, backend=get_backend("mock"), options=MockOptions(), out=tmp_path / "out", retry=NO_RETRY
    )
    job = RolloutJob(suite.task("t"), "train", skill, 0, 0)
    record = runner.run(job)
    assert record.status == "scoring_error"
    assert record.reason is not None and secret in record.reason
    folder = rollout_dir(tmp_path / "out", job)
    assert secret in (folder / "record.json").read_text()
    assert secret not in (folder / "conversation.json").read_text()


# 18 ------------------------------------------------------------------------------------------------
def test_merge_counts_only_shown_trajectory_ids_as_support() -> None:
    """With known ids, an edit citing invented trajectories loses to one backed by two real ones."""
    incumbent = load_skill(MOCK_SKILL)
    invented = Edit(op="append", text="- Invented rule.", support=["x#r1", "y#r2", "z#r3"], rank=0)
    real = Edit(op="append", text="- Real rule.", support=["train-a#r0", "train-b#r0", "ghost#r9"], rank=1)
    known = {"train-a#r0", "train-b#r0", "train-c#r0"}
    unchecked = merge_edits([invented, real], incumbent, budget=1)
    assert [m.edit.text for m in unchecked.kept] == ["- Invented rule."]
    merged = merge_edits([invented, real], incumbent, budget=1, known=known)
    assert [m.edit.text for m in merged.kept] == ["- Real rule."]
    assert merged.kept[0].support == ["train-a#r0", "train-b#r0"]
    assert [d["reason"] for d in merged.dropped] == ["over the step's edit budget (1)"]


# 19 ------------------------------------------------------------------------------------------------
def test_skill_repo_ensure_restores_a_missing_best_tag(tmp_path: Path) -> None:
    """SkillRepo.ensure on an existing repository without tag best puts best back on the seed commit."""
    seed = load_skill(MOCK_SKILL)
    repo = SkillRepo(tmp_path / "repo", "skilltune/incident-postmortem/t")
    repo.ensure(seed)
    seed_commit = repo.find("seed")
    assert seed_commit is not None
    git(repo.path, "tag", "-d", "best")
    assert git(repo.path, "rev-parse", "--verify", "-q", "best", check=False).returncode != 0
    repo.ensure(seed)
    assert git(repo.path, "rev-parse", "best").stdout.decode().strip() == seed_commit
    assert repo.find("seed") == seed_commit  # the repository was kept, not rebuilt


# 20 ------------------------------------------------------------------------------------------------
def test_write_text_files_are_readable_by_others_under_umask_022(tmp_path: Path) -> None:
    """Under umask 022, store.write_text makes files of mode 0o644 (not mkstemp's 0o600)."""
    target = tmp_path / "sub" / "file.json"
    code = "import sys; from pathlib import Path; from skilltune.store import write_text; write_text(Path(sys.argv[1]), 'x')"
    # A fresh interpreter started under umask 022 (skilltune.store reads the umask when imported).
    subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$0" -c "$1" "$2"', sys.executable, code, str(target)],
        check=True,
        cwd=REPO,
    )
    assert target.read_text() == "x"
    assert target.stat().st_mode & 0o777 == 0o644


# --- second review ---------------------------------------------------------------------------------


def test_cache_key_covers_the_agents_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A model or endpoint taken from the environment is part of the rollout's cache key (secrets are not)."""
    from skilltune.agents import get_backend
    from skilltune.rollout.runner import RolloutRunner

    backend = get_backend("claude")

    def key() -> str:
        options = backend.parse_options({})
        return RolloutRunner(
            suite=load_suite(MOCK_SUITE), backend=backend, options=options, out=tmp_path
        ).options_hash

    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "one")
    haiku = key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "two")
    assert key() == haiku  # a different key does not change what the agent does
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-sonnet-4-6")
    assert key() != haiku
    identity = backend.cache_identity(backend.parse_options({}))
    assert (
        "ANTHROPIC_API_KEY" not in identity["env"]
        and identity["env"]["ANTHROPIC_MODEL"] == "claude-sonnet-4-6"
    )
    # per-session values never change the key (resume and a shared cache must still hit)
    sonnet = key()
    monkeypatch.setenv("AWS_SESSION_TOKEN", "s1")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "b1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA1")
    assert key() == sonnet
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.internal")
    assert key() != sonnet
    copilot = get_backend("copilot")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus")
    assert copilot.cache_identity(copilot.parse_options({}))["env"] == {}


def test_cli_version_in_the_cache_key_is_the_number_and_a_failure_is_not_remembered(tmp_path: Path) -> None:
    from skilltune.agents.base import version_number

    exe = tmp_path / "agent"
    exe.write_text("#!/bin/sh\necho 'Claude Code 2.1.4 (build 77)'\n")
    exe.chmod(0o755)
    assert version_number(str(exe)) == "2.1.4"
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'error: cannot read config' >&2\nexit 1\n")
    broken.chmod(0o755)
    assert version_number(str(broken)) is None
    broken.write_text("#!/bin/sh\necho 0.9.1\n")
    assert version_number(str(broken)) == "0.9.1"  # asked again: the failure was not cached


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


def test_rollouts_copied_from_a_shared_cache_cost_the_run_nothing(tmp_path: Path) -> None:
    """A second run replaying every rollout from the shared cache spends no rollout budget."""
    from skilltune.progress import PlainReporter
    from skilltune.training.budget import spent

    cache = str(tmp_path / "cache")
    kwargs: dict[str, Any] = {"runs_dir": str(tmp_path), "max_steps": 2, "seed": 4, "cache": cache}
    first = train(MOCK_SUITE, MOCK_SKILL, tag="a", reporter=PlainReporter(quiet=True), **kwargs)
    second = train(MOCK_SUITE, MOCK_SKILL, tag="b", reporter=PlainReporter(quiet=True), **kwargs)
    assert first.best_hash == second.best_hash
    ran = spent(RunDir(tmp_path / "a"))
    replayed = spent(RunDir(tmp_path / "b"))
    assert ran.rollouts > 0 and replayed.rollouts == 0 and replayed.cost_usd == 0
    units = list((tmp_path / "b" / "steps").glob("*/step.json"))
    assert units and all(read_json(u)["rollouts"] == 0 for u in units)
    cached = list((tmp_path / "b").rglob("record.json"))
    assert cached and all(read_json(p)["cached_from"] for p in cached)


def test_gate_options_cannot_set_alpha_and_only_the_sequential_gate_records_one(tmp_path: Path) -> None:
    from skilltune.progress import PlainReporter

    quiet: dict[str, Any] = {"reporter": PlainReporter(quiet=True), "runs_dir": str(tmp_path), "seed": 1}
    with pytest.raises(UsageError, match="run-wide alpha"):
        train(MOCK_SUITE, MOCK_SKILL, tag="a", gate_options={"alpha": 0.2}, **quiet)
    assert not (tmp_path / "a").exists()
    train(MOCK_SUITE, MOCK_SKILL, tag="s", gate="strict", max_steps=2, **quiet)
    verdicts = [read_json(p) for p in (tmp_path / "s" / "steps").glob("*/gate.json")]
    assert verdicts and all(v["alpha"] is None for v in verdicts)


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


def test_command_checkers_find_the_suite_when_it_was_given_as_a_relative_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SKILLTUNE_SUITE is absolute: the command runs in the workspace, not where skilltune started."""
    from skilltune.measure.evaluate import evaluate

    task = {
        "id": "t",
        "prompt": "p",
        "scoring": {"mode": "command", "command": 'test -f "$SKILLTUNE_SUITE/refs/check.sh"'},
    }
    root = write_suite(tmp_path / "suite", [dict(task, id="train-t")], [task])
    (root / "refs").mkdir()
    (root / "refs" / "check.sh").write_text("true\n")
    monkeypatch.chdir(tmp_path)
    summary = evaluate("suite", None, out=tmp_path / "out", workers=1)
    assert summary.hard_acc == 1.0, summary.per_task


def test_validate_reports_every_config_problem_and_checks_tasks_against_the_chosen_mode(
    tmp_path: Path,
) -> None:
    task = {"id": "t", "prompt": "p", "scoring": {"expected": "x"}}  # exact mode's field, mode from config
    exact = write_suite(
        tmp_path / "a", [dict(task, id="tr")], [task], config={"default_mode": "exact", "mixed_weight": 2}
    )
    messages = [p.message for p in validate_suite(exact)]
    assert len(messages) == 1 and "mixed_weight" in messages[0], messages
    broken = write_suite(
        tmp_path / "b", [dict(task, id="tr")], [task], config={"default_mode": "nope", "mixed_weight": 2}
    )
    messages = [p.message for p in validate_suite(broken)]
    assert any("default_mode 'nope'" in m for m in messages) and any("mixed_weight" in m for m in messages)
    assert not any("needs" in m or "required" in m for m in messages), (
        messages
    )  # no task checked as checklist
