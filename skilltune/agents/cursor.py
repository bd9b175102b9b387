"""Cursor's agent CLI (``cursor-agent``) as a target agent, headless.

One rollout is ``cursor-agent -p --force --trust --output-format stream-json [--model M] --
PROMPT`` in the workspace (``--force`` runs commands without asking, ``--trust`` trusts the
workspace without the interactive dialog). cursor-agent is not on npm; it is installed
from Cursor (see ``install_hint``). Its stream-json output is claude-like (``system/init``,
``user``, ``assistant``, ``tool_call`` started/completed, a final ``result`` with the full
text): claude's parser reads it, with cursor's own ``tool_call`` events read here. It reports
no cost; when a ``result`` carries token usage the cost is estimated from the price table and
marked estimated.

Isolation: a private HOME; the user's ``CURSOR_API_KEY`` / ``CURSOR_AUTH_TOKEN`` pass
through. A browser login is kept in ``~/.config/cursor/auth.json`` (older versions) or
under ``authInfo`` of ``~/.cursor/cli-config.json`` (2026.06 on, next to the CLI's
permissions and UI settings): both are *linked*, because a refreshed token must reach the
user's own file and every parallel rollout. cli-config.json holds no skills, rules or
history (those live in ``~/.cursor/skills``, ``~/.cursor/rules``, ``~/.cursor/chats``, which
are never linked) and the flags above override its permissions. An API key needs no file.

The skill: Cursor documents project skills at ``<ws>/.cursor/skills/<name>/SKILL.md`` and
reads ``AGENTS.md`` at the workspace root, so those are the native places (its own
``.cursor/rules/*.mdc`` format is not used). cursor-agent has no system-prompt flag, no
max-turns flag, no effort setting and no tool restriction: those options are refused.

A long prompt: one argv string holds at most 128 KiB on Linux, and cursor-agent documents no
other way in (no prompt file; reading a piped stdin when no prompt is given is reported by
third parties, and ``-`` is taken for a literal prompt, but neither is documented nor could
be checked here, cursor-agent not being installable). So a prompt over 100 kB (the threshold
at which the other CLIs switch to stdin) fails fast with a UsageError that says so, rather
than as an ``Argument list too long`` infra error retried in vain.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from skilltune.agents.base import AgentRequest, AgentResult, Message
from skilltune.agents.claude import interpret_stream
from skilltune.agents.cli import ARG_BYTES, CLIBackend, CLIOptions, too_long_for_argv
from skilltune.agents.home import UserFile
from skilltune.agents.skillload import CURSOR
from skilltune.agents.transcript import tool_call_message, tool_result_message
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome


class CursorOptions(CLIOptions):
    mode: Literal["plan", "ask"] | None = Field(
        default=None, description="cursor-agent --mode (ask: read-only questions and answers)"
    )

    @model_validator(mode="after")
    def _refuse_unsupported(self) -> CursorOptions:
        unsupported = {
            "effort": "cursor-agent has no effort setting (pick a model instead)",
            "max_turns": "cursor-agent has no max-turns flag (bound a rollout with wall_limit_s)",
            "tools": "cursor-agent cannot restrict its tools",
        }
        for key, why in unsupported.items():
            if getattr(self, key) is not None:
                raise ValueError(f"{key}: {why}")
        if self.placement == "system":
            raise ValueError(
                "placement=system: cursor-agent has no system-prompt flag (use native or prepend)"
            )
        return self


class CursorAgent(CLIBackend[CursorOptions]):
    name = "cursor"
    Options = CursorOptions
    skill_loads = CURSOR  # how its events show a skill load (agents/skillload.py)
    executable: ClassVar[str] = "cursor-agent"
    install_hint: ClassVar[str] = (
        "cursor-agent is not on npm: install it from Cursor with `curl https://cursor.com/install -fsS | bash` "
        "(puts cursor-agent in ~/.local/bin; where it is only called `agent`, pass "
        "--agent-opt executable=PATH), then run `cursor-agent login` or set CURSOR_API_KEY"
    )
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md",)
    env_names: ClassVar[tuple[str, ...]] = ("CURSOR_API_KEY", "CURSOR_AUTH_TOKEN")
    credentials: ClassVar[Mapping[str, UserFile]] = {
        ".config/cursor/auth.json": UserFile("cursor/auth.json", "XDG_CONFIG_HOME", ".config"),
        ".cursor/cli-config.json": UserFile("cli-config.json", "CURSOR_CONFIG_DIR", ".cursor"),
    }
    tool_restriction: ClassVar[str | None] = None

    def native_skill_dir(self, skill_name: str) -> str:
        return f".cursor/skills/{skill_name}"

    def user_credentials(self) -> dict[str, Path]:
        """As declared, except that without ``CURSOR_CONFIG_DIR`` a cli-config.json under
        ``$XDG_CONFIG_HOME/cursor`` is used where it exists (else ``~/.cursor``'s)."""
        found = super().user_credentials()
        xdg = os.environ.get("XDG_CONFIG_HOME")
        if xdg and not os.environ.get("CURSOR_CONFIG_DIR"):
            in_xdg = Path(xdg).expanduser() / "cursor" / "cli-config.json"
            if in_xdg.exists():
                found[".cursor/cli-config.json"] = in_xdg
        return found

    def cli_env(self, home: Path, request: AgentRequest[CursorOptions]) -> dict[str, str]:
        return {"CURSOR_CONFIG_DIR": str(home / ".cursor"), "NO_OPEN_BROWSER": "1"}

    def placement_problem(self, prompt: str, system_prompt: str | None, options: CursorOptions) -> str | None:
        """cursor-agent takes its prompt only as one command-line argument."""
        if not too_long_for_argv(prompt):
            return None
        return (
            f"cursor: the prompt is {len(prompt.encode()):,} bytes; cursor-agent takes its prompt only as a "
            f"command-line argument, and skilltune passes at most {ARG_BYTES:,} bytes that way (Linux allows "
            "128 KiB per argument; cursor-agent documents no stdin or file input). Shorten the prompt (with "
            "placement=prepend, place the skill natively instead), or use an agent that reads a long "
            "prompt from stdin (claude, codex, copilot, gemini, opencode, qwen)."
        )

    def command(self, request: AgentRequest[CursorOptions], home: Path) -> list[str]:
        options = request.options
        problem = self.placement_problem(request.prompt, request.system_prompt, options)
        if problem is not None:
            raise UsageError(problem)
        argv = [self.binary(options), "-p", "--force", "--trust", "--output-format", "stream-json"]
        if options.model:
            argv += ["--model", options.model]
        if options.mode:
            argv += ["--mode", options.mode]
        return [*argv, *options.extra_args, "--", request.prompt]

    def plain_model_options(self) -> dict[str, Any]:
        return {"mode": "ask"}

    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[CursorOptions]
    ) -> AgentResult:
        found = interpret_stream(events, outcome, {"tool_call": tool_call_messages})
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        usage = result.get("usage") if result else None
        if found.tokens_in is None and isinstance(usage, dict) and "inputTokens" in usage:
            # cursor-agent's camelCase usage, where a version reports it
            tokens_in = sum(
                int(usage.get(k) or 0) for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens")
            )
            found.tokens_in, found.tokens_out = tokens_in, int(usage.get("outputTokens") or 0)
        return found


def tool_call_messages(event: dict[str, Any]) -> list[Message]:
    """cursor-agent's ``tool_call`` events: ``started`` is the call, ``completed`` its result."""
    call = event.get("tool_call") or {}
    if not isinstance(call, dict) or not call:
        return []
    key, body = next(iter(call.items()))
    body = body if isinstance(body, dict) else {}
    name = str(body.get("name") or key.removesuffix("ToolCall"))
    if event.get("subtype") == "started":
        return [tool_call_message(name, body.get("args", body.get("arguments", {})))]
    if event.get("subtype") == "completed":
        outcome = body.get("result", {})
        shown = outcome if isinstance(outcome, str) else json.dumps(outcome, ensure_ascii=False)
        return [tool_result_message(name, shown, error=isinstance(outcome, dict) and "error" in outcome)]
    return []
