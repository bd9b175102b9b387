"""``skilltune judge agreement``: re-judge finished rollouts from their records and measure the judge.

Each judged rollout under ``--rollouts`` (a run directory, or a ``run --out`` folder) is judged
again ``samples`` times from its record folder (output.txt, judge_inputs.json: the workspace is
long gone). The verdicts are kept under ``--out`` (``<record path>/judge.json``, keyed like a
rollout's own), so running it again costs nothing. The report says how often verdicts on one
output agree, how far their soft scores spread, and what share of the gate's noise the judge adds.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from skilltune.errors import UsageError
from skilltune.judge.noise import JudgeNoise, suite_judge_noise
from skilltune.judge.scorer import INPUTS_FILE, JUDGE_FILE, JudgeError, JudgeScorer
from skilltune.metric import Metric, as_metric
from skilltune.runfiles import JudgeInputsFile, RolloutRecord, RunFileError
from skilltune.runfiles.judge import JudgeVerdict
from skilltune.store import write_json
from skilltune.suite import Suite

AGREEMENT_SCHEMA_VERSION = 1
# Rollouts whose output a judge can read (a scoring error too: the judge may answer this time).
_JUDGED = ("ok", "task_failed", "timeout", "unscored", "scoring_error")


class AgreementReport(BaseModel):
    """agreement.json of ``skilltune judge agreement``."""

    schema_version: int = AGREEMENT_SCHEMA_VERSION
    suite: str
    rollouts: str
    judge: dict[str, object]
    samples: int
    rejudged: int
    unusable: int = Field(
        default=0, description="verdicts asked for that the judge never gave in a usable form"
    )
    skipped: dict[str, int] = Field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0
    noise: JudgeNoise


def judge_agreement(
    suite: Suite,
    rollouts: Path | str,
    *,
    out: Path | str,
    samples: int | None = None,
    metric: Metric = "mixed",
) -> AgreementReport:
    """Re-judge every judged rollout under ``rollouts`` ``samples`` times (default: twice the suite's
    samples, at least 3) and write ``out/agreement.json``."""
    rollouts, out = Path(rollouts), Path(out)
    if not rollouts.is_dir():
        raise UsageError(f"--rollouts {rollouts}: not a folder of rollout records")
    metric = as_metric(metric)
    settings = suite.judge
    draw = samples or max(3, 2 * settings.samples)
    if draw < 2:
        raise UsageError("--samples must be at least 2: agreement needs two verdicts on one output")
    skipped: Counter[str] = Counter()
    verdicts: list[list[JudgeVerdict]] = []
    replicates: dict[str, list[float]] = {}
    tokens, cost, unusable = 0, 0.0, 0
    scorer: JudgeScorer | None = None
    for path in sorted(rollouts.rglob("record.json")):
        if out.resolve() in path.resolve().parents:
            continue
        folder = path.parent
        try:
            record = RolloutRecord.read(path)
            task = suite.task(record.task_id)
        except (RunFileError, UsageError):
            skipped["not a record of this suite"] += 1
            continue
        if suite.scoring_mode(task) != "judge":
            skipped["not judged"] += 1
            continue
        if record.status not in _JUDGED:
            skipped[f"status {record.status}"] += 1
            continue
        if record.score is not None:
            replicates.setdefault(f"{record.candidate}|{record.task_id}", []).append(
                record.score.metric(metric)
            )
        found = suite.scorer(task)
        assert isinstance(found, JudgeScorer)
        scorer = scorer or found
        inputs = (
            JudgeInputsFile.read(folder / INPUTS_FILE)
            if (folder / INPUTS_FILE).is_file()
            else JudgeInputsFile()
        )
        output = (
            (folder / "output.txt").read_text(encoding="utf-8") if (folder / "output.txt").is_file() else ""
        )
        if not output.strip():
            skipped["empty output (scored 0 without a judge)"] += 1
            continue
        case = scorer.case(task, output, inputs)
        target = out / folder.resolve().relative_to(rollouts.resolve()) / JUDGE_FILE
        try:
            drawn = scorer.verdicts(case, draw, target)
        except JudgeError as exc:  # some verdicts never came: the others still count (not kept)
            unusable += draw - len(exc.verdicts)
            tokens += exc.usage.tokens if exc.usage else 0
            cost += exc.usage.cost_usd if exc.usage else 0.0
            if len(exc.verdicts) < 2:
                skipped["fewer than two usable verdicts"] += 1
                continue
            verdicts.append(exc.verdicts)
            continue
        tokens += drawn.usage.tokens
        cost += drawn.usage.cost_usd
        verdicts.append(drawn.samples)
    noise = suite_judge_noise(suite, verdicts, metric=metric, replicate_scores=replicates)
    report = AgreementReport(
        suite=str(suite.source),
        rollouts=str(rollouts),
        judge=settings.identity(),
        samples=draw,
        rejudged=len(verdicts),
        unusable=unusable,
        skipped=dict(sorted(skipped.items())),
        tokens=tokens,
        cost_usd=round(cost, 6),
        noise=noise,
    )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "agreement.json", report)
    return report
