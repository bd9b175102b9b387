"""Every scoring mode, the Score invariants, contract stamps and the scorer registry."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents.base import AgentResult
from skilltune.errors import ContractMismatchError, ScoringError, UsageError
from skilltune.score import (
    SCORE_SCHEMA_VERSION,
    Score,
    Scorer,
    make_score,
    register_scorer,
    require_same_contract,
    scorer_class,
    scoring_modes,
)
from skilltune.score.context import ScoringContext
from skilltune.score.registry import SCORERS
from skilltune.suite import Suite, Task, load_suite, validate_suite

WEIGHT = 0.25
VAL_TASK: dict[str, Any] = {
    "id": "val-1",
    "prompt": "say ok",
    "scoring": {"mode": "checklist", "required": ["ok"]},
}


# --- helpers ---------------------------------------------------------------------------------


def write_suite(
    root: Path,
    train: list[dict[str, Any]],
    *,
    config: Mapping[str, Any] | None = None,
    rubric: str | None = None,
    val: list[dict[str, Any]] | None = None,
    files: Mapping[str, str] | None = None,
) -> Path:
    """A jsonl suite folder: scoring.md with a json config block, train/val.jsonl, extras."""
    root.mkdir(parents=True, exist_ok=True)
    cfg = dict(config) if config is not None else {"default_mode": "checklist", "mixed_weight": WEIGHT}
    (root / "scoring.md").write_text(
        f"# Scoring\n\n```json\n{json.dumps(cfg, indent=2)}\n```\n\nProse about the contract.\n",
        encoding="utf-8",
    )
    (root / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in train), encoding="utf-8")
    val_tasks = val if val is not None else [VAL_TASK]
    (root / "val.jsonl").write_text("".join(json.dumps(t) + "\n" for t in val_tasks), encoding="utf-8")
    if rubric is not None:
        (root / "rubric.py").write_text(rubric, encoding="utf-8")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def make_suite(tmp_path: Path, train: list[dict[str, Any]], **kwargs: Any) -> Suite:
    return load_suite(write_suite(tmp_path / "suite", train, **kwargs))


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


def score_text(suite: Suite, task_id: str, ws: Path, text: str, **result: Any) -> Score:
    """Score ``text`` as the agent's final output; every score must carry the suite's contract."""
    task = suite.task(task_id)
    score = suite.scorer(task).score(task, ws, AgentResult(status="ok", final_text=text, **result))
    assert score.contract == suite.contract_hash
    weight = suite.config.mixed_weight
    assert score.mixed == pytest.approx((1 - weight) * score.hard + weight * score.soft, abs=1e-6)
    return score


def task(task_id: str, **scoring: Any) -> dict[str, Any]:
    return {"id": task_id, "prompt": f"do {task_id}", "scoring": scoring}


def pgrep(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return out.stdout.split()


def wait_gone(pattern: str, within: float = 60.0) -> list[str]:
    """Pids still matching ``pattern`` after waiting up to ``within`` seconds (SIGKILL is async)."""
    deadline = time.monotonic() + within
    left = pgrep(pattern)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = pgrep(pattern)
    return left


def unique_seconds(base: int) -> str:
    """A sleep duration that doubles as a marker no other process on the machine carries."""
    return f"{base}.{uuid.uuid4().int % 10**9:09d}"


# --- exact -------------------------------------------------------------------------------------


@pytest.fixture
def exact_suite(tmp_path: Path) -> Suite:
    return make_suite(
        tmp_path,
        [
            task("re", mode="exact", expected=r"answer:\s*4[0-9]\b"),
            task("ci", mode="exact", expected="DONE", ignore_case=True),
            task("cs", mode="exact", expected="DONE"),
        ],
    )


def test_exact_regex_found(exact_suite: Suite, tmp_path: Path) -> None:
    score = score_text(exact_suite, "re", workspace(tmp_path), "thinking...\nanswer:   42\n")
    assert (score.hard, score.soft) == (1, 1.0)
    assert score.checks == ["expected_found"]
    assert score.mixed == 1.0


def test_exact_regex_not_found(exact_suite: Suite, tmp_path: Path) -> None:
    score = score_text(exact_suite, "re", workspace(tmp_path), "answer: 4 or 52")
    assert (score.hard, score.soft, score.mixed) == (0, 0.0, 0.0)
    assert score.checks == ["expected_missing"]


def test_exact_ignore_case(exact_suite: Suite, tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    assert score_text(exact_suite, "ci", ws, "all done.").hard == 1
    assert score_text(exact_suite, "cs", ws, "all done.").hard == 0
    assert score_text(exact_suite, "cs", ws, "all DONE.").hard == 1


def test_exact_is_the_default_mode_when_configured(tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path,
        [{"id": "t", "prompt": "p", "scoring": {"expected": "yes"}}],
        config={"default_mode": "exact", "mixed_weight": WEIGHT},
    )
    assert suite.scoring_mode(suite.task("t")) == "exact"
    assert score_text(suite, "t", workspace(tmp_path), "yes").hard == 1


# --- checklist ---------------------------------------------------------------------------------


@pytest.fixture
def checklist_suite(tmp_path: Path) -> Suite:
    # no "mode": checklist is the suite's default_mode
    return make_suite(tmp_path, [task("c", required=["alpha", "beta", "gamma"])])


def test_checklist_all_found(checklist_suite: Suite, tmp_path: Path) -> None:
    score = score_text(checklist_suite, "c", workspace(tmp_path), "gamma beta alpha")
    assert (score.hard, score.soft, score.mixed) == (1, 1.0, 1.0)
    assert score.checks == ["found:alpha", "found:beta", "found:gamma"]


def test_checklist_partial(checklist_suite: Suite, tmp_path: Path) -> None:
    score = score_text(checklist_suite, "c", workspace(tmp_path), "alpha and beta only")
    assert score.hard == 0
    assert score.soft == pytest.approx(2 / 3, abs=1e-6)
    assert score.mixed == pytest.approx((1 - WEIGHT) * 0 + WEIGHT * 2 / 3, abs=1e-6)
    assert score.checks == ["found:alpha", "found:beta", "missing:gamma"]


def test_checklist_none(checklist_suite: Suite, tmp_path: Path) -> None:
    score = score_text(checklist_suite, "c", workspace(tmp_path), "nothing relevant")
    assert (score.hard, score.soft, score.mixed) == (0, 0.0, 0.0)
    assert score.checks == ["missing:alpha", "missing:beta", "missing:gamma"]


def test_checklist_is_case_sensitive_substring(checklist_suite: Suite, tmp_path: Path) -> None:
    score = score_text(checklist_suite, "c", workspace(tmp_path), "ALPHA xbetax")
    assert score.checks == ["found:beta", "missing:alpha", "missing:gamma"]
    assert score.soft == pytest.approx(1 / 3, abs=1e-6)


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 1.0])
def test_mixed_uses_the_configured_weight(tmp_path: Path, weight: float) -> None:
    suite = make_suite(
        tmp_path,
        [task("c", required=["a1", "b2", "c3", "d4"])],
        config={"default_mode": "checklist", "mixed_weight": weight},
    )
    t = suite.task("c")
    partial = suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text="a1 b2 c3"))
    assert suite.config.mixed_weight == weight
    assert partial.mixed == pytest.approx(weight * 0.75, abs=1e-6)
    full = suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text="a1 b2 c3 d4"))
    assert full.mixed == pytest.approx(1.0)


# --- command -----------------------------------------------------------------------------------


def test_command_exit_codes(tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path,
        [
            task("pass", mode="command", command="exit 0"),
            task("fail", mode="command", command="echo first; echo why-it-failed; exit 3"),
        ],
    )
    ws = workspace(tmp_path)
    passed = score_text(suite, "pass", ws, "")
    assert (passed.hard, passed.soft, passed.mixed) == (1, 1.0, 1.0)
    # skill-trainer would score an empty output 0 without running the command: the score says so
    assert passed.checks == [
        "command_exit:0",
        "note: empty final output (skill-trainer scores it 0 without running the command)",
    ]
    failed = score_text(suite, "fail", ws, "some output")
    assert (failed.hard, failed.soft, failed.mixed) == (0, 0.0, 0.0)
    assert failed.checks == ["command_exit:3", "command_output:why-it-failed"]


def test_command_exit_one_is_a_zero_not_an_error(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [task("t", mode="command", command="exit 1")])
    assert score_text(suite, "t", workspace(tmp_path), "").hard == 0


def test_command_runs_in_the_workspace(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [task("t", mode="command", command="test -f made.txt")])
    ws = workspace(tmp_path)
    assert score_text(suite, "t", ws, "").hard == 0
    (ws / "made.txt").write_text("x", encoding="utf-8")
    assert score_text(suite, "t", ws, "").hard == 1


def test_command_task_output_holds_the_final_text(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [task("t", mode="command", command='grep -q DONE "$TASK_OUTPUT"')])
    ws = workspace(tmp_path)
    assert score_text(suite, "t", ws, "all DONE here").hard == 1
    assert score_text(suite, "t", ws, "not finished").hard == 0
    assert list(ws.iterdir()) == []  # the scorer's temporary output file is not put in the workspace


def test_command_task_output_uses_an_explicit_output_file(tmp_path: Path) -> None:
    spy = 'cp "$TASK_OUTPUT" seen-output.txt && printf %s "$TASK_OUTPUT" > seen-path.txt'
    suite = make_suite(tmp_path, [task("t", mode="command", command=spy)])
    ws = workspace(tmp_path)
    out = tmp_path / "record" / "output.txt"
    out.parent.mkdir()
    out.write_text("DONE from the record file", encoding="utf-8")
    score = score_text(suite, "t", ws, "final text differs", output_file=out)
    assert score.hard == 1
    assert (ws / "seen-path.txt").read_text(encoding="utf-8") == str(out)
    assert (ws / "seen-output.txt").read_text(encoding="utf-8") == "DONE from the record file"
    assert out.exists()  # the caller's file is left alone


def test_command_environment(tmp_path: Path) -> None:
    spy = 'printf %s "$SKILLTUNE_SUITE" > suite.txt && printf %s "$SKILLTUNE_TASK_ID" > task.txt'
    suite = make_suite(tmp_path, [task("env-task", mode="command", command=spy)])
    ws = workspace(tmp_path)
    assert score_text(suite, "env-task", ws, "").hard == 1
    assert Path((ws / "suite.txt").read_text(encoding="utf-8")) == suite.root
    assert (ws / "task.txt").read_text(encoding="utf-8") == "env-task"


def test_command_can_run_a_checker_kept_under_refs(tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path,
        [task("t", mode="command", command='sh "$SKILLTUNE_SUITE/refs/check.sh"')],
        files={"refs/check.sh": 'grep -q "^42$" "$TASK_OUTPUT"\n'},
    )
    ws = workspace(tmp_path)
    assert score_text(suite, "t", ws, "41\n42\n").hard == 1
    assert score_text(suite, "t", ws, "420\n").hard == 0


def test_command_timeout_raises_quickly_and_kills_the_group(tmp_path: Path) -> None:
    """The 0.5 s limit is the point; the proof that it was not waited out is a margin no loaded machine
    eats: the foreground command sleeps 200 s, the call must be back in 60."""
    background = unique_seconds(300)
    foreground = unique_seconds(200)
    command = f"sleep {background} & sleep {foreground}"
    suite = make_suite(tmp_path, [task("slow", mode="command", command=command, timeout=0.5)])
    t = suite.task("slow")
    started = time.monotonic()
    try:
        with pytest.raises(ScoringError, match="timed out"):
            suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text=""))
        assert time.monotonic() - started < 60
        assert wait_gone(f"sleep {background}") == []
        assert wait_gone(f"sleep {foreground}") == []
    finally:
        for pattern in (background, foreground):
            subprocess.run(["pkill", "-KILL", "-f", f"sleep {pattern}"], check=False)


def test_command_that_exits_leaving_a_background_child_still_passes(tmp_path: Path) -> None:
    background = unique_seconds(300)
    suite = make_suite(
        tmp_path, [task("bg", mode="command", command=f"sleep {background} & exit 0", timeout=120)]
    )
    try:
        score = score_text(suite, "bg", workspace(tmp_path), "")
        assert score.hard == 1
        assert wait_gone(f"sleep {background}") == []
    finally:
        subprocess.run(["pkill", "-KILL", "-f", f"sleep {background}"], check=False)


# --- rubric ------------------------------------------------------------------------------------

RUBRIC_DICT = """\
import json
from pathlib import Path


