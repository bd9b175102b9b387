"""``skilltune promote``: carry a run's kept changes to the live skill, hunk by hunk, with evidence.

The changes are the difference between the run's seed and its best version, cut into hunks;
each hunk names the kept units that made it (lineage.py), with their rationale and gate
evidence. The live skill may have moved on since the seed, so each hunk is merged three-way
by ``git merge-file`` with the seed as base: the live file is "ours", the seed with this hunk
(and the clean hunks before it) applied is "theirs". A hunk that merges cleanly joins the
patch; one the live skill already holds is ``present``; one that conflicts is named and left
out, never forced. Hunks the run made at one place (two units appending) conflict with a live
file that holds them all, so a conflicting hunk is tried once more against the best version:
merged from the best without it, it is ``present`` when that changes nothing. The held-out comparison is shown once: it measured the whole patch.
Nothing is written unless ``apply``; then only the live skill's files change (nothing is
staged or committed). A run whose held-out test says the best skill hurts an agent (per agent,
final/transfer.json; with one agent, its comparison: verdict ``a_better``) is not applied unless
``accept_harm``.
"""

from __future__ import annotations

import difflib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from skilltune.errors import UsageError
from skilltune.metric import Metric
from skilltune.report.heldout import hurt_agents, run_comparison
from skilltune.review.leakage import words
from skilltune.review.lineage import History, Hunk, apply_hunks, hunks
from skilltune.rollout.workspace import git
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    AuditFile,
    Comparison,
    Harm,
    PairResult,
    ReflectionsFile,
    SlowUpdateFile,
    Verdict,
)
from skilltune.store import write_text

HunkStatus = Literal["clean", "present", "conflict"]


class EditNote(BaseModel):
    edit: str  # compact form, op@anchor: text
    rationale: str = ""
    support: list[str] = Field(default_factory=list)


class UnitEvidence(BaseModel):
    """Why a unit's change was kept: its edits with their rationale, and its gate's verdict."""

    unit: str
    decision: str
    reason: str
    val_candidate: float | None
    val_incumbent: float | None
    alpha: float | None
    rounds: int
    rollouts: int
    edits: list[EditNote]


class HunkPlan(BaseModel):
    file: str  # path inside the skill
    seed_line: int  # 1-based first line in the seed (where it would go, for a pure insertion)
    removed: list[str]
    added: list[str]
    status: HunkStatus
    units: list[UnitEvidence]
    conflict: str | None = None  # the merge's conflict region: the live skill's text against the run's


class PromotePlan(BaseModel):
    run: str
    live: str
    seed: str
    best: str
    state: str | None  # the run's TERMINAL state (None: it has not ended)
    hunks: list[HunkPlan]
    held_out: PairResult | None
    held_out_split: str | None = None
    held_out_metric: Metric | None = None
    held_out_scores: dict[str, float | None] = Field(default_factory=dict)  # arm -> its score on the metric
    hurt: list[Harm] = Field(default_factory=list)  # agents the held-out test says the best skill hurts
    audit_findings: int | None  # None: the run has no audit.json
    patch: str  # unified diff of the live skill -> the live skill with the clean hunks
    files: dict[str, str | None]  # live path -> new text (None: removed), for every file that changes
    applied: bool = False

    @property
    def conflicts(self) -> list[HunkPlan]:
        return [h for h in self.hunks if h.status == "conflict"]

    @property
    def up_to_date(self) -> bool:
        """The live skill already holds every change of the run."""
        return all(h.status == "present" for h in self.hunks)


@dataclass(frozen=True)
class _Live:
    """Where each skill path lives in the user's skill (a folder, or one instruction file)."""

    root: Path
    paths: dict[str, Path]

    def read(self, rel: str) -> str | None:
        path = self.where(rel)
        try:
            return path.read_text(encoding="utf-8") if path.is_file() else None
        except UnicodeDecodeError:
            raise UsageError(f"{path}: not UTF-8 text; a skill's files are text") from None

    def where(self, rel: str) -> Path:
        return self.paths.get(rel, self.root / rel)


def _one_agent_harm(run: RunDir, comparison: Comparison, best: str) -> bool:
    """A run of one agent (no per-agent table, final/transfer.json) whose held-out test of this best
    (not an earlier best's, as a resumed run may have left) came out ``a_better``: the seed
    significantly better."""
    if (run.final / "transfer.json").is_file():
        return False
    tested = comparison.arms.get("best")
    pair = next((p for p in comparison.pairs if (p.a, p.b) == ("S0", "best")), None)
    return (
        tested is not None and tested.skill_hash == best and pair is not None and pair.verdict == "a_better"
    )


