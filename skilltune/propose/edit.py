"""Edits of skill text: anchored patch ops and the lint decision on the candidate they make.

Patch ops find their anchor exactly once (a unique near match is recorded), apply
all-or-nothing, and never touch the front matter or a PROTECTED block.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from skilltune.proposal import Edit
from skilltune.skill import (
    PROTECTED_BLOCK,
    Candidate,
    block_key,
    lint_candidate,
    lint_description,
    set_description,
)

_PROTECTED = PROTECTED_BLOCK  # both forms: <!-- PROTECTED:name --> and skill-trainer's :START/:END
_MARKER = re.compile(r"<!--\s*/?PROTECTED")
NEAR_MATCH_RATIO = 0.92
GROWTH_ALLOWED = 900  # characters a unit may always add to the main file, whatever its length


class PatchError(ValueError):
    """A patch op that cannot be applied; the whole patch is refused."""


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def locked_spans(text: str) -> list[Span]:
    """Regions no step edit may touch: the front matter and every PROTECTED block."""
    spans = []
    if text.startswith("---"):
        close = re.search(r"^---[ \t]*$", text[3:], re.M)
        if close:
            end = 3 + close.end()
            # The newline that ends the front matter belongs to it: eating it would unclose it.
            spans.append(Span(0, end + 1 if text[end : end + 1] == "\n" else end))
    spans += [Span(m.start(), m.end()) for m in _PROTECTED.finditer(text)]
    return spans


def protected_blocks(text: str) -> dict[str, str]:
    """Each protected block's text by its key (``block_key``: both marker forms name one block)."""
    return {block_key(m.group("name") or m.group("st")): m.group(0) for m in _PROTECTED.finditer(text)}


def _overlaps(a: Span, spans: list[Span]) -> bool:
    return any(a.start < s.end and s.start < a.end for s in spans)


def find_anchor(text: str, anchor: str) -> tuple[Span, str | None]:
    """The one place ``anchor`` occurs; a unique near match is accepted and returned as matched text."""
    if not anchor.strip():
        raise PatchError("empty anchor")
    starts = _occurrences(text, anchor)
    if len(starts) == 1:
        return Span(starts[0], starts[0] + len(anchor)), None
    if len(starts) > 1:
        raise PatchError(f"anchor occurs {len(starts)} times (must be exactly once): {anchor[:60]!r}")
    loose = [
        _whole_line_if_only_punctuation_left(text, Span(m.start(), m.end()))
        for m in _loose_pattern(anchor).finditer(text)
    ]
    if len(loose) == 1:
        return loose[0], text[loose[0].start : loose[0].end]
    if len(loose) > 1:
        raise PatchError(
            f"anchor is ambiguous ({len(loose)} matches ignoring case and spacing): {anchor[:60]!r}"
        )
    near = _near_matches(text, anchor)
    if len(near) == 1:
        span = near[0]
        return span, text[span.start : span.end]
    if not near:
        raise PatchError(f"anchor not found: {anchor[:60]!r}")
    raise PatchError(f"anchor is ambiguous ({len(near)} near matches): {anchor[:60]!r}")


def _whole_line_if_only_punctuation_left(text: str, span: Span) -> Span:
    """Widen a loose match to its line when the rest of the line holds no word character
    (an anchor that dropped the line's final period still means the whole line)."""
    line_start = text.rfind("\n", 0, span.start) + 1
    line_end = text.find("\n", span.end)
    line_end = len(text) if line_end < 0 else line_end
    rest = text[line_start : span.start] + text[span.end : line_end]
    if "\n" not in text[span.start : span.end] and not re.search(r"\w", rest):
        return Span(line_start, line_end)
    return span


def _occurrences(text: str, anchor: str) -> list[int]:
    """Every start of ``anchor`` in ``text``, overlapping ones included."""
    found = []
    at = text.find(anchor)
    while at >= 0:
        found.append(at)
        at = text.find(anchor, at + 1)
    return found


def _loose_pattern(anchor: str) -> re.Pattern[str]:
    """The anchor's words in order, any case, any whitespace between them (matches part of a line too)."""
    return re.compile(r"\s+".join(re.escape(word) for word in anchor.split()), re.IGNORECASE)


