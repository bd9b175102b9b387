"""Who the judge asks: a plain model (skilltune.modelcalls.plain), an API endpoint or an agent CLI.

An endpoint (any OpenAI-compatible one, or Anthropic) is asked through the bounded model-call
module (the token limit in the field the endpoint reads, a wall clock, retries of 429, 5xx,
resets and timeouts), for the verdict as structured output (a forced tool call whose schema is
``RecordVerdict``; text from an endpoint that refuses tools). An agent CLI is used as a plain
model, as ``--proposer claude`` does, so a Claude Code or Codex subscription is enough to judge.

``make_judge_model`` builds it; ``check_judge`` raises UsageError when it cannot be asked at all
(what to install or set). Retries of the transport are the plain model's, the repair of a reply
that is not a verdict is ``ask_structured``'s: the proposers ask the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from skilltune.errors import UsageError
from skilltune.modelcalls import CallSettings, ModelClient, resolve_endpoint
from skilltune.modelcalls.plain import APIPlainModel, PlainModel
from skilltune.suite.judge import JudgeSettings, find_key

if TYPE_CHECKING:
    from skilltune.agents.cli import CLIBackend


def make_judge_model(settings: JudgeSettings, suite_root: Path) -> PlainModel:
    """The judge the settings name: an agent CLI, or an API endpoint through the model-call module;
    its ``name`` identifies the judge in judge.json and record.json."""
    if settings.is_cli:
        from skilltune.agents.plain import CLIPlainModel

        backend = _cli_backend(settings)
        return CLIPlainModel(
            backend, settings.timeout, name=f"{settings.provider}:{settings.model or 'default'}"
        )
    return api_judge_model(settings, suite_root)


def judge_request_model(settings: JudgeSettings) -> str:
    """The model a judge's request names ("": a CLI's default)."""
    return str(settings.effective_model or "") if not settings.is_cli else settings.model or ""


def check_judge(settings: JudgeSettings, suite_root: Path) -> None:
    """Raise UsageError (what to install or set) when the judge cannot be asked."""
    if settings.is_cli:
        backend = _cli_backend(settings)
        status = backend.check()
        if not status.installed:
            raise UsageError(
                f"judge provider {settings.provider} needs the {backend.executable} CLI: {status.fix}"
            )
        return
    check_api_judge(settings, suite_root)


def _cli_backend(settings: JudgeSettings) -> CLIBackend:
    from skilltune.agents import get_backend
    from skilltune.agents.cli import CLIBackend

    backend = get_backend(settings.provider)
    if not isinstance(backend, CLIBackend):
        raise UsageError(f"judge provider {settings.provider} is not an agent CLI")
    return backend


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


_WHERE = "--judge-opt"


def check_api_judge(settings: JudgeSettings, suite_root: Path) -> None:
    client, ok = client_status(settings)
    if not ok:
        raise UsageError(f"the judge cannot be asked: {client}")
    key, _, where = find_key(settings, suite_root)
    if key is None and not settings.local:
        raise UsageError(
            f"the judge at {settings.effective_base_url} needs a key: set {where} or put it in a "
            f".env file (or name the variable with {_WHERE} api_key_env=VAR)"
        )
    api_judge_model(settings, suite_root)  # the endpoint resolves now, not in the middle of a batch


def api_judge_model(settings: JudgeSettings, suite_root: Path) -> APIPlainModel:
    key, source, _ = find_key(settings, suite_root)
    names = settings.key_names
    if key is not None and source == "dotenv":
        # the module reads keys from the environment when it sends a request: this process only
        os.environ.setdefault(names[0].replace("-", "_"), key)
    # A server on this machine needs no key: the variable is named only when a key was found (or
    # the endpoint is remote, where the layer says which variable to set).
    key_env = names[0].replace("-", "_") if key is not None or not settings.local else None
    endpoint = resolve_endpoint(
        settings.provider,  # type: ignore[arg-type]
        settings.effective_base_url,
        key_env,
        where=_WHERE,
    )
    calls = CallSettings(
        token_param=settings.token_param,
        timeout_s=settings.timeout,
        wall_limit_s=settings.timeout * (1 + min(settings.max_retries, 2)) + 30,
        max_retries=settings.max_retries,
        max_concurrent=settings.max_concurrent,
        requests_per_minute=settings.requests_per_minute,
    )
    # The judge has one time setting, skill-trainer's `timeout`: the wall limit follows from it.
    keys = {"timeout_s": "timeout", "wall_limit_s": "timeout"}
    return APIPlainModel(ModelClient(endpoint, calls, where=_WHERE, keys=keys), str(settings.effective_model))
