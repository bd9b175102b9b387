"""One rollout: workspace -> agent -> score -> RolloutRecord on disk.

Layout, everywhere: ``<out>/rollouts/<phase>/<arm>/<safe-id>_r<k>/`` (``RolloutJob.arm``) with
``record.json`` (written last: its presence marks the rollout finished), ``conversation.json``,
``events.jsonl``, ``diff.patch``, ``output.txt`` and, only when the rollout was scored,
``score.json`` (a judged rollout adds ``judge.json`` and ``judge_inputs.json``).

Once the agent exited and the diff is saved, the workspace gets skill-trainer's ``output.txt``
and ``task.json`` for the scorer (task.json is removed once scored). A scorer whose service is
down (``ScorerUnavailable``) leaves the rollout ``unscored`` and stops the batch; running the
job again scores it from its record folder instead of running the agent again.
"""

from __future__ import annotations

import functools
import random
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skilltune.agents.base import AgentBackend, AgentOptions, AgentRequest, AgentResult
from skilltune.errors import ScorerUnavailable, ScoringError, SkilltuneError
from skilltune.process import interruptible_sleep
from skilltune.rollout.cache import RolloutCache, rollout_key
from skilltune.rollout.conversation import conversation
from skilltune.rollout.scoring import rescore_record, score_in_workspace
from skilltune.rollout.workspace import Workspace, place_skill
from skilltune.runfiles import UNDECIDED, FailedAttempt, Phase, RolloutFiles, RolloutRecord, RolloutStatus
from skilltune.sandbox import SEAL_OPTIONS, UNSEALED, RolloutSandbox, Seal, rollout_sandbox
from skilltune.score.base import Score
from skilltune.skill import Candidate
from skilltune.store import canonical_json, sha256_text, write_json, write_jsonl, write_text
from skilltune.suite import Suite, Task, safe_id

NO_SKILL = "noskill"
SCORED_STATUSES = ("ok", "task_failed", "timeout")


