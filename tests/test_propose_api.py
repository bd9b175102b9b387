"""The API proposer (LangChain, OpenAI-compatible) against a scripted local server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skilltune.errors import UsageError
from skilltune.progress import PlainReporter
from skilltune.suite import load_suite
from skilltune.training import resume, train
from tests.fake_openai import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI, prompt_of
from tests.fakeserver import Failure, FakeModelServer, Reply
from tests.helpers import MOCK_SKILL, MOCK_SUITE, trajectory_blocks

POOL = load_suite(MOCK_SUITE).config.model_extra["proposer_pool"]  # type: ignore[index]


def analyst(body: dict[str, Any]) -> str:
    """A scripted analyst: maps the SYMPTOM lines of failed trajectories to pool rules."""
    edits = []
    for trajectory, block in trajectory_blocks(prompt_of(body)).items():
        for line in block.splitlines():
            if line.startswith("SYMPTOM:"):
                for entry in POOL:
                    if any(a and a.lower() in line.lower() for a in entry["answers"]):
                        edits.append(
                            {
                                "op": "append",
                                "text": entry["text"],
                                "rationale": "symptom",
                                "support": [trajectory],
                            }
                        )
    return "Here is my analysis.\n```json\n" + json.dumps({"edits": edits}) + "\n```"


def _train(tmp_path: Path, server: FakeOpenAI, tag: str, **settings: Any) -> Any:
    options = {
        "provider": "openai",
        "model": "gpt-test",
        "base_url": server.base_url,
        "api_key_env": "FAKE_API_KEY",
        "stream": False,  # this fake answers in one JSON object (a streamed request would be sent twice)
    }
    options.update(settings.pop("proposer_options", {}))
    # One ask a step: these tests script one call and its repair (several asks: tests/test_proposals.py).
    settings = {"proposals": 1, **settings}
    return train(
        MOCK_SUITE, MOCK_SKILL, tag=tag, runs_dir=str(tmp_path), proposer="api", proposer_options=options,
        reporter=PlainReporter(quiet=True), **settings,
    )  # fmt: skip


def test_api_proposer_trains_with_one_repair_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "test-key")
    seen = {"first": True}

    def respond(body: dict[str, Any]) -> str:
        if seen["first"]:
            seen["first"] = False
            return "I would add some rules about impact."  # no JSON: the proposer asks once more
        return analyst(body)

    with FakeOpenAI(respond) as server:
        result = _train(tmp_path, server, "api", max_steps=3, seed=1, epoch_steps=10)
    assert result.state == "success", result.reason
    assert result.best_val is not None and result.seed_val is not None and result.best_val > result.seed_val
    assert server.requests and all(r["auth"] == "Bearer test-key" for r in server.requests)
    assert all(r["path"] == "/v1/chat/completions" for r in server.requests)
    calls = json.loads((tmp_path / "api" / "steps" / "step_0001" / "reflections.json").read_text())["calls"]
    assert [c["role"] for c in calls] == ["analyst", "analyst (repair)"]
    assert "could not be used" in calls[1]["prompt"]
    assert all(c["tokens_in"] == PROMPT_TOKENS and c["tokens_out"] == COMPLETION_TOKENS for c in calls)
    assert all(c["model"] == "gpt-test" for c in calls)
    # the prompts carry train evidence only
    held_out = {
        json.loads(line)["id"]
        for split in ("val", "test")
        for line in (MOCK_SUITE / f"{split}.jsonl").read_text().splitlines()
    }
    for request in server.requests:
        text = prompt_of(request["body"])
        assert not [i for i in held_out if i in text]
        assert re.search(r'<trajectory id="train-[a-z-]+#r\d+"', text)
    config = (tmp_path / "api" / "config.json").read_text()
    assert "test-key" not in config


def test_invalid_answers_twice_make_an_empty_step_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "k")
    with FakeOpenAI(lambda body: '{"edits": [{"op": "explode"}]}') as server:
        result = _train(tmp_path, server, "bad", max_steps=1)
    assert result.state == "no-progress"
    step = json.loads((tmp_path / "bad" / "steps" / "step_0001" / "step.json").read_text())
    assert step["decision"] == "empty"
    notes = json.loads((tmp_path / "bad" / "steps" / "step_0001" / "reflections.json").read_text())["notes"]
    assert "invalid answer twice" in notes["error"] and "op" in notes["error"]


def test_a_bare_list_of_edits_is_read_and_a_lone_edit_gets_the_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a 0.5B model answered by hand: edits without their wrapper. A lone edit object used to
    pass as an answer holding no edits, with no repair asked for."""
    monkeypatch.setenv("FAKE_API_KEY", "k")
    edit = {"op": "append", "file": "SKILL.md", "text": POOL[0]["text"], "rationale": "r", "kind": "failure"}
    answers = iter([json.dumps(edit), "```json\n" + json.dumps([edit]) + "\n```"])
    with FakeOpenAI(lambda body: next(answers)) as server:
        _train(tmp_path, server, "bare", max_steps=1)
    reflections = json.loads((tmp_path / "bare" / "steps" / "step_0001" / "reflections.json").read_text())
    assert [c["role"] for c in reflections["calls"]] == ["analyst", "analyst (repair)"]
    assert "missing 'edits'" in reflections["calls"][1]["prompt"]
    # read from the bare list, then dropped before the merge: it cites no trajectory
    assert reflections["edits"] == [] and [d["edit"]["text"] for d in reflections["dropped"]] == [
        POOL[0]["text"]
    ]


