"""Patch ops on skill text: exact-once anchors, near matches, all-or-nothing patches,
front matter and PROTECTED blocks untouched."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from skilltune.proposal import Edit
from skilltune.propose.edit import (
    PatchError,
    apply_edit,
    apply_patch,
    check_edit,
    protected_blocks,
    set_protected_block,
)
from skilltune.skill import Candidate, split_front_matter

FRONT_MATTER = """\
---
name: release-notes
description: Formats release notes. Use when asked to write or review release notes.
---
"""
RULES = [
    "- Always cite the source file and line for every claim.",
    "- Group changes under Added, Changed and Fixed headings.",
    "- Keep each entry to one sentence in the past tense.",
    "- Never mention internal ticket numbers.",
]
CONVENTIONS = """\
<!-- PROTECTED:conventions -->
## Conventions
Dates use ISO 8601 (YYYY-MM-DD).
<!-- /PROTECTED -->
"""
TAIL = "\nSee the guide for worked examples.\n"


def skill_text(rules: list[str] | None = None, *, extra: str = "", tail: str = "") -> str:
    """The fixture SKILL.md, built from its parts: ``extra`` goes after the rules list."""
    rules = RULES if rules is None else rules
    body = "# Release notes\n\n## Rules\n\n" + "".join(r + "\n" for r in rules) + extra + "\n"
    return FRONT_MATTER + body + CONVENTIONS + tail


TEXT = skill_text()
TEXT_WITH_TAIL = skill_text(tail=TAIL)
GUIDE = "# Guide\n\nAn example entry:\n\n- Fixed the crash on empty input.\n"


@pytest.fixture
def skill() -> Candidate:
    return Candidate({"SKILL.md": TEXT})


@pytest.fixture
def multi() -> Candidate:
    return Candidate({"SKILL.md": TEXT_WITH_TAIL, "references/guide.md": GUIDE})


def apply_one(text: str, edit: Edit) -> str:
    new, _ = apply_patch(Candidate({"SKILL.md": text}), [edit])
    return new.files["SKILL.md"]


def front_matter_block(text: str) -> str:
    """The raw front matter: everything up to and including the closing ``---`` line."""
    lines = text.splitlines(keepends=True)
    assert lines[0] == "---\n"
    close = next(i for i in range(1, len(lines)) if lines[i].rstrip("\n") == "---")
    return "".join(lines[: close + 1])


def test_fixture_is_well_formed() -> None:
    assert TEXT.count("\n- ") == 4
    assert list(protected_blocks(TEXT)) == ["conventions"]
    fm = split_front_matter(TEXT)
    assert fm.error is None
    assert fm.data == {
        "name": "release-notes",
        "description": "Formats release notes. Use when asked to write or review release notes.",
    }


# --- exact-once anchors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            Edit(op="replace", anchor="internal ticket numbers", text="ticket numbers or internal links"),
            skill_text([*RULES[:3], "- Never mention ticket numbers or internal links."]),
            id="replace-part-of-line",
        ),
        pytest.param(
            Edit(
                op="replace", anchor=RULES[1], text="- Group changes by kind.\n- Sort each group by impact."
            ),
            skill_text([RULES[0], "- Group changes by kind.", "- Sort each group by impact.", *RULES[2:]]),
            id="replace-whole-line-with-two",
        ),
        pytest.param(
            Edit(op="delete", anchor=RULES[2]),
            skill_text([*RULES[:2], RULES[3]]),
            id="delete-whole-line",
        ),
        pytest.param(
            Edit(op="delete", anchor=" in the past tense"),
            skill_text([*RULES[:2], "- Keep each entry to one sentence.", RULES[3]]),
            id="delete-part-of-line",
        ),
        pytest.param(
            Edit(op="insert_after", anchor="Group changes under", text="- List breaking changes first."),
            skill_text([*RULES[:2], "- List breaking changes first.", *RULES[2:]]),
            id="insert-after-partial-anchor",
        ),
        pytest.param(
            Edit(op="insert_after", anchor=RULES[3], text="\n\n- Link each entry to its pull request.\n\n"),
            skill_text([*RULES, "- Link each entry to its pull request."]),
            id="insert-after-strips-blank-lines",
        ),
    ],
)
def test_exact_anchor_ops(skill: Candidate, edit: Edit, expected: str) -> None:
    new, applied = apply_patch(skill, [edit])
    assert new.files["SKILL.md"] == expected
    assert applied == [edit]
    assert applied[0].matched is None


def test_delete_whole_line_with_indentation_drops_the_line() -> None:
    text = "# T\n\n- a\n    indented detail\n- b\n"
    assert apply_edit(text, Edit(op="delete", anchor="indented detail"))[0] == "# T\n\n- a\n- b\n"


def test_delete_last_line_without_newline() -> None:
    assert apply_edit("one\ntwo", Edit(op="delete", anchor="two"))[0] == "one\n"


def test_insert_after_last_line_without_newline() -> None:
    assert (
        apply_edit("one\ntwo", Edit(op="insert_after", anchor="two", text="three"))[0] == "one\ntwo\nthree\n"
    )


@pytest.mark.parametrize("op", ["replace", "delete", "insert_after"])
def test_anchor_twice_is_refused(skill: Candidate, op: str) -> None:
    edit = Edit.model_validate({"op": op, "anchor": "release notes", "text": "x"})
    # "release notes" occurs twice, both in the front matter description
    with pytest.raises(PatchError, match="2 times"):
        apply_patch(skill, [edit])


def test_anchor_twice_in_body_is_refused() -> None:
    text = skill_text(extra="- Always cite the source.\n")
    with pytest.raises(PatchError, match="2 times"):
        apply_edit(text, Edit(op="replace", anchor="Always cite the source", text="x"))


def test_overlapping_occurrences_count_as_two() -> None:
    # "ab ab" occurs at offsets 0 and 3 of "ab ab ab"; the anchor is not unique.
    with pytest.raises(PatchError, match="2 times"):
        apply_edit("ab ab ab\n", Edit(op="replace", anchor="ab ab", text="Z"))


@pytest.mark.parametrize("op", ["replace", "delete", "insert_after"])
def test_missing_anchor_is_refused(skill: Candidate, op: str) -> None:
    edit = Edit.model_validate({"op": op, "anchor": "Write entries in French.", "text": "x"})
    with pytest.raises(PatchError, match="not found"):
        apply_patch(skill, [edit])


@pytest.mark.parametrize("anchor", [None, "", "   ", "\n"])
def test_missing_or_blank_anchor_is_refused(skill: Candidate, anchor: str | None) -> None:
    with pytest.raises(PatchError, match="op 1"):
        apply_patch(skill, [Edit(op="replace", anchor=anchor, text="x")])


def test_ambiguous_near_match_is_refused() -> None:
    text = "# T\n\nRun the tests before you commit.\n\nLater:\n\nRun the tests before you commit.\n"
    with pytest.raises(PatchError, match="ambiguous"):
        apply_edit(text, Edit(op="replace", anchor="run the TESTS before you commit.", text="x"))


def test_ambiguous_typo_near_match_is_refused() -> None:
    # one substitution away from both lines
    text = "# T\n\n- Use the stable release channel.\n- Use the stable release channels\n"
    with pytest.raises(PatchError, match="ambiguous"):
        apply_edit(text, Edit(op="delete", anchor="- Use the stable release channelX"))


# --- near matches ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "anchor",
    [
        pytest.param("-   always  cite the SOURCE file and line for every claim. ", id="whitespace-and-case"),
        pytest.param("- Always cite teh source file and line for every claim.", id="typo"),
        pytest.param("- Always cite the source file and line for each claim.", id="word-swap"),
    ],
)
def test_near_match_replaces_and_records_the_actual_text(skill: Candidate, anchor: str) -> None:
    assert anchor not in TEXT
    new, applied = apply_patch(skill, [Edit(op="replace", anchor=anchor, text="- Cite every claim.")])
    assert new.files["SKILL.md"] == skill_text(["- Cite every claim.", *RULES[1:]])
    assert applied[0].matched == RULES[0]
    assert applied[0].anchor == anchor  # the proposer's anchor is kept; matched holds the file's text


def test_near_match_delete_and_insert_after(skill: Candidate) -> None:
    new, applied = apply_patch(
        skill,
        [
            Edit(
                op="insert_after", anchor="- keep each entry to one sentence in the past tense", text="- New."
            ),
            Edit(op="delete", anchor="- NEVER mention internal ticket numbers."),
        ],
    )
    assert new.files["SKILL.md"] == skill_text([*RULES[:3], "- New."])
    assert [e.matched for e in applied] == [RULES[2], RULES[3]]


def test_near_match_multiline_anchor() -> None:
    text = "# T\n\nFirst line here.\nSecond line here.\nThird.\n"
    new, applied = apply_edit(
        text, Edit(op="replace", anchor="first line here.\n  second LINE here.", text="X")
    )
    assert new == "# T\n\nX\nThird.\n"
    assert applied.matched == "First line here.\nSecond line here."


@pytest.mark.parametrize(
    "anchor",
    [
        "- Always cite the primary source for every claim you make.",
        "- Always write the changelog in French.",
        "- Keep entries short.",
    ],
)
def test_dissimilar_anchor_is_refused(skill: Candidate, anchor: str) -> None:
    with pytest.raises(PatchError, match="not found"):
        apply_patch(skill, [Edit(op="replace", anchor=anchor, text="x")])


# --- append ------------------------------------------------------------------------------------------


def test_append_lands_before_trailing_protected_block(skill: Candidate) -> None:
    new, _ = apply_patch(skill, [Edit(op="append", text="- Mention contributors by handle.")])
    expected = skill_text(extra="\n- Mention contributors by handle.\n")
    assert new.files["SKILL.md"] == expected
    assert "- Mention contributors by handle.\n\n<!-- PROTECTED:conventions -->" in expected


def test_append_before_block_followed_by_trailing_whitespace() -> None:
    text = "# T\n\nBody.\n\n" + CONVENTIONS + "\n\n"
    new, _ = apply_edit(text, Edit(op="append", text="More."))
    assert new == "# T\n\nBody.\n\nMore.\n\n" + CONVENTIONS + "\n\n"


def test_append_at_end_when_text_follows_the_block(multi: Candidate) -> None:
    new, _ = apply_patch(multi, [Edit(op="append", text="- Mention contributors by handle.")])
    assert new.files["SKILL.md"] == TEXT_WITH_TAIL + "- Mention contributors by handle.\n"


def test_append_at_end_without_protected_block() -> None:
    text = FRONT_MATTER + "# T\n\n- a\n"
    assert apply_edit(text, Edit(op="append", text="- b"))[0] == text + "- b\n"


def test_append_to_text_without_final_newline() -> None:
    assert apply_edit("# T\n\n- a", Edit(op="append", text="- b"))[0] == "# T\n\n- a\n- b\n"


@pytest.mark.parametrize("text", ["New rule.", "New rule.\n", "\n\nNew rule.\n\n\n"])
def test_append_text_gets_exactly_one_trailing_newline(text: str) -> None:
    base = "# T\n\n- a\n"
    assert apply_edit(base, Edit(op="append", text=text))[0] == base + "New rule.\n"


@pytest.mark.parametrize("text", ["", "  ", "\n\n"])
def test_append_empty_text_is_refused(skill: Candidate, text: str) -> None:
    with pytest.raises(PatchError, match="empty"):
        apply_patch(skill, [Edit(op="append", text=text)])


def test_insert_after_empty_text_is_refused(skill: Candidate) -> None:
    with pytest.raises(PatchError, match="empty"):
        apply_patch(skill, [Edit(op="insert_after", anchor=RULES[0], text="\n")])


# --- all or nothing ----------------------------------------------------------------------------------


def test_patch_is_all_or_nothing(skill: Candidate) -> None:
    before_hash = skill.hash
    good = Edit(op="append", text="- Mention contributors by handle.")
    bad = Edit(op="replace", anchor="Write entries in French.", text="x")
    with pytest.raises(PatchError, match=r"^op 2 \(replace@Write entries in French\.: x\): anchor not found"):
        apply_patch(skill, [good, bad])
    assert skill.files["SKILL.md"] == TEXT
    assert skill.hash == before_hash
    assert dict(skill.files) == {"SKILL.md": TEXT}


def test_failing_first_op_is_named(skill: Candidate) -> None:
    with pytest.raises(PatchError, match=r"^op 1 "):
        apply_patch(skill, [Edit(op="delete", anchor="nowhere"), Edit(op="append", text="x")])


def test_patch_applies_every_op_in_order(skill: Candidate) -> None:
    edits = [
        Edit(op="insert_after", anchor=RULES[1], text="- List breaking changes first."),
        Edit(op="replace", anchor="breaking changes first", text="breaking changes at the top"),
        Edit(op="delete", anchor=RULES[0]),
        Edit(op="append", text="- Thank contributors."),
    ]
    new, applied = apply_patch(skill, edits)
    assert new.files["SKILL.md"] == skill_text(
        [RULES[1], "- List breaking changes at the top.", *RULES[2:]], extra="\n- Thank contributors.\n"
    )
    assert applied == edits
    assert (new.main, new.kind) == (skill.main, skill.kind)
    assert skill.files["SKILL.md"] == TEXT


def test_empty_patch_returns_an_equal_candidate(skill: Candidate) -> None:
    new, applied = apply_patch(skill, [])
    assert applied == []
    assert new.hash == skill.hash


# --- front matter and PROTECTED blocks --------------------------------------------------------------


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            Edit(op="replace", anchor="Dates use ISO 8601", text="Dates are free-form"), id="replace"
        ),
        pytest.param(Edit(op="delete", anchor="## Conventions"), id="delete-heading"),
        pytest.param(Edit(op="insert_after", anchor="## Conventions", text="More."), id="insert-after"),
        pytest.param(Edit(op="delete", anchor="<!-- /PROTECTED -->"), id="delete-closer"),
        pytest.param(
            Edit(op="replace", anchor="dates use iso 8601 (yyyy-mm-dd).", text="x"), id="near-match"
        ),
    ],
)
def test_anchor_inside_protected_block_is_refused(skill: Candidate, edit: Edit) -> None:
    with pytest.raises(PatchError, match="PROTECTED block"):
        apply_patch(skill, [edit])


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            Edit(op="replace", anchor="Formats release notes.", text="Does things."), id="description"
        ),
        pytest.param(Edit(op="delete", anchor="name: release-notes"), id="name"),
        pytest.param(Edit(op="insert_after", anchor="name: release-notes", text="license: MIT"), id="insert"),
        pytest.param(
            Edit(op="replace", anchor="formats  RELEASE notes. use when asked to write or review", text="x"),
            id="near-match",
        ),
    ],
)
def test_anchor_inside_front_matter_is_refused(skill: Candidate, edit: Edit) -> None:
    with pytest.raises(PatchError, match="front matter"):
        apply_patch(skill, [edit])


@pytest.mark.parametrize(
    "anchor",
    [
        pytest.param("numbers.\n\n<!-- PROTECTED:conventions -->", id="into-opener"),
        pytest.param(RULES[3] + "\n\n<!-- PROTECTED:conventions -->\n## Conventions", id="into-body"),
        pytest.param("(YYYY-MM-DD).\n<!-- /PROTECTED -->\n\nSee the guide", id="out-of-closer"),
    ],
)
def test_replace_spanning_into_a_block_is_refused(anchor: str) -> None:
    text = TEXT_WITH_TAIL
    assert text.count(anchor) == 1
    with pytest.raises(PatchError, match="PROTECTED block"):
        apply_one(text, Edit(op="replace", anchor=anchor, text="x"))


@pytest.mark.parametrize("op", ["append", "replace", "insert_after"])
@pytest.mark.parametrize(
    "text",
    [
        "<!-- PROTECTED:x -->\nmine\n<!-- /PROTECTED -->",
        "Close it early: <!-- /PROTECTED -->",
        "<!--PROTECTED:conventions-->",
        "<!--   /PROTECTED-->",
    ],
)
def test_text_with_protected_markers_is_refused(skill: Candidate, op: str, text: str) -> None:
    edit = Edit.model_validate({"op": op, "anchor": None if op == "append" else RULES[0], "text": text})
    with pytest.raises(PatchError, match="PROTECTED markers"):
        apply_patch(skill, [edit])


@pytest.mark.parametrize(
    "text", ["---\nname: evil\n---\n", "\n---\ndescription: x\n---\nBody.", "  ---\nx: 1\n"]
)
@pytest.mark.parametrize("op", ["append", "replace"])
def test_text_starting_with_front_matter_is_refused(skill: Candidate, op: str, text: str) -> None:
    edit = Edit.model_validate({"op": op, "anchor": None if op == "append" else RULES[0], "text": text})
    with pytest.raises(PatchError, match="front matter"):
        apply_patch(skill, [edit])


def test_insert_after_a_line_that_opens_a_block_is_refused() -> None:
    text = "# T\n\nConventions follow. <!-- PROTECTED:c -->\nKeep.\n<!-- /PROTECTED -->\n"
    with pytest.raises(PatchError, match="inside a PROTECTED block"):
        apply_edit(text, Edit(op="insert_after", anchor="Conventions follow.", text="Sneaky."))


def test_insert_after_the_line_before_a_block_is_allowed() -> None:
    text = "# T\n\nLast rule.\n" + CONVENTIONS
    new, _ = apply_edit(text, Edit(op="insert_after", anchor="Last rule.", text="New rule."))
    assert new == "# T\n\nLast rule.\nNew rule.\n" + CONVENTIONS


def test_edit_forging_a_block_marker_from_existing_text_is_refused() -> None:
    # The text holds no "<!--", but together with the file's comment it would open a new block
    # that swallows the real one.
    text = "# T\n\n<!-- note -->\n\n" + CONVENTIONS
    edit = Edit(op="replace", anchor=" note -->", text=" PROTECTED:evil -->")
    with pytest.raises(PatchError, match=r"op 1 .* would change a PROTECTED block"):
        apply_patch(Candidate({"SKILL.md": text}), [edit])


def test_replace_cannot_eat_the_newline_after_the_front_matter(skill: Candidate) -> None:
    edit = Edit(op="replace", anchor="\n# Release notes", text=" # Release notes")
    try:
        new, _ = apply_patch(skill, [edit])
    except PatchError:
        return
    assert front_matter_block(new.files["SKILL.md"]) == FRONT_MATTER
    assert split_front_matter(new.files["SKILL.md"]).error is None
    assert new.name == "release-notes"


def _random_op(rng: random.Random, text: str) -> Edit:
    texts = [
        "- A new rule.",
        "Always check the diff.\nThen check it again.",
        "",
        "\n\nPadded text.\n\n",
        "# Heading",
        "x",
        "--- not front matter",
        "<!-- plain comment -->",
        "tail -->",
        "PROTECTED:y -->",
        "<!-- PROTECTED:y -->",
        "---\nname: evil\n---",
        "\n",
    ]
    op = rng.choice(["append", "insert_after", "replace", "delete"])
    lines = [line for line in text.splitlines() if line.strip()]
    line = rng.choice(lines)
    if rng.random() < 0.3:  # a short piece: often not unique
        start = rng.randrange(len(line))
        anchor = line[start : rng.randint(start + 1, len(line))]
    else:  # a long piece: usually unique
        start = rng.randrange(max(1, len(line) // 3))
        anchor = line[start : rng.randint(min(len(line), start + 12), len(line))]
    mutate = rng.random()
    if mutate < 0.15:
        anchor = anchor.upper()
    elif mutate < 0.3:
        anchor = "  " + anchor.replace(" ", "   ") + " "
    elif mutate < 0.4 and len(anchor) > 10:
        i = rng.randrange(len(anchor))
        anchor = anchor[:i] + "z" + anchor[i + 1 :]
    return Edit.model_validate({"op": op, "anchor": anchor, "text": rng.choice(texts)})


def test_random_ops_never_touch_front_matter_or_protected_blocks() -> None:
    rng = random.Random(0)
    original = Candidate({"SKILL.md": TEXT_WITH_TAIL})
    current = original
    fm = front_matter_block(TEXT_WITH_TAIL)
    blocks = protected_blocks(TEXT_WITH_TAIL)
    applied: Counter[str] = Counter()
    refused = 0
    for _ in range(300):
        if rng.random() < 0.1:  # start over now and then so the text stays close to a real skill
            current = original
        edit = _random_op(rng, current.files["SKILL.md"])
        try:
            new, _ = apply_patch(current, [edit])
        except PatchError:
            refused += 1
            continue
        applied[edit.op] += 1
        text = new.files["SKILL.md"]
        assert front_matter_block(text) == fm, edit
        assert protected_blocks(text) == blocks, edit
        assert split_front_matter(text).data == split_front_matter(TEXT_WITH_TAIL).data, edit
        current = new
    # the generator exercises both paths, so the property is not vacuous
    assert refused >= 30
    assert min(applied[op] for op in ("append", "insert_after", "replace", "delete")) >= 10, applied
    assert original.files["SKILL.md"] == TEXT_WITH_TAIL


# --- files ------------------------------------------------------------------------------------------


def test_op_on_a_file_not_in_the_candidate_is_refused(skill: Candidate) -> None:
    with pytest.raises(
        PatchError, match=r"op 1 \(append\) edits 'references/guide\.md', which is not in the skill"
    ):
        apply_patch(skill, [Edit(op="append", file="references/guide.md", text="x")])


def test_op_on_a_supporting_file(multi: Candidate) -> None:
    edits = [
        Edit(
            op="insert_after",
            file="references/guide.md",
            anchor="crash on empty input",
            text="- Added --dry-run.",
        ),
        Edit(op="append", file="references/guide.md", text="Keep entries short."),
    ]
    new, _ = apply_patch(multi, edits)
    assert new.files["references/guide.md"] == GUIDE + "- Added --dry-run.\nKeep entries short.\n"
    assert new.files["SKILL.md"] == TEXT_WITH_TAIL
    assert multi.files["references/guide.md"] == GUIDE


def test_anchor_uniqueness_is_per_file(multi: Candidate) -> None:
    # "# Guide" would not be unique across files joined together; each op sees one file only
    edit = Edit(op="replace", file="references/guide.md", anchor="Fixed the crash", text="Fixed a crash")
    new, _ = apply_patch(multi, [edit])
    assert new.files["references/guide.md"] == GUIDE.replace("Fixed the crash", "Fixed a crash")


# --- check_edit -------------------------------------------------------------------------------------


def test_check_edit_good(skill: Candidate) -> None:
    assert check_edit(skill, Edit(op="replace", anchor=RULES[0], text="- Cite every claim.")) is None
    assert check_edit(skill, Edit(op="append", text="- More.")) is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (Edit(op="replace", anchor="nowhere to be found", text="x"), "not found"),
        (Edit(op="delete", anchor="release notes"), "2 times"),
        (Edit(op="delete", anchor="Dates use ISO"), "PROTECTED block"),
        (Edit(op="append", file="missing.md", text="x"), "not in the skill"),
    ],
)
def test_check_edit_bad(skill: Candidate, edit: Edit, message: str) -> None:
    problem = check_edit(skill, edit)
    assert problem is not None
    assert message in problem
    assert problem.startswith("op 1 ")


# --- set_protected_block ----------------------------------------------------------------------------


def test_set_protected_block_replaces_the_body() -> None:
    other = "<!-- PROTECTED:other -->\nLeave me.\n<!-- /PROTECTED -->\n"
    text = TEXT + "\n" + other
    new = set_protected_block(text, "conventions", "\n## Conventions\nDates use RFC 3339.\n\n")
    expected_block = (
        "<!-- PROTECTED:conventions -->\n## Conventions\nDates use RFC 3339.\n<!-- /PROTECTED -->"
    )
    assert new == text.replace(CONVENTIONS.rstrip("\n"), expected_block)
    assert protected_blocks(new) == {"conventions": expected_block, "other": other.rstrip("\n")}


def test_set_protected_block_appends_a_missing_block() -> None:
    new = set_protected_block(TEXT + "\n\n", "glossary", "PR: pull request")
    assert new == TEXT + "\n<!-- PROTECTED:glossary -->\nPR: pull request\n<!-- /PROTECTED -->\n"
    assert protected_blocks(new)["conventions"] == protected_blocks(TEXT)["conventions"]


def test_set_protected_block_does_not_match_a_name_prefix() -> None:
    new = set_protected_block(TEXT, "conv", "short")
    assert protected_blocks(new)["conventions"] == protected_blocks(TEXT)["conventions"]
    assert protected_blocks(new)["conv"] == "<!-- PROTECTED:conv -->\nshort\n<!-- /PROTECTED -->"


# --- Edit.compact -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "compact"),
    [
        (Edit(op="replace", anchor="old  text\nhere", text="new text"), "replace@old text here: new text"),
        (Edit(op="append", text="- A rule."), "append: - A rule."),
        (Edit(op="delete", anchor="gone"), "delete@gone"),
        (Edit(op="insert_after", anchor="a", text="b\n\nc"), "insert_after@a: b c"),
    ],
)
def test_compact(edit: Edit, compact: str) -> None:
    assert edit.compact() == compact


def test_compact_clips_long_anchor_and_text() -> None:
    edit = Edit(op="replace", anchor="a" * 100, text="b" * 300)
    assert edit.compact() == "replace@" + "a" * 59 + "…" + ": " + "b" * 159 + "…"
    exact = Edit(op="replace", anchor="a" * 60, text="b" * 160)
    assert exact.compact() == "replace@" + "a" * 60 + ": " + "b" * 160
