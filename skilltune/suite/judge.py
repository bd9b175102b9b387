"""The judge's settings: scoring.md's ``judge`` block, overrides from ``--judge-opt``, and its key.

The block's keys and defaults are skill-trainer's (``model`` MiniMax-M3 at MiniMax's
OpenAI-compatible endpoint, ``samples`` 1, ``temperature`` 0, ``timeout`` 240 s,
``max_tokens`` 8000, ``max_attempts`` 3, ``pass_threshold`` 0.7, ``criteria_weights``),
plus two of skilltune's: ``provider`` (``openai`` for any OpenAI-compatible endpoint,
``anthropic``, or an agent CLI used as a plain model: ``claude``, ``codex``...) and
``api_key_env`` (the variable holding the key). The key is read from that variable, else
from a ``.env`` file (the working folder or the suite's, or one of their parents); it is
never written anywhere. A local endpoint (127.0.0.1, localhost) needs no key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt, model_validator

DEFAULT_BASE_URL = "https://api.minimax.io/v1"
DEFAULT_MODEL = "MiniMax-M3"
# skill-trainer reads MINIMAX_API_KEY, and MINIMAX-API-KEY in a .env file.
MINIMAX_KEY_NAMES = ("MINIMAX_API_KEY", "MINIMAX-API-KEY")
API_PROVIDERS = ("openai", "anthropic")
CLI_PROVIDERS = ("claude", "codex", "copilot", "gemini", "opencode", "qwen", "cursor")
# Settings that never change a verdict: left out of the contract and of the verdict cache key.
NOT_IN_CONTRACT = frozenset(
    {
        "api_key_env",
        "timeout",
        "max_attempts",
        "max_retries",
        "token_param",
        "max_concurrent",
        "requests_per_minute",
    }
)
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


class JudgeSettings(BaseModel):
    """The judge block of scoring.md (skill-trainer's keys, plus ``provider`` and ``api_key_env``).

    Unknown keys are refused here; ``validate`` reports them (as skill-trainer ignores
    them, a warning) before this model sees the block.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(
        default="openai",
        description="openai (any OpenAI-compatible endpoint), anthropic, or an agent CLI: "
        + ", ".join(CLI_PROVIDERS),
    )
    model: str | None = Field(default=None, description="the judge model's name")
    base_url: str | None = Field(default=None, description="the endpoint's URL")
    api_key_env: str | None = Field(default=None, description="the variable holding the key")
    samples: PositiveInt = Field(default=1, description="a positive integer: verdicts per rollout")
    temperature: NonNegativeFloat = Field(default=0.0, description="a number >= 0")
    timeout: float = Field(default=240.0, gt=0, description="seconds per call, > 0")
    max_tokens: PositiveInt = Field(default=8000, description="a positive integer: tokens per answer")
    max_attempts: PositiveInt = Field(default=3, description="a positive integer: tries per verdict")
    criteria_weights: dict[str, NonNegativeFloat] | None = Field(
        default=None, description="an object {criterion: weight >= 0}, weights summing above 0"
    )
    pass_threshold: float = Field(
        default=0.7, ge=0.0, le=1.0, description="a number in [0, 1]: soft needed by a verdict without passed"
    )
    # How each call is bounded (skilltune.modelcalls): never part of the contract.
    max_retries: int = Field(default=4, ge=0, description="retries of 429, 5xx, resets and timeouts per call")
    token_param: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        default="auto", description="the request field carrying max_tokens: auto (by host, learnt), or forced"
    )
    max_concurrent: PositiveInt | None = Field(default=None, description="judge calls in flight at once")
    requests_per_minute: PositiveInt | None = Field(default=None, description="judge calls per minute")

    @model_validator(mode="after")
    def _coherent(self) -> JudgeSettings:
        if self.provider not in API_PROVIDERS + CLI_PROVIDERS:
            raise ValueError(
                f"judge provider {self.provider!r} is unknown: use openai, anthropic or an agent CLI "
                f"({', '.join(CLI_PROVIDERS)})"
            )
        if self.provider == "anthropic" and not self.model:
            raise ValueError(
                "judge provider anthropic needs a model: set judge.model or --judge-opt model=..."
            )
        if self.provider in CLI_PROVIDERS and self.base_url:
            raise ValueError(
                f"judge provider {self.provider} is an agent CLI: it has no base_url (configure the CLI itself)"
            )
        if self.criteria_weights is not None and not sum(self.criteria_weights.values()) > 0:
            raise ValueError("judge criteria_weights must hold at least one weight above 0")
        return self

    @property
    def is_cli(self) -> bool:
        return self.provider in CLI_PROVIDERS

    @property
    def effective_model(self) -> str | None:
        """The model asked for: skill-trainer's default for its default endpoint; None lets a CLI choose."""
        if self.model:
            return self.model
        return DEFAULT_MODEL if self.provider == "openai" else None

    @property
    def effective_base_url(self) -> str | None:
        if self.provider == "openai":
            return self.base_url or DEFAULT_BASE_URL
        return self.base_url

    @property
    def key_names(self) -> tuple[str, ...]:
        """The variables (and .env keys) the key is read from, in order; empty for an agent CLI."""
        if self.is_cli:
            return ()
        if self.api_key_env:
            return (self.api_key_env,)
        if self.provider == "anthropic":
            return ("ANTHROPIC_API_KEY",)
        if self.effective_base_url == DEFAULT_BASE_URL:
            return MINIMAX_KEY_NAMES
        return ("OPENAI_API_KEY",)

    @property
    def local(self) -> bool:
        """A server on this machine, which needs no key."""
        url = self.effective_base_url
        return bool(url) and (urlparse(url).hostname or "") in _LOCAL_HOSTS

    def identity(self) -> dict[str, Any]:
        """What decides the verdicts (the contract's share and the verdict cache's key)."""
        return {
            "provider": self.provider,
            "model": self.effective_model,
            "base_url": self.effective_base_url,
            "samples": self.samples,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }


