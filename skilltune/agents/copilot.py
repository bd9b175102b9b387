"""GitHub Copilot CLI (``copilot``, npm @github/copilot) as a target agent, headless.

One rollout runs, in the workspace, with stdin closed::

    copilot --prompt=PROMPT --output-format json --allow-all-tools --no-ask-user
            --disable-client-telemetry --disable-builtin-mcps --no-auto-update --no-color
            -C WS --usage-output-file LOG/copilot-usage.json [--model M]
            [--reasoning-effort E] [--available-tools=T1,T2] [EXTRA...]

(``--prompt=`` in one argument: a prompt that starts with ``---`` would otherwise be read
as an option; a prompt too long for argv goes to stdin, which copilot reads as the prompt.)

Endpoint: the user's ``COPILOT_*`` variables pass through, so bring-your-own-key works as
with copilot itself: ``COPILOT_PROVIDER_BASE_URL`` (e.g. ``http://host:8000/v1``),
``COPILOT_PROVIDER_TYPE`` (openai | azure | anthropic), ``COPILOT_PROVIDER_API_KEY``
(or ``..._BEARER_TOKEN``), ``COPILOT_MODEL`` (``model=`` overrides it). With a provider
set, copilot runs with ``COPILOT_OFFLINE=true`` (no GitHub login, telemetry, web tools or
update checks) unless the user set ``COPILOT_OFFLINE`` themselves; without one it uses
GitHub's model routing and the user's login: ``COPILOT_GITHUB_TOKEN`` / ``GH_TOKEN`` /
``GITHUB_TOKEN`` pass through, and ``~/.copilot/config.json`` (copilot's login state: the
logged-in accounts, and their tokens when no keyring is available) is *linked* into the
private config dir; ``DBUS_SESSION_BUS_ADDRESS`` passes so a keyring-stored token resolves.

Isolation: ``COPILOT_HOME`` is ``<private HOME>/.copilot``; the user's settings, skills
(``~/.copilot/skills``), custom instructions, MCP servers, plugins, sessions and logs never
reach the agent, nor do ``COPILOT_SKILLS_DIRS`` / ``COPILOT_CUSTOM_INSTRUCTIONS_DIRS``.
The native binary unpacks its JavaScript package (~235 MB) into a package cache on first
start, which takes ~3 s: ``COPILOT_PKG_CACHE_HOME`` points at the user's own package cache
(``$XDG_CACHE_HOME/copilot``; copilot extracts atomically, so parallel rollouts share it),
so a rollout starts in under a second. Note: copilot masks the value of
``COPILOT_PROVIDER_API_KEY`` wherever it appears in its output.

Levers: ``tools=`` becomes ``--available-tools`` (the only tools the model sees; copilot
names: view, create, edit, bash, grep, glob, task, skill, ...); the ``skill`` tool is kept
when a skill folder is placed natively, or the candidate would not be listed at all.
``effort`` is ``--reasoning-effort``. copilot has no max-turns limit: ``max_turns`` is
refused, ``wall_limit_s`` / ``stall_s`` bound a rollout. copilot retries a 429/5xx five
times itself (about 1 s each with ``retry-after``, up to a minute without).

Placement: a skill folder goes to ``<ws>/.github/skills/<name>/`` (listed to the model,
loaded by the ``skill`` tool); a single instruction file may be AGENTS.md, CLAUDE.md or
GEMINI.md (copilot reads all three from the workspace root); ``placement=system`` writes
the skill to the private ``$COPILOT_HOME/copilot-instructions.md`` (user-level custom
instructions, part of the system prompt).

Transcript: ``assistant.message`` (text and tool requests), ``tool.execution_complete``
(tool results), ``session.error`` and the final ``result`` (exitCode) of the JSONL stream;
tokens from the usage file (copilot's stream has none). Cost: copilot reports premium
requests / AI credits, not USD, so cost is estimated from the price table.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skilltune.agents.base import (
    AgentBackend,
    AgentRequest,
    AgentResult,
    BackendCheck,
    Message,
    refuse_option,
)
from skilltune.agents.cli import CLIBackend, CLIOptions, infra_http_status, too_long_for_argv
from skilltune.agents.home import UserFile, user_home
from skilltune.agents.skillload import COPILOT
from skilltune.agents.transcript import stream_result, tool_call_message, tool_result_message
from skilltune.process import ProcessOutcome

USAGE_FILE = "copilot-usage.json"
INSTRUCTIONS_FILE = "copilot-instructions.md"
NO_TOOLS = "skilltune-no-tools"  # an unknown name: --available-tools then offers the model nothing

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class CopilotOptions(CLIOptions):
    """``--agent-opt`` keys of the copilot backend."""

    effort: Effort | None = Field(default=None, description="copilot --reasoning-effort")
    builtin_mcps: bool = Field(
        default=False, description="true: keep copilot's built-in GitHub MCP servers (off by default)"
    )

    _no_max_turns = refuse_option(
        "max_turns",
        message="copilot has no max-turns limit; a copilot rollout is bounded by wall_limit_s (and stall_s)",
    )


def package_cache() -> Path:
    """Where copilot keeps its unpacked package for this user (shared by all rollouts)."""
    for var in ("COPILOT_PKG_CACHE_HOME", "COPILOT_CACHE_HOME"):
        if os.environ.get(var):
            return Path(os.environ[var])
    home = user_home()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "copilot"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "copilot"


def byok() -> bool:
    """True when the user points copilot at their own model provider."""
    return bool(os.environ.get("COPILOT_PROVIDER_BASE_URL"))


class CopilotAgent(CLIBackend[CopilotOptions]):
    name = "copilot"
    Options = CopilotOptions
    skill_loads = COPILOT  # how its events show a skill load (agents/skillload.py)
    executable: ClassVar[str] = "copilot"
    long_prompt_via_stdin: ClassVar[bool] = True
    install_hint: ClassVar[str] = (
        "npm install -g @github/copilot (or `make agent-clis` in a skilltune checkout); then "
        "`copilot login`, or set COPILOT_PROVIDER_BASE_URL, COPILOT_PROVIDER_API_KEY and COPILOT_MODEL"
    )
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
    env_prefixes: ClassVar[tuple[str, ...]] = ("COPILOT_",)
    env_names: ClassVar[tuple[str, ...]] = (
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "GH_HOST",
        "DBUS_SESSION_BUS_ADDRESS",
    )
    # the user's variables that would bring their own configuration into the rollout
    dropped_env_names: ClassVar[tuple[str, ...]] = (
        "COPILOT_HOME",
        "COPILOT_CACHE_HOME",
        "COPILOT_SKILLS_DIRS",
        "COPILOT_CUSTOM_INSTRUCTIONS_DIRS",
        "COPILOT_EVENTS_LOG_DIRECTORY",
    )
    credentials: ClassVar[Mapping[str, UserFile]] = {
        ".copilot/config.json": UserFile("config.json", "COPILOT_HOME", ".copilot")
    }
    settings_file: ClassVar[str | None] = ".copilot/settings.json"
    tool_restriction: ClassVar[str | None] = (
        "--available-tools (copilot names, e.g. tools=view,create,edit; skill is kept for a native skill)"
    )

    def native_skill_dir(self, skill_name: str) -> str:
        return f".github/skills/{skill_name}"

    def check(self) -> BackendCheck:
        found = AgentBackend.check(self)
        found.notes += [
            f"tools=... restricts copilot's tools with {self.tool_restriction}",
            "max_turns is refused: copilot has no max-turns flag; wall_limit_s (and stall_s) bound a rollout",
            "cost is estimated from the price table (copilot reports tokens and premium requests, not USD)",
            "placement=system writes the skill to the private $COPILOT_HOME/copilot-instructions.md",
            (
                f"endpoint: {os.environ['COPILOT_PROVIDER_BASE_URL']} "
                f"({os.environ.get('COPILOT_PROVIDER_TYPE') or 'openai'}), offline mode"
                if byok()
                else "endpoint: GitHub Copilot (copilot login or COPILOT_GITHUB_TOKEN/GH_TOKEN); "
                "set COPILOT_PROVIDER_BASE_URL (+ _API_KEY, COPILOT_MODEL) for your own provider"
            ),
        ]
        return found

    # --- isolation ----------------------------------------------------------------------------
    @staticmethod
    def copilot_home(home: Path) -> Path:
        return home / ".copilot"

    def default_settings(self, home: Path, request: AgentRequest[CopilotOptions]) -> dict[str, Any]:
        return {"autoUpdate": False, "banner": "never", "showTipsOnStartup": False}

    def prepare_home(self, home: Path, request: AgentRequest[CopilotOptions]) -> None:
        super().prepare_home(home, request)
        if request.options.placement == "system" and request.system_prompt:
            (self.copilot_home(home) / INSTRUCTIONS_FILE).write_text(request.system_prompt, encoding="utf-8")
        (request.log_dir / USAGE_FILE).unlink(missing_ok=True)

    def cli_env(self, home: Path, request: AgentRequest[CopilotOptions]) -> dict[str, str]:
        env = {
            "COPILOT_HOME": str(self.copilot_home(home)),
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PKG_CACHE_HOME": str(package_cache()),
            "NO_COLOR": "1",
        }
        if byok() and "COPILOT_OFFLINE" not in os.environ:
            env["COPILOT_OFFLINE"] = "true"
        return env

    # --- the command --------------------------------------------------------------------------
    def tools_for(self, request: AgentRequest[CopilotOptions]) -> list[str] | None:
        """The ``--available-tools`` list, or None for copilot's default set."""
        tools = COPILOT.keep_tool(request.options.tools, self.skill_placed(request))
        if tools is None:
            return None
        return tools or [NO_TOOLS]

    def command(self, request: AgentRequest[CopilotOptions], home: Path) -> list[str]:
        options = request.options
        argv = [self.binary(options)]
        if not too_long_for_argv(request.prompt):
            argv.append(f"--prompt={request.prompt}")
        argv += [
            "--output-format", "json", "--allow-all-tools", "--no-ask-user",
            "--disable-client-telemetry", "--no-auto-update", "--no-color",
            "-C", str(request.workspace),
            "--usage-output-file", str(request.log_dir / USAGE_FILE),
        ]  # fmt: skip
        if not options.builtin_mcps:
            argv.append("--disable-builtin-mcps")
        if options.model:
            argv += ["--model", options.model]
        if options.effort:
            argv += ["--reasoning-effort", options.effort]
        tools = self.tools_for(request)
        if tools is not None:
            argv.append(f"--available-tools={','.join(tools)}")
        return [*argv, *options.extra_args]

    # --- the event stream ---------------------------------------------------------------------
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[CopilotOptions]
    ) -> AgentResult:
        messages: list[Message] = []
        tool_names: dict[str, str] = {}
        errors: list[str] = []
        statuses: list[int] = []
        model: str | None = None
        final = ""
        turns = 0
        result: dict[str, Any] | None = None
        kept: list[dict[str, Any]] = []
        for event in events:
            kind = str(event.get("type") or "")
            raw = event.get("data")
            data: dict[str, Any] = raw if isinstance(raw, dict) else {}
            if not kind.endswith("_delta"):  # streaming fragments: the full messages follow
                kept.append(event)
            if kind == "session.tools_updated":
                model = str(data.get("model") or "") or model
            elif kind == "assistant.message":
                turns += 1
                model = str(data.get("model") or "") or model
                text = str(data.get("content") or "")
                if text.strip():
                    final = text
                    messages.append(Message(role="assistant", content=text))
                for call in data.get("toolRequests") or []:
                    if not isinstance(call, dict):
                        continue
                    tool_names[str(call.get("toolCallId"))] = str(call.get("name"))
                    messages.append(tool_call_message(call.get("name"), call.get("arguments", {})))
            elif kind == "tool.execution_complete":
                name = tool_names.get(str(data.get("toolCallId")), "tool")
                outcome_data = data.get("result") or data.get("error") or {}
                text = (
                    str(outcome_data.get("content") or outcome_data.get("message") or "")
                    if isinstance(outcome_data, dict)
                    else str(outcome_data)
                )
                messages.append(tool_result_message(name, text, error=not data.get("success", True)))
            elif kind == "session.error":
                errors.append(str(data.get("message") or data.get("errorType") or "error"))
                if isinstance(data.get("statusCode"), int):
                    statuses.append(int(data["statusCode"]))
            elif kind == "result":
                result = event
        usage = self.read_usage(request.log_dir / USAGE_FILE)
        if usage is not None:
            kept.append({"type": "skilltune.usage_file", "data": usage})
        found = stream_result(
            outcome, kept, messages, final, model=model or request.options.model, turns=turns
        )
        if usage is not None:
            found.tokens_in, found.tokens_out = _usage_tokens(usage)
            found.model = found.model or (str(usage.get("currentModel") or "") or None)
        exit_code = result.get("exitCode") if result is not None else outcome.returncode
        if result is not None and exit_code == 0 and not errors:
            return found
        if outcome.timed_out or outcome.stalled:
            found.status = "timeout"  # the runner decides: timeout after a model turn, else infra_error
            return found
        text = "\n".join(errors) or outcome.stderr_tail.strip()
        if not text:
            text = (
                f"copilot exited with code {exit_code}"
                if result is not None
                else f"copilot exited with code {outcome.returncode} without a result event"
            )
        if any(infra_http_status(s) for s in statuses):
            found.status, found.reason = "infra_error", f"API error {statuses[-1]}: {text.strip()[:300]}"
            return found
        found.status, found.reason = self.failure_status(text, saw_model_turn=turns > 0)
        return found

    @staticmethod
    def read_usage(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def _usage_tokens(usage: dict[str, Any]) -> tuple[int | None, int | None]:
    """(tokens in, tokens out) summed over the models of copilot's usage file."""
    metrics = usage.get("modelMetrics")
    if not isinstance(metrics, dict) or not metrics:
        return None, None
    tokens_in = tokens_out = 0
    for entry in metrics.values():
        counts = entry.get("usage") if isinstance(entry, dict) else None
        if isinstance(counts, dict):
            tokens_in += int(counts.get("inputTokens") or 0)
            tokens_out += int(counts.get("outputTokens") or 0)
    return tokens_in, tokens_out
