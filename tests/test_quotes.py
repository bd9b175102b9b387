"""The train-quote guard (propose/quotes.py): rules that copy a span of one train task's prompt are
found, general rules that share short phrases, labels or the skill's own words with prompts are not."""

from __future__ import annotations

import pytest

from skilltune.propose.quotes import (
    PATTERN_TASKS,
    QUOTED_WORDS,
    RUN_WORDS,
    Gram,
    Quote,
    TrainPrompts,
    passages,
    quoted_spans,
    words,
)

QUESTION = "Which team should handle this ticket: Support, Billing or Engineering?"
PROMPTS = {
    "ticket-502": 'Customer message:\n"Since this morning the dashboard returns a 502 whenever I open the '
    f'Reports tab. Please fix it."\n\n{QUESTION}',
    "ticket-refund": 'Customer message:\n"Re: ticket 48213. Still no refund after two weeks, please look '
    f'again."\n\n{QUESTION}',
    "ticket-export": 'Customer message:\n"The export button does nothing when I click it. No file '
    f'downloads, no error."\n\n{QUESTION}',
    "ticket-number": 'Customer message:\n"Hello, this is about case #77120: the export still fails on 3 of '
    '5 projects. Please read the whole message before you answer."\n\nWhich ticket number is the '
    "customer writing about? Reply with the ticket number only.",
}
SKILL = """\
---
name: support-desk
description: Routes support tickets to Support, Billing or Engineering.
---
# Support desk

Read the whole message before you answer: customers often mention several things.
"""


@pytest.fixture(scope="module")
def prompts() -> TrainPrompts:
    return TrainPrompts(PROMPTS)


@pytest.mark.parametrize(
    ("rule", "quoted", "task"),
    [
        # the 1.5B analyst's rule of issue 31: four quoted words of one ticket
        ("- If the ticket contains 'dashboard returns a 502', route to Support.", "dashboard returns a 502", "ticket-502"),
        ("- When a customer writes `the dashboard returns a 502`, route to Engineering.", "the dashboard returns a 502", "ticket-502"),
        ('- Tickets saying "Still NO refund after two weeks!!" go to Billing.', "still no refund after two weeks", "ticket-refund"),
        ("- “No file downloads, no error” means the export broke: Engineering.", "no file downloads no error", "ticket-export"),
        # a quote that runs past the prompt's words: the part of it that is the prompt's
        ("- If the ticket mentions 'the dashboard returns a 502 error', route to Support.", "the dashboard returns a 502", "ticket-502"),
        # a replace whose text is a line of the prompt it read (the 1.5B analyst, examples/local-model)
        ("The export button does nothing when I click it. No file downloads, no error.\n\nCheck the calendar.",
         "the export button does nothing when i click it no file downloads no error", "ticket-export"),
        # eight words in a row, unquoted, with the punctuation changed
        ("- Since this morning, the dashboard returns a 502: Engineering.", "since this morning the dashboard returns a 502", "ticket-502"),
    ],
)  # fmt: skip
def test_a_rule_quoting_one_train_prompt_is_found(
    prompts: TrainPrompts, rule: str, quoted: str, task: str
) -> None:
    assert prompts.quotes(rule, [SKILL]) == [Quote(quoted, task)]


@pytest.mark.parametrize(
    "rule",
    [
        # general rules that share short phrases with the prompts
        "- Reply with the ticket number only.",  # six words of ticket-number's prompt
        "- Route billing questions to Billing.",
        "- Answer with one label: 'Support', 'Billing' or 'Engineering'.",  # quoted labels
        "- If the ticket says 'no refund after', route to Billing.",  # three quoted words
        # four words of one prompt make less than half of the quote: phrasing, not what was quoted
        "- For 'a customer whose dashboard returns a 502 after every login to the admin console', ask for a HAR file.",
        "- This morning the dashboard returns a 502: Engineering.",  # seven words in a row
        # a span several train prompts hold is a pattern of the split, not one task's quote
        "- Answer 'Which team should handle this ticket' with one team name.",
        "- Which team should handle this ticket: Support, Billing or Engineering? Answer with one.",
        # words the skill holds already are not the edit's quote (ticket-number's prompt holds them too)
        "- 'Read the whole message before you answer', even a short one.",
    ],
)
def test_a_general_rule_is_not_a_quote(prompts: TrainPrompts, rule: str) -> None:
    assert prompts.quotes(rule, [SKILL]) == []


def test_the_thresholds() -> None:
    """Four quoted words, eight in a row, held by one task's prompt only."""
    assert (QUOTED_WORDS, RUN_WORDS, PATTERN_TASKS) == (4, 8, 2)
    shared = TrainPrompts({"a": "the dashboard returns a 502", "b": "our dashboard returns a 502 now"})
    assert shared.quotes("'dashboard returns a 502'") == []  # two tasks hold it: a pattern
    one = TrainPrompts({"a": "the dashboard returns a 502"})
    assert one.quotes("'dashboard returns a 502'") == [Quote("dashboard returns a 502", "a")]
    # without the skill, the sentence it holds is ticket-number's quote
    skill_sentence = "- 'Read the whole message before you answer', even a short one."
    assert TrainPrompts(PROMPTS).quotes(skill_sentence) == [
        Quote("read the whole message before you answer", "ticket-number")
    ]


def test_one_quote_is_reported_once() -> None:
    prompts = TrainPrompts(PROMPTS)
    rule = "- 'Still no refund after two weeks': Billing. Again: 'still no refund after two weeks'."
    assert prompts.quotes(rule) == [Quote("still no refund after two weeks", "ticket-refund")]


def test_quoted_spans_skip_apostrophes() -> None:
    text = "If the customer's message says 'it doesn't load', don't wait; users' `git push` and \"x y\""
    assert quoted_spans(text) == [["it", "doesn", "t", "load"], ["git", "push"], ["x", "y"]]
    assert quoted_spans("‘curly one’ and “double”") == [["curly", "one"], ["double"]]


def test_passages_merge_overlapping_windows() -> None:
    text = words("a b c d e f")
    known: dict[Gram, str] = {("b", "c"): "x", ("c", "d"): "y", ("e", "f"): "z"}
    assert passages(text, 2, known.get) == [("b c d", "x"), ("e f", "z")]
    assert words('Say \\"Hi\\" to\\nthe Team!') == ["say", "hi", "to", "the", "team"]
