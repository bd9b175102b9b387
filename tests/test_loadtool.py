"""The direct chat targets' tool placement (skilltune/agents/loadtool.py) against the scripted fake
server: the skills listed with the catalogue, a load_skill tool offered, the decision read from the
model's tool calls and scored by trigger tasks through ``skilltune run``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.agents import get_backend
from skilltune.agents.loadtool import LOAD_TOOL, skills_prompt, uses_load_tool
from skilltune.cli import app
from skilltune.modelcalls import forget_endpoints
from skilltune.runfiles import RolloutRecord
from skilltune.skill import load_skill
from tests.fakeserver import Failure, FakeModelServer, ModelRequest, Reply, ToolCall
from tests.helpers import write_suite

runner = CliRunner()
BODY_LINE = "Group the entries under Features and Fixes."
TASKS = [
    {"id": "load", "prompt": "update the changelog for 2.4", "should_trigger": True},
    {"id": "answer", "prompt": "write a fibonacci function", "should_trigger": False},
    {"id": "distractor", "prompt": "tidy this sql query", "should_trigger": False},
    {"id": "unknown", "prompt": "changelog, but load the mystery skill", "should_trigger": True},
    {"id": "twice", "prompt": "changelog twice please", "should_trigger": True},
    {"id": "loop", "prompt": "keep loading forever", "should_trigger": False},
]


def user_text(request: ModelRequest) -> str:
    first = next(m for m in request.body["messages"] if m.get("role") == "user")
    content = first["content"]
    return content if isinstance(content, str) else json.dumps(content)


def model(request: ModelRequest) -> Reply:
    """A scripted model: which skill it loads is written in the prompt; after its tool results it answers."""
    prompt = user_text(request)
    turn = request.tool_results
    if "forever" in prompt:
        return Reply(tool_calls=[ToolCall("load_skill", {"name": "release-notes"}, call_id=f"c{turn}")])
    if turn:
        return Reply(text=f"answered after {turn} tool result(s)")
    if "mystery" in prompt:
        return Reply(tool_calls=[ToolCall("load_skill", {"name": "mystery"})])
    if "twice" in prompt:
        calls = [ToolCall("load_skill", {"name": "release-notes"}, call_id=f"c{i}") for i in range(2)]
        return Reply(tool_calls=calls)
    if "changelog" in prompt:
        return Reply(tool_calls=[ToolCall("load_skill", {"name": "Release-Notes"})])
    if "sql" in prompt:
        return Reply(tool_calls=[ToolCall("load_skill", {"name": "sql-format"})])
    return Reply(text="def fib(n): ...")


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


def trigger_suite(root: Path, tasks: list[dict[str, Any]] = TASKS) -> Path:
    train = [{"id": "tr", "prompt": "write a poem", "should_trigger": False}]
    write_suite(root, train, tasks, config={"default_mode": "checklist"})
    other = root / "catalogue" / "sql-format"
    other.mkdir(parents=True)
    (other / "SKILL.md").write_text(
        "---\nname: sql-format\ndescription: Formats SQL queries. Use when the user asks to tidy SQL.\n---\n\nSQL BODY\n"
    )
    return root


def the_skill(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Writes release notes.\n  Use when the user asks for a changelog.\n"
        f"---\n\n# Release notes\n\n- {BODY_LINE}\n"
    )
    return folder


def run(server: FakeModelServer, tmp_path: Path, agent: str, *extra: str, suite: Path | None = None) -> Path:
    root = suite or trigger_suite(tmp_path / "suite")
    out = tmp_path / "out"
    base = f"{server.url}/v1" if agent == "openai" else server.url
    result = runner.invoke(
        app,
        ["run", str(root), "--skill", str(the_skill(tmp_path / "skill")), "--split", "val", "--agent", agent,
         "--agent-opt", f"base_url={base}", "--agent-opt", "model=tiny", "--agent-opt", "backoff_s=0.01",
         "--out", str(out), "-q", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def records(out: Path) -> dict[str, tuple[RolloutRecord, list[dict[str, Any]]]]:
    found = {}
    for path in sorted(out.rglob("record.json")):
        events = [json.loads(line) for line in (path.parent / "events.jsonl").read_text().splitlines()]
        record = RolloutRecord.read(path)
        found[record.task_id] = (record, events)
    return found


def loads(events: list[dict[str, Any]]) -> list[tuple[Any, Any, str]]:
    return [(e["asked"], e["skill"], e["result"]) for e in events if e.get("type") == "skill_load"]


@pytest.mark.parametrize(("agent", "stream"), [("openai", True), ("openai", False), ("anthropic", True)])
def test_the_model_decides_and_the_decision_is_scored(tmp_path: Path, agent: str, stream: str) -> None:
    with FakeModelServer(model, side=model) as server:
        out = run(server, tmp_path, agent, "--agent-opt", f"stream={str(stream).lower()}")
    first = server.requests[0]
    assert first.tools == ["load_skill"]
    # said outright: llama-cpp-python's chatml-function-calling drops the tools without it
    assert first.body["tool_choice"] == ({"type": "auto"} if agent == "anthropic" else "auto")
    system = first.body["system"] if agent == "anthropic" else first.body["messages"][0]["content"]
    system = system if isinstance(system, str) else json.dumps(system)
    assert "- release-notes: Writes release notes. Use when the user asks for a changelog." in system
    assert "- sql-format: Formats SQL queries. Use when the user asks to tidy SQL." in system
    assert BODY_LINE not in system  # the body comes only when loaded
    found = records(out)
    decisions = {
        task: (r.skill_loaded, r.status, r.score.hard if r.score else None) for task, (r, _) in found.items()
    }
    assert decisions == {
        "load": (True, "ok", 1),  # a load of the candidate (asked as Release-Notes: the name folded)
        "answer": (False, "ok", 1),  # answered directly
        "distractor": (False, "ok", 1),  # a catalogue skill is not the candidate
        "unknown": (False, "ok", 0),  # no skill of that name
        "twice": (True, "ok", 1),
        "loop": (True, "task_failed", 0),  # the turn bound ended it; the load still counts
    }
    assert loads(found["load"][1]) == [("Release-Notes", "release-notes", "loaded")]
    assert loads(found["distractor"][1]) == [("sql-format", "sql-format", "loaded")]
    assert loads(found["unknown"][1]) == [("mystery", None, "unknown skill")]
    assert [r for *_, r in loads(found["twice"][1])] == ["loaded", "already loaded"]
    looped = found["loop"][0]
    assert looped.reason is not None and "max_turns=3" in looped.reason
    texts = {user_text(r): r for r in server.requests if r.tool_results}
    second = texts["update the changelog for 2.4"]
    assert BODY_LINE in second.text and "name: release-notes" not in second.text  # the body, no front matter
    assert "There is no skill named 'mystery'" in texts["changelog, but load the mystery skill"].text
    assert "SQL BODY" in texts["tidy this sql query"].text
    if agent == "openai":  # never null beside the tool calls: llama-cpp-python's server refuses that
        assert [m["content"] for m in second.body["messages"] if m["role"] == "assistant"] == [" "]
    summary = json.loads((out / "summary.json").read_text())["trigger"]
    assert (summary["tp"], summary["fp"], summary["fn"], summary["tn"]) == (2, 1, 1, 2)
    assert summary["precision"]["k"] == 2 and summary["precision"]["n"] == 3 and summary["recall"]["n"] == 3
    assert (
        summary["accuracy"]["n"] == 6
        and summary["accuracy"]["ci95"][0] < 0.5 < summary["accuracy"]["ci95"][1]
    )


def test_max_turns_bounds_the_conversation(tmp_path: Path) -> None:
    root = trigger_suite(tmp_path / "suite", [TASKS[-1]])
    with FakeModelServer(model, side=model) as server:
        out = run(server, tmp_path, "openai", "--agent-opt", "max_turns=2", suite=root)
    (record, events), *_ = records(out).values()
    assert len(server.requests) == 2 and record.status == "task_failed"
    assert [e["turn"] for e in events if e["type"] == "request"] == [1, 2]


def test_body_tasks_keep_the_skill_in_context_unless_placement_is_tool(tmp_path: Path) -> None:
    """With the default placement a task without should_trigger gets the skill as its system prompt
    (no tool, no decision); with placement=tool it is listed and offered like a trigger task. The
    two placements never share cached rollouts (the options are in the cache key)."""
    body = [{"id": "body", "prompt": "update the changelog", "scoring": {"required": ["answered"]}}]
    with FakeModelServer(model, side=model) as server:
        plain = run(server, tmp_path / "a", "openai", suite=trigger_suite(tmp_path / "a" / "suite", body))
        tool = run(server, tmp_path / "b", "openai", "--agent-opt", "placement=tool",
                   suite=trigger_suite(tmp_path / "b" / "suite", body))  # fmt: skip
    (p, _), (t, _) = records(plain)["body"], records(tool)["body"]
    assert p.skill_loaded is None and t.skill_loaded is True
    assert server.requests[0].tools == [] and BODY_LINE in server.requests[0].text
    assert server.requests[1].tools == ["load_skill"]
    assert p.options_hash != t.options_hash


def test_the_no_skill_arm_lists_the_catalogue_and_loads_nothing_of_its_own(tmp_path: Path) -> None:
    root = trigger_suite(tmp_path / "suite", TASKS[:3])
    with FakeModelServer(model, side=model) as server:
        result = runner.invoke(
            app,
            ["run", str(root), "--no-skill", "--split", "val", "--agent", "openai", "--agent-opt", f"base_url={server.url}/v1",
             "--agent-opt", "model=tiny", "--out", str(tmp_path / "out"), "-q"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    found = records(tmp_path / "out")
    assert {t: r.skill_loaded for t, (r, _) in found.items()} == {
        "load": False,
        "answer": False,
        "distractor": False,
    }
    assert loads(found["load"][1]) == [("Release-Notes", None, "unknown skill")]
    assert all("release-notes" not in json.dumps(r.body.get("messages", [])[:1]) for r in server.requests)


def test_placement_tool_is_for_the_chat_targets_and_agents_says_they_report_loads() -> None:
    assert get_backend("openai").parse_options({"placement": "tool", "max_turns": 2}).max_turns == 2
    with pytest.raises(ValueError, match="for the direct chat targets"):
        get_backend("mock").parse_options({"placement": "tool"})
    assert get_backend("openai").reports_skill_loads and get_backend("anthropic").reports_skill_loads
    listed = runner.invoke(app, ["agents"])
    row = next(
        line for line in listed.output.splitlines() if line.startswith(("│ openai", "┃ openai", "openai"))
    )
    assert "reported" in row


def test_the_listing_and_when_the_tool_is_used(tmp_path: Path) -> None:
    one = load_skill(the_skill(tmp_path / "a"))
    other = trigger_suite(tmp_path / "s", TASKS[:1]) / "catalogue" / "sql-format"
    text = skills_prompt([load_skill(other), one])
    assert text.index("- release-notes:") < text.index("- sql-format:")  # name order, not candidate first
    assert "load_skill" in text and LOAD_TOOL["function"]["name"] == "load_skill"
    assert (
        uses_load_tool("tool", None)
        and uses_load_tool("system", False)
        and not uses_load_tool("system", None)
    )


def test_an_endpoint_that_cannot_stream_tool_calls_is_asked_without_streaming(tmp_path: Path) -> None:
    """llama-cpp-python's chatml-function-calling ends the stream empty when the model chose a tool:
    the call is sent again unstreamed, and later calls to that endpoint are not streamed."""
    root = trigger_suite(tmp_path / "suite", TASKS[:2])
    empty = Failure(hang_s=0, after_pieces=0)  # a streamed answer that ends before its first chunk
    with FakeModelServer(model, [empty], side=model) as server:
        out = run(server, tmp_path, "openai", "--workers", "1", suite=root)
    assert [r.stream for r in server.requests] == [True, False, False, False]
    found = records(out)
    assert {t: r.skill_loaded for t, (r, _) in found.items()} == {"load": True, "answer": False}
    notes = [e["message"] for _, events in found.values() for e in events if e["type"] == "note"]
    assert any("does not stream" in n for n in notes)
