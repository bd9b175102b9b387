"""Vetting proposed edits before the merge: each must cite the packet's trajectories; a failed anchor gets one repair.

An edit that cites no trajectory the proposer was shown is dropped (with its reason, kept in
reflections.json): support is counted in code, and an edit nobody can trace to evidence (a
small model copies the schema's ``"<trajectory id>"``) has none. An anchor that is not in the
skill, or not once, is sent back to the model once with the lines it may copy; an insertion or
replacement whose anchor is still nowhere in the skill is appended at the end instead (a small
model anchors its rule on a line of the trajectory it read: the rule is what it meant to add).

An edit of the other component than the step's (a ``description`` edit in a body step, a body
edit in a description step) is dropped, and so is a description that breaks the platforms'
limits (``skill.lint_description``), each with its reason.

An edit whose text quotes the prompt of one train task of the step's batch (four words or more of
it inside quotes, or eight in a row anywhere: propose/quotes.py) is dropped too: such a rule fits
the task it quotes and no other, and a train screen passes it for that reason alone. What is a
pattern rather than one task's words is judged on the whole batch, not on one focused ask's part
of it (a group of one failed task and two passing ones would make every line of that task's
template its own).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ValidationError

from skilltune.proposal import DroppedEdit, Edit, EvidencePacket, Proposal
from skilltune.propose.edit import PatchError, apply_edit, locked_spans
from skilltune.propose.quotes import TrainPrompts
from skilltune.skill import lint_description, split_front_matter
from skilltune.textfmt import one_line

REPAIR_LINES = 200  # lines offered to copy: a skill longer than this is shown in part


def _ids(packet: EvidencePacket) -> tuple[set[str], dict[str, list[str]]]:
    """The trajectory ids of the packet (its trigger requests' too), and each task id's."""
    shown = [(t.id, t.task_id) for t in (*packet.failures, *packet.successes)]
    shown += [(c.id, c.task_id) for c in packet.triggers]
    by_task: dict[str, list[str]] = {}
    for trajectory_id, task_id in dict.fromkeys(shown):
        by_task.setdefault(task_id, []).append(trajectory_id)
    return {i for i, _ in shown}, by_task


def cited(edit: Edit, packet: EvidencePacket) -> list[str]:
    """The packet's trajectories ``edit`` cites: its ids that name one, and every trajectory of a
    task it names by task id alone (small models often drop the ``#r<k>``)."""
    ids, by_task = _ids(packet)
    found: set[str] = set()
    for raw in edit.support:
        name = raw.strip()
        if name in ids:
            found.add(name)
        else:
            found.update(by_task.get(name, []))
    return sorted(found)


# What the prompt says of an earlier edit (propose/reflect.py ``outcome``), as a small model copies
# it into a new edit's text: "... (rejected by the gate on val)", "... — kept by the gate on val".
_OUTCOME = re.compile(
    r"\s*(?:\(\s*(?:rejected|kept) by the gate on val\s*\)|[—-]+\s*(?:rejected|kept) by the gate on val)"
)


def drop_uncited(proposal: Proposal, packet: EvidencePacket) -> Proposal:
    """The proposal with each edit's support narrowed to the packet's trajectories; an edit citing
    none of them moves to ``dropped`` with the reason. An outcome the prompt told of an earlier edit,
    copied into an edit's text, is taken out of it (it is not part of the rule)."""
    kept: list[Edit] = []
    dropped = list(proposal.dropped)
    for edit in proposal.edits:
        support = cited(edit, packet)
        if support:
            text = _OUTCOME.sub("", edit.text) if _OUTCOME.search(edit.text) else edit.text
            kept.append(edit.model_copy(update={"support": support, "text": text}))
            continue
        claimed = ", ".join(repr(s) for s in edit.support[:3]) or "nothing"
        reason = f"cites no trajectory of this step's evidence (it cited {claimed})"
        dropped.append(DroppedEdit(edit=edit, reason=reason))
    return proposal.model_copy(update={"edits": kept, "dropped": dropped})


def component_problem(edit: Edit, packet: EvidencePacket) -> str | None:
    """Why ``edit`` does not belong to the packet's step (None when it does): another component's
    edit, or a description that fails the description lint."""
    if packet.component == "body":
        if edit.op == "description":
            return "this step tunes the body: a description edit is not taken (see --component)"
        return None
    if edit.op != "description":
        return "this step tunes the description: a body edit is not taken (see --component)"
    data = split_front_matter(packet.skill_files.get(packet.skill_main, "")).data or {}
    problems = lint_description(edit.text.strip(), str(data.get("name") or ""))
    return "lint: " + "; ".join(problems) if problems else None


def train_prompts(*packets: EvidencePacket) -> TrainPrompts:
    """The prompts of the packets' train tasks, one per task (its replicates and agents share it)."""
    shown = [(t.task_id, t.prompt) for p in packets for t in (*p.failures, *p.successes)]
    shown += [(c.task_id, c.prompt) for p in packets for c in p.triggers]
    return TrainPrompts(dict(shown))


def quote_problem(edit: Edit, prompts: TrainPrompts, skill: list[str]) -> str | None:
    """Why ``edit``'s text is a quote of one train task's prompt (None when it is not); ``skill``:
    the texts of the incumbent's files, whose words are not the edit's quote."""
    found = prompts.quotes(edit.text, skill) if edit.text else []
    if not found:
        return None
    more = f" (and {len(found) - 1} more span(s))" if len(found) > 1 else ""
    return f"quotes train task {found[0].task_id}'s prompt: {one_line(found[0].text, 120)!r}{more}"


def vet_edits(proposal: Proposal, packet: EvidencePacket, batch: EvidencePacket | None = None) -> Proposal:
    """``drop_uncited``, then each edit that does not belong to the step (``component_problem``) or
    that quotes a train task's prompt (``quote_problem``) moved to ``dropped`` with the reason.
    ``batch``: the step's packet when ``packet`` is one ask's part of it (its prompts are the ones
    a quote is judged against; default ``packet``)."""
    proposal = drop_uncited(proposal, packet)
    kept: list[Edit] = []
    dropped = list(proposal.dropped)
    prompts = train_prompts(packet) if batch is None else train_prompts(batch, packet)
    skill = list(packet.skill_files.values())
    for edit in proposal.edits:
        problem = component_problem(edit, packet) or quote_problem(edit, prompts, skill)
        if problem is None:
            kept.append(edit)
        else:
            dropped.append(DroppedEdit(edit=edit, reason=problem))
    return proposal.model_copy(update={"edits": kept, "dropped": dropped})


def anchor_problem(packet: EvidencePacket, edit: Edit) -> str | None:
    """Why ``edit``'s anchor cannot be used in the skill (None when it can, or the edit needs none)."""
    text = packet.skill_files.get(edit.file)
    if edit.op == "append" or text is None:
        return None
    try:
        apply_edit(text, edit)
    except PatchError as exc:
        return str(exc) if "anchor" in str(exc) else None
    return None


def copyable_lines(text: str) -> list[str]:
    """Lines an anchor may copy: non-blank, outside the front matter and PROTECTED blocks, and
    occurring once in the file."""
    locked = locked_spans(text)
    lines, offset = [], 0
    for line in text.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        inside = any(s.start <= start < s.end for s in locked)
        body = line.rstrip("\n")
        if body.strip() and not inside and text.count(body) == 1:
            lines.append(body)
    return lines[:REPAIR_LINES]


def anchor_repair_prompt(packet: EvidencePacket, failed: list[tuple[Edit, str]]) -> str:
    """Ask once for new anchors: which failed and why, and the lines of the skill that may be copied."""
    blocks = []
    for number, (edit, problem) in enumerate(failed, start=1):
        blocks.append(
            f"{number}. op {edit.op} in {edit.file}, anchor {edit.anchor!r}: {problem}\n"
            f"   its text: {edit.text.strip()[:300]!r}"
        )
    files = sorted({edit.file for edit, _ in failed})
    shown = "\n\n".join(
        f'<lines file="{name}">\n' + "\n".join(copyable_lines(packet.skill_files[name])) + "\n</lines>"
        for name in files
    )
    return (
        "You proposed edits to a skill whose anchors cannot be used. An anchor must be copied "
        "exactly from one line of the skill, and that line must occur once.\n\n"
        "<failed_anchors>\n" + "\n".join(blocks) + "\n</failed_anchors>\n\n"
        "The lines an anchor may copy (one anchor is one whole line, or a part of one):\n\n"
        f"{shown}\n\n"
        'Answer with JSON only: {"anchors": [...]}, one string per failed edit in the order above, '
        "each copied from the lines shown; null for an edit that has no fitting line."
    )


class AnchorRepair(BaseModel):
    anchors: list[str | None]


def parse_anchor_repair(data: object) -> list[str | None]:
    """The new anchors from a repair answer's JSON (a bare list is read too)."""
    if isinstance(data, list):
        data = {"anchors": data}
    try:
        return AnchorRepair.model_validate(data).anchors
    except ValidationError as exc:
        raise ValueError(f"the repair answer does not match the schema: {exc.errors()[0]['msg']}") from None


def repair_anchors(
    edits: list[Edit], failed: list[int], anchors: list[str | None], packet: EvidencePacket
) -> tuple[list[Edit], int]:
    """``edits`` with each failed edit's anchor replaced by the model's new one when it works
    (an edit still failing is left as it was: the merge drops it with its reason); how many were repaired."""
    out = list(edits)
    repaired = 0
    for index, anchor in zip(failed, anchors, strict=False):
        if not anchor:
            continue
        candidate = edits[index].model_copy(update={"anchor": anchor})
        if anchor_problem(packet, candidate) is None:
            out[index] = candidate
            repaired += 1
    return out, repaired


def append_unanchored(edits: list[Edit], packet: EvidencePacket) -> tuple[list[Edit], int]:
    """``edits`` with each cited ``insert_after`` or ``replace`` whose anchor is not in the skill at
    all, or that has none (a small model writes ``"op": "replace", "anchor": null`` for a rule to
    add), turned into an ``append`` of its text (an anchor found more than once, or protected, stays
    as it is: the merge drops it with its reason); how many were turned."""
    out = list(edits)
    turned = 0
    for index, edit in enumerate(edits):
        if edit.op not in ("insert_after", "replace") or not cited(edit, packet):
            continue
        problem = anchor_problem(packet, edit)
        missing = not (edit.anchor or "").strip()
        if problem is not None and (missing or problem.startswith("anchor not found")):
            out[index] = edit.model_copy(update={"op": "append", "anchor": None})
            turned += 1
    return out, turned
