"""examples/sqlite-questions: answers are judged by their rows, and failing probes name the mistake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import skilltune
from skilltune.agents.base import AgentResult
from skilltune.errors import ScoringError
from skilltune.score import Score
from skilltune.suite import Suite, load_suite, validate_suite
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "sqlite-questions"
SUITE = EXAMPLE / "suite"
DONE = AgentResult(status="ok", final_text="Saved the query in answer.sql.")


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(SUITE)


def answer(suite: Suite, task_id: str, query: str | None, workspace: Path, output: str = "") -> Score:
    """Score ``query`` as the agent's answer.sql (none when None) with ``output`` as its final text."""
    workspace.mkdir(exist_ok=True)
    suite.prepare(suite.task(task_id), workspace)
    if query is not None:
        (workspace / "answer.sql").write_text(query)
    (workspace / "output.txt").write_text(output)
    task = suite.task(task_id)
    return suite.scorer(task).score(task, workspace, AgentResult(status="ok", final_text=output))


def failed(score: Score) -> list[str]:
    return [c for c in score.checks if c.startswith("fail:")]


def test_validates_and_smoke_finds_no_reference_data_in_the_workspace(tmp_path: Path) -> None:
    assert validate_suite(SUITE) == []
    report = skilltune.smoke(SUITE, EXAMPLE / "skill", agent="mock", out=tmp_path)
    assert report.ok, [c for c in report.checks if not c.ok]
    audits = [c for c in report.checks if "free of reference data" in c.name]
    assert len(audits) == 3 and all(c.ok for c in audits)


def test_every_probe_a_task_names_exists_and_says_what_it_catches(suite: Suite) -> None:
    rubric = suite.rubric_module()
    named = {p for t in suite.all_tasks() for p in t.scoring["probes"]}
    on_disk = {p.stem for p in (SUITE / "refs" / "probes").glob("*.sql")}
    assert named == on_disk
    for probe in on_disk:
        assert rubric.catches(probe) and not rubric.catches(probe).startswith("--")


@pytest.mark.parametrize("task_id", [t.id for t in load_suite(SUITE).all_tasks()])
def test_the_mock_agents_answer_is_right_and_the_stub_workspace_holds_only_shop_sql(
    suite: Suite, task_id: str, tmp_path: Path
) -> None:
    """Each task's mock answer is worded differently from its reference and still scores 1 everywhere."""
    task = suite.task(task_id)
    query = task.field("mock_writes")["answer.sql"]
    assert " ".join(query.split()) != task.scoring["reference"]
    result = answer(suite, task_id, query, tmp_path / "ws")
    assert (result.hard, result.soft) == (1, 1.0), result.checks
    assert result.checks[0] == "query from answer.sql"
    assert len(result.checks) == 2 + len(task.scoring["probes"])
    workspace_files = sorted(p.name for p in (tmp_path / "ws").iterdir())
    assert workspace_files == ["answer.sql", "output.txt", "shop.sql"]


_AMOUNT = "i.quantity * p.price_cents * (100 - COALESCE(i.discount_pct, 0)) / 100"
_SALES = "o.status IN ('paid', 'shipped')"