def _near_matches(text: str, anchor: str) -> list[Span]:
    """Windows of whole lines whose whitespace- and case-folded form matches the anchor closely."""
    target = " ".join(anchor.split()).lower()
    n_lines = max(1, anchor.strip().count("\n") + 1)
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    scored: list[tuple[float, Span]] = []
    for i in range(len(lines) - n_lines + 1):
        window = "".join(lines[i : i + n_lines])
        folded = " ".join(window.split()).lower()
        if not folded:
            continue
        if folded == target:
            ratio = 1.0
        else:
            ratio = difflib.SequenceMatcher(None, folded, target, autojunk=False).ratio()
        if ratio >= NEAR_MATCH_RATIO:
            stripped_end = offsets[i + n_lines] - (len(window) - len(window.rstrip("\n")))
            scored.append((ratio, Span(offsets[i], stripped_end)))
    if not scored:
        return []
    best = max(r for r, _ in scored)
    return [s for r, s in scored if r == best]


def _body_end(text: str) -> int:
    """Where ``append`` inserts: before a PROTECTED block that ends the file, else at the end."""
    stripped = text.rstrip()
    blocks = list(_PROTECTED.finditer(text))
    if blocks and blocks[-1].end() >= len(stripped):
        return blocks[-1].start()
    return len(text)


def apply_edit(text: str, edit: Edit) -> tuple[str, Edit]:
    """Apply one op to ``text``; returns the new text and the edit with ``matched`` recorded."""
    if _MARKER.search(edit.text) or edit.text.lstrip().startswith("---\n"):
        raise PatchError("edit text may not contain PROTECTED markers or front matter")
    if edit.op == "description":
        try:
            return set_description(text, edit.text.strip()), edit
        except ValueError as exc:
            raise PatchError(f"the description cannot be set: {exc}") from None
    locked = locked_spans(text)
    if edit.op == "append":
        if not edit.text.strip():
            raise PatchError("append with empty text")
        at = _body_end(text)
        head, tail = text[:at], text[at:]
        insertion = edit.text.strip("\n") + "\n"
        if head and not head.endswith("\n"):
            head += "\n"
        if tail:
            insertion += "\n"
        return head + insertion + tail, edit
    if edit.anchor is None:
        raise PatchError(f"{edit.op} needs an anchor")
    span, matched = find_anchor(text, edit.anchor)
    if _overlaps(span, locked):
        raise PatchError(f"anchor lies in the front matter or a PROTECTED block: {edit.anchor[:60]!r}")
    recorded = edit.model_copy(update={"matched": matched}) if matched is not None else edit
    if edit.op == "replace":
        return text[: span.start] + edit.text + text[span.end :], recorded
    if edit.op == "delete":
        line_start = text.rfind("\n", 0, span.start) + 1
        line_end = text.find("\n", span.end)
        line_end = len(text) if line_end < 0 else line_end + 1
        rest = text[line_start : span.start] + text[span.end : line_end]
        if not rest.strip():  # the anchor was the whole line: drop the line
            return text[:line_start] + text[line_end:], recorded
        return text[: span.start] + text[span.end :], recorded
    if not edit.text.strip():
        raise PatchError("insert_after with empty text")
    line_end = text.find("\n", span.end)
    if line_end < 0:
        return text + "\n" + edit.text.strip("\n") + "\n", recorded
    insert_at = line_end + 1
    if _overlaps(Span(insert_at, insert_at), [Span(s.start + 1, s.end) for s in locked]):
        raise PatchError("insert_after would land inside a PROTECTED block")
    return text[:insert_at] + edit.text.strip("\n") + "\n" + text[insert_at:], recorded


def apply_patch(candidate: Candidate, edits: list[Edit]) -> tuple[Candidate, list[Edit]]:
    """Apply every edit in order, or none: any failure raises PatchError naming the op."""
    files = dict(candidate.files)
    applied = []
    for index, edit in enumerate(edits):
        if edit.file not in files:
            raise PatchError(f"op {index + 1} ({edit.op}) edits {edit.file!r}, which is not in the skill")
        before = files[edit.file]
        try:
            files[edit.file], recorded = apply_edit(before, edit)
        except PatchError as exc:
            raise PatchError(f"op {index + 1} ({edit.compact()}): {exc}") from None
        if protected_blocks(files[edit.file]) != protected_blocks(before):
            raise PatchError(f"op {index + 1} ({edit.compact()}) would change a PROTECTED block")
        applied.append(recorded)
    return Candidate(files, candidate.main, candidate.kind, candidate.fallback_name), applied


def check_edit(candidate: Candidate, edit: Edit) -> str | None:
    """Why ``edit`` cannot apply to ``candidate`` on its own (None when it can)."""
    try:
        apply_patch(candidate, [edit])
    except PatchError as exc:
        return str(exc)
    return None


