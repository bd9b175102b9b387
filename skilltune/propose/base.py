"""The Proposer contract and its registry (entry-point group ``skilltune.proposers``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from skilltune.errors import UsageError
from skilltune.plugins import Registry
from skilltune.proposal import EvidencePacket, Proposal, ProposerCall
from skilltune.suite import Suite
from skilltune.validation import field_problems

# Configurable roles (merging - dedupe, support, rank - is done in code, by no model).
ROLES = ("analyst", "author", "red-team")
_CALL_ROLES = {"failure analyst": "analyst", "red-team reviewer": "red-team", "slow-update": "analyst"}


def role_of(call: str) -> str:
    """The configurable role behind a call name ("analyst (repair)" -> "analyst")."""
    base = call.split(" (", maxsplit=1)[0]
    return _CALL_ROLES.get(base, base)


def _never() -> bool:
    return False


class ProposerOptions(BaseModel):
    """Options every proposer takes; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    roles: dict[str, str] = {}  # role -> model, e.g. {"author": "opus", "red-team": "sonnet"}

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, roles: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown role(s) {', '.join(unknown)}; roles are {', '.join(ROLES)}")
        return roles

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
        # Turns true when the run is asked to stop (a first Ctrl-C, SIGTERM, a STOP file): a proposer
        # whose call can be cancelled ends it then (the training session sets this).
        self.stop_requested: Callable[[], bool] = _never

    @abstractmethod
    def propose(self, packet: EvidencePacket) -> Proposal: ...

    @abstractmethod
    def slow_update(
        self, skill_text: str, comparison: str, kept: list[str], rejected: list[str], seed: int
    ) -> SlowUpdate: ...

    def allocation(self, mode: str) -> dict[str, Any]:
        """Which model plays each role and whether roles run as separate calls (allocation.md)."""
        calls = ("analyst",) if mode == "patch" else ("failure analyst", "author", "red-team reviewer")
        return {
            "proposer": self.name,
            "roles": {call: self.options.model_for(role_of(call)) or "default" for call in calls},
        }


PROPOSERS: Registry[type[Proposer]] = Registry("skilltune.proposers", "proposer")


def make_proposer(name: str, suite: Suite, raw_options: dict[str, Any]) -> Proposer:
    cls = PROPOSERS.get(name)
    try:
        options = cls.Options.model_validate(raw_options)
    except ValidationError as exc:
        raise UsageError(
            "; ".join(field_problems(exc, model=cls.Options, noun=f"proposer {name} option"))
        ) from None
    return cls(suite, options)
