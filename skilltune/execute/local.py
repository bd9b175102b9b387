"""Local executor: a bounded pool of worker threads, one rollout each.

Threads suffice: a rollout's time is spent in the agent's own process (or, for
the mock, in microseconds of Python); the harness work per rollout is small.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from skilltune.agents.process import clear_interrupt, interrupt_agents, reap_orphans
from skilltune.rollout import RolloutJob, RolloutRecord, RolloutRunner


class LocalExecutor:
    def __init__(self, workers: int = 4) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers

    def map(self, jobs: Sequence[RolloutJob], runner: RolloutRunner) -> Iterator[RolloutRecord]:
        """Yield records as they finish; closing the iterator early cancels the jobs not yet started
        (those running finish and are kept). An interrupt (Ctrl-C) or an error kills the running
        agents at once; their rollouts leave no record (a resume runs them again). Orphaned agent
        process groups are reaped at the end."""
        try:
            yield from self._map(jobs, runner)
        finally:
            reap_orphans()

    def _map(self, jobs: Sequence[RolloutJob], runner: RolloutRunner) -> Iterator[RolloutRecord]:
        if self.workers == 1:
            for job in jobs:
                yield runner.run(job)
            return
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="skilltune-rollout")
        pending: set[Future[RolloutRecord]] = set()
        queue = iter(jobs)
        interrupted = False
        try:
            for job in queue:
                pending.add(pool.submit(runner.run, job))
                if len(pending) >= self.workers * 2:
                    break
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending.add(pool.submit(runner.run, nxt))
        except GeneratorExit:  # the consumer is done (a gate decided): running rollouts finish and count
            raise
        except BaseException:  # Ctrl-C or an error ends the batch: kill the agents now, not at their limit
            interrupted = True
            interrupt_agents()
            raise
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)  # quick once interrupted: no agent is left
            if interrupted:
                clear_interrupt()
