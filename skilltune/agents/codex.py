"""OpenAI Codex CLI (``codex exec --json``) as a target agent.

One rollout runs::

    codex exec --json --skip-git-repo-check --ephemeral --color never -s workspace-write
               -C WS -o LOG/codex-last-message.txt [-m MODEL] [EXTRA...] -- PROMPT

with stdin closed (a prompt over 100 kB goes to stdin instead, the argument being ``-``:
one argv string holds at most 128 KiB on Linux) and a private ``CODEX_HOME`` (``<private HOME>/.codex``) whose
``config.toml`` skilltune writes: update checks, analytics, feedback and history
off; the model's reasoning effort; the skill as ``developer_instructions`` when
placement is ``system`` (a file, so no length limit); and, when the user points codex at an endpoint, a model
provider for it. The user's own ``config.toml``, skills, rules and sessions never
reach the agent; only ``auth.json`` (a ``codex login``) is linked in, so a
logged-in codex keeps working and a refreshed token is written through the link.

Endpoint variables (the user's environment, as with codex itself):

- ``CODEX_BASE_URL`` (codex-specific, wins) or ``OPENAI_BASE_URL``: an OpenAI
  *Responses* endpoint (codex speaks nothing else), e.g. ``http://host:8000/v1``.
  It becomes provider ``skilltune-endpoint`` with ``wire_api = "responses"`` and
  codex's own retries bounded by the ``retries`` option. Its key is read from
  ``CODEX_API_KEY``, else ``OPENAI_API_KEY``; with neither, the linked
  ``auth.json`` login is used (``requires_openai_auth``).
- Neither set: codex's built-in OpenAI provider with its own login or
  ``CODEX_API_KEY`` / ``OPENAI_API_KEY``.

Levers: codex has no max-turns flag (``max_turns`` is refused: ``wall_limit_s``
and ``stall_s`` bound a rollout) and cannot restrict its tools to a list
(``tools`` is refused); what it has is ``sandbox=read-only`` (no writes),
``shell=false`` (no shell tool: edits through apply_patch only) and
``web_search=disabled``.

Native placement: a skill folder goes to ``.agents/skills/<name>/`` (codex lists
its name and description to the model; there is no skill tool, the model reads
SKILL.md itself); a single instruction file must be ``AGENTS.md``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, NonNegativeInt

from skilltune.agents.base import (
    AgentBackend,
    AgentRequest,
    AgentResult,
    BackendCheck,
    Message,
    refuse_option,
)
from skilltune.agents.cli import CLIBackend, CLIFailure, CLIOptions
from skilltune.agents.home import UserFile
from skilltune.agents.skillload import CODEX
from skilltune.agents.transcript import clip, stream_result
from skilltune.process import ProcessOutcome

PROVIDER = "skilltune-endpoint"
LAST_MESSAGE_FILE = "codex-last-message.txt"
BASE_URL_VARS = ("CODEX_BASE_URL", "OPENAI_BASE_URL")
KEY_VARS = ("CODEX_API_KEY", "OPENAI_API_KEY")

# codex's own wording for failures that are the endpoint's, not the task's.
_CODEX_INFRA: list[tuple[str, re.Pattern[str]]] = [
    ("overloaded", re.compile(r"high demand|temporar(y|ily) (error|unavailable)|server[_ ]error|internal server error", re.I)),
    ("network error", re.compile(r"stream disconnected|error sending request|connection closed|error decoding response|timed out|timeout", re.I)),
    ("usage limit", re.compile(r"usage limit|hit your limit|insufficient_quota", re.I)),
    ("authentication failed", re.compile(r"missing environment variable|not logged in|codex login|refresh token|token (expired|could not be refreshed)", re.I)),
]  # fmt: skip

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


class CodexOptions(CLIOptions):
    """``--agent-opt`` keys of the codex backend."""

    effort: Effort | None = Field(
        default=None, description="model_reasoning_effort (none, minimal, low, medium, high, xhigh)"
    )
    sandbox: Literal["workspace-write", "read-only", "danger-full-access"] = Field(
        default="workspace-write", description="codex -s: read-only is the no-writes lever"
    )
    shell: bool = Field(default=True, description="false: no shell tool (edits through apply_patch only)")
    web_search: Literal["disabled", "cached", "live"] | None = Field(
        default=None, description="codex's web_search setting (default: codex's own)"
    )
    retries: NonNegativeInt = Field(
        default=1,
        description="codex's own request/stream retries against CODEX_BASE_URL / OPENAI_BASE_URL "
        "(skilltune retries infra errors itself)",
    )

    _no_max_turns = refuse_option(
        "max_turns",
        message="codex has no max-turns limit; a codex rollout is bounded by wall_limit_s (and stall_s)",
    )
    _no_tool_list = refuse_option(
        "tools",
        message="codex cannot restrict its tools to a list; its levers are sandbox=read-only (no writes), "
        "shell=false (no shell tool: apply_patch edits only) and web_search=disabled",
    )


def user_endpoint(environ: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """(base URL, the variable holding its key) from the user's environment."""
    env = os.environ if environ is None else environ
    base = next((env[v] for v in BASE_URL_VARS if env.get(v)), None)
    key_var = next((v for v in KEY_VARS if env.get(v)), None)
    return base, key_var


