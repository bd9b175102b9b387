"""The judge behind an API (any OpenAI-compatible endpoint, or Anthropic), through skilltune.modelcalls.

Each verdict is one bounded call (the token limit in the field the endpoint reads, a wall clock,
retries of 429, 5xx, resets and timeouts) asking for the verdict through structured output
(``ModelClient.structured``: a forced tool call whose schema is ``RecordVerdict``); the tool call
is the verdict, or the reply's text when the endpoint made none or garbled it (small local models
answer in prose or fenced JSON: ``verdict.parse_reply`` reads it). A call that still fails is
``ScorerUnavailable``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from skilltune.errors import ScorerUnavailable, UsageError
from skilltune.judge.models import JudgeModel, JudgeReply, client_status
from skilltune.judge.verdict import RecordVerdict
from skilltune.suite.judge import JudgeSettings, find_key

_WHERE = "--judge-opt"


class APIJudgeModel(JudgeModel):
    def __init__(self, settings: JudgeSettings, suite_root: Path) -> None:
        self.settings = settings
        self.suite_root = suite_root
        self.name = str(settings.effective_model)
        self._client: Any = None
        self._lock = threading.Lock()

    def check(self) -> None:
        client, ok = client_status(self.settings)
        if not ok:
            raise UsageError(f"the judge cannot be asked: {client}")
        key, _, where = find_key(self.settings, self.suite_root)
        if key is None and not self.settings.local:
            raise UsageError(
                f"the judge at {self.settings.effective_base_url} needs a key: set {where} or put it in a "
                f".env file (or name the variable with {_WHERE} api_key_env=VAR)"
            )
        self.client()  # the endpoint resolves now, not in the middle of a batch

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        from skilltune.modelcalls import CallSettings, ModelClient, resolve_endpoint

        settings = self.settings
        key, source, _ = find_key(settings, self.suite_root)
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
        return ModelClient(endpoint, calls, where=_WHERE)

    def ask(self, system: str, user: str) -> JudgeReply:
        from skilltune.modelcalls import CallCancelled, ChatRequest, ModelCallError
        from skilltune.process import interrupted

        request = ChatRequest.of(
            user,
            system=system,
            model=self.name,
            max_tokens=self.settings.max_tokens,
            temperature=self.settings.temperature,
        )
        try:
            parsed, reply = self.client().structured(request, RecordVerdict, cancel=interrupted)
        except ModelCallError as exc:
            raise ScorerUnavailable(
                f"the judge failed after its retries: {exc}; `skilltune resume` judges the kept rollouts "
                "once it answers again"
            ) from None
        except CallCancelled:
            from skilltune.process import RolloutInterrupted

            raise RolloutInterrupted from None
        return JudgeReply(
            content=reply.text,
            tool_args=parsed.model_dump() if parsed is not None else None,
            model=reply.model,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            cost_usd=reply.cost_usd,
        )
