"""Judge verdicts: the schema asked for, the lenient reading of a reply, and the aggregation rules.

The judge is asked to call the ``record_verdict`` tool (LangChain structured output, through
``skilltune.modelcalls``); a
reply without a usable tool call is read from the first JSON object holding ``criteria``
in its text once ``<think>...</think>`` blocks are removed. A reply that is neither is
malformed (``ValueError``), and the caller retries with a correction.

Aggregation over samples (skill-trainer's rules): a sample's soft score is the mean of its
criteria weighted by ``criteria_weights`` (a criterion the judge left out counts 0), or the
judge's own ``overall`` when the suite gives no weights; soft is the mean over samples;
hard is a strict majority of the samples' ``passed`` (a tie fails). A sample without
``passed`` passes when its soft score reaches ``pass_threshold``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skilltune.runfiles.judge import Criterion, JudgeVerdict

TOOL_NAME = "record_verdict"
_THINK = re.compile(r"<think>.*?(</think>\s*|$)", re.IGNORECASE | re.DOTALL)
_TRUE = ("true", "yes", "pass", "passed", "1")


class VerdictCriterion(BaseModel):
    name: str = Field(description="the criterion's name, as the rubric writes it")
    score: float = Field(description="0.0 to 1.0")
    evidence: str = Field(description="what in the output earned this score, quoted where possible")


class RecordVerdict(BaseModel):
    """Record the verdict on the output under evaluation: one entry per criterion of the rubric."""

    model_config = ConfigDict(title=TOOL_NAME)  # the tool's name, as the judge's prompt spells it

    criteria: list[VerdictCriterion] = Field(description="one entry per criterion named in the rubric")
    overall: float = Field(description="0.0 to 1.0: the rubric's combination of the criteria")
    passed: bool = Field(description="whether the output meets the rubric's pass rule")
    reasoning: str = Field(description="two to five sentences, the biggest gap first")


def strip_think(text: str) -> str:
    """The reply without its ``<think>...</think>`` blocks (an unclosed one runs to the end)."""
    return _THINK.sub("", text)


def first_verdict_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that has a ``criteria`` key (fenced or bare); a tool call
    written out as text (``{"name": "record_verdict", "arguments": "{...}"}``, as small local models
    answer when the server does not parse tool calls) counts with its arguments."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text[match.start() :])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("arguments"), str):
            try:
                obj = json.loads(obj["arguments"])
            except json.JSONDecodeError:
                continue
        if isinstance(obj, dict) and "criteria" in obj:
            return obj
    return None


def _unit(value: Any, what: str) -> float:
    """A score in [0, 1]: numbers are clamped, a stray true/false reads as 1/0."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        value = value.strip().lower() == "true"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number from 0.0 to 1.0, got {value!r}") from None
    if math.isnan(number):
        raise ValueError(f"{what} must be a number from 0.0 to 1.0, got NaN")
    return max(0.0, min(1.0, number))


def validate_verdict(obj: Any) -> JudgeVerdict:
    """A verdict object as the judge gave it, checked and normalised; ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("the verdict must be a JSON object")
    raw_criteria = obj.get("criteria")
    if not isinstance(raw_criteria, list) or not raw_criteria:
        raise ValueError("the verdict must carry a non-empty 'criteria' list")
    criteria = []
    for item in raw_criteria:
        if not isinstance(item, dict) or "name" not in item or "score" not in item:
            raise ValueError(f"every criterion needs 'name' and 'score', got {str(item)[:120]}")
        name = str(item["name"])
        criteria.append(
            Criterion(
                name=name,
                score=_unit(item["score"], f"criterion {name!r}"),
                evidence=str(item.get("evidence", "")),
            )
        )
    overall_raw = obj.get("overall")
    overall = (
        _unit(overall_raw, "'overall'")
        if overall_raw is not None
        else sum(c.score for c in criteria) / len(criteria)
    )
    passed = obj.get("passed")
    if isinstance(passed, str):
        passed = passed.strip().lower() in _TRUE
    elif passed is not None and not isinstance(passed, bool):
        passed = bool(passed)
    return JudgeVerdict(
        criteria=criteria, overall=round(overall, 4), passed=passed, reasoning=str(obj.get("reasoning", ""))
    )


def parse_reply(tool_args: dict[str, Any] | None, content: str) -> JudgeVerdict:
    """The verdict in a reply: the tool call's arguments, else the first verdict object in the text."""
    tool_problem = None
    if tool_args:
        try:
            return validate_verdict(tool_args)
        except ValueError as exc:  # a garbled tool call: the text may still hold the verdict
            tool_problem = str(exc)
    obj = first_verdict_object(strip_think(content or ""))
    if obj is None:
        why = f"the tool call was unusable ({tool_problem})" if tool_problem else "no tool call"
        raise ValueError(f"no verdict: {why} and no JSON object with 'criteria' in the reply")
    return validate_verdict(obj)


def sample_soft(verdict: JudgeVerdict, weights: dict[str, float] | None) -> float:
    """One sample's soft score: weighted criteria (a missing one counts 0), else the judge's overall."""
    if not weights:
        return verdict.overall
    scores = {c.name: c.score for c in verdict.criteria}
    total = sum(weights.values())
    return round(sum(w * scores.get(name, 0.0) for name, w in weights.items()) / total, 4)


def sample_passed(verdict: JudgeVerdict, weights: dict[str, float] | None, threshold: float) -> bool:
    if verdict.passed is not None:
        return verdict.passed
    return sample_soft(verdict, weights) >= threshold


def aggregate(
    samples: list[JudgeVerdict], weights: dict[str, float] | None, threshold: float
) -> tuple[int, float, list[str]]:
    """(hard, soft, checks) over the samples: soft the mean, hard a strict majority (ties fail)."""
    if not samples:
        raise ValueError("no verdicts to aggregate")
    n = len(samples)
    soft = round(sum(sample_soft(s, weights) for s in samples) / n, 4)
    passes = sum(1 for s in samples if sample_passed(s, weights, threshold))
    hard = int(passes * 2 > n)
    per_criterion: dict[str, list[float]] = {}
    for sample in samples:
        for c in sample.criteria:
            if weights and c.name not in weights:
                continue  # judges sometimes echo overall or passed as a criterion
            per_criterion.setdefault(c.name, []).append(c.score)
    checks = [f"crit:{name}={round(sum(v) / len(v), 4)}" for name, v in per_criterion.items()]
    checks += [f"crit_missing:{name}" for name in (weights or {}) if name not in per_criterion]
    checks.append(f"judge:{'pass' if hard else 'fail'} ({passes}/{n} samples passed)")
    return hard, soft, checks


def verdict_feedback(verdict: JudgeVerdict, evidence: bool = True) -> str:
    """What the judge said about one rollout: its reasoning and each criterion's score with its
    evidence (skill-trainer feeds its editors the same); ``evidence=False``: the scores alone
    (the reasoning and evidence may quote the reference)."""
    if not evidence:
        return "\n".join(f"- {c.name} {c.score:.2f}" for c in verdict.criteria)
    lines = [verdict.reasoning.strip()] if verdict.reasoning.strip() else []
    lines += [f"- {c.name} {c.score:.2f}: {' '.join(c.evidence.split())}" for c in verdict.criteria]
    return "\n".join(lines)
