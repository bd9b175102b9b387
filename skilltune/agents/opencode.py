"""opencode (``opencode run --format json``, npm opencode-ai) as a target agent, headless.

One rollout runs, in the workspace, with stdin closed::

    opencode run --format json --title skilltune [--model P/M] [--variant EFFORT] [EXTRA...] -- PROMPT

(a prompt over 100 kB goes to its stdin instead: ``opencode run`` reads a piped stdin as the
message; it starts its tools detached, in sessions of their own: the process runner kills them
too, by the run's marker in their environment), with a private HOME whose XDG folders (config, data, cache, state) hold everything opencode
writes, and its whole configuration in ``OPENCODE_CONFIG_CONTENT`` (JSON). The user's
``opencode.json``, agents, commands, plugins, skills (``~/.config/opencode/skills``,
``~/.claude/skills``, ``~/.agents/skills``) and sessions never reach the agent; only the
login, ``auth.json`` of ``opencode auth login`` (``$XDG_DATA_HOME/opencode`` or
``~/.local/share/opencode``), is *linked* in, so a refreshed OAuth token is written through.
``--title`` spares the title side call on ``small_model``.

The model endpoint (the user's environment, as with opencode itself):

- ``base_url`` option, else ``OPENAI_BASE_URL``: an OpenAI *Chat Completions* endpoint
  (e.g. ``http://host:8000/v1``). It becomes opencode provider ``skilltune`` (npm
  ``@ai-sdk/openai-compatible``) with the model (option ``model``, else ``OPENAI_MODEL``;
  its name as the endpoint spells it, slashes and all) as a tool-calling model. Its key is
  ``{env:OPENAI_API_KEY}`` (option ``api_key_env`` names another variable), else the linked
  ``auth.json`` entry of provider ``skilltune``, else none.
- No endpoint (or ``endpoint=false``): ``model`` is opencode's ``provider/model``
  (``anthropic/claude-sonnet-4-5``, ``openai/gpt-5``...), served by opencode's own provider
  with the user's key variables (ANTHROPIC_*, OPENAI_*, GEMINI_* / GOOGLE_*, OPENROUTER_*,
  ...) or the linked login; without a model opencode picks its default.

Option ``config`` merges any further opencode configuration (a provider of the user's own,
say) over skilltune's.

Levers: ``effort`` is opencode's ``--variant`` (for the endpoint provider it becomes the
model's ``reasoning_effort``); ``max_turns`` is the build agent's ``steps`` set to
``max_turns + 1``: after ``max_turns`` model turns opencode forces one text-only answer and
the rollout is ``task_failed`` (max turns reached), as claude's ``--max-turns`` ends it;
``tools`` restricts the tools by permission rules (``"*": "deny"`` plus the listed tools;
write, edit and patch share opencode's ``edit`` permission). Edits and bash are allowed
without prompts; a permission opencode would ask for (a path outside the workspace) is
refused and the agent goes on (``experimental.continue_loop_on_deny``: without it a refused
permission silently ends the run with exit code 0).

Costs: opencode prices a step from its model table; the endpoint provider's models have no
price there (a cost of 0), so the cost is then estimated from skilltune's price table and
marked estimated. opencode retries a retryable API error (429, 5xx, network) itself, up to
5 times with 2-30 s backoff; what is left after that is an ``infra_error``.

Native placement: a skill folder goes to ``.opencode/skills/<name>/`` (listed in the system
prompt, loaded by the ``skill`` tool, which needs ripgrep ``rg`` on PATH); a single
instruction file must be ``AGENTS.md``; ``placement=system`` adds the skill to opencode's
system prompt as an ``instructions`` file. opencode's built-in ``customize-opencode`` skill is
hidden (option ``builtin_skills``) so the candidate is the only skill listed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator

from skilltune.agents.base import AgentRequest, AgentResult, BackendCheck, Message
from skilltune.agents.cli import CLIBackend, CLIOptions, infra_http_status
from skilltune.agents.home import UserFile
from skilltune.agents.skillload import OPENCODE
from skilltune.agents.transcript import stream_result, tool_call_message, tool_result_message
from skilltune.errors import UsageError
from skilltune.process import ProcessOutcome

PROVIDER = "skilltune"
TITLE = "skilltune"
SYSTEM_PROMPT_FILE = "skilltune-system-prompt.md"  # in the private HOME: an instructions file
BUILTIN_SKILLS = ("customize-opencode",)
# opencode tool name -> the permission that governs it.
TOOL_PERMISSIONS: dict[str, str] = {
    "read": "read",
    "edit": "edit",
    "write": "edit",
    "patch": "edit",
    "apply_patch": "edit",
    "multiedit": "edit",
    "glob": "glob",
    "grep": "grep",
    "list": "list",
    "bash": "bash",
    "task": "task",
    "todowrite": "todowrite",
    "todoread": "todowrite",
    "webfetch": "webfetch",
    "websearch": "websearch",
    "skill": "skill",
    "lsp": "lsp",
    "question": "question",
}
# HTTP statuses that say nothing about the task here, besides the shared ones (infra_http_status)
_MORE_INFRA_STATUSES = {402, 409}
_CONNECT = re.compile(r"cannot connect to api|unable to connect", re.I)


class OpencodeOptions(CLIOptions):
    """``--agent-opt`` keys of the opencode backend."""

    model: str | None = Field(
        default=None,
        description="a model of the endpoint (base_url / OPENAI_BASE_URL), or opencode's provider/model",
    )
    effort: str | None = Field(
        default=None, description="opencode --variant (reasoning effort: minimal, low, medium, high, max...)"
    )
    base_url: str | None = Field(
        default=None, description="OpenAI Chat Completions endpoint (default: OPENAI_BASE_URL)"
    )
    api_key_env: str = Field(default="OPENAI_API_KEY", description="the variable holding the endpoint's key")
    endpoint: bool | None = Field(
        default=None,
        description="false: ignore OPENAI_BASE_URL and use opencode's own providers (default: the "
        "endpoint when one is set)",
    )
    config: dict[str, Any] = Field(
        default_factory=dict, description="more opencode config (JSON), merged over skilltune's"
    )
    builtin_skills: bool = Field(
        default=False, description="true: list opencode's built-in skills beside the candidate"
    )

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        names = [str(v).strip().lower() for v in value if str(v).strip()]
        unknown = [n for n in names if n not in TOOL_PERMISSIONS]
        if unknown:
            raise ValueError(
                f"unknown opencode tool(s) {', '.join(unknown)} (known: {', '.join(sorted(TOOL_PERMISSIONS))})"
            )
        return names


class OpencodeAgent(CLIBackend[OpencodeOptions]):
    name = "opencode"
    Options = OpencodeOptions
    skill_loads = OPENCODE  # how its events show a skill load (agents/skillload.py)
    executable: ClassVar[str] = "opencode"
    long_prompt_via_stdin: ClassVar[bool] = True
    install_hint: ClassVar[str] = (
        "npm install -g opencode-ai (or `make agent-clis` in a skilltune checkout) and ripgrep "
        "(apt-get install ripgrep); then `opencode auth login`, or set OPENAI_BASE_URL / a provider key"
    )
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md",)
    # opencode treats <ws>/.opencode/ as a config folder and sets it up for plugins (its own
    # .gitignore lists exactly these): not the agent's work.
    workspace_noise: ClassVar[tuple[str, ...]] = tuple(
        f".opencode/{name}"
        for name in (".gitignore", "node_modules", "package.json", "package-lock.json", "bun.lock")
    )
    env_prefixes: ClassVar[tuple[str, ...]] = (
        "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "OPENROUTER_", "AZURE_", "AWS_", "VERTEX_",
    )  # fmt: skip
    env_names: ClassVar[tuple[str, ...]] = (
        "OPENCODE_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "MISTRAL_API_KEY", "XAI_API_KEY",
        "TOGETHER_API_KEY", "FIREWORKS_API_KEY", "CEREBRAS_API_KEY", "HF_TOKEN",
    )  # fmt: skip
    credentials: ClassVar[Mapping[str, UserFile]] = {
        ".local/share/opencode/auth.json": UserFile("opencode/auth.json", "XDG_DATA_HOME", ".local/share")
    }
    settings_option: ClassVar[str | None] = "config"  # the settings go in OPENCODE_CONFIG_CONTENT, no file
    tool_restriction: ClassVar[str | None] = (
        "permission rules (opencode tool names, e.g. tools=read,edit; write/edit/patch share one permission)"
    )

    def native_skill_dir(self, skill_name: str) -> str:
        return f".opencode/skills/{skill_name}"

    def check(self) -> BackendCheck:
        found = super().check()
        found.notes.append(
            "max_turns: opencode forces a text-only answer after max_turns turns (task_failed)"
        )
        if found.installed and shutil.which("rg") is None:
            found.fix = "install ripgrep (apt-get install ripgrep): opencode's skill and grep tools need rg"
            found.notes.append("ripgrep (rg) is not on PATH: native skills will not load")
        return found

    # --- isolation ----------------------------------------------------------------------------
    def env_selection(self, options: OpencodeOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The declared variables, and the endpoint's key variable (option ``api_key_env``)."""
        prefixes, names = super().env_selection(options)
        return prefixes, (*names, options.api_key_env)

    def prepare_home(self, home: Path, request: AgentRequest[OpencodeOptions]) -> None:
        super().prepare_home(home, request)
        if request.system_prompt:
            (home / SYSTEM_PROMPT_FILE).write_text(request.system_prompt, encoding="utf-8")

    def cli_env(self, home: Path, request: AgentRequest[OpencodeOptions]) -> dict[str, str]:
        return {
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "OPENCODE_CONFIG_CONTENT": json.dumps(self.settings(home, request)),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE_SKILLS": "1",  # no .claude/skills: the candidate is in .opencode
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        }

    # --- the configuration --------------------------------------------------------------------
    @staticmethod
    def endpoint(options: OpencodeOptions) -> str | None:
        """The Chat Completions endpoint in use, or None for opencode's own providers."""
        if options.endpoint is False:
            return None
        url = options.base_url or os.environ.get("OPENAI_BASE_URL") or None
        if url is None and options.endpoint:
            raise UsageError("opencode: endpoint=true needs agent option base_url or OPENAI_BASE_URL")
        return url

    def model_ref(self, options: OpencodeOptions) -> str | None:
        """``provider/model`` as opencode wants it, or None for opencode's own default.

        With an endpoint the model is the endpoint's, slashes and all (``Qwen/Qwen3-Coder``);
        without one it must name opencode's provider (``anthropic/claude-sonnet-4-5``).
        """
        endpoint = self.endpoint(options)
        model = options.model or (os.environ.get("OPENAI_MODEL") if endpoint else None)
        if not model:
            if endpoint:
                raise UsageError(
                    f"opencode: name the model of the endpoint {endpoint} (agent option model=NAME, "
                    "or OPENAI_MODEL)"
                )
            return None
        if endpoint:
            return f"{PROVIDER}/{model.removeprefix(PROVIDER + '/')}"
        if "/" not in model:
            raise UsageError(
                f"opencode: model {model!r} names no provider; write provider/model (e.g. "
                "anthropic/claude-sonnet-4-5), or point opencode at a Chat Completions endpoint "
                "(agent option base_url, or OPENAI_BASE_URL)"
            )
        return model

    def permissions(self, request: AgentRequest[OpencodeOptions]) -> dict[str, Any]:
        options = request.options
        skill: str | dict[str, str] = "allow"
        if not options.builtin_skills:
            skill = {"*": "allow", **dict.fromkeys(BUILTIN_SKILLS, "deny")}
        if options.tools is None:
            return {"edit": "allow", "bash": "allow", "skill": skill}
        allowed = {TOOL_PERMISSIONS[t] for t in options.tools}
        if options.placement == "native" and request.skill_name:
            allowed.add("skill")  # the lever must not switch off the candidate itself
        rules: dict[str, Any] = {"*": "deny"}
        for permission in sorted(allowed):
            rules[permission] = skill if permission == "skill" else "allow"
        return rules

    def default_settings(self, home: Path, request: AgentRequest[OpencodeOptions]) -> dict[str, Any]:
        """opencode's configuration for one rollout (the ``config`` option is merged over it)."""
        options = request.options
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "permission": self.permissions(request),
            "experimental": {"continue_loop_on_deny": True},
        }
        ref = self.model_ref(options)
        base_url = self.endpoint(options)
        if base_url:
            provider_options: dict[str, Any] = {"baseURL": base_url}
            if options.api_key_env in os.environ:
                provider_options["apiKey"] = "{env:" + options.api_key_env + "}"
            models: dict[str, Any] = {}
            if ref:
                model = ref.split("/", 1)[1]
                entry: dict[str, Any] = {"name": model, "tool_call": True}
                if options.effort:
                    entry["variants"] = {options.effort: {"reasoningEffort": options.effort}}
                models[model] = entry
            config["provider"] = {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "skilltune endpoint",
                    "options": provider_options,
                    "models": models,
                }
            }
        if ref:
            config["model"] = ref
            config["small_model"] = ref
        if options.max_turns:
            config["agent"] = {"build": {"steps": options.max_turns + 1}}
        if request.system_prompt:  # written by prepare_home
            config["instructions"] = [str(home / SYSTEM_PROMPT_FILE)]
        return config

    # --- the command --------------------------------------------------------------------------
    def command(self, request: AgentRequest[OpencodeOptions], home: Path) -> list[str]:
        options = request.options
        argv = [self.binary(options), "run", "--format", "json", "--title", TITLE]
        ref = self.model_ref(options)
        if ref:
            argv += ["--model", ref]
        if options.effort:
            argv += ["--variant", options.effort]
        if self.stdin_text(request) is not None:  # opencode run reads a piped stdin as the message
            return [*argv, *options.extra_args]
        return [*argv, *options.extra_args, "--", request.prompt]

    def plain_model_options(self) -> dict[str, Any]:
        return {"tools": [], "max_turns": 1}

    # --- the event stream ---------------------------------------------------------------------
    def interpret(
        self, events: list[dict[str, Any]], outcome: ProcessOutcome, request: AgentRequest[OpencodeOptions]
    ) -> AgentResult:
        options = request.options
        found = interpret_stream(events, outcome, options.max_turns)
        ref = self.model_ref(options)
        if ref:
            found.model = ref.split("/", 1)[1] if self.endpoint(options) else ref
        return found


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _error_text(error: Any) -> tuple[str, int | None, bool]:
    """(message, HTTP status, retryable) of an ``error`` event's payload."""
    if not isinstance(error, dict):
        return str(error), None, False
    data = _dict(error.get("data"))
    message = str(data.get("message") or error.get("message") or error.get("name") or "unknown error")
    status = data.get("statusCode")
    code = int(status) if isinstance(status, int | float) else None
    name = str(error.get("name") or "error")
    head = f"{name} (HTTP {code})" if code else name
    return f"{head}: {message}", code, bool(data.get("isRetryable"))


