"""Who the judge asks: an API endpoint through the bounded model-call module, or an agent CLI
used as a plain model (as ``--proposer claude`` does), so a Claude Code or Codex subscription
is enough to judge.

A ``JudgeModel`` answers ``ask(system, user)`` with the reply's tool-call arguments (when the
endpoint made the call) and its text; it raises ``ScorerUnavailable`` when the endpoint still
fails after its retries, and ``check`` raises UsageError when it cannot be asked at all.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from skilltune.errors import ScorerUnavailable, UsageError
from skilltune.suite.judge import JudgeSettings

CLI_ATTEMPTS = 3  # an agent CLI's infra error (rate limit, network) is retried, then the judge is down
CLI_BACKOFF_S = 2.0


@dataclass(frozen=True)
class JudgeReply:
    content: str
    tool_args: dict[str, Any] | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None


class JudgeModel(ABC):
    """One judge endpoint; ``name`` identifies it in judge.json and record.json."""

    name: str

    @abstractmethod
    def check(self) -> None:
        """Raise UsageError (what to install or set) when the judge cannot be asked."""

    @abstractmethod
    def ask(self, system: str, user: str) -> JudgeReply: ...


class CLIJudgeModel(JudgeModel):
    """An agent CLI as a plain model: no tools, an empty folder, the verdict read from its text."""

    def __init__(self, settings: JudgeSettings) -> None:
        from skilltune.agents import get_backend
        from skilltune.agents.cli import CLIBackend

        backend = get_backend(settings.provider)
        if not isinstance(backend, CLIBackend):
            raise UsageError(f"judge provider {settings.provider} is not an agent CLI")
        self.backend = backend
        self.settings = settings
        self.name = f"{settings.provider}:{settings.model or 'default'}"

    def check(self) -> None:
        status = self.backend.check()
        if not status.installed:
            raise UsageError(
                f"judge provider {self.settings.provider} needs the {self.backend.executable} CLI: {status.fix}"
            )

    def ask(self, system: str, user: str) -> JudgeReply:
        from skilltune.process import interruptible_sleep

        jitter = random.Random(f"{system[:64]}|{len(user)}")
        reason = ""
        for attempt in range(CLI_ATTEMPTS):
            result = self.backend.complete(f"{system}\n\n{user}", self.settings.model, self.settings.timeout)
            if result.status != "infra_error" and (result.status == "ok" or result.final_text):
                return JudgeReply(
                    content=result.final_text,
                    model=result.model or self.name,
                    tokens_in=result.tokens_in,
                    tokens_out=result.tokens_out,
                    cost_usd=result.cost_usd,
                )
            reason = result.reason or result.status
            if attempt + 1 < CLI_ATTEMPTS:
                interruptible_sleep(CLI_BACKOFF_S * 2**attempt * (0.5 + jitter.random() / 2))
        raise ScorerUnavailable(
            f"the judge ({self.backend.executable} CLI) failed {CLI_ATTEMPTS} times: {reason}; "
            "`skilltune resume` judges the kept rollouts once it answers again"
        )


def client_status(settings: JudgeSettings) -> tuple[str, bool]:
    """(what asks the judge, or what to install, and whether it is there)."""
    if settings.is_cli:
        from skilltune.agents import get_backend

        status = get_backend(settings.provider).check()
        if status.installed:
            return f"the {settings.provider} CLI {status.version or ''}".rstrip(), True
        return f"the {settings.provider} CLI is missing: {status.fix}", False
    import importlib.util

    if importlib.util.find_spec("httpx2") is None:
        return "httpx2 (the model-call layer's HTTP client) is missing: pip install 'skilltune[api]'", False
    return f"skilltune.modelcalls ({settings.provider} wire format)", True
