"""One door to a plain model (skilltune.modelcalls.plain, skilltune.agents.plain): the proposer and
the judge ask through ``ask_structured`` against the scripted server, so the same behaviour is
checked for both: structured output (a forced tool call) when the endpoint offers it, text when it
refuses tools, a cut answer repaired once (or, for edits, its complete items kept)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skilltune.agents.base import AgentResult
from skilltune.agents.plain import CLIPlainModel
from skilltune.errors import ScorerUnavailable
from skilltune.judge.prompt import JudgeCase
from skilltune.judge.scorer import JudgeScorer
from skilltune.modelcalls import ChatRequest, ModelCallError, Reply
from skilltune.modelcalls.plain import Answer, ask_structured, complete_items
from skilltune.proposal import Edit, EvidencePacket, Trajectory
from skilltune.propose import make_proposer
from skilltune.propose.llm import EditsAnswer, ProposerUnavailable, read_edits
from skilltune.runfiles.judge import JudgeCall
from skilltune.suite import load_suite
from tests.fakeserver import FakeModelServer, ModelRequest, ToolCall
from tests.fakeserver import Reply as Said
from tests.helpers import MOCK_SUITE, rule_task, write_suite

SKILL = "---\nname: routing\ndescription: d\n---\n\n# Routing tickets\n\nRoute each ticket to a queue.\n"
RULES = [
    f"- If the ticket mentions {word!r}, route it to 'billing'." for word in ("refund", "invoice", "charge")
]
REFUSAL = "tools are not supported by this model"
VERDICT = {
    "criteria": [{"name": "rule", "score": 1.0, "evidence": "the rule is stated first"}],
    "overall": 1.0,
    "passed": True,
    "reasoning": "The rule is stated.",
}


def packet() -> EvidencePacket:
    failed = Trajectory(
        id="refund#r0", task_id="refund", prompt="Route: I want a refund.", output="support", hard=0,
        soft=0.0, status="ok", mode="exact", feedback="expected answer: billing",
    )  # fmt: skip
    return EvidencePacket(
        step=1, mode="patch", skill_files={"SKILL.md": SKILL}, skill_main="SKILL.md", failures=[failed],
        successes=[],
    )  # fmt: skip


def edit(rule: str) -> dict[str, Any]:
    return {"op": "append", "text": rule, "rationale": "the refund went to support", "support": ["refund#r0"]}


EDITS = json.dumps({"edits": [edit(rule) for rule in RULES]})


def proposer(url: str, **options: Any) -> Any:
    return make_proposer(
        "api", load_suite(MOCK_SUITE), {"model": "analyst", "base_url": f"{url}/v1", **options}
    )


# --- the two callers, asked alike ------------------------------------------------------------------


def judge_suite(root: Path, url: str, **judge: Any) -> Path:
    config = {
        "default_mode": "judge",
        "judge": {"model": "judge-model", "base_url": f"{url}/v1", "samples": 1, "timeout": 120, **judge},
    }
    tasks = [{**rule_task(i, ["state-the-rule"]), "scoring": {}} for i in ("t1", "v1", "x1")]
    write_suite(root, [tasks[0]], [tasks[1]], [tasks[2]], config=config)
    (root / "judge.md").write_text("# Judge\n\n`rule`: the rule is stated first.\n")
    return root


def ask_judge(tmp_path: Path, url: str, times: int = 1, **judge: Any) -> list[JudgeCall]:
    """``times`` verdicts on one output, each a sample of its own (no cache): their calls."""
    scorer = JudgeScorer(load_suite(judge_suite(tmp_path / "suite", url, **judge)).scoring_context)
    case = JudgeCase(rubric="`rule`: stated first.", prompt="State the rule.", reference=None, inputs={},
                     output="PASS:state-the-rule")  # fmt: skip
    calls = []
    for _ in range(times):
        drawn = scorer.verdicts(case, 1, None)
        assert drawn.samples[0].passed is True and drawn.samples[0].criteria[0].name == "rule"
        calls += drawn.file.calls
    return calls


def is_judge(request: ModelRequest) -> bool:
    return "## The output under evaluation" in request.text


def test_the_proposer_asks_for_its_edits_as_a_forced_tool_call() -> None:
    """The endpoint offers tools: the analyst's request carries the record_edits tool, forced, and
    the tool call's arguments are the edits (streamed in fragments, as servers send them)."""
    scenario = lambda request: Said(tool_calls=[ToolCall("record_edits", json.loads(EDITS))])  # noqa: E731
    with FakeModelServer(scenario, side=scenario) as server:
        proposal = proposer(server.url).propose(packet())
    body = server.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["record_edits"]
    assert body["tool_choice"]["function"]["name"] == "record_edits" and server.requests[0].stream
    assert [e.text for e in proposal.edits] == RULES and [e.rank for e in proposal.edits] == [0, 1, 2]
    assert [c.role for c in proposal.calls] == ["analyst"] and len(server.requests) == 1


