"""Proposer prompts, rendered from the templates in ``skilltune/prompts/``.

Every prompt is built from an EvidencePacket, which holds train evidence only. Each part of
a prompt sits in its own tagged section (``<skill>``, ``<memory>``, ``<failed_trajectories>``...),
so a model cannot take the evidence for part of the skill; the edit format is described in
words, never shown as a sample a small model would copy.
"""

from __future__ import annotations

import re
from importlib import resources
from string import Template

from skilltune.proposal import EvidencePacket, RejectedEdit, Trajectory, TriggerCase
from skilltune.textfmt import one_line

_OUTPUT_CHARS = 3000
_DIFF_CHARS = 2000
# The sections of the prompts: text quoted inside one (an agent's output, a task) must not close it.
TAGS = (
    "skill", "memory", "failure_classes", "rejected_edits", "failed_trajectories",
    "successful_trajectories", "trajectory", "task", "final_output", "scorer_feedback", "checks",
    "diff", "failure_causes", "draft", "comparison", "kept_edits", "previous_answer", "problem",
    "missed_requests", "false_triggers", "right_decisions", "request", "failure_summary", "focus",
    "spent_edits",
)  # fmt: skip
_CLOSING = re.compile(r"</(" + "|".join(TAGS) + r")>")


def template(name: str) -> Template:
    return Template(resources.files("skilltune.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8"))


def quoted(text: str) -> str:
    """``text`` with closing tags of the prompt's sections defused (``</skill>`` -> ``<\\/skill>``)."""
    return _CLOSING.sub(r"<\\/\1>", text)


def tagged(name: str, text: str) -> str:
    """Quoted ``text`` in a section ``<name>`` ... ``</name>``."""
    return wrapped(name, quoted(text))


def wrapped(name: str, rendered: str, attrs: str = "") -> str:
    """``rendered`` (sections already, or quoted text) in a section ``<name attrs>`` ... ``</name>``."""
    return f"<{name}{' ' + attrs if attrs else ''}>\n{rendered.strip(chr(10))}\n</{name}>"


def skill_section(text: str, name: str = "") -> str:
    """The skill file as it is: only a literal ``</skill>`` in it is defused (anchors are copied from here)."""
    body = text.strip("\n").replace("</skill>", "<\\/skill>")
    attrs = f' file="{quoted(name)}"' if name else ""
    return f"<skill{attrs}>\n{body}\n</skill>"


def render_trajectories(trajectories: list[Trajectory]) -> str:
    if not trajectories:
        return "(none)"
    blocks = []
    for t in trajectories:
        output = (
            t.output if len(t.output) <= _OUTPUT_CHARS else t.output[:_OUTPUT_CHARS] + "\n[output truncated]"
        )
        parts = [tagged("task", t.prompt), tagged("final_output", output or "(empty)")]
        if t.feedback.strip():
            parts.append(tagged("scorer_feedback", t.feedback.strip()))
        if t.checks:
            parts.append(tagged("checks", ", ".join(t.checks)))
        if t.diff.strip():
            diff = t.diff if len(t.diff) <= _DIFF_CHARS else t.diff[:_DIFF_CHARS] + "\n[diff truncated]"
            parts.append(tagged("diff", diff))
        attrs = (
            f'id="{t.id}" task="{quoted(t.task_id)}" hard="{t.hard}" soft="{t.soft:.2f}" status="{t.status}"'
        )
        if t.agent is not None:  # several target agents: which one produced this trajectory
            attrs += f' agent="{quoted(t.agent)}"'

        blocks.append(wrapped("trajectory", "\n".join(parts), attrs))
    return "\n\n".join(blocks)


def render_rejected(rejected: list[RejectedEdit]) -> str:
    if not rejected:
        return "(none)"
    return "\n".join(f"- step {r.step}: {r.edit} — {r.evidence}" for r in rejected)


def trajectory_ids(packet: EvidencePacket) -> str:
    """The ids an edit may cite, quoted, comma-separated (failures first)."""
    ids = [t.id for t in [*packet.failures, *packet.successes]]
    return ", ".join(f'"{i}"' for i in ids) if ids else "(none)"


def render_spent(spent: list[str]) -> str:
    """The re-ask's list of edits already tried in the run ("" when there are none)."""
    if not spent:
        return ""
    lines = "\n".join(f"- {one_line(text, 240)}" for text in spent)
    return "\n\n" + tagged(
        "spent_edits",
        "These edits were already tried in this run and are spent: do not propose any of them again, "
        f"nor the same rule in other words.\n{lines}",
    )


def _common(packet: EvidencePacket) -> dict[str, str]:
    classes = packet.failure_classes.strip()
    return {
        "summary": tagged("failure_summary", packet.summary.strip() or "(none)"),
        "spent": render_spent(packet.spent),
        "skill_main": packet.skill_main,
        "skill": skill_section(packet.skill_files[packet.skill_main], packet.skill_main),
        "memory": tagged("memory", packet.memory.strip() or "(empty)"),
        "rejected": tagged("rejected_edits", render_rejected(packet.rejected)),
        "failures": wrapped("failed_trajectories", render_trajectories(packet.failures)),
        "successes": wrapped("successful_trajectories", render_trajectories(packet.successes)),
        "max_edits": str(packet.max_edits),
        "trajectory_ids": trajectory_ids(packet),
        "failure_classes": f"\n\n{tagged('failure_classes', classes)}" if classes else "",
        "failure_classes_named": ", <failure_classes> (the suite's guide from symptoms to mechanisms)"
        if classes
        else "",
    }