class CodexAgent(CLIBackend[CodexOptions]):
    name = "codex"
    Options = CodexOptions
    skill_loads = CODEX  # how its events show a skill load (agents/skillload.py)
    executable = "codex"
    long_prompt_via_stdin: ClassVar[bool] = True
    install_hint = "npm install -g @openai/codex (or `make agent-clis` in a checkout)"
    env_prefixes: ClassVar[tuple[str, ...]] = ("OPENAI_",)
    env_names: ClassVar[tuple[str, ...]] = (
        "CODEX_API_KEY",
        "CODEX_BASE_URL",
        "CODEX_ACCESS_TOKEN",
        "CODEX_CA_CERTIFICATE",
    )
    credentials: ClassVar[Mapping[str, UserFile]] = {
        ".codex/auth.json": UserFile("auth.json", "CODEX_HOME", ".codex")
    }
    settings_file: ClassVar[str | None] = ".codex/config.toml"
    tool_restriction: ClassVar[str | None] = None
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md",)

    def native_skill_dir(self, skill_name: str) -> str:
        return f".agents/skills/{skill_name}"

    def ignored_env(self, options: CodexOptions) -> dict[str, str]:
        """codex reads its model from its own config, never OPENAI_MODEL (which qwen and opencode read):
        without a model option it sends its default model to the endpoint."""
        if os.environ.get("OPENAI_MODEL") and not options.model:
            return {"OPENAI_MODEL": "codex takes its model from --agent-opt model=NAME"}
        return {}

    def check(self) -> BackendCheck:
        found = AgentBackend.check(self)  # CLIBackend's generic tools note is said more precisely below
        base, key_var = user_endpoint()
        found.notes += [
            "tools=... is refused: codex cannot restrict its tools to a list; levers: sandbox=read-only, "
            "shell=false (apply_patch only), web_search=disabled",
            "max_turns is refused: codex has no max-turns flag; wall_limit_s (and stall_s) bound a rollout",
            "cost is estimated from the price table (codex reports tokens, not cost)",
            (
                f"endpoint: {base} (Responses API) with key from {key_var or 'the codex login'}"
                if base
                else "endpoint: codex's own (codex login, or CODEX_API_KEY/OPENAI_API_KEY); "
                "set CODEX_BASE_URL or OPENAI_BASE_URL for another Responses endpoint"
            ),
        ]
        return found

    # --- private CODEX_HOME ---------------------------------------------------------------------
    @staticmethod
    def codex_home(home: Path) -> Path:
        return home / ".codex"

    def default_settings(self, home: Path, request: AgentRequest[CodexOptions]) -> dict[str, Any]:
        """The private config.toml of one rollout."""
        options = request.options
        config: dict[str, Any] = {
            "check_for_update_on_startup": False,
            "cli_auth_credentials_store": "file",  # auth.json, the linked file, never a keyring
        }
        if options.effort:
            config["model_reasoning_effort"] = options.effort
        if options.placement == "system" and request.system_prompt:
            config["developer_instructions"] = request.system_prompt
        if options.web_search:
            config["web_search"] = options.web_search
        config |= {
            "analytics": {"enabled": False},
            "feedback": {"enabled": False},
            "history": {"persistence": "none"},
        }
        if not options.shell:
            config["features"] = {"shell_tool": False}
        base, key_var = user_endpoint()
        if base:
            config["model_provider"] = PROVIDER
            provider: dict[str, Any] = {"name": PROVIDER, "base_url": base, "wire_api": "responses"}
            if key_var:
                provider["env_key"] = key_var
            else:
                provider["requires_openai_auth"] = True
            provider["request_max_retries"] = options.retries
            provider["stream_max_retries"] = options.retries
            config["model_providers"] = {PROVIDER: provider}
        return config

    def prepare_home(self, home: Path, request: AgentRequest[CodexOptions]) -> None:
        super().prepare_home(home, request)
        (request.log_dir / LAST_MESSAGE_FILE).unlink(missing_ok=True)

    def sealed_command(
        self, argv: list[str], request: AgentRequest[CodexOptions], home: Path, files: Sequence[Path] = ()
    ) -> list[str]:
        # codex writes its last message (-o) into the record folder, which stays outside the sandbox:
        # that one file is made and bound alone.
        last = request.log_dir / LAST_MESSAGE_FILE
        last.touch()
        return super().sealed_command(argv, request, home, [*files, last])

    def cli_env(self, home: Path, request: AgentRequest[CodexOptions]) -> dict[str, str]:
        return {"CODEX_HOME": str(self.codex_home(home))}

    def command(self, request: AgentRequest[CodexOptions], home: Path) -> list[str]:
        options = request.options
        argv = [
            self.binary(options),
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--color",
            "never",
            "-s",
            options.sandbox,
            "-C",
            str(request.workspace),
            "-o",
            str(request.log_dir / LAST_MESSAGE_FILE),
        ]
        if options.model:
            argv += ["-m", options.model]
        if self.stdin_text(request) is not None:  # codex exec reads the prompt from stdin when it is "-"
            return [*argv, *options.extra_args, "--", "-"]
        return [*argv, *options.extra_args, "--", request.prompt]

    def plain_model_options(self) -> dict[str, Any]:
        """No writes, no shell, no web search: codex as a plain model for the proposer."""
        return {"sandbox": "read-only", "shell": False, "web_search": "disabled"}

    # --- the event stream -----------------------------------------------------------------------
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[CodexOptions]
    ) -> AgentResult:
        options = request.options
        messages: list[Message] = []
        final = ""
        tokens_in = tokens_out = 0
        usage_seen = completed = False
        actions = 0
        errors: list[str] = []
        failure: str | None = None
        for event in events:
            kind = event.get("type")
            if kind == "item.completed" and isinstance(event.get("item"), dict):
                item = event["item"]
                item_type = item.get("type")
                if item_type == "error":
                    errors.append(str(item.get("message", "")))
                    continue
                if item_type != "reasoning":
                    actions += 1
                if item_type == "agent_message":
                    final = str(item.get("text") or "")
                messages += _item_messages(item, request.workspace)
            elif kind == "turn.completed":
                completed = True
                usage = event.get("usage") or {}
                if usage:
                    usage_seen = True
                    tokens_in += int(usage.get("input_tokens") or 0)
                    tokens_out += int(usage.get("output_tokens") or 0)
            elif kind == "turn.failed":
                error = event.get("error") or {}
                failure = str(error.get("message") if isinstance(error, dict) else error)
            elif kind == "error":
                errors.append(str(event.get("message", "")))
        if not final:
            last = request.log_dir / LAST_MESSAGE_FILE
            if last.is_file():
                final = last.read_text(encoding="utf-8", errors="replace").strip()
                if final:
                    messages.append(Message(role="assistant", content=final))
        result = stream_result(
            outcome,
            events,
            messages,
            final,
            model=options.model,
            turns=actions or None,
            tokens=(tokens_in, tokens_out) if usage_seen else (None, None),
        )
        if failure is None and completed and outcome.returncode == 0:
            return result
        text = failure or (errors[-1] if errors else "") or outcome.stderr_tail.strip()
        if not text:
            text = (
                f"codex exited with code {outcome.returncode}"
                if outcome.returncode
                else "codex ended without completing its turn"
            )
        result.status, result.reason = self.classify(text, saw_model_turn=actions > 0)
        return result

    @classmethod
    def classify(cls, text: str, saw_model_turn: bool) -> CLIFailure:
        """How a failed codex run counts: by codex's own wording first, then by the shared rules."""
        for reason, pattern in _CODEX_INFRA:
            if pattern.search(text):
                return CLIFailure("infra_error", f"{reason}: {text.strip()[:300]}")
        return cls.failure_status(text, saw_model_turn)


