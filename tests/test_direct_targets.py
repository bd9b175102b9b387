"""The direct chat targets (``--agent openai`` / ``anthropic``) against the scripted fake server:
``skilltune run`` and ``skilltune train`` end to end, faults, refusals, records like every backend's."""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import InfraFailure, UsageError
from skilltune.measure.evaluate import evaluate
from skilltune.modelcalls import forget_endpoints
from skilltune.process import RolloutInterrupted, clear_interrupt, interrupt_agents
from skilltune.rollout.runner import RetryPolicy
from skilltune.runfiles import RolloutRecord
from tests.fakeserver import INPUT_TOKENS, OUTPUT_TOKENS, Failure, FakeModelServer, ModelRequest, Reply
from tests.helpers import growing_limit, write_skill, write_suite

runner = CliRunner()
LABEL_RULE = "Start the answer with 'LABEL: ' and the label."
DONE_RULE = "End every answer with DONE."
POOL = [
    {"id": "p-label", "text": f"- {LABEL_RULE}", "answers": ["could not find the label line"]},
    {"id": "p-done", "text": f"- {DONE_RULE}", "answers": ["did not see the end marker"]},
    {"id": "p-emoji", "text": "- Use emoji freely.", "answers": ["never shown"]},
]
TICKETS = [
    ("refund", "billing"), ("password", "account"), ("crash", "bug"), ("invoice", "billing"),
    ("login", "account"), ("freeze", "bug"), ("charge", "billing"), ("email", "account"),
]  # fmt: skip
NO_WAIT = RetryPolicy(max_attempts=4, base_s=0.0, cap_s=0.0)


def router(request: ModelRequest) -> Reply:
    """A stand-in small model: it follows the rules the skill states (system prompt or prepended),
    and its answer says what it missed (the mock proposer reads those SYMPTOM lines)."""
    label = re.search(r"\(label: (\w+)\)", request.text)
    answer = label.group(1) if label else "unknown"
    lines = [f"LABEL: {answer}" if LABEL_RULE in request.text else answer]
    if LABEL_RULE not in request.text:
        lines.append("SYMPTOM: the router could not find the label line")
    if DONE_RULE in request.text:
        lines.append("DONE.")
    else:
        lines.append("SYMPTOM: the router did not see the end marker")
    return Reply(text="\n".join(lines))


def task(word: str, label: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"{word}-{label}",
        "prompt": f"Route this ticket about a {word} (label: {label}).",
        "scoring": {"required": [f"LABEL: {label}", "DONE."]},
        **extra,
    }


def router_suite(root: Path, **extra: Any) -> Path:
    """8 val tasks; train and test hold the first four under other ids."""
    tasks = [task(w, label, **extra) for w, label in TICKETS]
    train = [t | {"id": t["id"] + "-tr"} for t in tasks[:4]]
    test = [t | {"id": t["id"] + "-te"} for t in tasks[:4]]
    return write_suite(root, train, tasks, test, {"proposer_pool": POOL})


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    forget_endpoints()
    yield
    forget_endpoints()


@pytest.fixture
def skills(tmp_path: Path) -> dict[str, Path]:
    return {
        "seed": write_skill(tmp_path / "seed", "- Route support tickets.", name="router"),
        "good": write_skill(
            tmp_path / "good", f"- Route support tickets.\n- {LABEL_RULE}\n- {DONE_RULE}", name="router"
        ),
    }


def serve(failures: list[Failure] | None = None, **kwargs: Any) -> FakeModelServer:
    return FakeModelServer(router, failures, side=router, failures_for="all", **kwargs)


