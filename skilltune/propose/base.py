"""The Proposer contract and its registry (entry-point group ``skilltune.proposers``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from skilltune.errors import UsageError
from skilltune.plugins import Registry
from skilltune.propose.model import EvidencePacket, Proposal, ProposerCall
from skilltune.suite import Suite

ROLES = ("analyst", "merger", "author", "red-team")


class ProposerOptions(BaseModel):
    """Options every proposer takes; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    roles: dict[str, str] = {}  # role -> model, e.g. {"author": "opus", "red-team": "sonnet"}

    def model_for(self, role: str) -> str | None:
        return self.roles.get(role) or self.model


class SlowUpdate(BaseModel):
    guidance: str
    calls: list[ProposerCall] = []


class Proposer(ABC):
    """``propose(packet) -> Proposal`` (edits in patch mode, whole files in rewrite mode)
    and ``slow_update(...) -> SlowUpdate`` (the epoch's longitudinal guidance).

    A proposer sees only what the packet holds: train trajectories, the skill, the
    rejected-edit buffer and the optimizer memory. Randomness comes from ``packet.seed``.
    """

    name: ClassVar[str]
    Options: ClassVar[type[ProposerOptions]] = ProposerOptions

    def __init__(self, suite: Suite, options: ProposerOptions) -> None:
        self.suite = suite
        self.options = options

    @abstractmethod
    def propose(self, packet: EvidencePacket) -> Proposal: ...

    @abstractmethod
    def slow_update(
        self, skill_text: str, comparison: str, kept: list[str], rejected: list[str], seed: int
    ) -> SlowUpdate: ...

    def allocation(self, mode: str) -> dict[str, Any]:
        """Which model plays each role and whether roles run as separate calls (allocation.md)."""
        roles = ("analyst",) if mode == "patch" else ("failure analyst", "author", "red-team reviewer")
        return {
            "proposer": self.name,
            "roles": {
                r: self.options.model_for(r.split()[0] if r != "red-team reviewer" else "red-team")
                or "default"
                for r in roles
            },
            "separate_calls": True,
        }


PROPOSERS: Registry[type[Proposer]] = Registry("skilltune.proposers", "proposer")


def make_proposer(name: str, suite: Suite, raw_options: dict[str, Any]) -> Proposer:
    cls = PROPOSERS.get(name)
    try:
        options = cls.Options.model_validate(raw_options)
    except ValidationError as exc:
        known = ", ".join(sorted(cls.Options.model_fields))
        details = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"proposer {name} options: {details} (known: {known})") from None
    return cls(suite, options)
