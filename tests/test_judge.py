"""The judge against a scripted OpenAI-compatible server: tool-call verdicts, JSON after <think>, a
malformed reply then a good one, a 429, a server that reads only max_tokens, a judge that never
answers (the run ends blocked, and resume judges the kept rollouts from their records), cache hits,
re-judging from records, and a changed judge refusing comparison."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import ContractMismatchError, UsageError
from skilltune.judge.agreement import judge_agreement
from skilltune.measure.evaluate import evaluate
from skilltune.progress import PlainReporter
from skilltune.rundir import RunDir
from skilltune.runfiles import JudgeFile, RolloutRecord, StageDone
from skilltune.score import require_same_contract
from skilltune.suite import load_suite
from skilltune.training import resume, train
from skilltune.training.budget import spent
from tests.fakeserver import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    Failure,
    FakeModelServer,
    ModelRequest,
    Reply,
    ToolCall,
)
from tests.helpers import rule_task, write_skill, write_suite

RULE = "state-the-rule"
GOOD = "- State the rule before anything else."
WEIGHTS = {"rule": 0.75, "format": 0.25}


def judged_suite(root: Path, url: str, **judge: Any) -> Path:
    """A judged suite: each task brings a fixture under refs/ (read by the judge) and a reference; the
    mock agent prints PASS:state-the-rule when the skill states the rule."""

    def task(task_id: str) -> dict[str, Any]:
        (root / "refs" / task_id).mkdir(parents=True, exist_ok=True)
        (root / "refs" / task_id / "draft.txt").write_text(f"draft of {task_id}\n")
        (root / "refs" / task_id / "gold.md").write_text(f"GOLD {task_id}: the rule is stated first.\n")
        return {
            **rule_task(task_id, [RULE]),
            "scoring": {},
            "files": [f"refs/{task_id}/draft.txt"],
            "reference": f"refs/{task_id}/gold.md",
            "judge_inputs": ["draft.txt"],
        }

    config = {
        "default_mode": "judge",
        "judge": {
            "model": "judge-model",
            "base_url": f"{url}/v1",
            "samples": 3,
            "max_tokens": 300,
            "timeout": 120,  # generous: a loaded machine's fake server must not race it (not the point)
            "criteria_weights": WEIGHTS,
            **judge,
        },
    }
    root.mkdir(parents=True, exist_ok=True)
    write_suite(root, [task("t1"), task("t2")], [task("v1"), task("v2")], [task("x1")], config=config)
    (root / "judge.md").write_text("# Judge\n\n`rule` (0.75): the rule is stated. `format` (0.25): tidy.\n")
    return root


def verdict_for(request: ModelRequest) -> dict[str, Any]:
    """What a fair judge says: the output states the rule, or it does not."""
    stated = f"PASS:{RULE}" in request.text.split("## The output under evaluation", 1)[-1]
    return {
        "criteria": [
            {"name": "rule", "score": 1.0 if stated else 0.0, "evidence": "PASS line" if stated else "none"},
            {"name": "format", "score": 0.6, "evidence": "plain lines"},
        ],
        "overall": 0.9 if stated else 0.15,
        "passed": stated,
        "reasoning": "The rule is stated." if stated else "The rule is never stated: say it first.",
    }


def tool_judge(request: ModelRequest) -> Reply:
    return Reply(tool_calls=[ToolCall("record_verdict", verdict_for(request))])


def think_judge(request: ModelRequest) -> Reply:
    return Reply(text=f"<think>Weigh it {{not json}}.</think>\nVerdict:\n{json.dumps(verdict_for(request))}")


def skills(tmp_path: Path) -> tuple[Path, Path]:
    return write_skill(tmp_path / "good", GOOD), write_skill(tmp_path / "bad", "- Be brief.")


def records(out: Path) -> list[tuple[RolloutRecord, Path]]:
    return [(RolloutRecord.read(p), p.parent) for p in sorted(out.rglob("record.json"))]


def serve(scenario: Callable[[ModelRequest], Reply], **kw: Any) -> FakeModelServer:
    # a judge offers its verdict tool: the scenario answers; a request without tools is the same judge
    return FakeModelServer(scenario, side=scenario, **kw)


# --- verdicts ------------------------------------------------------------------------------------


def test_tool_call_verdicts_score_the_rollouts(tmp_path: Path) -> None:
    good, bad = skills(tmp_path)
    with serve(tool_judge) as server:
        suite = load_suite(judged_suite(tmp_path / "s", server.url))
        high = evaluate(suite, good, split="val", out=tmp_path / "out-good")
        low = evaluate(suite, bad, split="val", out=tmp_path / "out-bad")
    assert (high.hard_acc, high.soft_acc) == (1.0, 0.9)  # 0.75 * 1.0 + 0.25 * 0.6, the judge's overall unused
    assert (low.hard_acc, low.soft_acc) == (0.0, 0.15)
    assert len(server.requests) == 2 * 2 * 3  # 2 skills x 2 tasks x 3 samples
    first = server.requests[0]
    assert first.tools == ["record_verdict"] and first.model == "judge-model"
    assert first.body["max_tokens"] == 300 and "max_completion_tokens" not in first.body  # a local server
    assert "GOLD v" in first.text and "## Input file: draft.txt" in first.text
    for record, folder in records(tmp_path / "out-good"):
        assert record.status == "ok" and record.score is not None
        assert record.score.checks == [
            "crit:rule=1.0", "crit:format=0.6", "judge:pass (3/3 samples passed)", "ref:dataset"
        ]  # fmt: skip
        assert record.judge is not None and record.judge.calls == 3
        assert (record.judge.tokens_in, record.judge.tokens_out) == (3 * INPUT_TOKENS, 3 * OUTPUT_TOKENS)
        judged = JudgeFile.read(folder / "judge.json")
        assert judged.mode == "dataset" and len(judged.samples) == 3
    assert high.judge_tokens == 2 * 3 * (INPUT_TOKENS + OUTPUT_TOKENS)


def test_plain_json_after_think_is_read(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    with serve(think_judge) as server:
        summary = evaluate(judged_suite(tmp_path / "s", server.url), good, split="val", out=tmp_path / "o")
    assert (summary.hard_acc, summary.soft_acc) == (1.0, 0.9)


def test_a_malformed_reply_is_retried_with_a_correction(tmp_path: Path) -> None:
    def judge(request: ModelRequest) -> Reply:
        if "## Correction (attempt 2)" not in request.text:
            return Reply(text="Looks fine to me, nice work.")  # no verdict at all
        return tool_judge(request)

    good, _ = skills(tmp_path)
    with serve(judge) as server:
        summary = evaluate(
            judged_suite(tmp_path / "s", server.url, samples=1), good, split="val", out=tmp_path / "o"
        )
    assert summary.hard_acc == 1.0
    assert len(server.requests) == 4  # 2 tasks x (a malformed answer, then a verdict)
    for record, folder in records(tmp_path / "o"):
        call = JudgeFile.read(folder / "judge.json").calls[0]
        assert call.attempts == 2 and call.rejected == [
            "no verdict: no tool call and no JSON object with 'criteria' in the reply"
        ]
        assert record.judge is not None and record.judge.calls == 2


def test_a_judge_that_never_gives_a_verdict_is_a_scoring_error_never_a_zero(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    with serve(lambda request: Reply(text="no idea")) as server:
        summary = evaluate(
            judged_suite(tmp_path / "s", server.url, samples=1, max_attempts=2),
            good,
            split="val",
            out=tmp_path / "o",
        )
    assert summary.statuses == {"scoring_error": 2} and summary.hard_acc is None
    record, folder = records(tmp_path / "o")[0]
    assert "no usable verdict in 2 attempt(s)" in (record.reason or "")
    assert record.judge is not None and record.judge.calls == 2  # what it cost is still counted
    assert not (folder / "score.json").exists()


def test_a_429_is_retried_after_retry_after(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    failures = [Failure(status=429, message="slow down", headers={"retry-after": "0"})]
    with serve(tool_judge, failures=failures) as server:
        summary = evaluate(
            judged_suite(tmp_path / "s", server.url, samples=1), good, split="val", out=tmp_path / "o"
        )
    assert summary.hard_acc == 1.0 and summary.statuses == {"ok": 2}
    assert len(server.requests) == 3


def test_a_server_that_reads_only_max_tokens_gets_it(tmp_path: Path) -> None:
    """llama-cpp-python reads max_tokens and ignores max_completion_tokens (then it generates until its
    context is full): the judge's call sends the field such a server reads, and ends within its limit."""
    good, _ = skills(tmp_path)
    with serve(think_judge, limit_fields=("max_tokens",)) as server:
        summary = evaluate(
            judged_suite(tmp_path / "s", server.url, samples=1), good, split="val", out=tmp_path / "o"
        )
    assert summary.hard_acc == 1.0
    assert all(
        r.body.get("max_tokens") == 300 and "max_completion_tokens" not in r.body for r in server.requests
    )


