"""The findings bank: what a finished run found, appended once to ``RUNDIR/findings.md`` and to a
findings file shared across runs (``--findings FILE``).

An entry says how the run was made (method), what it measured (held-out and val deltas with
their intervals), which kinds of edits were kept or rejected, and the warnings it hit: the
report's (``report.warnings``), so the bank and the report never disagree. Every figure is read
from the run directory. Each entry carries the run's id as a marker; an append looks for it under a lock on
the file, and findings.json lists where the entry went, so neither a resume nor a second end
of the run appends it twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from skilltune.report import summarize
from skilltune.report.heldout import hurt_agents
from skilltune.report.proposals import counts, total
from skilltune.report.trigger import decisions, per_query
from skilltune.report.units import step_origins
from skilltune.report.warnings import ending_warnings
from skilltune.review.lineage import History, unit_name
from skilltune.rollout.tally import accuracy
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    CARRIED,
    Comparison,
    FindingsRecord,
    FindingsTarget,
    ReflectionsFile,
    RolloutRecord,
    RunConfigFile,
    RunStart,
    UnitRecord,
    replaced_by,
)
from skilltune.textfmt import fmt, one_line, signed

MARKER = "<!-- skilltune-run: {} -->"
_LISTED = 10  # rejected units listed in an entry (results.tsv has them all)
_HEADING = "# Findings (skilltune)\n\nOne entry per finished training run, appended when the run ends.\n"


def run_id(run: RunDir) -> str:
    """The run's identity: its tag and the moment it was laid out (a ``--force`` restart is a new run).

    Runs from before the run_start event use their first journal event's time."""
    events = run.read_journal()
    started = next((e.ts for e in events if isinstance(e, RunStart)), events[0].ts if events else "")
    tag = RunConfigFile.read(run.config).tag  # not the folder's name: a moved run is the same run
    return hashlib.sha256(f"{tag}|{started}".encode()).hexdigest()[:16]


def record_findings(
    run_dir: str | Path, shared: str | Path | None = None, *, ending: tuple[str, str] | None = None
) -> list[Path]:
    """Append the run's entry to RUNDIR/findings.md and to ``shared``, each at most once ever.

    Returns the files appended to now (empty when every file already holds the entry).
    ``ending``: (state, reason) when TERMINAL is not written yet (the end of a training run),
    else TERMINAL's.
    """
    run = RunDir(Path(run_dir))
    rid = run_id(run)
    record = (
        FindingsRecord.read(run.findings_record)
        if run.findings_record.is_file()
        else FindingsRecord(run_id=rid)
    )
    entry = render_entry(History.read(run), rid, ending)
    targets = [run.findings_md] + ([Path(shared)] if shared else [])
    appended = []
    for target in targets:
        path = str(target.resolve())
        if record.has(path):
            continue
        if _append_once(target, rid, entry):
            appended.append(target)
        record.appended.append(FindingsTarget(path=path, at=datetime.now(UTC).isoformat(timespec="seconds")))
        record.write(run.findings_record)
    return appended