def promote(
    run_dir: str | Path, to: str | Path, *, apply: bool = False, accept_harm: bool = False
) -> PromotePlan:
    """The run's kept changes as a patch against the live skill at ``to``; written only if ``apply``.

    Raises UsageError when ``run_dir`` is not a run or ``to`` does not fit the run's skill, and,
    writing nothing, when ``apply`` would write a skill the held-out test says hurts an agent
    (``plan.hurt``) unless ``accept_harm``.
    """
    run = RunDir(Path(run_dir))
    if not run.config.is_file():
        raise UsageError(f"{run_dir}: not a skilltune run directory (no config.json)")
    history = History.read(run)
    live = _live(history, Path(to))
    evidence = {name: _evidence(history, name) for name, _ in history.chain[1:]}
    all_hunks = hunks(history.chain)
    plans: list[HunkPlan] = []
    files: dict[str, str | None] = {}
    patch: list[str] = []
    for rel in sorted({h.path for h in all_hunks}):
        file_plans, new_text, diff = _promote_file(
            history, live, rel, [h for h in all_hunks if h.path == rel], evidence
        )
        plans += file_plans
        if diff:
            files[str(live.where(rel))] = new_text
            patch += diff
    # the run's own held-out test, or the compare its report suggests, written beside it (RUNDIR-heldout/)
    comparison = run_comparison(run, history.seed.hash, history.best.hash)[0]
    plan = PromotePlan(
        run=str(run.root),
        live=str(Path(to)),
        seed=history.seed.hash,
        best=history.best.hash,
        state=(run.terminal() or (None, ""))[0],
        hunks=plans,
        held_out=None,
        audit_findings=len(AuditFile.read(run.audit).findings) if run.audit.is_file() else None,
        patch="".join(
            line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in patch
        ),
        files=files,
    )
    if comparison is not None:
        plan.held_out = next((p for p in comparison.pairs if (p.a, p.b) == ("S0", "best")), None)
        plan.held_out_split, plan.held_out_metric = comparison.split, comparison.metric
        plan.held_out_scores = {name: arm.metric(comparison.metric) for name, arm in comparison.arms.items()}
    plan.hurt = hurt_agents(run, history.best.hash)
    if (
        comparison is not None
        and plan.held_out is not None
        and _one_agent_harm(run, comparison, history.best.hash)
    ):
        plan.hurt = [Harm(agent=comparison.agent, split=comparison.split, pair=plan.held_out)]
    if apply and files and plan.hurt and not accept_harm:
        raise UsageError(
            f"not applied: the best skill hurts {len(plan.hurt)} agent(s) on the held-out test: "
            + "; ".join(harm.line() for harm in plan.hurt)
            + f". Nothing was written to {to}. To promote it all the same, add --accept-harm"
        )
    if apply and files:
        for path, text in files.items():
            if text is None:
                Path(path).unlink(missing_ok=True)
            else:
                write_text(Path(path), text)
        plan.applied = True
    return plan


def _promote_file(
    history: History, live: _Live, rel: str, file_hunks: list[Hunk], evidence: dict[str, UnitEvidence]
) -> tuple[list[HunkPlan], str | None, list[str]]:
    """One file's hunk plans, its new live text (None: the file goes) and the diff lines to it."""
    ours = live.read(rel)
    merged, plans = _merge_file(history, rel, ours or "", file_hunks, evidence)
    # The run removed the file: it goes when nothing is left of it and no hunk was held back.
    gone = rel not in history.best.files and not merged and all(p.status != "conflict" for p in plans)
    new_text = None if gone else merged
    if (new_text or "") == (ours or "") and (new_text is None) == (ours is None):
        return plans, new_text, []
    target = live.where(rel)
    label = target.relative_to(live.root).as_posix()
    diff = difflib.unified_diff(
        (ours or "").splitlines(keepends=True),
        (new_text or "").splitlines(keepends=True),
        fromfile="/dev/null" if ours is None else f"a/{label}",
        tofile="/dev/null" if new_text is None else f"b/{label}",
    )
    return plans, new_text, list(diff)


def _live(history: History, to: Path) -> _Live:
    seed = history.seed
    if seed.kind == "folder":
        if not (to / "SKILL.md").is_file():
            raise UsageError(
                f"--to {to}: the run tuned a skill folder; give the live skill folder (with SKILL.md)"
            )
        return _Live(to, {})
    file = to / seed.main if to.is_dir() else to
    if not file.is_file():
        raise UsageError(
            f"--to {to}: no such file; give the live instruction file the run's seed was taken from"
        )
    return _Live(file.parent, {seed.main: file})


