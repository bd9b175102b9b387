"""The suite and score packages depend one way (suite -> score), with no import hidden in a function."""

from __future__ import annotations

import ast

from tests.helpers import REPO
from tools.check_import_cycles import cycles, import_graph

OWN = ("skilltune.suite", "skilltune.score")


def test_no_import_cycle_touches_suite_or_score() -> None:
    touching = [c for c in cycles(import_graph("skilltune")) if any(m.startswith(OWN) for m in c)]
    assert touching == []


def test_score_imports_nothing_of_suite_at_run_time() -> None:
    edges = import_graph("skilltune")
    backwards = {
        module: sorted(t for t in targets if t.startswith("skilltune.suite"))
        for module, targets in edges.items()
        if module.startswith("skilltune.score")
    }
    assert all(not targets for targets in backwards.values()), backwards
    assert "skilltune.score.registry" in edges["skilltune.suite.jsonl"]  # the direction it does run


def test_suite_and_score_import_at_the_top_only() -> None:
    """A function-level import would hide a dependency from whoever reads the module's header."""
    hidden = []
    for folder in ("suite", "score"):
        for path in sorted((REPO / "skilltune" / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    hidden += [
                        f"{path.name}:{inner.lineno}"
                        for inner in ast.walk(node)
                        if isinstance(inner, ast.Import | ast.ImportFrom)
                    ]
    assert hidden == []
