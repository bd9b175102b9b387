"""The run's warnings: what a reader should know before trusting its verdicts, each derived
from the run's files (the same checks train prints while it runs, and what only hindsight shows).
The one source of warnings: the report, ``view``, ``status`` and the findings bank all show these."""

from __future__ import annotations

import os
import shlex
import statistics
from collections import Counter
from pathlib import Path

from skilltune.report.model import RunSummary
from skilltune.report.rollouts import RolloutTally, record_paths
from skilltune.rundir import RunDir
from skilltune.stats.regime import FLAKY_SD, SATURATED, TOO_HARD

GAP = 0.10  # a val -> test drop of the best skill larger than this is worth a word
JUDGE_FILE = "judge.json"  # the judge scorer's file in a judged rollout's record folder


def ending_warnings(state: str, reason: str) -> list[str]:
    """The warnings about how the run ended; ``run_warnings`` puts them first."""
    if state in ("blocked", "crash"):
        return [f"the run ended {state}: {reason}"]
    if state == "interrupted":
        return [f"the run is unfinished: {reason}"]
    return []


def harm_warnings(summary: RunSummary) -> list[str]:
    """One warning per agent the best skill hurts on the held-out test (``RunSummary.hurt``)."""
    return [
        f"{harm.line()}: the pooled held-out figure hides it; `skilltune promote` refuses the skill "
        "unless given --accept-harm"
        for harm in summary.hurt
    ]


def run_warnings(summary: RunSummary, rollouts: RolloutTally) -> list[str]:
    found = ending_warnings(summary.state, summary.reason) + harm_warnings(summary)
    seed = summary.seed_val
    if seed is not None and not TOO_HARD <= seed <= SATURATED:
        regime = f"saturated (above {SATURATED})" if seed > SATURATED else f"too hard (below {TOO_HARD})"
        found.append(
            f"the seed's val {summary.metric} is {seed:.3f}, {regime}: a gate on it can hardly tell skills "
            "apart (see skilltune calibrate)"
        )
    failures = Counter(f.status for f in rollouts.failures)
    for status, count in sorted(failures.items()):
        units = sorted({f.unit for f in rollouts.failures if f.status == status})
        shown = ", ".join(units[:5]) + (" ..." if len(units) > 5 else "")
        what = (
            "never scored, never a task failure"
            if status != "scoring_error"
            else "the scorer could not score"
        )
        found.append(f"{count} rollout(s) ended {status} ({what}) in {shown}")
    ceiling = [u.name for u in summary.units if u.val_candidate == 1.0 and u.val_incumbent == 1.0]
    if ceiling:
        found.append(
            f"saturated gate in {len(ceiling)} unit(s) ({', '.join(ceiling[:5])}): both skills scored 1.0 "
            "on val, so the gate could not see a difference"
        )
    decided = [u for u in summary.units if u.val_incumbent is not None]
    high = [u for u in decided if u.val_incumbent is not None and u.val_incumbent > SATURATED]
    if high:
        found.append(
            f"saturated gate: {len(high)} of {len(decided)} decision(s) had an incumbent above {SATURATED} "
            "on val (little room to show a gain)"
        )
    capped = [u.name for u in summary.units if "at the cap" in u.reason]
    if capped:
        found.append(
            f"{len(capped)} gate decision(s) reached the replicate cap undecided: {', '.join(capped[:5])}"
        )
    flaky = rollouts.flaky_tasks()
    if flaky:
        found.append(
            f"{len(flaky)} flaky val task(s): replicates of one skill disagreed within a gate "
            f"({', '.join(sorted(flaky)[:5])}{' ...' if len(flaky) > 5 else ''})"
        )
    if rollouts.total.usd_estimated:
        found.append("some costs are estimated from a price table (the agent did not report them)")
    found += _held_out_warnings(summary, rollouts)
    judged = judged_tasks(RunDir(Path(summary.root)))
    if judged:
        found.append(
            f"judge noise: {len(judged)} task(s) were scored by a model judge; their replicate spread mixes "
            "the judge's noise with the agent's"
        )
    if summary.audit:
        counts = Counter(f.check for f in summary.audit)
        found.append(
            "contamination/audit: "
            + ", ".join(f"{check} x{n}" for check, n in sorted(counts.items()))
            + f" (audit.json; `skilltune audit {shlex.quote(summary.root)}` lists them)"
        )
    return found


def judged_tasks(run: RunDir) -> set[str]:
    """Tasks with a rollout a model judge scored (its record folder, ``ID_rK``, holds judge.json)."""
    root = str(run.root)
    return {
        folder.rsplit("/", 1)[-1].rsplit("_r", 1)[0]
        for _, folder in record_paths(run)
        if os.path.isfile(os.path.join(root, folder, JUDGE_FILE))  # noqa: PTH113, PTH118 (strings: see record_paths)
    }


def _flaky_test_tasks(rollouts: RolloutTally) -> tuple[list[str], int]:
    """Held-out tasks whose replicates of one skill spread by FLAKY_SD or more, and the tasks tested."""
    tested = {key[3] for key in rollouts.scores if key[:2] == ("final", "test")}
    flaky = {
        key[3]
        for key, values in rollouts.scores.items()
        if key[:2] == ("final", "test") and len(values) > 1 and statistics.stdev(values) >= FLAKY_SD
    }
    return sorted(flaky), len(tested)


def _held_out_warnings(summary: RunSummary, rollouts: RolloutTally) -> list[str]:
    held = summary.held_out
    if held is None:
        return []
    found = []
    flaky, tested = _flaky_test_tasks(rollouts)
    if flaky:
        found.append(
            f"flaky test tasks: {len(flaky)} of {tested} test task(s) had replicates of one skill disagree "
            f"(sd >= {FLAKY_SD}): {', '.join(flaky[:8])}" + (" ..." if len(flaky) > 8 else "")
        )
    if held.contaminated:
        found.append("the held-out comparison holds infra errors or crashed rollouts")
    pair = summary.gain
    if pair is not None and pair.verdict != "b_better":
        found.append(
            f"the best skill is not better than the seed on {held.split} ({pair.verdict}, "
            f"diff {pair.diff:+.3f}): the val gains did not hold out"
            + (
                "; `skilltune promote` refuses it unless given --accept-harm"
                if pair.verdict == "a_better"
                else ""
            )
        )
    best = next((a for a in held.arms if a.name == "best"), None)
    if best is not None and best.val is not None and best.mean is not None and best.val - best.mean > GAP:
        found.append(
            f"the best skill scored {best.val:.3f} on val but {best.mean:.3f} on {held.split}: selecting on "
            "val overstates its gain (read the held-out figure)"
        )
    return found