def _merge_file(
    history: History, rel: str, ours: str, file_hunks: list[Hunk], evidence: dict[str, UnitEvidence]
) -> tuple[str, list[HunkPlan]]:
    """Merge the hunks of one file into the live text one at a time (seed as base); the live text
    with every clean hunk, and each hunk's plan."""
    seed_lines = history.seed.files[rel].splitlines(keepends=True) if rel in history.seed.files else []
    taken: list[Hunk] = []
    plans = []
    for hunk in file_hunks:
        base = "".join(apply_hunks(seed_lines, taken))
        theirs = "".join(apply_hunks(seed_lines, [*taken, hunk]))
        merged, conflicts = merge_file(ours, base, theirs)
        if conflicts and _holds(ours, seed_lines, file_hunks, hunk):
            status: HunkStatus = "present"
            conflict = None
            taken.append(hunk)
        elif conflicts:
            status = "conflict"
            conflict = _conflict_region(merged)
        else:
            status = "present" if merged == ours else "clean"
            conflict = None
            ours = merged
            taken.append(hunk)
        plans.append(
            HunkPlan(
                file=rel,
                seed_line=hunk.seed_start + 1,
                removed=hunk.removed,
                added=hunk.added,
                status=status,
                units=[_for_hunk(evidence[u], hunk) for u in hunk.units if u in evidence],
                conflict=conflict,
            )
        )
    return ours, plans


def _holds(ours: str, seed_lines: list[str], file_hunks: list[Hunk], hunk: Hunk) -> bool:
    """Whether the live text already holds ``hunk`` where the best version has it: merging the best
    into it, with the best less this hunk as base, is clean and changes nothing."""
    others = [h for h in file_hunks if h is not hunk]
    best = "".join(apply_hunks(seed_lines, file_hunks))
    merged, conflicts = merge_file(ours, "".join(apply_hunks(seed_lines, others)), best)
    return not conflicts and merged == ours


def merge_file(ours: str, base: str, theirs: str) -> tuple[str, int]:
    """``git merge-file``: the three-way merge of ``ours`` and ``theirs`` from ``base`` (diff3 conflict
    markers labelled live / seed / run) and its number of conflicts."""
    with tempfile.TemporaryDirectory(prefix="skilltune-promote-") as tmp:
        folder = Path(tmp)
        for name, text in (("live", ours), ("seed", base), ("run", theirs)):
            (folder / name).write_text(text, encoding="utf-8")
        proc = git(
            folder, "merge-file", "-p", "--diff3", "-L", "live", "-L", "seed", "-L", "run", "live", "seed", "run",
            check=False,
        )  # fmt: skip
    if proc.returncode < 0 or proc.returncode > 127:
        raise RuntimeError(f"git merge-file failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode("utf-8"), proc.returncode


def _conflict_region(merged: str) -> str:
    lines = merged.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("<<<<<<< ")), 0)
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(">>>>>>> ")), len(lines) - 1)
    return "".join(lines[start : end + 1])


def _evidence(history: History, name: str) -> UnitEvidence:
    record = history.unit(name)
    assert record is not None, name  # the chain is made of finished units
    folder = history.folder(name)
    verdict = Verdict.read(folder / "gate.json") if (folder / "gate.json").is_file() else None
    notes: list[EditNote] = []
    if (folder / "reflections.json").is_file():
        proposed = {e.text: e for e in ReflectionsFile.read(folder / "reflections.json").edits}
        for compact, text in zip(record.edits, record.edit_texts or [""] * len(record.edits), strict=False):
            edit = proposed.get(text)
            notes.append(
                EditNote(
                    edit=compact,
                    rationale=edit.rationale if edit else "",
                    support=edit.support if edit else [],
                )
            )
    elif (folder / "slow_update.json").is_file():
        guidance = SlowUpdateFile.read(folder / "slow_update.json").guidance
        notes = [EditNote(edit=f"slow-update: {guidance}", rationale=" ".join(record.edits))]
    return UnitEvidence(
        unit=name,
        decision=record.decision,
        reason=record.reason,
        val_candidate=record.val_candidate,
        val_incumbent=record.val_incumbent,
        alpha=record.alpha,
        rounds=len(verdict.rounds) if verdict else 0,
        rollouts=verdict.rollouts if verdict else 0,
        edits=notes,
    )


def _for_hunk(evidence: UnitEvidence, hunk: Hunk) -> UnitEvidence:
    """The unit's evidence narrowed to the edits whose text the hunk adds (all of them when none
    matches, as for a deletion)."""
    added = " ".join(words("".join(hunk.added)))
    matching = [
        e for e in evidence.edits if (text := " ".join(words(e.edit.split(": ", 1)[-1]))) and text in added
    ]
    return evidence.model_copy(update={"edits": matching or evidence.edits})
