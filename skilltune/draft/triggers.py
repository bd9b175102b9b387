"""``draft_triggers``: a trigger suite drafted for a skill and the user's other skills, for a person to review.

The steps, in order: the inputs are checked (the output folder must not exist, the skill must have
a description, the catalogue must hold skills), before any model is asked or anything written;
each bucket of the plan (skilltune/draft/asks.py) is asked until it holds a quarter more distinct
queries than its share, or its asks stop giving new ones (dedupe.py); the kept queries are chosen
(select.py); the label check asks which skill fits each one; then the suite is written into a
hidden folder beside ``out`` and renamed to ``out`` at the end, so a failed draft leaves nothing.

``out`` holds: scoring.md, train/val/test.jsonl (``id``, ``prompt``, ``should_trigger``; the split
of each query is its text's, suite/draft_review.py), catalogue/ (a copy of the catalogue, which a
trigger suite needs to run as the user's agent would), skill-creator/trigger_evals.json (the same
queries in skill-creator's format, where the suite loader does not read them a second time),
draft_review.md (the review table), draft.json (what was asked, kept, dropped and flagged) and
draft_log.jsonl (every call: the ask, prompt, answer, tokens and seconds).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, Field

from skilltune.draft.asks import MAX_ITEMS, Bucket, Card, CheckAsk, QueryAsk, plan
from skilltune.draft.base import DraftCall, Drafter
from skilltune.draft.dedupe import Deduper, Duplicate
from skilltune.draft.drafters import make_drafter
from skilltune.draft.review import review_text, write_splits
from skilltune.draft.select import SURPLUS, Pick, balance, choose
from skilltune.draft.settings import DraftSettings
from skilltune.errors import UsageError
from skilltune.skill import Candidate, lint_candidate, load_skill
from skilltune.stats.seeds import derived_seed
from skilltune.store import redact, write_json, write_text
from skilltune.suite import Problem, validate_suite
from skilltune.suite.catalogue import CATALOGUE_DIR, read_skill_folders
from skilltune.suite.draft_review import DISAGREES, UNREVIEWED, ReviewRow
from skilltune.suite.model import SPLITS

LOG_FILE = "draft_log.jsonl"
MANIFEST_FILE = "draft.json"
_EXTRA_CALLS = 2  # asks of a bucket beyond those its share needs, for the duplicates
_CHECKS_SHOWN = 20  # a progress line every so many label checks (a small local model takes seconds each)


class BucketCount(BaseModel):
    kind: str
    style: str
    target: int
    distinct: int
    kept: int
    calls: int


class DraftManifest(BaseModel):
    """draft.json: what a draft asked for, kept and left out, and what it cost."""

    schema_version: int = 1
    skill: str
    skill_hash: str
    catalogue: list[str]
    settings: dict[str, Any]
    asked: int
    written: int
    buckets: list[BucketCount]
    splits: dict[str, dict[str, int]]
    duplicates: list[dict[str, str]] = Field(default_factory=list)
    surplus: list[dict[str, str]] = Field(default_factory=list)
    checker: str | None = None
    flagged: list[str] = Field(default_factory=list)
    unanswered: list[str] = Field(default_factory=list)
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


class DraftResult(BaseModel):
    """What ``draft_triggers`` wrote: the folder, its manifest and what validate says of it."""

    out: Path
    manifest: DraftManifest
    problems: list[Problem] = Field(default_factory=list)


def _target(path: Path) -> Candidate:
    skill = load_skill(path, check_front_matter=False)
    main = path / skill.main if skill.kind == "folder" else path
    if skill.kind == "file":
        raise UsageError(
            f"{path}: a single instruction file has no description to draft trigger queries from: "
            "give a skill folder (SKILL.md with name and description in its front matter)"
        )
    if not skill.description.strip():
        raise UsageError(
            f"{main}:1: no description in the front matter: the queries are drafted from it; add "
            "`description: <what the skill does>. Use when <the requests it is for>.` and draft again"
        )
    errors = [i for i in lint_candidate(skill) if i.kind == "front-matter"]
    if errors:
        raise UsageError("\n".join(f"{path / str(i)}" for i in errors))
    return skill


def _siblings(folder: Path, skill_path: Path, skill: Candidate) -> tuple[Candidate, ...]:
    fix = "give --catalogue a folder of the user's other skills, each a <name>/SKILL.md with name and description"
    if not folder.is_dir():
        said = "not a folder" if folder.exists() else "no such folder"
        raise UsageError(f"{folder}: {said}: {fix} (e.g. examples/trigger-demo/suite/catalogue)")
    skills, problems = read_skill_folders(folder, leave_out=skill_path)
    if problems:
        shown = "\n".join(f"  {p}" for p in problems)
        raise UsageError(f"the catalogue at {folder} cannot be used:\n{shown}\nfix or remove those entries")
    if not skills:
        raise UsageError(
            f"{folder}: no skills in it: near misses are written for the user's other skills; {fix}"
        )
    same = [s for s in skills if s.name == skill.name]
    if same:
        raise UsageError(
            f"{folder}: holds another skill named {skill.name!r}, the name of the skill drafted for: rename one"
        )
    return skills


def _log(handle: TextIO, calls: list[DraftCall], totals: dict[str, float]) -> None:
    for call in calls:
        handle.write(json.dumps(call.as_json(), ensure_ascii=False) + "\n")
        totals["calls"] += 1
        totals["tokens_in"] += call.tokens_in or 0
        totals["tokens_out"] += call.tokens_out or 0
        totals["cost_usd"] += call.cost_usd or 0.0
        totals["seconds"] += call.seconds
    handle.flush()


def _collect(
    buckets: list[Bucket], skill: Card, catalogue: tuple[Card, ...], drafter: Drafter, seed: int,
    handle: TextIO, totals: dict[str, float], report: Callable[[str], None],
) -> tuple[list[list[str]], list[int], Deduper]:  # fmt: skip
    """Each bucket's distinct queries in the order they came, and its number of calls."""
    dedupe = Deduper()
    pools: list[list[str]] = []
    calls: list[int] = []
    for bucket in buckets:
        need = math.ceil(bucket.target * SURPLUS)
        pool: list[str] = []
        n_calls = 0
        while len(pool) < need and n_calls < math.ceil(need / MAX_ITEMS) + _EXTRA_CALLS:
            n_calls += 1
            ask = QueryAsk(
                bucket, min(need - len(pool), MAX_ITEMS), n_calls, skill, catalogue, tuple(pool),
                derived_seed(seed, bucket.key, n_calls),
            )  # fmt: skip
            drafted = drafter.write(ask)
            _log(handle, drafted.calls, totals)
            new = [q for q in drafted.value if dedupe.add(q)]
            pool += new
            if not new:  # it repeats itself, or its answers cannot be read: the bucket is as full as it gets
                break
        report(
            f"{bucket.key}: {len(pool)} distinct quer{'y' if len(pool) == 1 else 'ies'} from {n_calls} call(s)"
        )
        pools.append(pool)
        calls.append(n_calls)
    return pools, calls, dedupe


