"""The Ray executor: the same contract as the local one, on a Ray cluster.

``--executor ray [--ray-address ADDR]``; without an address a local Ray instance is
started in-process (loopback only). Each job travels as a small picklable spec;
the worker rebuilds the suite and backend (once per worker process), makes the
workspace on its own disk, runs the rollout into a scratch folder, and ships the
record folder's files back; the driver writes them into the run directory, so
the layout is the same as with local workers. The rollout cache is consulted and
filled on the driver. Several agents' jobs in one map (a ``Router``) send each job with its own
runner's spec (so each worker process keeps a backend per agent).

Joining a cluster (``--ray-address``): Ray 2.60 turns token authentication on for a
cluster started by ``ray start`` when a token exists on that machine (``~/.ray/auth_token``,
which any local ``ray.init`` writes), and a client without ``RAY_AUTH_MODE=token`` is then
refused with nothing but a connection error. So when a token is available here and the
user did not choose a mode, skilltune sets ``RAY_AUTH_MODE=token`` before joining (harmless
for a cluster without authentication), and a failed join says what to check and set.

Closing ``map`` early (a gate decided) lets the rollouts already handed out finish and
writes their records, as local workers do; an interrupt or an error cancels them.

Ray is an optional extra: ``pip install 'skilltune[ray]'``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltune.errors import UsageError
from skilltune.process import GRACE_S
from skilltune.rollout.routes import JobRunner, runner_for
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, load_record, rollout_dir
from skilltune.rollout.scoring import rescore_record
from skilltune.runfiles import Phase, RolloutRecord
from skilltune.sandbox import UNSEALED, Seal
from skilltune.skill import Candidate
from skilltune.store import canonical_json, write_text

_INSTALL = "pip install 'skilltune[ray]'"
_AUTH_MODE = "RAY_AUTH_MODE"


def _token_available() -> bool:
    """A Ray authentication token where Ray looks for one (its documented variables and file)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return Path(path).expanduser().is_file()
    return (Path.home() / ".ray" / "auth_token").is_file()


def _join_hint(address: str) -> str:
    mode = os.environ.get(_AUTH_MODE) or "unset"
    token = "a token is available here" if _token_available() else "no token is available here"
    return (
        f"could not join the Ray cluster at {address} (RAY_AUTH_MODE {mode}; {token}). Check that it runs "
        f"(`ray status --address {address}` on its head node) and that the address is the head's GCS "
        "address (host:port of `ray start --head --port PORT`). Ray 2.60 clusters started with `ray start` "
        "use token authentication when the head has a token: copy the head's ~/.ray/auth_token to this "
        "machine (or set RAY_AUTH_TOKEN to it) and set RAY_AUTH_MODE=token; or start the head with "
        "RAY_AUTH_MODE=disabled on a network only you can reach"
    )


@dataclass(frozen=True)
class RunnerSpec:
    """What a worker needs to rebuild the runner (no live objects)."""

    suite: str
    agent: str
    options: dict[str, Any]
    retry: RetryPolicy
    options_hash: str  # the driver's (its environment and CLI version decide, not the worker's)
    suite_options: dict[str, Any] = field(default_factory=dict)  # prompt variant, judge overrides
    seal: Seal = UNSEALED  # resolved on the driver: a worker without bwrap refuses (no unsealed fallback)

    @classmethod
    def of(cls, runner: RolloutRunner) -> RunnerSpec:
        return cls(
            suite=str(Path(runner.suite.source).resolve()),
            agent=runner.backend.name,
            options=runner.options.model_dump(mode="json"),
            retry=runner.retry,
            options_hash=runner.options_hash,
            suite_options=runner.suite.options.model_dump(mode="json"),
            seal=runner.seal,
        )


