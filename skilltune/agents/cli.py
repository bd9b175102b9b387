"""What every agent-CLI backend shares: isolation, the environment, the process, outcomes.

A CLI backend says how to call its CLI (``command``), how to read its events (``interpret``;
``skill_loads``: how they show a skill load), and *declares* its plumbing: the user's variables
it needs and those it must never see, the user's credential files, its settings document and the
option that overrides it. This module does the rest the same way for all: a private HOME per
rollout (the user's skills, settings and history never join the candidate) into which only the
CLI's credential files are *linked* (a logged-in CLI keeps working; parallel rollouts never race
on a rotated token); the CLI's settings written there, the user's ``settings_option`` deep-merged
over skilltune's defaults; a minimal environment (PATH, HOME, LANG, TMPDIR, proxy and CA variables,
the CLI's own endpoint and credential variables less ``dropped_env_*``); stdin closed, its own
process group, killed as a group at the wall limit or when its output stalls; outcomes: an HTTP
429/529/503, auth, quota or network failure, or a crash before the first model turn is
``infra_error`` (retried, never scored), never a task failure (``failure_status``).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import warnings
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple

from pydantic import Field, PositiveFloat
from typing_extensions import TypeVar

from skilltune.agents.base import (
    AgentBackend,
    AgentOptions,
    AgentRequest,
    AgentResult,
    BackendCheck,
    SealSupport,
    version_number,
)
from skilltune.agents.home import UserFile, deep_merge, render_settings
from skilltune.agents.skillload import SkillLoads
from skilltune.agents.transcript import parse_jsonl
from skilltune.errors import SkilltuneWarning, UsageError
from skilltune.modelcalls.prices import estimate_cost
from skilltune.process import ProcessOutcome, run_agent_process
from skilltune.sandbox import extra_paths, installation, sealed_argv
from skilltune.store import is_secret_key

BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")
ARG_BYTES = 100_000  # one argv string holds at most 128 KiB on Linux; longer text goes another way


def too_long_for_argv(text: str) -> bool:
    """Whether ``text`` must not be passed as one command-line argument."""
    return len(text.encode()) >= ARG_BYTES


# Variables of a CLI that choose what answers (part of the rollout cache key): ANTHROPIC_MODEL,
# OPENAI_BASE_URL, GOOGLE_CLOUD_PROJECT, CLAUDE_CODE_USE_BEDROCK, AWS_REGION, GH_HOST, ...
_BEHAVIOUR_VAR = re.compile(
    r"(^|_)(MODEL|BASE_URL|API_BASE|ENDPOINT|HOST|REGION|LOCATION|PROJECT|PROVIDER|USE_[A-Z]+"
    r"|API_VERSION|DEPLOYMENT[A-Z_]*|EFFORT|THINKING[A-Z_]*|MAX_[A-Z_]*TOKENS)(_|$)"
)
NETWORK_ENV = (
    "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
)  # fmt: skip

_INFRA_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("rate limited (429)", re.compile(r"\b429\b|rate[ _-]?limit|too many requests", re.I)),
    ("overloaded (529/503)", re.compile(r"\b52[0-9]\b|\b503\b|overloaded|service unavailable|bad gateway|\b502\b", re.I)),
    ("authentication failed", re.compile(r"\b401\b|\b403\b|unauthori[sz]ed|authentication|invalid[ _-]api[ _-]key|not logged in|please log ?in|login required|forbidden", re.I)),
    ("quota exhausted", re.compile(r"quota|insufficient[_ ]funds|billing|credit balance", re.I)),
    ("network error", re.compile(r"ECONNREFUSED|ECONNRESET|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|network error|connection (refused|reset|error)|fetch failed|socket hang up|getaddrinfo", re.I)),
]  # fmt: skip


class CLIOptions(AgentOptions):
    """Options of every CLI backend (each CLI adds its own)."""

    stall_s: PositiveFloat | None = Field(
        default=300.0, description="no output for this long: the agent is stuck"
    )
    executable: str | None = Field(default=None, description="path of the CLI (default: found on PATH)")
    sandbox_ro: list[str] = Field(default_factory=list, description="more paths a sealed agent may read")
    sandbox_rw: list[str] = Field(default_factory=list, description="more paths a sealed agent may write")


CLIOptionsT = TypeVar("CLIOptionsT", bound=CLIOptions, default=Any)


class CLIFailure(NamedTuple):
    """How a run that ended in an error counts, and why: ``infra_error`` (the endpoint's or the
    machine's fault: retried, never scored) or ``task_failed`` (the agent's own failure: scored
    as it stands)."""

    status: Literal["infra_error", "task_failed"]
    reason: str


# HTTP statuses besides 5xx that say nothing about the task, whenever they come: auth, a request
# timeout, a rate limit.
INFRA_HTTP_STATUSES = frozenset({401, 403, 408, 429})


def infra_http_status(code: int) -> bool:
    """Whether an API error of HTTP status ``code`` is the infrastructure's, never the task's."""
    return code >= 500 or code in INFRA_HTTP_STATUSES


def infra_reason(text: str) -> str | None:
    """Why ``text`` (an error message, stderr) looks like an infrastructure failure, or None."""
    for reason, pattern in _INFRA_PATTERNS:
        if pattern.search(text):
            return reason
    return None


class CLIBackend(AgentBackend[CLIOptionsT]):
    """Base of the backends that drive a real agent CLI headless.

    A subclass declares its plumbing in class attributes; the hooks (``env_selection``,
    ``user_credentials``, ``default_settings``, ``cli_env``, ``prepare_home``) are for what
    depends on the user's variables or the request's options.
    """

    Options = CLIOptions
    executable: ClassVar[str]
    long_prompt_via_stdin: ClassVar[bool] = False  # see stdin_text
    # The user's variables this CLI receives (its endpoint, keys, provider switches)...
    env_prefixes: ClassVar[tuple[str, ...]] = ()
    env_names: ClassVar[tuple[str, ...]] = ()
    # ...except these, which would bring the user's own configuration (config dirs, IDE, sandbox) in.
    dropped_env_prefixes: ClassVar[tuple[str, ...]] = ()
    dropped_env_names: ClassVar[tuple[str, ...]] = ()
    # path in the private HOME -> where the user's file is: linked, never copied
    credentials: ClassVar[Mapping[str, UserFile]] = {}
    settings_file: ClassVar[str | None] = None  # relative to the private HOME; TOML if .toml, else JSON
    settings_option: ClassVar[str | None] = None  # an option (a dict) deep-merged over default_settings
    tool_restriction: ClassVar[str | None] = None  # None: the CLI cannot restrict its tools
    seal_support: ClassVar[SealSupport] = "process"
    skill_loads: ClassVar[SkillLoads | None] = None  # how its events show a skill load (None: they cannot)
    loads_need_native = True  # a load decision exists only for a skill folder installed natively

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.settings_option is not None and cls.settings_option not in cls.Options.model_fields:
            raise TypeError(f"{cls.__name__}.settings_option {cls.settings_option!r} is not an option")
        cls.reports_skill_loads = cls.skill_loads is not None

    def check(self) -> BackendCheck:
        found = super().check()
        if self.tool_restriction is None:
            found.notes.append("tool restriction (agent option tools=...) is not supported by this CLI")
        return found

    def ignored_env(self, options: CLIOptionsT) -> dict[str, str]:
        """Variables the user set (for other backends) that this CLI ignores with ``options``:
        variable -> what to set instead. ``preflight`` warns about each."""
        return {}

    def preflight(self, options: CLIOptionsT) -> None:
        for variable, instead in self.ignored_env(options).items():
            warnings.warn(f"{self.name} ignores ${variable}: {instead}", SkilltuneWarning, stacklevel=2)

    def cache_identity(self, options: CLIOptionsT) -> dict[str, Any]:
        """The CLI's version number and those of its variables that choose what answers (model,
        endpoint, region, provider switches): stable across sessions, so resume and a shared cache
        still hit, while pointing the CLI at another model or endpoint misses. Secrets, session
        plumbing (D-Bus, IDE ports), credential expiry times and variables the CLI never receives
        are left out."""
        env = {
            key: value
            for key, value in sorted(self.user_env(options).items())
            if _BEHAVIOUR_VAR.search(key) and not is_secret_key(key)
        }
        return {"version": version_number(self.binary(options)), "env": env}

    def binary(self, options: CLIOptionsT) -> str:
        configured = getattr(options, "executable", None)
        return str(configured or shutil.which(self.executable) or self.executable)

    # --- what each CLI says -------------------------------------------------------------------
    @abstractmethod
    def command(self, request: AgentRequest[CLIOptionsT], home: Path) -> list[str]:
        """argv of one headless run (the prompt after ``--`` when it is positional)."""

    def stdin_text(self, request: AgentRequest[CLIOptionsT]) -> str | None:
        """Text to write to the CLI's stdin (then closed): the prompt, when it is too long for argv
        and the CLI reads a piped stdin as its prompt (``long_prompt_via_stdin``)."""
        if self.long_prompt_via_stdin and too_long_for_argv(request.prompt):
            return request.prompt
        return None

    def prepare_home(self, home: Path, request: AgentRequest[CLIOptionsT]) -> None:
        """Fill the private HOME: the ``settings_file``; a backend that puts more there (a
        system-prompt file) extends this."""
        if self.settings_file is not None:
            path = home / self.settings_file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.settings_text(home, request), encoding="utf-8")

    def cli_env(self, home: Path, request: AgentRequest[CLIOptionsT]) -> dict[str, str]:
        """Variables this CLI needs besides the user's own (quiet modes, config dirs)."""
        return {}

    def env_selection(self, options: CLIOptionsT) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prefixes, names) of the user's variables the CLI receives with ``options``: the declared
        ``env_prefixes`` and ``env_names``; a backend whose options bring more along (an auth type's
        variables, a key variable named by an option) adds them."""
        return self.env_prefixes, self.env_names

    def default_settings(self, home: Path, request: AgentRequest[CLIOptionsT]) -> dict[str, Any]:
        """skilltune's settings document for this rollout (updates and telemetry off, limits...)."""
        return {}

    @abstractmethod
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[CLIOptionsT]
    ) -> AgentResult:
        """Turn the event stream into an AgentResult (messages, final text, usage, status)."""

    # --- shared machinery ---------------------------------------------------------------------
    def user_env(self, options: CLIOptionsT) -> dict[str, str]:
        """The user's variables the CLI receives: those ``env_selection`` selects, less the dropped."""
        prefixes, names = self.env_selection(options)
        return {
            key: value
            for key, value in os.environ.items()
            if (key in names or key.startswith(prefixes))
            and key not in self.dropped_env_names
            and not key.startswith(self.dropped_env_prefixes)
        }

    def environment(self, home: Path, request: AgentRequest[CLIOptionsT]) -> dict[str, str]:
        """The agent's whole environment: the base and network variables, the user's own for this
        CLI (``user_env``), the private HOME and TMPDIR, then ``cli_env`` over all of them."""
        env = {k: os.environ[k] for k in (*BASE_ENV, *NETWORK_ENV) if k in os.environ}
        env |= self.user_env(request.options)
        tmp = home / "tmp"
        tmp.mkdir(exist_ok=True)
        env |= {"HOME": str(home), "TMPDIR": str(tmp), "USERPROFILE": str(home)}
        env.setdefault("LANG", "C.UTF-8")
        env |= self.cli_env(home, request)
        return env

    def user_credentials(self) -> dict[str, Path]:
        """Path in the private HOME -> the user's credential file, found by the CLI's own rules
        (``credentials``); a CLI whose rules a ``UserFile`` cannot say overrides this."""
        return {target: source.path() for target, source in self.credentials.items()}

    def link_credentials(self, home: Path) -> None:
        """Link each of the user's credential files that exists into the private ``home``: a token
        one rollout refreshes reaches the user's file and every parallel rollout."""
        for target, source in self.user_credentials().items():
            if source.exists():
                link = home / target
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(source)

    def settings(self, home: Path, request: AgentRequest[CLIOptionsT]) -> dict[str, Any]:
        """The CLI's settings for ``request``: ``default_settings`` with the user's
        ``settings_option`` deep-merged over it."""
        document = self.default_settings(home, request)
        if self.settings_option is not None:
            document = deep_merge(document, getattr(request.options, self.settings_option))
        return document

    def settings_text(self, home: Path, request: AgentRequest[CLIOptionsT]) -> str:
        """What ``prepare_home`` writes to ``settings_file``."""
        return render_settings(self.settings_file or "", self.settings(home, request))

    def skill_placed(self, request: AgentRequest[CLIOptionsT]) -> bool:
        """Whether a skill folder is installed natively in the workspace (its loading tool must then
        stay available, whatever ``tools`` restricts)."""
        if not request.skill_name:
            return False
        return (request.workspace / self.native_skill_dir(request.skill_name)).is_dir()

    def run(self, request: AgentRequest[CLIOptionsT]) -> AgentResult:
        home = Path(tempfile.mkdtemp(prefix=f"skilltune-{self.name}-home-"))
        try:
            self.link_credentials(home)
            self.prepare_home(home, request)
            options = request.options
            native = options.placement == "native" and self.skill_placed(request)  # before the agent runs
            argv = self.command(request, home)
            if request.sealed:
                argv = self.sealed_command(argv, request, home)
            outcome = run_agent_process(
                argv,
                cwd=request.workspace,
                env=self.environment(home, request),
                wall_limit_s=options.wall_limit_s,
                stall_s=getattr(options, "stall_s", None),
                stdout_path=request.log_dir / "agent-stdout.jsonl",
                stderr_path=request.log_dir / "agent-stderr.log",
                stdin_text=self.stdin_text(request),
            )
        finally:
            shutil.rmtree(home, ignore_errors=True)
        if not outcome.started:
            if outcome.errno == errno.E2BIG:  # no retry can help: the same argv fails the same way
                raise UsageError(self.argv_too_long(request))
            return AgentResult(
                status="infra_error", reason=f"could not start {self.executable}: {outcome.error}"
            )
        events, noise = parse_jsonl(outcome.stdout_lines)
        result = self.interpret(events, outcome, request)
        if self.skill_loads is not None:
            self.skill_loads.record(result, events, request, native)
        result.log_tail = (outcome.stderr_tail + "\n".join(noise[-20:]))[-4000:]
        result.stalled = outcome.stalled
        saw_model_turn = bool(result.messages) or bool(result.turns)
        if outcome.timed_out or outcome.stalled:
            why = (
                f"wall limit of {options.wall_limit_s:g} s"
                if outcome.timed_out
                else f"no output for {getattr(options, 'stall_s', 0):g} s (stuck)"
            )
            if saw_model_turn:
                result.status, result.reason = "timeout", why
            else:  # the endpoint never answered: infrastructure, not the task
                result.status, result.reason = "infra_error", f"no model turn before the {why}"
        if result.cost_usd is None and result.tokens_in is not None:
            result.cost_usd = estimate_cost(
                result.model or options.model, result.tokens_in, result.tokens_out
            )
            result.cost_estimated = result.cost_usd is not None
        return result

    def sealed_command(
        self, argv: list[str], request: AgentRequest[CLIOptionsT], home: Path, files: Sequence[Path] = ()
    ) -> list[str]:
        """``argv`` under the sandbox: the workspace, the private HOME, the CLI's installation, the
        credential files linked into HOME, the options' extra paths and ``files`` (writable)."""
        options = request.options
        credentials = [source for source in self.user_credentials().values() if source.exists()]
        return sealed_argv(
            argv,
            workspace=request.workspace,
            home=home,
            readable=[*installation(self.binary(options)), *extra_paths(options.sandbox_ro)],
            writable=[*credentials, *files, *extra_paths(options.sandbox_rw)],
        )

    def argv_too_long(self, request: AgentRequest[CLIOptionsT]) -> str:
        """Why ``self.executable`` could not be started with E2BIG, and what to do about it."""
        sizes = f"the prompt is {len(request.prompt.encode()):,} bytes"
        if request.system_prompt:
            sizes += f", the system prompt {len(request.system_prompt.encode()):,} bytes"
        return (
            f"{self.name}: could not start {self.executable}: its command line is too long for the OS "
            f"(E2BIG; Linux takes at most 128 KiB per argument); {sizes}. A long skill: use "
            "placement=native (the CLI reads it from the workspace) or prepend rather than placement=system; "
            "a long prompt: shorten it, or use an agent that reads it from stdin; and check that no "
            "extra_args value is that long."
        )

    def complete(self, prompt: str, model: str | None, wall_limit_s: float = 600.0) -> AgentResult:
        """The CLI as a plain model (for the proposers and the judge): no tools, an empty folder, the prompt in, text out."""
        from skilltune.suite import Task

        folder = Path(tempfile.mkdtemp(prefix=f"skilltune-{self.name}-ask-"))
        try:
            (folder / "ws").mkdir()
            (folder / "log").mkdir()
            options = self.parse_options(
                {"model": model, "wall_limit_s": wall_limit_s, **self.plain_model_options()}
            )
            request = AgentRequest(
                task=Task(id="proposer", prompt=prompt),
                prompt=prompt,
                workspace=folder / "ws",
                log_dir=folder / "log",
                candidate_hash="proposer",
                options=options,
            )
            return self.run(request)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def plain_model_options(self) -> dict[str, Any]:
        """Options that make the CLI answer without tools (where it can restrict them)."""
        return {"tools": []} if self.tool_restriction is not None else {}

    @staticmethod
    def failure_status(text: str, saw_model_turn: bool) -> CLIFailure:
        """How a run that ended in error ``text`` counts: infra (an infra-looking message, or no
        model turn yet) or the task's own failure."""
        reason = infra_reason(text)
        if reason is not None:
            return CLIFailure("infra_error", f"{reason}: {text.strip()[:300]}")
        if not saw_model_turn:
            return CLIFailure(
                "infra_error", f"the CLI failed before the first model turn: {text.strip()[:300]}"
            )
        return CLIFailure("task_failed", text.strip()[:300])
