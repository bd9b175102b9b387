"""Report benchmark: report.html of a synthetic run of 200 units and 50,000 rollouts.

    .venv/bin/python benchmarks/report.py              # a few minutes (most of it writing the run)
    .venv/bin/python benchmarks/report.py --runs 5 --keep /tmp/big-run

The run is written through the run files' models, laid out as train writes it: 200 steps, each
with 10 train rollouts and a sequential gate of 3 rounds over 40 val tasks (240 rollouts), a
proposer answer citing train trajectories, a candidate skill, gate.json and step.json; one step in
ten kept (a commit in skill-repo/); the seed's baseline and a held-out comparison of three arms;
a journal with every stage. Every rollout folder holds record.json and output.txt.

Measured, medians of RUNS (after one warm-up): `skilltune report` as a fresh process (summarize,
render, write), the same in-process split into reading (summarize) and rendering, the floor
(finding every record.json and parsing its JSON, no validation), the file's size, and the page's load in
headless Chromium (Debian's, driven by Playwright): from navigation to every plot drawn, beside
a page holding plotly.js alone with four one-line plots (what any plotly page pays). Targets:
under 10 s to generate, under 10 MB. Absolute times depend on the machine (and on what else runs
on it); ratios are given to the floors. Writes benchmarks/results/report.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UNITS, TRAIN, VAL, ROUNDS, TEST, TEST_REPS, KEEP_EVERY = 200, 10, 40, 3, 30, 3, 10


def write_run(root: Path, seed: int = 0) -> int:
    """A finished run directory at ``root``; returns the number of rollout records written."""
    from skilltune.proposal import Edit
    from skilltune.rundir import RunDir
    from skilltune.runfiles import (
        ArmResult,
        Comparison,
        PairResult,
        ReflectionsFile,
        RolloutRecord,
        Round,
        RunConfigFile,
        RunStart,
        SeedFile,
        SessionEnd,
        SessionStart,
        StageDone,
        UnitEnd,
        UnitRecord,
        Verdict,
    )
    from skilltune.score.base import Score
    from skilltune.skill import Candidate
    from skilltune.skill_repo import SkillRepo
    from skilltune.store import write_text

    rng = random.Random(seed)
    run = RunDir(root)
    contract = "c" * 64
    RunConfigFile(
        suite="/nonexistent/suite", skill="/nonexistent/skill", tag=root.name, max_steps=UNITS,
        epoch_steps=UNITS + 1, suite_hash="s" * 64, contract=contract,
    ).write(run.config)  # fmt: skip
    body = "---\nname: bench-skill\ndescription: A synthetic skill.\n---\n\n# Rules\n\n" + "".join(
        f"- Rule {i}: do the thing number {i} carefully.\n" for i in range(30)
    )
    seed_skill = Candidate({"SKILL.md": body})
    seed_skill.save(run.seed_dir)
    SeedFile(main="SKILL.md", kind="folder", fallback_name="bench", hash=seed_skill.hash).write(run.seed_json)
    repo = SkillRepo(run.skill_repo, f"skilltune/bench-skill/{root.name}")
    repo.ensure(seed_skill)
    clock = datetime(2026, 1, 1, tzinfo=UTC)
    events: list[Any] = [
        RunStart(tag=root.name, planned_rollouts=UNITS * (TRAIN + 2 * VAL * 8), per_step=TRAIN + 2 * VAL * 8),
        SessionStart(pid=1),
    ]
    written = 0
    val_rate = {f"val-{t:03d}": rng.uniform(0.2, 0.8) for t in range(VAL)}

    def rollout(unit: Path, phase: str, cand: str, task: str, rep: int, p: float, split: str) -> float:
        nonlocal written
        hard = int(rng.random() < p)
        score = Score(
            hard=hard, soft=hard * 0.5 + 0.5 * rng.random(), mixed=0.0, checks=[], contract=contract
        )
        score.mixed = round(0.5 * score.hard + 0.5 * score.soft, 6)
        folder = unit / "rollouts" / phase / cand[:12] / f"{task}_r{rep}"
        RolloutRecord(
            task_id=task, split=split, phase=phase, replicate=rep, seed=seed, candidate=cand, agent="mock",
            model="mock", options_hash="o" * 64, task_hash="t" * 64, status="ok", score=score,
            tokens_in=400 + rng.randrange(200), tokens_out=40 + rng.randrange(40), cost_usd=0.002,
            wall_s=round(rng.uniform(5, 60), 3), started_at=clock.isoformat(),
        ).write(folder / "record.json")  # fmt: skip
        write_text(folder / "output.txt", f"ROLLOUT {task} r{rep}\n" + "the agent's final answer. " * 12)
        if phase == "train":
            write_text(folder / "conversation.json", json.dumps([{"role": "user", "content": "do it"}]))
        written += 1
        return score.mixed

    baseline = run.unit_dir("step", 0)
    for task, p in val_rate.items():
        rollout(baseline, "eval", seed_skill.hash, task, 0, p, "val")
    incumbent = seed_skill
    for n in range(1, UNITS + 1):
        unit = run.unit_dir("step", n)
        name = unit.name
        base = n * 1000
        train_ids = [f"train-{rng.randrange(60):03d}" for _ in range(TRAIN)]
        for i, task in enumerate(train_ids):
            rollout(unit, "train", incumbent.hash, task, base + i, 0.5, "train")
        edits = [
            Edit(
                op="append",
                text=f"- Step {n} rule {k}: state the check you ran and what it showed.",
                rationale=f"the trajectories of step {n} skipped the check (edit {k})",
                support=[f"{train_ids[k]}#r{base + k}", f"{train_ids[k + 1]}#r{base + k + 1}"],
            )
            for k in range(3)
        ]
        ReflectionsFile(edits=edits).write(unit / "reflections.json")
        kept = n % KEEP_EVERY == 0
        candidate = incumbent.replace_file(
            "SKILL.md", incumbent.text + "".join(e.text + "\n" for e in edits[:2])
        )
        candidate.save(unit / "candidate")
        write_text(unit / "candidate_skill.md", candidate.text)
        lift = 0.15 if kept else 0.0
        rounds, cand_all, inc_all = [], [], []
        for k in range(ROUNDS):
            for task, p in val_rate.items():
                cand_all.append(
                    rollout(unit, "gate", candidate.hash, task, base + k, min(1, p + lift), "val")
                )
                inc_all.append(rollout(unit, "gate", incumbent.hash, task, base + k, p, "val"))
            gain = statistics.fmean(cand_all) - statistics.fmean(inc_all)
            se = (
                statistics.stdev(a - b for a, b in zip(cand_all, inc_all, strict=True)) / len(cand_all) ** 0.5
            )
            rounds.append(
                Round(
                    index=k,
                    replicates=k + 1,
                    candidate=round(statistics.fmean(cand_all), 6),
                    incumbent=round(statistics.fmean(inc_all), 6),
                    n_pairs=len(cand_all),
                    rollouts=2 * VAL,
                    statistic={
                        "mean_gain": round(gain, 6),
                        "se": round(se, 6),
                        "t": round(gain / se, 4),
                        "bound_t": 2.5,
                        "upper": round(gain + 1.3 * se, 6),
                    },
                )
            )
        decision = "accept" if kept else "reject"
        verdict = Verdict(
            decision=decision, reason=f"{decision} after {ROUNDS} replicate(s)", metric="mixed",
            val_candidate=rounds[-1].candidate, val_incumbent=rounds[-1].incumbent, rounds=rounds,
            rollouts=2 * VAL * ROUNDS, alpha=0.01,
        )  # fmt: skip
        verdict.write(unit / "gate.json")
        if kept:
            repo.accept(candidate, f"step {n}", f"{candidate.short} synthetic keep")
        UnitRecord(
            kind="step", index=n, step=n, epoch=1, candidate=candidate.hash, parent=incumbent.hash,
            verdict="keep" if kept else "discard", decision=decision, reason=verdict.reason, metric="mixed",
            val_candidate=verdict.val_candidate, val_incumbent=verdict.val_incumbent, alpha=0.01,
            rollouts=TRAIN + 2 * VAL * ROUNDS, tokens=(TRAIN + 2 * VAL * ROUNDS) * 500, cost_usd=0.5,
            edits=[e.compact() for e in edits[:2]], edit_texts=[e.text for e in edits[:2]],
        ).write(unit / "step.json")  # fmt: skip
        for stage, seconds, count in (("rollout", 30.0, TRAIN), ("reflect", 20.0, 0), ("edit", 0.01, 0),
                                      ("gate", 300.0, 2 * VAL * ROUNDS)):  # fmt: skip
            clock += timedelta(seconds=seconds)
            events.append(
                StageDone(
                    ts=clock.isoformat(), unit=name, stage=stage, seconds=seconds, rollouts=count or None
                )
            )
        events.append(UnitEnd(ts=clock.isoformat(), unit=name, verdict="keep" if kept else "discard",
                              candidate=candidate.short, rollouts=TRAIN + 2 * VAL * ROUNDS))  # fmt: skip
        if kept:
            incumbent = candidate
    arms: dict[str, ArmResult] = {}
    for arm, (h, lift) in {
        "S0": (seed_skill.hash, 0.0),
        "best": (incumbent.hash, 0.1),
        "noskill": ("noskill", -0.1),
    }.items():
        per_task = {
            f"test-{t:03d}": [
                rollout(run.final, "test", h, f"test-{t:03d}", r, min(1, max(0, 0.5 + lift)), "test")
                for r in range(TEST_REPS)
            ]
            for t in range(TEST)
        }
        mean = statistics.fmean(statistics.fmean(v) for v in per_task.values())
        arms[arm] = ArmResult(
            skill_hash=h, hard_acc=mean, soft_acc=mean, mixed=round(mean, 6), n_tasks=TEST,
            n_rollouts=TEST * TEST_REPS, n_scored=TEST * TEST_REPS, statuses={"ok": TEST * TEST_REPS},
            per_task=per_task,
        )  # fmt: skip
    pairs = [
        PairResult(a=a, b=b, diff=0.1, ci95=[0.02, 0.18], p_value=0.01, n_tasks=TEST, verdict="b_better")
        for a, b in (("S0", "best"), ("S0", "noskill"), ("best", "noskill"))
    ]
    Comparison(
        suite="/nonexistent/suite", split="test", agent="mock", reps=TEST_REPS, metric="mixed",
        contract=contract, contaminated=False, arms=arms, pairs=pairs,
    ).write(run.comparison)  # fmt: skip
    events.append(SessionEnd(ts=clock.isoformat(), rollouts=written))
    for event in events:
        run.journal(event)
    run.write_terminal("success", f"{UNITS} steps, {UNITS // KEEP_EVERY} kept (synthetic)")
    return written


PLOTLY_ALONE = """<!DOCTYPE html><html><head><script>{js}</script></head><body>
<div id="a"></div><div id="b"></div><div id="c"></div><div id="d"></div>
<script>for (const id of "abcd") Plotly.newPlot(id, [{{y: [1, 2]}}]);</script></body></html>"""


def _chromium_loads(pages: list[Path], runs: int) -> list[list[float]]:
    """Seconds from navigation to 4 plots drawn, per page, in fresh tabs, in interleaved rounds (a
    busy machine slows every page alike); one warm-up round first."""
    from playwright.sync_api import sync_playwright

    from tests.chromium import CHROMIUM, FLAGS

    times: list[list[float]] = [[] for _ in pages]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for round_ in range(runs + 1):
                for i, path in enumerate(pages):
                    page = browser.new_page(viewport={"width": 1280, "height": 1000})
                    t0 = time.perf_counter()
                    page.goto(path.as_uri())
                    page.wait_for_function(
                        "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4", timeout=120_000
                    )
                    if round_:
                        times[i].append(time.perf_counter() - t0)
                    page.close()
        finally:
            browser.close()
    return times


def _floor(run: Path) -> float:
    """Finding every record.json and parsing it as JSON, nothing more: what any reader pays."""
    t0 = time.perf_counter()
    for path in run.glob("steps/*/rollouts/*/*/*/record.json"):
        json.loads(path.read_bytes())
    for path in run.glob("final/rollouts/*/*/*/record.json"):
        json.loads(path.read_bytes())
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="timed repetitions of each measure (medians)")
    parser.add_argument("--keep", type=Path, help="write the synthetic run here and keep it")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "report.json")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="skilltune-bench-report-"))
    run = args.keep or tmp / "bench"
    try:
        if run.exists():
            shutil.rmtree(run)
        t0 = time.perf_counter()
        rollouts = write_run(run)
        print(
            f"wrote {run}: {UNITS} units, {rollouts:,} rollouts in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        from skilltune.report.page import render_page
        from skilltune.report.read import summarize

        command = [str(Path(sys.executable).with_name("skilltune")), "report", str(run)]
        subprocess.run(command, check=True, capture_output=True)  # warm-up (file cache, .pyc)
        cli, reads, renders, floors = [], [], [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            cli.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            summary = summarize(run)
            reads.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            render_page(summary)
            renders.append(time.perf_counter() - t0)
            floors.append(_floor(run))
        report = run / "report.html"
        size = report.stat().st_size
        from skilltune.report.figures import plotly_script

        alone = tmp / "plotly-alone.html"
        alone.write_text(PLOTLY_ALONE.format(js=plotly_script()))
        loads, floor_loads = _chromium_loads([report, alone], args.runs)
        med = statistics.median
        result = {
            "machine": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            },
            "run": {"units": UNITS, "rollouts": rollouts, "val_tasks": VAL, "kept": UNITS // KEEP_EVERY},
            "runs": args.runs,
            "generate_s": round(med(cli), 3),
            "generate_s_all": [round(x, 3) for x in cli],
            "read_s": round(med(reads), 3),
            "render_s": round(med(renders), 3),
            "floor_read_records_s": round(med(floors), 3),
            "generate_over_floor": round(med(cli) / med(floors), 2),
            "size_bytes": size,
            "size_mb": round(size / 1e6, 2),
            "chromium_load_s": round(med(loads), 3),
            "chromium_load_s_all": [round(x, 3) for x in loads],
            "chromium_load_plotly_alone_s": round(med(floor_loads), 3),
            "load_over_plotly_alone": round(med(loads) / med(floor_loads), 2),
            "targets": {"generate_s": 10, "size_mb": 10},
        }
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    rows = [
        ("`skilltune report` (fresh process: read, render, write)", f"{result['generate_s']} s", "< 10 s"),
        ("  reading the run (summarize)", f"{result['read_s']} s", ""),
        ("  rendering the page", f"{result['render_s']} s", ""),
        ("floor: finding and parsing every record.json", f"{result['floor_read_records_s']} s", ""),
        ("report / floor", f"{result['generate_over_floor']}x", ""),
        ("report.html size", f"{result['size_mb']} MB", "< 10 MB"),
        ("load in headless Chromium (to every plot drawn)", f"{result['chromium_load_s']} s", ""),
        ("  floor: plotly.js alone with 4 one-line plots", f"{result['chromium_load_plotly_alone_s']} s", ""),
        ("  report / plotly.js alone", f"{result['load_over_plotly_alone']}x", ""),
    ]
    print(f"report of a synthetic run: {UNITS} units, {rollouts:,} rollouts (medians of {args.runs})")
    for name, value, target in rows:
        print(f"  {name:<58} {value:>10}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