def score(task, workdir, mode):
    Path(workdir, "rubric-args.json").write_text(
        json.dumps(
            {
                "task_type": type(task).__name__,
                "task": task,
                "workdir_type": type(workdir).__name__,
                "workdir": str(workdir),
                "mode": mode,
            }
        )
    )
    good = "good" in Path(workdir, "output.txt").read_text()
    return {"hard": int(good), "soft": 0.5, "checks": ["read-output", f"good:{good}"]}
"""

RUBRIC_OBJECT = """\
class Verdict:
    def __init__(self, hard, soft, checks):
        self.hard = hard
        self.soft = soft
        self.checks = checks


def score(task, workdir, mode):
    return Verdict(0, 0.75, ["from-object"])
"""

RUBRIC_RAISES = """\
def score(task, workdir, mode):
    raise KeyError("no such rubric item")
"""


def rubric_suite(tmp_path: Path, rubric: str) -> Suite:
    return make_suite(
        tmp_path,
        [{"id": "r", "prompt": "write it", "answer": 7, "scoring": {"mode": "rubric", "level": 2}}],
        rubric=rubric,
    )


def test_rubric_returning_a_dict(tmp_path: Path) -> None:
    suite = rubric_suite(tmp_path, RUBRIC_DICT)
    ws = workspace(tmp_path)
    (ws / "output.txt").write_text("a good answer", encoding="utf-8")
    score = score_text(suite, "r", ws, "a good answer")
    assert (score.hard, score.soft) == (1, 0.5)
    assert score.mixed == pytest.approx(0.75 * 1 + 0.25 * 0.5)
    assert score.checks == ["read-output", "good:True"]


def test_rubric_receives_task_dict_workspace_and_cheap(tmp_path: Path) -> None:
    suite = rubric_suite(tmp_path, RUBRIC_DICT)
    ws = workspace(tmp_path)
    (ws / "output.txt").write_text("meh", encoding="utf-8")
    score = score_text(suite, "r", ws, "meh")
    assert score.hard == 0
    args = json.loads((ws / "rubric-args.json").read_text(encoding="utf-8"))
    assert args["task_type"] == "dict"
    assert args["task"] == {
        "id": "r",
        "prompt": "write it",
        "files": [],
        "answer": 7,
        "scoring": {"mode": "rubric", "level": 2},
        "split": "train",  # skill-trainer's task.json carries the split: rubrics may read it
    }
    assert Path(args["workdir"]) == ws
    assert args["workdir_type"].endswith("Path")
    assert args["mode"] == "cheap"


def test_rubric_returning_an_object(tmp_path: Path) -> None:
    score = score_text(rubric_suite(tmp_path, RUBRIC_OBJECT), "r", workspace(tmp_path), "")
    assert (score.hard, score.soft) == (0, 0.75)
    assert score.checks == ["from-object"]


def test_rubric_raising_is_a_scoring_error(tmp_path: Path) -> None:
    suite = rubric_suite(tmp_path, RUBRIC_RAISES)
    t = suite.task("r")
    with pytest.raises(ScoringError, match="KeyError"):
        suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text=""))


def test_rubric_that_fails_to_import_is_a_scoring_error(tmp_path: Path) -> None:
    rubric = "import skilltune_no_such_module_for_tests\n\n\ndef score(task, workdir, mode):\n    return {}\n"
    suite = rubric_suite(tmp_path, rubric)
    t = suite.task("r")
    with pytest.raises(ScoringError):
        suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text=""))


@pytest.mark.parametrize(
    ("hard", "read_as", "note"),
    [("0.8", 0, True), ("1.0", 1, False), ("True", 1, False), ("'1'", 1, True), ("0.999", 0, True)],
)
def test_rubric_hard_is_read_as_skill_trainer_reads_it(
    tmp_path: Path, hard: str, read_as: int, note: bool
) -> None:
    """skill-trainer takes int(hard): a fractional hard truncates (with a warning), never a refusal."""
    suite = rubric_suite(
        tmp_path, f"def score(task, workdir, mode):\n    return {{'hard': {hard}, 'soft': 0.5}}\n"
    )
    t = suite.task("r")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        score = suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text="x"))
    assert (score.hard, score.soft) == (read_as, 0.5)
    warned = [c for c in score.checks if c.startswith("warning: ")]
    assert bool(warned) == note == bool(caught)
    if note:
        assert warned == [
            f"warning: returned hard={eval(hard)!r}, read as {read_as} (int(), as skill-trainer does)"
        ]


@pytest.mark.parametrize(
    "answer",
    [
        '{"hard": 2, "soft": 0.5}',
        '{"hard": 1, "soft": 1.5}',
        '{"hard": 0, "soft": -0.1}',
        '{"hard": 1, "soft": float("nan")}',
        '{"hard": 1}',
        '{"soft": 1.0}',
        '{"hard": "yes", "soft": 1.0}',
        "None",
        "0",
        "[1, 1.0]",
    ],
)
def test_rubric_returning_an_invalid_score_is_a_scoring_error(tmp_path: Path, answer: str) -> None:
    suite = rubric_suite(tmp_path, f"def score(task, workdir, mode):\n    return {answer}\n")
    t = suite.task("r")
    with pytest.raises(ScoringError):
        suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text=""))


# --- Score invariants --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hard", "soft"),
    [
        (2, 0.5),
        (-1, 0.5),
        (0.5, 0.5),
        (math.nan, 0.5),
        (1, 1.5),
        (1, -0.01),
        (1, math.nan),
        (1, math.inf),
        ("x", 0.5),
        (None, 0.5),
        (1, None),
    ],
)
def test_make_score_refuses_out_of_range_values(hard: Any, soft: Any) -> None:
    with pytest.raises(ScoringError):
        make_score(hard, soft, [], weight=0.5, contract="c" * 64)


def test_make_score_accepts_valid_values() -> None:
    score = make_score(1.0, 0.5, ["a", 3], weight=WEIGHT, contract="abc")
    assert score.hard == 1
    assert isinstance(score.hard, int)
    assert score.soft == 0.5
    assert score.mixed == pytest.approx(0.875)
    assert score.checks == ["a", "3"]
    assert score.contract == "abc"
    assert make_score(0, 0.0, [], weight=1.0, contract="abc").mixed == 0.0
    assert make_score(0, 1.0, [], weight=0.0, contract="abc").mixed == 0.0


def test_score_file_json_keys() -> None:
    score = make_score(1, 0.25, ["x"], weight=0.5, contract="h" * 64, feedback=" all found \n")
    data = score.file_json()
    assert set(data) == {"schema_version", "hard", "soft", "mixed", "checks", "contract", "feedback"}
    assert data["schema_version"] == SCORE_SCHEMA_VERSION == 2
    assert data == {
        "schema_version": SCORE_SCHEMA_VERSION,
        "hard": 1,
        "soft": 0.25,
        "mixed": 0.625,
        "checks": ["x"],
        "contract": "h" * 64,
        "feedback": "all found",
    }
    json.dumps(data)  # serialisable as is


def test_score_metric() -> None:
    score = make_score(1, 0.25, [], weight=0.5, contract="c")
    assert [score.metric(m) for m in ("hard", "soft", "mixed")] == [1.0, 0.25, 0.625]
    with pytest.raises(UsageError, match="unknown metric"):
        score.metric("checks")  # type: ignore[arg-type]  # a field of Score, not a metric


def test_every_mode_stamps_the_suite_contract(tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path,
        [
            task("e", mode="exact", expected="x"),
            task("c", mode="checklist", required=["x"]),
            task("m", mode="command", command="true"),
            task("r", mode="rubric"),
        ],
        rubric="def score(task, workdir, mode):\n    return {'hard': 1, 'soft': 1.0}\n",
    )
    assert len(suite.contract_hash) == 64
    ws = workspace(tmp_path)
    contracts = {score_text(suite, tid, ws, "x").contract for tid in ("e", "c", "m", "r")}
    assert contracts == {suite.contract_hash}


# --- require_same_contract ---------------------------------------------------------------------


def test_require_same_contract_returns_the_shared_hash() -> None:
    assert require_same_contract(["a" * 64, "a" * 64, "a" * 64]) == "a" * 64
    assert require_same_contract(iter(["b" * 64])) == "b" * 64


def test_require_same_contract_refuses_mixed_stamps() -> None:
    with pytest.raises(ContractMismatchError, match="different scoring contracts"):
        require_same_contract(["a" * 64, "b" * 64, "a" * 64])


def test_require_same_contract_on_scores_from_two_suite_versions(tmp_path: Path) -> None:
    one = make_suite(tmp_path / "one", [task("c", required=["x"])])
    two = make_suite(tmp_path / "two", [task("c", required=["x", "y"])])
    ws = workspace(tmp_path)
    first = [score_text(one, "c", ws, "x"), score_text(one, "c", ws, "y")]
    assert require_same_contract(s.contract for s in first) == one.contract_hash
    second = score_text(two, "c", ws, "x y")
    with pytest.raises(ContractMismatchError):
        require_same_contract([*(s.contract for s in first), second.contract])


def test_require_same_contract_with_nothing() -> None:
    with pytest.raises(ValueError):
        require_same_contract([])


# --- registry ----------------------------------------------------------------------------------

CUSTOM_MODE = "skilltune-test-min-length"


class MinLengthScorer(Scorer):
    """Pass when the final text has at least ``min`` characters; soft = length / min, capped."""

    mode = CUSTOM_MODE

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        value = scoring.get("min")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return ["min-length mode needs 'min' (a positive integer)"]
        return []

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        wanted = int(task.scoring["min"])
        length = len(result.final_text)
        return self.make(int(length >= wanted), min(1.0, length / wanted), [f"length:{length}"])


@pytest.fixture
def custom_mode() -> Iterator[str]:
    register_scorer(MinLengthScorer)
    try:
        yield CUSTOM_MODE
    finally:
        SCORERS.unregister(CUSTOM_MODE)


def test_builtin_modes_come_from_entry_points() -> None:
    modes = scoring_modes()
    assert {"exact", "checklist", "command", "rubric"} <= set(modes)
    assert modes == sorted(modes)
    from skilltune.score.modes import ChecklistScorer, CommandScorer, ExactScorer, RubricScorer

    for cls in (ExactScorer, ChecklistScorer, CommandScorer, RubricScorer):
        assert scorer_class(cls.mode) is cls
    assert scorer_class("no-such-mode") is None


def test_unknown_mode_is_a_validation_problem(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite", [task("t", mode=CUSTOM_MODE, min=3)])
    problems = validate_suite(root)
    assert any("unknown scoring mode" in p.message for p in problems)
    with pytest.raises(UsageError):
        load_suite(root)


def test_registered_scorer_is_usable_as_a_mode(tmp_path: Path, custom_mode: str) -> None:
    assert custom_mode in scoring_modes()
    assert scorer_class(custom_mode) is MinLengthScorer
    root = write_suite(tmp_path / "suite", [task("t", mode=custom_mode, min=4)])
    assert validate_suite(root) == []
    suite = load_suite(root)
    scorer = suite.scorer(suite.task("t"))
    assert isinstance(scorer, MinLengthScorer)
    ws = workspace(tmp_path)
    full = score_text(suite, "t", ws, "abcdef")
    assert (full.hard, full.soft, full.checks) == (1, 1.0, ["length:6"])
    half = score_text(suite, "t", ws, "ab")
    assert (half.hard, half.soft) == (0, 0.5)
    assert half.mixed == pytest.approx(0.25 * 0.5)


def test_registered_scorer_check_fields_runs_at_validation(tmp_path: Path, custom_mode: str) -> None:
    root = write_suite(tmp_path / "suite", [task("t", mode=custom_mode)])
    problems = validate_suite(root)
    assert [p.message for p in problems] == ["min-length mode needs 'min' (a positive integer)"]
    assert problems[0].line == 1


def test_registered_scorer_as_default_mode(tmp_path: Path, custom_mode: str) -> None:
    suite = make_suite(
        tmp_path,
        [{"id": "t", "prompt": "p", "scoring": {"min": 2}}],
        config={"default_mode": custom_mode, "mixed_weight": WEIGHT},
    )
    assert suite.scoring_mode(suite.task("t")) == custom_mode
    assert score_text(suite, "t", workspace(tmp_path), "xy").hard == 1


def test_a_scorer_gets_the_suites_scoring_context_not_the_suite(tmp_path: Path, custom_mode: str) -> None:
    suite = make_suite(
        tmp_path,
        [task("t", mode=custom_mode, min=2)],
        config={"default_mode": "checklist", "mixed_weight": WEIGHT, "feedback": "no-answers"},
    )
    scorer = suite.scorer(suite.task("t"))
    context = suite.scoring_context
    assert scorer.context is context and not hasattr(scorer, "suite")
    assert context == ScoringContext(
        root=suite.root,
        contract=suite.contract_hash,
        mixed_weight=WEIGHT,
        feedback="no-answers",
        prompt_variant="cheap",
        judge=context.judge,
        rubric=context.rubric,
    )
    assert dict(context.judge) == {}
    assert context.allowed_feedback("the answer", "no answer") == "no answer"
    assert scorer.make(1, 1.0, []).contract == suite.contract_hash


def test_a_scorer_made_from_a_context_alone_scores(tmp_path: Path) -> None:
    """A scorer needs no suite: a context built by hand scores with its weight, contract and policy."""
    from skilltune.score.modes import ExactScorer

    scorer = ExactScorer(ScoringContext(root=tmp_path, contract="c" * 64, mixed_weight=0.5, feedback="none"))
    t = Task(id="t", prompt="p", scoring={"mode": "exact", "expected": "yes"})
    score = scorer.score(t, tmp_path, AgentResult(status="ok", final_text="no"))
    assert (score.hard, score.mixed, score.contract, score.feedback) == (0, 0.0, "c" * 64, "")


def test_the_scorer_surface_stays_small() -> None:
    """inspect_ai's scorer is one call; ours is the score hooks, the field checks, and make."""
    public = {name for name in vars(Scorer) if not name.startswith("_")}
    hooks = {"score", "score_rollout", "rescore", "preflight"}
    assert public == {"Fields", "check_fields", "check_task", "fields", "make", *hooks}