def test_a_judge_forced_to_send_max_completion_tokens_is_still_bounded(tmp_path: Path) -> None:
    """Sent only max_completion_tokens, such a server never stops (it repeats its answer until its
    context is full): the client cuts each stream at the judge's max_tokens and leaves, and the
    verdict it read before the cut scores the rollout."""
    good, _ = skills(tmp_path)
    with serve(think_judge, limit_fields=("max_tokens",)) as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1, max_tokens=40)
        suite = load_suite(root, judge_options={"token_param": "max_completion_tokens"})
        summary = evaluate(suite, good, split="val", out=tmp_path / "o", workers=1)
        assert server.disconnects == 2  # both streams were left while the server still generated
    assert summary.statuses == {"ok": 2} and summary.hard_acc == 1.0
    assert all(
        r.body.get("max_completion_tokens") == 40 and "max_tokens" not in r.body for r in server.requests
    )
    for record, _ in records(tmp_path / "o"):
        assert record.judge is not None and (record.judge.calls, record.judge.tokens_out) == (1, 40)


# --- a judge that never answers: blocked, then resumed from the records ---------------------------------


def test_a_judge_that_never_answers_blocks_the_run(tmp_path: Path) -> None:
    _, bad = skills(tmp_path)
    hangs = [Failure(hang_s=60) for _ in range(200)]
    with serve(tool_judge, failures=hangs, failures_for="all") as down:
        root = judged_suite(tmp_path / "s", down.url, samples=1, timeout=0.5, max_retries=1)
        blocked = train(
            root,
            bad,
            tag="t",
            runs_dir=str(tmp_path / "runs"),
            max_steps=1,
            seed=0,
            workers=2,
            reporter=PlainReporter(quiet=True),
        )
        asked = len(down.requests)
    assert blocked.state == "blocked", blocked.reason
    assert "judge" in blocked.reason
    # the fix names the judge's own option (skill-trainer's `timeout`), not the proposers' timeout_s
    assert "raise --judge-opt timeout," in blocked.reason and "--judge-opt timeout_s" not in blocked.reason
    kept = records(tmp_path / "runs" / "t")
    unscored = [(r, f) for r, f in kept if r.status == "unscored"]
    assert unscored and all(r.status == "unscored" for r, _ in kept)  # not one scoring_error, not one 0
    assert asked <= 2 * 2 * 2  # the batch stopped: no more paid rollouts piled up unscored


