"""``skilltune judge check``: is a judged suite ready to score? (key, client, judge.md, references)"""

from __future__ import annotations

from pydantic import BaseModel, Field

from skilltune.judge.models import client_status
from skilltune.suite import SPLITS, Suite
from skilltune.suite.judge import find_key


class SplitReferences(BaseModel):
    dataset: int = 0  # tasks judged against a reference
    rubric: int = 0  # tasks judged by judge.md alone


class JudgeReadiness(BaseModel):
    """What ``judge check`` found; ``ready`` when every judged rollout could be scored now."""

    ready: bool
    provider: str
    model: str | None
    base_url: str | None
    samples: int
    client: str  # what asks the judge, or why nothing can
    client_ok: bool
    key: str  # where the key comes from (never the key), or what to set
    key_ok: bool
    judge_md: bool
    judged_tasks: int
    by_split: dict[str, SplitReferences] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


def judge_check(suite: Suite) -> JudgeReadiness:
    """Readiness of ``suite``'s judge, with its settings as the suite was loaded (``--judge-opt``)."""
    settings = suite.judge
    judged = [t for t in suite.all_tasks() if suite.scoring_mode(t) == "judge"]
    by_split: dict[str, SplitReferences] = {}
    for task in judged:
        counts = by_split.setdefault(task.split, SplitReferences())
        if task.field("reference_text") or task.field("reference"):
            counts.dataset += 1
        else:
            counts.rubric += 1
    by_split = {s: by_split[s] for s in SPLITS if s in by_split}
    warnings = []
    if settings.is_cli:
        key, key_ok = f"none needed (the {settings.provider} CLI's own login)", True
    else:
        found, source, where = find_key(settings, suite.root)
        if found is not None:
            key, key_ok = (f"{where}" if source == "dotenv" else f"{where} (set)"), True
        elif settings.local:
            key, key_ok = "none needed (a server on this machine)", True
        else:
            key, key_ok = f"missing: set {where} or put it in a .env file", False
    client, client_ok = client_status(settings)
    judge_md = (suite.root / "judge.md").is_file()
    rubric_only = sum(c.rubric for c in by_split.values())
    if rubric_only:
        warnings.append(
            f"{rubric_only} task(s) have no reference: their verdicts are only as good as judge.md's "
            "description of a good output; a 'reference' (a good output) per task gives the judge a target"
        )
    if not judged:
        warnings.append("no task is scored in judge mode (default_mode or a task's scoring.mode)")
    if settings.samples < 3:
        warnings.append(
            f"samples {settings.samples}: `skilltune judge agreement` measures how much one verdict varies"
        )
    return JudgeReadiness(
        ready=bool(judged) and key_ok and client_ok and judge_md,
        provider=settings.provider,
        model=settings.effective_model,
        base_url=settings.effective_base_url,
        samples=settings.samples,
        client=client,
        client_ok=client_ok,
        key=key,
        key_ok=key_ok,
        judge_md=judge_md,
        judged_tasks=len(judged),
        by_split=by_split,
        warnings=warnings,
    )