def test_unregister_removes_the_mode() -> None:
    register_scorer(MinLengthScorer)
    SCORERS.unregister(CUSTOM_MODE)
    assert CUSTOM_MODE not in scoring_modes()
    assert scorer_class(CUSTOM_MODE) is None


# --- Python env scorer -------------------------------------------------------------------------

ENV_MODULE = """\
from pathlib import Path

from skilltune.score import Score

CONFIG = {"mixed_weight": 0.25}


def tasks(split):
    if split == "test":
        return []
    return [{"id": f"{split}-1", "prompt": "say the word", "scoring": {"word": "hello"}}]


def prepare(task, workspace):
    Path(workspace, "seed.txt").write_text("seed")


def score(task, workspace, agent_result):
    text = agent_result.final_text
    if "explode" in text:
        raise RuntimeError("env scorer exploded")
    if "as-score" in text:
        return Score(hard=1, soft=1.0, mixed=1.0, checks=["as-score"], contract="not-the-suite")
    if "bad-range" in text:
        return {"hard": 1, "soft": 3.0}
    found = task.scoring["word"] in text
    seeded = Path(workspace, "seed.txt").exists()
    return {"hard": int(found), "soft": 0.5 if found else 0.0, "checks": [f"seeded:{seeded}"]}
"""


