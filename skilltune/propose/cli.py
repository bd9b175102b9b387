"""Proposers that use an agent CLI as a plain model (``--proposer claude``, ``codex``...).

The CLI runs with no tools in an empty folder (skilltune.agents.plain.CLIPlainModel); its answer
goes through the same reading and single repair round as any model proposer's. A CLI failure
after its retries (rate limit, network, auth) ends the run ``blocked``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from skilltune.agents import get_backend
from skilltune.agents.cli import CLIBackend
from skilltune.agents.plain import CLIPlainModel
from skilltune.errors import UsageError
from skilltune.propose.base import ProposerOptions
from skilltune.propose.llm import ModelProposer
from skilltune.suite import Suite


class CLIProposerOptions(ProposerOptions):
    wall_limit_s: float = 900.0


class CLIProposer(ModelProposer):
    """Subclasses set ``backend`` (an agent name) and ``name``."""

    backend: ClassVar[str]
    Options = CLIProposerOptions

    def __init__(self, suite: Suite, options: ProposerOptions) -> None:
        super().__init__(suite, options)
        agent = get_backend(self.backend)
        if not isinstance(agent, CLIBackend):
            raise UsageError(f"the {self.backend} backend is not an agent CLI")
        status = agent.check()
        if not status.installed:
            raise UsageError(f"--proposer {self.name} needs the {agent.executable} CLI: {status.fix}")
        self.agent = agent
        assert isinstance(self.options, CLIProposerOptions)
        self.model = CLIPlainModel(agent, self.options.wall_limit_s)


def make_cli_proposer(agent: str) -> type[CLIProposer]:
    """A proposer class for one agent CLI (what the entry points name)."""
    attrs: dict[str, Any] = {"backend": agent, "name": agent, "__doc__": f"The {agent} CLI as a plain model."}
    return type(f"{agent.capitalize()}Proposer", (CLIProposer,), attrs)


ClaudeProposer = make_cli_proposer("claude")
CodexProposer = make_cli_proposer("codex")
CopilotProposer = make_cli_proposer("copilot")
GeminiProposer = make_cli_proposer("gemini")
OpencodeProposer = make_cli_proposer("opencode")
QwenProposer = make_cli_proposer("qwen")
CursorProposer = make_cli_proposer("cursor")
