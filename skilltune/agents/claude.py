"""Claude Code (``claude``, npm @anthropic-ai/claude-code) as a target agent, headless.

One rollout is ``claude -p --output-format stream-json --verbose ... -- PROMPT`` in the
workspace, with a private HOME whose ``.claude`` folder is the config dir
(``CLAUDE_CONFIG_DIR``): the user's skills, settings, CLAUDE.md, plugins, MCP servers and
history never reach the agent. Only the login is shared:

- ``~/.claude/.credentials.json`` (an OAuth login on Linux; ``$CLAUDE_CONFIG_DIR`` of the
  user when set) is *linked*, so a token refreshed by one rollout serves the others;
- ``~/.claude.json`` mixes a few auth keys (``primaryApiKey`` of a console login,
  ``oauthAccount``) with settings, per-project history and MCP servers, and claude
  rewrites it all the time: it is never linked; its auth keys alone are copied into the
  private config (they do not rotate);
- the user's ``ANTHROPIC_*`` variables (endpoint, API key, auth token, model defaults),
  ``CLAUDE_CODE_OAUTH_TOKEN`` (``claude setup-token``) and the Bedrock / Vertex switches
  pass through.

On macOS a subscription login lives in the Keychain under a name that depends on the
config dir, so an isolated rollout does not find it: use ``ANTHROPIC_API_KEY`` or
``CLAUDE_CODE_OAUTH_TOKEN`` there.

The skill: a folder goes to ``<ws>/.claude/skills/<name>/`` (listed to the model by the
``Skill`` tool, which injects the body on use), a single instruction file as
``<ws>/CLAUDE.md`` (claude puts it into the first user message; it does not read
AGENTS.md), ``placement=system`` appends it to claude's own system prompt
(``--append-system-prompt``), ``prepend`` puts it in front of the task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat

from skilltune.agents.base import AgentRequest, AgentResult, Message
from skilltune.agents.cli import CLIBackend, CLIOptions, infra_http_status, too_long_for_argv
from skilltune.agents.home import UserFile
from skilltune.agents.skillload import CLAUDE
from skilltune.agents.transcript import assistant_blocks, content_text, stream_result, tool_result_messages
from skilltune.process import ProcessOutcome

# Pre-approved besides workspace edits. In -p mode a tool that needs approval is denied, not
# asked for, so whatever the agent should use without edits must be listed here.
DEFAULT_ALLOWED = ("Bash", "Skill")
_AUTH_KEYS = ("primaryApiKey", "oauthAccount", "customApiKeyResponses")
# claude's global config of the user: settings, history and MCP servers, and a few auth keys
_USER_CLAUDE_JSON = UserFile(".claude.json", "CLAUDE_CONFIG_DIR")
SYSTEM_PROMPT_FILE = "skilltune-system-prompt.md"


class ClaudeOptions(CLIOptions):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = Field(
        default=None, description="claude --effort (thinking effort)"
    )
    api_retries: NonNegativeInt = Field(
        default=2, description="CLAUDE_CODE_MAX_RETRIES: claude's own retries of a failed API call"
    )
    allowed_tools: list[str] | None = Field(
        default=None,
        description=f"tools pre-approved besides workspace edits (default: {', '.join(DEFAULT_ALLOWED)})",
    )
    bundled_skills: bool = Field(
        default=True, description="false: hide claude's bundled skills, so the candidate is the only one"
    )
    max_budget_usd: PositiveFloat | None = Field(default=None, description="claude --max-budget-usd")


class ClaudeAgent(CLIBackend[ClaudeOptions]):
    name = "claude"
    Options = ClaudeOptions
    skill_loads = CLAUDE  # how its events show a skill load (agents/skillload.py)
    executable: ClassVar[str] = "claude"
    long_prompt_via_stdin: ClassVar[bool] = True
    install_hint: ClassVar[str] = (
        "npm install -g @anthropic-ai/claude-code (or `make agent-clis` in a skilltune checkout); "
        "then log in with `claude` or set ANTHROPIC_API_KEY"
    )
    native_files: ClassVar[tuple[str, ...]] = ("CLAUDE.md",)
    env_prefixes: ClassVar[tuple[str, ...]] = ("ANTHROPIC_",)
    env_names: ClassVar[tuple[str, ...]] = (
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLOUD_ML_REGION",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "GOOGLE_APPLICATION_CREDENTIALS",
    )
    credentials: ClassVar[Mapping[str, UserFile]] = {
        ".claude/.credentials.json": UserFile(".credentials.json", "CLAUDE_CONFIG_DIR", ".claude")
    }
    settings_file: ClassVar[str | None] = ".claude/.claude.json"  # the private CLAUDE_CONFIG_DIR's
    tool_restriction: ClassVar[str | None] = "--tools (built-in names, e.g. tools=Read,Edit)"

    def native_skill_dir(self, skill_name: str) -> str:
        return f".claude/skills/{skill_name}"

    # --- isolation ----------------------------------------------------------------------------
    def default_settings(self, home: Path, request: AgentRequest[ClaudeOptions]) -> dict[str, Any]:
        """The private ``.claude.json``: onboarding done, no auto-updates, and the auth keys of the
        user's own (they do not rotate, so a copy is safe; the rest of that file is never read)."""
        private: dict[str, Any] = {"hasCompletedOnboarding": True, "autoUpdates": False}
        try:
            user = json.loads(_USER_CLAUDE_JSON.path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            user = {}
        if isinstance(user, dict):
            private |= {k: user[k] for k in _AUTH_KEYS if k in user}
        return private

    def prepare_home(self, home: Path, request: AgentRequest[ClaudeOptions]) -> None:
        super().prepare_home(home, request)
        if request.system_prompt:
            (home / SYSTEM_PROMPT_FILE).write_text(request.system_prompt, encoding="utf-8")

    def cli_env(self, home: Path, request: AgentRequest[ClaudeOptions]) -> dict[str, str]:
        options = request.options
        env = {
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, title calls
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": str(options.api_retries),
            "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",  # no memory files, no memory side requests
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "ENABLE_CLAUDEAI_MCP_SERVERS": "false",  # a linked login must not bring claude.ai connectors
        }
        if not options.bundled_skills:
            env["CLAUDE_CODE_DISABLE_BUNDLED_SKILLS"] = "1"
        return env

    # --- the command --------------------------------------------------------------------------
    def tools_for(self, request: AgentRequest[ClaudeOptions]) -> list[str] | None:
        """The ``--tools`` list, or None for claude's default set.

        A restricted set keeps the ``Skill`` tool when the skill is installed natively: without
        it claude does not list the skill at all, and the lever would switch off the candidate.
        """
        placed = request.options.placement == "native" and bool(request.skill_name)
        return CLAUDE.keep_tool(request.options.tools, placed)

    def command(self, request: AgentRequest[ClaudeOptions], home: Path) -> list[str]:
        options = request.options
        # Permissions: `bypassPermissions` (--dangerously-skip-permissions) is refused when run as
        # root unless IS_SANDBOX=1, and would also approve edits outside the workspace. acceptEdits
        # approves file edits inside the working directory (the workspace) as any user, root
        # included; --allowedTools pre-approves the rest the agent needs (Bash, Skill). In -p mode
        # anything else is denied rather than asked for, so a rollout never waits on a prompt.
        argv = [
            self.binary(options), "-p", "--output-format", "stream-json", "--verbose",
            "--no-session-persistence", "--permission-mode", "acceptEdits",
        ]  # fmt: skip
        if options.model:
            argv += ["--model", options.model]
        if options.effort:
            argv += ["--effort", options.effort]
        if options.max_turns:
            argv += ["--max-turns", str(options.max_turns)]
        if options.max_budget_usd:
            argv += ["--max-budget-usd", f"{options.max_budget_usd:g}"]
        tools = self.tools_for(request)
        if tools is not None:
            argv += ["--tools", ",".join(tools)]
        if options.allowed_tools is not None:  # the user's own list, rules such as "Bash(git *)" included
            allowed = list(options.allowed_tools)
        else:
            allowed = [t for t in DEFAULT_ALLOWED if tools is None or t in tools]
        if allowed:
            argv += ["--allowedTools", ",".join(allowed)]
        if request.system_prompt:
            if not too_long_for_argv(request.system_prompt):
                argv += ["--append-system-prompt", request.system_prompt]
            else:  # one argv string holds at most 128 KiB on Linux
                argv += ["--append-system-prompt-file", str(home / SYSTEM_PROMPT_FILE)]
        if too_long_for_argv(request.prompt):  # too long for argv: claude -p reads it from stdin
            return [*argv, *options.extra_args]
        return [*argv, *options.extra_args, "--", request.prompt]

    def plain_model_options(self) -> dict[str, Any]:
        return {"tools": [], "max_turns": 1}

    # --- the event stream ---------------------------------------------------------------------
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[ClaudeOptions]
    ) -> AgentResult:
        return interpret_stream(events, outcome)


