"""The CLI plumbing every backend declares and CLIBackend implements once: credential links, the
user's config-dir variables, dropped variables, settings files, typed failure statuses.

Driven through the real backend classes; no CLI is started (nothing here needs one installed).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
from pydantic import ValidationError

from skilltune.agents import AgentStatus
from skilltune.agents.base import AgentRequest
from skilltune.agents.claude import ClaudeAgent, interpret_stream
from skilltune.agents.cli import CLIBackend, CLIFailure, CLIOptions
from skilltune.agents.codex import CodexAgent
from skilltune.agents.copilot import CopilotAgent
from skilltune.agents.cursor import CursorAgent
from skilltune.agents.gemini import GeminiAgent
from skilltune.agents.home import deep_merge, toml_document
from skilltune.agents.opencode import OpencodeAgent
from skilltune.agents.qwen import QwenAgent
from skilltune.process import ProcessOutcome
from skilltune.suite import Task

BACKENDS: list[type[CLIBackend]] = [
    ClaudeAgent,
    CodexAgent,
    CopilotAgent,
    CursorAgent,
    GeminiAgent,
    OpencodeAgent,
    QwenAgent,
]
CONFIG_DIR_VARIABLES = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "COPILOT_HOME",
    "QWEN_HOME",
    "GEMINI_CLI_HOME",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "CURSOR_CONFIG_DIR",
)


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's HOME of its own, and none of the CLIs' variables (config dirs, keys, endpoints) set."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key in CONFIG_DIR_VARIABLES or any(
            key in c.env_names or key.startswith(c.env_prefixes) for c in BACKENDS
        ):
            monkeypatch.delenv(key)
    return home


def private_home(tmp_path: Path) -> Path:
    home = tmp_path / "private-home"
    home.mkdir()
    return home


def make_request(backend: CLIBackend, tmp_path: Path, **options: Any) -> AgentRequest:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return AgentRequest(
        task=Task(id="t", prompt="do it"),
        prompt="do it",
        workspace=workspace,
        log_dir=workspace,
        candidate_hash="h",
        options=backend.parse_options(options),
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())


# --- credentials --------------------------------------------------------------------------------
# Each backend's login files where the user's CLI keeps them by default, and where they go in the
# private HOME.
DEFAULT_LOGINS: dict[type[CLIBackend], dict[str, str]] = {
    ClaudeAgent: {".claude/.credentials.json": ".claude/.credentials.json"},
    CodexAgent: {".codex/auth.json": ".codex/auth.json"},
    CopilotAgent: {".copilot/config.json": ".copilot/config.json"},
    CursorAgent: {
        ".config/cursor/auth.json": ".config/cursor/auth.json",
        ".cursor/cli-config.json": ".cursor/cli-config.json",
    },
    GeminiAgent: {
        ".gemini/oauth_creds.json": ".gemini/oauth_creds.json",
        ".gemini/google_accounts.json": ".gemini/google_accounts.json",
        ".gemini/gemini-credentials.json": ".gemini/gemini-credentials.json",
        ".gemini/.env": ".gemini/.env",
        ".config/gcloud/application_default_credentials.json": (
            ".config/gcloud/application_default_credentials.json"
        ),
    },
    OpencodeAgent: {".local/share/opencode/auth.json": ".local/share/opencode/auth.json"},
    QwenAgent: {".qwen/oauth_creds.json": ".qwen/oauth_creds.json", ".qwen/.env": ".qwen/.env"},
}


@pytest.mark.parametrize("backend_class", BACKENDS, ids=lambda c: c.name)
def test_declared_credentials_are_linked_never_copied_and_nothing_else_comes_along(
    backend_class: type[CLIBackend], user_home: Path, tmp_path: Path
) -> None:
    logins = DEFAULT_LOGINS[backend_class]
    for user_rel in logins:
        write(user_home / user_rel, json.dumps({"token": f"old {user_rel}"}))
    write(user_home / ".claude" / "settings.json", "{}")  # the user's settings: never linked
    write(user_home / ".gemini" / "settings.json", "{}")
    private = private_home(tmp_path)
    backend_class().link_credentials(private)
    assert files_under(private) == sorted(logins.values())
    for user_rel, private_rel in logins.items():
        link = private / private_rel
        assert link.is_symlink() and link.resolve() == (user_home / user_rel).resolve()
        link.write_text("refreshed")  # a token refreshed in a rollout reaches the user's own file
        assert (user_home / user_rel).read_text() == "refreshed"


@pytest.mark.parametrize("backend_class", BACKENDS, ids=lambda c: c.name)
def test_no_login_links_nothing(backend_class: type[CLIBackend], user_home: Path, tmp_path: Path) -> None:
    private = private_home(tmp_path)
    backend_class().link_credentials(private)
    assert list(private.iterdir()) == []


# (backend, the user's variable, the file under the directory it names, its place in the private
# HOME, where the file is by default in the user's HOME)
CONFIG_DIR_LOGINS: list[tuple[type[CLIBackend], str, str, str, str]] = [
    (ClaudeAgent, "CLAUDE_CONFIG_DIR", ".credentials.json", ".claude/.credentials.json", ".claude/.credentials.json"),
    (CodexAgent, "CODEX_HOME", "auth.json", ".codex/auth.json", ".codex/auth.json"),
    (CopilotAgent, "COPILOT_HOME", "config.json", ".copilot/config.json", ".copilot/config.json"),
    (QwenAgent, "QWEN_HOME", "oauth_creds.json", ".qwen/oauth_creds.json", ".qwen/oauth_creds.json"),
    (GeminiAgent, "GEMINI_CLI_HOME", ".gemini/oauth_creds.json", ".gemini/oauth_creds.json", ".gemini/oauth_creds.json"),
    (OpencodeAgent, "XDG_DATA_HOME", "opencode/auth.json", ".local/share/opencode/auth.json", ".local/share/opencode/auth.json"),
    (CursorAgent, "XDG_CONFIG_HOME", "cursor/auth.json", ".config/cursor/auth.json", ".config/cursor/auth.json"),
    (CursorAgent, "CURSOR_CONFIG_DIR", "cli-config.json", ".cursor/cli-config.json", ".cursor/cli-config.json"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("backend_class", "variable", "user_rel", "private_rel", "home_default"),
    CONFIG_DIR_LOGINS,
    ids=[f"{row[0].name}-{row[1]}" for row in CONFIG_DIR_LOGINS],
)
def test_a_login_under_a_custom_config_dir_is_found_and_wins_over_the_home_default(
    backend_class: type[CLIBackend],
    variable: str,
    user_rel: str,
    private_rel: str,
    home_default: str,
    user_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    in_home = write(user_home / home_default, "home default")
    elsewhere = tmp_path / "elsewhere"
    configured = write(elsewhere / user_rel, "configured")
    monkeypatch.setenv(variable, str(elsewhere))
    private = private_home(tmp_path)
    backend_class().link_credentials(private)
    assert (private / private_rel).resolve() == configured.resolve()
    assert in_home.resolve() not in {p.resolve() for p in private.rglob("*") if p.is_symlink()}
    # the variable set, the file missing there: no fallback to the HOME default (the CLI has none)
    configured.unlink()
    again = tmp_path / "private-again"
    again.mkdir()
    backend_class().link_credentials(again)
    assert not (again / private_rel).exists() and not (again / private_rel).is_symlink()


def test_cursor_takes_cli_config_from_xdg_only_where_it_exists(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_home = write(user_home / ".cursor" / "cli-config.json", "{}")
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    assert CursorAgent().user_credentials()[".cursor/cli-config.json"] == in_home
    in_xdg = write(xdg / "cursor" / "cli-config.json", "{}")
    assert CursorAgent().user_credentials()[".cursor/cli-config.json"] == in_xdg
    cursor_dir = tmp_path / "cursor-dir"
    monkeypatch.setenv("CURSOR_CONFIG_DIR", str(cursor_dir))  # set: it wins, even with nothing there
    assert CursorAgent().user_credentials()[".cursor/cli-config.json"] == cursor_dir / "cli-config.json"


# --- the environment ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "backend_class",
    [c for c in BACKENDS if c.dropped_env_names or c.dropped_env_prefixes],
    ids=lambda c: c.name,
)
def test_dropped_variables_never_reach_the_agent(
    backend_class: type[CLIBackend], user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = backend_class()
    dropped = [*backend.dropped_env_names, *(f"{p}SOMETHING" for p in backend.dropped_env_prefixes)]
    for name in dropped:
        # each is one of this CLI's own variables (its prefix): only the drop keeps it out
        assert name in backend.env_names or name.startswith(backend.env_prefixes), name
        monkeypatch.setenv(name, f"/user/{name}")
    kept = backend.env_prefixes[0] + "API_KEY"
    monkeypatch.setenv(kept, "the user's key")
    private = private_home(tmp_path)
    request = make_request(backend, tmp_path)
    env = backend.environment(private, request)
    assert env[kept] == "the user's key"
    for name in dropped:  # absent, or set by the CLI's own plumbing to a place in the private HOME
        assert name not in env or env[name].startswith(str(private)), (name, env[name])
    assert not set(dropped) & set(backend.user_env(request.options))


def test_a_dropped_variable_is_no_part_of_the_cache_key(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = GeminiAgent()
    options = backend.parse_options({"executable": str(tmp_path / "no-such-cli")})  # no version to read
    monkeypatch.setenv("GEMINI_CLI_IDE_SERVER_HOST", "127.0.0.1")  # a HOST, yet it never reaches gemini
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
    identity = backend.cache_identity(options)
    assert identity == {"version": None, "env": {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"}}


def test_variables_an_option_brings_along_reach_the_agent_and_the_cache_key(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = QwenAgent()
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "secret")
    private = private_home(tmp_path)
    no_cli = str(tmp_path / "no-such-cli")
    openai = make_request(backend, tmp_path, executable=no_cli)
    anthropic = make_request(backend, tmp_path, auth_type="anthropic", executable=no_cli)
    assert "ANTHROPIC_MODEL" not in backend.environment(private, openai)
    assert backend.cache_identity(openai.options)["env"] == {}
    env = backend.environment(private, anthropic)
    assert env["ANTHROPIC_MODEL"] == "claude-x" and env["ANTHROPIC_API_KEY"] == "secret"
    assert backend.cache_identity(anthropic.options)["env"] == {"ANTHROPIC_MODEL": "claude-x"}
    monkeypatch.setenv("MY_ENDPOINT_KEY", "k")
    opencode = OpencodeAgent()
    request = make_request(opencode, tmp_path, endpoint=False, api_key_env="MY_ENDPOINT_KEY")
    assert opencode.environment(private, request)["MY_ENDPOINT_KEY"] == "k"


# --- settings files -------------------------------------------------------------------------------
def test_the_settings_option_is_deep_merged_into_the_written_file(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    backend = GeminiAgent()
    overrides = {"general": {"maxAttempts": 7, "vimMode": True}, "ui": {"theme": "dark"}}
    request = make_request(backend, tmp_path, max_attempts=2, settings=overrides)
    private = private_home(tmp_path)
    backend.prepare_home(private, request)
    written = json.loads((private / ".gemini" / "settings.json").read_text())
    assert written["general"]["maxAttempts"] == 7 and written["general"]["vimMode"] is True
    assert written["general"]["enableAutoUpdate"] is False  # skilltune's keys beside the user's stay
    assert written["ui"] == {"theme": "dark"}
    assert written["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert request.options.model_dump()["settings"] == overrides  # the option itself is untouched


def test_opencode_merges_its_config_option_into_the_configuration_it_passes(
    user_home: Path, tmp_path: Path
) -> None:
    backend = OpencodeAgent()
    request = make_request(
        backend,
        tmp_path,
        model="anthropic/claude-sonnet-4-5",
        endpoint=False,
        config={"permission": {"webfetch": "allow"}, "share": "manual"},
    )
    env = backend.environment(private_home(tmp_path), request)
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    assert config["permission"]["webfetch"] == "allow" and config["permission"]["bash"] == "allow"
    assert config["share"] == "manual" and config["autoupdate"] is False


@pytest.mark.parametrize(
    ("backend_class", "path"),
    [
        (ClaudeAgent, ".claude/.claude.json"),
        (CodexAgent, ".codex/config.toml"),
        (CopilotAgent, ".copilot/settings.json"),
        (GeminiAgent, ".gemini/settings.json"),
        (QwenAgent, ".qwen/settings.json"),
    ],
    ids=["claude", "codex", "copilot", "gemini", "qwen"],
)
def test_each_settings_file_is_written_where_the_cli_reads_it_and_parses(
    backend_class: type[CLIBackend], path: str, user_home: Path, tmp_path: Path
) -> None:
    backend = backend_class()
    request = make_request(backend, tmp_path)
    private = private_home(tmp_path)
    backend.prepare_home(private, request)
    text = (private / path).read_text()
    parsed = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    assert parsed == backend.settings(private, request) and parsed


def test_a_settings_option_that_is_no_option_is_refused_when_the_backend_is_defined() -> None:
    with pytest.raises(TypeError, match="'overrides' is not an option"):

        class Broken(CLIBackend):
            name = "broken"
            executable = "broken"
            Options = CLIOptions
            settings_option = "overrides"


def test_deep_merge_merges_mappings_and_replaces_everything_else() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merged = deep_merge(base, {"a": {"c": [3], "e": {"f": 1}}, "d": {"g": 2}})
    assert merged == {"a": {"b": 1, "c": [3], "e": {"f": 1}}, "d": {"g": 2}}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_toml_settings_round_trip() -> None:
    document = {
        "text": 'quote " backslash \\ tab \t del \x7f ctrl \x01 ünïcode\n---',
        "flag": False,
        "n": 3,
        "x": 0.5,
        "list": ["a", 1],
        "plain": {"enabled": True},
        "outer": {"inner-name": {"k": "v"}, "odd key": {"k": 1}},
        "empty": {},
    }
    assert tomllib.loads(toml_document(document)) == document


# --- outcomes ---------------------------------------------------------------------------------------
def test_the_failure_status_is_typed_as_an_agent_status() -> None:
    hints = get_type_hints(CLIFailure)
    assert set(get_args(hints["status"])) == {"infra_error", "task_failed"} <= set(get_args(AgentStatus))
    assert hints["reason"] is str


@pytest.mark.parametrize(
    ("text", "saw_model_turn", "status"),
    [
        ("429 Too Many Requests", True, "infra_error"),
        ("API Error: 529 overloaded", True, "infra_error"),
        ("Invalid API key · Please run /login", True, "infra_error"),
        ("connect ECONNREFUSED 127.0.0.1:9", True, "infra_error"),
        ("TypeError: cannot read properties of undefined", False, "infra_error"),  # before any turn
        ("TypeError: cannot read properties of undefined", True, "task_failed"),
        ("the tool failed: file not found", True, "task_failed"),
    ],
)
def test_failure_status_tells_infrastructure_from_the_tasks_own_failure(
    text: str, saw_model_turn: bool, status: str
) -> None:
    found = CLIBackend.failure_status(text, saw_model_turn)
    assert isinstance(found, CLIFailure) and found.status == status
    assert text.strip()[:50] in found.reason


def test_backends_own_classifiers_return_the_same_type() -> None:
    assert QwenAgent.classify("503 Service Unavailable", saw_model_turn=True) == CLIFailure(
        "infra_error", "API error 503 Service Unavailable"
    )
    assert QwenAgent.classify("400 bad request", saw_model_turn=True).status == "task_failed"
    assert CodexAgent.classify("stream disconnected before completion", saw_model_turn=True).status == (
        "infra_error"
    )
    assert CodexAgent.classify("apply_patch verification failed", saw_model_turn=True) == CLIFailure(
        "task_failed", "apply_patch verification failed"
    )


# --- cursor's own events -----------------------------------------------------------------------------
CURSOR_EVENTS: list[dict[str, Any]] = [
    {"type": "system", "subtype": "init", "model": "m"},
    {
        "type": "assistant",
        "message": {"id": "1", "model": "m", "content": [{"type": "text", "text": "on it"}]},
    },
    {"type": "tool_call", "subtype": "started", "tool_call": {"shellToolCall": {"args": {"command": "ls"}}}},
    {
        "type": "tool_call",
        "subtype": "completed",
        "tool_call": {"shellToolCall": {"result": {"error": "boom"}}},
    },
    {"type": "result", "subtype": "success", "result": "done"},
]


def test_cursor_reads_its_tool_call_events_and_claudes_parser_does_not(tmp_path: Path) -> None:
    outcome = ProcessOutcome(returncode=0, stdout_lines=[], stderr_tail="")
    backend = CursorAgent()
    found = backend.interpret(CURSOR_EVENTS, outcome, make_request(backend, tmp_path))
    assert [(m.role, m.content) for m in found.messages] == [
        ("assistant", "on it"),
        ("assistant", '[tool call] shell {"command": "ls"}'),
        ("tool", '[shell result (error)] {"error": "boom"}'),
    ]
    assert (found.status, found.final_text) == ("ok", "done")
    assert [m.content for m in interpret_stream(CURSOR_EVENTS, outcome).messages] == ["on it"]


# --- options typed per backend ------------------------------------------------------------------


@pytest.mark.parametrize("backend_class", BACKENDS, ids=lambda c: c.name)
def test_a_backend_parses_its_own_options_model(backend_class: type[CLIBackend], tmp_path: Path) -> None:
    """What a backend's methods take (its type parameter) is what parse_options returns: its Options."""
    request = make_request(backend_class(), tmp_path, model="m")
    assert type(request.options) is backend_class.Options and request.options.model == "m"


