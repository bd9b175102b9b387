"""report.html of the mock demo in headless Chromium: every plot draws one mark per unit, arm or
task; no console error; no network request; a screenshot for the docs."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from skilltune.report import write_report
from skilltune.runfiles import Comparison
from tests.chromium import chromium, marks, open_page
from tests.helpers import REPO
from tests.report_runs import results_rows, train_demo, val_tasks

DOCS = REPO / "docs"


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """Under docs/ when asked for (`make screenshots`), else a temporary file."""
    return (DOCS if os.environ.get("SKILLTUNE_SCREENSHOTS") == "docs" else tmp_path) / name


def expected_marks(run: Path) -> dict[str, list[int]]:
    """Marks per trace of each plot, counted from the run's own files (not from the report's reader)."""
    rows = results_rows(run)
    units = len(rows)
    gated = sum(1 for r in rows if r["val_candidate"])
    comparison = Comparison.read(run / "comparison.json")
    arms = len(comparison.arms)
    return {
        "plot-val": [gated, gated, gated],  # incumbent, candidate, gain with the gate's interval
        "plot-heldout": [arms, arms - ("noskill" in comparison.arms), len(comparison.pairs)],
        "plot-cost": [units],  # every stage's trace holds one bar per unit
    }


def check_page(watched: object, run: Path, origin: str) -> None:
    from tests.chromium import Watched

    assert isinstance(watched, Watched)
    drawn = marks(watched.page)
    expected = expected_marks(run)
    assert drawn["plot-val"]["traces"] == expected["plot-val"]
    assert drawn["plot-heldout"]["traces"] == expected["plot-heldout"]
    cost = drawn["plot-cost"]["traces"]
    assert cost and set(cost) == set(expected["plot-cost"]), cost
    tasks = len(val_tasks())
    units = len(results_rows(run))
    assert drawn["plot-heatmap"]["heatmap"] == [[tasks, units]]
    assert drawn["plot-heatmap"]["yticks"] == tasks and drawn["plot-heatmap"]["images"] == 1
    assert watched.console_errors == []
    strays = [url for url in watched.requests if not url.startswith(origin)]
    assert strays == [], f"the page asked for {strays}"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = train_demo(tmp_path_factory.mktemp("runs"))
    write_report(run)
    return run


def test_report_in_chromium_and_its_screenshot(demo: Path, tmp_path: Path) -> None:
    url = (demo / "report.html").as_uri()
    with chromium() as browser:
        watched = open_page(browser, url, plots=4)
        check_page(watched, demo, origin=url)
        assert watched.requests == [url]  # the file itself, nothing else
        shot = screenshot_path("report.png", tmp_path)
        watched.page.screenshot(
            path=shot, full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": 2000}
        )
        # the heatmap's buttons restyle it in place: the gain view spans -1..1
        buttons = watched.page.locator("#plot-heatmap .updatemenu-button")
        buttons.filter(has_text="candidate - incumbent").click()
        watched.page.wait_for_function("document.getElementById('plot-heatmap')._fullData[0].zmin === -1")
        buttons.first.click()
        watched.page.wait_for_function("document.getElementById('plot-heatmap')._fullData[0].zmin === 0")
        assert watched.console_errors == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


TICKS_JS = """
() => {
  const plot = document.getElementById('plot-heatmap');
  const rows = [...plot.querySelectorAll('g')].filter(g => /^y\\d*tick$/.test(g.getAttribute('class') || ''));
  return rows.map(g => g.querySelector('text').getBoundingClientRect()).map(r => [r.top, r.bottom]);
}
"""


def test_the_heatmap_of_several_agents_has_a_panel_each_with_every_label_apart(
    demo: Path, tmp_path: Path
) -> None:
    """3 agents x 48 val tasks (144 rows): one panel per agent titled with its label, each task's
    label drawn (the agent's prefix left to the title) and apart from its neighbours; the buttons
    restyle every panel."""
    import random

    from skilltune.report import summarize
    from skilltune.report.page import render_page

    s = summarize(demo)
    assert s.heatmap is not None
    agents, units = ["crn", "follows", "harmed"], s.heatmap.units
    tasks = [f"{agent}/val-task-with-a-long-name-{i:02d}" for agent in agents for i in range(48)]
    rng = random.Random(0)
    cells = [[round(rng.random(), 3) for _ in units] for _ in tasks]
    s.agents = agents
    s.heatmap = s.heatmap.model_copy(update={"tasks": tasks, "candidate": cells, "incumbent": cells})
    page_path = tmp_path / "agents.html"
    page_path.write_text(render_page(s))
    with chromium() as browser:
        watched = open_page(browser, page_path.as_uri(), plots=4)
        page = watched.page
        drawn = marks(page)["plot-heatmap"]
        assert drawn["heatmap"] == [[48, len(units)]] * 3 and drawn["images"] == 3
        titles = page.locator("#plot-heatmap .annotation-text").all_text_contents()
        assert titles == [f"agent {agent} (48 val tasks)" for agent in agents]
        labels = sorted(page.evaluate(TICKS_JS))
        assert len(labels) == 144
        for (_, bottom), (top, _) in itertools.pairwise(labels):
            assert bottom <= top + 0.5, labels  # each label clear of the one below it
        shown = page.locator("#plot-heatmap .ytick text").all_text_contents()
        assert shown[0] == "val-task-with-a-long-name-00"
        page.locator("#plot-heatmap .updatemenu-button").filter(has_text="candidate - incumbent").click()
        page.wait_for_function("document.getElementById('plot-heatmap')._fullData.every(d => d.zmin === -1)")
        assert watched.console_errors == []


def test_proposer_notes_read_as_sentences_in_chromium(demo: Path) -> None:
    """A step whose own proposals gave no candidate (reflections.json's why_not) says so in words in
    its Proposer notes, not as a Python list."""
    from skilltune.runfiles import ReflectionsFile

    found = {
        int(p.parent.name.split("_")[1]): ReflectionsFile.read(p).notes
        for p in sorted((demo / "steps").glob("step_*/reflections.json"))
    }
    why = {index: notes["why_not"] for index, notes in found.items() if "why_not" in notes}
    assert why  # the demo has steps whose batch all passed
    with chromium() as browser:
        watched = open_page(browser, (demo / "report.html").as_uri(), plots=4)
        for index, (_, reason) in why.items():
            notes = watched.page.locator(f"#step-{index} ul.notes li").all_text_contents()
            assert notes == [f"No candidate of the step's own. {reason[:1].upper()}{reason[1:]}."], notes
            assert "why_not" not in (watched.page.locator(f"#step-{index}").text_content() or "")
        assert watched.console_errors == []


def test_a_gated_units_header_names_the_futility_bound_in_chromium(demo: Path) -> None:
    """The sign-flip gate records no lower end: the unit's header shows its futility upper bound as
    such, not as an interval with a dash for its lower end."""
    from skilltune.report import summarize
    from skilltune.textfmt import signed

    one_sided = [
        u for u in summarize(demo).units if u.interval and u.interval.low is None and u.interval.high
    ]
    assert one_sided  # the demo's gate is the sequential sign-flip test
    with chromium() as browser:
        watched = open_page(browser, (demo / "report.html").as_uri(), plots=4)
        for u in one_sided:
            assert u.interval is not None and u.interval.high is not None
            header = " ".join(watched.page.locator(f"#{u.kind}-{u.index} > summary").inner_text().split())
            expected = f"gain {signed(u.interval.gain)} (futility bound {signed(u.interval.high)})"
            assert expected in header and "[-," not in header, header
        assert watched.console_errors == []


@pytest.fixture(scope="module")
def stopped_in_gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo run stopped in step 1's gate: no gate has decided."""
    from tests.report_runs import train_stopped_in_gate

    return train_stopped_in_gate(tmp_path_factory.mktemp("runs"), "halt1", step=1)


def test_commands_in_the_reports_text_are_code_with_the_runs_path_in_chromium(
    stopped_in_gate: Path, tmp_path: Path
) -> None:
    """The header's reason and the warnings show a command as <code>, never in literal backticks,
    and the audit warning names this run, not a RUNDIR placeholder."""
    import shutil

    run = tmp_path / "halt1"
    shutil.copytree(stopped_in_gate, run)
    (run / "audit.json").write_text("{")  # a damaged audit.json: the report shows it as a finding
    path = write_report(run)
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=2)
        page = watched.page
        header = page.locator("p.meta").first
        assert "`" not in header.inner_text()
        assert header.locator("code").all_inner_texts() == ["skilltune resume"]
        warnings = page.locator("ul.warnings").first
        assert "`" not in warnings.inner_text() and "RUNDIR" not in warnings.inner_text()
        assert f"skilltune audit {run}" in warnings.locator("code").all_inner_texts()
        assert watched.console_errors == []


def test_a_run_stopped_in_its_first_gate_says_the_gate_was_interrupted_in_chromium(
    stopped_in_gate: Path, tmp_path: Path
) -> None:
    """No gate has decided, but step 1's gate ran rollouts before the stop: the heatmap's section says
    the gate was interrupted, not that none has run."""
    from skilltune.report import summarize

    unit = next(u for u in summarize(stopped_in_gate).units if u.name == "step_0001")
    assert unit.verdict == "unfinished" and unit.decision == "in gate" and unit.rollouts > 0
    path = write_report(stopped_in_gate, tmp_path / "report.html")
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=2)
        section = watched.page.locator("#heatmap ~ p.muted").all_inner_texts()  # the heading's paragraphs
        said = next((" ".join(p.split()) for p in section if p.startswith("No gate has")), "")
        assert said.startswith(
            "No gate has decided yet: step 1's gate was interrupted before its verdict (the run ended stopped)"
        ), said
        assert f"its {unit.rollouts:,} rollouts count in the cost below" in said
        assert "No gate has run yet" not in watched.page.content()
        assert watched.console_errors == []


