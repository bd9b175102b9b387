"""The scoring-contract hash and the content hash of a suite."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from skilltune.suite import Suite, load_suite

SCORING_MD = """\
# Scoring

```json
{"default_mode": "checklist", "mixed_weight": 0.25}
```

Checklist tasks look for substrings; the rubric task reads output.txt.
"""

RUBRIC = """\
def score(task, workdir, mode):
    return {"hard": 1, "soft": 1.0, "checks": []}
"""

TRAIN: list[dict[str, Any]] = [
    {
        "id": "t-checklist",
        "prompt": "Summarise input.txt.",
        "files": ["fixtures/input.txt"],
        "scoring": {"required": ["summary", "owner"]},
    },
    {"id": "t-rubric", "prompt": "Write a report.", "scoring": {"mode": "rubric", "level": 1}},
    {"id": "t-exact", "prompt": "What is 6*7?", "scoring": {"mode": "exact", "expected": "42"}},
]
VAL: list[dict[str, Any]] = [{"id": "v-1", "prompt": "Say ok.", "scoring": {"required": ["ok"]}}]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def base(tmp_path: Path) -> Path:
    root = tmp_path / "base"
    write(root / "scoring.md", SCORING_MD)
    write(root / "rubric.py", RUBRIC)
    write(root / "refs" / "expected.txt", "the expected answer\n")
    write(root / "refs" / "nested" / "golden.json", '{"answer": 42}\n')
    write(root / "fixtures" / "input.txt", "raw incident notes\n")
    write_jsonl(root / "train.jsonl", TRAIN)
    write_jsonl(root / "val.jsonl", VAL)
    return root


@pytest.fixture
def fresh(base: Path, tmp_path: Path) -> Callable[[], Path]:
    """A new copy of the base suite each call."""
    count = 0

    def copy() -> Path:
        nonlocal count
        count += 1
        dest = tmp_path / f"copy-{count}"
        shutil.copytree(base, dest)
        return dest

    return copy


def edit_task(root: Path, split: str, task_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
    path = root / f"{split}.jsonl"
    rows = read_jsonl(path)
    for row in rows:
        if row["id"] == task_id:
            edit(row)
    write_jsonl(path, rows)


# --- mutations -----------------------------------------------------------------------------------


def refs_file_changed(root: Path) -> None:
    write(root / "refs" / "expected.txt", "the expected answer, revised\n")


def refs_nested_file_changed(root: Path) -> None:
    write(root / "refs" / "nested" / "golden.json", '{"answer": 43}\n')


def refs_file_added(root: Path) -> None:
    write(root / "refs" / "extra.txt", "another reference\n")


def refs_file_added_in_new_nested_folder(root: Path) -> None:
    write(root / "refs" / "deep" / "deeper" / "check.sh", "exit 0\n")


def refs_file_removed(root: Path) -> None:
    (root / "refs" / "expected.txt").unlink()


def refs_file_renamed(root: Path) -> None:
    (root / "refs" / "expected.txt").rename(root / "refs" / "expected-v2.txt")


def scoring_md_prose_changed(root: Path) -> None:
    write(root / "scoring.md", SCORING_MD + "\nA new paragraph explaining partial credit.\n")


def scoring_md_config_changed(root: Path) -> None:
    write(root / "scoring.md", SCORING_MD.replace('"mixed_weight": 0.25', '"mixed_weight": 0.5'))


def rubric_changed(root: Path) -> None:
    write(root / "rubric.py", RUBRIC + "# stricter now\n")


def judge_added(root: Path) -> None:
    write(root / "judge.md", "Grade the report from 0 to 1.\n")


def task_scoring_changed(root: Path) -> None:
    edit_task(root, "train", "t-checklist", lambda t: t["scoring"]["required"].append("deadline"))


def task_scoring_mode_added(root: Path) -> None:
    edit_task(root, "train", "t-checklist", lambda t: t["scoring"].update(mode="checklist"))


def val_task_scoring_changed(root: Path) -> None:
    edit_task(root, "val", "v-1", lambda t: t["scoring"].update(required=["OK"]))


def task_scoring_extra_field_changed(root: Path) -> None:
    edit_task(root, "train", "t-rubric", lambda t: t["scoring"].update(level=2))


def prompt_changed(root: Path) -> None:
    edit_task(root, "train", "t-checklist", lambda t: t.update(prompt="Summarise input.txt briefly."))


def fixture_changed(root: Path) -> None:
    write(root / "fixtures" / "input.txt", "different raw incident notes\n")


def fixture_added(root: Path) -> None:
    write(root / "fixtures" / "more.txt", "more notes\n")


def tasks_reordered(root: Path) -> None:
    write_jsonl(root / "train.jsonl", list(reversed(TRAIN)))


def blank_lines_added(root: Path) -> None:
    text = (root / "train.jsonl").read_text(encoding="utf-8")
    (root / "train.jsonl").write_text("\n" + text.replace("\n", "\n\n"), encoding="utf-8")


def scoring_keys_reordered(root: Path) -> None:
    rows = read_jsonl(root / "train.jsonl")
    for row in rows:
        row["scoring"] = dict(reversed(list(row["scoring"].items())))
    write_jsonl(root / "train.jsonl", rows)


def feedback_policy_set(root: Path) -> None:
    text = (root / "scoring.md").read_text(encoding="utf-8")
    write(
        root / "scoring.md",
        text.replace('"mixed_weight": 0.25}', '"mixed_weight": 0.25, "feedback": "no-answers"}'),
    )


def readme_added(root: Path) -> None:
    write(root / "README.md", "Notes for suite authors.\n")


CHANGES_CONTRACT: list[Callable[[Path], None]] = [
    refs_file_changed,
    refs_nested_file_changed,
    refs_file_added,
    refs_file_added_in_new_nested_folder,
    refs_file_removed,
    refs_file_renamed,
    scoring_md_prose_changed,
    scoring_md_config_changed,
    rubric_changed,
    judge_added,
    task_scoring_changed,
    task_scoring_mode_added,
    val_task_scoring_changed,
    task_scoring_extra_field_changed,
    feedback_policy_set,
]

KEEPS_CONTRACT: list[Callable[[Path], None]] = [
    prompt_changed,
    fixture_changed,
    fixture_added,
    tasks_reordered,
    blank_lines_added,
    scoring_keys_reordered,
    readme_added,
]


def ids(fns: Sequence[Callable[[Path], None]]) -> list[str]:
    return [fn.__name__ for fn in fns]


# --- tests ---------------------------------------------------------------------------------------


def test_contract_hash_is_sha256_hex(base: Path) -> None:
    suite = load_suite(base)
    assert re.fullmatch(r"[0-9a-f]{64}", suite.contract_hash)
    assert re.fullmatch(r"[0-9a-f]{64}", suite.content_hash)
    assert suite.contract_hash != suite.content_hash


def test_the_contract_hash_of_a_suite_is_what_it_was(base: Path) -> None:
    """Pinned: scores gained feedback (run schema 7) and scoring.md a ``feedback`` key, and a suite
    that does not set it keeps the contract it had, so its old scores and cached rollouts stay comparable."""
    assert (
        load_suite(base).contract_hash == "72e17ac357016ca7951089e58ff789ad8f3acb71afb41514b8bafd1064bc292a"
    )


def test_hashes_are_stable_across_loads(base: Path) -> None:
    first, second = load_suite(base), load_suite(base)
    assert first is not second
    assert first.contract_hash == second.contract_hash
    assert first.content_hash == second.content_hash


def test_hashes_do_not_depend_on_the_suite_location(base: Path, fresh: Callable[[], Path]) -> None:
    original, copy = load_suite(base), load_suite(fresh())
    assert copy.root != original.root
    assert copy.contract_hash == original.contract_hash
    assert copy.content_hash == original.content_hash


def test_contract_files_list_the_scoring_contract(base: Path) -> None:
    suite = load_suite(base)
    names = [name for name, _ in suite.contract_files()]
    assert names == ["scoring.md", "rubric.py", "refs/expected.txt", "refs/nested/golden.json"]


def test_refs_change_changes_the_contract(base: Path, fresh: Callable[[], Path]) -> None:
    """The must-show case: editing a reference file under refs/ yields a new contract hash."""
    before = load_suite(base).contract_hash
    root = fresh()
    (root / "refs" / "expected.txt").write_text("a silently edited reference\n", encoding="utf-8")
    after = load_suite(root)
    assert after.contract_hash != before
    # and scores stamped before and after the edit can no longer be compared
    from skilltune.errors import ContractMismatchError
    from skilltune.score import require_same_contract

    with pytest.raises(ContractMismatchError):
        require_same_contract([before, after.contract_hash])


@pytest.mark.parametrize("mutate", CHANGES_CONTRACT, ids=ids(CHANGES_CONTRACT))
def test_contract_hash_changes(base: Path, fresh: Callable[[], Path], mutate: Callable[[Path], None]) -> None:
    before = load_suite(base)
    root = fresh()
    mutate(root)
    after = load_suite(root)
    assert after.contract_hash != before.contract_hash
    assert after.content_hash != before.content_hash  # the contract is part of the content


@pytest.mark.parametrize("mutate", KEEPS_CONTRACT, ids=ids(KEEPS_CONTRACT))
def test_contract_hash_is_kept(base: Path, fresh: Callable[[], Path], mutate: Callable[[Path], None]) -> None:
    before = load_suite(base)
    root = fresh()
    mutate(root)
    after = load_suite(root)
    assert after.contract_hash == before.contract_hash


@pytest.mark.parametrize(
    "mutate",
    [prompt_changed, fixture_changed, fixture_added, readme_added],
    ids=ids([prompt_changed, fixture_changed, fixture_added, readme_added]),
)
def test_content_hash_changes_with_prompts_and_files(
    base: Path, fresh: Callable[[], Path], mutate: Callable[[Path], None]
) -> None:
    before = load_suite(base)
    root = fresh()
    mutate(root)
    after = load_suite(root)
    assert after.contract_hash == before.contract_hash
    assert after.content_hash != before.content_hash


def test_judge_md_is_a_contract_file(base: Path, fresh: Callable[[], Path]) -> None:
    root = fresh()
    judge_added(root)
    with_judge = load_suite(root)
    assert "judge.md" in [name for name, _ in with_judge.contract_files()]
    before = with_judge.contract_hash
    (root / "judge.md").write_text("Grade the report from 0 to 10.\n", encoding="utf-8")
    assert load_suite(root).contract_hash != before


def test_contract_is_computed_once_per_load(base: Path, fresh: Callable[[], Path]) -> None:
    """The hash pins the suite as loaded; a later edit shows on the next load."""
    root = fresh()
    suite = load_suite(root)
    before = suite.contract_hash
    refs_file_changed(root)
    assert suite.contract_hash == before
    assert load_suite(root).contract_hash != before


# --- Python env ----------------------------------------------------------------------------------

ENV_MODULE = """\
from pathlib import Path


