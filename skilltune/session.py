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

A session owns its target agents, one ``Target`` per label (one agent is one label): every job it
makes names its agent's label, every batch runs through one ``Router`` (rollout/routes.py) on the
one executor, and every record comes back to its agent's label. How a label reaches the files is
decided here, once: a lone agent's never does (its files as before), several agents' do, in each
job's folder and record (``<cand12>@<label>``, a training run); or each agent has a folder of its
own (``folders="own"``: ``OUT/<label>/``, ``compare_agents``), its records unlabelled.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import warnings
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from skilltune.agents import AgentBackend, AgentOptions, get_backend, parse_agent_options
from skilltune.errors import InfraFailure, SkilltuneWarning, UsageError
from skilltune.execute import Executor, make_executor
from skilltune.rollout.cache import RolloutCache
from skilltune.rollout.routes import Router
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, jobs_for
from skilltune.rollout.tally import Unit
from skilltune.rollout.workspace import check_placement, check_target, placed_prompts
from skilltune.runfiles import Phase, RolloutRecord
from skilltune.sandbox import UNSEALED, Seal, resolve
from skilltune.settings import AgentSpec, RolloutSettings
from skilltune.skill import Candidate
from skilltune.suite import Suite, Task

OnRecord = Callable[[RolloutRecord, int, int], None]  # (record, finished so far, jobs in all)


@dataclass(frozen=True)
class Target:
    """One target agent: its label, its backend (``agent``: as named) and its options, parsed
    (``given``: as given)."""

    label: str
    agent: str
    backend: AgentBackend
    options: AgentOptions
    given: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, agent: str, options: Mapping[str, Any] | None = None, label: str | None = None) -> Target:
        """The agent of backend ``agent`` with ``options``, labelled ``label`` (default: the backend)."""
        backend = get_backend(agent)
        given = dict(options or {})
        return cls(label or agent, agent, backend, parse_agent_options(backend, given), given)

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
        for name in outputs:  # a file, or a folder of one agent's results
            shutil.rmtree(out / name) if (out / name).is_dir() else (out / name).unlink(missing_ok=True)
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


Folders = Literal["shared", "own"]  # where several agents' rollouts go (a lone agent's: the folder)