def reflect_prompt(packet: EvidencePacket) -> str:
    """The analyst's prompt: body edits, or the new description when the step tunes it; a focused
    ask (``packet.focus``) gets the short prompt about its one failure group."""
    if packet.component == "description":
        return describe_prompt(packet)
    if packet.focus is not None:
        return focus_prompt(packet)
    return template("reflect").substitute(_common(packet))


_EXAMPLE_CHARS = 300


def focus_examples(packet: EvidencePacket) -> str:
    """The focused group's failures as short lines: for an exact task what was expected and what the
    agent gave; else the task (cut) and what the scorer said of it."""
    assert packet.focus is not None
    if packet.focus.examples:
        return "\n".join(f"- {example}" for example in packet.focus.examples)
    lines = []
    for t in packet.failures:
        said = one_line(t.feedback.strip() or ", ".join(t.checks) or t.output.strip(), _EXAMPLE_CHARS)
        lines.append(f"- the task: {one_line(t.prompt, _EXAMPLE_CHARS)!r}; what went wrong: {said}")
    return "\n".join(lines) or "- (no example)"


def focus_prompt(packet: EvidencePacket) -> str:
    """One failure group as a short question a small model can answer with one rule in plain words
    (no JSON, no anchors: the proposer appends the rule): the skill, what went wrong with a few
    examples, the suite's failure classes, the rules already spent."""
    assert packet.focus is not None
    classes = packet.failure_classes.strip()
    spent = "\n".join(f"- {one_line(text, 240)}" for text in packet.spent)
    told = "These rules were already tried in this run and did not help; do not write them again:"
    return template("focus").substitute(
        skill=skill_section(packet.skill_files[packet.skill_main], packet.skill_main),
        batch=(packet.summary.splitlines() or [""])[0].replace(" By what went wrong:", ""),
        count=len(packet.focus.trajectories),
        label=packet.focus.label,
        examples=focus_examples(packet),
        failure_classes=f"\n\n{tagged('failure_classes', classes)}" if classes else "",
        spent=f"\n\n{told}\n{spent}" if spent else "",
    )


def render_requests(cases: list[TriggerCase]) -> str:
    if not cases:
        return "(none)"
    return "\n".join(
        wrapped("request", quoted(c.prompt), f'id="{c.id}" should_load="{str(c.should_trigger).lower()}"')
        for c in cases
    )


def request_ids(packet: EvidencePacket) -> str:
    """The ids a description edit may cite: the wrong decisions first, then the right ones."""
    cases = [*packet.missed, *packet.false_triggers, *(c for c in packet.triggers if c.right)]
    return ", ".join(f'"{c.id}"' for c in cases) if cases else "(none)"


def describe_prompt(packet: EvidencePacket) -> str:
    """The description step's prompt: the skill, and the train requests it missed, the ones it
    wrongly triggered on and the ones it decided rightly (train rollouts only)."""
    right = [c for c in packet.triggers if c.right]
    return template("describe").substitute(
        skill=skill_section(packet.skill_files[packet.skill_main], packet.skill_main),
        rejected=tagged("rejected_edits", render_rejected(packet.rejected)),
        missed=wrapped("missed_requests", render_requests(packet.missed)),
        false_triggers=wrapped("false_triggers", render_requests(packet.false_triggers)),
        right=wrapped("right_decisions", render_requests(right)),
        request_ids=request_ids(packet),
    )


ROLE_INSTRUCTIONS = {
    "failure analyst": "List the distinct failure causes the trajectories show, most frequent first, one line each, with the ids of the trajectories behind each.",
    "author": "Write the complete new skill document (front matter included) that fixes the failure causes given in <failure_causes> while keeping what works. Answer with the document alone, in one ```markdown fenced block.",
    "red-team reviewer": "Review the author's draft given in <draft> against the evidence: remove or fix rules that are unsupported, task-specific or likely to hurt. Answer with the corrected complete document alone, in one ```markdown fenced block.",
}


def rewrite_prompt(packet: EvidencePacket, role: str, *, causes: str = "", draft: str = "") -> str:
    """The prompt of one rewrite role; the author gets the analyst's ``causes``, the reviewer the ``draft``."""
    extra = (f"\n\n{tagged('failure_causes', causes)}" if causes else "") + (
        f"\n\n{tagged('draft', draft)}" if draft else ""
    )
    return template("rewrite").substitute(
        _common(packet), role=role, role_instructions=ROLE_INSTRUCTIONS[role], extra=extra
    )


def slow_update_prompt(skill_text: str, comparison: str, kept: list[str], rejected: list[str]) -> str:
    return template("slow_update").substitute(
        skill=skill_section(skill_text),
        comparison=tagged("comparison", comparison),
        kept=tagged("kept_edits", "\n".join(f"- {k}" for k in kept) or "(none)"),
        rejected=tagged("rejected_edits", "\n".join(f"- {r}" for r in rejected) or "(none)"),
    )