def test_report_opens_from_a_copy_elsewhere(demo: Path, tmp_path: Path) -> None:
    """As an e-mail attachment would: the file alone, away from its run directory."""
    alone = tmp_path / "attachment.html"
    alone.write_bytes((demo / "report.html").read_bytes())
    with chromium() as browser:
        watched = open_page(browser, alone.as_uri(), plots=4)
        check_page(watched, demo, origin=alone.as_uri())


def test_the_transfer_table_shows_in_chromium(demo: Path, tmp_path: Path) -> None:
    """A run with a transfer table (compare with two agents into RUN-transfer): the table is drawn,
    one verdict badge per agent, and the page still draws every plot without an error."""
    import shutil

    from skilltune.measure.transfer import compare_agents
    from skilltune.runfiles import AgentSpec
    from skilltune.skill import load_skill
    from tests.helpers import MOCK_SUITE

    run = tmp_path / "demo"
    shutil.copytree(demo, run)
    arms = {"S0": load_skill(run / "seed"), "best": load_skill(run / "best_skill")}
    agents = [
        AgentSpec(label="follows", agent="mock"),
        AgentSpec(label="stubborn", agent="mock", options={"ignores": ["quantify-impact", "detection-gap"]}),
    ]
    table = compare_agents(MOCK_SUITE, arms, agents, reps=1, out=tmp_path / "demo-transfer")
    path = write_report(run)
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=4)
        heading = watched.page.locator("#transfer-1")
        assert heading.is_visible()
        cells = watched.page.locator("table.transfer .badge")
        assert cells.all_inner_texts() == [c.pairs[0].verdict for c in table.agents]
        header = watched.page.locator("table.transfer tr").first.inner_text()
        assert "follows" in header and "stubborn" in header
        assert watched.console_errors == []