@pytest.mark.parametrize("caller", ["proposer", "judge"])
def test_an_endpoint_that_refuses_tools_is_asked_for_text(caller: str, tmp_path: Path) -> None:
    """A server started without tool support answers a request with tools by a 400: the same call is
    asked again for text (read from its JSON), and later calls ask for text at once."""

    def text(request: ModelRequest) -> Said:
        return Said(
            text=f"Verdict:\n{json.dumps(VERDICT)}" if is_judge(request) else f"```json\n{EDITS}\n```"
        )

    with FakeModelServer(text, side=text, refuse_fields={"tools": REFUSAL}) as server:
        if caller == "proposer":
            model = proposer(server.url)
            first, second = model.propose(packet()), model.propose(packet())
            assert [e.text for e in first.edits] == RULES == [e.text for e in second.edits]
            assert "refuses tools (HTTP 400: " + REFUSAL in first.calls[0].notes[0]
            assert not second.calls[0].notes
        else:
            calls = ask_judge(tmp_path, server.url, times=2)
            assert [c.attempts for c in calls] == [1, 1] and all(c.rejected == [] for c in calls)
    # the refused request, its text twin, then text only
    assert ["tools" in r.body for r in server.requests] == [True, False, False]


@pytest.mark.parametrize("caller", ["proposer", "judge"])
def test_an_answer_cut_at_the_token_limit_is_repaired_once(caller: str, tmp_path: Path) -> None:
    """A server that reads max_tokens cuts a long answer (finish ``length``) before anything in it is
    complete: the one repair round says it was cut and asks for a shorter answer, which is read."""
    padding = "Let me think about this step by step before I answer. " * 20

    def answer(request: ModelRequest) -> Said:
        repairing = "cut at the token limit" in request.text
        body = json.dumps(VERDICT) if is_judge(request) else json.dumps({"edits": [edit(RULES[0])]})
        return Said(text=body if repairing else padding + body)

    with FakeModelServer(answer, side=answer, limit_fields=("max_tokens",)) as server:
        if caller == "proposer":
            proposal = proposer(server.url, max_tokens=60).propose(packet())
            assert [e.text for e in proposal.edits] == RULES[:1]
            assert [c.role for c in proposal.calls] == ["analyst", "analyst (repair)"]
            problem = proposal.calls[1].prompt
        else:
            (call,) = ask_judge(tmp_path, server.url, max_tokens=60)
            assert call.attempts == 2 and len(call.rejected) == 1
            problem = call.rejected[0]
            assert "## Correction (attempt 2)" in server.requests[1].text
    assert len(server.requests) == 2
    assert "cut at the token limit, 60 tokens: answer shorter" in problem
    assert "cut at the token limit" in server.requests[1].text