class RolloutSession:
    """A suite, its target agents by label, the checks passed, an executor and a cache: jobs run
    through it.

    Open it with ``RolloutSession.open``; the executor is made on first use (so a command that runs
    its few rollouts in this thread, such as ``smoke``, never starts one) and shared by every batch
    and every agent.
    """

    def __init__(
        self,
        suite: Suite,
        settings: RolloutSettings,
        targets: Sequence[Target],
        out: Path | None,
        retry: RetryPolicy,
        executor: Executor | None = None,
        seal: Seal | None = None,
        folders: Folders = "shared",
    ) -> None:
        self.targets = {target.label: target for target in targets}
        if not targets or len(self.targets) != len(targets):
            raise ValueError("a rollout session needs target agents of distinct labels")
        self.suite = suite
        self.settings = settings
        self.out = out
        self.retry = retry
        self._executor = executor
        self.cache = RolloutCache(settings.cache) if settings.cache else None
        self.seal = seal if seal is not None else resolve(settings.sandbox)
        # The one rule of how a label reaches what the session writes: a lone agent's never does (its
        # files and messages as before); several agents' are named, in each job's folder and record
        # when they share a folder. With folders of their own (compare_agents) a folder names each.
        self.named = len(self.targets) > 1
        self._labelled = self.named and folders == "shared"
        self._own_folders = folders == "own"

    @classmethod
    def open(
        cls,
        suite: Suite,
        settings: RolloutSettings,
        agents: Sequence[AgentSpec] | None = None,
        *,
        tasks: Sequence[Task],
        candidates: Sequence[Candidate | None] = (),
        out: Path | None = None,
        force: bool = False,
        outputs: Sequence[str] = (),
        retry: RetryPolicy | None = None,
        executor: Executor | None = None,
        folders: Folders = "shared",
    ) -> RolloutSession:
        """Check everything the rollouts need, then prepare ``out`` (when given). ``agents``: the
        target agents, their labels distinct (``runfiles.AgentSpecs``; default: the settings' agent).
        Raises UsageError (nothing written) for what the settings, the suite or an agent get wrong,
        naming the agent when there are several."""
        given = (
            [(a.label, a.agent, a.options) for a in agents]
            if agents
            else [(settings.agent, settings.agent, settings.agent_options)]
        )
        targets = []
        for label, agent, options in given:
            try:
                target = Target.of(agent, options, label)
                for candidate in candidates:
                    check_placement(candidate, target.backend, target.options.placement)
                check_target(target.backend, target.options, tasks, candidates, settings.executor, suite)
            except UsageError as exc:
                if len(given) == 1:
                    raise
                raise UsageError(f"--agent {label}={agent}: {exc}") from None
            targets.append(target)
        suite.preflight(list(tasks))  # a scorer that cannot work (a judge with no key) refuses here
        seal = resolve(settings.sandbox)  # --sandbox bwrap where bwrap cannot run refuses here
        for target in targets:
            warn_unsealed(seal, target.backend)
        session = cls(suite, settings, targets, out, retry or RetryPolicy(), executor, seal, folders)
        session.refuse_the_same_agent_twice()
        if out is not None:
            own = list(session.targets) if session._own_folders else []  # --force: older results of each
            prepare_out(out, force, suite, [*outputs, *own])
        return session

    @property
    def target(self) -> Target:
        """The target agent of a single-agent session."""
        if self.named:
            raise ValueError(f"this session has {len(self.targets)} target agents; ask for one by label")
        return next(iter(self.targets.values()))

    @property
    def labels(self) -> list[str]:
        return list(self.targets)

    def describe(self) -> str:
        """The agents as messages and comparison.json name them: the backend, or ``label (backend), ...``."""
        if not self.named:
            return self.target.name
        return ", ".join(f"{label} ({target.name})" for label, target in self.targets.items())

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

    def folder(self, out: Path | None, label: str) -> Path:
        """Where agent ``label``'s record folders go under ``out`` (default: the session's output
        folder): ``out``, or ``out/<label>`` for several agents in folders of their own."""
        folder = out if out is not None else self.out
        if folder is None:
            raise ValueError("this session has no output folder: give one")
        return folder / label if self._own_folders else folder

    def runner(
        self,
        out: Path | None = None,
        on_baseline: Callable[[RolloutJob, Path], None] | None = None,
        label: str | None = None,
    ) -> RolloutRunner:
        """A runner of agent ``label`` (default: the only one) writing record folders under its
        folder of ``out`` (default: the session's output folder)."""
        target = self.targets[label] if label is not None else self.target
        return RolloutRunner(
            suite=self.suite, backend=target.backend, options=target.options,
            out=self.folder(out, target.label), retry=self.retry, cache=self.cache,
            fresh=self.settings.fresh, on_baseline=on_baseline, seal=self.seal,
        )  # fmt: skip

    def jobs(
        self, tasks: Sequence[Task], candidate: Candidate | None, phase: Phase, reps: int, base: int = 0
    ) -> list[RolloutJob]:
        """Every agent's jobs, one per (task, replicate) in canonical order, agent by agent, seeded
        with the session's seed and named by the agent's label."""
        check_reps(reps)
        made = jobs_for(list(tasks), candidate, phase, reps, self.settings.seed, base)
        return [replace(job, agent=label, labelled=self._labelled) for label in self.targets for job in made]

    def units(self, tasks: Sequence[Task]) -> list[Unit]:
        """What a gate pairs and a comparison lists over ``tasks``: each (agent, task), as the files
        name it (one agent: its tasks)."""
        return [Unit(t.id, label if self._labelled else None) for label in self.targets for t in tasks]

    def stream(
        self, jobs: Sequence[RolloutJob], out: Path | None = None
    ) -> Generator[tuple[RolloutJob, RolloutRecord], None, None]:
        """Each record with the job it answers, in completion order: every agent's jobs through one
        map of the executor (``Router``); the caller closes the iterator to stop early."""
        router = Router(jobs, {label: self.runner(out, label=label) for label in self.targets})
        with contextlib.closing(self.executor.map(router.jobs, router)) as records:
            for record in records:
                yield router.job(record), record

    def run(
        self, jobs: Sequence[RolloutJob], out: Path | None = None, on_record: OnRecord | None = None
    ) -> list[RolloutRecord]:
        """Run ``jobs`` to the end; records in the order they finished."""
        records: list[RolloutRecord] = []
        for _, record in self.stream(jobs, out):
            records.append(record)
            if on_record is not None:
                on_record(record, len(records), len(jobs))
        return records

    def refusal(self, candidate: Candidate) -> str | None:
        """Why a target agent cannot take ``candidate`` at all (naming it when there are several), or None."""
        for label, target in self.targets.items():
            problem = target.refusal(self.suite, candidate)
            if problem is not None:
                return f"agent {label}: {problem}" if self.named else problem
        return None

    def refuse_the_same_agent_twice(self) -> None:
        """Raise UsageError when two labels name one agent: the same backend, options and environment
        (the options hash a rollout's cache key and record hold). Their rollouts would share cache keys,
        so with ``--cache`` one label's draws would be copies of the other's (as many as the scheduling
        happened to make): a training run's pooled gate would count each draw twice, a comparison's two
        columns would share one agent's draws; without it, replicates of one agent would be weighed as
        two agents, and the router could not tell their records apart. Neither is what several agents
        mean."""
        seen: dict[str, str] = {}
        for label in self.targets:
            # the options hash is the runner's (backend, options, environment, sandbox); it reads no folder
            key = self.runner(Path(), label=label).options_hash
            if key in seen:
                raise UsageError(
                    f"--agent {seen[key]} and --agent {label} are the same agent (the same backend, options "
                    f"and environment): give it once (more draws per task: --reps), or make the two differ"
                )
            seen[key] = label
