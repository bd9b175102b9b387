"""Proposer prompts, rendered from the templates in ``skilltune/prompts/``.

Every prompt is built from an EvidencePacket, which holds train evidence only.
"""

from __future__ import annotations

from importlib import resources
from string import Template

from skilltune.proposal import EvidencePacket, RejectedEdit, Trajectory

_OUTPUT_CHARS = 3000
_DIFF_CHARS = 2000


def template(name: str) -> Template:
    return Template(resources.files("skilltune.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8"))


def render_trajectories(trajectories: list[Trajectory]) -> str:
    if not trajectories:
        return "(none)"
    blocks = []
    for t in trajectories:
        output = (
            t.output if len(t.output) <= _OUTPUT_CHARS else t.output[:_OUTPUT_CHARS] + "\n[output truncated]"
        )
        block = [
            f"### {t.id} (task {t.task_id}; hard {t.hard}, soft {t.soft:.2f}, status {t.status})",
            "",
            "Task:",
            t.prompt,
            "",
            "Final output:",
            output,
        ]
        if t.checks:
            block += ["", "The scorer's checks:", ", ".join(t.checks)]
        if t.feedback.strip():
            block += ["", "The judge's feedback:", t.feedback.strip()]
        if t.diff.strip():
            diff = t.diff if len(t.diff) <= _DIFF_CHARS else t.diff[:_DIFF_CHARS] + "\n[diff truncated]"
            block += ["", "Diff of the agent's changes:", diff]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)


def render_rejected(rejected: list[RejectedEdit]) -> str:
    if not rejected:
        return "(none)"
    return "\n".join(f"- step {r.step}: {r.edit} — {r.evidence}" for r in rejected)


def _common(packet: EvidencePacket) -> dict[str, str]:
    return {
        "skill_main": packet.skill_main,
        "skill_text": packet.skill_files[packet.skill_main],
        "memory": packet.memory.strip() or "(empty)",
        "rejected": render_rejected(packet.rejected),
        "failures": render_trajectories(packet.failures),
        "successes": render_trajectories(packet.successes),
        "max_edits": str(packet.max_edits),
        "failure_classes": (
            "\n\n## Failure classes (the suite's guide from symptoms to mechanisms)\n\n"
            + packet.failure_classes.strip()
            if packet.failure_classes.strip()
            else ""
        ),
    }


def reflect_prompt(packet: EvidencePacket) -> str:
    return template("reflect").substitute(_common(packet))


ROLE_INSTRUCTIONS = {
    "failure analyst": "List the distinct failure causes the trajectories show, most frequent first, one line each, with the trajectory ids behind each.",
    "author": "Write the complete new skill document (front matter included) that fixes the failure causes while keeping what works.",
    "red-team reviewer": "Review the author's draft against the evidence: point out rules that are unsupported, task-specific or likely to hurt, and return the corrected complete document.",
}


def rewrite_prompt(packet: EvidencePacket, role: str, extra: str = "") -> str:
    text = template("rewrite").substitute(
        _common(packet), role=role, role_instructions=ROLE_INSTRUCTIONS[role]
    )
    return text + (f"\n\n{extra}" if extra else "")


def slow_update_prompt(skill_text: str, comparison: str, kept: list[str], rejected: list[str]) -> str:
    return template("slow_update").substitute(
        skill_text=skill_text,
        comparison=comparison,
        kept="\n".join(f"- {k}" for k in kept) or "(none)",
        rejected="\n".join(f"- {r}" for r in rejected) or "(none)",
    )