@pytest.mark.parametrize(
    "how",
    ["text", "tool call", "streamed tool call", "tool call the client cuts", "tool call cut as 'tool_calls'"],
)
def test_a_list_of_edits_cut_mid_list_keeps_its_complete_edits(how: str) -> None:
    """What the 1.5B analyst did by hand: grounded edits until the token limit cut the JSON in the
    third. The two complete edits are kept without another call, and the proposal says so; as text,
    as a tool call whose arguments are not JSON, as a streamed tool call (LangChain closes its
    partial JSON: the last edit, cut short, is not kept), and as a tool call streamed a few
    characters per piece by a server that ignores the limit (llama-cpp-python ignores
    max_completion_tokens), which the client cuts: the arguments read so far are the answer (they
    were dropped, and the analyst's answer reached the proposer empty)."""
    cut = EDITS[: EDITS.index(RULES[2]) + 5]  # inside the third edit's text
    if how == "text":
        limit = len(cut.split(" "))
        scenario = lambda r: Said(text=EDITS)  # noqa: E731
        fields: dict[str, Any] = {"limit_fields": ("max_tokens",)}
    elif how == "tool call cut as 'tool_calls'":
        # llama-cpp-python honours max_tokens but ends the cut tool call with finish "tool_calls"
        limit = 40
        called = [ToolCall("record_edits", cut, fragments=limit)]
        scenario = lambda r: Said(tool_calls=called, usage_out=limit)  # noqa: E731
        fields = {}
    elif how == "tool call the client cuts":
        size = 4
        limit = -(-len(cut) // size)  # pieces up to the cut
        whole = ToolCall("record_edits", EDITS, fragments=-(-len(EDITS) // size))
        scenario = lambda r: Said(tool_calls=[whole])  # noqa: E731
        fields = {}
    else:
        limit = 4096
        scenario = lambda r: Said(tool_calls=[ToolCall("record_edits", cut)], finish="length")  # noqa: E731
        fields = {}
    with FakeModelServer(scenario, side=scenario, **fields) as server:
        proposal = proposer(server.url, max_tokens=limit, stream=how != "tool call").propose(packet())
    assert [e.text for e in proposal.edits] == RULES[:2]
    assert len(server.requests) == 1 and [c.role for c in proposal.calls] == ["analyst"]
    assert "2 complete edits kept" in proposal.notes["cut"]
    assert RULES[1] in proposal.calls[0].response  # what the model said is on record


# --- the policy itself --------------------------------------------------------------------------


def test_complete_items_reads_the_items_before_the_cut() -> None:
    assert complete_items('{"edits": [{"a": 1}, {"b": [2, 3]}, {"c": "x', "edits") == [
        {"a": 1},
        {"b": [2, 3]},
    ]
    assert complete_items('Here: [{"a": 1}, {"b"', "edits") == [{"a": 1}]
    assert complete_items('{"edits": [{"a": "]"}]}', "edits") == [{"a": "]"}]
    assert complete_items('{"edits": [{"a', "edits") == []
    assert complete_items("no list at all", "edits") == []


def test_read_edits_prefers_the_tool_call_and_refuses_a_cut_answer_with_nothing_complete() -> None:
    tool = EditsAnswer(edits=[Edit(op="append", text="- x")])
    reply = Reply(text="ignored", model="m", finish="stop")
    assert [e.text for e in read_edits(Answer(reply, tool))] == ["- x"]
    cut = Reply(text='{"edits": [{"op": "app', model="m", finish="length")
    with pytest.raises(ValueError, match="cut before its first complete edit"):
        read_edits(Answer(cut))
    with pytest.raises(ValueError, match="no JSON object"):
        read_edits(Answer(Reply(text="I would add rules.", model="m", finish="stop")))


class Scripted:
    """A plain model answering from a list (what the shared policy sees of any model)."""

    name = "scripted"
    what = "the scripted model"

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.asked: list[ChatRequest] = []

    def ask(self, request: ChatRequest, schema: Any = None, *, cancel: Any = None) -> Answer:
        self.asked.append(request)
        return Answer(Reply(text=self.texts.pop(0), model="m", finish="stop", tokens_in=3, tokens_out=2))


def test_ask_structured_repairs_at_most_the_rounds_it_is_given_and_keeps_every_exchange() -> None:
    model = Scripted("no", "still no", "never")
    request = ChatRequest.of("the prompt", system="sys", model="m", max_tokens=10)
    asked = ask_structured(
        model, request, EditsAnswer, read_edits, repair_rounds=1,
        repair=lambda prompt, problem, attempt: f"{prompt} | attempt {attempt}: {problem}",
    )  # fmt: skip
    assert asked.value is None and len(asked.exchanges) == 2 and model.texts == ["never"]
    assert asked.problems == ["no JSON object found in the answer"] * 2
    second = model.asked[1]
    assert second.messages[0].content == "sys"  # the system prompt stays; the user message is replaced
    assert second.messages[1].content == "the prompt | attempt 2: no JSON object found in the answer"
    assert [e.prompt for e in asked.exchanges] == ["the prompt", second.messages[1].content]


# --- the agent CLI as a plain model ----------------------------------------------------------------


class FlakyCLI:
    """A stand-in CLIBackend whose ``complete`` answers from a list of results."""

    name = "flaky"
    executable = "flaky"

    def __init__(self, *results: AgentResult) -> None:
        self.results = list(results)
        self.prompts: list[str] = []

    def complete(self, prompt: str, model: str | None, wall_limit_s: float = 600.0) -> AgentResult:
        self.prompts.append(prompt)
        return self.results.pop(0)


def test_a_cli_infra_error_is_retried_then_fails_as_a_model_call_error() -> None:
    infra = AgentResult(status="infra_error", reason="rate limited")
    good = AgentResult(
        status="ok", final_text=json.dumps(VERDICT), model="cli-model", tokens_in=5, tokens_out=4
    )
    cli = FlakyCLI(infra, good)
    model = CLIPlainModel(cli, 60, backoff_s=0.0)  # type: ignore[arg-type]
    answer = model.ask(ChatRequest.of("judge this", system="be fair", model="", max_tokens=10))
    assert answer.reply.text == json.dumps(VERDICT) and answer.reply.attempts == 2
    assert (
        answer.reply.failures == ["infra_error: rate limited"] and cli.prompts[0] == "be fair\n\njudge this"
    )
    refused = FlakyCLI(AgentResult(status="infra_error", reason="bad key", final=True))
    with pytest.raises(ModelCallError, match="1 attempt"):  # no retry can help: not retried
        CLIPlainModel(refused, 60, backoff_s=0.0).ask(ChatRequest.of("x", model="", max_tokens=1))  # type: ignore[arg-type]


def test_the_same_failure_reaches_the_proposer_and_the_judge_as_their_own_error(tmp_path: Path) -> None:
    """A 401 fails the call for good (no retry): the proposer's run is blocked, the judge's batch stops."""
    from tests.fakeserver import Failure

    refusals = [Failure(status=401, message="invalid key") for _ in range(4)]
    with FakeModelServer(
        lambda r: Said(text="{}"), refusals, side=lambda r: Said(text="{}"), failures_for="all"
    ) as server:
        with pytest.raises(
            ProposerUnavailable, match=r"the openai endpoint failed for the analyst: .*invalid key"
        ):
            proposer(server.url).propose(packet())
        with pytest.raises(
            ScorerUnavailable, match=r"the judge \(the openai endpoint\) failed .*invalid key"
        ):
            ask_judge(tmp_path, server.url)
    assert len(server.requests) == 2
