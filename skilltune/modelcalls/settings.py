"""What a model call is given: the endpoint, its limits, the request, and what comes back."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from skilltune.errors import SkilltuneError, UsageError

Provider = Literal["openai", "anthropic"]
TokenParam = Literal["auto", "max_tokens", "max_completion_tokens"]

DEFAULT_BASE_URL = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# Hosts that read max_completion_tokens (and refuse max_tokens for reasoning models); every other
# OpenAI-compatible server reads max_tokens, and some (llama-cpp-python) ignore max_completion_tokens.
_COMPLETION_TOKENS_HOSTS = ("api.openai.com", ".openai.azure.com", ".openai.com")


class CallSettings(BaseModel):
    """How every call to one endpoint is bounded: typed options shared by ``--proposer api``, the
    direct targets and the judge (each names them ``timeout_s``, ``max_retries``... in its own
    options). Unknown keys are refused by the models that include these fields."""

    token_param: TokenParam = Field(
        default="auto",
        description="the request field that carries the token limit: max_completion_tokens for "
        "api.openai.com and Azure, max_tokens elsewhere (auto), or forced",
    )
    stream: bool = Field(
        default=True, description="stream the answer (the client can then cut a reply over its token limit)"
    )
    timeout_s: PositiveFloat = Field(
        default=300.0,
        description="wall-clock limit of one attempt, from sending the request to the last byte",
    )
    wall_limit_s: PositiveFloat = Field(
        default=900.0,
        description="wall-clock limit of the whole call, retries and backoff included (not the waits for "
        "the rate limits below)",
    )
    max_retries: NonNegativeInt = Field(default=4, description="retries of 429, 5xx, resets and timeouts")
    backoff_s: NonNegativeFloat = Field(default=1.0, description="first backoff (doubles, capped at 30 s)")
    max_concurrent: PositiveInt | None = Field(
        default=None, description="requests in flight to this endpoint at once, across all workers"
    )
    requests_per_minute: PositiveInt | None = None
    tokens_per_minute: PositiveInt | None = Field(
        default=None, description="prompt (estimated: 4 characters a token) plus completion tokens"
    )
    prices: dict[str, tuple[NonNegativeFloat, NonNegativeFloat]] = Field(
        default_factory=dict,
        description="model-name prefix -> (USD per million input tokens, per million output tokens), "
        "over the built-in table",
    )


@dataclass(frozen=True)
class Endpoint:
    """Where calls go: the provider's wire format, the base URL, and the variable holding the key.

    The key itself is read from the environment when a request is sent: it is never part of an
    Endpoint, a setting, an event or an error message.
    """

    provider: Provider
    base_url: str
    api_key_env: str

    @property
    def url(self) -> str:
        """The POST URL: ``<base>/chat/completions`` (a bare host gets ``/v1``) or ``<host>/v1/messages``
        (a base ending in ``/v1`` is taken as it is)."""
        base = self.base_url.rstrip("/")
        path = urlsplit(base).path
        if self.provider == "anthropic":
            return f"{base}/messages" if path.endswith("/v1") else f"{base}/v1/messages"
        if path in ("", "/"):
            base += "/v1"
        return f"{base}/chat/completions"

    @property
    def host(self) -> str:
        return (urlsplit(self.base_url).hostname or "").lower()

    def key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def default_token_param(self) -> Literal["max_tokens", "max_completion_tokens"]:
        if self.provider == "anthropic":
            return "max_tokens"
        host = self.host
        official = any(
            host == h or (h.startswith(".") and host.endswith(h)) for h in _COMPLETION_TOKENS_HOSTS
        )
        return "max_completion_tokens" if official else "max_tokens"


def resolve_endpoint(
    provider: Provider, base_url: str | None, api_key_env: str | None, where: str = "option"
) -> Endpoint:
    """The endpoint for these options: ``base_url`` or the provider's variable (OPENAI_BASE_URL,
    ANTHROPIC_BASE_URL) or the vendor's host; the key in ``api_key_env`` or the provider's usual
    variable. A key is required when ``api_key_env`` was named or the vendor's own host is used (a
    local server needs none): its absence is a UsageError naming the variable and the setting."""
    url = base_url or os.environ.get(BASE_URL_ENV[provider]) or DEFAULT_BASE_URL[provider]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"base_url {url!r} is not an http(s) URL: give e.g. {where} base_url=http://127.0.0.1:8080/v1"
        )
    endpoint = Endpoint(provider, url, api_key_env or KEY_ENV[provider])
    official = url.rstrip("/") in (DEFAULT_BASE_URL[provider], DEFAULT_BASE_URL[provider].removesuffix("/v1"))
    if endpoint.key() is None and (api_key_env or official):
        raise UsageError(
            f"the {provider} endpoint {url} needs a key in ${endpoint.api_key_env}: set it "
            f"(or name another variable with {where} api_key_env=VAR)"
        )
    return endpoint


@dataclass(frozen=True)
class ToolCall:
    """A tool call of the model's: its id (echoed in the tool's result), the tool's name and its
    arguments (an empty dict when they were not a JSON object)."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatMessage:
    """One message. An ``assistant`` message may carry the tool calls it made (``tool_calls``); a
    ``tool`` message is the result of one of them (``tool_call_id``)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion: the messages, the model and its sampling; ``max_tokens`` is required
    (every call is bounded). ``seed`` and ``stop`` are sent where the wire format has them.
    ``extra``: more request fields, sent as they are (``response_format``, ``top_p``...); they
    cannot replace the token limit, the stream switch or the messages. ``tools``: functions the
    model may call (OpenAI's ``{"type": "function", "function": {name, description, parameters}}``,
    sent in each API's own form; the model chooses whether to call one: ``Reply.tool_calls``)."""

    messages: tuple[ChatMessage, ...]
    model: str
    max_tokens: int
    temperature: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    tools: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(cls, prompt: str, *, system: str | None = None, **fields: Any) -> ChatRequest:
        """A request of one user message (and a system prompt)."""
        messages = ((ChatMessage("system", system),) if system else ()) + (ChatMessage("user", prompt),)
        return cls(messages=messages, **fields)

    def prompt_chars(self) -> int:
        return sum(len(m.content) for m in self.messages)