@pytest.fixture
def env_suite(tmp_path: Path) -> Suite:
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "env.py").write_text(ENV_MODULE, encoding="utf-8")
    suite = load_suite(folder)
    assert suite.kind == "python"
    return suite


def test_env_score_returning_a_dict(env_suite: Suite, tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    t = env_suite.task("train-1")
    env_suite.prepare(t, ws)
    assert env_suite.scoring_mode(t) == "pyenv"
    score = score_text(env_suite, "train-1", ws, "hello there")
    assert (score.hard, score.soft, score.checks) == (1, 0.5, ["seeded:True"])
    assert score.mixed == pytest.approx(0.75 + 0.25 * 0.5)
    miss = score_text(env_suite, "val-1", ws, "goodbye")
    assert (miss.hard, miss.soft, miss.mixed) == (0, 0.0, 0.0)


def test_env_score_is_restamped_with_the_suite_contract(env_suite: Suite, tmp_path: Path) -> None:
    score = score_text(env_suite, "train-1", workspace(tmp_path), "as-score")
    assert score.contract == env_suite.contract_hash != "not-the-suite"
    assert score.mixed == 1.0


def test_env_score_raising_is_a_scoring_error(env_suite: Suite, tmp_path: Path) -> None:
    t = env_suite.task("train-1")
    with pytest.raises(ScoringError, match="RuntimeError"):
        env_suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text="explode"))


