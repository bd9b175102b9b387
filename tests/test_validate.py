"""`skilltune validate` and the suite validation API: every defect reported as file:line, nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.suite import Problem, load_suite, read_suite, validate_suite
from tests.helpers import write_suite

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_SUITES = [REPO / "examples" / "mock-demo" / "suite", REPO / "examples" / "null-demo" / "suite"]

# scoring.md of the valid suite; the config keys sit on known lines (7-10) so tests can check them.
SCORING_MD = """\
# Scoring

Tasks are scored by the mode named in each task; the default is a checklist.

```json
{
  "default_mode": "checklist",
  "mixed_weight": 0.5,
  "smoke_tools": [],
  "max_concurrency": 2
}
```

A checklist passes when every required substring is in the final answer.
"""
CONFIG_LINE = {"default_mode": 7, "mixed_weight": 8, "smoke_tools": 9, "max_concurrency": 10}


def _train_tasks() -> list[dict[str, Any]]:
    return [
        {
            "id": "t1",
            "prompt": "Summarise data.txt in one line.",
            "files": ["fixtures/data.txt"],
            "scoring": {"mode": "checklist", "required": ["alpha"]},
        },
        {
            "id": "t2",
            "prompt": "Say ok when the tree is complete.",
            "files": ["fixtures/tree"],
            "scoring": {"mode": "exact", "expected": "^ok\\b"},
        },
    ]


def _val_tasks() -> list[dict[str, Any]]:
    return [
        {
            "id": "v1",
            "prompt": "Check that data.txt was copied.",
            "files": ["fixtures/data.txt"],
            "scoring": {"mode": "command", "command": "test -f data.txt", "timeout": 5},
        },
        {
            "id": "v2",
            "prompt": "List the words of the tree files.",
            "files": ["fixtures/tree"],
            "scoring": {"required": ["beta", "gamma"]},
        },
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any] | str]) -> None:
    """One task per line; a str row is written verbatim (for malformed lines)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def build_suite(root: Path) -> Path:
    """A minimal valid jsonl suite at root/suite."""
    suite = root / "suite"
    (suite / "fixtures" / "tree" / "sub").mkdir(parents=True)
    (suite / "refs").mkdir()
    (suite / "scoring.md").write_text(SCORING_MD, encoding="utf-8")
    (suite / "fixtures" / "data.txt").write_text("alpha beta\n", encoding="utf-8")
    (suite / "fixtures" / "tree" / "one.txt").write_text("beta\n", encoding="utf-8")
    (suite / "fixtures" / "tree" / "sub" / "two.txt").write_text("gamma\n", encoding="utf-8")
    (suite / "refs" / "answer.txt").write_text("alpha beta gamma\n", encoding="utf-8")
    write_jsonl(suite / "train.jsonl", list(_train_tasks()))
    write_jsonl(suite / "val.jsonl", list(_val_tasks()))
    return suite


@pytest.fixture
def valid_suite(tmp_path: Path) -> Path:
    return build_suite(tmp_path)


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under root (symlinks not followed) with its kind and content hash."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = f"link:{path.readlink()}"
            elif path.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def invoke_validate(target: Path) -> tuple[int, str, str]:
    """Run `skilltune validate target`; return (exit code, stdout, stderr)."""
    result = CliRunner().invoke(app, ["validate", str(target)])
    return result.exit_code, result.stdout, result.stderr


