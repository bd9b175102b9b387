"""A step's proposals (``--proposals`` above 1) in the report, ``status`` and the findings entry: every
figure of reflections.json's ``proposals`` and ``selection`` shows, ranked as the screen chose."""

from __future__ import annotations

import html as htmllib
import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from skilltune.report import render_report, summarize
from skilltune.report.status import status_screen
from skilltune.runfiles import ProposalRecord, ReflectionsFile
from skilltune.textfmt import fmt, signed
from tests.report_runs import train_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_demo(tmp_path_factory.mktemp("runs"), max_steps=4, proposals=4)


def _reflections(run: Path) -> dict[int, ReflectionsFile]:
    return {
        int(path.parent.name.split("_")[1]): ReflectionsFile.read(path)
        for path in sorted((run / "steps").glob("step_*/reflections.json"))
    }


def _section(page: str, unit: str) -> str:
    return page.split(f'id="{unit}"', 1)[1].split('<details class="unit"', 1)[0]


def _text(fragment: str) -> str:
    """The fragment's text as a reader sees it (tags out, entities decoded, whitespace collapsed)."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _titles(fragment: str) -> list[str]:
    return [htmllib.unescape(t) for t in re.findall(r'<code title="([^"]*)"', fragment)]


def _screen_order(proposals: list[ProposalRecord]) -> list[str]:
    """The ranking, from the file: kept first, then the screened by gain (fewer broken, ask order),
    then the proposals never screened in ask order."""
    kept = [p for p in proposals if p.status == "kept"]
    rest = [p for p in proposals if p.status != "kept"]
    screened = sorted(
        (p for p in rest if p.screen),
        key=lambda p: (
            -p.screen.gain if p.screen else 0,
            len(p.screen.broke) if p.screen else 0,
            p.index,
            p.rule,
        ),
    )
    kept.sort(key=lambda p: (-(p.screen.gain if p.screen else 0), p.index, p.rule))
    return [f"{p.index}.{p.rule + 1}" for p in [*kept, *screened, *(p for p in rest if not p.screen)]]


def test_every_proposal_figure_of_reflections_json_is_in_its_steps_section(demo: Path) -> None:
    found = _reflections(demo)
    assert found and any(r.proposals for r in found.values())
    assert any(r.selection and r.selection.leave_one_out for r in found.values()), "a leave-one-out to show"
    assert any(p.screen and p.screen.fixed for r in found.values() for p in r.proposals)
    page = render_report(demo)
    for index, reflections in found.items():
        section = _section(page, f"step-{index}")
        text = _text(section)
        if not reflections.proposals:  # a batch without failures asks nothing
            assert "<h3>Proposals" not in section
            continue
        rows = re.findall(rf'<tr id="step-{index}-ask-(\d+\.\d+)">(.*?)</tr>', section, flags=re.S)
        assert [i for i, _ in rows] == _screen_order(reflections.proposals), index
        asked = len(reflections.proposals)
        screened = sum(1 for p in reflections.proposals if p.screen)
        kept = sum(1 for p in reflections.proposals if p.status == "kept")
        assert f"Proposals ({asked} asked, {screened} screened, {kept} kept)" in text
        for rank, (ask, row) in enumerate(rows, start=1):
            p = next(p for p in reflections.proposals if f"{p.index}.{p.rule + 1}" == ask)
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
            assert _text(cells[0]) == str(rank) and _text(cells[1]) == ask
            assert _text(cells[2]) == (p.label if p.kind == "focus" else "sample")
            # each edit, clipped, with its whole compact form on hover
            assert _titles(cells[3]) == [edit.compact() for edit in p.edits]
            assert _text(cells[-2]) == str(p.attempts)
            assert _text(cells[-1]) == f"{p.status} {p.reason}".strip()
            assert f'class="badge {p.status.replace(" ", "-")}"' in cells[-1]
            f = p.screen
            if f is None:
                assert [_text(c) for c in cells[4:9]] == ["-"] * 5
                continue
            assert _text(cells[4]) == signed(f.gain)
            assert _text(cells[5]) == f"{fmt(f.before)} \u2192 {fmt(f.after)}"
            for cell, tasks in ((cells[6], f.fixed), (cells[7], f.broke)):
                assert _text(cell).split() == ([str(len(tasks)), *tasks] if tasks else ["0"])
                if tasks:  # the tasks in a details element, and on hover of the count
                    assert f'<summary title="{", ".join(tasks)}">{len(tasks)}</summary>' in cell
            assert _text(cells[8]) == str(len(f.tasks))
        selection = reflections.selection
        assert selection is not None
        assert f"Selection: {selection.rule}." in text
        if selection.kept:
            assert (
                f"The candidate holds ask{'' if len(selection.kept) == 1 else 's'} "
                + ", ".join(map(str, selection.kept))
                in text
            )
        if selection.screen:
            s = selection.screen
            assert (
                f"{fmt(s.before)} \u2192 {fmt(s.after)}, gain {signed(s.gain)}, fixed {len(s.fixed)}, "
                f"broke {len(s.broke)} of {len(s.tasks)} task(s)"
            ) in text
        loo = section.split("<h3>Leave-one-out</h3>", 1)
        assert (len(loo) == 2) == bool(selection.leave_one_out)
        if selection.leave_one_out:
            loo_rows = re.findall(r"<tr><td><code.*?</tr>", loo[1], flags=re.S)
            assert len(loo_rows) == len(selection.leave_one_out)
            for step, row in zip(selection.leave_one_out, loo_rows, strict=True):
                assert _titles(row) == [step.edit]
                words = _text(row).split()[-4:]
                assert words == [
                    f"{step.proposal}.{step.rule + 1}",
                    fmt(step.with_edit),
                    fmt(step.without),
                    "dropped" if step.dropped else "kept",
                ]


def test_status_and_findings_count_the_proposals(demo: Path) -> None:
    found = _reflections(demo)
    proposals = [p for r in found.values() for p in r.proposals]
    asked, kept = len(proposals), sum(1 for p in proposals if p.status == "kept")
    screened = sum(1 for p in proposals if p.screen)
    again = sum(1 for p in proposals if p.attempts > 1)
    s = summarize(demo, depth="rollouts")
    counts = s.proposal_counts
    assert counts is not None
    assert (counts.steps, counts.asked, counts.screened, counts.kept, counts.asked_again) == (
        sum(1 for r in found.values() if r.proposals),
        asked,
        screened,
        kept,
        again,
    )
    assert sum(counts.statuses.values()) == asked
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(status_screen(s))
    screen = console.export_text()
    again_text = f" ({again} asked again)" if again else ""
    asking = sum(1 for r in found.values() if r.proposals)
    line = f"proposals     {asked} asked in {asking} steps{again_text}, {screened} screened, {kept} kept"
    assert line in screen
    assert "proposals: asked / screened / kept" in screen
    for unit in s.units[-5:]:  # the last verdicts: each step's own counts
        if unit.kind == "step" and found[unit.index].proposals:
            r = found[unit.index].proposals
            mine = f"{len(r)} / {sum(1 for p in r if p.screen)} / {sum(1 for p in r if p.status == 'kept')}"
            assert re.search(rf"{unit.name} .*\s{re.escape(mine)}\s", screen), (unit.name, mine)
    findings = (demo / "findings.md").read_text()
    assert (
        f"- **Proposals** (each screened alone on train; kept: in its step's candidate): {asked} asked"
        in findings
    )
    assert f", {screened} screened, {kept} kept" in findings


def test_a_run_of_one_ask_per_step_shows_no_proposals(tmp_path: Path) -> None:
    """``--proposals 1`` (as every run of schema 9 or older): the step renders as before."""
    run = train_demo(tmp_path / "runs", max_steps=2, proposals=1)
    assert not any(r.proposals for r in _reflections(run).values())
    s = summarize(run)
    assert s.proposal_counts is None and all(not u.proposals for u in s.units)
    page = render_report(run)
    assert "<h3>Proposals" not in page and "Leave-one-out" not in page and "proposals " not in _text(page)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(status_screen(summarize(run, depth="rollouts")))
    assert "proposals" not in console.export_text()
    assert "**Proposals**" not in (run / "findings.md").read_text()