def tasks(split):
    return [] if split == "test" else [{"id": f"{split}-1", "prompt": "say hello"}]


def prepare(task, workspace):
    Path(workspace, "seed.txt").write_text("seed")


def score(task, workspace, agent_result):
    found = "hello" in agent_result.final_text
    return {"hard": int(found), "soft": float(found), "checks": []}
"""


def env_copy(tmp_path: Path, name: str, source: str = ENV_MODULE) -> Path:
    folder = tmp_path / name
    write(folder / "env.py", source)
    return folder


def test_env_hash_is_stable_across_loads(tmp_path: Path) -> None:
    folder = env_copy(tmp_path, "env")
    first, second = load_suite(folder), load_suite(folder)
    assert first.kind == "python"
    assert re.fullmatch(r"[0-9a-f]{64}", first.contract_hash)
    assert first.contract_hash == second.contract_hash
    assert first.content_hash == second.content_hash
    assert load_suite(env_copy(tmp_path, "env-copy")).contract_hash == first.contract_hash


def test_env_hash_changes_with_the_module_source(tmp_path: Path) -> None:
    before = load_suite(env_copy(tmp_path, "env"))
    after = load_suite(env_copy(tmp_path, "env-edited", ENV_MODULE + "\n# the scorer got stricter\n"))
    assert after.contract_hash != before.contract_hash
    assert after.content_hash != before.content_hash


def test_env_hash_covers_refs(tmp_path: Path) -> None:
    folder = env_copy(tmp_path, "env")
    write(folder / "refs" / "answer.txt", "hello\n")
    before = load_suite(folder).contract_hash
    write(folder / "refs" / "answer.txt", "hello there\n")
    assert load_suite(folder).contract_hash != before


ENV_FROM_DATA = """\
import json
from pathlib import Path

