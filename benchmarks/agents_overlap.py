"""Several agents' batch: one agent after another vs side by side on the shared workers.

    .venv/bin/python benchmarks/agents_overlap.py          # about 2 minutes
    .venv/bin/python benchmarks/agents_overlap.py --repeats 9 --workers 4

A training batch (or a ``compare``) with several target agents ran each agent's jobs through its
own executor map, so each agent's batch waited for its slowest rollout before the next agent
began: the workers idled at every agent's tail. Now one map takes every agent's jobs
(``Router``, skilltune/rollout/routes.py). This runs one batch both ways on the local executor,
exactly as training/rollouts.py did before and does now: agent by agent (each agent's jobs
through ``LocalExecutor.map`` with its runner, one agent after another) and side by side (one
``map`` of a ``Router``), alternately, ``--repeats`` times each, and prints the median walls and
their ratio. The ideal is the agents' total sleep divided by the workers; ``scheduled_s`` gives
both ways' walls with no harness time (each job to the first free worker, in the map's order), the
figures a machine with nothing else to do approaches.

The agents are three mock configurations whose rollouts sleep a varied time: ``sleep_s`` scaled
by a factor in [0.5, 1.5] drawn from the job's (agent, task, replicate), so the batches have
tails as real agents' do. ``--agents`` agents, ``--tasks`` jobs each, ``--workers`` workers.

Writes benchmarks/results/agents_overlap.json and prints the table.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skilltune.agents import AgentRequest, AgentResult  # noqa: E402
from skilltune.agents.mock import MockAgent, MockOptions  # noqa: E402
from skilltune.execute.local import LocalExecutor  # noqa: E402
from skilltune.rollout.routes import Router  # noqa: E402
from skilltune.rollout.runner import RolloutJob, RolloutRunner  # noqa: E402
from skilltune.skill import load_skill  # noqa: E402
from skilltune.suite import load_suite  # noqa: E402

SUITE = ROOT / "examples" / "mock-demo" / "suite"
SKILL = ROOT / "examples" / "mock-demo" / "skill"
SLEEPS = (1.6, 0.8, 1.2)  # each agent's mean rollout time (s), in the order of the agents


def factor(*parts: object) -> float:
    """A deterministic factor in [0.5, 1.5] of the job (its share of the agent's mean time)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return 0.5 + int.from_bytes(digest[:8], "big") / 2**64


class VariedMock(MockAgent):
    """The mock agent, sleeping ``sleep_s`` x factor(label, task, replicate) before it answers."""

    name: ClassVar[str] = "varied-mock"

    def __init__(self, label: str) -> None:
        self.label = label

    def run(self, request: AgentRequest) -> AgentResult:
        time.sleep(request.options.sleep_s * factor(self.label, request.task.id, request.replicate))
        return super().run(request.model_copy(update={"options": MockOptions()}))


def batch(agents: int, tasks: int, out: Path) -> list[tuple[list[RolloutJob], RolloutRunner, float]]:
    """Per agent: its jobs (``tasks`` of the demo's train split, one replicate), runner and sleep."""
    suite = load_suite(SUITE)
    skill = load_skill(SKILL)
    chosen = (suite.tasks("train") * tasks)[:tasks]
    rows = []
    for a in range(agents):
        label = f"agent{a}"
        sleep = SLEEPS[a % len(SLEEPS)] + a // len(SLEEPS) / 1000  # a router's agents differ in options
        runner = RolloutRunner(
            suite=suite, backend=VariedMock(label), options=MockOptions(sleep_s=sleep), out=out / label
        )
        jobs = [RolloutJob(task, "eval", skill, r, 0, label) for r, task in enumerate(chosen)]
        rows.append((jobs, runner, sum(sleep * factor(label, j.task.id, j.replicate) for j in jobs)))
    return rows


def makespan(durations: list[float], workers: int) -> float:
    """The wall of ``durations`` run in this order on ``workers`` (each job to the first free worker),
    with no harness time: what the two ways give on a machine with nothing else to do."""
    free = [0.0] * workers
    for d in durations:
        heapq.heapreplace(free, free[0] + d)
    return max(free)


def scheduled(rows: list[tuple[list[RolloutJob], RolloutRunner, float]], workers: int) -> dict[str, float]:
    """Both ways' makespans of the rollouts' own times (each agent's jobs in order; interleaved)."""
    times = [
        [runner.options.sleep_s * factor(job.agent, job.task.id, job.replicate) for job in jobs]  # type: ignore[attr-defined]
        for jobs, runner, _ in rows
    ]
    interleaved = [t for row in itertools.zip_longest(*times) for t in row if t is not None]
    return {
        "agent_by_agent": round(sum(makespan(t, workers) for t in times), 3),
        "side_by_side": round(makespan(interleaved, workers), 3),
    }


def agent_by_agent(rows: list[tuple[list[RolloutJob], RolloutRunner, float]], workers: int) -> float:
    executor = LocalExecutor(workers)
    t0 = time.perf_counter()
    for jobs, runner, _ in rows:
        for _ in executor.map(jobs, runner):
            pass
    return time.perf_counter() - t0


def side_by_side(rows: list[tuple[list[RolloutJob], RolloutRunner, float]], workers: int) -> float:
    executor = LocalExecutor(workers)
    joined = Router(
        [job for jobs, _, _ in rows for job in jobs], {jobs[0].agent or "": r for jobs, r, _ in rows}
    )
    t0 = time.perf_counter()
    for _ in executor.map(joined.jobs, joined):
        pass
    return time.perf_counter() - t0


def measure(agents: int, tasks: int, workers: int, repeats: int) -> dict[str, Any]:
    walls: dict[str, list[float]] = {"agent_by_agent": [], "side_by_side": []}
    ideal, plan = 0.0, {}
    for i in range(repeats):
        order = [("agent_by_agent", agent_by_agent), ("side_by_side", side_by_side)]
        for name, how in order if i % 2 == 0 else order[::-1]:  # alternate which way goes first
            with tempfile.TemporaryDirectory() as tmp:
                rows = batch(agents, tasks, Path(tmp))
                ideal = sum(total for _, _, total in rows) / workers
                plan = scheduled(rows, workers)
                walls[name].append(how(rows, workers))
            print(f"  {name}: {walls[name][-1]:.2f} s", file=sys.stderr)
    before = statistics.median(walls["agent_by_agent"])
    now = statistics.median(walls["side_by_side"])
    return {
        "agents": agents,
        "jobs_per_agent": tasks,
        "workers": workers,
        "repeats": repeats,
        "mean_sleep_s": list(SLEEPS[:agents]),
        "ideal_s": round(ideal, 3),
        "scheduled_s": plan,  # the two ways' walls with no harness time (``makespan``)
        "walls_s": {name: [round(w, 3) for w in ws] for name, ws in walls.items()},
        "median_agent_by_agent_s": round(before, 3),
        "median_side_by_side_s": round(now, 3),
        "ratio": round(before / now, 3),
    }


def table(result: dict[str, Any]) -> str:
    r = result
    head = f"{r['agents']} agents x {r['jobs_per_agent']} rollouts, {r['workers']} workers, median of {r['repeats']}"
    return "\n".join(
        [
            head,
            "| way | median wall | vs ideal |",
            "|---|---|---|",
            f"| agent by agent (before) | {r['median_agent_by_agent_s']:.2f} s | "
            f"{r['median_agent_by_agent_s'] / r['ideal_s']:.2f}x |",
            f"| side by side (now) | {r['median_side_by_side_s']:.2f} s | "
            f"{r['median_side_by_side_s'] / r['ideal_s']:.2f}x |",
            f"| ideal (total sleep / workers) | {r['ideal_s']:.2f} s | 1.00x |",
            f"| no harness time: agent by agent / side by side | {r['scheduled_s']['agent_by_agent']:.2f} s / "
            f"{r['scheduled_s']['side_by_side']:.2f} s | |",
            f"\nagent by agent / side by side: {r['ratio']:.2f}",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=6, help="rollouts per agent in the batch")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "agents_overlap.json")
    args = parser.parse_args()
    result = measure(args.agents, args.tasks, args.workers, args.repeats)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
