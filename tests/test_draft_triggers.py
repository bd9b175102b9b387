"""Drafting trigger queries (skilltune/draft/): the asks of a scripted model served by the fake
OpenAI-compatible server (phrasings, near misses per sibling, unrelated requests), the dedupe, the
balance, the split of a query by its text alone, the review file and ``draft apply``, validate's
report of unreviewed drafts, the refusals that write nothing, and the label check flagging a
planted mislabel. The mock drafter makes the same suite offline."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.draft import apply_review, draft_triggers
from skilltune.draft.asks import STYLES, plan, read_choice, read_queries
from skilltune.draft.dedupe import Deduper, normalise
from skilltune.suite import load_suite, validate_suite
from skilltune.suite.draft_review import REVIEW_FILE, read_review, split_of
from skilltune.suite.trigger_evals import deal
from tests.fake_openai import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI, prompt_of

runner = CliRunner()

SKILLS = {
    "release-notes": "Writes release notes from a list of merged pull requests. Use when the user asks for "
    "release notes.",
    "ci-failures": "Finds why a CI build or pipeline failed from its log. Use when the user asks why a build, "
    "a test job or a nightly run failed.",
    "commit-message": "Writes git commit messages for staged changes. Use when the user asks for a commit "
    "message or to describe a diff in one line.",
    "meeting-notes": "Turns meeting transcripts into notes with decisions and action items. Use when the "
    "user asks for meeting notes or minutes.",
}
MISLABEL = "why did the nightly build fail on the release branch?"
# What the scripted model writes for each ask, in order; an ask gets the first items its prompt does not
# list as written already. Planted: a normalised duplicate (terse), a near-duplicate (question), the
# mislabel (question: a ci-failures request among the should-trigger ones), a repeat across buckets.
POOLS: dict[str, list[str]] = {
    "terse": [
        "draft release notes for v2.4", "changelog entry for 1.9.2", "DRAFT release notes for v2.4!",
        "release notes, android 5.1", "what's new page for the beta", "release notes for the 3.0 tag",
        "changelog for the cli, short", "release notes for sprint 14", "what's new in 4.2, bullets",
        "release notes for the hotfix",
    ],
    "question": [
        "can you write the release notes for version 2.0?", MISLABEL,
        "please can you write the release notes for version 2.0?", "what goes in the changelog for 1.8?",
        "could you turn the merged PRs into release notes?", "is the what's new page for 5.0 ready to write?",
        "how should the release notes for the API look?", "can you update the changelog for the hotfix?",
        "would you draft release notes for the mobile beta?", "what should the 2.1 changelog say?",
    ],
    "long": [
        "We shipped 3.2 yesterday and support keeps asking what changed. Please write the release notes from "
        "the merged PRs, grouped for users.",
        "Our changelog is months behind. Go through what merged since 1.4 and write a changelog entry a "
        "customer can read.",
        "The beta ends Friday and marketing wants a what's new page. Draft it from the pull requests since "
        "the last tag, plain words.",
        "I maintain the SDK and 2.0 is out. Write release notes that put the breaking changes first and say "
        "what users must change.",
        "We cut 7.1 this morning. Turn the list of merged pull requests into release notes for the blog post.",
        "The team finished sprint 9 and I owe the release notes for it; group them into features and fixes.",
        "Release notes for the desktop app are due; the PR titles are cryptic, so rewrite them for users.",
        "We moved to calendar versioning. Write the changelog for 2024.06 from what landed this month.",
        "Product asked for a what's new section in the docs for 3.0; write it from the merged changes.",
        "Version 1.0 of the CLI is tagged. Please write its release notes, leaving out CI and refactors.",
    ],
    "casual": [
        "yo can u do release notes for 2.2", "changelog for the last sprint pls", "whats new for 6.0 thx",
        "release notes for the ios build asap", "need a changelog entry for the fix lol",
        "release notes 4 the web app pls", "quick changelog for 0.9?", "what's new page for the beta pls",
        "release notes for v3 real quick", "changelog for the api gateway thx",
    ],
    "ci-failures": [
        "why did the release build fail last night?", "the release pipeline failed on the deploy step, why?",
        "find why the build failed on the release notes branch", "the nightly build failed after the release",
        "why did the release tag build fail on arm64?", "the notes generator build failed in CI, why?",
    ],
    "commit-message": [
        "write a commit message for the release notes fix", "commit message for bumping the release version",
        "describe this release script diff in one commit message", "commit message for the notes template change",
        "one-line commit message for the release workflow edit", "commit message for fixing the release typo",
    ],
    "meeting-notes": [
        "take meeting notes from the release planning call", "meeting notes for the release retro please",
        "summarise the release meeting into action items", "minutes of the meeting about the release date",
        "meeting notes from the notes-app kickoff", "action items from the release go/no-go meeting",
    ],
    "unrelated": [
        "write a fibonacci function in python", "rename getUser to fetchUser everywhere",
        "add a dark mode toggle to the settings page", "why does this regex not match emails?",
        "set up eslint with the recommended rules", "add retries to the http client",
        "draft release notes for v2.4",  # the same as a should-trigger query: the first is kept
        "convert this class to a dataclass", "speed up the image resizer", "explain what this decorator does",
    ],
}  # fmt: skip


def _bucket(prompt: str) -> str:
    style = re.search(r"Write every one of them as (.*?)\.\n", prompt)
    if style:
        return next(name for name, text in STYLES.items() if text == style.group(1))
    sibling = re.search(r'the skill "([a-z-]+)" should handle, not the skill', prompt)
    if sibling:
        return sibling.group(1)
    assert "none of these skills is for" in prompt, prompt
    return "unrelated"


def choose_skill(query: str) -> str:
    """The scripted model's answer to a label check: the skill a query's words point to."""
    q = query.lower()
    if "build" in q and "fail" in q:
        return "ci-failures"
    if "commit message" in q:
        return "commit-message"
    if "meeting" in q:
        return "meeting-notes"
    if any(w in q for w in ("release notes", "changelog", "what's new", "whats new")):
        return "release-notes"
    return "none"


def scripted(pools: dict[str, list[str]] = POOLS) -> Any:
    """A model that answers the draft's asks from ``pools`` and the label check by ``choose_skill``; the
    casual ask is answered as a numbered list in prose, the first long ask with no list at all (repaired)."""

    def respond(body: dict[str, Any]) -> str:
        prompt = prompt_of(body)
        request = re.search(r"<request>\n(.*)\n</request>", prompt, re.S)
        if request:
            choice = choose_skill(request.group(1))
            return choice if choice != "ci-failures" else f"The best fit is {choice}."
        bucket = _bucket(prompt)
        if (
            bucket == "long"
            and "These are written already" not in prompt
            and "could not be used" not in prompt
        ):
            return "Sure! Here are some requests a developer might type."
        n = int(re.search(r"a JSON list of (\d+) strings", prompt).group(1))  # type: ignore[union-attr]
        written = set(re.findall(r"^- (.*)$", prompt.split("These are written already", 1)[-1], re.M))
        fresh = [q for q in pools[bucket] if q not in written][:n]
        if bucket == "casual":
            return "Here you go:\n" + "\n".join(f"{i}. {q}" for i, q in enumerate(fresh, start=1))
        return "```json\n" + json.dumps(fresh) + "\n```"

    return respond


def _skills(root: Path, description: str | None = SKILLS["release-notes"]) -> tuple[Path, Path]:
    """The skill to draft for and a catalogue of the three others."""
    skill = root / "release-notes"
    skill.mkdir(parents=True)
    front = f"description: {description}\n" if description is not None else ""
    (skill / "SKILL.md").write_text(f"---\nname: release-notes\n{front}---\n\n# Release notes\n")
    catalogue = root / "skills"
    for name, text in SKILLS.items():
        if name != "release-notes":
            (catalogue / name).mkdir(parents=True)
            (catalogue / name / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: {text}\n---\n\nBody.\n"
            )
    return skill, catalogue


def _api(server: FakeOpenAI, max_tokens: int = 500) -> dict[str, Any]:
    return {
        "model": "m", "base_url": server.base_url, "api_key_env": "FAKE_API_KEY", "stream": False,
        "max_tokens": max_tokens,
    }  # fmt: skip


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "k")


def _rows(out: Path) -> list[Any]:
    rows, problems = read_review(out / REVIEW_FILE)
    assert problems == []
    return rows


def _tasks(out: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    found = {}
    for split in ("train", "val", "test"):
        path = out / f"{split}.jsonl"
        for line in path.read_text().splitlines() if path.is_file() else []:
            task = json.loads(line)
            found[task["id"]] = (split, task)
    return found


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_scripted_model_is_asked_each_phrasing_near_misses_per_sibling_and_unrelated_requests(
    tmp_path: Path, keyed: None
) -> None:
    skill, catalogue = _skills(tmp_path)
    with FakeOpenAI(scripted()) as server:
        result = draft_triggers(
            skill, catalogue, tmp_path / "out", count=24, drafter="api", drafter_options=_api(server)
        )
    prompts = [prompt_of(r["body"]) for r in server.requests]
    asks = [p for p in prompts if "<request>" not in p]
    # one short ask per bucket, each listing every skill with its description; a second for terse and
    # question (a duplicate in their first answers left them one short) and for long (its first answer held
    # no list: repaired)
    assert Counter(_bucket(p) for p in asks) == {
        "terse": 2, "question": 2, "long": 2, "casual": 1, "ci-failures": 1, "commit-message": 1,
        "meeting-notes": 1, "unrelated": 1,
    }  # fmt: skip
    assert all(f"- {name}: {text}" in p for p in asks for name, text in SKILLS.items())
    for style, text in STYLES.items():
        assert any(f"Write every one of them as {text}." in p for p in asks), style
    near = next(p for p in asks if _bucket(p) == "ci-failures")
    assert 'handle, not the skill "release-notes"' in near and "(release, notes)" in near
    repaired = [p for p in asks if "could not be used: no list of requests in the answer" in p]
    assert [_bucket(p) for p in repaired] == ["long"]
    second = next(p for p in asks if _bucket(p) == "terse" and "written already" in p)
    assert "Answer with a JSON list of 1 strings" in second and "- draft release notes for v2.4" in second
    # every call bounded: the drafter's max_tokens, a tighter one for a label check
    bodies = [r["body"] for r in server.requests]
    assert {b["max_tokens"] for b in bodies if "<request>" not in prompt_of(b)} == {500}
    assert {b["max_tokens"] for b in bodies if "<request>" in prompt_of(b)} == {256}
    # the plan: 12 of each class; 3 per phrasing; 8 near misses over the siblings in name order; 4 unrelated
    rows = _rows(result.out)
    assert Counter(r.why for r in rows) == {
        "phrasing: terse": 3, "phrasing: question": 3, "phrasing: long": 3, "phrasing: casual": 3,
        "near miss for sibling ci-failures": 3, "near miss for sibling commit-message": 3,
        "near miss for sibling meeting-notes": 2, "unrelated": 4,
    }  # fmt: skip
    by_why = {r.why: r for r in rows}
    assert by_why["phrasing: casual"].query in POOLS["casual"]  # read from a numbered list in prose
    assert all(r.should_trigger == r.why.startswith("phrasing") for r in rows)
    # the log: every call with its prompt, answer, tokens and seconds
    log = [json.loads(line) for line in (result.out / "draft_log.jsonl").read_text().splitlines()]
    assert len(log) == len(server.requests) == result.manifest.calls
    assert [e["prompt"] for e in log] == prompts
    assert all(e["tokens_in"] == PROMPT_TOKENS and e["tokens_out"] == COMPLETION_TOKENS for e in log)
    assert all(isinstance(e["seconds"], float) and e["answer"] for e in log)
    assert [e["problem"] is not None for e in log].count(True) == 1


def test_duplicates_are_dropped_by_normalised_text_and_near_duplicates(tmp_path: Path, keyed: None) -> None:
    skill, catalogue = _skills(tmp_path)
    with FakeOpenAI(scripted()) as server:
        result = draft_triggers(
            skill, catalogue, tmp_path / "out", count=24, drafter="api", drafter_options=_api(server)
        )
    dropped = {d["query"]: (d["kept"], d["rule"]) for d in result.manifest.duplicates}
    assert dropped["DRAFT release notes for v2.4!"] == ("draft release notes for v2.4", "normalised")
    kept, rule = dropped["please can you write the release notes for version 2.0?"]
    assert kept == "can you write the release notes for version 2.0?" and rule == "near (0.91)"
    queries = {task["prompt"] for _, task in _tasks(result.out).values()}
    assert not set(dropped) & queries
    assert len({normalise(q) for q in queries}) == len(queries)
    # the unrelated ask repeated a should-trigger query: kept once, as asked first
    assert [r.should_trigger for r in _rows(result.out) if r.query == "draft release notes for v2.4"] == [
        True
    ]
    # the rule itself: a word added is a near-duplicate, a word that matters changed is not
    dedupe = Deduper()
    assert dedupe.add("fix the build") and dedupe.add("fix the tests")
    assert not dedupe.add("Fix  the build.")
    assert dedupe.add("fix the failing tests in ci") and not dedupe.add("please fix the failing tests in ci")
    assert not dedupe.add("in ci, fix the failing tests")
    assert [d.rule for d in dedupe.dropped] == ["normalised", "near (0.86)", "near (1.00)"]


def test_a_drafter_that_gives_too_few_of_one_class_gets_a_balanced_suite(tmp_path: Path, keyed: None) -> None:
    skill, catalogue = _skills(tmp_path)
    few = {**POOLS, "ci-failures": POOLS["ci-failures"][:2], "commit-message": POOLS["commit-message"][:1],
           "meeting-notes": [], "unrelated": POOLS["unrelated"][:3]}  # fmt: skip
    with FakeOpenAI(scripted(few)) as server:
        result = runner.invoke(
            app,
            ["draft", "triggers", str(skill), "--catalogue", str(catalogue), "--out", str(tmp_path / "out"),
             "--count", "24", "--drafter", "api", *(f"--drafter-opt={k}={v}" for k, v in _api(server).items())],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = _rows(tmp_path / "out")
    # 2 + 1 + 0 near misses and 3 unrelated: 6 should-not queries, so 6 should-trigger ones
    assert Counter(r.should_trigger for r in rows) == {True: 6, False: 6}
    manifest = json.loads((tmp_path / "out" / "draft.json").read_text())
    positives = sum(b["distinct"] for b in manifest["buckets"] if b["kind"] == "should-trigger")
    assert positives >= 12
    said = " ".join(result.output.split())
    assert (
        f"asked for 24: the drafter gave {positives} distinct should-trigger and 6 should-not queries" in said
    )
    # the should-trigger ones kept still spread over the phrasings: one each, then the first two again
    assert Counter(r.why for r in rows if r.should_trigger) == {
        "phrasing: terse": 2, "phrasing: question": 2, "phrasing: long": 1, "phrasing: casual": 1
    }  # fmt: skip


def test_a_querys_split_is_its_texts_whatever_else_is_drafted_or_added(tmp_path: Path, keyed: None) -> None:
    skill, catalogue = _skills(tmp_path)
    with FakeOpenAI(scripted()) as server:
        small = draft_triggers(
            skill, catalogue, tmp_path / "small", count=24, drafter="api", drafter_options=_api(server)
        )
        large = draft_triggers(
            skill, catalogue, tmp_path / "large", count=48, drafter="api", drafter_options=_api(server)
        )
    splits = [
        {t["prompt"]: (s, t["should_trigger"]) for s, t in _tasks(d.out).values()} for d in (small, large)
    ]
    shared = set(splits[0]) & set(splits[1])
    assert len(shared) >= 20 and len(splits[1]) > len(splits[0])
    assert all(splits[0][q] == splits[1][q] == (split_of(q), splits[0][q][1]) for q in shared)
    # the loader's rule for trigger_evals.json (dealt in turn by hash order) would have moved some
    dealt = [dict(zip(s, deal([(q, s[q][1]) for q in s]), strict=True)) for s in splits]
    assert any(dealt[0][q] != dealt[1][q] for q in shared)
    # a query added in the review lands in its text's split and moves no other
    before = _tasks(large.out)
    review = large.out / REVIEW_FILE
    review.write_text(
        review.read_text() + "| ok | added-1 | true | - | write the changelog for 9.9 | by hand | - |\n"
    )
    apply_review(large.out)
    after = _tasks(large.out)
    assert after.pop("added-1")[0] == split_of("write the changelog for 9.9")
    assert after == before


def test_the_review_file_and_apply(tmp_path: Path, keyed: None) -> None:
    skill, catalogue = _skills(tmp_path)
    with FakeOpenAI(scripted()) as server:
        out = draft_triggers(
            skill, catalogue, tmp_path / "out", count=24, drafter="api", drafter_options=_api(server)
        ).out
    review = out / REVIEW_FILE
    text = review.read_text()
    assert "| mark | id | should_trigger | split | query | why | check |" in text
    assert f"skilltune draft apply {out}" in text
    rows = _rows(out)
    assert all(r.mark == "?" for r in rows) and len(rows) == 24
    tasks = _tasks(out)
    assert {r.id: (r.task_split, r.query, r.should_trigger) for r in rows} == {
        i: (s, t["prompt"], t["should_trigger"]) for i, (s, t) in tasks.items()
    }
    # skill-creator's format holds the same queries, where the suite loader does not read them again
    creator = json.loads((out / "skill-creator" / "trigger_evals.json").read_text())
    assert sorted(json.dumps(c) for c in creator) == sorted(
        json.dumps({"query": t["prompt"], "should_trigger": t["should_trigger"]}) for _, t in tasks.values()
    )
    assert sum(len(v) for v in load_suite(out).splits.values()) == 24
    # a person reviews: drop one, flip one, correct one's text, keep the rest
    drop, flip, edit = rows[0], rows[12], rows[1]
    lines = text.splitlines()
    lines[drop.line - 1] = lines[drop.line - 1].replace("| ? |", "| drop |", 1)
    lines[flip.line - 1] = lines[flip.line - 1].replace("| ? |", "| flip |", 1)
    lines[edit.line - 1] = lines[edit.line - 1].replace(edit.query, "a changelog entry \\| for 1.9.3")
    for row in rows[2:12] + rows[13:]:
        lines[row.line - 1] = lines[row.line - 1].replace("| ? |", "| ok |", 1)
    review.write_text("\n".join(lines) + "\n")
    reviewed = review.read_bytes()
    # before apply the suite does not show the review: an error naming the line and the fix
    found = validate_suite(out)
    errors = {p.line: p.message for p in found if not p.warning}
    assert set(errors) == {drop.line, flip.line, edit.line}
    assert f"run `skilltune draft apply {out}`" in errors[drop.line] and "marked drop" in errors[drop.line]
    assert runner.invoke(app, ["validate", str(out)]).exit_code == 2
    result = runner.invoke(app, ["draft", "apply", str(out)])
    assert result.exit_code == 0, result.output
    assert "ok 21, flip 1, drop 1, not reviewed 1" in result.output
    after = _tasks(out)
    assert drop.id not in after and len(after) == 23
    assert after[flip.id][1]["should_trigger"] is (not flip.should_trigger)
    assert after[edit.id] == (
        edit.task_split,
        {"id": edit.id, "prompt": "a changelog entry | for 1.9.3", "should_trigger": True},
    )
    assert review.read_bytes() == reviewed  # the review is never rewritten
    assert [p for p in validate_suite(out) if not p.warning] == []
    applied = _files(out)
    assert runner.invoke(app, ["draft", "apply", str(out)]).exit_code == 0
    assert _files(out) == applied  # applying again changes nothing


def test_validate_reports_the_unreviewed_drafts(tmp_path: Path) -> None:
    skill, catalogue = _skills(tmp_path)
    out = draft_triggers(skill, catalogue, tmp_path / "out", count=24).out
    rows = _rows(out)
    result = runner.invoke(app, ["validate", str(out)])
    assert result.exit_code == 0, result.output
    first = rows[0].line
    flagged = [r.line for r in rows if r.flagged]
    assert (
        f"{out / REVIEW_FILE}:{first}: warning: 24 drafted queries are not reviewed yet "
        f"(lines {', '.join(str(first + i) for i in range(5))}, ...;"
    ) in " ".join(result.output.split())
    if flagged:
        assert f"of them flagged by the label check (lines {flagged[0]}" in " ".join(result.output.split())
    # reviewed: no warning
    review = out / REVIEW_FILE
    review.write_text(review.read_text().replace("| ? |", "| ok |"))
    assert [p for p in validate_suite(out) if p.file.endswith(REVIEW_FILE)] == []


def test_apply_refuses_a_task_the_review_does_not_hold(tmp_path: Path) -> None:
    skill, catalogue = _skills(tmp_path)
    out = draft_triggers(skill, catalogue, tmp_path / "out", count=24).out
    val = out / "val.jsonl"
    val.write_text(
        val.read_text() + json.dumps({"id": "mine", "prompt": "hand-written", "should_trigger": True}) + "\n"
    )
    before = _files(out)
    result = runner.invoke(app, ["draft", "apply", str(out)])
    assert result.exit_code == 2
    assert f"{val}:" in result.output and "'mine'" in result.output and "add a row for each" in result.output
    assert _files(out) == before


def _refused(tmp_path: Path, skill: Path, catalogue: Path, out: Path) -> str:
    before = _files(tmp_path)
    result = runner.invoke(
        app,
        ["draft", "triggers", str(skill), "--catalogue", str(catalogue), "--out", str(out), "--count", "24"],
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert _files(tmp_path) == before and not any(".drafting" in p.name for p in tmp_path.rglob("*"))
    return " ".join(result.output.split())


def test_refusals_write_nothing(tmp_path: Path) -> None:
    skill, catalogue = _skills(tmp_path / "a")
    out = tmp_path / "existing"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    said = _refused(tmp_path, skill, catalogue, out)
    assert f"{out} exists: a draft never overwrites; give another --out" in said
    said = _refused(tmp_path, skill, tmp_path / "nowhere", tmp_path / "new")
    assert (
        f"{tmp_path / 'nowhere'}: no such folder: give --catalogue a folder of the user's other skills"
        in said
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no skills in it" in _refused(tmp_path, skill, empty, tmp_path / "new")
    bare, _ = _skills(tmp_path / "b", description=None)
    said = _refused(tmp_path, bare, catalogue, tmp_path / "new")
    assert (
        f"{bare / 'SKILL.md'}:1: no description in the front matter" in said and "add `description:" in said
    )
    # the skill itself inside the catalogue folder is left out of it; another skill of its name is refused
    twin = catalogue / "twin"
    twin.mkdir()
    (twin / "SKILL.md").write_text("---\nname: release-notes\ndescription: Another. Use when asked.\n---\n")
    assert "another skill named 'release-notes'" in _refused(tmp_path, skill, catalogue, tmp_path / "new")
    twin.joinpath("SKILL.md").unlink()
    twin.rmdir()
    # a folder of the user's skills that holds the skill too: the skill is left out of its catalogue
    together = tmp_path / "together"
    for folder in (skill, catalogue / "ci-failures"):
        (together / folder.name).mkdir(parents=True)
        (together / folder.name / "SKILL.md").write_bytes((folder / "SKILL.md").read_bytes())
    out = draft_triggers(together / "release-notes", together, tmp_path / "new", count=8).out
    assert sorted(p.name for p in (out / "catalogue").iterdir()) == ["ci-failures"]


def test_a_failing_drafter_writes_nothing(tmp_path: Path, keyed: None) -> None:
    skill, catalogue = _skills(tmp_path)
    with FakeOpenAI(lambda body: (401, {"error": {"message": "bad key"}})) as server:
        result = runner.invoke(
            app,
            ["draft", "triggers", str(skill), "--catalogue", str(catalogue), "--out", str(tmp_path / "out"),
             "--drafter", "api", *(f"--drafter-opt={k}={v}" for k, v in _api(server).items())],
        )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "nothing was written" in result.output
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))
    unknown = runner.invoke(app, ["draft", "triggers", str(skill), "--catalogue", str(catalogue),
                                  "--out", str(tmp_path / "out"), "--drafter", "nobody"])  # fmt: skip
    assert unknown.exit_code == 2 and "give mock, api, or an agent CLI" in unknown.output


def test_the_label_check_flags_a_planted_mislabel(tmp_path: Path, keyed: None) -> None:
    skill, catalogue = _skills(tmp_path)
    with FakeOpenAI(scripted()) as server:
        result = draft_triggers(
            skill, catalogue, tmp_path / "out", count=24, drafter="api", drafter_options=_api(server)
        )
    rows = _rows(result.out)
    planted = next(r for r in rows if r.query == MISLABEL)
    assert planted.should_trigger and planted.check == "DISAGREES: fits ci-failures"
    assert [r.id for r in rows if r.flagged] == [planted.id] == result.manifest.flagged
    # every answer reached the review; the others agree with their labels; the flagged query is kept
    assert all(r.check.endswith(f"fits {choose_skill(r.query)}") for r in rows)
    assert {r.check for r in rows if r.why.startswith("near miss for sibling ci")} == {
        "fits ci-failures",
        "fits none",
    }
    assert planted.id in _tasks(result.out)
    # another model as the checker: the drafter (the mock) is asked nothing, the checker every query
    with FakeOpenAI(scripted()) as checker:
        other = draft_triggers(
            skill, catalogue, tmp_path / "mocked", count=24, checker="api", checker_options=_api(checker)
        )
    assert len(checker.requests) == 24 and all("<request>" in prompt_of(r["body"]) for r in checker.requests)
    assert other.manifest.checker == "api:m"
    assert all(r.check.endswith(f"fits {choose_skill(r.query)}") for r in _rows(other.out))


def test_the_mock_drafter_repeats_and_its_suite_runs(tmp_path: Path) -> None:
    skill, catalogue = _skills(tmp_path)
    one = draft_triggers(skill, catalogue, tmp_path / "one", count=120).out
    two = draft_triggers(skill, catalogue, tmp_path / "two", count=120).out
    other = draft_triggers(skill, catalogue, tmp_path / "other", count=120, seed=1).out
    files = _files(one)
    files.pop("draft_review.md")  # names its own folder
    twin = _files(two)
    twin.pop("draft_review.md")
    assert files == twin
    assert _tasks(one) != _tasks(other)
    rows = _rows(one)
    assert Counter(r.should_trigger for r in rows) == {True: 60, False: 60}
    # each class stratified: its 60 queries as even over train, val and test as the surplus allowed
    for should in (True, False):
        counts = Counter(r.task_split for r in rows if r.should_trigger is should)
        assert max(counts.values()) - min(counts.values()) <= 2, counts
    words = {s: [len(r.query.split()) for r in rows if r.why == f"phrasing: {s}"] for s in STYLES}
    assert min(words["long"]) > max(words["terse"])
    assert all(r.query == r.query.lower() for r in rows if r.why == "phrasing: casual")
    manifest = json.loads((one / "draft.json").read_text())
    assert {d["rule"].split(" ")[0] for d in manifest["duplicates"]} == {"normalised", "near"}
    # the drafted suite runs as a trigger suite with its catalogue
    result = runner.invoke(
        app,
        ["run", str(one), "--skill", str(skill), "--agent", "mock", "--split", "val", "--out",
         str(tmp_path / "eval"), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["trigger"]["n"] == len([r for r in rows if r.task_split == "val"])


def test_answers_are_read_leniently() -> None:
    assert read_queries('```json\n["a b", "c d"]\n```') == ["a b", "c d"]
    assert read_queries('Sure: ["a b", "c d"] hope that helps') == ["a b", "c d"]
    assert read_queries('{"requests": [{"query": "a b"}, "c d"]}') == ["a b", "c d"]
    assert read_queries("1. first one\n2) second one\n- third one") == [
        "first one",
        "second one",
        "third one",
    ]
    assert read_queries('["a b", "c d", "e f', cut=True) == ["a b", "c d"]
    with pytest.raises(ValueError):
        read_queries("I cannot help with that.")
    names = ["ci-failures", "release-notes"]
    assert read_choice("The best fit is release-notes.", names) == "release-notes"
    assert read_choice('{"skill": "none"}', names) is None
    assert read_choice("ci-failures, not release-notes", names) == "ci-failures"
    with pytest.raises(ValueError):
        read_choice("release", names)
    assert [b.target for b in plan(120, ["a", "b", "c"])] == [15, 15, 15, 15, 14, 13, 13, 20]
