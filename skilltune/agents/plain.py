"""An agent CLI as a plain model (``--proposer claude``, a judge with ``provider: claude``): the
PlainModel of skilltune.modelcalls.plain, run with no tools in an empty folder, the answer read
from its text; an infra error (rate limit, network, a crash) is retried with backoff."""

from __future__ import annotations

import random
import time

from pydantic import BaseModel

from skilltune.agents.cli import CLIBackend
from skilltune.modelcalls import CallCancelled, ChatRequest, ModelCallError, Reply
from skilltune.modelcalls.plain import Answer, Cancel
from skilltune.process import interruptible_sleep

RETRIES = 2  # after the first attempt: a CLI's own retries ran already, an outage is not waited out
BACKOFF_S = 2.0
_POLL_S = 0.05


class CLIPlainModel:
    """``backend`` asked with the request's messages as one prompt (system first); the request's
    model when it names one, else the CLI's default. A CLI cannot fill in a schema (no tools): the
    schema is the caller's to read from the text, as its prompt describes it."""

    def __init__(
        self,
        backend: CLIBackend,
        wall_limit_s: float,
        *,
        name: str | None = None,
        retries: int = RETRIES,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self.backend = backend
        self.wall_limit_s = wall_limit_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.name = name or backend.name
        self.what = f"the {backend.executable} CLI"

    def ask(
        self, request: ChatRequest, schema: type[BaseModel] | None = None, *, cancel: Cancel = None
    ) -> Answer:
        prompt = "\n\n".join(m.content for m in request.messages)
        jitter = random.Random(f"{prompt[:64]}|{len(prompt)}")
        failures: list[str] = []
        t0 = time.monotonic()
        for attempt in range(1, self.retries + 2):
            result = self.backend.complete(prompt, request.model or None, self.wall_limit_s)
            if result.status != "infra_error" and (result.status == "ok" or result.final_text):
                reply = Reply(
                    text=result.final_text, model=result.model or request.model or self.name,
                    finish="stop", tokens_in=result.tokens_in, tokens_out=result.tokens_out,
                    usage_estimated=result.tokens_in is None, cost_usd=result.cost_usd,
                    seconds=round(time.monotonic() - t0, 3), attempts=attempt, failures=failures,
                )  # fmt: skip
                return Answer(reply)
            failures.append(f"{result.status}: {result.reason or 'no answer'}")
            if result.final or attempt > self.retries:
                break
            self._sleep(self.backoff_s * 2 ** (attempt - 1) * (0.5 + jitter.random() / 2), cancel)
        raise ModelCallError(
            f"{len(failures)} attempt(s) failed, the last: {failures[-1]}",
            "timeout" if result.status == "timeout" else "server_error",
            retryable=not result.final,
            attempts=len(failures),
        )

    def _sleep(self, seconds: float, cancel: Cancel) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if cancel is not None and cancel():
                raise CallCancelled("cancelled while waiting to retry")
            interruptible_sleep(min(left, _POLL_S))