def line_of(text: str, needle: str) -> int:
    """1-based number of the first line of text containing needle."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def assert_reported(stderr: str, path: Path, line: int | None, fragment: str) -> None:
    """stderr has a `path:line: message` (or `path: message`) line whose message holds fragment."""
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    matching = [row for row in stderr.splitlines() if row.startswith(where)]
    assert matching, f"no problem reported at {where!r} in:\n{stderr}"
    assert any(fragment in row for row in matching), f"{fragment!r} not in {matching}"


def assert_problem(problems: list[Problem], path: Path, line: int | None, fragment: str) -> None:
    assert any(p.file == str(path) and p.line == line and fragment in p.message for p in problems), (
        f"no problem {path}:{line} with {fragment!r} in {[str(p) for p in problems]}"
    )


# --- valid suites ----------------------------------------------------------------------------------


def test_valid_suite_passes(valid_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert validate_suite(valid_suite) == []
    code, stdout, stderr = invoke_validate(valid_suite)
    assert code == 0, stderr
    assert stderr == ""
    assert stdout.startswith(f"ok: {valid_suite} ")
    assert "train 2, val 2" in stdout
    assert snapshot(tmp_path) == before
    suite = load_suite(valid_suite)
    assert [t.id for t in suite.tasks("train")] == ["t1", "t2"]
    assert [t.id for t in suite.tasks("val")] == ["v1", "v2"]


def test_valid_suite_with_rubric_and_test_split(valid_suite: Path) -> None:
    (valid_suite / "rubric.py").write_text(
        "def score(task, workdir, mode):\n    return {'hard': 1, 'soft': 1.0, 'checks': []}\n",
        encoding="utf-8",
    )
    write_jsonl(
        valid_suite / "test.jsonl",
        [{"id": "x1", "prompt": "Judge this.", "scoring": {"mode": "rubric"}}],
    )
    code, stdout, stderr = invoke_validate(valid_suite)
    assert code == 0, stderr
    assert "test 1" in stdout


@pytest.mark.parametrize("suite", EXAMPLE_SUITES, ids=lambda p: p.parent.name)
def test_example_suites_pass(suite: Path) -> None:
    before = snapshot(suite)
    code, stdout, stderr = invoke_validate(suite)
    assert code == 0, stderr
    assert stdout.startswith("ok: ")
    assert validate_suite(suite) == []
    assert snapshot(suite) == before


# --- one defect at a time ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Defect:
    name: str
    apply: Callable[[Path], None]  # mutates the suite folder (its parent is tmp_path)
    file: str  # the file the problem must name, relative to the suite
    line: int | None  # the line it must name (None: the file only)
    fragment: str  # a distinctive piece of the message


def replace_val_task(**changes: Any) -> Callable[[Path], None]:
    """Line 2 of val.jsonl with changes (a None value deletes the key)."""

    def apply(suite: Path) -> None:
        task = _val_tasks()[1]
        for key, value in changes.items():
            if value is None:
                task.pop(key, None)
            else:
                task[key] = value
        write_jsonl(suite / "val.jsonl", [_val_tasks()[0], task])

    return apply


def val_line(text: str) -> Callable[[Path], None]:
    def apply(suite: Path) -> None:
        write_jsonl(suite / "val.jsonl", [_val_tasks()[0], text])

    return apply


def scoring_on_line2(scoring: Any) -> Callable[[Path], None]:
    return replace_val_task(scoring=scoring)


def outside_file(suite: Path) -> Path:
    target = suite.parent / "outside.txt"
    target.write_text("secret outside the suite\n", encoding="utf-8")
    return target


def _dotdot(suite: Path) -> None:
    outside_file(suite)
    replace_val_task(files=["../outside.txt"])(suite)


def _absolute(suite: Path) -> None:
    replace_val_task(files=[str(outside_file(suite))])(suite)


def _symlink_file(suite: Path) -> None:
    (suite / "fixtures" / "link.txt").symlink_to(outside_file(suite))
    replace_val_task(files=["fixtures/link.txt"])(suite)


def _symlink_in_folder(suite: Path) -> None:
    (suite / "fixtures" / "tree" / "sub" / "evil.txt").symlink_to(outside_file(suite))


def _same_basename(suite: Path) -> None:
    (suite / "fixtures" / "other").mkdir()
    (suite / "fixtures" / "other" / "data.txt").write_text("other\n", encoding="utf-8")
    replace_val_task(files=["fixtures/data.txt", "fixtures/other/data.txt"])(suite)


RUBRIC_SYNTAX_ERROR = "import json\n\n\ndef score(task, workdir, mode)\n    return {'hard': 1}\n"


def _rubric_syntax(suite: Path) -> None:
    (suite / "rubric.py").write_text(RUBRIC_SYNTAX_ERROR, encoding="utf-8")


def _rubric_no_score(suite: Path) -> None:
    (suite / "rubric.py").write_text(
        "def grade(task, workdir, mode):\n    return {'hard': 1, 'soft': 1.0}\n", encoding="utf-8"
    )


def config_line(key: str, new_line: str) -> Callable[[Path], None]:
    def apply(suite: Path) -> None:
        lines = SCORING_MD.splitlines()
        index = CONFIG_LINE[key] - 1
        assert f'"{key}"' in lines[index]
        lines[index] = new_line
        (suite / "scoring.md").write_text("\n".join(lines) + "\n", encoding="utf-8")

    return apply


def _remove(name: str) -> Callable[[Path], None]:
    def apply(suite: Path) -> None:
        (suite / name).unlink()

    return apply


def _blank_val(suite: Path) -> None:
    (suite / "val.jsonl").write_text("\n   \n\n", encoding="utf-8")


def _same_file_name(suite: Path) -> None:
    """Line 2's id differs from line 1's but not once made a file name ('v 1' -> 'v_1')."""
    first = dict(_val_tasks()[0], id="v_1")
    write_jsonl(suite / "val.jsonl", [first, dict(_val_tasks()[1], id="v 1")])


DEFECTS = [
    Defect("invalid-json", val_line('{"id": "v2", "prompt": "x",'), "val.jsonl", 2, "invalid JSON"),
    Defect("not-an-object", val_line("[1, 2]"), "val.jsonl", 2, "must be a JSON object, got list"),
    Defect("id-not-string", replace_val_task(id=3), "val.jsonl", 2, "'id' must be a non-empty string"),
    Defect("id-missing", replace_val_task(id=None), "val.jsonl", 2, "missing 'id'"),
    Defect(
        "id-duplicate-in-split",
        replace_val_task(id="v1"),
        "val.jsonl",
        2,
        "duplicate id 'v1' (first at val.jsonl:1)",
    ),
    Defect(
        "id-duplicate-across-splits",
        replace_val_task(id="t1"),
        "val.jsonl",
        2,
        "duplicate id 't1' (first at train.jsonl:1)",
    ),
    Defect("prompt-missing", replace_val_task(prompt=None), "val.jsonl", 2, "missing 'prompt'"),
    Defect(
        "prompt-empty", replace_val_task(prompt=""), "val.jsonl", 2, "'prompt' must be a non-empty string"
    ),
    Defect(
        "mode-unknown",
        scoring_on_line2({"mode": "fuzzy", "required": ["a"]}),
        "val.jsonl",
        2,
        "unknown scoring mode 'fuzzy'",
    ),
    Defect(
        "exact-no-expected",
        scoring_on_line2({"mode": "exact"}),
        "val.jsonl",
        2,
        "exact mode needs 'expected'",
    ),
    Defect(
        "exact-bad-regex",
        scoring_on_line2({"mode": "exact", "expected": "(unclosed"}),
        "val.jsonl",
        2,
        "'expected' is not a valid regex",
    ),
    Defect(
        "checklist-empty",
        scoring_on_line2({"mode": "checklist", "required": []}),
        "val.jsonl",
        2,
        "empty checklist",
    ),
    Defect(
        "checklist-no-required",
        scoring_on_line2({"mode": "checklist"}),
        "val.jsonl",
        2,
        "checklist mode needs 'required'",
    ),
    Defect(
        "command-no-command",
        scoring_on_line2({"mode": "command", "timeout": 5}),
        "val.jsonl",
        2,
        "command mode needs 'command'",
    ),
    Defect(
        "command-negative-timeout",
        scoring_on_line2({"mode": "command", "command": "true", "timeout": -1}),
        "val.jsonl",
        2,
        "'timeout' must be a positive number",
    ),
    Defect(
        "files-missing",
        replace_val_task(files=["fixtures/nope.txt"]),
        "val.jsonl",
        2,
        "'fixtures/nope.txt' does not exist",
    ),
    Defect("files-dotdot", _dotdot, "val.jsonl", 2, "escapes the suite ('..')"),
    Defect("files-absolute", _absolute, "val.jsonl", 2, "is absolute"),
    Defect("files-symlink-out", _symlink_file, "val.jsonl", 2, "escapes the suite through a symlink"),
    # v2 (val.jsonl:2) and t2 (train.jsonl:2) both list fixtures/tree; check val's line.
    Defect("folder-symlink-out", _symlink_in_folder, "val.jsonl", 2, "a symlink out of the suite"),
    Defect("files-same-basename", _same_basename, "val.jsonl", 2, "would both land in the workspace"),
    Defect(
        "rubric-mode-no-rubric",
        scoring_on_line2({"mode": "rubric"}),
        "val.jsonl",
        2,
        "rubric mode needs rubric.py",
    ),
    Defect("rubric-no-score", _rubric_no_score, "rubric.py", None, "defines no score("),
    Defect(
        "rubric-syntax-error",
        _rubric_syntax,
        "rubric.py",
        line_of(RUBRIC_SYNTAX_ERROR, "def score"),
        "syntax error",
    ),
    Defect(
        "config-invalid-json",
        config_line("mixed_weight", '  "mixed_weight": .5,'),
        "scoring.md",
        CONFIG_LINE["mixed_weight"],
        "config block is not valid JSON",
    ),
    Defect(
        "config-mixed-weight-above-1",
        config_line("mixed_weight", '  "mixed_weight": 1.5,'),
        "scoring.md",
        CONFIG_LINE["mixed_weight"],
        "config mixed_weight",
    ),
    Defect(
        "config-mixed-weight-negative",
        config_line("mixed_weight", '  "mixed_weight": -0.1,'),
        "scoring.md",
        CONFIG_LINE["mixed_weight"],
        "config mixed_weight",
    ),
    Defect(
        "config-default-mode-unknown",
        config_line("default_mode", '  "default_mode": "fuzzy",'),
        "scoring.md",
        CONFIG_LINE["default_mode"],
        "default_mode 'fuzzy' is not a scoring mode",
    ),
    Defect(
        "config-max-concurrency-zero",
        config_line("max_concurrency", '  "max_concurrency": 0'),
        "scoring.md",
        CONFIG_LINE["max_concurrency"],
        "config max_concurrency",
    ),
    Defect("scoring-md-missing", _remove("scoring.md"), "scoring.md", None, "missing"),
    Defect("val-missing", _remove("val.jsonl"), "val.jsonl", None, "a suite needs val.jsonl"),
    Defect("val-empty", _blank_val, "val.jsonl", None, "empty split"),
    Defect(
        "scoring-not-object",
        scoring_on_line2("checklist"),
        "val.jsonl",
        2,
        "'scoring' must be an object",
    ),
    Defect(
        "files-not-list",
        replace_val_task(files="fixtures/data.txt"),
        "val.jsonl",
        2,
        "'files' must be a list",
    ),
    Defect(
        "prompt-blank", replace_val_task(prompt=" \n "), "val.jsonl", 2, "'prompt' must be a non-empty string"
    ),
    Defect("id-same-file-name", _same_file_name, "val.jsonl", 2, "both become 'v_1' in file names"),
    # Each mode's Fields model: what it refuses is reported on the task's line.
    Defect(
        "exact-ignore-case-not-bool",
        scoring_on_line2({"mode": "exact", "expected": "ok", "ignore_case": "false"}),
        "val.jsonl",
        2,
        "'ignore_case' must be true or false",
    ),
    Defect(
        "checklist-blank-item",
        scoring_on_line2({"required": ["beta", ""]}),
        "val.jsonl",
        2,
        "'required' must be a list of non-empty strings",
    ),
    Defect(
        "command-blank",
        scoring_on_line2({"mode": "command", "command": "  "}),
        "val.jsonl",
        2,
        "'command' must be a non-empty string",
    ),
    Defect(
        "command-timeout-not-number",
        scoring_on_line2({"mode": "command", "command": "true", "timeout": "5"}),
        "val.jsonl",
        2,
        "'timeout' must be a positive number of seconds",
    ),
]


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.name for d in DEFECTS])
def test_defect_is_reported(defect: Defect, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = build_suite(tmp_path)
    assert validate_suite(suite) == []
    defect.apply(suite)
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)

    problems = validate_suite(suite)
    assert_problem(problems, suite / defect.file, defect.line, defect.fragment)

    code, stdout, stderr = invoke_validate(suite)
    assert code == 2, f"exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    assert "Traceback" not in stdout + stderr
    assert "internal error" not in stderr
    assert stdout == ""
    assert_reported(stderr, suite / defect.file, defect.line, defect.fragment)
    assert f"{len(problems)} problem(s) in {suite}" in stderr

    assert snapshot(tmp_path) == before, "validate changed or created files"


def test_folder_symlink_out_is_reported_for_every_task_listing_it(tmp_path: Path) -> None:
    suite = build_suite(tmp_path)
    _symlink_in_folder(suite)
    problems = validate_suite(suite)
    assert_problem(problems, suite / "train.jsonl", 2, "fixtures/tree/sub/evil.txt")
    assert_problem(problems, suite / "val.jsonl", 2, "fixtures/tree/sub/evil.txt")


def test_several_defects_reported_in_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = build_suite(tmp_path)
    write_jsonl(
        suite / "train.jsonl",
        [
            {"id": "t1", "prompt": "a", "scoring": {"mode": "fuzzy"}},
            {"id": "t2", "prompt": "b", "files": ["fixtures/missing.txt"], "scoring": {"required": ["x"]}},
            "not json",
        ],
    )
    write_jsonl(suite / "val.jsonl", [{"id": "t1", "prompt": "c", "scoring": {"required": ["x"]}}, "[1]"])
    write_jsonl(suite / "test.jsonl", [{"id": "x1", "prompt": "", "scoring": {"mode": "exact"}}])
    config_line("mixed_weight", '  "mixed_weight": 1.5,')(suite)
    _rubric_syntax(suite)
    planted = [
        ("train.jsonl", 1, "unknown scoring mode"),
        ("train.jsonl", 2, "does not exist"),
        ("train.jsonl", 3, "invalid JSON"),
        ("val.jsonl", 1, "duplicate id 't1'"),
        ("val.jsonl", 2, "must be a JSON object"),
        ("test.jsonl", 1, "'prompt' must be a non-empty string"),
        ("test.jsonl", 1, "exact mode needs 'expected'"),
        ("scoring.md", CONFIG_LINE["mixed_weight"], "config mixed_weight"),
        ("rubric.py", 4, "syntax error"),
    ]
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)

    problems = validate_suite(suite)
    assert len(problems) >= len(planted)
    code, stdout, stderr = invoke_validate(suite)
    assert code == 2
    assert "Traceback" not in stdout + stderr
    for file, line, fragment in planted:
        assert_problem(problems, suite / file, line, fragment)
        assert_reported(stderr, suite / file, line, fragment)
    assert sum(1 for row in stderr.splitlines() if row.startswith(str(suite))) >= len(planted)
    assert f"{len(problems)} problem(s)" in stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "break_it",
    [replace_val_task(id="t1"), _remove("scoring.md"), config_line("mixed_weight", '  "mixed_weight": 1.5,')],
    ids=["duplicate-id", "no-scoring-md", "bad-config"],
)
def test_load_suite_raises_usage_error(tmp_path: Path, break_it: Callable[[Path], None]) -> None:
    suite = build_suite(tmp_path)
    break_it(suite)
    with pytest.raises(UsageError) as info:
        load_suite(suite)
    message = str(info.value)
    assert f"skilltune validate {suite}" in message
    assert str(validate_suite(suite)[0]) in message


@pytest.mark.parametrize("broken", [False, True], ids=["valid", "duplicate-id"])
def test_read_suite_gives_what_validate_suite_and_load_suite_give(tmp_path: Path, broken: bool) -> None:
    """One reading (``skilltune validate``'s): validate_suite's problems, and load_suite's suite when
    none of them is an error."""
    suite = build_suite(tmp_path)
    if broken:
        replace_val_task(id="t1")(suite)
    loaded, problems = read_suite(suite)
    assert problems == validate_suite(suite)
    if broken:
        assert loaded is None and problems
    else:
        assert loaded is not None and loaded.contract_hash == load_suite(suite).contract_hash
        assert loaded.options == load_suite(suite).options


def test_load_suite_truncates_long_problem_lists(tmp_path: Path) -> None:
    suite = build_suite(tmp_path)
    write_jsonl(suite / "val.jsonl", ["not json"] * 20)
    with pytest.raises(UsageError) as info:
        load_suite(suite)
    assert "... and 5 more" in str(info.value)
    assert "skilltune validate" in str(info.value)


def test_load_suite_raises_usage_error_for_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="skilltune validate"):
        load_suite(tmp_path / "nowhere")
    code, _, stderr = invoke_validate(tmp_path / "nowhere")
    assert code == 2
    assert_reported(stderr, tmp_path / "nowhere", None, "does not exist")


# --- extra malformed input: must still be a clean exit 2 --------------------------------------------


def _non_utf8(name: str) -> Callable[[Path], None]:
    def apply(suite: Path) -> None:
        path = suite / name
        path.write_bytes(path.read_bytes() + b"\xff\xfe broken\n")

    return apply


@pytest.mark.parametrize("name", ["val.jsonl", "scoring.md"])
def test_non_utf8_file_is_a_problem_not_a_crash(tmp_path: Path, name: str) -> None:
    suite = build_suite(tmp_path)
    _non_utf8(name)(suite)
    code, _, stderr = invoke_validate(suite)
    assert "internal error" not in stderr
    assert code == 2
    assert any(row.startswith(f"{suite / name}") for row in stderr.splitlines())


# --- Python env suites ---------------------------------------------------------------------------------

ENV_SOURCE = """\
from pathlib import Path

TASKS = {
    "train": [
        {"id": "e-train-1", "prompt": "Write hello into out.txt."},
        {"id": "e-train-2", "prompt": "Write bye into out.txt."},
    ],
    "val": [
        {"id": "e-val-1", "prompt": "Write yes into out.txt."},
        {"id": "e-val-2", "prompt": "Write no into out.txt."},
    ],
    "test": [],
}


def tasks(split):
    return list(TASKS[split])


def prepare(task, workspace):
    (Path(workspace) / "start.txt").write_text("start\\n", encoding="utf-8")


def score(task, workspace, agent_result):
    return {"hard": 1, "soft": 1.0, "checks": []}
"""


def write_env(tmp_path: Path, source: str = ENV_SOURCE) -> Path:
    folder = tmp_path / "envsuite"
    folder.mkdir()
    module = folder / "env.py"
    module.write_text(source, encoding="utf-8")
    return module


@pytest.mark.parametrize("as_folder", [True, False], ids=["folder", "py-file"])
def test_python_env_validates(tmp_path: Path, as_folder: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_env(tmp_path)
    target = module.parent if as_folder else module
    monkeypatch.chdir(tmp_path)
    assert validate_suite(target) == []
    code, stdout, stderr = invoke_validate(target)
    assert code == 0, stderr
    assert "python suite" in stdout
    assert "train 2, val 2" in stdout
    suite = load_suite(target)
    assert [t.id for t in suite.tasks("val")] == ["e-val-1", "e-val-2"]
    assert not suite.has_split("test")


def test_python_env_validate_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # the interpreter's default
    before = snapshot(tmp_path)
    code, _, stderr = invoke_validate(module.parent)
    assert code == 0, stderr
    assert snapshot(tmp_path) == before


def _env_syntax_error() -> tuple[str, int | None, str]:
    source = ENV_SOURCE.replace("def prepare(task, workspace):", "def prepare(task, workspace)")
    return source, line_of(source, "def prepare"), "syntax error"


def _env_no_score() -> tuple[str, int | None, str]:
    source = ENV_SOURCE.replace(
        "def score(task, workspace, agent_result):", "def grade(task, workspace, agent_result):"
    )
    return source, None, "defines no score() function"


def _env_empty_val() -> tuple[str, int | None, str]:
    source = ENV_SOURCE.replace(
        "    return list(TASKS[split])", '    return [] if split == "val" else list(TASKS[split])'
    )
    return source, None, "empty split: tasks('val') returned no tasks"


def _env_tasks_raise() -> tuple[str, int | None, str]:
    source = ENV_SOURCE.replace("    return list(TASKS[split])", '    raise RuntimeError("no tasks today")')
    return source, line_of(source, "raise RuntimeError"), "tasks('train') raised RuntimeError: no tasks today"


def _env_duplicate_ids() -> tuple[str, int | None, str]:
    source = ENV_SOURCE.replace('"id": "e-val-2"', '"id": "e-train-1"')
    return source, None, "duplicate id 'e-train-1'"


ENV_DEFECTS = {
    "syntax-error": _env_syntax_error,
    "no-score": _env_no_score,
    "empty-val": _env_empty_val,
    "tasks-raise": _env_tasks_raise,
    "duplicate-ids": _env_duplicate_ids,
}


@pytest.mark.parametrize("name", list(ENV_DEFECTS))
@pytest.mark.parametrize("as_folder", [True, False], ids=["folder", "py-file"])
def test_python_env_defect_is_reported(
    tmp_path: Path, name: str, as_folder: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, line, fragment = ENV_DEFECTS[name]()
    assert source != ENV_SOURCE
    module = write_env(tmp_path, source)
    target = module.parent if as_folder else module
    monkeypatch.chdir(tmp_path)

    problems = validate_suite(target)
    assert_problem(problems, module, line, fragment)
    code, stdout, stderr = invoke_validate(target)
    assert code == 2, stderr
    assert stdout == ""
    assert "Traceback" not in stdout + stderr
    assert "internal error" not in stderr
    assert_reported(stderr, module, line, fragment)
    with pytest.raises(UsageError, match="skilltune validate"):
        load_suite(target)


def test_python_env_task_reports_every_bad_field_with_its_index(tmp_path: Path) -> None:
    source = ENV_SOURCE.replace(
        '{"id": "e-val-2", "prompt": "Write no into out.txt."}', '{"id": 7, "prompt": " "}'
    )
    module = write_env(tmp_path, source)
    problems = validate_suite(module)
    assert_problem(problems, module, None, "tasks('val')[1]: 'id' must be a non-empty string")
    assert_problem(problems, module, None, "tasks('val')[1]: 'prompt' must be a non-empty string")
    assert len(problems) == 2, [str(p) for p in problems]


def test_python_env_tasks_returning_non_list(tmp_path: Path) -> None:
    module = write_env(tmp_path, ENV_SOURCE.replace("    return list(TASKS[split])", "    return 42"))
    code, _, stderr = invoke_validate(module)
    assert "internal error" not in stderr
    assert code == 2
    assert_reported(stderr, module, None, "tasks('train')")


@pytest.mark.parametrize("status", [0, 1])
def test_python_env_exiting_at_import(tmp_path: Path, status: int) -> None:
    source = f"import sys\n\nsys.exit({status})\n"
    module = write_env(tmp_path, source)
    problems = validate_suite(module)
    assert_problem(problems, module, 3, "SystemExit")
    code, _, stderr = invoke_validate(module)
    assert code == 2
    assert_reported(stderr, module, 3, "SystemExit")


@pytest.mark.parametrize(
    ("scoring", "fragment"),
    [
        (
            {"mode": "exact", "expected": "ok", "ignorecase": True},
            "exact mode has no field 'ignorecase' (its fields: expected, ignore_case): it is ignored",
        ),
        ({"required": ["beta"], "ignore_case": True}, "checklist mode has no field 'ignore_case'"),
    ],
    ids=["exact", "checklist"],
)
def test_unknown_scoring_field_is_a_warning_not_a_refusal(
    scoring: dict[str, object], fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """skill-trainer ignores scoring fields a mode does not read, so its suites carry some: validate
    warns on the task's line (a misspelling still shows) and the suite loads and scores as before."""
    suite = build_suite(tmp_path)
    scoring_on_line2(scoring)(suite)
    problems = validate_suite(suite)
    assert [p.warning for p in problems] == [True]
    assert_problem(problems, suite / "val.jsonl", 2, fragment)
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = invoke_validate(suite)
    assert code == 0, stderr
    assert f"{suite / 'val.jsonl'}:2: warning: {fragment}" in stderr
    assert stdout.startswith("ok: ")
    loaded = load_suite(suite)
    task = loaded.tasks("val")[1]
    assert loaded.scorer(task).fields(task) is not None  # the unknown field is dropped, not refused


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
