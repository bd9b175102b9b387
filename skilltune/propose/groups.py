"""Failure groups: what went wrong in a step's batch, in groups a small model can take one at a time.

Each failed train trajectory gets keys (``Trajectory.failure_keys``) from its score in code, never
from a model: the plain answer an exact task expected (``answer:account``), or that the answer was in
the output but not alone (``format:not-alone``); each item a checklist missed (``missing:<item>``);
a failing scoring command; a rubric's or Python env's ``symptom:<class>`` receipts; the judge's
weakest criterion; a timeout or an agent's own failure. Only what the suite's ``feedback`` policy
lets the analyst see becomes a key: under ``no-answers`` an exact task's key names no answer.

``failure_groups`` gathers the batch's failed trajectories by key, largest group first; answers
seen once are pooled into one group ("other wrong answers"), so a suite whose every task has its
own answer (ticket numbers) still gets groups worth a focused ask. ``summary`` renders them as the
short list every reflection prompt opens with (how many, what the agent gave instead).
"""

from __future__ import annotations

import re

from skilltune.proposal import Focus, Trajectory
from skilltune.runfiles import RolloutRecord
from skilltune.score import expected_answer
from skilltune.suite import Suite, Task
from skilltune.textfmt import one_line

NOT_ALONE = "format:not-alone"
OTHER_ANSWERS = "answer:*"
_GAVE_CHARS = 60
_SUMMARY_GROUPS = 8  # groups listed in the summary; the rest are counted


def failure_keys(record: RolloutRecord, task: Task, suite: Suite, output: str) -> list[str]:
    """The keys of a failed rollout (none for one that passed), as the suite's feedback policy allows."""
    score = record.score
    if score is None or score.hard == 1:
        return []
    mode = suite.scoring_mode(task)
    policy = suite.config.feedback
    keys: list[str] = []
    if record.status in ("timeout", "task_failed"):
        keys.append(f"status:{record.status}")
    if mode == "exact":
        keys.append(_exact_key(task, output, policy == "full"))
    elif mode == "checklist":
        missing = [c.removeprefix("missing:") for c in score.checks if c.startswith("missing:")]
        keys += [f"missing:{m}" for m in missing] if policy == "full" and missing else ["checklist:missing"]
    elif mode == "command":
        keys.append("command:failed")
    elif policy != "none":
        keys += _receipt_keys(score.checks) or [f"{mode}:failed"]
    else:
        keys.append(f"{mode}:failed")
    return list(dict.fromkeys(keys))


def expected_text(task: Task, suite: Suite) -> str | None:
    """The plain answer an exact task expects (``account``, ``one of: yes, no``), when its pattern
    encodes one and the suite's feedback policy lets the analyst see answers; else None."""
    if suite.scoring_mode(task) != "exact" or suite.config.feedback != "full":
        return None
    expected = task.scoring.get("expected")
    answer = (
        expected_answer(expected, task.scoring.get("ignore_case") is True)
        if isinstance(expected, str)
        else None
    )
    return None if answer is None else answer.text


def _exact_key(task: Task, output: str, answers_shown: bool) -> str:
    if not answers_shown:
        return "exact:missing"
    expected = task.scoring.get("expected")
    answer = (
        expected_answer(expected, task.scoring.get("ignore_case") is True)
        if isinstance(expected, str)
        else None
    )
    if answer is None:
        return "exact:missing"
    if any(_words(a) and _words(a) in _words(output) for a in answer.answers):
        return NOT_ALONE  # the right answer, with more around it than the task accepts
    return "answer:" + " | ".join(answer.key)  # case-folded when case is ignored: one group per answer


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _receipt_keys(checks: list[str]) -> list[str]:
    """A rubric's or env's ``symptom:<class>`` receipts; else the judge's weakest criterion below 1."""
    symptoms = [f"symptom:{c.split(':', 1)[1].strip()}" for c in checks if c.startswith("symptom:")]
    if symptoms:
        return symptoms
    criteria = []
    for check in checks:
        name, _, value = check.removeprefix("crit:").partition("=")
        if check.startswith("crit:") and _number(value) is not None and (_number(value) or 0.0) < 1.0:
            criteria.append((_number(value) or 0.0, name))
    return [f"criterion:{min(criteria)[1]}"] if criteria else []


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def label(key: str) -> str:
    """A key in words, as prompts and the report show it."""
    kind, _, rest = key.partition(":")
    if key == NOT_ALONE:
        return (
            "the answer held the expected answer but more words around it: the task accepts the answer alone"
        )
    if key == OTHER_ANSWERS:
        return "other wrong answers (each expected once)"
    return {
        "answer": f"expected answer: {rest}",
        "missing": f"missing required item: {rest}",
        "symptom": f"symptom: {rest}",
        "criterion": f"judge criterion not met: {rest}",
        "status": f"the rollout ended {rest.replace('_', ' ')}",
    }.get(kind, f"{kind} {rest}".replace("exact missing", "the expected answer was not in the output"))


def failure_groups(failures: list[Trajectory]) -> list[Focus]:
    """The batch's failed trajectories by key, largest group first (then first seen); answers seen
    once pooled into one group. A trajectory with several keys is in several groups."""
    members: dict[str, list[Trajectory]] = {}
    for trajectory in failures:
        for key in trajectory.failure_keys or ["other:failed"]:
            members.setdefault(key, []).append(trajectory)
    single = [k for k, m in members.items() if k.startswith("answer:") and len(m) == 1]
    if len(single) > 1:
        pooled = [t for k in single for t in members.pop(k)]
        members[OTHER_ANSWERS] = list({t.id: t for t in pooled}.values())
    order = {key: i for i, key in enumerate(members)}
    ranked = sorted(members.items(), key=lambda item: (-len(item[1]), order[item[0]]))
    return [
        Focus(
            key=key,
            label=label(key),
            trajectories=[t.id for t in group],
            gave=_gave(group),
            examples=_examples(group),
        )
        for key, group in ranked
    ]


def _examples(group: list[Trajectory], limit: int = 4) -> list[str]:
    """What was expected and what the agent gave, task by task (exact tasks whose answer may be shown)."""
    return [
        f"expected {t.expected!r}; the agent gave {one_line(t.output.strip(), _GAVE_CHARS)!r}"
        for t in group
        if t.expected is not None
    ][:limit]


def _gave(group: list[Trajectory]) -> list[str]:
    """What the agent answered instead (exact tasks: their outputs), most frequent first."""
    outputs = [one_line(t.output.strip(), _GAVE_CHARS) for t in group if t.mode == "exact"]
    counts: dict[str, int] = {}
    for text in outputs:
        counts[text or "(nothing)"] = counts.get(text or "(nothing)", 0) + 1
    return [
        f"{text!r}" + (f" x{n}" if n > 1 else "") for text, n in sorted(counts.items(), key=lambda i: -i[1])
    ]


def summary(groups: list[Focus], failed: int, total: int) -> str:
    """The short list a reflection prompt opens with: the failures by group."""
    if not failed:
        return f"All {total} rollouts passed."
    lines = [f"{failed} of {total} rollouts failed. By what went wrong:"]
    for group in groups[:_SUMMARY_GROUPS]:
        n = len(group.trajectories)
        gave = f"; the agent gave {', '.join(group.gave[:4])}" if group.gave else ""
        lines.append(f"- {group.label} ({n} rollout{'s' if n != 1 else ''}{gave})")
    if len(groups) > _SUMMARY_GROUPS:
        lines.append(f"- and {len(groups) - _SUMMARY_GROUPS} more group(s)")
    return "\n".join(lines)
