"""``skilltune smoke``: preflight and one rollout per split, checking the plumbing end to end."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skilltune.errors import SkilltuneError
from skilltune.measure import read_suite
from skilltune.rollout.runner import rollout_dir
from skilltune.rollout.workspace import audit_workspace
from skilltune.runfiles import RolloutRecord
from skilltune.sandbox import rollout_sandbox
from skilltune.session import RolloutSession, Target
from skilltune.settings import RolloutSettings
from skilltune.skill import Candidate, lint_candidate, load_skill
from skilltune.store import read_json
from skilltune.suite import SPLITS

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
    settings: RolloutSettings | None = None,
    *,
    out: Path | str | None = None,
    **given: Any,
) -> SmokeReport:
    """Preflight checks and one rollout per split. The rollouts' record folders go to ``out``;
    without it, to a temporary folder that is removed when every check passed and kept (and
    named in the report) when one failed, so a failure can be inspected. ``settings`` and ``given``
    as ``evaluate`` takes them, for a RolloutSettings (its rollouts run in this thread, never from
    the cache: ``workers``, ``executor`` and ``cache`` do not apply).

    The leak audit: before the rollouts, a canary file (a random token) is planted beside the
    suite (in its parent folder), and a rollout whose output, diff, events or conversation holds
    the token fails (the agent read outside its workspace); the canary is removed afterwards."""
    chosen = RolloutSettings.of(settings, **given).model_copy(update={"cache": None})
    agent = chosen.agent
    checks: list[SmokeCheck] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append(SmokeCheck(name=name, ok=ok, detail=detail))

    try:
        suite = read_suite(suite_path, chosen)
        check("suite", True, f"{suite.kind} suite, contract {suite.contract_hash[:12]}")
    except SkilltuneError as exc:
        check("suite", False, str(exc))
        return SmokeReport(checks=checks)
    try:  # a scorer that cannot work (a judge with no key) would fail every rollout
        suite.preflight(suite.all_tasks())
        if any(suite.scoring_mode(t) == "judge" for t in suite.all_tasks()):
            judge = suite.judge
            check("judge", True, f"{judge.provider} {judge.effective_model or '(CLI default)'}")
    except SkilltuneError as exc:
        check("judge", False, str(exc))
        return SmokeReport(checks=checks)
    try:
        candidate = load_skill(skill_path)
        lint = lint_candidate(candidate)
        errors = [str(i) for i in lint]
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
        target = Target.of(agent, chosen.agent_options)
    except SkilltuneError as exc:
        check(f"agent {agent}", False, str(exc))
        return SmokeReport(checks=checks)
    status = target.backend.check()
    check(f"agent {agent}", status.installed, status.version or status.fix or "")
    if not status.installed:
        return SmokeReport(checks=checks)
    try:
        session = RolloutSession.open(suite, chosen, tasks=suite.all_tasks(), candidates=[candidate])
    except SkilltuneError as exc:
        check(f"agent {agent} can run this suite and skill", False, str(exc))
        return SmokeReport(checks=checks)
    kind = rollout_sandbox(session.seal, target.backend.seal_support)
    says = {
        "inert": "nothing to seal: this agent starts no process and reads only its workspace",
        "bwrap": session.seal.describe(),
        "none": f"rollouts are NOT sealed: {session.seal.reason or f'the {agent} backend cannot run sealed'}",
    }
    check("sandbox", True, says[kind])
    records = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="skilltune-smoke-"))

    ran: list[RolloutRecord] = []
    with planted_canary(suite.root) as canary:
        for split in SPLITS:
            if suite.has_split(split):
                checks += _smoke_rollout(session, candidate, split, records, ran, canary)
    if out is None and all(c.ok for c in checks):
        shutil.rmtree(records, ignore_errors=True)
    else:
        check("records", True, f"the smoke rollouts are in {records}")
    infra = ran[-1].reason if ran and all(r.status == "infra_error" for r in ran) else None
    return SmokeReport(checks=checks, infra_error=infra)


_LEAK_FILES = ("output.txt", "diff.patch", "events.jsonl", "conversation.json")


@contextlib.contextmanager
def planted_canary(suite_root: Path) -> Iterator[str | None]:
    """Plant a file holding a random token beside the suite (its parent folder) for the time of
    the block; yields the token (None: the folder is not writable, nothing planted)."""
    token = f"SKILLTUNE-CANARY-{secrets.token_hex(8)}"
    path = suite_root.resolve().parent / f".{suite_root.name}.skilltune-canary-{token[-16:]}.txt"
    try:
        path.write_text(f"answers of {suite_root.name}: {token}\n", encoding="utf-8")
    except OSError:
        yield None
        return
    try:
        yield token
    finally:
        path.unlink(missing_ok=True)


def canary_leaks(folder: Path, token: str) -> list[str]:
    """The files of a rollout's record folder that hold ``token`` (what the agent said, changed or
    did, and the raw logs beside them)."""
    names = [*_LEAK_FILES, *(p.name for p in folder.glob("agent-*"))]
    return sorted(
        {n for n in names if (folder / n).is_file() and token.encode() in (folder / n).read_bytes()}
    )


def _smoke_rollout(
    session: RolloutSession,
    candidate: Candidate,
    split: str,
    out: Path,
    ran: list[RolloutRecord],
    canary: str | None,
) -> list[SmokeCheck]:
    suite = session.suite
    task = suite.tasks(split)[0]
    leaks: list[str] = []
    runner = session.runner(
        out, on_baseline=lambda job, ws: leaks.extend(audit_workspace(ws, suite, job.task))
    )
    (job,) = session.jobs([task], candidate, "eval", 1)
    record = runner.run(job)  # in this thread: smoke starts no executor
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
    if canary is not None:
        found = canary_leaks(folder, canary)
        detail = (
            f"the agent read the canary planted beside the suite: it is in {', '.join(found)}"
            if found
            else "no trace of the canary planted beside the suite"
        )
        results.append(
            SmokeCheck(name=f"{label}: nothing read outside the workspace", ok=not found, detail=detail)
        )
    return results