DATA = json.loads(Path(__file__).with_name("tasks.json").read_text())


def tasks(split):
    return DATA.get(split, [])


def prepare(task, workspace):
    pass


def score(task, workspace, agent_result):
    return {"hard": 1, "soft": 1.0, "checks": []}
"""


def env_with_data(tmp_path: Path, name: str, tasks: dict[str, Any]) -> Suite:
    folder = env_copy(tmp_path, name, ENV_FROM_DATA)
    write(folder / "tasks.json", json.dumps(tasks))
    return load_suite(folder)


ENV_TASKS: dict[str, Any] = {
    "train": [{"id": "a", "prompt": "say hello", "scoring": {"word": "hello"}}],
    "val": [{"id": "b", "prompt": "say bye", "scoring": {"word": "bye"}}],
}


def test_env_hash_changes_with_task_scoring_not_prompts(tmp_path: Path) -> None:
    base = env_with_data(tmp_path, "env-base", ENV_TASKS)
    rescored = json.loads(json.dumps(ENV_TASKS))
    rescored["train"][0]["scoring"]["word"] = "hi"
    reworded = json.loads(json.dumps(ENV_TASKS))
    reworded["train"][0]["prompt"] = "please say hello"
    scoring_edit = env_with_data(tmp_path, "env-rescored", rescored)
    prompt_edit = env_with_data(tmp_path, "env-reworded", reworded)
    assert scoring_edit.contract_hash != base.contract_hash
    assert prompt_edit.contract_hash == base.contract_hash
    assert prompt_edit.content_hash != base.content_hash
