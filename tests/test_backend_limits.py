"""A backend's own limits: declared, checked before a candidate is gated, discarded with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from skilltune.agents import AGENTS
from skilltune.agents.cli import ARG_BYTES
from skilltune.agents.cursor import CursorAgent
from skilltune.agents.mock import MockAgent, MockOptions
from skilltune.agents.qwen import QwenAgent, QwenOptions
from skilltune.errors import UsageError
from skilltune.progress import PlainReporter
from skilltune.rundir import RunDir
from skilltune.runfiles import ReflectionsFile
from skilltune.training import train
from tests.helpers import rule_task, write_skill, write_suite

HUGE = "x" * (ARG_BYTES + 10)


def test_qwen_refuses_a_long_system_skill_with_html_comments_only() -> None:
    qwen = QwenAgent()
    system = qwen.parse_options({"placement": "system"})
    problem = qwen.placement_problem("task", f"<!-- note -->\n{HUGE}", system)
    assert problem is not None and "strips HTML comments" in problem
    assert qwen.placement_problem("task", HUGE, system) is None  # long, but no comment: a rule file holds it
    assert qwen.placement_problem("task", "<!-- short -->", system) is None  # fits --append-system-prompt
    native = qwen.parse_options({"placement": "native"})
    assert qwen.placement_problem("task", f"<!-- -->{HUGE}", native) is None


def test_cursor_refuses_a_prompt_too_long_for_its_command_line() -> None:
    cursor = CursorAgent()
    options = cursor.parse_options({"placement": "prepend"})
    problem = cursor.placement_problem(HUGE, None, options)
    assert problem is not None and "cursor-agent takes its prompt only as a command-line argument" in problem
    assert cursor.placement_problem("short", None, options) is None


class _QwenLimitedMock(MockAgent):
    """The mock agent with qwen's declared limit: a train run through the loop without the qwen CLI."""

    name = "mock-qwen-limit"

    def placement_problem(self, prompt: str, system_prompt: str | None, options: MockOptions) -> str | None:
        qwen = QwenOptions(placement=options.placement)
        return QwenAgent().placement_problem(prompt, system_prompt, qwen)


@pytest.fixture
def limited_agent():
    AGENTS.register(_QwenLimitedMock.name, _QwenLimitedMock)
    yield _QwenLimitedMock.name
    AGENTS.unregister(_QwenLimitedMock.name)


def _suite(root: Path) -> Path:
    rules = ["cite-sources"]
    tasks = [rule_task(f"t{i}", rules) for i in range(6)]
    pool = [
        # the only entry matching the symptom: a huge rule holding an HTML comment (qwen could not
        # take it); once it is rejected, the mock proposer draws the other one
        {
            "id": "huge",
            "text": f"- cite-sources <!-- long note -->\n{'more words ' * 12_000}",
            "answers": ["cite"],
        },
        {
            "id": "good",
            "text": "- cite-sources: back every claim with a source.",
            "answers": ["no such symptom"],
        },
    ]
    return write_suite(
        root,
        train=tasks,
        val=[rule_task(f"v{i}", rules) for i in range(6)],
        test=[rule_task(f"x{i}", rules) for i in range(4)],
        config={"proposer_pool": pool},
    )


def test_an_edit_past_the_backends_limit_is_discarded_and_the_run_goes_on(
    tmp_path: Path, limited_agent
) -> None:
    suite = _suite(tmp_path / "suite")
    skill = write_skill(tmp_path / "skill", "Write clearly.")
    result = train(
        suite, skill, tag="lim", runs_dir=str(tmp_path / "runs"), agent=limited_agent,
        agent_options={"placement": "system"}, proposer_options={"p_right": 1.0}, max_steps=3,
        batch=2, growth_cap=5000.0, gate="strict", reporter=PlainReporter(quiet=True),
    )  # fmt: skip
    run = RunDir(Path(result.run_dir))
    # each rule is checked on its own before its screen: the agent refuses the one with an HTML comment
    steps = [run.unit_dir("step", n) for n in range(1, result.steps + 1)]
    proposals = [
        (folder, p) for folder in steps for p in ReflectionsFile.read(folder / "reflections.json").proposals
    ]
    refused = [(folder, p) for folder, p in proposals if "cannot take it" in p.reason]
    assert refused, [p.reason for _, p in proposals]
    folder, first = refused[0]
    assert first.status == "not applied" and "strips HTML comments" in first.reason and first.screen is None
    assert first.candidate is not None and not list(folder.glob(f"rollouts/*/{first.candidate[:12]}"))
    assert result.state == "success" and result.kept >= 1  # the run went on and kept the good rule
    assert "cite-sources: back every claim" in (run.best_md).read_text()


def test_a_seed_the_backend_cannot_take_is_bad_input(tmp_path: Path, limited_agent) -> None:
    suite = _suite(tmp_path / "suite")
    skill = write_skill(tmp_path / "skill", f"<!-- keep -->\n{HUGE}")
    with pytest.raises(UsageError, match="the seed skill: qwen: the system-placed skill"):
        train(
            suite, skill, tag="seed", runs_dir=str(tmp_path / "runs"), agent=limited_agent,
            agent_options={"placement": "system"}, reporter=PlainReporter(quiet=True),
        )  # fmt: skip
    assert not (tmp_path / "runs" / "seed").exists()
