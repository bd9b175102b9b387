"""The AgentBackend contract: one headless rollout of a target agent in a workspace."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator
from typing_extensions import TypeVar

from skilltune.contracts import AgentResult, AgentStatus, Message, Task
from skilltune.skill import Candidate

# AgentResult, AgentStatus and Message live in skilltune.contracts (below the scorers in the layer
# order, which read results); re-exported from here, their first home.
__all__ = [
    "AgentBackend",
    "AgentOptions",
    "AgentRequest",
    "AgentResult",
    "AgentStatus",
    "BackendCheck",
    "Message",
    "OptionsT",
    "Placement",
    "SealSupport",
    "refuse_option",
    "version_number",
]

# native: where the agent discovers skills; system: the system prompt; prepend: before the task;
# tool: listed with the catalogue and loaded through a tool on demand (the direct chat targets only).
Placement = Literal["native", "system", "prepend", "tool"]
SealSupport = Literal["process", "inert", "none"]


class AgentOptions(BaseModel):
    """Options every backend understands. Unknown keys are refused (``extra="forbid"``)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    effort: str | None = None
    max_turns: PositiveInt | None = None
    wall_limit_s: PositiveFloat = Field(default=600.0, description="wall-clock limit per rollout")
    tools: list[str] | None = Field(default=None, description="restrict the agent's tools (difficulty lever)")
    placement: Placement = "native"
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("placement")
    @classmethod
    def _tool_placement(cls, value: Placement) -> Placement:
        if value == "tool" and not cls.offers_load_tool:
            raise ValueError(
                "placement=tool (the skills listed and a load_skill tool) is for the direct chat targets "
                "(--agent openai, anthropic); an agent CLI loads skills itself with placement=native"
            )
        return value

    # True for the options of a backend that can offer the skill through a load_skill tool.
    offers_load_tool: ClassVar[bool] = False


def refuse_option(*options: str, message: str, mode: Literal["before", "after"] = "after") -> Any:
    """A validator for a backend's options model that refuses each of ``options`` set at all (a lever
    the agent does not have), saying ``message``; ``mode`` as pydantic's (``before``: whatever the
    value's type). In the model's body: ``_no_max_turns = refuse_option("max_turns", message=...)``."""

    def refuse(cls: type[AgentOptions], value: Any) -> Any:
        if value is not None:
            raise ValueError(message)
        return value

    return field_validator(*options, mode=mode)(classmethod(refuse))


# A backend's options type (its ``Options`` model): what its methods take, typed per backend. Code
# that holds any backend (the rollout runner, the registry, a plug-in's subclass) names it bare:
# the default Any makes ``AgentBackend`` mean a backend of whichever options.
OptionsT = TypeVar("OptionsT", bound=AgentOptions, default=Any)