def _pick(buckets: list[Bucket], pools: list[list[str]], quota: int) -> tuple[list[Pick], list[Pick]]:
    classes = []
    for should in (True, False):
        members = [i for i, b in enumerate(buckets) if b.should_trigger is should]
        picks = choose([pools[i] for i in members], [buckets[i].target for i in members], quota)
        classes.append([Pick(members[p.bucket], p.query, p.split) for p in picks])
    return balance(classes[0], classes[1])


def draft_triggers(
    skill: Path | str,
    catalogue: Path | str,
    out: Path | str,
    settings: DraftSettings | None = None,
    *,
    report: Callable[[str], None] | None = None,
    **given: Any,
) -> DraftResult:
    """Draft a trigger suite for ``skill`` beside the skills of ``catalogue`` into ``out`` (see the
    module's docstring). UsageError (nothing written) for an ``out`` that exists, a skill without a
    description, a catalogue that is missing or holds no skill, a drafter that cannot be made;
    DrafterUnavailable when the drafter's model fails for good (nothing written)."""
    settings = DraftSettings.of(settings, **given)
    say = report or (lambda _: None)
    skill_path, folder, out = Path(skill), Path(catalogue), Path(out)
    if out.exists():
        raise UsageError(f"{out} exists: a draft never overwrites; give another --out, or move {out} away")
    target = _target(skill_path)
    siblings = _siblings(folder, skill_path, target)
    if settings.checker is None and settings.checker_options:
        raise UsageError(
            "--checker-opt without --checker: name the checker (--checker api...), or leave them out"
        )
    drafter = make_drafter(settings.drafter, settings.drafter_options, seed=settings.seed)
    checker = drafter
    if settings.checker is not None and settings.check:
        checker = make_drafter(
            settings.checker, settings.checker_options, seed=settings.seed, flag="--checker"
        )
    card, cards = Card.of(target), tuple(Card.of(s) for s in siblings)
    buckets = plan(settings.count, [c.name for c in cards])
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.drafting-{os.getpid()}")  # hidden, beside out: renamed at the end
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        totals: dict[str, float] = dict.fromkeys(
            ("calls", "tokens_in", "tokens_out", "cost_usd", "seconds"), 0
        )
        with (staging / LOG_FILE).open("w", encoding="utf-8") as handle:
            pools, calls, dedupe = _collect(buckets, card, cards, drafter, settings.seed, handle, totals, say)
            positive, negative = _pick(buckets, pools, settings.count // 2)
            picks = sorted(positive, key=lambda p: p.bucket) + sorted(negative, key=lambda p: p.bucket)
            width = max(3, len(str(len(picks))))
            checks: list[tuple[str | None, bool]] = []
            if settings.check:
                say(f"label check: {len(picks)} queries, asked of {checker.name}")
            for number, pick in enumerate(picks if settings.check else [], start=1):
                asked = checker.classify(
                    CheckAsk(pick.query, card, cards, derived_seed(settings.seed, "check", number))
                )
                _log(handle, asked.calls, totals)
                checks.append((asked.value, asked.ok))
                if number % _CHECKS_SHOWN == 0 and number < len(picks):
                    say(f"label check: {number} of {len(picks)} queries")
        rows = [
            ReviewRow(
                line=0, mark=UNREVIEWED, id=f"draft-{n:0{width}d}", should_trigger=buckets[p.bucket].should_trigger,
                split=p.split, query=p.query, why=buckets[p.bucket].why,
                check=_check_cell(checks[n - 1], buckets[p.bucket].should_trigger, target.name) if checks else "-",
            )
            for n, p in enumerate(picks, start=1)
        ]  # fmt: skip
        _write_suite(staging, target, siblings, rows, out)
        manifest = _manifest(
            settings, target, cards, buckets, pools, calls, picks, rows, dedupe.dropped, totals
        )
        manifest.checker = checker.name if settings.check else None
        write_json(staging / MANIFEST_FILE, manifest)
        if out.exists():
            raise UsageError(f"{out} appeared while drafting: a draft never overwrites; nothing was written")
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return DraftResult(out=out, manifest=manifest, problems=validate_suite(out))


def _check_cell(check: tuple[str | None, bool], should_trigger: bool, target: str) -> str:
    choice, ok = check
    if not ok:
        return "no answer"
    fits = f"fits {choice or 'none'}"
    return fits if (choice == target) == should_trigger else f"{DISAGREES}: {fits}"


def _scoring(skill: Candidate, rows: list[ReviewRow], catalogue: list[str]) -> str:
    config = json.dumps({"name": f"{skill.name}-triggers", "default_mode": "trigger"}, indent=2)
    return (
        f"# Scoring: trigger queries drafted for `{skill.name}`\n\n```json\n{config}\n```\n\n"
        f'Drafted by `skilltune draft triggers` (docs/trigger.md, "Drafting trigger queries"): {len(rows)}\n'
        "user requests, each with `should_trigger`: whether an agent with the skill installed beside the\n"
        f"skills of catalogue/ ({', '.join(catalogue)}) should load it. Scored in trigger mode: hard = soft = 1\n"
        "when the agent's load decision was the right one.\n\n"
        "The split of each query is the sha256 of its text, modulo three (train, val, test), so adding or\n"
        "removing queries never moves another. The queries are drafts: draft_review.md says what each was\n"
        "written as and what the label check found; review it, then `skilltune draft apply` this folder.\n"
    )


def _write_suite(
    root: Path, skill: Candidate, siblings: tuple[Candidate, ...], rows: list[ReviewRow], out: Path
) -> None:
    for sibling in siblings:
        sibling.write(root / CATALOGUE_DIR / sibling.name)
    write_text(root / "scoring.md", _scoring(skill, rows, [s.name for s in siblings]))
    by_split: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_split.setdefault(row.task_split, []).append(row.task())
    write_splits(root, by_split)
    write_text(root / "draft_review.md", review_text(skill.name, out, rows))


def _manifest(
    settings: DraftSettings, skill: Candidate, cards: tuple[Card, ...], buckets: list[Bucket],
    pools: list[list[str]], calls: list[int], picks: list[Pick], rows: list[ReviewRow],
    dropped: list[Duplicate], totals: dict[str, float],
) -> DraftManifest:  # fmt: skip
    kept = Counter(p.bucket for p in picks)
    chosen = {p.query for p in picks}
    splits: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = splits.setdefault(row.task_split, {"true": 0, "false": 0})
        counts[str(row.should_trigger).lower()] += 1
    return DraftManifest(
        skill=skill.name, skill_hash=skill.hash, catalogue=[c.name for c in cards],
        settings=redact(settings.model_dump(mode="json")), asked=settings.count, written=len(rows),
        buckets=[
            BucketCount(kind=b.kind, style=b.style, target=b.target, distinct=len(pools[i]), kept=kept[i], calls=calls[i])
            for i, b in enumerate(buckets)
        ],
        splits={s: splits[s] for s in SPLITS if s in splits},
        duplicates=[{"query": d.query, "kept": d.kept, "rule": d.rule} for d in dropped],
        surplus=[{"query": q, "why": buckets[i].why} for i, pool in enumerate(pools) for q in pool if q not in chosen],
        flagged=[r.id for r in rows if r.flagged], unanswered=[r.id for r in rows if r.check == "no answer"],
        calls=int(totals["calls"]), tokens_in=int(totals["tokens_in"]), tokens_out=int(totals["tokens_out"]),
        cost_usd=round(totals["cost_usd"], 6), seconds=round(totals["seconds"], 3),
    )  # fmt: skip
