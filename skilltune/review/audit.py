"""``skilltune audit``: check after the fact that a run kept its promises, from its files alone.

Checks (``runfiles.CHECKS``): no val/test text or id in what the proposer read or wrote, in
META.md or in any skill version (``leak``, see leakage.py); the best version moved only by
gate-accepted keeps along one chain (``best-lineage``); no PROTECTED block changed but by an
epoch update, and then only its own block (``protected-block``); every score stamped with the
run's scoring contract (``contract-drift``); one agent, model and CLI identity for every
rollout (``agent-drift``); no edit rejected by a gate proposed again (``rejected-edit``); no
gate that decided on a round holding infra errors or crashes (``contaminated-gate``); every
rollout of an agent process sealed (``unsealed``: the agent could read the suite and the user's
files, skilltune/sandbox.py).

One check warns and leaves the run clean (``train-quote``, leakage.py): the best version quoting one
train task's prompt. Train text is evidence a proposer may read, so it breaks no promise; a rule
that quotes one task fits that task alone, which is worth a look.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from skilltune.errors import UsageError
from skilltune.propose.edit import protected_blocks
from skilltune.propose.merge import edit_key
from skilltune.review.leakage import NGRAM, Secrets, documents, search, train_quotes
from skilltune.review.lineage import History, unit_name
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    CHECKS,
    AuditFile,
    AuditFinding,
    Comparison,
    ReflectionsFile,
    RolloutRecord,
    Verdict,
)
from skilltune.skill import Candidate
from skilltune.suite import Suite, load_suite
from skilltune.textfmt import one_line

SLOW_UPDATE_BLOCK = "slow-update"  # the block an epoch update writes (training/epoch.py)
_CLIP = 160


def audit(run_dir: str | Path, *, suite: str | Path | None = None, write: bool = True) -> AuditFile:
    """Audit the run in ``run_dir`` and (when ``write``) save the result as its audit.json.

    ``suite``: where the run's suite is now, when it moved since the run (default: the path in
    config.json). Raises UsageError when the folder is not a run or the suite cannot be read.
    """
    run = RunDir(Path(run_dir))
    if not run.config.is_file():
        raise UsageError(f"{run_dir}: not a skilltune run directory (no config.json)")
    history = History.read(run)
    path = Path(suite) if suite is not None else Path(history.config.suite)
    try:
        loaded = load_suite(  # read as the run read it: its prompt variant and judge are its contract
            path, prompt_variant=history.config.prompt_variant, judge_options=history.config.judge_options
        )
    except UsageError as exc:
        raise UsageError(
            f"{exc}\nthe audit needs the run's suite to know what val and test hold: give it with --suite PATH"
        ) from None
    return audit_history(history, loaded, write=write)


def audit_history(history: History, suite: Suite, *, write: bool = True) -> AuditFile:
    """The audit of an already-read run (the end of a training run calls this with its suite)."""
    notes: list[str] = []
    if suite.content_hash != history.config.suite_hash:
        notes.append(
            f"the suite at {suite.root} changed since the run started: the leak check used its current tasks"
        )
    records = list(_records(history.run))
    leaks, searched, more = _leaks(history, suite)
    notes += more
    findings = [
        *leaks,
        *_lineage(history),
        *_protected(history),
        *_contract(history, records),
        *_agent_drift(records),
        *_rejected_again(history),
        *_contaminated_gates(history, records),
        *_unsealed(records),
    ]
    warnings, searched["train_prompts"] = train_quotes(history, suite)
    result = AuditFile(
        clean=not findings,
        checks=list(CHECKS),
        findings=findings,
        warnings=warnings,
        notes=notes,
        searched=searched,
    )
    if write:
        result.write(history.run.audit)
    return result


def _records(run: RunDir) -> Iterator[tuple[str, RolloutRecord]]:
    """(path relative to the run, record) of every rollout of the run."""
    for path in sorted(run.root.glob("**/rollouts/*/*/*/record.json")):
        yield path.relative_to(run.root).as_posix(), RolloutRecord.read(path)


# --- leak ---------------------------------------------------------------------------------------
def _leaks(history: History, suite: Suite) -> tuple[list[AuditFinding], dict[str, int], list[str]]:
    secrets = Secrets.of(suite, history.seed.files.values())
    findings = []
    read = 0
    for where, text in documents(history):
        read += 1
        hit = search(secrets, text)
        if hit is None:
            continue
        parts = []
        if hit.passages:
            shown = "; ".join(f"{one_line(p, 100)!r} from {source}" for p, source in hit.passages[:3])
            more = f" and {len(hit.passages) - 3} more" if len(hit.passages) > 3 else ""
            parts.append(f"{len(hit.passages)} passage(s) of {NGRAM}+ words from val/test: {shown}{more}")
        if hit.ids:
            named = ", ".join(f"{i} ({secrets.ids[i]})" for i in hit.ids[:5])
            parts.append(f"val/test task id(s) {named}")
        findings.append(
            AuditFinding(
                check="leak",
                where=where,
                message="; ".join(parts),
                details={"passages": [{"text": p, "source": s} for p, s in hit.passages], "ids": hit.ids},
            )
        )
    notes = []
    if secrets.unsearched_ids:
        notes.append(
            f"task ids too short or numeric to search for: {', '.join(sorted(secrets.unsearched_ids)[:10])}"
        )
    searched = {"documents": read, "passages": len(secrets.grams), "ids": len(secrets.ids)}
    return findings, searched, notes


# --- best lineage -------------------------------------------------------------------------------
def _lineage(history: History) -> list[AuditFinding]:
    """The best moved only forward: each unit started from the last keep, each keep was accepted by
    its gate with a higher val than its incumbent, and best_skill/ and comparison.json agree."""
    problems: list[tuple[str, str]] = []  # (where, message)
    known = history.by_hash()
    current = history.seed.hash
    for record in history.units:
        name = unit_name(record)
        where = f"steps/{name}/{record.kind}.json"
        saved = history.saved.get(name)
        if record.parent != current:
            problems.append(
                (where, f"started from {record.parent[:12]}, but the incumbent was {current[:12]}")
            )
        if saved is not None and saved.hash != record.candidate:
            problems.append(
                (
                    f"steps/{name}/candidate",
                    f"holds {saved.short}, but the unit records {record.candidate[:12]}",
                )
            )
        if record.verdict != "keep":
            continue
        cand, inc = record.val_candidate, record.val_incumbent
        if record.decision != "accept":
            problems.append((where, f"kept without a gate accept ({record.decision})"))
        elif cand is not None and inc is not None and cand <= inc:
            problems.append((where, f"kept with val {cand:.3f} <= the incumbent's {inc:.3f}"))
        if record.candidate not in known:
            problems.append((where, "kept, but its candidate is not on disk"))
        current = record.candidate
    run = history.run
    if run.best_dir.is_dir():
        best = Candidate.load(run.best_dir, history.seed)
        if best.hash != current:
            problems.append(
                ("best_skill", f"holds {best.short}, but the last kept version is {current[:12]}")
            )
    if run.comparison.is_file():
        arms = Comparison.read(run.comparison).arms
        for arm, expected in (("S0", history.seed.hash), ("best", current)):
            if arm in arms and arms[arm].skill_hash != expected:
                tested = arms[arm].skill_hash[:12]
                problems.append(("comparison.json", f"arm {arm} tested {tested}, not {expected[:12]}"))
    return [AuditFinding(check="best-lineage", where=w, message=m) for w, m in problems]


# --- protected blocks ---------------------------------------------------------------------------
def _protected(history: History) -> list[AuditFinding]:
    """A step never changes a PROTECTED block; an epoch update changes only its own."""
    found = []
    known = history.by_hash()
    for record in history.units:
        name = unit_name(record)
        candidate, parent = history.saved.get(name), known.get(record.parent)
        if candidate is None or parent is None or record.decision in ("lint", "empty"):
            continue  # no candidate, or lint stopped it before any gate
        for file in sorted(set(candidate.files) | set(parent.files)):
            before = protected_blocks(parent.files.get(file, ""))
            after = protected_blocks(candidate.files.get(file, ""))
            allowed = {SLOW_UPDATE_BLOCK} if record.kind == "epoch" and file == candidate.main else set()
            changed = sorted(
                block
                for block in set(before) | set(after)
                if block not in allowed and before.get(block) != after.get(block)
            )
            if changed:
                found.append(
                    AuditFinding(
                        check="protected-block",
                        where=f"steps/{name}/candidate/{file}",
                        message=f"{record.kind} {record.index} ({record.verdict}) changed PROTECTED block(s) "
                        f"{', '.join(changed)}",
                        details={"blocks": changed, "verdict": record.verdict},
                    )
                )
    return found


# --- contract and agent drift -------------------------------------------------------------------
def _contract(history: History, records: list[tuple[str, RolloutRecord]]) -> list[AuditFinding]:
    expected = history.config.contract
    stamps: dict[str, list[str]] = defaultdict(list)
    for where, record in records:
        if record.score is not None and record.score.contract != expected:
            stamps[record.score.contract].append(where)
    found = [
        AuditFinding(
            check="contract-drift",
            where=paths[0],
            message=f"{len(paths)} score(s) stamped with contract {stamp[:12]}, not the run's {expected[:12]}",
            details={"contract": stamp, "records": paths},
        )
        for stamp, paths in sorted(stamps.items())
    ]
    if history.run.comparison.is_file():
        contract = Comparison.read(history.run.comparison).contract
        if contract is not None and contract != expected:
            found.append(
                AuditFinding(
                    check="contract-drift",
                    where="comparison.json",
                    message=f"stamped with contract {contract[:12]}, not the run's {expected[:12]}",
                )
            )
    return found


def _unit_of(where: str) -> str:
    parts = where.split("/")
    return parts[1] if parts[0] == "steps" else parts[0]


def _agent_drift(records: list[tuple[str, RolloutRecord]]) -> list[AuditFinding]:
    """Every rollout (of one agent, in a run with several: its ``target``) should have run the same
    agent, model and options (the options hash covers the CLI's version and the model variables it reads)."""
    groups: dict[tuple[str, str, str | None, str], list[str]] = defaultdict(list)
    for where, record in records:
        groups[(record.target or "", record.agent, record.model, record.options_hash)].append(where)
    found = []
    for target in sorted({key[0] for key in groups}):
        mine = [(key[1:], paths) for key, paths in groups.items() if key[0] == target]
        ranked = sorted(mine, key=lambda kv: (-len(kv[1]), kv[1][0]))
        (agent, model, options), _ = ranked[0]
        for (other_agent, other_model, other_options), paths in ranked[1:]:
            what = []
            if other_agent != agent:
                what.append(f"agent {other_agent} (not {agent})")
            if other_model != model:
                what.append(f"model {other_model} (not {model})")
            if other_options != options:
                what.append(f"options/CLI version {other_options[:12]} (not {options[:12]})")
            units = sorted({_unit_of(p) for p in paths})
            more = " ..." if len(units) > 6 else ""
            details = {
                "agent": other_agent,
                "model": other_model,
                "options_hash": other_options,
                "units": units,
            }
            message = f"{len(paths)} rollout(s) in {', '.join(units[:6])}{more} ran {', '.join(what)}"
            found.append(AuditFinding(check="agent-drift", where=paths[0], message=message, details=details))
    return found


def _unsealed(records: list[tuple[str, RolloutRecord]]) -> list[AuditFinding]:
    """Rollouts whose agent process ran unsealed: nothing stopped it reading val, test or the user's files."""
    paths = [where for where, record in records if record.sandbox == "none"]
    if not paths:
        return []
    units = sorted({_unit_of(p) for p in paths})
    where = ", ".join(units[:6]) + (" ..." if len(units) > 6 else "")
    why = "the agent could read the suite (val and test answers) and your files; run with --sandbox bwrap"
    message = f"{len(paths)} rollout(s) in {where} ran unsealed: {why}"
    return [AuditFinding(check="unsealed", where=paths[0], message=message, details={"units": units})]


# --- rejected edits proposed again -------------------------------------------------------------
def _rejected_again(history: History) -> list[AuditFinding]:
    """A step whose proposer proposed an edit a gate had already rejected in an earlier step."""
    run = history.run
    rejected: dict[tuple[str, str, str, str], str] = {}
    found = []
    for record in history.units:
        if record.kind != "step":
            continue
        name = unit_name(record)
        path = run.steps / name / "reflections.json"
        edits = ReflectionsFile.read(path).edits if path.is_file() else []
        for edit in edits:
            earlier = rejected.get(edit_key(edit))
            if earlier is not None:
                found.append(
                    AuditFinding(
                        check="rejected-edit",
                        where=f"steps/{name}/reflections.json",
                        message=f"proposed again an edit rejected in {earlier}: {one_line(edit.compact(), _CLIP)}",
                        details={"rejected_in": earlier, "edit": edit.compact()},
                    )
                )
        if record.verdict != "keep" and record.decision in ("reject", "screen"):
            texts = set(record.edit_texts)
            for edit in edits:
                if edit.text in texts:
                    rejected.setdefault(edit_key(edit), name)
    return found


# --- gates that decided on a contaminated round ------------------------------------------------
def _contaminated_gates(history: History, records: list[tuple[str, RolloutRecord]]) -> list[AuditFinding]:
    found = []
    gate_records: dict[str, list[tuple[str, RolloutRecord]]] = defaultdict(list)
    for where, rollout in records:
        if rollout.phase == "gate":
            gate_records[_unit_of(where)].append((where, rollout))
    for unit in history.units:
        name = unit_name(unit)
        path = history.run.steps / name / "gate.json"
        if not path.is_file():
            continue
        verdict = Verdict.read(path)
        if verdict.decision == "contaminated":
            continue
        ours = gate_records.get(name, [])
        replicates = sorted({r.replicate for _, r in ours})
        bad = [(w, r) for w, r in ours if r.status in ("infra_error", "crashed")]
        if not bad:
            continue
        # Round i holds the replicates up to its cumulative count (one per round for the sequential
        # gate; all of them in round 0 for a one-pass gate), in replicate order.
        bounds = [r.replicates for r in verdict.rounds] or [len(replicates)]
        rounds = sorted(
            {
                next((i for i, b in enumerate(bounds) if replicates.index(r.replicate) < b), len(bounds) - 1)
                for _, r in bad
            }
        )
        found.append(
            AuditFinding(
                check="contaminated-gate",
                where=f"steps/{name}/gate.json",
                message=f"the gate decided {verdict.decision} on round(s) {', '.join(map(str, rounds))} holding "
                f"{len(bad)} rollout(s) with infra errors or crashes",
                details={"rounds": rounds, "records": [w for w, _ in bad]},
            )
        )
    return found