def _append_once(target: Path, rid: str, entry: str) -> bool:
    """Append ``entry`` unless the file already holds the run's marker (checked under a lock, so
    runs ending at once never interleave or duplicate)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            handle.seek(0)
            text = handle.read()
            if MARKER.format(rid) in text:
                return False
            handle.write(_separator(text) + entry)
            handle.flush()
            os.fsync(handle.fileno())
            return True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _separator(text: str) -> str:
    """What goes before a new entry: the heading in a new file, else a blank line."""
    if not text.strip():
        return _HEADING + "\n"
    return "" if text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"


# --- the entry -----------------------------------------------------------------------------------
def _records(folder: Path) -> list[RolloutRecord]:
    return [RolloutRecord.read(p) for p in sorted(folder.glob("rollouts/*/*/*/record.json"))]


def render_entry(history: History, rid: str, ending: tuple[str, str] | None = None) -> str:
    """The run's entry: a markdown section headed by its tag and state, with the run's marker."""
    run, c = history.run, history.config
    state, reason = ending or run.terminal() or ("unfinished", "no TERMINAL")
    comparison = Comparison.read(run.comparison) if run.comparison.is_file() else None
    seed_val = accuracy(_records(run.unit_dir("step", 0)), c.metric)
    steps = sum(1 for u in history.units if u.kind == "step")
    lines = [
        f"## {c.tag}: {state} ({datetime.now(UTC).date().isoformat()})",
        MARKER.format(rid),
        "",
        f"Run `{run.root}`; suite `{c.suite}`; skill `{history.seed.name}`, seed {history.seed.short}"
        f" -> best {history.best.short}. {state}: {reason}",
        "",
        f"- **Method**: agent {c.agent}{_model(c.agent_options)}, proposer {c.proposer}"
        f"{_model(c.proposer_options)} ({c.mode} mode), gate {c.gate} on {c.metric} (run alpha {c.alpha}, "
        f"{c.alpha_policy}), {steps} step(s) of a batch of {c.batch} x {c.reps} rep(s), an epoch update "
        f"every {c.epoch_steps} steps, test {c.test_reps} rep(s), seed {c.seed}.",
        *_deltas(history, comparison, seed_val),
        *_edits(history),
        *_proposals(history),
        _cost(history, comparison),
        "- **Warnings**:",
        *[f"  - {w}" for w in (entry_warnings(run, ending) or ["none"])],
        "",
    ]
    return "\n".join(lines)


def _model(options: dict[str, object]) -> str:
    model = options.get("model")
    return f" (model {model})" if model else ""


def _deltas(history: History, comparison: Comparison | None, seed_val: float | None) -> list[str]:
    c = history.config
    kept_vals = [u.val_candidate for u in history.kept if u.val_candidate is not None]
    best_val = kept_vals[-1] if kept_vals else seed_val
    out = [
        f"- **Val** (the gate's {c.metric}; the best was selected on it, so it is optimistic): seed "
        f"{fmt(seed_val)} -> best {fmt(best_val)}"
    ]
    if comparison is None:
        out.append("- **Held-out**: no comparison (nothing kept, or no test split)")
        return out
    for pair in comparison.pairs:
        ci = f"[{signed(pair.ci95[0])}, {signed(pair.ci95[1])}]" if pair.ci95 else "[-]"
        p = "-" if pair.p_value is None else f"{pair.p_value:.3g}"
        a, b = (comparison.arms[arm].metric(comparison.metric) for arm in (pair.a, pair.b))
        out.append(
            f"- **Held-out** ({comparison.split}, {comparison.metric}, {comparison.reps} rep(s), "
            f"{pair.n_tasks} tasks): {pair.a} {fmt(a)} -> {pair.b} {fmt(b)}: "
            f"{signed(pair.diff)}, 95% CI {ci}, p {p} ({pair.verdict})"
        )
    out += [f"- **Hurt on held-out**: {harm.line()}" for harm in hurt_agents(history.run, history.best.hash)]
    loads = decisions(history.run.final) if any(a.trigger for a in comparison.arms.values()) else {}
    shown = [(name, per_query(loads.get(arm.skill_hash, {}))) for name, arm in comparison.arms.items()]
    if any(stats for _, stats in shown):
        out.append(
            f"- **Trigger** ({comparison.split}, each query once, by its replicates' majority; 95% Wilson "
            "over queries): " + "; ".join(f"{name} {stats.line()}" for name, stats in shown if stats)
        )
    best = comparison.arms.get("best")
    test = best.metric(comparison.metric) if best is not None else None
    if test is not None and best_val is not None:
        out.append(f"- **Val -> test gap** of the best: {signed(test - best_val)}")
    return out


def _op(compact: str) -> str:
    if compact.startswith("slow-update"):
        return "slow-update"
    if "(whole document)" in compact:
        return "rewrite"
    return compact.split("@", 1)[0].split(":", 1)[0]


def _kinds(history: History, unit: UnitRecord) -> Counter[str]:
    """What sort of edits a unit gated: failure / success edits by op, slow updates, rewrites."""
    path = history.folder(unit_name(unit)) / "reflections.json"
    proposed = ReflectionsFile.read(path).edits if path.is_file() else []
    by_text = {e.text: e.kind for e in proposed}
    out: Counter[str] = Counter()
    texts = unit.edit_texts or [""] * len(unit.edits)
    for compact, text, later in zip(unit.edits, texts, replaced_by(unit.edits), strict=False):
        if later is not None:  # a description a later one of the list replaced: not in the candidate
            continue
        op = _op(compact)
        kind = by_text.get(text)
        out[f"{kind} {op}" if kind and op not in ("slow-update", "rewrite") else op] += 1
    return out


def _edits(history: History) -> list[str]:
    gated = [u for u in history.units if u.decision not in ("empty", "skip")]
    kept = [u for u in gated if u.verdict == "keep"]
    carried = [u for u in gated if u.verdict == CARRIED]  # carried on ungated: a later gate decided them
    rejected = [u for u in gated if u.verdict == "discard"]
    origins = step_origins(history.units)

    def kept_line(unit: UnitRecord, i: int, edit: str) -> str:
        origin = origins.get(unit.index, []) if unit.kind == "step" else []
        source = f", from step {origin[i]}" if i < len(origin) and origin[i] != unit.index else ""
        later = replaced_by(unit.edits)[i]
        if later is not None:  # a description carried along the chain, then rewritten
            by = origin[later] if later < len(origin) else unit.index
            return f"  - {unit.kind} {unit.index}{source}: replaced by step {by}'s: ~~{one_line(edit, 100)}~~"
        return f"  - {unit.kind} {unit.index}{source}: {one_line(edit, 120)}"

    def kinds(units: list[UnitRecord]) -> str:
        total: Counter[str] = Counter()
        for unit in units:
            total += _kinds(history, unit)
        return ", ".join(f"{k} x{n}" for k, n in sorted(total.items())) or "none"

    decisions = Counter(u.decision for u in rejected)
    shown = rejected[:_LISTED]
    out = [
        f"- **Kept** {len(kept)} unit(s), edits: {kinds(kept)}",
        *[kept_line(u, i, edit) for u in kept for i, edit in enumerate(u.edits)],
        *(
            [
                f"- **Carried** {len(carried)} step(s) on ungated, each built on by the next and gated "
                f"later: {', '.join(str(u.index) for u in carried)}"
            ]
            if carried
            else []
        ),
        f"- **Rejected** {len(rejected)} unit(s) ({', '.join(f'{d} {n}' for d, n in sorted(decisions.items())) or 'none'}): "
        f"edits: {kinds(rejected)}",
        *[
            f"  - {u.kind} {u.index}: {one_line('; '.join(u.edits), 100)} ({one_line(u.reason, 80)})"
            for u in shown
        ],
    ]
    if len(rejected) > len(shown):
        out.append(f"  - ... {len(rejected) - len(shown)} more in results.tsv")
    empty = sum(1 for u in history.units if u.decision in ("empty", "skip"))
    if empty:
        out.append(
            f"- **No candidate** in {empty} unit(s) (nothing applicable proposed, or nothing kept that epoch)"
        )
    return out


def _proposals(history: History) -> list[str]:
    """What became of the proposals of the steps with several asks (a run of one ask a step: no line)."""
    found = []
    for unit in history.units:
        path = history.folder(unit_name(unit)) / "reflections.json"
        if unit.kind == "step" and path.is_file():
            found.append(counts(ReflectionsFile.read(path)))
    run = total(found)
    if run is None:
        return []
    others = run.others()
    return [
        f"- **Proposals** (each screened alone on train; kept: in its step's candidate): {run.sentence()}"
        + (f"; not kept: {others}" if others else "")
    ]


def _cost(history: History, comparison: Comparison | None) -> str:
    units = history.units
    rollouts = sum(u.rollouts for u in units) + len(_records(history.run.unit_dir("step", 0)))
    rollouts += sum(a.n_rollouts for a in comparison.arms.values()) if comparison else 0
    tokens = sum(u.tokens for u in units)
    usd = sum(u.cost_usd for u in units)
    return f"- **Cost**: {rollouts} rollout(s), {tokens} token(s) in the units, {usd:.2f} USD"


def entry_warnings(run: RunDir, ending: tuple[str, str] | None = None) -> list[str]:
    """The report's warnings for the run; with ``ending`` (the end of a training run, before
    TERMINAL) those about how it ended are ``ending``'s, not the live or interrupted state read."""
    summary = summarize(run.root, depth="rollouts")
    if ending is None:
        return summary.warnings
    # run_warnings puts the warnings about the state first
    read = len(ending_warnings(summary.state, summary.reason))
    return ending_warnings(*ending) + summary.warnings[read:]
