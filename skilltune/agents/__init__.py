"""Target-agent backends, found through the ``skilltune.agents`` entry points."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from skilltune.agents.base import (
    AgentBackend,
    AgentOptions,
    AgentRequest,
    AgentResult,
    AgentStatus,
    BackendCheck,
    Message,
    OptionsT,
    Placement,
)
from skilltune.errors import UsageError
from skilltune.plugins import Registry
from skilltune.validation import field_problems

AGENTS: Registry[type[AgentBackend]] = Registry("skilltune.agents", "agent")

__all__ = [
    "AGENTS",
    "AgentBackend",
    "AgentOptions",
    "AgentRequest",
    "AgentResult",
    "AgentStatus",
    "BackendCheck",
    "Message",
    "Placement",
    "get_backend",
    "parse_agent_options",
]


def get_backend(name: str) -> AgentBackend:
    return AGENTS.get(name)()


def parse_agent_options(backend: AgentBackend[OptionsT], raw: dict[str, Any]) -> OptionsT:
    """Validate ``--agent-opt`` values against the backend's typed options."""
    try:
        return backend.parse_options(raw)
    except ValidationError as exc:
        problems = field_problems(exc, model=backend.Options, owner=backend.name, noun="agent option")
        raise UsageError("\n".join(problems)) from None