def test_resume_after_an_outage_scores_kept_rollouts_without_running_their_agents(tmp_path: Path) -> None:
    """An outage (every call refused with a 503), then the endpoint answers again: resume judges the
    kept rollouts from their records. The outage is a refusal, not a hang, so the judge's timeout can be
    generous: the answers after the outage must not race a short limit on a loaded machine."""
    _, bad = skills(tmp_path)
    down = [Failure(status=503, message="unavailable", headers={"retry-after": "0"}) for _ in range(200)]
    with serve(tool_judge, failures=down, failures_for="all") as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1, timeout=120, max_retries=1)
        blocked = train(
            root,
            bad,
            tag="t",
            runs_dir=str(tmp_path / "runs"),
            max_steps=1,
            seed=0,
            workers=2,
            reporter=PlainReporter(quiet=True),
        )
        assert blocked.state == "blocked", blocked.reason
        unscored = {f: r for r, f in records(tmp_path / "runs" / "t") if r.status == "unscored"}
        assert unscored
        server.failures.clear()  # the endpoint answers again
        done = resume(tmp_path / "runs" / "t", reporter=PlainReporter(quiet=True))
    assert done.state in ("success", "no-progress"), done.reason
    for folder, before in unscored.items():
        after = RolloutRecord.read(folder / "record.json")
        assert after.status == before.pending_status and after.score is not None
        # the agent did not run again: its record is the same but for the score
        assert (after.started_at, after.wall_s, after.attempts) == (
            before.started_at,
            before.wall_s,
            before.attempts,
        )
        assert after.judge is not None and after.judge.calls >= 1
    assert not any(r.status == "unscored" for r, _ in records(tmp_path / "runs" / "t"))
    # the judge's tokens count in the journal's stage events and in what the budgets read
    run = RunDir(tmp_path / "runs" / "t")
    staged = [e for e in run.read_journal() if isinstance(e, StageDone) and e.judge_tokens_in]
    assert staged and all(e.judge_tokens_out for e in staged)
    kept = records(run.root)
    judged = sum(r.judge.tokens for r, _ in kept if r.judge and not r.cached_from)
    agents = sum((r.tokens_in or 0) + (r.tokens_out or 0) for r, _ in kept if not r.cached_from)
    assert judged > 0 and spent(run).tokens >= agents + judged


