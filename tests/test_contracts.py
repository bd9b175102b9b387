"""Task and AgentResult in skilltune.contracts, below the scorers, and their old homes' re-exports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import skilltune
from skilltune import contracts
from skilltune.agents import base as agents_base
from skilltune.errors import UsageError
from skilltune.suite import model as suite_model
from tests.helpers import REPO


def test_the_old_homes_re_export_the_same_objects() -> None:
    for name in ("Task", "FeedbackPolicy", "PromptVariant", "PROMPT_VARIANTS", "TRIGGER_MODE", "SUITE_ROOT"):
        assert getattr(suite_model, name) is getattr(contracts, name), name
    assert suite_model.check_file_entry is contracts.check_file_entry
    for name in ("AgentResult", "AgentStatus", "Message"):
        assert getattr(agents_base, name) is getattr(contracts, name), name
    assert skilltune.Task is contracts.Task
    assert agents_base.AgentRequest.model_fields["task"].annotation is contracts.Task


def test_contracts_import_nothing_of_skilltune_but_its_errors() -> None:
    """The module sits low in the layer order: suites, agents and scorers all import it."""
    tree = ast.parse((REPO / "skilltune" / "contracts.py").read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert {m for m in imported if m.startswith("skilltune")} == {"skilltune.errors"}


def test_a_task_without_a_prompt_for_the_variant_is_refused_with_where_it_comes_from() -> None:
    task = contracts.Task(id="t", prompt_full="the long prompt")
    assert contracts.variant_prompt(task, "full", "suite-folder") == "the long prompt"
    with pytest.raises(UsageError, match=r"^suite-folder: task t has no prompt for the cheap variant"):
        contracts.variant_prompt(task, "cheap", Path("suite-folder"))


def test_an_agent_result_is_data() -> None:
    result = contracts.AgentResult(
        status="ok", final_text="done", messages=[{"role": "assistant", "content": "x"}]
    )
    assert result.messages == [contracts.Message(role="assistant", content="x")]
    assert "output_file" not in result.model_dump()