def agent_opts(server: FakeModelServer, agent: str, **extra: Any) -> list[str]:
    base = f"{server.url}/v1" if agent == "openai" else server.url
    options = {
        "base_url": base,
        "model": "tiny-router",
        "backoff_s": 0.01,
        "prices": {"tiny": [1.0, 2.0]},
    } | extra
    args = []
    for key, value in options.items():
        args += ["--agent-opt", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return args


def records(out: Path) -> list[tuple[RolloutRecord, Path]]:
    return [(RolloutRecord.read(p), p.parent) for p in sorted(out.rglob("record.json"))]


@pytest.mark.parametrize(
    ("agent", "stream"), [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]
)
def test_skilltune_run_records_a_direct_target_like_any_backend(
    tmp_path: Path, skills: dict[str, Path], agent: str, stream: bool
) -> None:
    suite = router_suite(tmp_path / "suite")
    out = tmp_path / "out"
    with serve() as server:
        args = [
            "run",
            str(suite),
            "--skill",
            str(skills["good"]),
            "--agent",
            agent,
            "--reps",
            "2",
            "--out",
            str(out),
        ]
        result = runner.invoke(app, [*args, *agent_opts(server, agent, stream=stream)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hard_acc"] == 1.0 and summary["statuses"] == {"ok": 16}
    # LangChain reads a streamed Anthropic answer's usage from message_delta; this fake (like
    # older Messages API streams) sends input tokens only in message_start: they are estimated
    exact_in = not (agent == "anthropic" and stream)
    assert summary["cost_usd"] > 0 and (summary["tokens_in"] == 16 * INPUT_TOKENS or not exact_in)
    assert len(server.requests) == 16 and all(r.stream is stream for r in server.requests)
    first = server.requests[0]
    if agent == "openai":
        assert first.path == "/v1/chat/completions" and first.body["messages"][0]["role"] == "system"
        assert LABEL_RULE in first.body["messages"][0]["content"] and first.body["max_tokens"] == 1024
        seeds = {(r.body["messages"][1]["content"], r.body["seed"]) for r in server.requests}
        assert len(seeds) == 16  # one seed per (task, replicate)
    else:
        assert (
            first.path == "/v1/messages" and LABEL_RULE in first.body["system"] and "seed" not in first.body
        )
    assert {r.body["temperature"] for r in server.requests} == {0.7}
    for record, folder in records(out):
        assert record.agent == agent and record.model == "tiny-router" and record.status == "ok"
        assert (record.tokens_out, record.turns) == (OUTPUT_TOKENS, 1) and (record.tokens_in or 0) > 0
        if exact_in:
            assert record.tokens_in == INPUT_TOKENS
            assert record.cost_usd == pytest.approx((INPUT_TOKENS + 2 * OUTPUT_TOKENS) / 1e6)
        assert record.cost_estimated
        events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
        assert [e["type"] for e in events] == ["request", "reply"]
        conversation = json.loads((folder / "conversation.json").read_text())
        assert [m["role"] for m in conversation] == ["user", "assistant", "system"]
        assert (folder / "output.txt").read_text().startswith("LABEL: ")


def test_faults_are_retried_and_never_scored(tmp_path: Path, skills: dict[str, Path]) -> None:
    """429 with retry-after and a 500 are retried inside the call; a hang is cut at timeout_s and,
    with no retries left in the call, retried by the runner: the record keeps that failed attempt."""
    suite = router_suite(tmp_path / "suite")
    failures = [
        Failure(status=429, message="slow down", headers={"retry-after": "1"}),
        Failure(status=500, message="boom"),
    ]
    with serve(failures) as server:
        evaluate(suite, skills["good"], agent="openai", out=tmp_path / "a", workers=1, retry=NO_WAIT,
                 agent_options={"base_url": f"{server.url}/v1", "model": "m", "backoff_s": 0.01})  # fmt: skip
    found = records(tmp_path / "a")
    assert all(r.status == "ok" and r.score is not None for r, _ in found)
    first = next(folder for r, folder in found if r.task_id == "refund-billing")
    kinds = [json.loads(line) for line in (first / "events.jsonl").read_text().splitlines()]
    assert [(e["type"], e.get("status")) for e in kinds] == [
        ("request", None), ("error", 429), ("request", None), ("error", 500), ("request", None), ("reply", None),
    ]  # fmt: skip
    assert kinds[1]["retry_in_s"] == 1.0

    def cut(timeout: float) -> list[tuple[RolloutRecord, Path]]:
        out = tmp_path / f"b{timeout:g}"
        with serve([Failure(hang_s=600)]) as server:
            evaluate(suite, skills["good"], agent="openai", out=out, workers=1, retry=NO_WAIT,
                     agent_options={"base_url": f"{server.url}/v1", "model": "m", "timeout_s": timeout,
                                    "max_retries": 0})  # fmt: skip
            assert not server.release.is_set()  # the hang was cut off, not waited for
        return records(out)

    # timeout_s is the point; it grows only while a loaded machine made an answer after the hang miss it
    found = growing_limit(cut, lambda found: sum(r.attempts for r, _ in found) == len(found) + 1, (1, 5, 25),
                          "only the hanging call cut at timeout_s")  # fmt: skip
    record, folder = next((r, f) for r, f in found if r.task_id == "refund-billing")
    assert record.status == "ok" and record.attempts == 2 and record.score is not None
    (attempt,) = record.attempt_history
    assert attempt.status == "infra_error" and re.search(r"timeout_s=\d+ s", attempt.reason or "")
    assert attempt.events and "error" in (folder / attempt.events).read_text()


def test_a_server_ignoring_max_completion_tokens_still_ends_within_the_limits(
    tmp_path: Path, skills: dict[str, Path]
) -> None:
    """Forced to send max_completion_tokens to a server that reads max_tokens only (llama-cpp-python):
    the stream runs away, the client cuts it at max_tokens, the rollout is the model's failure (scored);
    with the default (auto) the server is sent max_tokens."""
    suite = router_suite(tmp_path / "suite")
    with serve(limit_fields=("max_tokens",)) as server:
        base = {"base_url": f"{server.url}/v1", "model": "m", "max_tokens": 1}
        evaluate(suite, skills["good"], agent="openai", out=tmp_path / "forced",
                 agent_options=base | {"token_param": "max_completion_tokens"})  # fmt: skip
        evaluate(suite, skills["good"], agent="openai", out=tmp_path / "auto", agent_options=base)
    forced = records(tmp_path / "forced")
    assert {r.status for r, _ in forced} == {"task_failed"} and all(r.score is not None for r, _ in forced)
    assert all("max_tokens=1" in (r.reason or "") and r.tokens_out == 1 for r, _ in forced)
    assert {r.status for r, _ in records(tmp_path / "auto")} == {"task_failed"}
    sent = [("max_tokens" in r.body, "max_completion_tokens" in r.body) for r in server.requests]
    assert sent[:8] == [(False, True)] * 8 and sent[8:] == [(True, False)] * 8


def test_skilltune_train_with_a_direct_target(tmp_path: Path, skills: dict[str, Path]) -> None:
    suite = router_suite(tmp_path / "suite")
    failures = [Failure(status=429, headers={"retry-after": "0"}), Failure(status=503)]
    for agent in ("openai", "anthropic"):
        forget_endpoints()
        with serve(list(failures)) as server:
            args = ["train", str(suite), "--skill", str(skills["seed"]), "--agent", agent, "--proposer", "mock",
                    "--tag", agent, "--runs-dir", str(tmp_path / "runs"), "--max-steps", "2", "--batch", "4",
                    "--seed", "3", "--proposer-opt", "p_right=1.0", "-q"]  # fmt: skip
            result = runner.invoke(app, [*args, *agent_opts(server, agent)])
        assert result.exit_code == 0, result.output
        run = tmp_path / "runs" / agent
        assert (run / "TERMINAL").read_text().startswith("success"), (run / "TERMINAL").read_text()
        comparison = json.loads((run / "comparison.json").read_text())
        assert comparison["arms"]["best"]["hard_acc"] > comparison["arms"]["S0"]["hard_acc"]
        found = records(run)
        assert len(found) == len(server.requests) - 2  # every call but the two retried ones is a rollout
        assert all(r.agent == agent and r.status == "ok" and r.score is not None for r, _ in found)


def test_every_rollout_failing_exits_3_with_the_last_error(tmp_path: Path, skills: dict[str, Path]) -> None:
    suite = router_suite(tmp_path / "suite")
    refused = Failure(status=401, message="invalid api key")
    with serve([refused] * 100) as server:
        opts = agent_opts(server, "openai")
        good = str(skills["good"])
        commands = {
            "run": ["run", str(suite), "--skill", good, "--out", str(tmp_path / "run")],
            "calibrate": [
                "calibrate",
                str(suite),
                "--skill",
                good,
                "--reps",
                "1",
                "--out",
                str(tmp_path / "cal"),
            ],
            "compare": [
                "compare",
                str(suite),
                f"a={good}",
                "--no-skill",
                "--reps",
                "1",
                "--out",
                str(tmp_path / "cmp"),
            ],
            "smoke": ["smoke", str(suite), "--skill", good],
        }
        for name, args in commands.items():
            result = runner.invoke(app, [*args, "--agent", "openai", *opts])
            assert result.exit_code == 3, (name, result.output)
            assert "HTTP 401: invalid api key" in result.output and "api_key_env" in result.output, name
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["statuses"] == {"infra_error": 8}
    assert not list((tmp_path / "run").rglob("score.json"))
    assert all(r.attempts == 1 for r, _ in records(tmp_path / "run"))  # a refused key is not retried
    # the same for any backend: the mock agent's scripted infra errors
    mock_suite = write_suite(
        tmp_path / "mock", [task("a", "x", mock_infra_errors=9)], [task("b", "y", mock_infra_errors=9)]
    )
    with pytest.raises(InfraFailure, match=r"all 1 rollout\(s\) ended infra_error.*scripted infra error"):
        evaluate(mock_suite, None, out=tmp_path / "mock-out", retry=NO_WAIT)


def test_task_files_and_multi_file_skills_are_refused_unless_inlined(
    tmp_path: Path, skills: dict[str, Path]
) -> None:
    suite = router_suite(tmp_path / "suite")
    (suite / "notes.txt").write_text("The customer writes: my card was charged twice.\n")
    lines = (suite / "val.jsonl").read_text().splitlines()
    lines[2] = json.dumps(json.loads(lines[2]) | {"files": ["notes.txt"]})
    (suite / "val.jsonl").write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["validate", str(suite), "--agent", "openai"])
    assert result.exit_code == 2
    assert re.search(
        r"val\.jsonl:3: task crash-bug: .*cannot open the task's files \(notes\.txt\).*inline_files",
        result.output,
    )
    assert runner.invoke(app, ["validate", str(suite)]).exit_code == 0  # fine for agents with a workspace
    with serve() as server, pytest.raises(UsageError, match="inline_files"):
        options = {"base_url": server.url, "model": "m"}
        evaluate(suite, skills["good"], agent="openai", out=tmp_path / "no", agent_options=options)
    assert not (tmp_path / "no").exists() and not server.requests  # refused before anything was written
    lines[2] = json.dumps(json.loads(lines[2]) | {"inline_files": True, "output_file": "answer.md"})
    (suite / "val.jsonl").write_text("\n".join(lines) + "\n")
    assert runner.invoke(app, ["validate", str(suite), "--agent", "openai"]).exit_code == 0
    with serve() as server:
        evaluate(suite, skills["good"], agent="openai", out=tmp_path / "yes",
                 agent_options={"base_url": f"{server.url}/v1", "model": "m"})  # fmt: skip
    inlined = [r for r in server.requests if "crash" in r.text]
    assert "### notes.txt" in inlined[0].text and "charged twice" in inlined[0].text
    folder = next(f for r, f in records(tmp_path / "yes") if r.task_id == "crash-bug")
    assert "+++ b/answer.md" in (folder / "diff.patch").read_text()  # the reply, written where the task said
    (skills["good"] / "reference.md").write_text("More rules.\n")
    with pytest.raises(UsageError, match=r"cannot read its other files \(reference\.md\)"):
        evaluate(
            suite,
            skills["good"],
            agent="anthropic",
            out=tmp_path / "multi",
            agent_options={"base_url": "http://x", "model": "m"},
        )


def test_options_a_chat_call_cannot_honour_are_refused(tmp_path: Path, skills: dict[str, Path]) -> None:
    suite = router_suite(tmp_path / "suite")
    cases = {
        "placement=native": "reads no skill folder",
        "tools=Read": "no agent tools",
        "effort=high": "its one tool is load_skill",
        "bogus=1": "unknown agent option 'bogus'",
    }
    for option, message in cases.items():
        result = runner.invoke(app, ["run", str(suite), "--skill", str(skills["good"]), "--agent", "openai",
                                       "--agent-opt", "base_url=http://127.0.0.1:9/v1", "--agent-opt", option,
                                       "--out", str(tmp_path / "x")])  # fmt: skip
        assert result.exit_code == 2 and message in result.output, (option, result.output)
    result = runner.invoke(app, ["run", str(suite), "--skill", str(skills["good"]), "--agent", "openai",
                                   "--out", str(tmp_path / "x")])  # fmt: skip
    assert result.exit_code == 2 and "needs a model" in result.output
    result = runner.invoke(app, ["run", str(suite), "--skill", str(skills["good"]), "--agent", "anthropic",
                                   "--agent-opt", "model=claude-x", "--out", str(tmp_path / "x")])  # fmt: skip
    assert result.exit_code == 2 and "$ANTHROPIC_API_KEY" in result.output
    with pytest.raises(UsageError, match="--executor ray cannot run the openai target"):
        evaluate(suite, skills["good"], agent="openai", out=tmp_path / "ray", executor="ray",
                 agent_options={"base_url": "http://127.0.0.1:9/v1", "model": "m"})  # fmt: skip
    assert not (tmp_path / "x").exists() and not (tmp_path / "ray").exists()


def test_an_interrupt_ends_a_direct_call_at_once_and_leaves_no_record(
    tmp_path: Path, skills: dict[str, Path]
) -> None:
    """What a second Ctrl-C does: the running call is closed, the rollout leaves no record (resume
    runs it again). A first Ctrl-C lets running rollouts finish, as for every backend."""
    suite = router_suite(tmp_path / "suite")
    with serve([Failure(hang_s=600)]) as server:

        def interrupt() -> None:
            deadline = time.monotonic() + 60
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.02)
            interrupt_agents()

        threading.Thread(target=interrupt).start()
        try:
            with pytest.raises(RolloutInterrupted):
                evaluate(suite, skills["good"], agent="openai", out=tmp_path / "out", workers=1,
                         agent_options={"base_url": f"{server.url}/v1", "model": "m", "timeout_s": 600})  # fmt: skip
        finally:
            clear_interrupt()
        assert len(server.requests) == 1 and not server.release.is_set()
    assert not list((tmp_path / "out").rglob("record.json"))


def test_codex_warns_that_it_ignores_openai_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """qwen and opencode read OPENAI_MODEL; codex does not, and would send its default model."""
    from skilltune.agents import get_backend, parse_agent_options
    from skilltune.cli.app import show_warning
    from skilltune.errors import SkilltuneWarning
    from skilltune.rollout.workspace import check_target

    codex = get_backend("codex")
    monkeypatch.setenv("OPENAI_MODEL", "qwen3-coder")
    with pytest.warns(
        SkilltuneWarning, match=r"codex ignores \$OPENAI_MODEL: .*--agent-opt model=NAME"
    ) as seen:
        check_target(codex, parse_agent_options(codex, {}), [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_target(codex, parse_agent_options(codex, {"model": "gpt-5.5"}), [])  # said: nothing ignored
        check_target(get_backend("qwen"), parse_agent_options(get_backend("qwen"), {}), [])
    show_warning(seen[0].message, SkilltuneWarning, "f.py", 1)
    assert capsys.readouterr().err == f"warning: {seen[0].message}\n"