@dataclass
class Reply:
    """A model's answer and what it cost.

    ``finish``: ``stop`` (the model ended), ``length`` (the token limit: the server's, or the client
    cut a stream that ran past it, see ``notes``), or the endpoint's own word. ``tokens_*`` are the
    endpoint's counts (``usage_estimated`` when it sent none and they were counted or estimated);
    ``cost_usd`` comes from the price table (None for a model it does not know). ``events`` says what
    happened, attempt by attempt (request parameters, errors, retries, the reply), without the key;
    ``failures`` the reason of each failed attempt. ``tool_calls``: the calls the model made to the
    request's ``tools`` (finish ``tool_calls``).
    """

    text: str
    model: str
    finish: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    usage_estimated: bool = False
    cost_usd: float | None = None
    seconds: float = 0.0
    attempts: int = 1
    failures: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)


ErrorKind = Literal[
    "rate_limited", "server_error", "network", "timeout", "auth", "not_found", "bad_request", "budget"
]


class ModelCallError(SkilltuneError):
    """A call that failed for good: not retryable, or its retries or its wall_limit_s are spent.
    ``str()`` names the endpoint, what went wrong and the setting to change; ``kind`` and ``status``
    classify it; ``retryable`` says whether a later call may succeed (rate limits, overload,
    network, timeouts) or not (auth, a bad request, a missing model). Exit code 3."""

    exit_code = 3

    def __init__(
        self,
        message: str,
        kind: ErrorKind,
        *,
        status: int | None = None,
        retryable: bool = False,
        attempts: int = 1,
        events: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.events = events or []


class CallCancelled(Exception):
    """The caller's ``cancel`` check said stop (a first Ctrl-C during a proposer call, or the harness
    interrupting its rollouts): the connection was closed at once and nothing was returned."""

    def __init__(self, message: str, events: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.events = events or []