@dataclass(frozen=True)
class RolloutJob:
    """What to run: a task, under a candidate (None = no skill), as replicate k, by ``agent`` (its
    target agent's label); ``labelled``: its files name the agent, as several agents' in one folder do."""

    task: Task
    phase: Phase
    candidate: Candidate | None
    replicate: int
    seed: int
    agent: str | None = None
    labelled: bool = False

    @property
    def cand12(self) -> str:
        return self.candidate.short if self.candidate else NO_SKILL

    @property
    def target(self) -> str | None:  # the agent's label as its files write it (record.json's target)
        return self.agent if self.labelled else None

    @property
    def arm(self) -> str:
        """Its folder in ``rollouts/<phase>/``: ``<cand12>``, or ``<cand12>@<label>`` (labelled)."""
        return self.cand12 if self.target is None else f"{self.cand12}@{self.target}"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter for infra errors (never for task failures)."""

    max_attempts: int = 4
    base_s: float = 2.0
    cap_s: float = 60.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return float(min(self.cap_s, self.base_s * 2**attempt) * (0.5 + rng.random() / 2))


def jobs_for(
    tasks: list[Task], candidate: Candidate | None, phase: Phase, reps: int, seed: int, base: int = 0
) -> list[RolloutJob]:
    """One job per (task, replicate) in canonical order; replicate indices start at ``base``."""
    return [RolloutJob(task, phase, candidate, base + k, seed) for task in tasks for k in range(reps)]


def rollout_dir(out: Path, job: RolloutJob) -> Path:
    return out / "rollouts" / job.phase / job.arm / f"{safe_id(job.task.id)}_r{job.replicate}"


def load_record(folder: Path) -> RolloutRecord | None:
    path = folder / "record.json"
    return RolloutRecord.read(path) if path.is_file() else None


@dataclass
class RolloutRunner:
    """Runs rollout jobs of one suite with one agent backend into ``out``."""

    suite: Suite
    backend: AgentBackend
    options: AgentOptions
    out: Path
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Called with the finished baseline, before the agent starts (smoke's leak audit).
    on_baseline: Callable[[RolloutJob, Path], None] | None = None
    cache: RolloutCache | None = None
    fresh: bool = False  # run even when the cache holds this rollout (results are still stored)
    # The driver's options hash, on a Ray worker: records must match the run directory's runner
    # whatever the worker's own environment or CLI version.
    driver_options_hash: str | None = None
    seal: Seal = UNSEALED  # the command's sandbox (skilltune/sandbox.py); a backend may have nothing to seal

    @functools.cached_property
    def sandbox(self) -> RolloutSandbox:
        """How this runner's rollouts run: ``bwrap`` (sealed), ``inert`` (nothing to seal) or ``none``."""
        return rollout_sandbox(self.seal, self.backend.seal_support)

    @functools.cached_property
    def options_hash(self) -> str:
        """The agent, its options and its cache identity (environment model/endpoint, version)."""
        if self.driver_options_hash is not None:
            return self.driver_options_hash
        identity = self.backend.cache_identity(self.options)
        # keys of rollouts unsealed and without extra binds are as before sealing existed (resume, caches)
        options = {
            k: v for k, v in self.options.model_dump(mode="json").items() if k not in SEAL_OPTIONS or v
        }
        sealed = {"sandbox": "bwrap"} if self.sandbox == "bwrap" else {}
        return sha256_text(
            canonical_json({"agent": self.backend.name, **options, "identity": identity} | sealed)
        )

    def reusable(self, job: RolloutJob) -> RolloutRecord | None:
        """The finished record of ``job`` on disk, when it was made by this very job (same options,
        seed and task content); never an infra error, a crash or an unscored one (run or scored again)."""
        record = self._own_record(job)
        return None if record is None or record.status in UNDECIDED else record

    def unscored(self, job: RolloutJob) -> RolloutRecord | None:
        """This job's ``unscored`` record on disk (its scorer's service was down), if any."""
        record = self._own_record(job)
        return record if record is not None and record.status == "unscored" else None

    def _own_record(self, job: RolloutJob) -> RolloutRecord | None:
        record = load_record(rollout_dir(self.out, job))
        if (
            record is None
            or record.options_hash != self.options_hash
            or record.seed != job.seed
            or record.task_hash != self.suite.task_hash(job.task)
        ):
            return None
        return record

    def cache_key(self, job: RolloutJob) -> str:
        candidate = job.candidate.hash if job.candidate else NO_SKILL
        task_hash = self.suite.task_hash(job.task)
        return rollout_key(
            candidate, task_hash, job.replicate, job.seed, self.options_hash, self.suite.contract_hash
        )

    def run(self, job: RolloutJob) -> RolloutRecord:
        folder = rollout_dir(self.out, job)
        kept = self.unscored(job)
        if kept is not None:
            return rescore_record(self.suite, job.task, folder, kept)  # the agent's work is on disk
        key = self.cache_key(job) if self.cache is not None else ""
        if self.cache is not None and not self.fresh:
            folder.parent.mkdir(parents=True, exist_ok=True)
            if self.cache.fetch(key, folder, job.phase, job.target):
                record = load_record(folder)
                if record is not None:
                    return record
        record = self._run(job, folder)
        if self.cache is not None:
            self.cache.store(key, folder, record.status)
        return record

    def _identity(self, job: RolloutJob) -> dict[str, Any]:
        """The fields that name a rollout in its record: the task, the draw and what ran it."""
        return {
            "task_id": job.task.id,
            "split": job.task.split,
            "phase": job.phase,
            "replicate": job.replicate,
            "seed": job.seed,
            "candidate": job.candidate.hash if job.candidate else NO_SKILL,
            "agent": self.backend.name,
            "target": job.target,
            "options_hash": self.options_hash,
            "task_hash": self.suite.task_hash(job.task),
            "sandbox": self.sandbox,
        }

    def lost(self, job: RolloutJob, reason: str, attempts: int) -> RolloutRecord:
        """Record a rollout the executor lost (its worker or node died each time): ``crashed``, never
        scored, never cached; a contaminated batch for the gate, and a resume runs it again."""
        folder = rollout_dir(self.out, job)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        record = RolloutRecord(
            **self._identity(job),
            model=self.options.model,
            status="crashed",
            reason=reason,
            wall_s=0.0,
            attempts=attempts,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        record.write(folder / "record.json")
        return record

    def _run(self, job: RolloutJob, folder: Path) -> RolloutRecord:
        if folder.exists():
            shutil.rmtree(folder)  # a partial rollout from a killed process: start it over
        folder.mkdir(parents=True)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        t0 = time.monotonic()
        jitter = random.Random(f"{job.task.id}|{job.replicate}|{job.seed}|{job.cand12}|retry")
        result: AgentResult | None = None
        workspace: Workspace | None = None
        prompt = self.suite.prompt(job.task)
        crash: str | None = None
        attempts = 0
        infra_errors = 0
        harness_failures = 0
        stalls = 0
        history: list[FailedAttempt] = []
        try:  # bad input, or the harness interrupted: no record, and no workspace left behind
            while True:
                attempts += 1
                a0 = time.monotonic()
                if workspace is not None:
                    workspace.cleanup()
                workspace = Workspace.create(safe_id(job.task.id), forbidden=[self.suite.root, self.out])
                try:
                    result, prompt = self._attempt(job, workspace, attempts - 1)
                    crash = None
                except SkilltuneError:
                    raise
                except Exception:
                    harness_failures += 1
                    crash = traceback.format_exc(limit=6)
                    result = None
                    if harness_failures >= 2:
                        break
                    history.append(_set_aside(folder, attempts, "crashed", crash, a0))
                    continue  # a failure of our own gets one more try, whatever the infra budget
                if result.stalled:
                    stalls += 1
                    if stalls < 2:
                        history.append(_set_aside(folder, attempts, result.status, result.reason, a0, result))
                        continue  # a stuck agent (killed with its group) is requeued once
                    crash = f"the agent stalled twice (no liveness): {result.reason}"
                    break
                if result.status != "infra_error" or result.final:
                    break
                infra_errors += 1
                if infra_errors >= self.retry.max_attempts:
                    break
                history.append(_set_aside(folder, attempts, result.status, result.reason, a0, result))
                interruptible_sleep(self.retry.delay(infra_errors - 1, jitter))
        except BaseException:
            if workspace is not None:
                workspace.cleanup()
            raise
        assert workspace is not None
        try:
            return self._finish(job, folder, workspace, result, prompt, crash, attempts, history, started, t0)
        finally:
            workspace.cleanup()

    def _attempt(self, job: RolloutJob, workspace: Workspace, attempt: int) -> tuple[AgentResult, str]:
        self.suite.prepare(job.task, workspace.path)
        prompt = self.suite.prompt(job.task)
        catalogue = self.suite.catalogue  # the suite's other skills, installed beside the candidate
        placed = place_skill(
            job.candidate, workspace.path, self.backend, self.options.placement, prompt, catalogue
        )
        workspace.commit_baseline(exclude=self.backend.workspace_noise)
        if self.on_baseline is not None:
            self.on_baseline(job, workspace.path)
        request = AgentRequest(
            # the task as the agent gets it: its prompt is the variant's
            task=job.task if prompt == job.task.prompt else job.task.model_copy(update={"prompt": prompt}),
            prompt=placed.prompt,
            system_prompt=placed.system_prompt,
            workspace=workspace.path,
            log_dir=rollout_dir(self.out, job),
            candidate_hash=job.candidate.hash if job.candidate else NO_SKILL,
            skill_name=job.candidate.name if job.candidate else None,
            seed=job.seed,
            replicate=job.replicate,
            attempt=attempt,
            sealed=self.sandbox == "bwrap",
            catalogue=catalogue,
            candidate=job.candidate,
            options=self.options,
        )
        return self.backend.run(request), placed.prompt

    def _finish(
        self, job: RolloutJob, folder: Path, workspace: Workspace, result: AgentResult | None, prompt: str,
        crash: str | None, attempts: int, history: list[FailedAttempt], started: str, t0: float,
    ) -> RolloutRecord:  # fmt: skip
        status: RolloutStatus
        reason: str | None
        pending, unavailable, usage = None, None, None
        if result is None:
            status, reason = "crashed", f"the harness lost this rollout twice:\n{crash}"
            result = AgentResult(status="infra_error", reason=reason)
        elif result.stalled:
            status, reason = "crashed", crash or "the agent stalled"
        else:
            status, reason = result.status, result.reason
        diff = workspace.diff() if crash is None else ""
        output_file = folder / "output.txt"
        write_text(output_file, result.final_text)
        result.output_file = output_file
        if not (workspace.path / "output.txt").exists():
            # skill-trainer rubrics read <workdir>/output.txt; written after the diff, so not part of it.
            (workspace.path / "output.txt").write_text(result.final_text, encoding="utf-8")
        score: Score | None = None
        if status in SCORED_STATUSES:
            try:
                scored = score_in_workspace(self.suite, job.task, workspace.path, result, folder)
                score, usage = scored.score, scored.usage
            except ScorerUnavailable as exc:
                pending, unavailable = status, exc
                status, reason = "unscored", str(exc)
            except ScoringError as exc:
                status, reason, usage = "scoring_error", str(exc), getattr(exc, "usage", None)
            except Exception as exc:
                status, reason = "scoring_error", f"the scorer raised {type(exc).__name__}: {exc}"
        write_jsonl(folder / "events.jsonl", result.events)
        write_text(folder / "diff.patch", diff)
        write_json(folder / "conversation.json", conversation(prompt, result, status, reason, score, diff))
        if score is not None:
            write_json(folder / "score.json", score.file_json())
        record = RolloutRecord(
            **self._identity(job),
            model=result.model or self.options.model,
            status=status,
            reason=reason,
            score=score,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            cost_usd=result.cost_usd,
            cost_estimated=result.cost_estimated,
            turns=result.turns,
            wall_s=round(time.monotonic() - t0, 3),
            attempts=attempts,
            attempt_history=history,
            started_at=started,
            files=RolloutFiles(score="score.json" if score is not None else None),
            pending_status=pending,
            judge=usage,
            skill_loaded=result.skill_loaded,
        )
        record.write(folder / "record.json")
        if unavailable is not None:
            raise unavailable  # no more paid rollouts while nothing can score them
        return record


ATTEMPTS_DIR = "attempts"


def _set_aside(
    folder: Path,
    attempt: int,
    status: RolloutStatus,
    reason: str | None,
    t0: float,
    result: AgentResult | None = None,
) -> FailedAttempt:
    """Keep a failed attempt that will be run again: its raw logs (what the backend wrote into the
    record folder) and its events move to ``attempts/<k>/``, and the record will say how it ended."""
    keep = folder / ATTEMPTS_DIR / str(attempt)
    keep.mkdir(parents=True, exist_ok=True)
    for path in list(folder.iterdir()):
        if path.name != ATTEMPTS_DIR:
            path.rename(keep / path.name)
    events = None
    if result is not None:
        write_jsonl(keep / "events.jsonl", result.events)
        events = f"{ATTEMPTS_DIR}/{attempt}/events.jsonl"
    return FailedAttempt(
        attempt=attempt,
        status=status,
        stalled=bool(result is not None and result.stalled),
        reason=reason,
        wall_s=round(time.monotonic() - t0, 3),
        events=events,
    )