def test_rewrite_mode_runs_three_roles_as_separate_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "k")
    seed_text = (MOCK_SKILL / "SKILL.md").read_text()
    revised = seed_text.replace(
        "## Rules\n",
        "## Rules\n\n- Put numbers on the customer impact: how many users, how many minutes, how many requests failed.\n",
    )

    def respond(body: dict[str, Any]) -> str:
        prompt = prompt_of(body)
        if "You are the failure analyst" in prompt:
            return "- impact is never quantified (train-x#r1)"
        return f"```markdown\n{revised}```"

    with FakeOpenAI(respond) as server:
        result = _train(
            tmp_path,
            server,
            "rw",
            max_steps=1,
            mode="rewrite",
            proposer_options={"roles": {"author": "gpt-author"}},
        )
    calls = json.loads((tmp_path / "rw" / "steps" / "step_0001" / "reflections.json").read_text())["calls"]
    assert [c["role"] for c in calls] == ["failure analyst", "author", "red-team reviewer"]
    assert [c["model"] for c in calls] == ["gpt-test", "gpt-author", "gpt-test"]
    assert [r["body"]["model"] for r in server.requests] == ["gpt-test", "gpt-author", "gpt-test"]
    candidate = (tmp_path / "rw" / "steps" / "step_0001" / "candidate_skill.md").read_text()
    assert "Put numbers on the customer impact" in candidate
    allocation = (tmp_path / "rw" / "allocation.md").read_text()
    assert "- author: gpt-author" in allocation
    assert result.steps == 1


def test_unreachable_endpoint_blocks_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "k")
    with FakeOpenAI(lambda body: (529, {"error": {"message": "overloaded"}})) as server:
        result = _train(tmp_path, server, "down", max_steps=2, proposer_options={"max_retries": 0})
    assert result.state == "blocked"
    assert "endpoint failed for the analyst" in result.reason


def test_missing_key_or_model_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_API_KEY", raising=False)
    with FakeOpenAI(analyst) as server:
        with pytest.raises(UsageError, match=r"\$FAKE_API_KEY"):
            _train(tmp_path, server, "nokey", max_steps=1)
        monkeypatch.setenv("FAKE_API_KEY", "k")
        with pytest.raises(UsageError, match="needs a model"):
            _train(tmp_path, server, "nomodel", max_steps=1, proposer_options={"model": None})
        with pytest.raises(UsageError, match="unknown role"):
            _train(tmp_path, server, "role", max_steps=1, proposer_options={"roles": {"poet": "x"}})
    assert not server.requests
    assert not list(tmp_path.iterdir())


def test_a_first_ctrl_c_ends_a_proposer_call_at_once_and_the_run_resumes(tmp_path: Path) -> None:
    """The endpoint hangs for ten minutes on the analyst's call; a first Ctrl-C ends the call at once
    (the connection is closed), the run ends ``stopped``, and resume finishes it."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    hang = Failure(hang_s=600)
    side = lambda request: Reply(text=analyst(request.body))  # noqa: E731
    with FakeModelServer(side, [hang], side=side, failures_for="all") as server:
        options = [f"base_url={server.url}/v1", "model=gpt-test", "timeout_s=600", "wall_limit_s=600"]
        argv = [sys.executable, "-m", "skilltune.cli", "train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL),
                "--agent", "mock", "--proposer", "api", "--tag", "stop", "--runs-dir", str(tmp_path),
                "--max-steps", "2", "--seed", "1", "-q"]  # fmt: skip
        for option in options:
            argv += ["--proposer-opt", option]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while not server.requests:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the analyst's call never reached the server"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=300)  # the call hangs for 600 s: only the stop ends it
        finally:
            if proc.poll() is None:
                proc.kill()
        assert not server.release.is_set() and len(server.requests) == 1  # still hanging when the run ended
        assert proc.returncode == 0, err
        run = tmp_path / "stop"
        assert (run / "TERMINAL").read_text().startswith("stopped:")
        assert not (run / "steps" / "step_0001" / "reflections.json").exists()
        result = resume(run, reporter=PlainReporter(quiet=True))  # the endpoint answers now
    assert result.state in ("success", "no-progress"), result.reason
    assert (run / "steps" / "step_0001" / "reflections.json").is_file()