class AgentRequest(BaseModel, Generic[OptionsT]):
    """Everything a backend needs for one rollout.

    ``prompt`` is what the agent is given (the task prompt, with the skill in
    front when placement is ``prepend``); ``system_prompt`` carries the skill
    when placement is ``system``. ``candidate_hash`` is ``"noskill"`` for the
    no-skill arm. ``log_dir`` is the rollout's record folder, for raw logs.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: Task
    prompt: str
    system_prompt: str | None = None
    workspace: Path
    log_dir: Path
    candidate_hash: str
    skill_name: str | None = None
    seed: int = 0
    replicate: int = 0
    attempt: int = 0
    sealed: bool = False  # run the agent's process group under the sandbox (skilltune/sandbox.py)
    # The suite's other skills (skilltune/suite/catalogue.py), installed beside the candidate: a CLI
    # finds them in its workspace (placement native); a backend that lists skills itself reads them here.
    catalogue: tuple[Candidate, ...] = ()
    # The skill being tuned (None: the no-skill arm), for a backend that lists it itself (placement tool).
    candidate: Candidate | None = None
    options: OptionsT

    @field_validator("options")
    @classmethod
    def _options_model(cls, value: Any) -> Any:
        # a bare AgentRequest's options are typed Any: still an options model, never a dict
        if not isinstance(value, AgentOptions):
            raise ValueError(f"options must be a backend's Options model, not {type(value).__name__}")
        return value


class BackendCheck(BaseModel):
    """What ``skilltune agents`` prints for one backend."""

    name: str
    installed: bool
    version: str | None = None
    executable: str | None = None
    fix: str | None = None
    notes: list[str] = Field(default_factory=list)


class AgentBackend(ABC, Generic[OptionsT]):
    """A target agent. Subclasses register through the ``skilltune.agents`` entry points.

    Generic over its options: a subclass names its ``Options`` model both as the class attribute
    (what ``parse_options`` validates with) and as the type parameter (what its methods take),
    ``class ClaudeAgent(CLIBackend[ClaudeOptions])`` with ``Options = ClaudeOptions``.

    ``native_skill_dir`` says where the agent discovers a skill folder
    (relative to the workspace); ``native_files`` which single instruction
    files it reads from the workspace root.
    """

    name: ClassVar[str]
    Options: ClassVar[type[AgentOptions]] = AgentOptions
    executable: ClassVar[str | None] = None
    install_hint: ClassVar[str] = ""
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md",)
    # Paths in the workspace the CLI itself writes (its housekeeping, not the agent's work): never in
    # the baseline or the diff. Everything else the agent leaves is, whatever a .gitignore says.
    workspace_noise: ClassVar[tuple[str, ...]] = ()

    # True for a backend that reports whether the agent loaded the skill (``AgentResult.skill_loaded``):
    # only such a backend can run trigger tasks.
    reports_skill_loads: ClassVar[bool] = False
    # True for a backend whose load decision exists only for a skill folder installed natively (placement
    # native): placed otherwise, the skill is in the agent's context on every rollout (every CLI backend).
    loads_need_native: ClassVar[bool] = False

    # True for a backend that starts no process (a direct chat target): its rate limits hold within
    # this process, so the Ray executor refuses it.
    runs_in_process: ClassVar[bool] = False
    # How its rollouts are sealed (skilltune/sandbox.py): "process" (its agent process runs in the
    # run's sandbox: every CLI backend), "inert" (it starts no process and touches nothing outside its
    # workspace: the mock, the direct chat targets; nothing to seal), "none" (it cannot run sealed).
    seal_support: ClassVar[SealSupport] = "none"

    def native_skill_dir(self, skill_name: str) -> str:
        return f".agents/skills/{skill_name}"

    def placement_problem(self, prompt: str, system_prompt: str | None, options: OptionsT) -> str | None:
        """Why this agent cannot take a skill placed so (a limit of its own; None when it can).

        Declared per backend and checked before a candidate is gated, so a proposed edit that
        crosses the limit is discarded with the reason instead of failing the run."""
        return None

    def preflight(self, options: OptionsT) -> None:
        """Raise UsageError for what would fail every rollout (a missing key or model); called before
        anything is written."""
        return

    def missing_executable(self, options: OptionsT) -> str | None:
        """Why this machine cannot start the agent's program (None: it can, or there is none): the
        option ``executable`` names no executable file, or the CLI is not on PATH. Checked before
        anything is written when the rollouts run here (a Ray worker has a PATH of its own)."""
        if self.executable is None:
            return None
        configured = getattr(options, "executable", None)
        if configured:
            if shutil.which(str(configured)) is None:
                return f"{self.name}: --agent-opt executable={configured} is not an executable file (or not on PATH)"
            return None
        if shutil.which(self.executable) is None:
            hint = self.install_hint or f"install {self.executable}"
            return (
                f"{self.name}: `{self.executable}` is not on PATH: {hint}; or give the program's path "
                "with --agent-opt executable=PATH"
            )
        return None

    def task_problem(self, task: Task) -> str | None:
        """Why this backend cannot run ``task`` (None: it can); reported before anything runs."""
        return None

    def skill_load_problem(self, options: OptionsT, candidate: Candidate | None) -> str | None:
        """Why this backend cannot report whether the agent loaded ``candidate`` placed as ``options``
        say (None: it can); a trigger task is refused with it before anything runs."""
        if not self.reports_skill_loads:
            return f"the {self.name} backend cannot report whether the agent loaded the skill"
        if not self.loads_need_native:
            return None
        if options.placement != "native":
            return (
                f"with placement={options.placement} the skill is in the agent's context on every rollout, "
                "so the agent never decides whether to load it; use placement=native (the default), where "
                f"{self.name} installs the skill as it installs skills and loads it on demand"
            )
        if candidate is not None and candidate.kind != "folder":
            return (
                f"{candidate.main} is a single instruction file, which {self.name} reads on every rollout; "
                "trigger tasks need a skill folder (a SKILL.md with a name and a description)"
            )
        return None

    def skill_problem(self, candidate: Candidate) -> str | None:
        """Why this backend cannot take ``candidate`` (None: it can)."""
        return None

    def parse_options(self, raw: dict[str, Any]) -> OptionsT:
        # Options and the type parameter name the same model (the class docstring): a ClassVar
        # cannot hold a type parameter, so this is the one place that says so to mypy.
        return cast(OptionsT, self.Options.model_validate(raw))

    def check(self) -> BackendCheck:
        if self.executable is None:
            return BackendCheck(name=self.name, installed=True, version="built-in")
        path = shutil.which(self.executable)
        if path is None:
            return BackendCheck(
                name=self.name, installed=False, fix=self.install_hint or f"install {self.executable}"
            )
        return BackendCheck(name=self.name, installed=True, executable=path, version=_version(path))

    def cache_identity(self, options: OptionsT) -> dict[str, Any]:
        """What decides this agent's behaviour besides ``options`` (the model or endpoint it takes
        from the environment, its version): part of every rollout's cache key."""
        return {}

    @abstractmethod
    def run(self, request: AgentRequest[OptionsT]) -> AgentResult: ...


def _version(executable: str) -> str | None:
    """The first line ``EXE --version`` prints (for ``skilltune agents``), or None."""
    try:
        out = subprocess.run(
            [executable, "--version"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


_VERSION_NUMBER = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.]+)?")
_VERSION_NUMBERS: dict[str, str] = {}  # executable -> its version number, once found
_VERSION_LOCK = threading.Lock()


def version_number(executable: str) -> str | None:
    """The version number of ``EXE --version`` (e.g. ``2.1.4``), remembered for the process once
    found; None when it cannot be read (not remembered: the next call asks again). Part of cache
    keys, so only the number, never an error message or a banner."""
    with _VERSION_LOCK:
        if executable in _VERSION_NUMBERS:
            return _VERSION_NUMBERS[executable]
    found = _VERSION_NUMBER.search(_version(executable) or "")
    if found is None:
        return None
    with _VERSION_LOCK:
        _VERSION_NUMBERS[executable] = found.group(0)
    return found.group(0)