def set_protected_block(text: str, name: str, content: str) -> str:
    """Replace the body of the protected block ``name`` (either marker form, in its own form; a
    skill-trainer ``SLOW_UPDATE`` block is the ``slow-update`` block), or add one at the end.

    A markdown heading that opens the existing block is kept above new content that
    brings none of its own.
    """
    found = next(
        (
            m
            for m in _PROTECTED.finditer(text)
            if block_key(m.group("name") or m.group("st")) == block_key(name)
        ),
        None,
    )
    heading = ""
    opening, closing = f"<!-- PROTECTED:{name} -->", "<!-- /PROTECTED -->"
    if found:
        inner = re.sub(r"\A<!--.*?-->|<!--[^>]*-->\Z", "", found.group(0), flags=re.S)
        first = inner.strip().splitlines()[:1]
        keeps = first and first[0].startswith("#") and not content.strip().startswith("#")
        heading = first[0] + "\n" if keeps else ""
        if found.group("st"):
            opening = f"<!-- PROTECTED:{found.group('st')}:START -->"
            closing = f"<!-- PROTECTED:{found.group('st')}:END -->"
    block = f"{opening}\n{heading}{content.strip()}\n{closing}"
    if found:
        return text[: found.start()] + block + text[found.end() :]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def lint_edit(
    candidate: Candidate, incumbent: Candidate, growth_cap: float, own_block: str | None = None
) -> str | None:
    """Why ``candidate`` may not be gated against ``incumbent`` (None when it may).

    Only problems the edit introduced count (a seed with a broken link can still be
    improved): new lint errors, a changed front-matter name, a changed PROTECTED block
    (except ``own_block``, the one the epoch slow update writes), growth past ``growth_cap``.
    """
    if candidate.hash == incumbent.hash:
        return "the candidate is identical to the incumbent"
    before = {i.message for i in lint_candidate(incumbent)}
    errors = [str(i) for i in lint_candidate(candidate) if i.message not in before]
    if errors:
        return "lint: " + "; ".join(errors[:3])
    if candidate.name != incumbent.name:
        return f"lint: the front-matter name changed ({incumbent.name} -> {candidate.name})"
    if candidate.description != incumbent.description:
        problems = lint_description(candidate.description, candidate.name)
        if problems:
            return "lint: " + "; ".join(problems)
    old_blocks, new_blocks = protected_blocks(incumbent.text), protected_blocks(candidate.text)
    if own_block is not None:
        old_blocks.pop(own_block, None)
        new_blocks.pop(own_block, None)
    if old_blocks != new_blocks:
        return "lint: a PROTECTED block changed"
    return growth_problem(candidate, incumbent, growth_cap)


def growth_limit(length: int, growth_cap: float) -> int:
    """The most characters a main file of ``length`` may grow to in one unit: ``growth_cap`` of it
    plus 200, and growth up to ``GROWTH_ALLOWED`` characters always (skill-trainer's rule, so a
    short seed can take a few one-line rules)."""
    return max(int(length * (1 + growth_cap) + 200), length + GROWTH_ALLOWED)


def growth_problem(candidate: Candidate, incumbent: Candidate, growth_cap: float) -> str | None:
    limit = growth_limit(len(incumbent.text), growth_cap)
    if len(candidate.text) > limit:
        return f"lint: {candidate.main} grew from {len(incumbent.text)} to {len(candidate.text)} characters (cap {limit})"
    return None


def fit_growth(
    incumbent: Candidate, edits: list[Edit], growth_cap: float
) -> tuple[Candidate, list[Edit], list[tuple[Edit, str]]]:
    """The strongest edits (``edits`` is in rank order) whose patch stays within the growth cap:
    each edit in turn joins the patch when the candidate still fits; the others are returned with
    why. Raises PatchError when not even one edit fits (the whole patch is then linted as it is)."""
    kept: list[Edit] = []
    left: list[tuple[Edit, str]] = []
    best: tuple[Candidate, list[Edit]] | None = None
    for edit in edits:
        try:
            trial = apply_patch(incumbent, [*kept, edit])
        except PatchError as exc:
            left.append((edit, f"does not apply with the stronger edits kept: {exc}"))
            continue
        problem = growth_problem(trial[0], incumbent, growth_cap)
        if problem is None:
            kept.append(edit)
            best = trial
        else:
            left.append(
                (edit, f"over the growth cap with the stronger edits kept ({problem.removeprefix('lint: ')})")
            )
    if best is None:
        raise PatchError("no edit fits within the growth cap on its own")
    return best[0], best[1], left