def judge_settings(block: dict[str, Any] | None, overrides: dict[str, Any] | None = None) -> JudgeSettings:
    """The suite's judge block with ``--judge-opt`` overrides applied (pydantic's ValidationError if bad).

    Keys of the block this model does not know are left out (``validate`` warned about them, and
    skill-trainer ignores them); an unknown override is refused."""
    return JudgeSettings.model_validate(judge_block(block, overrides))


def judge_block(block: dict[str, Any] | None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The judge block's known keys with ``--judge-opt`` overrides applied, not yet validated: what
    ``JudgeSettings`` reads (and a scorer's ``ScoringContext.judge``)."""
    known = {k: v for k, v in (block or {}).items() if k in JudgeSettings.model_fields}
    return {**known, **(overrides or {})}


def contract_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides that belong in the scoring contract (those that can change a verdict)."""
    return {k: v for k, v in sorted(overrides.items()) if k not in NOT_IN_CONTRACT}


KeySource = Literal["environment", "dotenv", "none"]


def _dotenv_files(folders: list[Path]) -> list[Path]:
    seen: list[Path] = []
    for folder in folders:
        for parent in (folder, *folder.parents):
            candidate = parent / ".env"
            if candidate.is_file() and candidate not in seen:
                seen.append(candidate)
    return seen


def _dotenv_value(path: Path, names: tuple[str, ...]) -> str | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for raw in lines:
        line = raw.strip().removeprefix("export ").strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.strip() in names:
            return value.strip().strip("'\"") or None
    return None


def find_key(settings: JudgeSettings, suite_root: Path | None = None) -> tuple[str | None, KeySource, str]:
    """(key, where it came from, a description naming the variable or file) for the judge's endpoint.

    The environment first, then ``.env`` in the working folder, the suite's folder, or a parent.
    """
    names = settings.key_names
    for name in names:
        if os.environ.get(name):
            return os.environ[name], "environment", f"${name}"
    folders = [Path.cwd()] + ([suite_root.resolve()] if suite_root is not None else [])
    for path in _dotenv_files(folders):
        value = _dotenv_value(path, names)
        if value:
            return value, "dotenv", f"{names[0]} in {path}"
    return None, "none", f"${names[0]}" if names else "(no key: an agent CLI)"
