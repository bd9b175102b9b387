"""The plain answer an exact-mode regex encodes (skilltune/score/expected.py), shape by shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from skilltune.score.expected import ExpectedAnswer, expected_answer, plain_answer, shown_regex
from tests.helpers import REPO

ALONE = "alone in the output"
WHOLE = "as the whole output"

# (pattern, ignore_case, answers, where, exact): every shape the reader follows.
PLAIN = [
    # a literal, escaped punctuation
    ("billing", False, ("billing",), "", True),
    ("forty-two exactly", False, ("forty-two exactly",), "", True),
    (r"3\.14", False, ("3.14",), "", True),
    (r"\$5", False, ("$5",), "", True),
    (r"foo\-bar", False, ("foo-bar",), "", True),
    ("a{}", False, ("a{}",), "", True),
    # anchors, \A \Z, \b
    ("^ok$", False, ("ok",), WHOLE, True),
    (r"\Aaccount\Z", False, ("account",), WHOLE, True),
    (r"\bbilling\b", False, ("billing",), "as a word", True),
    (r"^ok\b", False, ("ok",), "at the start of the output, as a word", True),
    ("^ok", False, ("ok",), "at the start of the output", True),
    ("done$", False, ("done",), "at the end of the output", True),
    ("(?m)^ok$", False, ("ok",), "as a whole line", True),
    (r"(?m)^\W*ok\W*$", False, ("ok",), "alone on a line", True),
    # inline flags, the ignore_case field
    (r"(?i)^\W*account\W*$", False, ("account",), ALONE, True),
    (r"^\W*account\W*$", True, ("account",), ALONE, True),
    (r"(?s)(?i)billing", False, ("billing",), "", True),
    # padding of spaces and punctuation around the answer (the skill-trainer suites' shape)
    (r"^\W*billing\W*$", False, ("billing",), ALONE, True),
    (r"^\W*?billing\W*?$", False, ("billing",), ALONE, True),
    (r"^\W*t\.meyer@example\.de\W*$", False, ("t.meyer@example.de",), ALONE, True),
    (r"^\W*team\-alpha@example\.co\.uk\W*$", False, ("team-alpha@example.co.uk",), ALONE, True),
    (r"^\W*91844\W*$", False, ("91844",), ALONE, True),
    (r"\W*account\W*", False, ("account",), "", True),
    # padding the words do not say in full: the regex is shown beside the answer
    (r"^\s*yes\s*$", False, ("yes",), ALONE, False),
    (r"^\W+?account\W+?$", False, ("account",), ALONE, False),
    (r"^[^a-z]*account[^a-z]*$", False, ("account",), ALONE, False),
    (r"^[^A-Za-z0-9]*account[^A-Za-z0-9]*$", False, ("account",), ALONE, False),
    (r"^[\s.,!]*yes[\s.,!]*$", False, ("yes",), ALONE, False),
    (r"\W+account", False, ("account",), "", False),
    (r"\baccount", False, ("account",), "", False),
    # optional trailing punctuation
    (r"^yes\.?$", False, ("yes",), ALONE, False),
    (r"^\W*yes!?\W*$", False, ("yes",), ALONE, False),
    # groups around a literal
    ("(account)", False, ("account",), "", True),
    ("(?:account)", False, ("account",), "", True),
    ("^(?P<label>account)$", False, ("account",), WHOLE, True),
    (r"^\W*((?:account))\W*$", False, ("account",), ALONE, True),
    # alternatives of plain answers
    ("^(yes|no)$", False, ("yes", "no"), WHOLE, True),
    ("yes|no", False, ("yes", "no"), "", True),
    ("^yes$|^no$", False, ("yes", "no"), WHOLE, True),
    (r"(?i)^\W*(billing|exports|reports)\W*$", False, ("billing", "exports", "reports"), ALONE, True),
    (r"\b(?:yes|no)\b", False, ("yes", "no"), "as a word", True),
    # loose spellings: a bare '.' (any character), a run of spaces inside the answer
    ("3.14", False, ("3.14",), "", False),
    (r"foo\s+bar", False, ("foo bar",), "", False),
]

# Regexes that encode no plain answer: shown as written.
NOT_PLAIN = [
    r"\d{5}",
    ".*foo.*bar",
    r"answer:\s*4[0-9]",
    "a+",
    "colou?r",
    "x{2}",
    "^$",
    r"^\W*$",
    "(yes|)",
    "(yes)?",
    "^(yes|no$)",  # the alternatives stand in different places
    r"(?=yes)yes",
    r"(?x) yes",
    r"yes\d",
    r"[0-9]+",
    r"\W*^yes",
    r"yes\W*no",
    "the (cat|dog)",
    r"(?i:yes)",
    "yes(",
    "[a-",
]


@pytest.mark.parametrize(("pattern", "ignore_case", "answers", "where", "exact"), PLAIN)
def test_the_plain_answer_of_each_shape(
    pattern: str, ignore_case: bool, answers: tuple[str, ...], where: str, exact: bool
) -> None:
    found = expected_answer(pattern, ignore_case)
    assert found == ExpectedAnswer(
        answers=answers, ignore_case=ignore_case or "(?i)" in pattern, where=where, exact=exact
    )
    flags = re.IGNORECASE if found.ignore_case else 0
    for answer in answers:  # the reader agrees with re: each answer passes (in brackets for padding it needs)
        assert re.search(pattern, answer, flags) or (not exact and re.search(pattern, f"({answer})", flags))
        if where in (ALONE, WHOLE):
            assert not re.search(pattern, f"the answer is {answer} here", flags)
        if where == "as a word":
            assert not re.search(pattern, f"{answer}x", flags)


@pytest.mark.parametrize("pattern", NOT_PLAIN)
def test_a_regex_without_a_plain_answer_gets_none(pattern: str) -> None:
    assert expected_answer(pattern) is None
    assert plain_answer(pattern) is None


def test_the_answer_as_a_person_reads_it() -> None:
    assert plain_answer(r"(?i)^\W*account\W*$") == "account"
    assert plain_answer("^(yes|no)$") == "one of: yes, no"
    assert plain_answer(r"^(a\, b|c)$") == "one of: 'a, b', c"  # a comma inside an answer is quoted
    assert plain_answer(r"^\W*\ padded\W*$") == "' padded'"
    account = expected_answer(r"(?i)^\W*account\W*$")
    assert account is not None and account.notes() == [ALONE, "ignoring case"]
    digits = expected_answer(r"^\W*91844\W*$", ignore_case=True)
    assert digits is not None and digits.notes() == [ALONE]  # no letters: case says nothing


def test_the_grouping_key_folds_case_only_when_case_is_ignored() -> None:
    loud, quiet = expected_answer("(?i)^(No|yes)$"), expected_answer("^(yes|no)$", ignore_case=True)
    assert loud is not None and quiet is not None and loud.key == quiet.key == ("no", "yes")
    strict = expected_answer("^(No|yes)$")
    assert strict is not None and strict.key == ("No", "yes")


def test_a_regex_is_shown_as_written_never_as_a_repr() -> None:
    assert shown_regex(r"(?i)^\W*account\W*$") == r"`(?i)^\W*account\W*$`"
    assert shown_regex("a\nb") == r"`a\nb`"  # only what cannot be printed is escaped


def test_every_exact_pattern_of_the_bundled_suites_has_a_plain_answer() -> None:
    patterns = set()
    for path in sorted([*REPO.glob("examples/*/suite/*.jsonl"), *REPO.glob("tests/fixtures/**/*.jsonl")]):
        for line in path.read_text(encoding="utf-8").splitlines():
            scoring = json.loads(line).get("scoring", {}) if line.strip() else {}
            if "expected" in scoring:
                patterns.add((scoring["expected"], bool(scoring.get("ignore_case"))))
    assert len(patterns) >= 30
    for pattern, ignore_case in patterns:
        found = expected_answer(pattern, ignore_case)
        assert found is not None and found.exact and found.where == ALONE, pattern


def test_the_local_model_suite_feedback_names_the_label(tmp_path: Path) -> None:
    """The by-hand suite's failure, as its analyst reads it."""
    from skilltune.agents.base import AgentResult
    from skilltune.suite import load_suite

    suite = load_suite(REPO / "examples" / "local-model" / "suite")
    task = suite.task("area-double-charge")
    score = suite.scorer(task).score(task, tmp_path, AgentResult(status="ok", final_text="Billing question."))
    assert score.hard == 0
    assert score.feedback.startswith("expected answer: billing (alone in the output")
    assert score.feedback.endswith("the agent answered: 'Billing question.')")