# (task, a typical wrong query, whether it fails on the data as shipped, the probes that must name it)
MISTAKES = [
    (
        "orders-per-customer",
        "SELECT c.name, COUNT(o.id) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id",
        True,
        {"new-customer"},
    ),
    (
        "orders-per-customer",
        "SELECT c.name, COUNT(*) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id",
        True,
        {"new-customer"},
    ),
    (
        "orders-per-customer",
        "SELECT c.name, COUNT(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.name",
        False,
        {"namesake"},
    ),
    (
        "customers-never-ordered",
        "SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
        False,
        {"guest-order"},
    ),
    (
        "revenue-per-category",
        f"SELECT p.category, SUM({_AMOUNT}) FROM order_items i JOIN products p ON p.id = i.product_id "
        "GROUP BY p.category",
        True,
        {"cancelled-order"},
    ),
    (
        "revenue-per-category",
        "SELECT p.category, SUM(i.quantity * p.price_cents * (100 - i.discount_pct) / 100) "
        "FROM order_items i JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id "
        f"WHERE {_SALES} GROUP BY p.category",
        True,
        {"undiscounted-line"},
    ),
    (
        "lines-per-order",
        "SELECT o.id, COUNT(*) FROM orders o JOIN order_items i ON i.order_id = o.id GROUP BY o.id",
        False,
        {"empty-order"},
    ),
    (
        "buyers-per-city",
        "SELECT c.city, COUNT(DISTINCT c.id) FROM customers c JOIN orders o ON o.customer_id = c.id "
        f"WHERE {_SALES} AND c.city <> '' GROUP BY c.city",
        True,
        {"unknown-city"},
    ),
    (  # counts orders, not customers: one mistake, seen on the data as shipped; no probe claims it
        "buyers-per-city",
        "SELECT c.city, COUNT(c.id) FROM customers c JOIN orders o ON o.customer_id = c.id "
        f"WHERE {_SALES} GROUP BY c.city",
        True,
        set(),
    ),
    (  # averages order lines, not orders: the wrong value moves with every probe, and none claims it
        "average-order-value",
        f"SELECT AVG({_AMOUNT}) FROM order_items i JOIN orders o ON o.id = i.order_id "
        f"JOIN products p ON p.id = i.product_id WHERE {_SALES}",
        True,
        set(),
    ),
    (
        "average-discount",
        f"SELECT AVG(i.discount_pct) FROM order_items i JOIN orders o ON o.id = i.order_id WHERE {_SALES}",
        True,
        {"undiscounted-line"},
    ),
    (
        "top-spenders",
        f"SELECT c.name, SUM({_AMOUNT}) AS spend FROM customers c JOIN orders o ON o.customer_id = c.id "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
        "GROUP BY c.id ORDER BY spend DESC LIMIT 3",
        True,
        {"cancelled-order"},
    ),
    (
        "average-spend-per-buyer",
        f"SELECT AVG(spend) FROM (SELECT SUM({_AMOUNT}) AS spend FROM orders o "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
        f"WHERE {_SALES} GROUP BY o.customer_id)",
        False,
        {"guest-order"},
    ),
]


@pytest.mark.parametrize(("task_id", "query", "fails_as_shipped", "named"), MISTAKES)
def test_a_typical_mistake_fails_and_the_probes_that_catch_it_say_so(
    suite: Suite, task_id: str, query: str, fails_as_shipped: bool, named: set[str], tmp_path: Path
) -> None:
    rubric = suite.rubric_module()
    result = answer(suite, task_id, query, tmp_path / "ws")
    probes = suite.task(task_id).scoring["probes"]
    assert result.hard == 0
    assert any(c.startswith("fail: data as shipped: ") for c in result.checks) is fails_as_shipped
    claimed = {
        p
        for p in probes
        if any(c.startswith(f"fail: probe {p}: ") and "(catches: " in c for c in result.checks)
    }
    assert claimed == named, result.checks
    for probe in named:
        assert any(c.endswith(f"(catches: {rubric.catches(probe)})") for c in failed(result))
    if not fails_as_shipped:  # the probes that name the mistake are the only runs that fail
        assert len(failed(result)) == len(named)
        assert result.soft == pytest.approx(1 - len(named) / (1 + len(probes)))
    else:
        unclaimed = [c for c in failed(result) if "(catches: " not in c and "data as shipped:" not in c]
        assert all(c.endswith("(the data as shipped fails already)") for c in unclaimed)


