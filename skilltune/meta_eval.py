"""Meta-evaluations: does training with *this* suite, proposer and gate do what it claims?

- ``planted``: remove a rule (every line holding ``--ablate TEXT``) from a good
  skill, measure on the test split how much that costs, train from the ablated
  skill, and report whether each run wins back at least 2/3 of the lost score
  (and whether the rule's text came back).
- ``null``: replace the suite's outcomes with pure noise (same task ids, prompts
  and files; every rollout is a fair coin for the mock agent, whatever the skill)
  and train; every accept is a false accept. Reports the fraction of runs that
  accepted anything.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skilltune.errors import UsageError
from skilltune.measure.compare import compare
from skilltune.progress import PlainReporter, Reporter
from skilltune.settings import MetaEvalSettings, PlantedSettings
from skilltune.skill import Candidate, load_skill
from skilltune.store import write_json, write_text
from skilltune.suite import load_suite
from skilltune.suite.jsonl import JsonlSuite
from skilltune.training import TrainResult, train

RECOVERY = 2 / 3
TEST_REPS = 3  # replicates of the held-out reference and of each run's final test
_GENERIC_POOL = [
    {
        "id": "g1",
        "text": "- Re-read the task before you answer and check every requirement it states.",
        "answers": [],
    },
    {"id": "g2", "text": "- Keep the answer short and put the result first.", "answers": []},
    {"id": "g3", "text": "- Prefer concrete examples over general statements.", "answers": []},
    {"id": "g4", "text": "- Verify the output before you finish.", "answers": []},
]


class MetaRun(BaseModel):
    run: str
    state: str
    kept: int
    rollouts: int
    seed_test: float | None = None
    best_test: float | None = None
    recovered: bool | None = None
    text_restored: bool | None = None

    @classmethod
    def of(cls, result: TrainResult, **measured: Any) -> MetaRun:
        """A finished training run (its name, end, keeps and rollouts), with what its kind measured."""
        run = Path(result.run_dir)
        rollouts = len(list(run.rglob("record.json")))
        return cls(run=run.name, state=result.state, kept=result.kept, rollouts=rollouts, **measured)


class MetaEval(BaseModel):
    kind: str
    suite: str
    runs: list[MetaRun]
    lost: float | None = None  # planted: held-out score the ablation costs
    summary: dict[str, Any]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def ablate(skill: Candidate, text: str) -> tuple[Candidate, list[str]]:
    """The skill without every line of its main file that holds ``text``."""
    lines = skill.text.splitlines(keepends=True)
    removed = [line.strip() for line in lines if text in line]
    if not removed:
        raise UsageError(
            f"--ablate {text!r} matches no line of {skill.main}: give text from the rule to remove"
        )
    kept = "".join(line for line in lines if text not in line)
    return skill.replace_file(skill.main, kept), removed


def _runs_dir(out: Path, force: bool) -> Path:
    if out.exists() and any(out.iterdir()):
        if not force:
            raise UsageError(f"--out {out} already holds results; choose a new folder or pass --force")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def planted(
    suite: str | Path,
    skill: str | Path,
    settings: PlantedSettings | None = None,
    *,
    ablate_text: str,
    out: str | Path,
    force: bool = False,
    reporter: Reporter | None = None,
) -> MetaEval:
    """Train ``runs`` times from the ablated skill; did each run win the rule back?"""
    chosen = settings or PlantedSettings()
    loaded = load_suite(suite)
    if not loaded.has_split("test"):
        raise UsageError(
            f"{suite}: meta-eval planted measures recovery on the test split, and the suite has none"
        )
    good = load_skill(skill)
    seed, removed = ablate(good, ablate_text)
    out = _runs_dir(Path(out), force)
    seed.save(out / "planted-seed")
    write_text(out / "removed.txt", "\n".join(removed) + "\n")
    reference = compare(
        loaded, {"ablated": seed, "good": good}, agent=chosen.agent, split="test", reps=TEST_REPS,
        out=out / "reference",
    )  # fmt: skip
    lost = (reference.arms["good"].mixed or 0.0) - (reference.arms["ablated"].mixed or 0.0)
    results = []
    for k in range(chosen.runs):
        result = train(
            loaded.source, out / "planted-seed", tag=f"run{k}", runs_dir=str(out), seed=chosen.seed + k,
            test_reps=TEST_REPS, reporter=reporter or PlainReporter(quiet=True), **chosen.train_settings(),
        )  # fmt: skip
        arms = result.comparison.arms if result.comparison else None
        gain = (arms["best"].mixed or 0.0) - (arms["S0"].mixed or 0.0) if arms else 0.0
        best_text = (out / f"run{k}" / "best_skill.md").read_text(encoding="utf-8")
        results.append(
            MetaRun.of(
                result,
                seed_test=arms["S0"].mixed if arms else None,
                best_test=arms["best"].mixed if arms else None,
                recovered=lost > 0 and gain >= RECOVERY * lost,
                text_restored=all(_norm(line) in _norm(best_text) for line in removed),
            )
        )
    summary = {
        "removed": removed,
        "lost_test_score": round(lost, 6),
        "recovered": sum(bool(r.recovered) for r in results) / len(results) if results else None,
        "text_restored": sum(bool(r.text_restored) for r in results) / len(results) if results else None,
        "rollouts_per_run": sum(r.rollouts for r in results) / len(results) if results else None,
    }
    if lost <= 0:
        summary["warning"] = (
            "removing the rule did not lower the held-out score: the suite cannot see this rule"
        )
    report = MetaEval(kind="planted", suite=str(loaded.source), runs=results, lost=lost, summary=summary)
    write_json(out / "meta_eval.json", report)
    return report


def noise_suite(source: JsonlSuite, folder: Path) -> Path:
    """A copy of ``source`` whose every task is a fair coin for the mock agent, whatever the skill."""
    shutil.copytree(source.root, folder)
    config = dict(source.config.model_dump(mode="json"))
    config["default_mode"] = "checklist"
    if not config.get("proposer_pool"):
        config["proposer_pool"] = _GENERIC_POOL
    for split, tasks in source.splits.items():
        lines = []
        for task in tasks:
            row = {"id": task.id, "prompt": task.prompt, "files": task.files, "requires": [], "noise": 0.5,
                   "scoring": {"mode": "checklist", "required": ["RESULT: solved"]}}  # fmt: skip
            lines.append(json.dumps(row))
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    body = (
        "# Null suite (skilltune meta-eval null)\n\n```json\n" + json.dumps(config, indent=2) + "\n```\n\n"
        "Every task of the original suite, with pure-noise outcomes: the mock agent solves each one with "
        "probability 0.5 whatever the skill says. Any edit a run keeps here is a false accept.\n"
    )
    (folder / "scoring.md").write_text(body, encoding="utf-8")
    for name in ("rubric.py", "judge.md"):
        (folder / name).unlink(missing_ok=True)
    return folder


def null(
    suite: str | Path,
    skill: str | Path,
    settings: MetaEvalSettings | None = None,
    *,
    out: str | Path,
    force: bool = False,
    reporter: Reporter | None = None,
) -> MetaEval:
    """Train ``runs`` times on a pure-noise version of the suite; report the runs that kept anything.
    The noise lives in the mock agent: the proposer and the gate are under test."""
    chosen = settings or MetaEvalSettings()
    loaded = load_suite(suite)
    if not isinstance(loaded, JsonlSuite):
        raise UsageError(
            "meta-eval null rebuilds a folder suite's tasks; Python env suites are not supported"
        )
    load_skill(skill)
    out = _runs_dir(Path(out), force)
    noisy = noise_suite(loaded, out / "null-suite")
    results = []
    for k in range(chosen.runs):
        result = train(
            noisy, skill, tag=f"run{k}", runs_dir=str(out), seed=chosen.seed + k, agent="mock",
            reporter=reporter or PlainReporter(quiet=True), **chosen.train_settings(),
        )  # fmt: skip
        results.append(MetaRun.of(result))
    summary = {
        "runs_accepting": sum(r.kept > 0 for r in results) / len(results) if results else None,
        "accepts_per_run": sum(r.kept for r in results) / len(results) if results else None,
        "rollouts_per_run": sum(r.rollouts for r in results) / len(results) if results else None,
    }
    report = MetaEval(kind="null", suite=str(loaded.source), runs=results, summary=summary)
    write_json(out / "meta_eval.json", report)
    return report
