"""An agent the best skill hurts on the held-out test (issue 34, item 3): with several agents under
``--agents-gate mean`` the pooled comparison can gain while one agent loses. train's last lines, the
report, ``status`` and findings.md name the agent and its figure; ``promote --apply`` refuses,
writing nothing, unless given ``--accept-harm``. The run is tests/test_multitrain.py's ``mean`` run:
three mock agents, ``harmed`` broken by the kept step's line (a_better on test)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.report import render_report, summarize, write_report
from skilltune.report.page import render_index
from skilltune.rundir import RunDir
from skilltune.runfiles import Harm, Transfer
from tests.helpers import MOCK_SKILL, MOCK_SUITE
from tests.test_multitrain import AGENT_VALUES
from tests.test_report_agents import _row

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, str]:
    """The ``mean`` run, trained by the CLI, and what train printed."""
    root = tmp_path_factory.mktemp("harm")
    agents = [arg for value in AGENT_VALUES for arg in ("--agent", value)]
    result = runner.invoke(
        app,
        ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--proposer", "mock", "--tag", "mean",
         "--runs-dir", str(root), "--max-steps", "1", "--seed", "1", "--metric", "hard", "--test-reps", "1",
         "--agents-gate", "mean", "--proposals", "1", "--carry", "off", "--quiet", *agents],
        env={"COLUMNS": "240"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return RunDir(root / "mean"), result.output


@pytest.fixture(scope="module")
def harm(trained: tuple[RunDir, str]) -> Harm:
    """The hurt agent as transfer.json records it (the figure every place must show)."""
    run, _ = trained
    table = Transfer.read(run.final / "transfer.json")
    [found] = table.hurt()
    column = table.agent("harmed")
    assert found.agent == "harmed" and found.pair == column.pairs[0] and found.pair.verdict == "a_better"
    assert found.pair.ci95 is not None and found.pair.ci95[1] < 0
    assert all(c.pairs[0].verdict != "a_better" for c in table.agents if c.label != "harmed")
    ending = run.terminal()
    assert ending is not None and "(a_better)" not in ending[1]  # the pooled headline shows no harm
    return found


def _figure(harm: Harm) -> str:
    low, high = harm.pair.ci95 or (0.0, 0.0)
    return f"agent harmed: best is worse than S0 on test, {harm.pair.diff:+.3f} [{low:+.3f}, {high:+.3f}] (a_better)"


def test_the_line_names_the_agent_and_its_figure(harm: Harm) -> None:
    assert harm.line() == _figure(harm)


def test_train_ends_with_a_warning_naming_the_hurt_agent(trained: tuple[RunDir, str], harm: Harm) -> None:
    _, output = trained
    assert f"warning: {_figure(harm)}" in output
    assert "--accept-harm" in output


def test_status_shows_the_hurt_agent_beside_the_held_out_verdict(
    trained: tuple[RunDir, str], harm: Harm
) -> None:
    run, _ = trained
    result = runner.invoke(app, ["status", str(run.root)], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    assert _figure(harm) in _row(result.output, "hurt")  # its wrapped lines joined
    held = next(i for i, line in enumerate(lines) if line.startswith("held-out"))
    assert held < next(i for i, line in enumerate(lines) if line.startswith("hurt"))  # beside the verdict
    assert "the pooled held-out figure hides it" not in result.output  # said once: not again as a warning


def test_findings_md_holds_the_hurt_agent(trained: tuple[RunDir, str], harm: Harm) -> None:
    run, _ = trained
    text = run.findings_md.read_text(encoding="utf-8")
    assert f"- **Hurt on held-out**: {_figure(harm)}" in text
    assert f"  - {_figure(harm)}: the pooled held-out figure hides it" in text  # among the warnings


def test_the_report_warns_of_the_hurt_agent_under_its_headline(
    trained: tuple[RunDir, str], harm: Harm
) -> None:
    run, _ = trained
    html = render_report(run.root)
    box = html[html.index('<div class="harm" id="harm"') : html.index("</div>", html.index('id="harm"'))]
    assert "The best skill hurts an agent on the held-out test" in box
    assert f"<li>{_figure(harm)}</li>" in box
    assert html.index('id="harm"') < html.index('class="cards"')  # under the headline, above the cards
    assert f"{_figure(harm)}: the pooled held-out figure hides it" in html  # and in the warnings


def test_the_harm_box_shows_in_chromium(trained: tuple[RunDir, str], harm: Harm) -> None:
    """The box draws above the cards and the page still draws its plots without a console error."""
    from tests.chromium import chromium, open_page

    run, _ = trained
    path = write_report(run.root)
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=4)
        box = watched.page.locator("#harm")
        assert box.is_visible() and _figure(harm) in box.inner_text()
        below = watched.page.locator(".cards").bounding_box()
        top = box.bounding_box()
        assert top is not None and below is not None and top["y"] < below["y"]
        assert watched.console_errors == []


def test_the_list_of_runs_marks_the_run_that_hurts_an_agent(trained: tuple[RunDir, str], harm: Harm) -> None:
    run, _ = trained
    html = render_index([summarize(run.root, depth="light")], str(run.root.parent), [], "token")
    assert f'title="{_figure(harm)}">hurts harmed</span>' in html


def test_no_warning_when_no_agent_is_hurt_or_the_test_measured_another_best(
    trained: tuple[RunDir, str], tmp_path: Path
) -> None:
    run, _ = trained
    for change in ("verdict", "best"):
        copy = RunDir(tmp_path / change / "mean")
        shutil.copytree(run.root, copy.root)
        table = Transfer.read(copy.final / "transfer.json")
        if change == "verdict":
            table.agent("harmed").pairs[0].verdict = "no_difference"
        else:
            table.arms["best"] = "0" * 64
        table.write(copy.final / "transfer.json")
        assert 'id="harm"' not in render_report(copy.root)
        result = runner.invoke(app, ["status", str(copy.root)], env={"COLUMNS": "240"})
        assert "is worse than" not in result.output


def _live(tmp_path: Path) -> tuple[Path, str]:
    live = tmp_path / "live-skill"
    shutil.copytree(MOCK_SKILL, live)
    return live, (live / "SKILL.md").read_text(encoding="utf-8")


def test_promote_refuses_a_skill_that_hurts_an_agent_and_writes_nothing(
    trained: tuple[RunDir, str], harm: Harm, tmp_path: Path
) -> None:
    run, _ = trained
    live, before = _live(tmp_path)
    files = sorted(p.relative_to(live) for p in live.rglob("*"))
    result = runner.invoke(
        app, ["promote", str(run.root), "--to", str(live), "--apply"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 2, result.output
    assert _figure(harm) in result.output and "--accept-harm" in result.output
    assert "Nothing was written" in result.output
    assert (live / "SKILL.md").read_text(encoding="utf-8") == before
    assert sorted(p.relative_to(live) for p in live.rglob("*")) == files
    shown = runner.invoke(app, ["promote", str(run.root), "--to", str(live)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output  # without --apply: the plan, with the harm said
    assert f"warning: {_figure(harm)}" in shown.output
    assert "add --apply --accept-harm" in shown.output


def test_promote_with_accept_harm_applies_and_says_so(
    trained: tuple[RunDir, str], harm: Harm, tmp_path: Path
) -> None:
    run, _ = trained
    live, before = _live(tmp_path)
    result = runner.invoke(
        app, ["promote", str(run.root), "--to", str(live), "--apply", "--accept-harm"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    after = (live / "SKILL.md").read_text(encoding="utf-8")
    assert after != before
    assert after == (run.best_dir / "SKILL.md").read_text(encoding="utf-8")
    assert f"warning: {_figure(harm)}" in result.output
    assert "applied despite the harm to harmed on the held-out test (--accept-harm)" in result.output