def test_what_differs_is_said(suite: Suite, tmp_path: Path) -> None:
    reversed_months = (
        "SELECT strftime('%Y-%m', placed) AS m, COUNT(*) FROM orders "
        "WHERE status IN ('paid', 'shipped') GROUP BY m ORDER BY m DESC"
    )
    result = answer(suite, "sales-orders-per-month", reversed_months, tmp_path / "a")
    assert "fail: data as shipped: the right rows in the wrong order" in result.checks
    no_group_by = "SELECT c.city, 1 FROM customers c JOIN orders o ON o.customer_id = c.id"
    result = answer(suite, "buyers-per-city", no_group_by, tmp_path / "b")
    expected = "fail: data as shipped: 22 row(s) with repeats, expected 6 (a missing GROUP BY or DISTINCT?)"
    assert expected in result.checks
    too_few = "SELECT city, COUNT(*) FROM customers WHERE city IS NOT NULL GROUP BY city"
    result = answer(suite, "buyers-per-city", too_few, tmp_path / "d")
    assert "fail: data as shipped: 5 row(s), expected 6" in result.checks
    one_column = "SELECT name FROM customers"
    result = answer(suite, "orders-per-customer", one_column, tmp_path / "c")
    assert "fail: data as shipped: 1 column(s), expected 2" in result.checks


def test_the_answer_can_come_from_the_final_text(suite: Suite, tmp_path: Path) -> None:
    text = "Here it is:\n```sql\nSELECT name FROM customers\n```\nand better:\n```SQL\nSELECT name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)\n```\n"
    result = answer(suite, "customers-never-ordered", None, tmp_path / "ws", output=text)
    assert result.hard == 1 and result.checks[0] == "query from the final answer's last sql block"
    nothing = answer(suite, "customers-never-ordered", None, tmp_path / "none", output="I could not do it.")
    assert (nothing.hard, nothing.soft) == (0, 0.0) and nothing.checks[0].startswith("no query:")


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM orders",
        "ATTACH DATABASE 'x.db' AS x",
        "SELECT 1; SELECT 2",
        "SELECT * FROM no_such_table",
        "PRAGMA table_info(orders)",
    ],
)
def test_a_query_that_cannot_run_read_only_fails_every_run(suite: Suite, query: str, tmp_path: Path) -> None:
    result = answer(suite, "products-never-sold", query, tmp_path / "ws")
    assert (result.hard, result.soft) == (0, 0.0)
    assert len(failed(result)) == 3 and all("the query failed: " in c for c in failed(result))
    assert not (tmp_path / "ws" / "x.db").exists()


def test_an_endless_query_is_stopped(suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite.rubric_module(), "QUERY_LIMIT_S", 0.5)
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT name FROM products WHERE 0 < (SELECT MAX(x) FROM n)"
    result = answer(suite, "products-never-sold", endless, tmp_path / "ws")
    assert result.hard == 0 and "the query failed: it ran longer than 0.5 s" in failed(result)[0]


def test_the_workspace_copy_of_the_data_does_not_count(suite: Suite, tmp_path: Path) -> None:
    """The agent may rewrite shop.sql in its workspace; the scorer builds from the suite's copy."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    suite.prepare(suite.task("products-never-sold"), workspace)
    (workspace / "shop.sql").write_text("CREATE TABLE products (name TEXT);\n")
    right = suite.task("products-never-sold").field("mock_writes")["answer.sql"]
    (workspace / "answer.sql").write_text(right)
    task = suite.task("products-never-sold")
    assert suite.scorer(task).score(task, workspace, DONE).hard == 1


def test_a_broken_reference_is_a_scoring_error_not_a_zero(tmp_path: Path) -> None:
    copy = tmp_path / "suite"
    shutil.copytree(SUITE, copy)
    lines = (copy / "val.jsonl").read_text().splitlines()
    first: dict[str, Any] = json.loads(lines[0])
    first["scoring"]["reference"] = "SELECT total FROM nowhere"
    (copy / "val.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    broken = load_suite(copy)
    with pytest.raises(ScoringError, match="no such table: nowhere"):
        answer(broken, first["id"], "SELECT 1", tmp_path / "ws")