def test_a_request_refuses_options_that_are_not_an_options_model(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="options must be a backend's Options model, not dict"):
        AgentRequest(
            task=Task(id="t", prompt="p"), prompt="p", workspace=tmp_path, log_dir=tmp_path,
            candidate_hash="h", options={"model": "m"},
        )  # fmt: skip


def test_a_cli_that_is_not_on_path_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the preflight, `run --agent gemini` on a machine without gemini started every rollout
    and each ended infra_error; now the command stops at once, exit 2, naming the install and the
    option, and writes nothing. A configured executable that is no program is refused the same way;
    a Ray run is not checked here (its workers have a PATH of their own)."""
    from typer.testing import CliRunner

    from skilltune.cli import app
    from skilltune.errors import UsageError
    from skilltune.rollout.workspace import check_target
    from tests.helpers import MOCK_SKILL, MOCK_SUITE

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    out = tmp_path / "out"
    args = ["run", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--agent", "gemini", "--split", "val",
            "--reps", "1", "--out", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and not out.exists()
    assert "gemini: `gemini` is not on PATH: npm install -g @google/gemini-cli" in result.output
    assert "--agent-opt executable=PATH" in result.output and "Traceback" not in result.output
    backend = GeminiAgent()
    with pytest.raises(UsageError, match="executable=/no/such/gemini is not an executable file"):
        check_target(backend, backend.parse_options({"executable": "/no/such/gemini"}), [])
    check_target(backend, backend.parse_options({}), [], executor="ray")  # not checked: the workers' PATH


def test_qwen_runs_its_shell_tool_on_pipes(tmp_path: Path) -> None:
    """qwen's private settings turn its pseudo-terminal shell off: on one, qwen 0.15 takes a command's
    output when node-pty reports the exit, which can come before the output's end (node-pty issue 72).
    The real CLI's behaviour is tests/integration/test_qwen.py's; this holds where qwen is absent."""
    backend = QwenAgent()
    home = private_home(tmp_path)
    settings = backend.default_settings(home, make_request(backend, tmp_path))
    assert settings["tools"] == {"shell": {"enableInteractiveShell": False}}
    backend.prepare_home(home, make_request(backend, tmp_path))
    written = json.loads((home / ".qwen" / "settings.json").read_text())
    assert written["tools"]["shell"]["enableInteractiveShell"] is False
