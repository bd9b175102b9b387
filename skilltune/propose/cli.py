"""Proposers that use an agent CLI as a plain model (``--proposer claude``, ``codex``...).

The CLI runs with no tools in an empty folder; its answer goes through the same
schema validation and single repair retry as any model proposer. A CLI failure
after its own retries (rate limit, network, auth) ends the run ``blocked``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from skilltune.agents import get_backend
from skilltune.agents.cli import CLIBackend
from skilltune.errors import UsageError
from skilltune.propose.base import ProposerOptions, role_of
from skilltune.propose.llm import Answer, ModelProposer, ProposerUnavailable
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

    def ask(self, role: str, prompt: str) -> Answer:
        assert isinstance(self.options, CLIProposerOptions)
        model = self.options.model_for(role_of(role))
        result = self.agent.complete(prompt, model, self.options.wall_limit_s)
        if result.status == "infra_error" or (result.status != "ok" and not result.final_text):
            raise ProposerUnavailable(
                f"the {self.agent.executable} CLI failed for the {role}: {result.reason}"
            )
        return Answer(
            text=result.final_text,
            model=result.model or model or self.agent.name,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
        )


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
