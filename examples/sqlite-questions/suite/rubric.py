"""Scores an SQLite answer by its result rows, against a reference query the agent never sees.

The agent's query is read from ``answer.sql`` in the workspace (else from the last
```sql block of its final answer). Both queries run on fresh in-memory copies of the
shop database, built from ``data/shop.sql`` beside this file (never the workspace's
copy, which the agent may have changed): once on the data as shipped, and once per
probe the task lists. A probe (``refs/probes/NAME.sql``) adds a few rows that make one
kind of mistake visible, and its first line says which (``-- catches: ...``). hard =
every run gives the reference's rows; soft = the fraction of runs that do.

A failed probe names its mistake when the probe's rows are what tripped the query:
when the query passed on the data as shipped; or, when it failed there too, when the
probe changed its result in a different shape from the reference's (rows added and
removed), or kept every wrong row of the data as shipped and added new ones.
Otherwise (a wrong average that moved with the data, say) the probe only repeats the
failure already seen on the data as shipped.

Rows are compared as a multiset (as a list when the task sets ``"ordered": true``);
column names are ignored, column order is not; numbers are compared rounded to 2
decimals, so 1250 and 1250.0 are equal.

The agent's query runs read-only: an authorizer allows reading and functions only,
and a progress handler ends a query that runs longer than ``QUERY_LIMIT_S``.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "shop.sql"
PROBES = HERE / "refs" / "probes"
ANSWER_FILE = "answer.sql"
QUERY_LIMIT_S = 10.0
_SQL_BLOCK = re.compile(r"```sql\s*\n(.*?)```", re.S | re.I)
Result = tuple[int, list[tuple[Any, ...]]]  # (column count, rows)
_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


class QueryError(Exception):
    """The agent's query could not run (a mistake of the answer, scored 0)."""


def find_query(workdir: Path) -> tuple[str | None, str]:
    """The agent's query and where it came from."""
    answer = workdir / ANSWER_FILE
    if answer.is_file() and answer.read_text(encoding="utf-8", errors="replace").strip():
        return answer.read_text(encoding="utf-8", errors="replace").strip(), ANSWER_FILE
    output = workdir / "output.txt"
    text = output.read_text(encoding="utf-8", errors="replace") if output.is_file() else ""
    blocks = _SQL_BLOCK.findall(text)
    if blocks and blocks[-1].strip():
        return blocks[-1].strip(), "the final answer's last sql block"
    return None, ""


