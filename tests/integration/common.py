"""Shared pieces of the agent-CLI integration tests: a one-task suite, a rollout, checks.

Each CLI's test supplies a scenario for the fake model server that makes the real
CLI write ``hello.txt`` with its own file-writing tool, then finish with a text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skilltune.agents import get_backend
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, rollout_dir
from skilltune.runfiles import RolloutRecord
from skilltune.sandbox import UNSEALED, Seal
from skilltune.skill import Candidate
from skilltune.suite import load_suite
from tests.fakeserver import INPUT_TOKENS, OUTPUT_TOKENS, FakeModelServer
from tests.helpers import growing_limit, write_suite

TOKEN = "HELLO-SKILLTUNE-42"
FILE = "hello.txt"
FINAL = "Done: wrote hello.txt"
NO_RETRY = RetryPolicy(max_attempts=1, base_s=0.0, cap_s=0.0)
SKILL = Candidate(
    {
        "SKILL.md": "---\nname: greeter\ndescription: Writes greeting files when asked to.\n---\n\n- Write exactly what the task asks.\n"
    }
)


def hello_suite(root: Path) -> Path:
    """One train task: create hello.txt holding the token; scored by a command in the workspace."""
    task = {
        "id": "hello",
        "prompt": f"Create a file named {FILE} in the current directory containing exactly {TOKEN}.",
        "scoring": {"mode": "command", "command": f"grep -q {TOKEN} {FILE}", "timeout": 30},
    }
    return write_suite(root, [task], [dict(task, id="hello-val")])


def rollout(
    tmp_path: Path,
    agent: str,
    options: dict[str, Any],
    candidate: Candidate | None = SKILL,
    retry: RetryPolicy = NO_RETRY,
    seal: Seal = UNSEALED,
    suite_root: Path | None = None,
) -> Rollout:
    """One real rollout of ``agent`` on the hello task (of ``suite_root`` when given); returns the
    record and its folder. ``seal``: the sandbox the runner seals it with (default: none)."""
    suite = load_suite(suite_root or hello_suite(tmp_path / "suite"))
    backend = get_backend(agent)
    runner = RolloutRunner(
        suite=suite,
        backend=backend,
        options=backend.parse_options(options),
        out=tmp_path / "out",
        retry=retry,
        seal=seal,
    )
    job = RolloutJob(task=suite.task("hello"), phase="eval", candidate=candidate, replicate=0, seed=0)
    record = runner.run(job)
    return record, rollout_dir(tmp_path / "out", job)


Rollout = tuple[RolloutRecord, Path]  # a record and its folder


# a test of what happens at a wall limit: the limits grow until the CLI got there (tests/helpers.py)
growing_wall_limit = growing_limit


def check_success(record: RolloutRecord, folder: Path, server: FakeModelServer, cost_reported: bool) -> None:
    """The records a real rollout must leave: diff, transcript, usage, score."""
    assert record.status == "ok", (
        record.status,
        record.reason,
        (folder / "agent-stderr.log").read_text()[-2000:],
    )
    assert record.score is not None and record.score.hard == 1, record.score
    diff = (folder / "diff.patch").read_text()
    assert f"+++ b/{FILE}" in diff and TOKEN in diff, diff
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]
    assert events, "events.jsonl is empty"
    conversation = json.loads((folder / "conversation.json").read_text())
    assert conversation[0]["role"] == "user" and TOKEN in conversation[0]["content"]
    assert any(m["role"] == "assistant" for m in conversation)
    assert FINAL in (folder / "output.txt").read_text()
    model_calls = [r for r in server.requests if r.tools]
    assert len(model_calls) >= 2, "expected a tool call and a final answer"
    assert record.tokens_in is not None and record.tokens_in >= INPUT_TOKENS * len(model_calls) - INPUT_TOKENS
    assert record.tokens_out is not None and record.tokens_out >= OUTPUT_TOKENS
    assert record.cost_usd is not None
    assert record.cost_estimated is (not cost_reported)
