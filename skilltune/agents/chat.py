"""Direct chat targets: a model behind an API answers each task in one call (no agent CLI).

A rollout is one bounded model call (skilltune.modelcalls): the skill is the system prompt
(placement ``system``, the default) or goes in front of the task (``prepend``); ``native``
is refused (a chat call reads no skill folder). With ``tool``, and for every task that carries
``should_trigger`` whatever the placement, the skills are listed and the model loads one through
a ``load_skill`` tool if it chooses (a short conversation: agents/loadtool.py); the result says
whether it loaded the candidate (``skill_loaded``), so trigger tasks run here. The task prompt is the user message and the
reply is the output scorers read, also written to the workspace as the task's
``output_file`` when it names one, so command and rubric scorers work. A task with ``files``
is refused unless it sets ``inline_files: true``: its text files are then put into the user
message (binary ones are named, not shown). A skill of more than one file is refused: its
supporting files could not be read. Endpoint failures are ``infra_error`` (retried by the
runner unless no retry can help, never scored); a reply cut at ``max_tokens`` is
``task_failed`` (the model's own failure, scored as it stands).

Rate limits hold across the workers of one process, so the Ray executor refuses these
backends (``runs_in_process``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, field_validator
from typing_extensions import TypeVar

from skilltune.agents.base import (
    AgentBackend,
    AgentOptions,
    AgentRequest,
    AgentResult,
    BackendCheck,
    Message,
    Placement,
    SealSupport,
    refuse_option,
)
from skilltune.agents.loadtool import DEFAULT_TURNS, LOAD_TOOL, converse, skills_prompt, uses_load_tool
from skilltune.errors import UsageError
from skilltune.modelcalls import (
    CallCancelled,
    CallSettings,
    ChatMessage,
    ChatRequest,
    ModelCallError,
    ModelClient,
    Provider,
    Reply,
    resolve_endpoint,
)
from skilltune.modelcalls.settings import BASE_URL_ENV, DEFAULT_BASE_URL, KEY_ENV
from skilltune.process import RolloutInterrupted, interrupted

if TYPE_CHECKING:
    from skilltune.skill import Candidate
    from skilltune.suite import Task

INLINE_FIELD = "inline_files"
OUTPUT_FIELD = "output_file"
_INLINE_BYTES = 200_000  # of task files put into one user message
_WHERE = "--agent-opt"


class ChatOptions(AgentOptions, CallSettings):
    """``--agent-opt`` keys of a direct chat target: the endpoint, sampling, and the call limits of
    skilltune.modelcalls. Options of the CLI backends that a chat call cannot honour are refused."""

    placement: Placement = Field(
        default="system",
        description="system, prepend, or tool (the skills listed and a load_skill tool: the model decides)",
    )
    max_turns: PositiveInt | None = Field(
        default=None,
        description=f"model calls of a rollout that offers the load_skill tool (default {DEFAULT_TURNS})",
    )
    offers_load_tool: ClassVar[bool] = True
    base_url: str | None = Field(
        default=None, description="default: the provider's *_BASE_URL variable, else its host"
    )
    api_key_env: str | None = Field(default=None, description="the variable holding the key")
    temperature: NonNegativeFloat = Field(default=0.7, description="above 0: replicates are real samples")
    max_tokens: PositiveInt = 1024
    stop: list[str] = Field(default_factory=list)
    wall_limit_s: PositiveFloat = Field(default=600.0, description="one rollout's call, retries included")

    @field_validator("placement")
    @classmethod
    def _placement(cls, value: Placement) -> Placement:
        if value == "native":
            raise ValueError(
                "a chat call reads no skill folder or instruction file: use placement=system (the default), "
                "prepend, or tool (the model loads the skill through a load_skill tool)"
            )
        return value

    _agent_only = refuse_option(
        "tools",
        "effort",
        message="a chat call has no agent tools or effort setting (its one tool is load_skill, with "
        "placement=tool); drop it",
        mode="before",
    )

    @field_validator("extra_args", mode="before")
    @classmethod
    def _no_args(cls, value: Any) -> Any:
        if value:
            raise ValueError("a chat call starts no program: drop extra_args")
        return value


ChatOptionsT = TypeVar("ChatOptionsT", bound=ChatOptions, default=Any)


class ChatBackend(AgentBackend[ChatOptionsT]):
    """Base of the direct chat targets; a subclass names its ``provider`` and ``Options``."""

    provider: ClassVar[Provider]
    Options: ClassVar[type[AgentOptions]] = ChatOptions
    native_files: ClassVar[tuple[str, ...]] = ()
    runs_in_process: ClassVar[bool] = True
    seal_support: ClassVar[SealSupport] = "inert"  # model calls only: no process, no file touched
    reports_skill_loads: ClassVar[bool] = True  # trigger tasks run with the load_skill tool
    model_env: ClassVar[str]

    def __init__(self) -> None:
        self._clients: dict[str, ModelClient] = {}
        self._lock = threading.Lock()

    # --- checks before anything runs ---------------------------------------------------------
    def check(self) -> BackendCheck:
        try:
            import httpx2
        except ImportError:
            return BackendCheck(name=self.name, installed=False, fix="pip install 'skilltune[api]'")
        base = os.environ.get(BASE_URL_ENV[self.provider]) or DEFAULT_BASE_URL[self.provider]
        notes = [
            f"no CLI: one chat call per rollout to base_url (now {base}), key from api_key_env "
            f"(default ${KEY_ENV[self.provider]}), model from model= or ${self.model_env}",
            "no native placement; placement=tool (and every trigger task) lists the skills and offers a "
            "load_skill tool: the model decides whether to load the skill",
            f"tasks with files need {INLINE_FIELD}: true",
        ]
        return BackendCheck(
            name=self.name, installed=True, version=f"built-in (httpx2 {httpx2.__version__})", notes=notes
        )

    def preflight(self, options: ChatOptionsT) -> None:
        """A missing model or key fails every rollout: refused before anything is written."""
        self._model(options)
        self._endpoint(options)

    def task_problem(self, task: Task) -> str | None:
        if task.files and task.field(INLINE_FIELD) is not True:
            return (
                f"the {self.name} target answers in one chat message and cannot open the task's files "
                f'({", ".join(task.files[:3])}); set "{INLINE_FIELD}": true on the task to put their text '
                "into the prompt, or use an agent CLI"
            )
        target = task.field(OUTPUT_FIELD)
        if target is not None and _unsafe_path(target):
            return f"{OUTPUT_FIELD} {target!r} must be a relative path inside the workspace"
        return None

    def skill_problem(self, candidate: Candidate) -> str | None:
        if len(candidate.files) > 1:
            extra = sorted(f for f in candidate.files if f != candidate.main)
            return (
                f"the {self.name} target gets the skill as text and cannot read its other files "
                f"({', '.join(extra[:3])}): fold them into {candidate.main}, or use an agent CLI"
            )
        return None

    def cache_identity(self, options: ChatOptionsT) -> dict[str, Any]:
        """The endpoint and model, wherever they come from (options or variables); never the key."""
        base = (
            options.base_url or os.environ.get(BASE_URL_ENV[self.provider]) or DEFAULT_BASE_URL[self.provider]
        )
        return {"base_url": base, "model": options.model or os.environ.get(self.model_env)}

    # --- one rollout ---------------------------------------------------------------------------
    def run(self, request: AgentRequest[ChatOptionsT]) -> AgentResult:
        options = request.options
        if uses_load_tool(options.placement, request.task.should_trigger):
            return self._run_with_tool(request)
        prompt = self._user_message(request, request.prompt)
        chat = ChatRequest(
            messages=(
                *((ChatMessage("system", request.system_prompt),) if request.system_prompt else ()),
                ChatMessage("user", prompt),
            ),
            model=self._model(options),
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            seed=self.seed_for(request),
            stop=tuple(options.stop),
        )
        try:
            reply = self._client(options).chat(chat, cancel=interrupted)
        except CallCancelled:
            raise RolloutInterrupted from None
        except ModelCallError as exc:
            return _call_failed(exc, chat.model)
        self._write_output(request, reply.text)
        cut = reply.finish == "length"
        return AgentResult(
            status="task_failed" if cut else "ok",
            reason=f"the reply reached max_tokens={options.max_tokens}" if cut else None,
            final_text=reply.text,
            events=reply.events,
            messages=[Message(role="assistant", content=reply.text)],
            log_tail="\n".join(reply.notes),
            model=reply.model,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            cost_usd=reply.cost_usd,
            cost_estimated=reply.cost_usd is not None,
            turns=1,
        )

    def _run_with_tool(self, request: AgentRequest[ChatOptionsT]) -> AgentResult:
        """The skills listed, a load_skill tool offered, the conversation to the model's answer."""
        options = request.options
        skills = [*((request.candidate,) if request.candidate is not None else ()), *request.catalogue]
        user = ChatMessage("user", self._user_message(request, request.task.prompt))
        chat = ChatRequest(
            messages=(ChatMessage("system", skills_prompt(skills)), user) if skills else (user,),
            model=self._model(options),
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            seed=self.seed_for(request),
            stop=tuple(options.stop),
            tools=(LOAD_TOOL,) if skills else (),
        )
        client = self._client(options)
        try:
            talk = converse(
                lambda r: client.chat(r, cancel=interrupted), chat, skills, options.max_turns or DEFAULT_TURNS
            )
        except CallCancelled:
            raise RolloutInterrupted from None
        except ModelCallError as exc:
            return _call_failed(exc, chat.model)
        reply = talk.final
        self._write_output(request, reply.text)
        replies = talk.replies
        reason = None
        if talk.pending:
            reason = (
                f"the model still called {LOAD_TOOL['function']['name']} after max_turns={len(replies)} calls"
            )
        elif reply.finish == "length":
            reason = f"the reply reached max_tokens={options.max_tokens}"
        costs = [r.cost_usd for r in replies]
        return AgentResult(
            status="task_failed" if reason else "ok",
            reason=reason,
            final_text=reply.text,
            events=talk.events,
            messages=[Message(role="assistant", content=_said(r)) for r in replies],
            log_tail="\n".join(n for r in replies for n in r.notes),
            model=reply.model,
            tokens_in=_total([r.tokens_in for r in replies]),
            tokens_out=_total([r.tokens_out for r in replies]),
            cost_usd=None if None in costs else sum(c for c in costs if c is not None),
            cost_estimated=None not in costs,
            turns=len(replies),
            skill_loaded=request.candidate is not None and request.candidate.name in talk.loaded,
        )

    def _write_output(self, request: AgentRequest[ChatOptionsT], text: str) -> None:
        target = request.task.field(OUTPUT_FIELD)
        if target is not None:
            path = request.workspace / str(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def seed_for(self, request: AgentRequest[ChatOptionsT]) -> int | None:
        """The sampling seed of this replicate (None: none is sent). Backends whose API has one
        override this."""
        return None

    def _user_message(self, request: AgentRequest[ChatOptionsT], prompt: str) -> str:
        if request.task.field(INLINE_FIELD) is not True:
            if _has_files(request.workspace):  # a Python env prepared a workspace the model cannot see
                raise UsageError(
                    f"task {request.task.id}: its workspace holds files the {self.name} target cannot open; "
                    f'set "{INLINE_FIELD}": true on the task to put their text into the prompt'
                )
            return prompt
        return prompt + inline_files(request.workspace)

    def _model(self, options: ChatOptionsT) -> str:
        model = options.model or os.environ.get(self.model_env)
        if not model:
            raise UsageError(
                f"the {self.name} target needs a model: {_WHERE} model=NAME (or set ${self.model_env})"
            )
        return model

    def _endpoint(self, options: ChatOptionsT) -> Any:
        return resolve_endpoint(self.provider, options.base_url, options.api_key_env, where=_WHERE)

    def _client(self, options: ChatOptionsT) -> ModelClient:
        key = options.model_dump_json()
        with self._lock:
            if key not in self._clients:
                self._clients[key] = ModelClient(self._endpoint(options), options, where=_WHERE)
            return self._clients[key]


def _total(counts: list[int | None]) -> int | None:
    return None if None in counts else sum(c for c in counts if c is not None)


def _said(reply: Reply) -> str:
    """An assistant turn as the conversation shows it: its text, then its tool calls."""
    calls = [
        f"[{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})]" for c in reply.tool_calls
    ]
    return "\n".join([reply.text, *calls] if reply.text else calls)


def _unsafe_path(value: Any) -> bool:
    if not isinstance(value, str) or not value.strip():
        return True
    path = PurePosixPath(value)
    return path.is_absolute() or ".." in path.parts or value.startswith("~")


def _files(workspace: Path) -> list[Path]:
    return sorted(
        p for p in workspace.rglob("*") if p.is_file() and ".git" not in p.relative_to(workspace).parts
    )


def _has_files(workspace: Path) -> bool:
    return bool(_files(workspace))


def inline_files(workspace: Path) -> str:
    """The workspace's text files as a markdown section for the user message (binary files and
    what exceeds the size cap are named, not shown)."""
    parts = ["\n\n## Files\n"]
    budget = _INLINE_BYTES
    for path in _files(workspace):
        rel = path.relative_to(workspace).as_posix()
        data = path.read_bytes()
        if b"\0" in data:
            parts.append(f"\n### {rel}\n\n(binary file, {len(data):,} bytes, not shown)\n")
            continue
        text = data.decode("utf-8", "replace")
        if len(data) > budget:
            parts.append(
                f"\n### {rel}\n\n({len(data):,} bytes, over the {_INLINE_BYTES:,}-byte limit: not shown)\n"
            )
            continue
        budget -= len(data)
        fence = "`" * max(3, _longest_run(text, "`") + 1)
        parts.append(f"\n### {rel}\n\n{fence}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}\n")
    return "".join(parts)


def _longest_run(text: str, char: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return longest


def _call_failed(exc: ModelCallError, model: str) -> AgentResult:
    """A model call that failed after its retries: an infra error (final when retrying cannot help)."""
    return AgentResult(
        status="infra_error", reason=str(exc), events=exc.events, model=model, final=not exc.retryable
    )
