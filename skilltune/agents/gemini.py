"""Google's Gemini CLI (``gemini -p ... -o stream-json``) as a target agent.

One rollout runs::

    gemini -m MODEL --prompt=PROMPT -o stream-json --skip-trust --approval-mode yolo [EXTRA...]

in the workspace, with stdin closed (a long prompt aside, see below) and a private HOME
whose ``~/.gemini/settings.json`` skilltune writes: the auth type
(``security.auth.selectedType``; without it gemini exits 41), update checks, usage
statistics, telemetry, IDE and auto-memory off, gemini's own request attempts
(``general.maxAttempts``; skilltune retries infra errors itself), the turn limit
(``model.maxSessionTurns``), the tool allowlist (``tools.core``) and the thinking effort
(a ``modelConfigs.overrides`` entry for the model). The prompt goes in as
``--prompt=TEXT``, one argv word, so a prompt that starts with ``---`` (front matter) is
never read as an option. A prompt over 100 kB (one argv string holds at most 128 KiB on
Linux) goes to stdin instead, with no ``--prompt`` at all: gemini takes a piped stdin as
the prompt (headless, stdout being a pipe); with ``--prompt`` as well it would send
stdin, a blank line, then that text. ``-m`` is always given: without it gemini first asks
a router model (a JSON side call) which model to use.

Environment: the user's ``GEMINI_*`` / ``GOOGLE_*`` variables pass through (``GEMINI_API_KEY``,
``GOOGLE_GEMINI_BASE_URL``, Vertex and Code Assist variables), except those that would bring the
user's own configuration in: ``GEMINI_CLI_HOME`` is set to the private HOME, ``GEMINI_SYSTEM_MD``
to ``false`` (a custom system prompt of the user's), the IDE-companion and trusted-folder
variables are dropped. ``GEMINI_CLI_NO_RELAUNCH`` keeps gemini in one process (it otherwise
restarts itself with a larger heap, ~2 s per rollout). Only credential files are linked from the
user's gemini home (``$GEMINI_CLI_HOME`` or ``$HOME``): ``.gemini/oauth_creds.json``,
``google_accounts.json``, ``gemini-credentials.json`` (the file keychain), ``.gemini/.env`` (where
gemini's docs put ``GEMINI_API_KEY``) and gcloud's application-default credentials (Vertex AI);
never settings.json, GEMINI.md, skills, policies or sessions.

Placement: ``native`` puts a skill folder in ``.gemini/skills/<name>/`` (listed in the system
prompt; the model loads it with the ``activate_skill`` tool: the load decision) and a single file
must be ``GEMINI.md`` (sent in the first user message); with ``tools`` restricted,
``activate_skill`` stays allowed when a skill folder is placed. ``system``: gemini has no
append-to-system-prompt flag (``GEMINI_SYSTEM_MD`` *replaces* the whole built-in prompt, tools'
rules included), so the skill goes into the private ``~/.gemini/GEMINI.md``, the global context
file, which gemini puts into its system instruction.

Outcomes: exit 0 with a ``result`` of status ``success`` is ``ok``; the turn limit (exit 53,
``FatalTurnLimitedError``) and errors after the first model turn are ``task_failed``; API errors
exit with the HTTP status modulo 256 (429 -> 173, 503 -> 247), which classifies them even when the
message names no code; auth (exit 41), rate limits, overload, network errors, an empty answer
(gemini: "a transient API issue") and anything before the first model turn are ``infra_error``.
gemini reports tokens, not cost: the cost is estimated per model from the price table, output
tokens including thinking tokens.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator

from skilltune.agents.base import AgentRequest, AgentResult, BackendCheck, Message
from skilltune.agents.cli import CLIBackend, CLIOptions
from skilltune.agents.home import UserFile
from skilltune.agents.skillload import GEMINI
from skilltune.agents.transcript import clip, stream_result
from skilltune.modelcalls.prices import estimate_cost
from skilltune.process import ProcessOutcome

DEFAULT_MODEL = "gemini-2.5-pro"
EFFORTS = ("low", "medium", "high")
# thinking budget (Gemini 2.x) / thinking level (Gemini 3 and later) per effort
_BUDGETS = {"low": 1024, "medium": 8192, "high": 24576}
_LEVELS = {"low": "LOW", "medium": "MEDIUM", "high": "HIGH"}
AUTH_TYPES = ("gemini-api-key", "oauth-personal", "vertex-ai", "compute-default-credentials", "gateway")
# gemini exits with an API error's HTTP status modulo 256
_HTTP_EXIT = {code % 256: code for code in (400, 401, 403, 404, 408, 429, 500, 502, 503, 504, 529)}
_EXIT_AUTH = 41
_EXIT_INPUT = 42
_EXIT_TURN_LIMIT = 53
_TRANSIENT = re.compile(r"transient API issue", re.I)
_STDERR_NOISE = ("at ", "YOLO mode", "Warning: 256-color", "[STARTUP]")
# the user's gemini folder: $GEMINI_CLI_HOME/.gemini, else ~/.gemini
_USER_GEMINI = UserFile(".gemini", "GEMINI_CLI_HOME")
_LOGIN_FILES = ("oauth_creds.json", "google_accounts.json", "gemini-credentials.json", ".env")
# option -> (the values gemini knows, what a refusal says: {} lists them)
_KNOWN_VALUES = {
    "effort": (EFFORTS, "gemini supports effort {} (its thinking budget/level)"),
    "auth_type": (AUTH_TYPES, "gemini auth types: {}"),
}


class GeminiOptions(CLIOptions):
    """``--agent-opt`` keys of the gemini backend."""

    model: str | None = Field(
        default=DEFAULT_MODEL,
        description="gemini -m (always passed; an alias such as auto is resolved by gemini)",
    )
    effort: str | None = Field(
        default=None,
        description="thinking effort: low, medium or high (thinkingBudget for Gemini 2.x, thinkingLevel after)",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        le=10,
        description="gemini's own attempts per model request (general.maxAttempts; skilltune retries "
        "infra errors itself)",
    )
    auth_type: str | None = Field(
        default=None,
        description="security.auth.selectedType (default: from the environment, else the user's login)",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="more settings.json keys, merged over skilltune's"
    )

    @field_validator("effort", "auth_type")
    @classmethod
    def _known_value(cls, value: str | None, info: ValidationInfo) -> str | None:
        known, message = _KNOWN_VALUES[str(info.field_name)]
        if value is not None and value not in known:
            raise ValueError(message.format(", ".join(known)))
        return value


def thinking_config(model: str, effort: str) -> dict[str, Any]:
    """generateContentConfig.thinkingConfig of ``effort`` for ``model`` (budget for 2.x, level after)."""
    name = model.lower().split("/")[-1]
    if name.startswith(("gemini-1", "gemini-2")):
        return {"thinkingBudget": _BUDGETS[effort]}
    return {"thinkingLevel": _LEVELS[effort]}


class GeminiAgent(CLIBackend[GeminiOptions]):
    name = "gemini"
    Options = GeminiOptions
    skill_loads = GEMINI  # how its events show a skill load (agents/skillload.py)
    executable = "gemini"
    long_prompt_via_stdin: ClassVar[bool] = True
    install_hint = "npm install -g @google/gemini-cli (or `make agent-clis` in a checkout)"
    env_prefixes: ClassVar[tuple[str, ...]] = ("GEMINI_", "GOOGLE_")
    env_names: ClassVar[tuple[str, ...]] = ("CLOUD_SHELL", "CLOUDSDK_CONFIG")
    # the user's variables that would bring their own gemini configuration into a rollout
    dropped_env_prefixes: ClassVar[tuple[str, ...]] = ("GEMINI_CLI_IDE_",)
    dropped_env_names: ClassVar[tuple[str, ...]] = (
        "GEMINI_WRITE_SYSTEM_MD",
        "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
        "GEMINI_CLI_TRUST_WORKSPACE",
    )
    credentials: ClassVar[Mapping[str, UserFile]] = {
        **{f".gemini/{name}": UserFile(f".gemini/{name}", "GEMINI_CLI_HOME") for name in _LOGIN_FILES},
        # Vertex AI / ADC logins
        ".config/gcloud/application_default_credentials.json": UserFile(
            ".config/gcloud/application_default_credentials.json"
        ),
    }
    settings_file: ClassVar[str | None] = ".gemini/settings.json"
    settings_option: ClassVar[str | None] = "settings"
    tool_restriction: ClassVar[str | None] = (
        "tools.core allowlist of gemini tool names (read_file, write_file, replace, run_shell_command, "
        "list_directory, glob, grep_search, ...); activate_skill is kept when a skill folder is placed"
    )
    native_files: ClassVar[tuple[str, ...]] = ("GEMINI.md",)

    def native_skill_dir(self, skill_name: str) -> str:
        return f".gemini/skills/{skill_name}"

    def check(self) -> BackendCheck:
        found = super().check()
        found.notes += [
            "cost is estimated from the price table (gemini reports tokens, not cost)",
            "placement=system writes the skill to the private ~/.gemini/GEMINI.md (global context, part of "
            "gemini's system instruction): gemini has no flag to append to its system prompt",
            "endpoint: GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY (or a gemini login / Vertex variables)",
        ]
        return found

    # --- the private HOME -----------------------------------------------------------------------
    def auth_type(self, options: GeminiOptions) -> str:
        """The auth type to select: the option, the user's variables, the user's login, else an API key."""
        if options.auth_type:
            return options.auth_type
        env = os.environ
        if env.get("GOOGLE_GENAI_USE_GCA") == "true":
            return "oauth-personal"
        if env.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
            return "vertex-ai"
        if env.get("GEMINI_API_KEY"):
            return "gemini-api-key"
        user_gemini = _USER_GEMINI.path()
        try:  # only this one key of the user's settings is read
            data = json.loads((user_gemini / "settings.json").read_text(encoding="utf-8"))
            selected = ((data.get("security") or {}).get("auth") or {}).get("selectedType")
            if selected in AUTH_TYPES:
                return str(selected)
        except (OSError, ValueError, AttributeError):
            pass
        if (user_gemini / "oauth_creds.json").exists():
            return "oauth-personal"
        return "gemini-api-key"

    def default_settings(self, home: Path, request: AgentRequest[GeminiOptions]) -> dict[str, Any]:
        """The private settings.json of one rollout (the ``settings`` option is merged over it)."""
        options = request.options
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": self.auth_type(options)}},
            "general": {
                "enableAutoUpdate": False,
                "enableAutoUpdateNotification": False,
                "maxAttempts": options.max_attempts,
                "checkpointing": {"enabled": False},
            },
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "ide": {"enabled": False},
            "experimental": {"autoMemory": False},
            "advanced": {"autoConfigureMemory": False},
        }
        if options.max_turns is not None:
            settings["model"] = {"maxSessionTurns": options.max_turns}
        # the skill's own loading tool is not a difficulty lever
        placed = bool(options.tools) and options.placement == "native" and self.skill_placed(request)
        tools = GEMINI.keep_tool(options.tools, placed)
        if tools is not None:
            settings["tools"] = {"core": tools}
        if options.effort:
            model = options.model or DEFAULT_MODEL
            settings["modelConfigs"] = {
                "overrides": [
                    {
                        "match": {"model": model},
                        "modelConfig": {
                            "generateContentConfig": {
                                "thinkingConfig": thinking_config(model, options.effort)
                            }
                        },
                    }
                ]
            }
        return settings

    def prepare_home(self, home: Path, request: AgentRequest[GeminiOptions]) -> None:
        super().prepare_home(home, request)
        if request.options.placement == "system" and request.system_prompt:
            (home / ".gemini" / "GEMINI.md").write_text(request.system_prompt, encoding="utf-8")

    def cli_env(self, home: Path, request: AgentRequest[GeminiOptions]) -> dict[str, str]:
        return {
            "GEMINI_CLI_HOME": str(home),
            "GEMINI_SYSTEM_MD": "false",
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "NO_COLOR": "1",
        }

    def command(self, request: AgentRequest[GeminiOptions], home: Path) -> list[str]:
        options = request.options
        # One argv word: a leading "---" is never an option. A long prompt: stdin alone (gemini
        # would send stdin, a blank line and --prompt's text as one prompt).
        prompt = [] if self.stdin_text(request) is not None else [f"--prompt={request.prompt}"]
        return [
            self.binary(options),
            "-m",
            options.model or DEFAULT_MODEL,
            *prompt,
            "-o",
            "stream-json",
            "--skip-trust",
            "--approval-mode",
            "yolo",
            *options.extra_args,
        ]

    def plain_model_options(self) -> dict[str, Any]:
        """No tools at all (an empty tools.core): gemini as a plain model for the proposer."""
        return {"tools": []}

    # --- the event stream -----------------------------------------------------------------------
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[GeminiOptions]
    ) -> AgentResult:
        options = request.options
        messages: list[Message] = []
        text: list[str] = []  # the assistant text of the current model turn (streamed in deltas)
        last_text = ""
        turns = 0
        in_turn = False
        tool_names: dict[str, str] = {}
        warnings: list[str] = []
        result_event: dict[str, Any] | None = None
        model = options.model

        def flush() -> None:
            nonlocal last_text
            if text:
                content = "".join(text)
                text.clear()
                if content.strip():
                    messages.append(Message(role="assistant", content=content))
                    last_text = content

        for event in events:
            kind = event.get("type")
            if kind == "init":
                model = str(event.get("model") or model or "") or None
            elif kind == "message" and event.get("role") == "assistant":
                if not in_turn:
                    turns, in_turn = turns + 1, True
                if not event.get("delta"):
                    flush()
                text.append(str(event.get("content") or ""))
            elif kind == "tool_use":
                if not in_turn:
                    turns, in_turn = turns + 1, True
                flush()
                name = str(event.get("tool_name") or "?")
                tool_names[str(event.get("tool_id"))] = name
                args = json.dumps(event.get("parameters"), ensure_ascii=False)
                messages.append(Message(role="assistant", content=f"[tool {name}] {clip(args, 1000)}"))
            elif kind == "tool_result":
                flush()
                in_turn = False
                messages.append(Message(role="tool", content=_tool_result(event, tool_names)))
            elif kind == "error":
                flush()
                warnings.append(f"{event.get('severity', 'error')}: {event.get('message', '')}")
            elif kind == "result":
                flush()
                result_event = event
        flush()
        stats = (result_event or {}).get("stats") or {}
        used = _model_tokens(stats)
        if used:  # the model that did the work (an alias such as "auto" resolves here)
            model = max(used, key=lambda m: (used[m][0] + used[m][1], m))
        cost = _estimated_cost(used)
        result = stream_result(
            outcome,
            events,
            messages,
            last_text,
            model=model,
            turns=turns or None,
            tokens=_tokens(stats),
            cost_usd=cost,
        )
        result.cost_estimated = cost is not None
        status = (result_event or {}).get("status")
        if status == "success" and outcome.returncode == 0:
            return result
        if outcome.timed_out or outcome.stalled:
            return result  # CLIBackend.run says timeout or infra_error
        error = (result_event or {}).get("error") or {}
        message = str(error.get("message") or "") if isinstance(error, dict) else str(error)
        error_type = str(error.get("type") or "") if isinstance(error, dict) else ""
        code = outcome.returncode
        if error_type == "FatalTurnLimitedError" or code == _EXIT_TURN_LIMIT:
            limit = f" ({options.max_turns})" if options.max_turns else ""
            result.status, result.reason = "task_failed", f"max turns{limit} reached: {message}".strip()
            return result
        if code == _EXIT_AUTH:
            result.status = "infra_error"
            result.reason = f"authentication failed: {message or _stderr_error(outcome.stderr_tail)}"[:400]
            return result
        parts = [message]
        if code in _HTTP_EXIT and (message.startswith("[API Error") or not message):
            parts.append(f"(HTTP {_HTTP_EXIT[code]})")
        if not message:  # an invalid stream (empty or blocked answer) is reported as an error event
            parts.append(
                (warnings[-1] if warnings and status == "error" else "")
                or _stderr_error(outcome.stderr_tail)
                or f"gemini exited with code {code}"
            )
        if code == _EXIT_INPUT:
            parts.append("(gemini refused its input)")
        failure = " ".join(p for p in parts if p).strip()
        if _TRANSIENT.search(failure):  # gemini's own word for an empty answer from the API
            result.status, result.reason = "infra_error", f"transient API error: {failure[:300]}"
            return result
        result.status, result.reason = self.failure_status(failure, saw_model_turn=turns > 0)
        return result


def _tool_result(event: dict[str, Any], names: dict[str, str]) -> str:
    name = names.get(str(event.get("tool_id")), "?")
    head = f"[{name} {event.get('status', '?')}]"
    error = event.get("error")
    body = ""
    if isinstance(error, dict) and error.get("message"):
        body = str(error["message"])
    elif isinstance(event.get("output"), str):
        body = event["output"]
    return clip(f"{head} {body}".rstrip())


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _tokens(stats: dict[str, Any]) -> tuple[int | None, int | None]:
    """(input, output) of the whole run; output counts thinking tokens (total - input), as billed."""
    if not stats or "input_tokens" not in stats:
        return None, None
    tokens_in = _int(stats.get("input_tokens"))
    tokens_out = max(_int(stats.get("output_tokens")), _int(stats.get("total_tokens")) - tokens_in)
    return tokens_in, tokens_out


def _model_tokens(stats: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """model -> (input, output) of the models that were called."""
    out: dict[str, tuple[int, int]] = {}
    models = stats.get("models") if isinstance(stats, dict) else None
    for name, values in (models or {}).items():
        if isinstance(values, dict):
            tokens_in, tokens_out = _tokens(values)
            if tokens_in or tokens_out:
                out[str(name)] = (tokens_in or 0, tokens_out or 0)
    return out


def _estimated_cost(used: dict[str, tuple[int, int]]) -> float | None:
    """The price-table cost of every model used, or None when one of them has no price."""
    if not used:
        return None
    total = 0.0
    for model, (tokens_in, tokens_out) in used.items():
        cost = estimate_cost(model, tokens_in, tokens_out)
        if cost is None:
            return None
        total += cost
    return round(total, 6)


def _stderr_error(stderr: str) -> str:
    """What gemini said on stderr about its failure: its last error line, else its last lines."""
    lines = [
        line.strip()
        for line in stderr.splitlines()
        if line.strip() and not line.strip().startswith(_STDERR_NOISE)
    ]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors[-1] if errors else " ".join(lines[-3:]))[:300]
