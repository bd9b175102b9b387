"""One door to a plain model for the proposers and the judge: PlainModel and ask_structured.

A *plain model* answers messages with text, or fills in a pydantic schema: an endpoint through
``ModelClient`` (``APIPlainModel`` here), or an agent CLI run with no tools (skilltune.agents.plain).
The proposers and the judge ask through it, so every such call is retried, repaired and
accounted the same way:

- **retries** of the transport belong to the model: ModelClient's (429, 5xx, resets, timeouts,
  within ``wall_limit_s``) for an endpoint, a few attempts with backoff for a CLI's infra error.
  A call that still fails raises ``ModelCallError``; a cancelled one ``CallCancelled``.
- **structured output** when the model offers it: the schema as a forced tool call
  (``ModelClient.structured``). An endpoint that refuses tools (a 400 naming them) is asked
  again for text, and so are its later calls; an answer without the tool call is read from its
  text (small local models answer in prose or fenced JSON).
- **repair**: ``ask_structured`` reads each answer with the caller's ``read`` (ValueError: why it
  cannot be used) and asks again, at most ``repair_rounds`` times, with the original prompt and
  the problem (the caller words it: ``repair``). An answer cut at the token limit says so in the
  problem: the model is asked to answer shorter.
- **accounting**: every exchange (prompt, reply with its tokens and cost, seconds, the problem
  that refused it) is returned, for the caller's records.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from skilltune.modelcalls.client import ModelClient
from skilltune.modelcalls.settings import ChatMessage, ChatRequest, ModelCallError, Reply
from skilltune.validation import field_problems

T = TypeVar("T")
Cancel = Callable[[], bool] | None
FENCE = re.compile(r"```(?:json|markdown|md)?\s*\n(.*?)```", re.S)
_TOOLS_REFUSED = re.compile(r"\btools?\b|function|tool_choice", re.I)


@dataclass
class Answer:
    """A plain model's answer: the reply (text, tokens, cost, notes) and, when the model filled in
    the schema through structured output, that schema's instance."""

    reply: Reply
    parsed: BaseModel | None = None


class PlainModel(Protocol):
    """``ask(request, schema, cancel=...)``: the answer to ``request`` (its messages, model and
    token limit), the schema asked for as structured output where the model offers it. Raises
    ModelCallError when the model fails for good, CallCancelled when ``cancel()`` turned true."""

    name: str
    what: str  # how errors name it: "the openai endpoint", "the claude CLI"

    def ask(
        self, request: ChatRequest, schema: type[BaseModel] | None = None, *, cancel: Cancel = None
    ) -> Answer: ...


class APIPlainModel:
    """An endpoint through ModelClient: structured output by a forced tool call, text when the
    endpoint refuses tools (learnt once, then every later call asks for text)."""

    def __init__(self, client: ModelClient, name: str) -> None:
        self.client = client
        self.name = name
        self.what = f"the {client.endpoint.provider} endpoint"
        self.text_only = False

    def ask(
        self, request: ChatRequest, schema: type[BaseModel] | None = None, *, cancel: Cancel = None
    ) -> Answer:
        note = None
        if schema is not None and not self.text_only:
            try:
                parsed, reply = self.client.structured(request, schema, cancel=cancel)
                return Answer(reply, parsed)
            except ModelCallError as exc:
                said = refused_tools(exc)
                if said is None:
                    raise
                self.text_only = True
                note = f"{self.client.endpoint.url} refuses tools ({said[:200]}): asked for text from now on"
        reply = self.client.chat(request, cancel=cancel)
        if note is not None:
            reply.notes.insert(0, note)
        return Answer(reply)


def refused_tools(exc: ModelCallError) -> str | None:
    """What the endpoint said when ``exc`` is its refusal of tools (a 400 naming them), else None."""
    if exc.status not in (400, 422):
        return None
    said = next((str(e.get("message", "")) for e in reversed(exc.events) if e.get("type") == "error"), "")
    return said if _TOOLS_REFUSED.search(said) else None


