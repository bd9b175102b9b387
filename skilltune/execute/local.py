"""Local executor: a bounded pool of worker threads, one rollout each.

Threads suffice: a rollout's time is spent in the agent's own process (or, for
the mock, in microseconds of Python); the harness work per rollout is small.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from skilltune.process import clear_interrupt, interrupt_agents, reap_orphans
from skilltune.rollout.routes import JobRunner
from skilltune.rollout.runner import RolloutJob
from skilltune.runfiles import RolloutRecord


class LocalExecutor:
    def __init__(self, workers: int = 4, address: str | None = None) -> None:
        del address  # the local executor has no cluster (make_executor refuses one)
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers

    def map(self, jobs: Sequence[RolloutJob], runner: JobRunner) -> Generator[RolloutRecord, None, None]:
        """Yield records as they finish; closing the iterator early cancels the jobs not yet started
        (those running finish and are kept). An interrupt (Ctrl-C) or an error kills the running
        agents at once; their rollouts leave no record (a resume runs them again). Orphaned agent
        process groups are reaped at the end."""
        try:
            yield from self._map(jobs, runner)
        finally:
            reap_orphans()

    def _map(self, jobs: Sequence[RolloutJob], runner: JobRunner) -> Generator[RolloutRecord, None, None]:
        if self.workers == 1:
            for job in jobs:
                yield runner.run(job)
            return
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="skilltune-rollout")
        pending: set[Future[RolloutRecord]] = set()
        running: set[Future[RolloutRecord]] = set()  # every future submitted, for _drain
        queue = iter(jobs)

        def submit(job: RolloutJob) -> Future[RolloutRecord]:
            future = pool.submit(runner.run, job)
            running.add(future)
            return future

        try:
            for job in queue:
                pending.add(submit(job))
                if len(pending) >= self.workers * 2:
                    break
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending.add(submit(nxt))
        except GeneratorExit:  # the consumer is done (a gate decided): running rollouts finish and count
            raise
        except BaseException:  # Ctrl-C or an error ends the batch: kill the agents now, not at their limit
            interrupt_agents()
            raise
        finally:
            for future in pending:
                future.cancel()
            try:
                _drain(pool, running)
            finally:
                clear_interrupt()


def _drain(pool: ThreadPoolExecutor, running: set[Future[RolloutRecord]]) -> None:
    """Wait for the running rollouts; an interrupt meanwhile (a second Ctrl-C while a decided gate's
    last rollouts finish) kills their agents at once instead, and their rollouts leave no record."""
    try:
        pool.shutdown(wait=True, cancel_futures=True)
    except BaseException:
        interrupt_agents()
        wait(running)  # not a second shutdown(wait=True): an interrupted join may not wait again
        pool.shutdown(wait=False)
        raise
