"""What a training run's proposer did, read from its step folders: edits proposed, dropped (and why), applied, kept.

Used by benchmarks/local_model.py to show how a real analyst's answers fared on their way to
the gate: reflections.json holds the answer's edits and the edits dropped for citing no
trajectory; merged_patch.json the edits applied to the candidate (which lint, the screen and the gate then settle) and those the merge or the
growth cap dropped; step.json the gate's verdict. A step with several asks (``--proposals``) lists
each proposal in reflections.json: what was asked, its edits, its screen (fixed / broken train
tasks) and its fate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skilltune.runfiles import ReflectionsFile, UnitRecord

SAMPLE_CHARS = 600  # of each answer: enough to see its shape, short enough to print


def step_summary(folder: Path) -> dict[str, Any]:
    """One step's proposer record: calls, answers (cut), edits proposed, dropped with reasons, applied."""
    out: dict[str, Any] = {"step": folder.name, "calls": [], "proposed": 0, "dropped": [], "applied": 0}
    reflections = folder / "reflections.json"
    if reflections.is_file():
        answer = ReflectionsFile.read(reflections)
        out["calls"] = [
            {
                "role": call.role,
                "seconds": round(call.seconds, 1),
                "tokens_in": call.tokens_in,
                "tokens_out": call.tokens_out,
                "notes": call.notes,
                "answer": call.response[:SAMPLE_CHARS],
            }
            for call in answer.calls
        ]
        out["proposed"] = len(answer.edits) + len(answer.dropped)
        out["dropped"] = [{"edit": d.edit.compact(), "reason": d.reason} for d in answer.dropped]
    if reflections.is_file() and (several := ReflectionsFile.read(reflections)).proposals:
        out["proposals"] = [
            {
                "ask": p.index,
                "kind": p.kind,
                "label": p.label,
                "attempts": p.attempts,
                "edits": [e.text[:160] for e in p.edits],
                "status": p.status,
                "reason": p.reason,
                "fixed": len(p.screen.fixed) if p.screen else None,
                "broke": len(p.screen.broke) if p.screen else None,
            }
            for p in several.proposals
        ]
        out["proposed"] = sum(len(p.edits) for p in several.proposals) + len(several.dropped)
        out["screened"] = sum(p.screen is not None for p in several.proposals)
        out["applied"] = len(several.edits)
    merged = folder / "merged_patch.json"
    if merged.is_file():
        patch = json.loads(merged.read_text())
        out["dropped"] += [{"edit": d["edit"], "reason": d["reason"]} for d in patch.get("dropped", [])]
        out["applied"] = len(patch.get("kept", []))
    elif (folder / "candidate_skill.md").is_file():  # rewrite mode: the whole document is the edit
        out["applied"] = 1
    record = folder / "step.json"
    if record.is_file():
        unit = UnitRecord.read(record)
        out["verdict"] = unit.verdict
        out["reason"] = unit.reason
    out["kept"] = out["applied"] if out.get("verdict") == "keep" else 0
    # The rest were merged into an equal edit of the same answer (their support pooled).
    out["merged"] = max(0, out["proposed"] - len(out["dropped"]) - out["applied"])
    return out


def run_summary(run_dir: Path) -> dict[str, Any]:
    """Every step's record and the run's totals (edits proposed, dropped, applied to a candidate, kept; analyst calls and seconds)."""
    steps = [step_summary(p.parent) for p in sorted((run_dir / "steps").glob("*/step.json"))]
    calls = [c for s in steps for c in s["calls"]]
    return {
        "steps": steps,
        "proposals": sum(len(s.get("proposals", [])) for s in steps),
        "screened": sum(s.get("screened", 0) for s in steps),
        "proposed": sum(s["proposed"] for s in steps),
        "dropped": sum(len(s["dropped"]) for s in steps),
        "applied": sum(s["applied"] for s in steps),
        "merged": sum(s["merged"] for s in steps),
        "kept": sum(s["kept"] for s in steps),
        "analyst_calls": len(calls),
        "analyst_seconds": round(sum(c["seconds"] for c in calls), 1),
    }


def print_summary(label: str, summary: dict[str, Any]) -> None:
    print(
        f"{label}: {summary['proposals']} proposal(s), {summary['screened']} screened; "
        f"edits proposed {summary['proposed']}, dropped {summary['dropped']}, "
        f"merged into equal ones {summary['merged']}, "
        f"in candidates {summary['applied']}, kept {summary['kept']}; "
        f"{summary['analyst_calls']} analyst call(s), {summary['analyst_seconds']:g} s"
    )
    for step in summary["steps"]:
        print(
            f"  {step['step']}: {step['proposed']} proposed, {step['applied']} in the candidate, "
            f"{step.get('verdict', '-')}"
        )
        for p in step.get("proposals", []):
            screen = f"fixed {p['fixed']}, broke {p['broke']}" if p["fixed"] is not None else "not screened"
            print(
                f"    ask {p['ask']} ({p['kind']}: {p['label'][:50]}; {p['attempts']} attempt(s)): {screen}; "
                f"{p['status']}{' (' + p['reason'][:60] + ')' if p['reason'] else ''}: {p['edits'][:2]!r}"[
                    :300
                ]
            )
        for drop in step["dropped"][:6]:
            print(f"    dropped: {drop['reason'][:100]}  <- {drop['edit'][:80]!r}")
        for call in step["calls"][:3]:
            answer = " ".join(call["answer"].split())
            print(
                f"    {call['role']} call ({call['seconds']:g} s, {call['tokens_in'] or '-'} in / "
                f"{call['tokens_out'] or '-'} out): "
                f"{answer[:300]!r}"
            )
