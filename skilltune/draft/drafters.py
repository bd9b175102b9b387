"""Who writes the queries and answers the label check: a model through the one model door, or the mock.

``make_drafter`` reads ``--drafter`` as ``--proposer`` is read, with the proposer's options and
their bounds: ``api`` is an OpenAI-compatible or Anthropic endpoint (``APIProposerOptions``:
``model``, ``base_url``, ``api_key_env``, ``max_tokens``, ``temperature``, ``timeout_s`` per attempt,
``wall_limit_s`` per call with its retries...), an agent CLI's name (``claude``, ``codex``...) is
that CLI with no tools (``CLIProposerOptions``: ``model``, ``wall_limit_s``), and ``mock`` is the
deterministic drafter of skilltune/draft/mock.py. A model is asked for text (a small model writes
a list more readily than it fills a schema), read leniently, and repaired once; every exchange is
returned as a ``DraftCall`` for the draft's log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from skilltune.draft.asks import CheckAsk, QueryAsk, read_choice, read_queries
from skilltune.draft.base import DraftCall, Drafted, Drafter, DrafterUnavailable
from skilltune.errors import UsageError
from skilltune.modelcalls import ChatRequest, ModelCallError
from skilltune.modelcalls.plain import Answer, Exchange, PlainModel, ask_structured
from skilltune.validation import field_problems

T = TypeVar("T")
CHECK_TOKENS = 256  # a label check answers one name: its calls are bounded tighter than the drafter's
LATER_TEMPERATURE = 0.7  # a bucket's later calls: they must be able to differ from its first


def _list_repair(prompt: str, problem: str, attempt: int) -> str:
    return (
        f"{prompt}\nYour previous answer could not be used: {problem}.\n"
        "Answer again with a JSON list of strings only."
    )


def _choice_repair(names: list[str]) -> Callable[[str, str, int], str]:
    def repair(prompt: str, problem: str, attempt: int) -> str:
        return f"{prompt}\nYour previous answer could not be used: {problem}.\nAnswer with one word: {', '.join(names)} or none."

    return repair


@dataclass(eq=False)
class ModelDrafter(Drafter):
    """A plain model (an endpoint or an agent CLI) asked with skilltune/prompts/draft_*.md."""

    model: PlainModel
    name: str
    request_model: str
    max_tokens: int
    temperature: float | None

    def write(self, ask: QueryAsk) -> Drafted[list[str]]:
        temperature = self.temperature if ask.call == 1 else max(self.temperature or 0.0, LATER_TEMPERATURE)
        request = ChatRequest.of(
            ask.prompt(), model=self.request_model, max_tokens=self.max_tokens, temperature=temperature,
            seed=ask.seed,
        )  # fmt: skip

        def read(answer: Answer) -> list[str]:
            return read_queries(answer.reply.text, cut=answer.reply.finish == "length")

        return self._ask(ask.label, request, read, _list_repair, [])

    def classify(self, ask: CheckAsk) -> Drafted[str | None]:
        request = ChatRequest.of(
            ask.prompt(), model=self.request_model, max_tokens=min(self.max_tokens, CHECK_TOKENS),
            temperature=self.temperature, seed=ask.seed,
        )  # fmt: skip
        names = ask.names

        def read(answer: Answer) -> str | None:
            return read_choice(answer.reply.text, names)

        return self._ask("check", request, read, _choice_repair(names), None)

    def _ask(
        self,
        label: str,
        request: ChatRequest,
        read: Callable[[Answer], T],
        repair: Callable[[str, str, int], str],
        empty: T,
    ) -> Drafted[T]:
        try:
            asked = ask_structured(self.model, request, None, read, repair_rounds=1, repair=repair)
        except ModelCallError as exc:
            raise DrafterUnavailable(
                f"{self.model.what} failed on the ask {label!r}: {exc}; nothing was written"
            ) from None
        calls = [self._call(label, e) for e in asked.exchanges]
        if not asked.exchanges or asked.exchanges[-1].problem is not None:
            return Drafted(empty, False, calls)
        return Drafted(asked.value, True, calls)  # type: ignore[arg-type]  # read it: a T, even a None

    def _call(self, label: str, exchange: Exchange) -> DraftCall:
        reply = exchange.answer.reply
        return DraftCall(
            ask=label, drafter=self.name, model=reply.model, prompt=exchange.prompt, answer=reply.text,
            finish=reply.finish, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
            cost_usd=reply.cost_usd, seconds=exchange.seconds, problem=exchange.problem,
        )  # fmt: skip


def _options(cls: type[BaseModel], raw: dict[str, Any], flag: str, name: str) -> Any:
    try:
        options = cls.model_validate(raw)
    except ValidationError as exc:
        problems = field_problems(exc, model=cls, noun=f"{flag} {name} option")
        raise UsageError("; ".join(problems) + f" (give them as {flag}-opt key=value)") from None
    if getattr(options, "roles", None):
        raise UsageError(f"{flag}-opt roles: a drafter is one model; give it as {flag}-opt model=NAME")
    return options


def make_drafter(name: str, raw: dict[str, Any], *, seed: int, flag: str = "--drafter") -> Drafter:
    """The drafter ``name`` names, its options checked (UsageError: what to fix, before anything is
    asked or written)."""
    if name == "mock":
        from skilltune.draft.mock import MockDrafter

        if raw:
            raise UsageError(f"{flag} mock takes no options (given: {', '.join(sorted(raw))})")
        return MockDrafter(seed)
    if name == "api":
        from skilltune.modelcalls import ModelClient, resolve_endpoint
        from skilltune.modelcalls.plain import APIPlainModel
        from skilltune.propose.llm import APIProposerOptions

        api = _options(APIProposerOptions, raw, flag, name)
        if not api.model:
            raise UsageError(
                f"{flag} api needs a model: {flag}-opt model=NAME (and base_url=URL for a local server)"
            )
        where = f"{flag}-opt"
        endpoint = resolve_endpoint(api.provider, api.base_url, api.api_key_env, where=where)
        endpoint_model = APIPlainModel(ModelClient(endpoint, api, where=where), api.model)
        return ModelDrafter(endpoint_model, f"api:{api.model}", api.model, api.max_tokens, api.temperature)
    from skilltune.agents import AGENTS, get_backend
    from skilltune.agents.cli import CLIBackend
    from skilltune.agents.plain import CLIPlainModel
    from skilltune.propose.cli import CLIProposerOptions
    from skilltune.propose.llm import ModelProposer

    backend = get_backend(name) if AGENTS.find(name) is not None else None
    if not isinstance(backend, CLIBackend):
        clis = [n for n in AGENTS.names() if isinstance(get_backend(n), CLIBackend)]
        raise UsageError(f"{flag} {name!r}: give mock, api, or an agent CLI ({', '.join(clis)})")
    status = backend.check()
    if not status.installed:
        raise UsageError(f"{flag} {name} needs the {backend.executable} CLI: {status.fix}")
    cli = _options(CLIProposerOptions, raw, flag, name)
    model = CLIPlainModel(backend, cli.wall_limit_s)
    return ModelDrafter(model, name, cli.model or "", ModelProposer.max_tokens, None)