def test_a_steps_proposals_render_as_a_ranked_table(demo: Path) -> None:
    """A step of several asks: its section shows the ranked proposals (a row per ask, ranks 1..N, each
    status badge), the tasks a proposal fixed open from their count, and the leave-one-out table."""
    from skilltune.runfiles import ReflectionsFile

    found = {
        int(p.parent.name.split("_")[1]): ReflectionsFile.read(p)
        for p in sorted((demo / "steps").glob("step_*/reflections.json"))
    }
    index, reflections = next((i, r) for i, r in found.items() if r.selection and r.selection.leave_one_out)
    fixed = next(p for p in reflections.proposals if p.screen and p.screen.fixed)
    with chromium() as browser:
        watched = open_page(browser, (demo / "report.html").as_uri(), plots=4)
        page = watched.page
        page.locator(f"#step-{index} > summary").click()
        table = page.locator(f"#step-{index} table.proposals")
        assert table.is_visible()
        rows = table.locator("tr[id]")
        assert rows.count() == len(reflections.proposals)
        assert [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())] == [
            str(i + 1) for i in range(rows.count())
        ]
        badges = table.locator(".badge").all_inner_texts()
        assert sorted(badges) == sorted(p.status for p in reflections.proposals)
        assert badges[0] == "kept"  # kept first
        name = f"{fixed.index}.{fixed.rule + 1}"  # ask.rule, counted from 1
        row = page.locator(f'[id="step-{index}-ask-{name}"]')
        tasks = row.locator("details.tasks").first
        assert not tasks.locator("div").first.is_visible()
        tasks.locator("summary").click()
        assert tasks.locator("div").all_inner_texts() == fixed.screen.fixed  # type: ignore[union-attr]
        loo = page.locator(f"#step-{index} table.leave-one-out tr")
        assert loo.count() == 1 + len(reflections.selection.leave_one_out)  # type: ignore[union-attr]
        assert watched.console_errors == []


