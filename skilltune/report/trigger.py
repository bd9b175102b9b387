"""Trigger decisions on the held-out split, one per query: what the report, ``status``, the
findings entry and the trigger table of ``train``, ``compare`` and ``run`` show for trigger tasks.

comparison.json's ``trigger`` counts one decision per rollout, so with 3 replicates a query is
three trials; an agent that decides the same way every time (the mock; a real agent at
temperature 0) then gets an interval as if it had answered three times as many queries. Here each
query counts once, by the decision most of its replicates made (a query whose replicates split
evenly counts as decided wrongly: the conservative side), and the Wilson intervals are over
queries. Decisions are read from the held-out test's records: the agent's load decision
(``skill_loaded``) and whether the trigger scorer found it right (its ``decision_right`` check),
which together give the query's ``should_trigger`` without the suite.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from skilltune.rollout.tally import unit_of
from skilltune.runfiles import RolloutRecord
from skilltune.score.trigger import Proportion

RIGHT, WRONG = "decision_right", "decision_wrong"


class QueryTrigger(BaseModel):
    """An arm's load decisions over queries (each counted once): the confusion counts, precision =
    tp / (tp + fp), recall = tp / (tp + fn), accuracy = (tp + tn) / queries, each with its Wilson 95%
    interval over queries; ``decisions`` the rollouts they come from, ``split`` the queries whose
    replicates split evenly."""

    queries: int
    decisions: int
    tp: int
    fp: int
    fn: int
    tn: int
    split: int = 0
    precision: Proportion
    recall: Proportion
    accuracy: Proportion

    def line(self) -> str:
        """``precision 1.000 [0.65, 1.00], recall 0.538 [...], accuracy ... on 27 queries``."""
        parts = [
            f"{name} {p.value:.3f}" + (f" [{p.ci95[0]:.3f}, {p.ci95[1]:.3f}]" if p.ci95 else "")
            for name, p in (
                ("precision", self.precision),
                ("recall", self.recall),
                ("accuracy", self.accuracy),
            )
            if p.value is not None
        ]
        return ", ".join(parts) + f" on {self.queries} queries"


def decisions(folder: Path, phase: str = "test") -> dict[str, dict[str, list[tuple[bool, bool]]]]:
    """candidate hash -> query -> (loaded, right) of each decided trigger rollout under ``folder``'s
    ``rollouts/<phase>/`` (the run's final/, or the folder of a ``skilltune compare``; phase
    ``eval`` for a compare on another split, or a ``skilltune run``)."""
    out: dict[str, dict[str, list[tuple[bool, bool]]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(folder.glob(f"rollouts/{phase}/*/*/record.json")):
        record = RolloutRecord.read(path)
        checks = set(record.score.checks) if record.score is not None else set()
        if record.skill_loaded is None or not checks & {RIGHT, WRONG}:
            continue  # not a trigger task, or no decision
        out[record.candidate][str(unit_of(record))].append((record.skill_loaded, RIGHT in checks))
    return out


def per_query(found: dict[str, list[tuple[bool, bool]]]) -> QueryTrigger | None:
    """One arm's statistics, each query counted once (None without a trigger query)."""
    if not found:
        return None
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    split = 0
    for seen in found.values():
        should = seen[0][0] == seen[0][1]  # right when loaded == should
        loaded = sum(1 for load, _ in seen if load)
        if 2 * loaded == len(seen):  # an even split: counted as the wrong decision
            split += 1
            majority = not should
        else:
            majority = 2 * loaded > len(seen)
        key = ("t" if majority == should else "f") + ("p" if majority else "n")
        counts[key] += 1
    tp, fp, fn, tn = counts["tp"], counts["fp"], counts["fn"], counts["tn"]
    queries = len(found)
    return QueryTrigger(
        queries=queries,
        decisions=sum(len(seen) for seen in found.values()),
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        split=split,
        precision=Proportion.of(tp, tp + fp),
        recall=Proportion.of(tp, tp + fn),
        accuracy=Proportion.of(tp + tn, queries),
    )
