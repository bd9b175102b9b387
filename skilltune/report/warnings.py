"""The run's warnings: what a reader should know before trusting its verdicts, each derived
from the run's files (the same checks train prints while it runs, and what only hindsight shows)."""

from __future__ import annotations

from collections import Counter

from skilltune.report.model import RunSummary
from skilltune.report.rollouts import RunRollouts
from skilltune.stats.regime import SATURATED, TOO_HARD

GAP = 0.10  # a val -> test drop of the best skill larger than this is worth a word


def run_warnings(summary: RunSummary, rollouts: RunRollouts) -> list[str]:
    found: list[str] = []
    if summary.state in ("blocked", "crash"):
        found.append(f"the run ended {summary.state}: {summary.reason}")
    if summary.state == "interrupted":
        found.append(f"the run is unfinished: {summary.reason}")
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
    found += _held_out_warnings(summary)
    return found


def _held_out_warnings(summary: RunSummary) -> list[str]:
    held = summary.held_out
    if held is None:
        return []
    found = []
    if held.contaminated:
        found.append("the held-out comparison holds infra errors or crashed rollouts")
    pair = summary.gain
    if pair is not None and pair.verdict != "b_better":
        found.append(
            f"the best skill is not better than the seed on {held.split} ({pair.verdict}, "
            f"diff {pair.diff:+.3f}): the val gains did not hold out"
        )
    best = next((a for a in held.arms if a.name == "best"), None)
    if best is not None and best.val is not None and best.mean is not None and best.val - best.mean > GAP:
        found.append(
            f"the best skill scored {best.val:.3f} on val but {best.mean:.3f} on {held.split}: selecting on "
            "val overstates its gain (read the held-out figure)"
        )
    return found