def test_env_score_out_of_range_is_a_scoring_error(env_suite: Suite, tmp_path: Path) -> None:
    t = env_suite.task("train-1")
    with pytest.raises(ScoringError):
        env_suite.scorer(t).score(t, workspace(tmp_path), AgentResult(status="ok", final_text="bad-range"))


def test_env_single_file_module(tmp_path: Path) -> None:
    module = tmp_path / "my_env.py"
    module.write_text(ENV_MODULE, encoding="utf-8")
    suite = load_suite(module)
    assert suite.name == "my_env"
    score = score_text(suite, "val-1", workspace(tmp_path), "hello")
    assert score.hard == 1
    assert score.checks == ["seeded:False"]


def test_suite_copies_score_identically(tmp_path: Path) -> None:
    """Same suite content in two folders: same contract, so scores compare."""
    one = write_suite(tmp_path / "one", [task("c", required=["x"])])
    shutil.copytree(one, tmp_path / "two")
    a, b = load_suite(one), load_suite(tmp_path / "two")
    ws = workspace(tmp_path)
    stamps = [score_text(a, "c", ws, "x").contract, score_text(b, "c", ws, "x").contract]
    assert require_same_contract(stamps) == a.contract_hash == b.contract_hash


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
    root = write_suite(tmp_path / "suite", [dict(task, id="train-t")], val=[task])
    (root / "refs").mkdir()
    (root / "refs" / "check.sh").write_text("true\n")
    monkeypatch.chdir(tmp_path)
    summary = evaluate("suite", None, out=tmp_path / "out", workers=1)
    assert summary.hard_acc == 1.0, summary.per_task