def _model_name(name: Any) -> str | None:
    """``claude-opus-4-8[1m]`` (init's label of the 1M-context variant) -> ``claude-opus-4-8``."""
    return re.sub(r"\[[^\]]*\]$", "", str(name)) if name else None


def _tokens(usage: dict[str, Any]) -> tuple[int, int]:
    """(tokens in, tokens out): input counts every prompt token, cached (read or written) included."""
    tokens_in = sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return tokens_in, int(usage.get("output_tokens") or 0)


EventReader = Callable[[dict[str, Any]], list[Message]]


def interpret_stream(
    events: list[dict[str, Any]],
    outcome: ProcessOutcome,
    more_events: Mapping[str, EventReader] | None = None,
) -> AgentResult:
    """claude's stream-json events -> an AgentResult.

    Assistant text and tool calls become assistant messages, tool results tool messages.
    An API error shows up as an assistant message of model ``<synthetic>``: it is no model
    turn. Final text, usage, turns and cost come from the ``result`` event. A CLI whose stream
    is claude-like with event types of its own passes ``more_events``: event type -> the
    messages of one such event (types claude's stream has are read as claude's, whatever it says).
    """
    messages: list[Message] = []
    tool_names: dict[str, str] = {}
    turn_ids: list[str] = []
    usage_by_turn: dict[str, dict[str, Any]] = {}
    api_errors: list[str] = []
    model: str | None = None
    init_model: str | None = None
    last_text = ""
    result: dict[str, Any] | None = None
    for event in events:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            init_model = _model_name(event.get("model"))
        elif kind == "assistant":
            message = event.get("message") or {}
            content = message.get("content") or []
            if message.get("model") == "<synthetic>" or event.get("error"):
                api_errors.append(content_text(content) or str(event.get("error")))
                continue
            turn = str(message.get("id") or event.get("uuid") or len(turn_ids))
            if turn not in turn_ids:
                turn_ids.append(turn)
            if isinstance(message.get("usage"), dict):
                usage_by_turn[turn] = message["usage"]
            model = _model_name(message.get("model")) or model
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            said, text = assistant_blocks(blocks, tool_names)
            messages += said
            last_text = text or last_text
        elif kind == "user":
            messages += tool_result_messages((event.get("message") or {}).get("content"), tool_names)
        elif kind == "result":
            result = event
        elif more_events and str(kind) in more_events:
            messages.extend(more_events[str(kind)](event))
    saw_turn = bool(turn_ids)
    found = stream_result(outcome, events, messages, model=model or init_model)
    if result is None:
        found.final_text = last_text
        if usage_by_turn:
            totals = [_tokens(u) for u in usage_by_turn.values()]
            found.tokens_in = sum(t[0] for t in totals)
            found.tokens_out = sum(t[1] for t in totals)
        found.turns = len(turn_ids)
        if outcome.timed_out or outcome.stalled:
            found.status = "timeout"  # the runner decides: timeout after a model turn, else infra_error
            return found
        what = "\n".join([*api_errors, outcome.stderr_tail.strip()]).strip()
        found.status, found.reason = CLIBackend.failure_status(
            what or f"the CLI exited with code {outcome.returncode} without a result event", saw_turn
        )
        return found
    found.final_text = str(result.get("result") or "")
    usage = result.get("usage")
    if isinstance(usage, dict) and ("input_tokens" in usage or "output_tokens" in usage):
        found.tokens_in, found.tokens_out = _tokens(usage)
    cost = result.get("total_cost_usd")
    found.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
    found.turns = int(result.get("num_turns") or 0) if saw_turn else 0
    subtype = str(result.get("subtype") or "")
    api_status = result.get("api_error_status")
    detail = found.final_text or "\n".join(api_errors) or subtype
    if isinstance(api_status, int):
        if infra_http_status(api_status):
            found.status, found.reason = "infra_error", f"API error {api_status}: {detail.strip()[:300]}"
        else:
            found.status, found.reason = CLIBackend.failure_status(
                f"API error {api_status}: {detail}", saw_turn
            )
    elif subtype == "error_max_turns":
        found.status, found.reason = "task_failed", f"max turns reached ({result.get('num_turns')} turns)"
    elif result.get("is_error") or subtype not in ("success", ""):
        found.status, found.reason = CLIBackend.failure_status(f"{subtype}: {detail}", saw_turn)
    return found