@dataclass(frozen=True)
class JobSpec:
    task_id: str
    phase: Phase
    files: dict[str, str] | None  # the candidate's files; None for the no-skill arm
    main: str
    kind: str
    fallback_name: str
    replicate: int
    seed: int
    agent: str | None = None  # the label of the job's agent
    labelled: bool = False  # whether its files name the agent (several agents sharing a folder)

    @classmethod
    def of(cls, job: RolloutJob) -> JobSpec:
        c = job.candidate
        return cls(
            task_id=job.task.id,
            phase=job.phase,
            files=dict(c.files) if c else None,
            main=c.main if c else "",
            kind=c.kind if c else "folder",
            fallback_name=c.fallback_name if c else "",
            replicate=job.replicate,
            seed=job.seed,
            agent=job.agent,
            labelled=job.labelled,
        )


_WORKER_STATE: dict[str, Any] = {}  # per worker process: spec key -> (suite, backend, options)


def run_on_worker(spec: RunnerSpec, job: JobSpec) -> tuple[str, dict[str, bytes]]:
    """Run one rollout on a Ray worker; return its record and the files of its record folder."""
    from skilltune.agents import get_backend, parse_agent_options
    from skilltune.suite import load_suite

    key = canonical_json([spec.suite, spec.agent, spec.options, spec.suite_options])
    if key not in _WORKER_STATE:
        backend = get_backend(spec.agent)
        suite = load_suite(spec.suite, **spec.suite_options)
        _WORKER_STATE[key] = (suite, backend, parse_agent_options(backend, spec.options))
    suite, backend, options = _WORKER_STATE[key]
    candidate = None
    if job.files is not None:
        candidate = Candidate(job.files, job.main, job.kind, job.fallback_name)  # type: ignore[arg-type]
    scratch = Path(tempfile.mkdtemp(prefix="skilltune-ray-"))
    try:
        runner = RolloutRunner(
            suite=suite,
            backend=backend,
            options=options,
            out=scratch,
            retry=spec.retry,
            driver_options_hash=spec.options_hash,
            seal=spec.seal,
        )
        rollout_job = RolloutJob(
            suite.task(job.task_id), job.phase, candidate, job.replicate, job.seed, job.agent, job.labelled
        )
        record = runner.run(rollout_job)
        folder = rollout_dir(scratch, rollout_job)
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        return record.model_dump_json(), files
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class RayExecutor:
    def __init__(self, workers: int = 4, address: str | None = None) -> None:
        if not address:
            # Keep every socket of the local instance on loopback (ENV-NOTES: without this Ray binds
            # the machine's other addresses and ignores a requested node IP); set before Ray is imported.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        elif _AUTH_MODE not in os.environ and _token_available():
            # Ray reads its auth mode when it is imported (see the module docstring); set it yourself
            # if your program imports Ray first.
            os.environ[_AUTH_MODE] = "token"
        try:
            import ray
        except ImportError:
            raise UsageError(f"--executor ray needs Ray: {_INSTALL}") from None
        self.ray = ray
        self.workers = workers
        self.address = address
        self._remote: Any = None

    def _ensure(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            if self.address:
                try:
                    ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
                except (ConnectionError, RuntimeError) as exc:
                    raise UsageError(f"{_join_hint(self.address)} ({type(exc).__name__}: {exc})") from None
            else:
                # "local": a new instance, never a cluster some earlier `ray start` left registered in
                # /tmp/ray/ray_current_cluster (ray.init() alone would join that one)
                ray.init(
                    address="local",
                    num_cpus=self.workers,
                    include_dashboard=False,
                    ignore_reinit_error=True,
                    log_to_driver=False,
                    configure_logging=False,
                )
        if self._remote is None:
            self._remote = ray.remote(num_cpus=1, max_retries=0)(run_on_worker)

    def map(self, jobs: Sequence[RolloutJob], runner: JobRunner) -> Generator[RolloutRecord, None, None]:
        self._ensure()
        ray = self.ray
        specs: dict[int, RunnerSpec] = {}  # id(runner) -> its spec (a Router's: one per agent)
        todo = []
        for job in jobs:
            own = runner_for(runner, job)
            folder = rollout_dir(own.out, job)
            kept = own.unscored(job)
            if kept is not None:  # the agent's work is in the run directory: score it here
                yield rescore_record(own.suite, job.task, folder, kept)
                continue
            if own.cache is not None and not own.fresh:
                folder.parent.mkdir(parents=True, exist_ok=True)
                if own.cache.fetch(own.cache_key(job), folder, job.phase, job.target):
                    cached = load_record(folder)
                    if cached is not None:
                        yield cached
                        continue
            if id(own) not in specs:
                specs[id(own)] = RunnerSpec.of(own)
            todo.append(job)
        queue = iter(todo)
        pending: dict[Any, RolloutJob] = {}
        lost: dict[int, int] = {}  # id(job): how many times its worker or node died under it

        def submit(job: RolloutJob) -> None:
            pending[self._remote.remote(specs[id(runner_for(runner, job))], JobSpec.of(job))] = job

        closed = False  # the consumer closed the iterator: what runs finishes, as with local workers
        try:
            for job in queue:
                submit(job)
                if len(pending) >= self.workers:  # no more handed out than run: a close keeps them all
                    break
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    job = pending.pop(ref)
                    try:
                        record_json, files = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the rollout code raised: bad input
                        cause = getattr(exc, "cause", None)
                        raise (cause if isinstance(cause, Exception) else exc) from None
                    except ray.exceptions.RayError as exc:  # the worker, its node or the object was lost
                        lost[id(job)] = lost.get(id(job), 0) + 1
                        if lost[id(job)] < 2:
                            submit(job)  # requeued once, like a stuck agent
                            continue
                        reason = f"Ray lost this rollout twice: {type(exc).__name__}: {exc}"
                        yield runner_for(runner, job).lost(job, reason[:2000], attempts=lost[id(job)])
                    else:
                        yield self._land(runner_for(runner, job), job, record_json, files)
                    nxt = next(queue, None)
                    if nxt is not None:
                        submit(nxt)
        except GeneratorExit:
            closed = True
            raise
        finally:
            try:
                if closed:
                    self._finish(runner, pending)
            finally:
                # A KeyboardInterrupt in each worker: the rollout's own cleanup kills its agent's process
                # group (force=True would kill the worker and leave the agent, in a session of its own).
                refs = list(pending)
                for ref in refs:
                    ray.cancel(ref, force=False)
                if refs:  # give each worker's clean-up the time to kill its agent before Ray shuts down
                    ray.wait(refs, num_returns=len(refs), timeout=GRACE_S + 5)

    def _finish(self, runner: JobRunner, pending: dict[Any, RolloutJob]) -> None:
        """Wait for the rollouts already handed out and write their records (a rollout Ray lost is
        left without one: a resume runs it). Each one landed leaves ``pending``; an interrupt meanwhile
        leaves the rest there for the caller to cancel."""
        for ref in list(pending):
            try:
                record_json, files = self.ray.get(ref)
            except self.ray.exceptions.RayError:
                pending.pop(ref)
                continue
            job = pending.pop(ref)
            self._land(runner_for(runner, job), job, record_json, files)

    @staticmethod
    def _land(
        runner: RolloutRunner, job: RolloutJob, record_json: str, files: dict[str, bytes]
    ) -> RolloutRecord:
        """Write a shipped record folder into the run directory (record.json last)."""
        folder = rollout_dir(runner.out, job)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for rel, data in sorted(files.items()):
            if rel == "record.json":
                continue
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        write_text(folder / "record.json", files.get("record.json", record_json.encode()).decode("utf-8"))
        record = RolloutRecord.parse(json.loads(record_json), str(folder / "record.json"))
        if runner.cache is not None:
            runner.cache.store(runner.cache_key(job), folder, record.status)
        return record

    def shutdown(self) -> None:
        if self.ray.is_initialized() and not self.address:
            self.ray.shutdown()
