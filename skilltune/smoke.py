"""``skilltune smoke``: preflight and one rollout per split, checking the plumbing end to end."""

from __future__ import annotations

import importlib.util
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skilltune.agents import get_backend, parse_agent_options
from skilltune.errors import SkilltuneError
from skilltune.rollout import RolloutJob, RolloutRunner, rollout_dir
from skilltune.runfiles import RolloutRecord
from skilltune.skill import Candidate, lint_candidate, load_skill
from skilltune.store import read_json
from skilltune.suite import SPLITS, Suite, load_suite
from skilltune.workspace import audit_workspace, check_target

# pip names whose import name differs
IMPORT_NAMES = {"pillow": "PIL", "pyyaml": "yaml", "beautifulsoup4": "bs4", "scikit-learn": "sklearn"}
_REQUIRED_FILES = ("conversation.json", "events.jsonl", "output.txt")


class SmokeCheck(BaseModel):
    name: str
    ok: bool
    detail: str = ""


class SmokeReport(BaseModel):
    checks: list[SmokeCheck]
    infra_error: str | None = None  # set when every smoke rollout ended infra_error: the last one's reason

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def requirement_names(path: Path) -> list[str]:
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        spec = line.split("#", 1)[0].strip()
        if not spec or spec.startswith("-"):
            continue
        name = re.split(r"[<>=!~\[ ;@]", spec, maxsplit=1)[0].strip().lower()
        if name:
            names.append(name)
    return names


def smoke(
    suite_path: Path | str,
    skill_path: Path | str,
    *,
    agent: str = "mock",
    agent_options: dict[str, Any] | None = None,
    seed: int = 0,
    out: Path | str | None = None,
) -> SmokeReport:
    """Preflight checks and one rollout per split. The rollouts' record folders go to ``out``;
    without it, to a temporary folder that is removed when every check passed and kept (and
    named in the report) when one failed, so a failure can be inspected."""
    checks: list[SmokeCheck] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append(SmokeCheck(name=name, ok=ok, detail=detail))

    try:
        suite = load_suite(suite_path)
        check("suite", True, f"{suite.kind} suite, contract {suite.contract_hash[:12]}")
    except SkilltuneError as exc:
        check("suite", False, str(exc))
        return SmokeReport(checks=checks)
    try:
        candidate = load_skill(skill_path)
        lint = lint_candidate(candidate)
        errors = [str(i) for i in lint if i.severity == "error"]
        check("skill", not errors, "; ".join(errors) or f"{candidate.name} ({candidate.short})")
    except SkilltuneError as exc:
        check("skill", False, str(exc))
        return SmokeReport(checks=checks)

    requirements = suite.root / "requirements.txt"
    if requirements.is_file():
        for name in requirement_names(requirements):
            module = IMPORT_NAMES.get(name, name.replace("-", "_"))
            found = importlib.util.find_spec(module) is not None
            check(f"requirement {name}", found, "" if found else f"pip install -r {requirements}")
    for tool in suite.config.smoke_tools:
        found = shutil.which(tool) is not None
        check(f"tool {tool}", found, "" if found else "not on PATH (listed in scoring.md smoke_tools)")

    try:
        backend = get_backend(agent)
        options = parse_agent_options(backend, agent_options or {})
    except SkilltuneError as exc:
        check(f"agent {agent}", False, str(exc))
        return SmokeReport(checks=checks)
    status = backend.check()
    check(f"agent {agent}", status.installed, status.version or status.fix or "")
    if not status.installed:
        return SmokeReport(checks=checks)
    try:
        check_target(backend, options, suite.all_tasks(), [candidate], suite=suite)
    except SkilltuneError as exc:
        check(f"agent {agent} can run this suite and skill", False, str(exc))
        return SmokeReport(checks=checks)

    records = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="skilltune-smoke-"))
    ran: list[RolloutRecord] = []
    for split in SPLITS:
        if suite.has_split(split):
            checks += _smoke_rollout(suite, candidate, backend, options, split, seed, records, ran)
    if out is None and all(c.ok for c in checks):
        shutil.rmtree(records, ignore_errors=True)
    else:
        check("records", True, f"the smoke rollouts are in {records}")
    infra = ran[-1].reason if ran and all(r.status == "infra_error" for r in ran) else None
    return SmokeReport(checks=checks, infra_error=infra)


def _smoke_rollout(
    suite: Suite,
    candidate: Candidate,
    backend: Any,
    options: Any,
    split: str,
    seed: int,
    out: Path,
    ran: list[RolloutRecord],
) -> list[SmokeCheck]:
    task = suite.tasks(split)[0]
    leaks: list[str] = []
    runner = RolloutRunner(
        suite=suite,
        backend=backend,
        options=options,
        out=out,
        on_baseline=lambda job, ws: leaks.extend(audit_workspace(ws, suite, job.task)),
    )
    job = RolloutJob(task=task, phase="eval", candidate=candidate, replicate=0, seed=seed)
    record = runner.run(job)
    ran.append(record)
    folder = rollout_dir(out, job)
    label = f"{split} rollout {task.id}"
    results = [
        SmokeCheck(
            name=f"{label}: status",
            ok=record.status in ("ok", "task_failed", "timeout"),
            detail=record.status + (f" ({record.reason})" if record.reason else ""),
        )
    ]
    empty = [n for n in _REQUIRED_FILES if not (folder / n).is_file() or (folder / n).stat().st_size == 0]
    if not (folder / "diff.patch").is_file():
        empty.append("diff.patch")
    results.append(
        SmokeCheck(
            name=f"{label}: trajectory files",
            ok=not empty,
            detail=f"missing or empty: {', '.join(empty)}" if empty else "written",
        )
    )
    stamped = (folder / "score.json").is_file() and read_json(folder / "score.json").get(
        "contract"
    ) == suite.contract_hash
    results.append(
        SmokeCheck(
            name=f"{label}: score stamped",
            ok=stamped,
            detail=suite.contract_hash[:12] if stamped else "no score.json with this suite's contract",
        )
    )
    results.append(
        SmokeCheck(
            name=f"{label}: workspace free of reference data", ok=not leaks, detail="; ".join(leaks[:5])
        )
    )
    return results
