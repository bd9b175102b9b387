"""A rollout session: what every command that runs rollouts opens once, then runs jobs through.

``run``, ``compare``, ``calibrate``, ``smoke`` and ``train`` each need the same parts: the suite,
the target agent with its options parsed, the checks that refuse what the target cannot run
(placement, task and skill limits, the executor, the backend's and the scorers' preflight), an
output folder that holds no older results, a runner per output folder, the executor and the
cache. ``RolloutSession.open`` does all of it before anything is written, in that order; a
command then asks it for jobs and runs them.

``RolloutSettings`` (skilltune/settings.py) is the one model of the settings those commands share
(the agent, its options, the seed, workers, the executor, the cache, the sandbox), so a keyword is
spelt and checked once; each command's settings model builds on it.
A session holds its targets as a tuple: one today, several when a run tunes for several agents.
"""

from __future__ import annotations

import functools
import shutil
import warnings
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltune.agents import AgentBackend, AgentOptions, get_backend, parse_agent_options
from skilltune.errors import InfraFailure, SkilltuneWarning, UsageError
from skilltune.execute import Executor, make_executor
from skilltune.rollout.cache import RolloutCache
from skilltune.rollout.routes import JobRunner
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, jobs_for
from skilltune.rollout.workspace import check_placement, check_target, placed_prompts
from skilltune.runfiles import Phase, RolloutRecord
from skilltune.sandbox import UNSEALED, Seal, resolve
from skilltune.settings import RolloutSettings
from skilltune.skill import Candidate
from skilltune.suite import Suite, Task

OnRecord = Callable[[RolloutRecord, int, int], None]  # (record, finished so far, jobs in all)


@dataclass(frozen=True)
class Target:
    """One target agent: its backend and its parsed options."""

    backend: AgentBackend
    options: AgentOptions

    @classmethod
    def of(cls, agent: str, options: dict[str, Any] | None = None) -> Target:
        backend = get_backend(agent)
        return cls(backend, parse_agent_options(backend, options or {}))

    @property
    def name(self) -> str:
        return self.backend.name

    def refusal(self, suite: Suite, candidate: Candidate) -> str | None:
        """Why this agent cannot take ``candidate`` at all (a limit its backend declares), checked on
        the suite's longest task prompt."""
        problem = self.backend.skill_problem(candidate)
        if problem is not None:
            return problem
        longest = max((t.prompt for t in suite.all_tasks()), key=len, default="")
        placed = placed_prompts(candidate, self.options.placement, longest)
        return self.backend.placement_problem(placed.prompt, placed.system_prompt, self.options)


def check_reps(reps: int) -> None:
    if reps < 1:
        raise UsageError("--reps must be at least 1")


def prepare_out(out: Path, force: bool, suite: Suite, outputs: Sequence[str]) -> None:
    """Refuse to mix a new result into an old one unless ``force``, or to write into the suite."""
    if out.resolve().is_relative_to(suite.root.resolve()):
        raise UsageError(f"--out {out} lies inside the suite {suite.root}: results would change the suite")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise UsageError(
                f"--out {out} already holds results; choose a new folder or pass --force to replace them"
            )
        shutil.rmtree(out / "rollouts", ignore_errors=True)
        for name in outputs:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def require_a_result(records: Sequence[RolloutRecord], where: Path) -> None:
    """Raise InfraFailure when every rollout ended ``infra_error`` (in the order they finished: the
    last one's reason is the error shown)."""
    if records and all(r.status == "infra_error" for r in records):
        raise InfraFailure(
            f"all {len(records)} rollout(s) ended infra_error (never scored): the agent or its endpoint "
            f"failed every time; the last error: {records[-1].reason}\nrecords: {where}"
        )


_WARNED: set[str] = set()  # why rollouts are not sealed, said once per process


def warn_unsealed(seal: Seal, backend: AgentBackend) -> None:
    """Warn (once per process and reason) that ``backend``'s rollouts will not be sealed, and why."""
    if backend.seal_support == "inert":
        return  # nothing to seal: it starts no process and reads only its workspace
    if seal.sealed and backend.seal_support == "process":
        return
    why = seal.reason or f"the {backend.name} backend cannot run sealed"
    if why in _WARNED or seal == UNSEALED:  # --sandbox none: the user chose it
        return
    _WARNED.add(why)
    warnings.warn(
        f"rollouts are NOT sealed: {why}; the agent can read what you can (docs/sandbox.md)",
        SkilltuneWarning,
        stacklevel=3,
    )


