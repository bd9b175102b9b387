"""skill-creator's trigger eval file read unchanged: trigger_evals.json beside a suite's splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.suite import Task, load_suite, validate_suite
from skilltune.suite.trigger_evals import TRIGGER_EVALS_FILE, deal
from tests.helpers import REPO, rule_task, write_suite

runner = CliRunner()

# Written for this test in skill-creator's format: a JSON list of {"query", "should_trigger"}.
SKILL_CREATOR_EVALS = """[
  {"query": "ok so my boss just sent me Q3-revenue.xlsx, can you pivot it by region?", "should_trigger": true},
  {"query": "add a column to sales.xlsx that sums columns B through F", "should_trigger": true},
  {"query": "convert this csv of orders into a spreadsheet with a totals row", "should_trigger": true},
  {"query": "the formulas in budget.xlsx show #REF! after I deleted a sheet, fix them", "should_trigger": true},
  {"query": "make a chart from the xlsx my team shares every monday", "should_trigger": true},
  {"query": "merge these two excel workbooks on the customer id column", "should_trigger": true},
  {"query": "write me a fibonacci function in rust", "should_trigger": false},
  {"query": "what does the SUMIF formula do in google sheets? just explain", "should_trigger": false},
  {"query": "parse this JSON log and count errors by service", "should_trigger": false},
  {"query": "draft an email to finance asking for the Q3 numbers", "should_trigger": false},
  {"query": "rename the columns of this pandas dataframe to snake_case", "should_trigger": false},
  {"query": "set up a cron job that backs up the reports folder nightly", "should_trigger": false}
]
"""


def _suite(root: Path, evals: str = SKILL_CREATOR_EVALS) -> Path:
    root.mkdir(parents=True)
    (root / "scoring.md").write_text('# Scoring\n\n```json\n{"default_mode": "checklist"}\n```\n')
    (root / TRIGGER_EVALS_FILE).write_text(evals)
    return root


def test_a_skill_creator_eval_file_is_read_unchanged(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path / "s"))
    items = json.loads(SKILL_CREATOR_EVALS)
    tasks = suite.all_tasks()
    assert sorted(t.id for t in tasks) == [f"trigger-{n:03d}" for n in range(1, 13)]
    for n, item in enumerate(items, start=1):
        task = suite.task(f"trigger-{n:03d}")
        assert (task.prompt, task.should_trigger) == (item["query"], item["should_trigger"])
        assert suite.scoring_mode(task) == "trigger"
        assert suite.locations[task.id].endswith(f"{TRIGGER_EVALS_FILE}:{n + 1}")
    for split in ("train", "val", "test"):  # stratified: 6 of each class, two of each per split
        assert sorted(bool(t.should_trigger) for t in suite.tasks(split)) == [False, False, True, True]


def test_the_split_is_deterministic_and_ignores_the_file_order(tmp_path: Path) -> None:
    items = json.loads(SKILL_CREATOR_EVALS)
    first = load_suite(_suite(tmp_path / "a"))
    turned = load_suite(_suite(tmp_path / "b", json.dumps(items[::-1])))

    def split_of(suite_tasks: list[Task]) -> dict[str, str]:
        return {t.prompt: t.split for t in suite_tasks}

    assert split_of(first.all_tasks()) == split_of(turned.all_tasks())
    queries = [(q["query"], q["should_trigger"]) for q in items]
    assert deal(queries) == deal(queries) and set(deal(queries)) == {"train", "val", "test"}


def test_trigger_evals_join_body_tasks_in_jsonl_splits(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [rule_task("body-train", ["r"])], [rule_task("body-val", ["r"])])
    (root / TRIGGER_EVALS_FILE).write_text(SKILL_CREATOR_EVALS)
    suite = load_suite(root)
    val = suite.tasks("val")
    assert val[0].id == "body-val" and len(val) == 5
    assert suite.scoring_mode(val[0]) == "checklist" and suite.scoring_mode(val[1]) == "trigger"
    assert suite.has_split("test")  # the evals give the suite a test split
    before = suite.contract_hash
    flipped = SKILL_CREATOR_EVALS.replace('"should_trigger": false}\n]', '"should_trigger": true}\n]')
    (root / TRIGGER_EVALS_FILE).write_text(flipped)
    assert load_suite(root).contract_hash != before  # the expected decisions are the contract


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"query": "q", "should_trigger": true}', 1, "a JSON list"),
        ('[\n  {"query": "q", "should_trigger": true},\n  {"query": "r", "should_trigger": "yes"}\n]', 3,
         "'should_trigger' must be true or false"),
        ('[\n  {"query": "", "should_trigger": true}\n]', 2, "has no 'query'"),
        ('[\n  "just a query"\n]', 2, "each item is an object"),
        ('[\n  {"query": "q", "should_trigger": true},\n  {"query": "r" "should_trigger": true}\n]', 3, "invalid JSON"),
        ("[]", 1, "no queries"),
    ],
)  # fmt: skip
def test_a_bad_eval_file_names_file_line_and_fix(tmp_path: Path, text: str, line: int, message: str) -> None:
    root = _suite(tmp_path / "s", text)
    problems = [p for p in validate_suite(root) if not p.warning and p.file.endswith(TRIGGER_EVALS_FILE)]
    assert problems and problems[0].line == line and message in problems[0].message, problems
    result = runner.invoke(app, ["validate", str(root)])
    assert result.exit_code == 2 and f"{TRIGGER_EVALS_FILE}:{line}" in result.output
    assert "Traceback" not in result.output


def test_a_suite_of_evals_alone_still_needs_each_required_split(tmp_path: Path) -> None:
    root = _suite(tmp_path / "s", json.dumps([{"query": "q", "should_trigger": True}]))
    messages = [p.message for p in validate_suite(root) if not p.warning]
    assert any("a suite needs val tasks" in m for m in messages), messages


def test_the_demo_suite_validates() -> None:
    suite = load_suite(REPO / "examples" / "trigger-demo" / "suite")
    # 84 requests in trigger_evals.json (train 29, val 28, test 27) and 235 grown by a reviewed draft
    assert {s: len(t) for s, t in suite.splits.items()} == {"train": 99, "val": 114, "test": 106}
    assert sum(t.id.startswith("trigger-") for t in suite.tasks("val")) == 28
    assert not validate_suite(REPO / "examples" / "trigger-demo" / "suite")  # every drafted row reviewed
    assert list(suite.splits) == ["train", "val", "test"]  # in split order, as validate prints them
