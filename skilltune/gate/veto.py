"""The sequential gate's harm veto: which val units it looks at, and what it says of a crossing.

The rule itself (suspects, their noise, harm with confidence) is stats/harm.py; this module
applies it to a decision's rounds. Once the sign-flip test has crossed, the gate asks the veto
after every round: a harmed task rejects; a suspect neither harmed nor cleared holds the keep
back for another round while rounds remain; otherwise the candidate is kept. A decision's
``HarmScope`` is handed to the gate when it is built (``make_gate(name, metric, reps, scope)``,
``RunGate.for_decision(earlier, seed, scope)``): it says which units are trade-offs rather than
harms and which units the veto pools into one task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from skilltune.runfiles import HarmCheck, Pair
from skilltune.stats.harm import Scores, harm


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

    def rounds(self, by_unit: Mapping[str, Sequence[Pair]]) -> dict[str, list[Scores]]:
        """Per group, the (incumbent, candidate) scores of its units' rounds that the veto weighs."""
        out: dict[str, list[Scores]] = {}
        for unit, got in by_unit.items():
            if unit not in self.trade_offs:
                out.setdefault(self.groups.get(unit, unit), []).extend(
                    (q.incumbent, q.candidate)
                    for q in got
                    if q.candidate is not None and q.incumbent is not None
                )
        return out


@dataclass(frozen=True)
class HarmVeto:
    """The veto of one decision: its options (``tolerance``, a share of the incumbent's score,
    above 1 turns it off; ``floor``, the smallest fall that counts) and scope."""

    tolerance: float
    confidence: float
    floor: float
    looks: int  # the rounds a decision may run: the veto may look after each (its confidence spent over them)
    scope: HarmScope = field(default_factory=HarmScope)

    def check(self, by_unit: Mapping[str, Sequence[Pair]], done: int) -> tuple[HarmCheck | None, list[str]]:
        """What the veto sees in the ``done`` rounds so far (None: the veto is off), and the suspects
        neither harmed nor cleared that the rounds left could still confirm (a keep waits for them)."""
        if self.tolerance > 1.0:
            return None, []
        grow = self.looks / done
        seen = harm(self.scope.rounds(by_unit), self.tolerance, self.confidence, self.floor, self.looks, grow)
        check = HarmCheck(
            tolerance=self.tolerance,
            confidence=self.confidence,
            suspects={t: round(m, 6) for t, m in seen.suspects.items()},
            harmed={t: round(u, 6) for t, u in seen.harmed.items()},
            noise=None if seen.noise is None else round(seen.noise, 6),
            floor=self.floor,
        )
        return check, seen.open

    def fell(self) -> str:
        """How far a task must fall to be harmed, in words."""
        return f"more than {self.tolerance:.0%} of its score and more than {self.floor:g}"

    def blocks(self, check: HarmCheck | None) -> str | None:
        """Why the check blocks a keep (the harmed tasks, worst first), or None."""
        if check is None or not check.harmed:
            return None
        worst = sorted(check.harmed, key=lambda t: check.suspects[t])
        named = ", ".join(f"{t} {check.suspects[t]:+.2f}" for t in worst[:5])
        more = f" and {len(worst) - 5} more" if len(worst) > 5 else ""
        return f"{len(worst)} val task(s) fell by {self.fell()} with confidence: {named}{more}"

    def doubt(self, check: HarmCheck | None) -> str:
        """What a keep leaves open: tasks that fell beyond the tolerance without confidence."""
        if check is None or not check.suspects:
            return ""
        why = "within the replicate noise" if check.noise is not None else "noise unknown at one replicate"
        return f"; {len(check.suspects)} task(s) fell by {self.fell()}, {why}"