def _relative(path: str, workspace: Path) -> str:
    for root in {str(workspace), str(workspace.resolve())}:
        if path.startswith(root + os.sep):
            return path[len(root) + 1 :]
    return path


def _item_messages(item: dict[str, Any], workspace: Path) -> list[Message]:
    """The conversation messages of one completed codex item (tool activity and text)."""
    kind = item.get("type")
    status = item.get("status")
    if kind == "agent_message":
        return [Message(role="assistant", content=str(item.get("text") or ""))]
    if kind == "reasoning":
        text = str(item.get("text") or "").strip()
        return [Message(role="assistant", content=f"[reasoning] {text}")] if text else []
    if kind == "command_execution":
        output = str(item.get("aggregated_output") or "")
        head = f"[exit {item.get('exit_code')}]" if item.get("exit_code") is not None else f"[{status}]"
        return [
            Message(role="assistant", content=f"[tool shell] {item.get('command', '')}"),
            Message(role="tool", content=clip(f"{head}\n{output}".rstrip())),
        ]
    if kind == "file_change":
        changes = item.get("changes") or []
        listed = ", ".join(
            f"{c.get('kind', '?')} {_relative(str(c.get('path', '?')), workspace)}"
            for c in changes
            if isinstance(c, dict)
        )
        return [
            Message(role="assistant", content=f"[tool apply_patch] {listed}"),
            Message(role="tool", content=f"[{status}]"),
        ]
    if kind == "mcp_tool_call":
        call = f"{item.get('server', '?')}.{item.get('tool', '?')}"
        args = json.dumps(item.get("arguments"), ensure_ascii=False)
        outcome = item.get("error") or item.get("result")
        return [
            Message(role="assistant", content=f"[tool {call}] {clip(args, 500)}"),
            Message(role="tool", content=clip(f"[{status}] {json.dumps(outcome, ensure_ascii=False)}")),
        ]
    if kind == "web_search":
        return [Message(role="assistant", content=f"[tool web_search] {item.get('query', '')}")]
    if kind == "todo_list":
        steps = item.get("items") or []
        lines = [
            f"- [{'x' if s.get('completed') else ' '}] {s.get('text', '')}"
            for s in steps
            if isinstance(s, dict)
        ]
        return [Message(role="assistant", content="[plan]\n" + "\n".join(lines))]
    return [Message(role="assistant", content=clip(f"[{kind}] {json.dumps(item, ensure_ascii=False)}", 500))]