def interpret_stream(
    events: list[dict[str, Any]], outcome: ProcessOutcome, max_turns: int | None = None
) -> AgentResult:
    """opencode's ``run --format json`` events -> an AgentResult.

    ``step_start`` opens a model turn (once the endpoint answers), ``text`` parts are the
    agent's words, ``tool_use`` parts a finished tool call with its output, ``step_finish``
    closes the turn (tokens, cost), ``error`` is a session error (an API error after
    opencode's own retries, a provider or config problem). A tool still running when the run
    ends has no event: its turn counts through ``step_start``.
    """
    messages: list[Message] = []
    turns = started = 0
    tokens_in = tokens_out = 0
    cost = 0.0
    saw_usage = False
    last_text = ""
    errors: list[tuple[str, int | None, bool]] = []
    for event in events:
        kind = event.get("type")
        part = _dict(event.get("part"))
        if kind == "text":
            text = str(part.get("text") or "")
            if text.strip():
                last_text = text
                messages.append(Message(role="assistant", content=text))
        elif kind == "tool_use":
            state = _dict(part.get("state"))
            name = str(part.get("tool") or "tool")
            messages.append(tool_call_message(name, state.get("input", {})))
            if state.get("status") == "error":
                messages.append(tool_result_message(name, str(state.get("error", "")), error=True))
            else:
                messages.append(tool_result_message(name, str(state.get("output", ""))))
        elif kind == "step_start":  # the model began to answer (a turn, though it may never finish)
            started += 1
        elif kind == "step_finish":
            turns += 1
            tokens = _dict(part.get("tokens"))
            cache = _dict(tokens.get("cache"))
            if tokens:
                saw_usage = True
                tokens_in += int(tokens.get("input") or 0) + int(cache.get("read") or 0)
                tokens_in += int(cache.get("write") or 0)
                tokens_out += int(tokens.get("output") or 0) + int(tokens.get("reasoning") or 0)
            if isinstance(part.get("cost"), int | float):
                cost += float(part["cost"])
        elif kind == "error":
            errors.append(_error_text(event.get("error")))
    turns = max(turns, started)
    saw_turn = turns > 0 or bool(messages)
    found = stream_result(
        outcome,
        events,
        messages,
        last_text,
        turns=turns,
        tokens=(tokens_in, tokens_out) if saw_usage else (None, None),
        cost_usd=cost if cost > 0 else None,  # 0: a model without a price in opencode's table
    )
    if outcome.timed_out or outcome.stalled:
        found.status = "timeout"  # the runner decides: timeout after a model turn, else infra_error
        return found
    if errors:
        text = "\n".join(e[0] for e in errors)
        if any(
            (code is not None and (infra_http_status(code) or code in _MORE_INFRA_STATUSES))
            or retry
            or _CONNECT.search(what)
            for what, code, retry in errors
        ):  # what opencode's own retries could not get past: the endpoint's failure, not the task's
            found.status, found.reason = "infra_error", f"API error after opencode's retries: {text[:300]}"
        else:
            found.status, found.reason = CLIBackend.failure_status(text, saw_turn)
        return found
    if outcome.returncode not in (0, None):
        what = outcome.stderr_tail.strip() or f"opencode exited with code {outcome.returncode}"
        found.status, found.reason = CLIBackend.failure_status(what, saw_turn)
        return found
    if not saw_turn:
        found.status, found.reason = "infra_error", "opencode ended without a model turn"
        return found
    if max_turns is not None and turns > max_turns:
        found.status, found.reason = (
            "task_failed",
            f"max turns reached ({max_turns}): opencode forced a text-only answer",
        )
    return found
