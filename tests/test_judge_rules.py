"""The judge's rules without a model: reading a reply, skill-trainer's aggregation, settings, keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from skilltune.judge.verdict import (
    aggregate,
    first_verdict_object,
    parse_reply,
    sample_passed,
    sample_soft,
    strip_think,
    validate_verdict,
)
from skilltune.runfiles.judge import Criterion, JudgeVerdict
from skilltune.suite.judge import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    JudgeSettings,
    contract_overrides,
    find_key,
    judge_settings,
)

VERDICT = {
    "criteria": [
        {"name": "recall", "score": 0.8, "evidence": "found 4 of 5"},
        {"name": "format", "score": 1.0, "evidence": "all sections"},
    ],
    "overall": 0.85,
    "passed": True,
    "reasoning": "Missed one defect.",
}


def verdict(scores: dict[str, float], passed: bool | None, overall: float = 0.5) -> JudgeVerdict:
    return JudgeVerdict(
        criteria=[Criterion(name=n, score=s) for n, s in scores.items()], overall=overall, passed=passed
    )


# --- reading a reply --------------------------------------------------------------------------


def test_tool_call_arguments_are_the_verdict() -> None:
    got = parse_reply(VERDICT, "")
    assert [(c.name, c.score) for c in got.criteria] == [("recall", 0.8), ("format", 1.0)]
    assert (got.overall, got.passed, got.reasoning) == (0.85, True, "Missed one defect.")


def test_plain_json_after_think_blocks_is_read() -> None:
    """A reasoning model thinks aloud first, sometimes with braces: only the text after </think> counts."""
    text = (
        '<think>Let me draft {"criteria": "not yet"} and reconsider.</think>\n'
        f"Here is my verdict:\n```json\n{json.dumps(VERDICT)}\n```\nDone."
    )
    assert parse_reply(None, text).overall == 0.85
    assert strip_think("<think>a</think>b<THINK>c</THINK>d") == "bd"
    assert strip_think("answer <think>never closed {") == "answer "


def test_first_object_with_criteria_wins() -> None:
    text = 'noise {"a": 1} then ' + json.dumps(VERDICT) + ' and {"criteria": []}'
    assert first_verdict_object(text) == VERDICT


def test_a_tool_call_written_out_as_text_is_read() -> None:
    """What a 0.5B model served by llama-cpp-python answered when offered the tool (captured by hand)."""
    nested = json.dumps({"name": "record_verdict", "arguments": VERDICT})
    assert parse_reply(None, nested).overall == 0.85
    as_string = json.dumps({"name": "record_verdict", "arguments": json.dumps(VERDICT)})
    assert parse_reply(None, as_string).overall == 0.85


def test_a_garbled_tool_call_falls_back_to_the_text() -> None:
    assert parse_reply({"criteria": "bad"}, json.dumps(VERDICT)).passed is True


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"overall": 1}, "non-empty 'criteria'"),
        ({"criteria": []}, "non-empty 'criteria'"),
        ({"criteria": [{"name": "x"}]}, "needs 'name' and 'score'"),
        ({"criteria": [{"name": "x", "score": "high"}]}, "criterion 'x' must be a number"),
        ({"criteria": [{"name": "x", "score": 1}], "overall": "n/a"}, "'overall' must be a number"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_malformed_verdicts_say_what_is_wrong(obj: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        validate_verdict(obj)


def test_no_verdict_in_the_reply_is_malformed() -> None:
    with pytest.raises(ValueError, match="no tool call and no JSON object"):
        parse_reply(None, "I think it is good.")


def test_values_are_read_as_skill_trainer_reads_them() -> None:
    got = validate_verdict(
        {
            "criteria": [
                {"name": "a", "score": 1.7},
                {"name": "b", "score": "true"},
                {"name": "c", "score": -2},
            ]
        }
    )
    assert [c.score for c in got.criteria] == [1.0, 1.0, 0.0]
    assert got.overall == round(2 / 3, 4)  # no overall: the mean of the criteria
    assert got.passed is None  # not said: the suite's threshold decides later
    assert validate_verdict({"criteria": [{"name": "a", "score": 1}], "passed": "yes"}).passed is True
    assert validate_verdict({"criteria": [{"name": "a", "score": 1}], "passed": "no"}).passed is False


# --- aggregation ------------------------------------------------------------------------------


def test_soft_weights_criteria_and_a_missing_one_counts_zero() -> None:
    weights = {"recall": 0.5, "precision": 0.3, "format": 0.2}
    one = verdict({"recall": 1.0, "format": 0.5}, True, overall=0.99)  # precision left out
    assert sample_soft(one, weights) == round((0.5 * 1.0 + 0.2 * 0.5) / 1.0, 4)
    assert sample_soft(one, None) == 0.99  # no weights: the judge's own overall


def test_hard_is_a_strict_majority_and_ties_fail() -> None:
    yes, no = verdict({"a": 1.0}, True), verdict({"a": 0.0}, False)
    assert aggregate([yes, yes, no], None, 0.7)[0] == 1
    assert aggregate([yes, no], None, 0.7)[0] == 0  # a tie fails
    assert aggregate([yes, no, no], None, 0.7)[0] == 0


def test_pass_threshold_only_for_a_verdict_without_passed() -> None:
    weights = {"a": 1.0}
    high, low = verdict({"a": 0.8}, None), verdict({"a": 0.6}, None)
    assert sample_passed(high, weights, 0.7) and not sample_passed(low, weights, 0.7)
    # a verdict that says passed keeps its word whatever the threshold
    assert sample_passed(verdict({"a": 0.1}, True), weights, 0.7)
    assert not sample_passed(verdict({"a": 0.9}, False), weights, 0.7)


def test_soft_is_the_mean_over_samples_and_checks_name_the_criteria() -> None:
    weights = {"recall": 1.0}
    samples = [
        verdict({"recall": 1.0, "overall": 0.9}, True),  # a judge echoing "overall" as a criterion
        verdict({"recall": 0.5}, False),
        verdict({"recall": 0.0}, False),
    ]
    hard, soft, checks = aggregate(samples, weights, 0.7)
    assert (hard, soft) == (0, 0.5)
    assert checks == ["crit:recall=0.5", "judge:fail (1/3 samples passed)"]
    _, _, unweighted = aggregate(samples, None, 0.7)
    assert "crit:overall=0.9" in unweighted


def test_a_weighted_criterion_nobody_scored_is_reported_missing() -> None:
    _, soft, checks = aggregate([verdict({"other": 1.0}, True)], {"recall": 1.0}, 0.7)
    assert soft == 0.0
    assert "crit_missing:recall" in checks


# --- settings and keys ------------------------------------------------------------------------


def test_skill_trainer_defaults() -> None:
    settings = judge_settings(None)
    assert settings.effective_model == DEFAULT_MODEL
    assert settings.effective_base_url == DEFAULT_BASE_URL
    assert settings.key_names == ("MINIMAX_API_KEY", "MINIMAX-API-KEY")
    assert (settings.samples, settings.temperature, settings.timeout, settings.max_tokens) == (
        1,
        0.0,
        240.0,
        8000,
    )
    assert (settings.max_attempts, settings.pass_threshold) == (3, 0.7)


def test_unknown_block_keys_are_ignored_but_unknown_overrides_refused() -> None:
    assert judge_settings({"model": "m", "thinking": "deep"}).model == "m"  # validate warned
    with pytest.raises(ValidationError, match="modle"):
        judge_settings({"model": "m"}, {"modle": "x"})


def test_overrides_apply_and_only_verdict_changing_ones_enter_the_contract() -> None:
    settings = judge_settings({"model": "a", "samples": 3}, {"model": "b", "api_key_env": "MY_KEY"})
    assert (settings.model, settings.samples, settings.key_names) == ("b", 3, ("MY_KEY",))
    assert contract_overrides({"model": "b", "api_key_env": "MY_KEY", "timeout": 9}) == {"model": "b"}


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"provider": "bard"}, "judge provider 'bard' is unknown"),
        ({"provider": "anthropic"}, "anthropic needs a model"),
        ({"provider": "claude", "base_url": "http://x"}, "has no base_url"),
        ({"criteria_weights": {"a": 0}}, "at least one weight above 0"),
        ({"samples": 0}, "greater than 0"),
        ({"modle": "x"}, "Extra inputs"),
    ],
)
def test_bad_settings_are_refused(block: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        JudgeSettings.model_validate(block)


def test_key_from_the_environment_then_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINIMAX_API_KEY", raising=False)
    suite = tmp_path / "project" / "suite"
    suite.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    settings = judge_settings(None)
    assert find_key(settings, suite)[:2] == (None, "none")
    (tmp_path / "project" / ".env").write_text("# keys\nexport MINIMAX-API-KEY='from-dotenv'\n")
    key, source, where = find_key(settings, suite)
    assert (key, source) == ("from-dotenv", "dotenv") and where.endswith("project/.env")
    monkeypatch.setenv("MINIMAX_API_KEY", "from-env")
    assert find_key(settings, suite)[:2] == ("from-env", "environment")


def test_a_local_endpoint_needs_no_key_and_a_cli_reads_none() -> None:
    assert judge_settings({"base_url": "http://127.0.0.1:8080/v1"}).local
    assert not judge_settings(None).local
    assert judge_settings({"provider": "claude"}).key_names == ()