@dataclass
class Exchange:
    """One call of an ask: the prompt sent (its last user message), the answer, how long it took,
    and why the answer was refused (None: it was used)."""

    prompt: str
    answer: Answer
    seconds: float
    problem: str | None = None


@dataclass
class Asked(Generic[T]):
    """What ``ask_structured`` got: the value read (None: every answer was refused) and each exchange."""

    value: T | None
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [e.problem for e in self.exchanges if e.problem is not None]


def ask_structured(
    model: PlainModel,
    request: ChatRequest,
    schema: type[BaseModel] | None,
    read: Callable[[Answer], T],
    *,
    repair_rounds: int = 1,
    repair: Callable[[str, str, int], str],
    cancel: Cancel = None,
) -> Asked[T]:
    """``read`` applied to the model's answer to ``request`` (``schema`` asked for as structured
    output; None: a text answer, as a small model writes one most readily); an answer ``read`` refuses (ValueError) is asked again, at most ``repair_rounds``
    times, with the last user message replaced by ``repair(prompt, problem, attempt)`` (attempt
    counts from 2). ModelCallError and CallCancelled pass through."""
    prompt = last_user(request)
    asked = request
    exchanges: list[Exchange] = []
    for attempt in range(1, repair_rounds + 2):
        t0 = time.monotonic()
        answer = model.ask(asked, schema, cancel=cancel)
        seconds = round(time.monotonic() - t0, 3)
        sent = last_user(asked)
        try:
            value = read(answer)
        except ValueError as exc:
            problem = str(exc)
            if answer.reply.finish == "length":
                problem += (
                    f" (the answer was cut at the token limit, {asked.max_tokens} tokens: "
                    "answer shorter, with fewer or shorter items)"
                )
            exchanges.append(Exchange(sent, answer, seconds, problem))
            asked = with_user(request, repair(prompt, problem, attempt + 1))
            continue
        exchanges.append(Exchange(sent, answer, seconds))
        return Asked(value, exchanges)
    return Asked(None, exchanges)


def last_user(request: ChatRequest) -> str:
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


def with_user(request: ChatRequest, prompt: str) -> ChatRequest:
    """``request`` with its last user message replaced by ``prompt``."""
    messages = list(request.messages)
    index = max((i for i, m in enumerate(messages) if m.role == "user"), default=len(messages))
    messages[index : index + 1] = [ChatMessage("user", prompt)]
    return replace(request, messages=tuple(messages))


def parse_json(text: str) -> Any:
    """The JSON in a model's answer (bare, or in a fenced block): the whole block when it is JSON
    (an array too: small models answer a bare list), else the outermost object in it."""
    candidates = [m.group(1) for m in FENCE.finditer(text)] + [text]
    for chunk in candidates:
        try:
            return json.loads(chunk)
        except json.JSONDecodeError:
            pass
        start, end = chunk.find("{"), chunk.rfind("}")
        if start >= 0 and end > start:
            try:
                return json.loads(chunk[start : end + 1])
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object found in the answer")


def complete_items(text: str, key: str) -> list[Any]:
    """The complete items of the list ``key`` in a JSON answer cut before its end (``{"key": [a, b,
    {"c...``, or a bare list ``[a, b, {...``): ``[a, b]``; empty when no item is complete."""
    match = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text) or re.search(r"\[", text)
    if match is None:
        return []
    decoder = json.JSONDecoder()
    items: list[Any] = []
    at = match.end()
    while True:
        at = _skip(text, at)
        if at >= len(text) or text[at] == "]":
            return items
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return items  # the cut item
        items.append(item)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n,":
        at += 1
    return at


def schema_problems(exc: ValidationError) -> str:
    """A pydantic error as one line: the first few refused fields, as the project words them."""
    return "; ".join(field_problems(exc, limit=5))