class RolloutSession:
    """A suite, its target agent(s), the checks passed, an executor and a cache: jobs run through it.

    Open it with ``RolloutSession.open``; the executor is made on first use (so a command that runs
    its few rollouts in this thread, such as ``smoke``, never starts one) and shared by every batch.
    """

    def __init__(
        self,
        suite: Suite,
        settings: RolloutSettings,
        targets: tuple[Target, ...],
        out: Path | None,
        retry: RetryPolicy,
        executor: Executor | None = None,
        seal: Seal | None = None,
    ) -> None:
        if not targets:
            raise ValueError("a rollout session needs at least one target agent")
        self.suite = suite
        self.settings = settings
        self.targets = targets
        self.out = out
        self.retry = retry
        self._executor = executor
        self.cache = RolloutCache(settings.cache) if settings.cache else None
        self.seal = seal if seal is not None else resolve(settings.sandbox)

    @classmethod
    def open(
        cls,
        suite: Suite,
        settings: RolloutSettings,
        *,
        tasks: Sequence[Task],
        candidates: Sequence[Candidate | None] = (),
        out: Path | None = None,
        force: bool = False,
        outputs: Sequence[str] = (),
        retry: RetryPolicy | None = None,
        executor: Executor | None = None,
    ) -> RolloutSession:
        """Check everything the rollouts need, then prepare ``out`` (when given). Raises UsageError
        (nothing written) for what the settings, the suite or the target get wrong."""
        target = Target.of(settings.agent, settings.agent_options)
        for candidate in candidates:
            check_placement(candidate, target.backend, target.options.placement)
        check_target(target.backend, target.options, tasks, candidates, settings.executor, suite)
        suite.preflight(list(tasks))  # a scorer that cannot work (a judge with no key) refuses here
        seal = resolve(settings.sandbox)  # --sandbox bwrap where bwrap cannot run refuses here
        warn_unsealed(seal, target.backend)
        if out is not None:
            prepare_out(out, force, suite, outputs)
        return cls(suite, settings, (target,), out, retry or RetryPolicy(), executor, seal)

    @property
    def target(self) -> Target:
        """The target agent of a single-agent session."""
        if len(self.targets) != 1:
            raise ValueError(f"this session has {len(self.targets)} target agents; ask for one by name")
        return self.targets[0]

    @functools.cached_property
    def executor(self) -> Executor:
        if self._executor is not None:
            return self._executor
        return make_executor(
            self.settings.workers,
            self.suite.config.max_concurrency,
            self.settings.executor,
            self.settings.ray_address,
        )

    def runner(
        self, out: Path | None = None, on_baseline: Callable[[RolloutJob, Path], None] | None = None
    ) -> RolloutRunner:
        """A runner writing record folders under ``out`` (default: the session's output folder)."""
        folder = out if out is not None else self.out
        if folder is None:
            raise ValueError("this session has no output folder: give one")
        target = self.target
        return RolloutRunner(
            suite=self.suite, backend=target.backend, options=target.options, out=folder,
            retry=self.retry, cache=self.cache, fresh=self.settings.fresh, on_baseline=on_baseline,
            seal=self.seal,
        )  # fmt: skip

    def jobs(
        self, tasks: Sequence[Task], candidate: Candidate | None, phase: Phase, reps: int, base: int = 0
    ) -> list[RolloutJob]:
        """One job per (task, replicate) in canonical order, seeded with the session's seed."""
        check_reps(reps)
        return jobs_for(list(tasks), candidate, phase, reps, self.settings.seed, base)

    def stream(self, jobs: Sequence[RolloutJob], runner: JobRunner) -> Generator[RolloutRecord, None, None]:
        """Records in completion order (the caller closes the iterator to stop early); ``runner``:
        one runner, or several agents' ``Batches`` (rollout/routes.py) on this session's executor."""
        return self.executor.map(jobs, runner)

    def run(
        self, jobs: Sequence[RolloutJob], out: Path | None = None, on_record: OnRecord | None = None
    ) -> list[RolloutRecord]:
        """Run ``jobs`` to the end; records in the order they finished."""
        records: list[RolloutRecord] = []
        for record in self.stream(jobs, self.runner(out)):
            records.append(record)
            if on_record is not None:
                on_record(record, len(records), len(jobs))
        return records

    def refusal(self, candidate: Candidate) -> str | None:
        """Why a target agent cannot take ``candidate`` at all, or None."""
        for target in self.targets:
            problem = target.refusal(self.suite, candidate)
            if problem is not None:
                return problem if len(self.targets) == 1 else f"{target.name}: {problem}"
        return None


def refuse_the_same_agent_twice(
    sessions: Mapping[str | None, RolloutSession] | Mapping[str, RolloutSession],
) -> None:
    """Raise UsageError when two labels name one agent: the same backend, options and environment
    (the options hash a rollout's cache key and record hold). Their rollouts would share cache keys,
    so with ``--cache`` one label's draws would be copies of the other's (as many as the scheduling
    happened to make): a training run's pooled gate would count each draw twice, a comparison's two
    columns would share one agent's draws; without it, replicates of one agent would be weighed as
    two agents. Neither is what several agents mean. ``train`` and ``compare`` both refuse them."""
    seen: dict[str, str] = {}
    for label, session in sessions.items():
        # the options hash is the runner's (backend, options, environment, sandbox); it reads no folder
        key = session.runner(Path()).options_hash
        if key in seen:
            raise UsageError(
                f"--agent {seen[key]} and --agent {label} are the same agent (the same backend, options and "
                f"environment): give it once (more draws per task: --reps), or make the two differ"
            )
        seen[key] = str(label)