def test_a_stopped_unit_and_a_compare_beside_the_run_in_chromium(tmp_path: Path) -> None:
    """A run stopped in step 2's gate: the unit shows its diff and proposals, its gate's time is
    not 0; the compare the page suggests, once run, shows as the run's held-out comparison."""
    import re
    import shlex

    from typer.testing import CliRunner

    from skilltune.cli import app
    from skilltune.report import summarize
    from tests.report_runs import train_stopped_in_gate

    run = train_stopped_in_gate(tmp_path / "runs", "halt", step=2)
    compare = summarize(run).held_out_commands[-1]
    assert CliRunner().invoke(app, [*shlex.split(compare)[1:], "--quiet"]).exit_code == 0
    path = write_report(run)
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=4)
        page = watched.page
        assert "halt-heldout/comparison.json" in page.locator("#held-out-source").inner_text()
        assert page.locator("#no-held-out").count() == 0
        page.locator("#step-2 > summary").click()
        assert page.locator("#step-2 pre.diff").is_visible()
        assert page.locator("#step-2 table.proposals").is_visible()
        summary = page.locator("#step-2 > summary").inner_text()
        assert not re.search(r"· 0\.0s$", summary), summary  # the stopped gate's time counts
        assert watched.console_errors == []


def test_the_trigger_table_counts_queries_in_chromium(tmp_path: Path) -> None:
    """The trigger demo: the trigger table's accuracy counts each query once, and the descriptions a
    later step of the chain replaced are struck through."""
    import skilltune
    from tests.helpers import REPO

    example = REPO / "examples" / "trigger-demo"
    skilltune.train(
        example / "suite", example / "skill", tag="trig", runs_dir=str(tmp_path), component="description",
        max_steps=4, seed=2,
    )  # fmt: skip
    run = tmp_path / "trig"
    comparison = Comparison.read(run / "comparison.json")
    queries = comparison.arms["best"].n_tasks
    path = write_report(run)
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=4)
        page = watched.page
        rows = page.locator("table.trigger tr")
        assert rows.count() == 1 + len(comparison.arms)
        for i in range(1, rows.count()):
            accuracy = rows.nth(i).locator("td").nth(5).inner_text()
            assert accuracy.endswith(f"/{queries})"), accuracy  # over queries, not rollouts
        keep = page.locator("details.unit:has(.badge.keep)").first
        replaced = keep.locator("ul.origins li.replaced code")
        assert replaced.count() >= 1
        assert replaced.first.evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"
        assert keep.locator(".asked").first.is_visible()  # a cited trajectory's query
        assert watched.console_errors == []
