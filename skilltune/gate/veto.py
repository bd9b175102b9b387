"""The sequential gate's harm veto: which val units it looks at, and what it says of a crossing.

The rule itself (suspects, their noise, harm with confidence) is stats/harm.py; this module
applies it to a decision's rounds. A decision's ``HarmScope`` is handed to the gate when it is
built (``make_gate(..., scope=...)``, ``RunGate.for_decision(..., scope)``): it says which units
are trade-offs rather than harms and which units the veto pools into one task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from skilltune.runfiles import HarmCheck, Pair
from skilltune.stats.harm import harm


@dataclass(frozen=True)
class HarmScope:
    """The decision's val units as the harm veto sees them.

    ``trade_offs``: units whose drop is a trade-off rather than a harm: trigger tasks, each one
    query on the boundary between loading and not loading, where a rewrite that wins many queries
    may lose a few (the test of the mean weighs them); the veto passes over them.
    ``groups``: units the veto pools before it looks (unit -> group): with several agents under
    ``--agents-gate mean`` each task's units across the agents, so one agent's loss is weighed
    against the others' gains on the same task, while a task that fell on every agent is vetoed.
    """

    trade_offs: frozenset[str] = frozenset()
    groups: Mapping[str, str] = field(default_factory=dict)

    def differences(self, by_unit: Mapping[str, Sequence[Pair]]) -> dict[str, list[float]]:
        """Per group, the per-round differences (candidate minus incumbent) the veto weighs."""
        diffs: dict[str, list[float]] = {}
        for unit, got in by_unit.items():
            if unit not in self.trade_offs:
                diffs.setdefault(self.groups.get(unit, unit), []).extend(
                    q.candidate - q.incumbent
                    for q in got
                    if q.candidate is not None and q.incumbent is not None
                )
        return diffs


@dataclass(frozen=True)
class HarmVeto:
    """The veto of one decision: its options (``tolerance`` above 1 turns it off) and scope."""

    tolerance: float
    confidence: float
    scope: HarmScope = field(default_factory=HarmScope)

    def check(self, by_unit: Mapping[str, Sequence[Pair]]) -> HarmCheck | None:
        """What the veto sees in the rounds so far (None: the veto is off)."""
        if self.tolerance > 1.0:
            return None
        seen = harm(self.scope.differences(by_unit), self.tolerance, self.confidence)
        return HarmCheck(
            tolerance=self.tolerance,
            confidence=self.confidence,
            suspects={t: round(m, 6) for t, m in seen.suspects.items()},
            harmed={t: round(u, 6) for t, u in seen.harmed.items()},
            noise=None if seen.noise is None else round(seen.noise, 6),
        )

    def blocks(self, check: HarmCheck | None) -> str | None:
        """Why the check blocks a keep (the harmed tasks, worst first), or None."""
        if check is None or not check.harmed:
            return None
        worst = sorted(check.harmed, key=lambda t: check.suspects[t])
        named = ", ".join(f"{t} {check.suspects[t]:+.2f}" for t in worst[:5])
        more = f" and {len(worst) - 5} more" if len(worst) > 5 else ""
        return f"{len(worst)} val task(s) fell by more than {self.tolerance:g} with confidence: {named}{more}"

    @staticmethod
    def waits(check: HarmCheck | None) -> bool:
        """Whether a task fell beyond the tolerance before any noise estimate exists (one round)."""
        return check is not None and check.noise is None and bool(check.suspects)

    @staticmethod
    def doubt(check: HarmCheck | None) -> str:
        """What a keep leaves open: tasks that fell beyond the tolerance without confidence."""
        if check is None or not check.suspects:
            return ""
        why = "within the replicate noise" if check.noise is not None else "noise unknown at one replicate"
        return f"; {len(check.suspects)} task(s) fell by more than {check.tolerance:g}, {why}"
