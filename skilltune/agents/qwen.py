"""Qwen Code (``qwen``, npm @qwen-code/qwen-code) as a target agent, headless.

One rollout runs, in the workspace, with stdin closed::

    qwen --auth-type openai -o stream-json --approval-mode yolo [--model=M]
         [--max-session-turns N] [--append-system-prompt=SKILL]
         [--core-tools=T1,T2 --exclude-tools=...] [EXTRA...] --prompt=PROMPT

The prompt goes in ``--prompt=`` as one argument: qwen 0.15 puts whatever follows ``--``
aside (it then finds no prompt), and a positional prompt starting with ``---`` (front
matter) is taken for an option. A prompt too long for argv goes to stdin, which qwen
reads as the prompt.

Endpoint: the user's ``OPENAI_*`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
``OPENAI_MODEL``), ``QWEN_*`` and ``DASHSCOPE_*`` variables pass through; ``model=``
overrides ``OPENAI_MODEL``. ``auth_type`` picks qwen's ``--auth-type`` (openai by
default; anthropic, gemini and vertex-ai bring the ``ANTHROPIC_*`` / ``GEMINI_*`` /
``GOOGLE_*`` variables along).

Isolation: ``QWEN_HOME`` is ``<private HOME>/.qwen`` with skilltune's ``settings.json``:
managed auto-memory, auto-dream and auto-skill off (the memory agent sends extra
requests in the background), usage statistics (a RUM endpoint), telemetry, auto-update
and chat recording off, qwen's own retries bounded (``retries``), and its shell tool on
plain pipes (``tools.shell.enableInteractiveShell`` false): on a pseudo-terminal, qwen 0.15
takes a command's output when node-pty reports the exit, which can come before the last of
the output (node-pty issue 72), so an agent on a loaded machine was shown a command's output
without its end. The user's
settings, skills (``~/.qwen/skills``, ``~/.agents/skills``), QWEN.md / AGENTS.md memory,
extensions, MCP servers and sessions never reach the agent, nor do ``QWEN_RUNTIME_DIR``,
``QWEN_CODE_MEMORY_*``, the IDE and sandbox variables. Linked in (never copied), from the
user's ``QWEN_HOME`` or ``~/.qwen``: ``oauth_creds.json`` (a ``qwen`` OAuth login) and
``.env`` (where qwen's docs keep the API key). ``QWEN_CODE_NO_RELAUNCH=true`` keeps qwen
from starting itself a second time with a larger heap (saves about a second per rollout).

Retries: qwen makes up to 7 attempts with backoff (1.5 s doubling, about 75 s in all) on
429 and 5xx whatever its settings, honouring ``retry-after`` (whole seconds) on 429 only;
``retries`` (``model.generationConfig.maxRetries``) bounds the retries of its OpenAI client
and of its rate-limit loop on top of those (qwen's default: 3 and 10 with delays from
60 s up to 5 min). ``QWEN_CODE_UNATTENDED_RETRY`` (the user's) makes qwen retry
capacity errors forever: the wall limit then ends the rollout.

Levers: ``tools=`` becomes ``--core-tools`` (qwen names: read_file, write_file, edit,
run_shell_command, list_directory, glob, grep_search, ...) and ``--exclude-tools`` for
qwen's tools that ``--core-tools`` leaves on (agent, tool_search, task_stop, send_message,
ask_user_question, exit_plan_mode); ``skill`` is kept when a skill folder is placed
natively. ``effort`` is ``model.generationConfig.reasoning.effort`` (sent as
``reasoning: {effort}``). ``max_turns`` is ``--max-session-turns``.

Placement: a skill folder goes to ``<ws>/.qwen/skills/<name>/`` (listed to the model,
loaded by the ``skill`` tool); a single instruction file may be QWEN.md or AGENTS.md
(qwen reads both from the workspace); ``placement=system`` is ``--append-system-prompt``.
A system prompt over 100 kB (one argv string holds at most 128 KiB on Linux; qwen has no
file form of that flag) is written instead to ``<QWEN_HOME>/rules/skilltune-system.md``, a
global rule: qwen puts it, between ``--- Rule from: ... ---`` and ``--- End of Rule from:
... ---`` lines, at the end of its system prompt (after the context files), which is where
``--append-system-prompt`` would have put it. Rules are taken as they are (no ``@file``
imports, unlike QWEN.md, which would pull files of the private home such as the linked
``.env`` into the prompt), except that qwen strips their HTML comments and reads a leading
front matter as the rule's own: the file starts with a blank line (qwen trims it) so the
skill's front matter is kept, and a skill holding ``<!--`` is refused (UsageError) rather
than sent without its comments.

Transcript: qwen's stream-json is claude-like (``system``/``init``, ``assistant`` and
``user`` messages, a final ``result`` with ``usage`` and ``num_turns``). An API failure
is no error event: qwen prints it as an assistant text ``[API Error: ...]`` (usage 0) and
still ends with a ``success`` result and exit code 0; such a message is no model turn.
Over ``--max-session-turns`` qwen exits 53 without a result event. qwen reports no cost:
it is estimated from the price table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, NonNegativeInt

from skilltune.agents.base import AgentBackend, AgentRequest, AgentResult, BackendCheck, Message
from skilltune.agents.cli import CLIBackend, CLIFailure, CLIOptions, infra_http_status, too_long_for_argv
from skilltune.agents.home import UserFile
from skilltune.agents.skillload import QWEN
from skilltune.agents.transcript import assistant_blocks, stream_result, tool_result_messages
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome

NO_TOOLS = "skilltune-no-tools"  # an unknown name: --core-tools then enables no built-in tool
# Tools qwen keeps on whatever --core-tools says (meta and interaction tools).
ALWAYS_ON_TOOLS = (
    "agent",
    "tool_search",
    "task_stop",
    "send_message",
    "ask_user_question",
    "exit_plan_mode",
    "skill",
)
SYSTEM_RULE = "rules/skilltune-system.md"  # in QWEN_HOME: a system prompt too long for argv
_MAX_TURNS_EXIT = 53
_API_ERROR = re.compile(r"^\s*\[API Error:\s*(.*)", re.S)
_STATUS = re.compile(r"\b([1-5]\d\d)\b")
_AUTH_PREFIXES: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_",),
    "gemini": ("GEMINI_", "GOOGLE_"),
    "vertex-ai": ("GOOGLE_",),
}

AuthType = Literal["openai", "anthropic", "gemini", "vertex-ai", "qwen-oauth"]


class QwenOptions(CLIOptions):
    """``--agent-opt`` keys of the qwen backend."""

    effort: Literal["low", "medium", "high", "max"] | None = Field(
        default=None, description="reasoning effort (model.generationConfig.reasoning.effort)"
    )
    auth_type: AuthType = Field(default="openai", description="qwen --auth-type")
    retries: NonNegativeInt = Field(
        default=0,
        description="qwen's client and rate-limit retries (model.generationConfig.maxRetries); qwen "
        "still makes up to 7 attempts on 429/5xx, and skilltune retries infra errors itself",
    )


class QwenAgent(CLIBackend[QwenOptions]):
    name = "qwen"
    Options = QwenOptions
    skill_loads = QWEN  # how its events show a skill load (agents/skillload.py)
    executable: ClassVar[str] = "qwen"
    long_prompt_via_stdin: ClassVar[bool] = True
    install_hint: ClassVar[str] = (
        "npm install -g @qwen-code/qwen-code (or `make agent-clis` in a skilltune checkout); "
        "then set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL"
    )
    native_files: ClassVar[tuple[str, ...]] = ("QWEN.md", "AGENTS.md")
    env_prefixes: ClassVar[tuple[str, ...]] = ("OPENAI_", "QWEN_", "DASHSCOPE_")
    # the user's variables that would bring their own configuration (or sandbox, IDE) into a rollout
    dropped_env_names: ClassVar[tuple[str, ...]] = (
        "QWEN_HOME",
        "QWEN_RUNTIME_DIR",
        "QWEN_CODE_TRUSTED_FOLDERS_PATH",
        "QWEN_CODE_MEMORY_BASE_DIR",
        "QWEN_CODE_MEMORY_LOCAL",
        "QWEN_CODE_IDE_WORKSPACE_PATH",
        "QWEN_CODE_IDE_SERVER_PORT",
        "QWEN_CODE_IDE_SERVER_STDIO_COMMAND",
        "QWEN_CODE_IDE_SERVER_STDIO_ARGS",
        "QWEN_SANDBOX",
        "QWEN_SANDBOX_IMAGE",
        "QWEN_SANDBOX_PROXY_COMMAND",
    )
    credentials: ClassVar[Mapping[str, UserFile]] = {
        ".qwen/oauth_creds.json": UserFile("oauth_creds.json", "QWEN_HOME", ".qwen"),  # a qwen OAuth login
        ".qwen/.env": UserFile(".env", "QWEN_HOME", ".qwen"),  # where qwen's docs keep the API key
    }
    settings_file: ClassVar[str | None] = ".qwen/settings.json"  # in the private QWEN_HOME
    tool_restriction: ClassVar[str | None] = (
        "--core-tools (qwen names, e.g. tools=read_file,edit; skill is kept for a native skill)"
    )

    def native_skill_dir(self, skill_name: str) -> str:
        return f".qwen/skills/{skill_name}"

    def check(self) -> BackendCheck:
        found = AgentBackend.check(self)
        base = os.environ.get("OPENAI_BASE_URL")
        found.notes += [
            f"tools=... restricts qwen's tools with {self.tool_restriction}",
            "cost is estimated from the price table (qwen reports tokens, not cost)",
            "qwen makes up to 7 attempts (about 75 s) on 429/5xx before it gives up, whatever retries= says",
            (
                f"endpoint: {base} (Chat Completions), model {os.environ.get('OPENAI_MODEL') or '(model= or OPENAI_MODEL)'}"
                if base
                else "endpoint: set OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL (an OpenAI-compatible "
                "Chat Completions endpoint)"
            ),
        ]
        return found

    # --- isolation ----------------------------------------------------------------------------
    @staticmethod
    def qwen_home(home: Path) -> Path:
        return home / ".qwen"

    def env_selection(self, options: QwenOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The declared variables, and those of the endpoint ``auth_type`` picks (ANTHROPIC_*...)."""
        prefixes, names = super().env_selection(options)
        return (*prefixes, *_AUTH_PREFIXES.get(options.auth_type, ())), names

    def default_settings(self, home: Path, request: AgentRequest[QwenOptions]) -> dict[str, Any]:
        options = request.options
        generation: dict[str, Any] = {"maxRetries": options.retries}
        if options.effort:
            generation["reasoning"] = {"effort": options.effort}
        return {
            "memory": {
                "enableManagedAutoMemory": False,
                "enableManagedAutoDream": False,
                "enableAutoSkill": False,
            },
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "chatRecording": False},
            "model": {"generationConfig": generation},
            # pipes, not a pseudo-terminal: node-pty can report the exit before the output's end
            "tools": {"shell": {"enableInteractiveShell": False}},
        }

    def placement_problem(self, prompt: str, system_prompt: str | None, options: QwenOptions) -> str | None:
        """A system-placed skill too long for ``--append-system-prompt`` goes to a rule file, from which
        qwen strips HTML comments: such a skill holding ``<!--`` would not reach the model as written."""
        if options.placement != "system" or not system_prompt or not too_long_for_argv(system_prompt):
            return None
        if "<!--" not in system_prompt:
            return None
        return (
            f"qwen: the system-placed skill is {len(system_prompt.encode()):,} bytes, too long for "
            "--append-system-prompt (Linux allows 128 KiB per argument), so it would go to a qwen "
            "rule file, from which qwen strips HTML comments (<!-- ... -->); remove them from the "
            "skill, or use placement=native or prepend"
        )

    def prepare_home(self, home: Path, request: AgentRequest[QwenOptions]) -> None:
        super().prepare_home(home, request)
        system = self.system_rule(request)
        if system is not None:
            problem = self.placement_problem(request.prompt, system, request.options)
            if problem is not None:
                raise UsageError(problem)
            rule = self.qwen_home(home) / SYSTEM_RULE
            rule.parent.mkdir(parents=True, exist_ok=True)
            # the blank line keeps a front matter of the skill from being read as the rule's own
            rule.write_text("\n" + system, encoding="utf-8")

    @staticmethod
    def system_rule(request: AgentRequest[QwenOptions]) -> str | None:
        """The system-placed skill when it is too long for ``--append-system-prompt`` (a rule file)."""
        system = request.system_prompt
        if request.options.placement != "system" or not system or not too_long_for_argv(system):
            return None
        return system

    def cli_env(self, home: Path, request: AgentRequest[QwenOptions]) -> dict[str, str]:
        return {
            "QWEN_HOME": str(self.qwen_home(home)),
            "QWEN_CODE_NO_RELAUNCH": "true",
            "QWEN_DISABLE_AUTO_TITLE": "1",
            "NO_COLOR": "1",
        }

    # --- the command --------------------------------------------------------------------------
    def tools_for(self, request: AgentRequest[QwenOptions]) -> tuple[list[str], list[str]] | None:
        """(``--core-tools``, ``--exclude-tools``) of a restricted rollout, or None for qwen's default set."""
        tools = QWEN.keep_tool(request.options.tools, self.skill_placed(request))
        if tools is None:
            return None
        excluded = [t for t in ALWAYS_ON_TOOLS if t not in tools]
        return [t for t in tools if t not in ALWAYS_ON_TOOLS] or [NO_TOOLS], excluded

    def command(self, request: AgentRequest[QwenOptions], home: Path) -> list[str]:
        options = request.options
        argv = [
            self.binary(options), "--auth-type", options.auth_type,
            "-o", "stream-json", "--approval-mode", "yolo",
        ]  # fmt: skip
        if options.model:
            argv.append(f"--model={options.model}")
        if options.max_turns:
            argv += ["--max-session-turns", str(options.max_turns)]
        if options.placement == "system" and request.system_prompt and self.system_rule(request) is None:
            argv.append(f"--append-system-prompt={request.system_prompt}")
        restricted = self.tools_for(request)
        if restricted is not None:
            core, excluded = restricted
            argv.append(f"--core-tools={','.join(core)}")
            if excluded:
                argv.append(f"--exclude-tools={','.join(excluded)}")
        argv += options.extra_args
        if not too_long_for_argv(request.prompt):
            argv.append(f"--prompt={request.prompt}")
        return argv

    def plain_model_options(self) -> dict[str, Any]:
        return {"tools": [], "max_turns": 1}

    # --- the event stream ---------------------------------------------------------------------
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[QwenOptions]
    ) -> AgentResult:
        messages: list[Message] = []
        tool_names: dict[str, str] = {}
        api_errors: list[str] = []
        model: str | None = None
        final = ""
        turns = 0
        tokens_in = tokens_out = 0
        result: dict[str, Any] | None = None
        for event in events:
            kind = event.get("type")
            if kind == "system" and event.get("subtype") == "init":
                model = str(event.get("model") or "") or model
            elif kind == "assistant":
                message = event.get("message") or {}
                content = message.get("content") or []
                blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
                texts = [
                    str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                ]
                error = next((m.group(1) for t in texts if (m := _API_ERROR.match(t))), None)
                if error is not None:
                    api_errors.append(error.strip())
                    continue
                turns += 1
                model = str(message.get("model") or "") or model
                usage = message.get("usage") or {}
                tokens_in += int(usage.get("input_tokens") or 0)
                tokens_out += int(usage.get("output_tokens") or 0)
                said, text = assistant_blocks(blocks, tool_names)
                messages += said
                final = text or final
            elif kind == "user":
                messages += tool_result_messages((event.get("message") or {}).get("content"), tool_names)
            elif kind == "result":
                result = event
        found = stream_result(
            outcome,
            events,
            messages,
            final,
            model=model or request.options.model,
            turns=turns,
            tokens=(tokens_in, tokens_out) if turns else (None, None),
        )
        if result is not None:
            usage = result.get("usage")
            if isinstance(usage, dict) and turns:
                found.tokens_in = int(usage.get("input_tokens") or 0)
                found.tokens_out = int(usage.get("output_tokens") or 0)
            result_text = str(result.get("result") or "")
            if _API_ERROR.match(result_text) or api_errors:
                text = api_errors[-1] if api_errors else result_text
                found.status, found.reason = self.classify(text, saw_model_turn=turns > 0)
            elif result.get("is_error") or str(result.get("subtype") or "success") != "success":
                detail = result_text or str(result.get("subtype"))
                found.status, found.reason = self.classify(detail, saw_model_turn=turns > 0)
            return found
        if outcome.timed_out or outcome.stalled:
            found.status = "timeout"  # the runner decides: timeout after a model turn, else infra_error
            return found
        stderr = outcome.stderr_tail.strip()
        if outcome.returncode == _MAX_TURNS_EXIT or "max session turns" in stderr.lower():
            found.status, found.reason = "task_failed", f"max turns reached ({turns} turns)"
            return found
        text = "\n".join([*api_errors, stderr]).strip() or (
            f"qwen exited with code {outcome.returncode} without a result event"
        )
        found.status, found.reason = self.classify(text, saw_model_turn=turns > 0)
        return found

    @classmethod
    def classify(cls, text: str, saw_model_turn: bool) -> CLIFailure:
        """How a failed qwen run counts: by the HTTP status it starts with, then by the shared rules."""
        found = _STATUS.match(text.strip())
        if found and infra_http_status(int(found.group(1))):
            return CLIFailure("infra_error", f"API error {text.strip()[:300]}")
        return cls.failure_status(text, saw_model_turn)