# --- the cache, re-judging, another judge -----------------------------------------------------------


def test_scoring_again_with_the_same_inputs_is_a_cache_hit(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    with serve(tool_judge) as server:
        suite = load_suite(judged_suite(tmp_path / "s", server.url))
        evaluate(suite, good, split="val", out=tmp_path / "o")
        asked = len(server.requests)
        record, folder = records(tmp_path / "o")[0]
        again = suite.scorer(suite.task(record.task_id)).rescore(
            suite.task(record.task_id), folder, _result_of(folder)
        )
        assert len(server.requests) == asked  # judge.json's key matched: nobody was asked
        assert again.usage is not None and again.usage.cached and again.score == record.score
        # another input (judge.md) is another key: asked again
        (tmp_path / "s" / "judge.md").write_text("# Judge\n\nStricter now.\n")
        changed = load_suite(tmp_path / "s")
        changed.scorer(changed.task(record.task_id)).rescore(
            changed.task(record.task_id), folder, _result_of(folder)
        )
        assert len(server.requests) == asked + 3


def _result_of(folder: Path) -> Any:
    from skilltune.agents.base import AgentResult

    return AgentResult(status="ok", final_text=(folder / "output.txt").read_text())


def test_judge_agreement_rejudges_records_whose_workspaces_are_gone(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    flip = {"n": 0}

    def moody(request: ModelRequest) -> Reply:  # every third verdict fails the output
        flip["n"] += 1
        verdict = verdict_for(request)
        if flip["n"] % 3 == 0:
            verdict = {
                **verdict,
                "passed": False,
                "criteria": [{"name": "rule", "score": 0.5, "evidence": "?"}],
            }
        return Reply(tool_calls=[ToolCall("record_verdict", verdict)])

    with serve(moody) as server:
        suite = load_suite(judged_suite(tmp_path / "s", server.url, samples=1))
        evaluate(suite, good, split="val", reps=2, out=tmp_path / "o")
        asked = len(server.requests)
        report = judge_agreement(suite, tmp_path / "o", out=tmp_path / "agree", samples=3)
        assert len(server.requests) == asked + 4 * 3  # 4 rollouts, 3 fresh verdicts each
        again = judge_agreement(suite, tmp_path / "o", out=tmp_path / "agree", samples=3)
        assert len(server.requests) == asked + 12  # kept verdicts: nothing asked twice
    assert report.rejudged == 4 and report.noise.rollouts == 4
    assert report.noise.hard_agreement is not None and 0 < report.noise.hard_agreement < 1
    assert report.noise.judge_var is not None and report.noise.judge_var > 0
    assert again.noise == report.noise
    assert (tmp_path / "agree" / "agreement.json").is_file()


def test_scores_from_another_judge_are_never_compared(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    with serve(tool_judge) as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1)
        a = evaluate(load_suite(root), good, split="val", out=tmp_path / "a")
        b = evaluate(
            load_suite(root, judge_options={"model": "other-judge"}), good, split="val", out=tmp_path / "b"
        )
        assert a.contract != b.contract
        assert server.requests[-1].model == "other-judge"
        with pytest.raises(ContractMismatchError):
            require_same_contract([str(a.contract), str(b.contract)])
        # the key's variable is not part of the contract (same judge, same verdicts)
        c = load_suite(root, judge_options={"api_key_env": "SOME_OTHER_KEY"})
        assert c.contract_hash == load_suite(root).contract_hash
        ended = train(
            root,
            good,
            tag="j",
            runs_dir=str(tmp_path / "runs"),
            max_steps=2,
            gate="strict",
            screen=False,
            budget_rollouts=8,  # the seed's val pass and one step: the run ends exhausted, resumable
            seed=0,
            reporter=PlainReporter(quiet=True),
        )
        assert ended.state == "exhausted", ended.reason
        with pytest.raises(UsageError, match="--judge-opt"):
            resume(
                tmp_path / "runs" / "j",
                judge_options={"model": "other-judge"},
                reporter=PlainReporter(quiet=True),
            )
    config = json.loads((tmp_path / "runs" / "j" / "config.json").read_text())
    assert config["judge_options"] == {}


def test_an_unreachable_judge_stops_a_run_command_with_exit_3(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    with serve(tool_judge, failures=[Failure(status=503) for _ in range(50)], failures_for="all") as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1, max_retries=1)
        result = CliRunner().invoke(
            app, ["run", str(root), "--skill", str(good), "--out", str(tmp_path / "o"), "--workers", "1"]
        )
    assert result.exit_code == 3, result.output
    assert "judge" in result.stderr
    kept = records(tmp_path / "o")
    assert [r.status for r, _ in kept] == ["unscored"]  # the first one stopped the batch


def test_judge_check_reports_readiness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = judged_suite(tmp_path / "s", "http://127.0.0.1:9")
    ready = CliRunner().invoke(app, ["judge", "check", str(root)])
    assert ready.exit_code == 0, ready.output
    assert (
        "judge readiness: READY" in ready.output and "none needed (a server on this machine)" in ready.output
    )
    assert "val: 2 with a reference, 0 judged by judge.md alone" in ready.output
    monkeypatch.delenv("MINIMAX_API_KEY", raising=False)
    remote = CliRunner().invoke(
        app, ["judge", "check", str(root), "--judge-opt", "base_url=https://api.minimax.io/v1"]
    )
    assert remote.exit_code == 1 and "missing: set $MINIMAX_API_KEY" in remote.output
    (tmp_path / ".env").write_text("MINIMAX-API-KEY=sk-from-dotenv\n")
    found = CliRunner().invoke(
        app, ["judge", "check", str(root), "--judge-opt", "base_url=https://api.minimax.io/v1"]
    )
    assert found.exit_code == 0 and f"MINIMAX_API_KEY in {tmp_path / '.env'}" in found.output
    assert "sk-from-dotenv" not in found.output


def test_anthropic_judge_tool_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Messages API: the verdict tool offered as input_schema, the tool_use block read back."""
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-ant-test")
    good, _ = skills(tmp_path)
    with serve(tool_judge) as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1)
        options = {
            "provider": "anthropic",
            "model": "claude-judge",
            "base_url": server.url,
            "api_key_env": "JUDGE_TEST_KEY",
        }
        summary = evaluate(load_suite(root, judge_options=options), good, split="val", out=tmp_path / "o")
    assert (summary.hard_acc, summary.soft_acc) == (1.0, 0.9)
    first = server.raw[0]
    sent = {k.lower(): v for k, v in first["headers"].items()}  # the anthropic SDK (2.x): a bearer token
    assert first["path"].endswith("/v1/messages") and sent["authorization"] == "Bearer sk-ant-test"
    tool = first["body"]["tools"][0]
    assert tool["name"] == "record_verdict" and "input_schema" in tool
    assert first["body"]["tool_choice"] == {"type": "tool", "name": "record_verdict"}
    assert "sk-ant-test" not in json.dumps([r.model_dump() for r, _ in records(tmp_path / "o")])


def test_the_verdict_is_asked_for_as_a_forced_tool_call(tmp_path: Path) -> None:
    """Structured output through skilltune.modelcalls: the record_verdict tool is offered and forced,
    streamed (the judge) and plain (a server that does not stream) alike."""
    from skilltune.judge.verdict import RecordVerdict
    from skilltune.modelcalls import CallSettings, ChatRequest, ModelClient, resolve_endpoint

    good, _ = skills(tmp_path)
    with serve(tool_judge) as server:
        suite = load_suite(judged_suite(tmp_path / "s", server.url, samples=1))
        summary = evaluate(suite, good, split="val", out=tmp_path / "o")
        client = ModelClient(resolve_endpoint("openai", f"{server.url}/v1", None), CallSettings(stream=False))
        parsed, _ = client.structured(
            ChatRequest.of(
                f"PASS:{RULE} ## The output under evaluation PASS:{RULE}", model="m", max_tokens=300
            ),
            RecordVerdict,
        )
    assert (summary.hard_acc, summary.soft_acc) == (1.0, 0.9)
    streamed, plain = server.requests[0], server.requests[-1]
    for request in (streamed, plain):
        assert [t["function"]["name"] for t in request.body["tools"]] == ["record_verdict"]
        assert request.body["tool_choice"]["function"]["name"] == "record_verdict"
    assert streamed.stream and not plain.stream
    assert parsed is not None and parsed.passed and parsed.criteria[0].score == 1.0


def test_calibrate_reports_the_judges_noise(tmp_path: Path) -> None:
    from skilltune.measure.calibrate import calibrate

    good, _ = skills(tmp_path)
    count = {"n": 0}

    def wobbly(request: ModelRequest) -> Reply:  # one verdict in four fails an output the others pass
        count["n"] += 1
        verdict = verdict_for(request)
        if count["n"] % 4 == 0:
            verdict = {**verdict, "passed": False}
        return Reply(tool_calls=[ToolCall("record_verdict", verdict)])

    with serve(wobbly) as server:
        result = calibrate(
            judged_suite(tmp_path / "s", server.url, samples=2), good, reps=2, out=tmp_path / "c", workers=1
        )
    assert result.judge is not None and result.judge.rollouts == 4 and result.judge.suite_samples == 2
    assert result.judge.hard_agreement is not None and result.judge.hard_agreement < 1.0
    assert result.judge.judge_var is not None and result.judge.gate_var is not None


def test_a_named_key_variable_is_not_required_by_a_local_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite naming api_key_env (for its usual remote judge), pointed at a local server with
    --judge-opt base_url: no key is needed there, so none is asked for (found by hand: every rollout
    was a scoring error)."""
    monkeypatch.delenv("REMOTE_JUDGE_KEY", raising=False)
    good, _ = skills(tmp_path)
    with serve(tool_judge) as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1, api_key_env="REMOTE_JUDGE_KEY")
        summary = evaluate(root, good, split="val", out=tmp_path / "o")
    assert summary.statuses == {"ok": 2} and summary.hard_acc == 1.0
    assert "authorization" not in {k.lower() for k in server.raw[0]["headers"]}


def test_a_judge_that_refuses_us_stops_the_batch_not_a_scoring_error_each(tmp_path: Path) -> None:
    """A 401 (a wrong key) is no verdict and no outage to wait out: the batch stops at once, the
    rollout is kept unscored (never a scoring error per rollout while paid rollouts carry on)."""
    good, _ = skills(tmp_path)
    refusals = [Failure(status=401, message="invalid key") for _ in range(20)]
    with serve(tool_judge, failures=refusals, failures_for="all") as server:
        root = judged_suite(tmp_path / "s", server.url, samples=1)
        result = CliRunner().invoke(
            app, ["run", str(root), "--skill", str(good), "--out", str(tmp_path / "o"), "--workers", "1"]
        )
        assert len(server.requests) == 1  # not retried: a refusal is not transient
    assert result.exit_code == 3 and "invalid key" in result.stderr
    assert [r.status for r, _ in records(tmp_path / "o")] == ["unscored"]


def test_judge_agreement_counts_the_verdicts_a_judge_did_give(tmp_path: Path) -> None:
    good, _ = skills(tmp_path)
    asked = {"n": 0}

    def garbled(request: ModelRequest) -> Reply:  # one sample in three never gives a verdict
        asked["n"] += 1
        if asked["n"] % 3 == 0:
            return Reply(text="I would rather not say.")
        return tool_judge(request)

    with serve(tool_judge) as server:
        suite_root = judged_suite(tmp_path / "s", server.url, samples=1, max_attempts=1)
        evaluate(load_suite(suite_root), good, split="val", reps=2, out=tmp_path / "o")
    with serve(garbled) as server:
        suite = load_suite(judged_suite(tmp_path / "s", server.url, samples=1, max_attempts=1))
        report = judge_agreement(suite, tmp_path / "o", out=tmp_path / "agree", samples=3)
        assert len(server.requests) == 4 * 3
    # each rollout: two verdicts came, one never did; the two still measure agreement
    assert (report.rejudged, report.unusable, report.skipped) == (4, 4, {})
    assert report.noise.hard_agreement == 1.0


def test_an_unknown_judge_option_is_refused_with_the_keys_there_are(tmp_path: Path) -> None:
    """``--judge-opt foo=1`` names the option and lists the judge's keys, as the agent, proposer
    and gate options do, instead of a bare "unknown field"."""
    root = judged_suite(tmp_path / "s", "http://127.0.0.1:9/v1", samples=1)
    with pytest.raises(UsageError) as refused:
        load_suite(root, judge_options={"foo": 1})
    message = str(refused.value)
    assert message.startswith("--judge-opt: unknown judge option 'foo'")
    assert "known: " in message and "max_tokens" in message and "samples" in message


def test_a_long_correction_keeps_the_hint_that_the_answer_was_cut() -> None:
    """The judge's correction is cut to 300 characters: the token-limit hint ask_structured appends
    last survives a long problem (it was cut off)."""
    from skilltune.judge.prompt import correction

    hint = " (the answer was cut at the token limit, 60 tokens: answer shorter, with fewer or shorter items)"
    problem = "the verdict does not validate: " + "criteria.0.score: not a number; " * 20 + hint.strip(" ")
    problem = problem.removesuffix(hint.strip(" ")) + hint
    said = correction("USER", 2, problem)
    assert "answer shorter, with fewer or shorter items)" in said
    assert "criteria.0.score" in said and len(said) < len("USER") + 600
    assert correction("USER", 2, "short problem").count("short problem") == 1
