"""A stand-in for ``cursor-agent`` (not installable here): it replays a recorded event stream.

It checks the headless form the backend must use (``-p --force --trust --output-format
stream-json [--model M] [--mode ask|plan] -- PROMPT``), ignores the network, prints the
recording ``STANDIN_SCENARIO`` names (``{cwd}`` and ``{prompt}`` filled in) and carries out
the file writes the recording shows, as the real agent would. ``STANDIN_LOG`` (a JSON file)
receives what it saw: argv, the environment, the private HOME, the workspace, stdin.

Scenarios: a recording's file name without ``cursor_`` and ``.jsonl`` (``hello``,
``hello_claude_like``), or ``rate_limit``, ``unauthenticated``, ``crash_after_turn``,
``hang``, ``answer`` (a plain text answer: the proposer's use).

The test wraps it in a shell script that sets both variables, because the backend passes
only its own variables through.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
SESSION = "6f1c1d2e-0000-4000-8000-00000000000f"


def fail(message: str, code: int = 2) -> None:
    print(message, file=sys.stderr, flush=True)
    sys.exit(code)


def parse(argv: list[str]) -> tuple[dict[str, str | bool], str]:
    """The flags and the prompt; anything but the documented headless form is refused."""
    if "--" not in argv:
        fail("stand-in: the prompt must come after `--`")
    cut = argv.index("--")
    flags, rest = argv[:cut], argv[cut + 1 :]
    if len(rest) != 1:
        fail(f"stand-in: expected exactly one prompt after `--`, got {rest!r}")
    seen: dict[str, str | bool] = {}
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag in ("-p", "--print", "--force", "--trust"):
            seen[flag] = True
        elif flag in ("--output-format", "--model", "--mode"):
            if i + 1 >= len(flags):
                fail(f"stand-in: {flag} needs a value")
            seen[flag] = flags[i + 1]
            i += 1
        else:
            fail(f"stand-in: unknown option {flag}")
        i += 1
    for needed in ("-p", "--force", "--trust"):
        if needed not in seen:
            fail(f"stand-in: headless runs need {needed}")
    if seen.get("--output-format") != "stream-json":
        fail("stand-in: --output-format stream-json is required")
    return seen, rest[0]


def emit(event: Mapping[str, object]) -> None:
    print(json.dumps(event), flush=True)


def listing(root: Path) -> dict[str, str]:
    """relative path -> 'link:<target>' or 'file' (dirs left out)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = f"link:{path.readlink()}"
        elif path.is_file():
            found[rel] = "file"
    return found


def replay(name: str, cwd: Path, prompt: str) -> None:
    recording = HERE / f"cursor_{name}.jsonl"
    for line in recording.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        event = json.loads(line.replace("{cwd}", str(cwd)).replace('"{prompt}"', json.dumps(prompt)))
        if event.get("type") == "tool_call" and event.get("subtype") == "started":
            write = event["tool_call"].get("writeToolCall")
            if write:
                Path(write["args"]["path"]).write_text(write["args"]["fileText"], encoding="utf-8")
        if event.get("type") == "assistant":
            for block in event["message"]["content"]:
                if block.get("type") == "tool_use" and block.get("name") == "Write":
                    Path(block["input"]["path"]).write_text(block["input"]["fileText"], encoding="utf-8")
        emit(event)
        time.sleep(0.01)


def main() -> None:
    flags, prompt = parse(sys.argv[1:])
    cwd = Path.cwd()
    scenario = os.environ.get("STANDIN_SCENARIO", "hello")
    log = os.environ.get("STANDIN_LOG")
    if log:
        home = Path(os.environ["HOME"])
        seen = {
            "argv": sys.argv[1:],
            "flags": flags,
            "prompt": prompt,
            "env": dict(os.environ),
            "home": listing(home),
            "workspace": listing(cwd),
            "stdin": sys.stdin.read() if not sys.stdin.isatty() else None,
        }
        Path(log).write_text(json.dumps(seen, indent=1), encoding="utf-8")
    init = {"type": "system", "subtype": "init", "apiKeySource": "env", "cwd": str(cwd), "session_id": SESSION, "model": str(flags.get("--model") or "GPT-5"), "permissionMode": "default"}  # fmt: skip
    if scenario == "rate_limit":
        emit(init)
        fail("Error: [resource_exhausted] You have hit a rate limit (HTTP 429). Please try again later.", 1)
    if scenario == "unauthenticated":
        fail("Authentication required. Please run 'cursor-agent login' first, or set CURSOR_API_KEY.", 1)
    if scenario == "crash_after_turn":
        emit(init)
        emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Looking at the task."}]}, "session_id": SESSION})  # fmt: skip
        fail("TypeError: Cannot read properties of undefined (reading 'path')", 1)
    if scenario == "hang":
        emit(init)
        time.sleep(120)
        return
    if scenario == "answer":
        text = os.environ.get("STANDIN_ANSWER", "plain answer")
        emit(init)
        emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}, "session_id": SESSION})  # fmt: skip
        emit({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 900, "duration_api_ms": 900, "result": text, "session_id": SESSION})  # fmt: skip
        return
    replay(scenario, cwd, prompt)


if __name__ == "__main__":
    main()