def database(probe: str | None) -> sqlite3.Connection:
    """A fresh in-memory shop database, with the probe's rows added."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(DATA.read_text(encoding="utf-8"))
    if probe is not None:
        conn.executescript(probe_path(probe).read_text(encoding="utf-8"))
    return conn


def probe_path(name: str) -> Path:
    path = PROBES / f"{name}.sql"
    if not re.fullmatch(r"[a-z0-9-]+", name) or not path.is_file():
        raise ValueError(f"unknown probe {name!r}: no refs/probes/{name}.sql")
    return path


def catches(name: str) -> str:
    first = probe_path(name).read_text(encoding="utf-8").splitlines()[0]
    return first.removeprefix("-- catches:").strip()


def rows_of(conn: sqlite3.Connection, query: str) -> Result:
    """(column count, rows) of a read-only query; QueryError when it cannot run."""
    deadline = time.monotonic() + QUERY_LIMIT_S
    conn.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _READ_ONLY else sqlite3.SQLITE_DENY)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(query)
        rows = cursor.fetchall()
    except sqlite3.Error as exc:
        reason = f"it ran longer than {QUERY_LIMIT_S:g} s" if time.monotonic() > deadline else str(exc)
        raise QueryError(reason) from None
    except sqlite3.Warning as exc:  # more than one statement
        raise QueryError(str(exc)) from None
    finally:
        conn.set_authorizer(None)
        conn.set_progress_handler(None, 0)
    width = len(cursor.description or ())
    return width, [tuple(_normal(v) for v in row) for row in rows]


def _normal(value: Any) -> Any:
    if isinstance(value, bool | int | float):
        return round(float(value), 2)
    return value


def _key(row: tuple[Any, ...]) -> tuple[tuple[int, Any], ...]:
    """Sorts rows holding NULLs, numbers and text together."""
    return tuple((0, 0) if v is None else (1, v) if isinstance(v, float) else (2, str(v)) for v in row)


def compare(mine: Result, reference: Result, ordered: bool) -> str | None:
    """None when the rows match, else what differs."""
    (my_width, my_rows), (ref_width, ref_rows) = mine, reference
    if my_width != ref_width:
        return f"{my_width} column(s), expected {ref_width}"
    if ordered:
        if my_rows == ref_rows:
            return None
        if sorted(my_rows, key=_key) == sorted(ref_rows, key=_key):
            return "the right rows in the wrong order"
    elif Counter(my_rows) == Counter(ref_rows):
        return None
    if len(set(my_rows)) < len(my_rows) and len(set(ref_rows)) == len(ref_rows):
        return (
            f"{len(my_rows)} row(s) with repeats, expected {len(ref_rows)} (a missing GROUP BY or DISTINCT?)"
        )
    if len(my_rows) != len(ref_rows):
        return f"{len(my_rows)} row(s), expected {len(ref_rows)}"
    return "the rows differ"


def _change(before: Result, after: Result) -> tuple[int, int]:
    """(rows added, rows removed) from one result to the other."""
    old, new = Counter(before[1]), Counter(after[1])
    return sum((new - old).values()), sum((old - new).values())


def _wrong_rows(mine: Result, expected: Result) -> Counter[tuple[str, tuple[Any, ...]]]:
    """The rows the query got wrong: extra ones and missing ones."""
    got, want = Counter(mine[1]), Counter(expected[1])
    extra = Counter({("extra", row): n for row, n in (got - want).items()})
    return extra + Counter({("missing", row): n for row, n in (want - got).items()})


def _tripped(base: Result, base_expected: Result, mine: Result, expected: Result) -> bool:
    """Whether a probe's own rows tripped a query that already failed on the data as shipped."""
    if _change(base, mine) != _change(base_expected, expected):
        return True
    return _wrong_rows(base, base_expected) < _wrong_rows(mine, expected)


def _run(query: str, reference: str, probe: str | None) -> tuple[Result | str, Result]:
    """(the agent's result, or why its query failed; the reference's result) on one database."""
    conn = database(probe)
    try:
        expected = rows_of(conn, reference)  # a broken reference is the suite's fault: it raises
        try:
            return rows_of(conn, query), expected
        except QueryError as exc:
            return f"the query failed: {exc}", expected
    finally:
        conn.close()


def score(task: dict[str, Any], workdir: Path, mode: str) -> dict[str, Any]:
    scoring = task["scoring"]
    reference = scoring["reference"]
    ordered = bool(scoring.get("ordered", False))
    query, source = find_query(Path(workdir))
    if query is None:
        return {
            "hard": 0,
            "soft": 0.0,
            "checks": [f"no query: neither {ANSWER_FILE} nor a ```sql block in the final answer"],
        }
    base, base_expected = _run(query, reference, None)
    base_verdict = base if isinstance(base, str) else compare(base, base_expected, ordered)
    checks = [f"query from {source}"]
    checks.append(
        "pass: data as shipped" if base_verdict is None else f"fail: data as shipped: {base_verdict}"
    )
    passed = int(base_verdict is None)
    probes = scoring.get("probes", [])
    for probe in probes:
        mine, expected = _run(query, reference, probe)
        verdict = mine if isinstance(mine, str) else compare(mine, expected, ordered)
        if verdict is None:
            passed += 1
            checks.append(f"pass: probe {probe}")
            continue
        tripped = base_verdict is None or (
            not isinstance(mine, str)
            and not isinstance(base, str)
            and _tripped(base, base_expected, mine, expected)
        )
        why = f"catches: {catches(probe)}" if tripped else "the data as shipped fails already"
        checks.append(f"fail: probe {probe}: {verdict} ({why})")
    return {"hard": int(passed == 1 + len(probes)), "soft": passed / (1 + len(probes)), "checks": checks}
