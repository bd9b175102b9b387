"""Throughput benchmark: harness overhead per rollout, parallel efficiency, local vs Ray.

    .venv/bin/python benchmarks/throughput.py          # about 3 minutes
    .venv/bin/python benchmarks/throughput.py --no-ray
    .venv/bin/python benchmarks/throughput.py --sealing-only --rollouts 20

(1) Overhead: the median wall time of one rollout minus the agent's own time
    (workspace, task files, skill placement, baseline commit, diff, scoring and the
    record files), with the mock agent, one rollout at a time; and where it goes.
(2) Parallel efficiency: a stand-in agent process that answers after 2 s
    (benchmarks/stand_ins/claude-sleeps.sh, driven by the claude backend like the real
    CLI: private home, process group, event stream), 2 x N rollouts at N workers for
    N = 1, 2, 4, 8, 16; efficiency = ideal wall / median measured wall (of 3), where
    ideal counts the agent's 2 s only (its process start-up counts against the harness).
(4) Sealed vs unsealed: a stand-in agent process that answers at once
    (benchmarks/stand_ins/claude-instant.sh, driven by the claude backend), one rollout at a
    time, unsealed and sealed (bwrap) in alternate blocks; the median wall per rollout of
    each (all harness: the agent does nothing), what sealing adds and the ratio.
    ``--sealing-only`` runs this part alone and writes benchmarks/results/sealing.json.
(3) Local vs Ray: the same rollouts of the 2 s stand-in agent at 8 workers through
    local worker threads and through a local Ray instance (started and warmed up
    before timing), alternately, 3 times each; what Ray adds per rollout = (median Ray
    wall - median local wall) x workers / rollouts.

Writes benchmarks/results/throughput.json and prints the table.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skilltune.agents import AgentRequest, AgentResult, get_backend  # noqa: E402
from skilltune.agents.mock import MockAgent, MockOptions  # noqa: E402
from skilltune.execute.local import LocalExecutor  # noqa: E402
from skilltune.rollout import runner as rollout_module  # noqa: E402
from skilltune.rollout import workspace as workspace_module  # noqa: E402
from skilltune.rollout.runner import RolloutJob, RolloutRunner  # noqa: E402
from skilltune.skill import load_skill  # noqa: E402
from skilltune.suite import load_suite  # noqa: E402

SUITE = ROOT / "examples" / "mock-demo" / "suite"
SKILL = ROOT / "examples" / "mock-demo" / "skill"
SLEEP_S = 2.0  # what benchmarks/stand_ins/claude-sleeps.sh sleeps
STAND_IN = ROOT / "benchmarks" / "stand_ins" / "claude-sleeps.sh"
INSTANT = ROOT / "benchmarks" / "stand_ins" / "claude-instant.sh"
WORKERS = (1, 2, 4, 8, 16)
PARTS: dict[str, list[float]] = defaultdict(list)


class TimedMock(MockAgent):
    """The mock agent, timing itself so the harness's share can be separated out."""

    def run(self, request: AgentRequest) -> AgentResult:
        t0 = time.perf_counter()
        try:
            return super().run(request)
        finally:
            PARTS["agent"].append(time.perf_counter() - t0)


def _timed(owner: Any, name: str, part: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            PARTS[part].append(time.perf_counter() - t0)

    setattr(owner, name, wrapper)


def overhead(rollouts: int) -> dict[str, Any]:
    suite = load_suite(SUITE)
    skill = load_skill(SKILL)
    _timed(workspace_module.Workspace, "create", "workspace")
    _timed(workspace_module.Workspace, "commit_baseline", "baseline commit")
    _timed(workspace_module.Workspace, "diff", "diff")
    _timed(workspace_module.Workspace, "cleanup", "cleanup")
    _timed(rollout_module, "place_skill", "skill placement")
    _timed(type(suite), "prepare", "task files")
    totals, harness = [], []
    with tempfile.TemporaryDirectory() as tmp:
        runner = RolloutRunner(suite=suite, backend=TimedMock(), options=MockOptions(), out=Path(tmp))
        tasks = suite.tasks("train")
        for i in range(rollouts):
            before = len(PARTS["agent"])
            t0 = time.perf_counter()
            runner.run(RolloutJob(tasks[i % len(tasks)], "eval", skill, i, 0))
            total = time.perf_counter() - t0
            agent = sum(PARTS["agent"][before:])
            totals.append(total)
            harness.append(total - agent)
    parts = {name: 1000 * statistics.median(values) for name, values in PARTS.items()}
    known = sum(v for k, v in parts.items() if k != "agent")
    parts["scoring and records"] = max(0.0, 1000 * statistics.median(harness) - known)
    return {
        "rollouts": rollouts,
        "median_ms": 1000 * statistics.median(harness),
        "p90_ms": 1000 * sorted(harness)[int(0.9 * len(harness))],
        "parts_ms": parts,
    }


def _run_all(executor: Any, jobs: list[RolloutJob], runner: RolloutRunner) -> float:
    t0 = time.perf_counter()
    for _ in executor.map(jobs, runner):
        pass
    return time.perf_counter() - t0


def _jobs(suite: Any, skill: Any, count: int) -> list[RolloutJob]:
    tasks = suite.tasks("train")
    return [RolloutJob(tasks[i % len(tasks)], "eval", skill, i, 0) for i in range(count)]


def _stand_in_runner(suite: Any, out: Path) -> RolloutRunner:
    """The claude backend running the 2 s stand-in process (works on Ray workers too: no registration)."""
    backend = get_backend("claude")
    options = backend.parse_options({"executable": str(STAND_IN), "wall_limit_s": 60})
    return RolloutRunner(suite=suite, backend=backend, options=options, out=out)


def efficiency(repeats: int = 3) -> list[dict[str, Any]]:
    suite = load_suite(SUITE)
    skill = load_skill(SKILL)
    rows = []
    for workers in WORKERS:
        jobs = _jobs(suite, skill, 2 * workers)
        walls = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                walls.append(_run_all(LocalExecutor(workers), jobs, _stand_in_runner(suite, Path(tmp))))
        wall = statistics.median(walls)
        ideal = len(jobs) * SLEEP_S / workers
        rows.append(
            {
                "workers": workers,
                "rollouts": len(jobs),
                "wall_s": wall,
                "walls_s": walls,
                "ideal_s": ideal,
                "efficiency": ideal / wall,
            }
        )
        print(
            f"  {workers:>2} workers: median {wall:.2f} s for {len(jobs)} rollouts (ideal {ideal:.1f} s)",
            file=sys.stderr,
        )
    return rows


def local_vs_ray(rollouts: int, workers: int, repeats: int = 3) -> dict[str, Any]:
    """Local threads and Ray, alternately, ``repeats`` times each (the machine is noisy): medians."""
    from skilltune.execute.ray import RayExecutor

    suite = load_suite(SUITE)
    skill = load_skill(SKILL)
    jobs = _jobs(suite, skill, rollouts)
    ray = RayExecutor(workers)
    ray._ensure()  # start the local instance before timing
    executors = {"local": LocalExecutor(workers), "ray": ray}
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    out: dict[str, Any] = {"rollouts": rollouts, "workers": workers, "agent_s": SLEEP_S, "repeats": repeats}
    try:
        for executor in executors.values():  # warm up: imports, Ray's worker processes, the CLI's version
            with tempfile.TemporaryDirectory() as tmp:
                _run_all(executor, _jobs(suite, skill, workers), _stand_in_runner(suite, Path(tmp)))
        for _ in range(repeats):
            for name, executor in executors.items():
                with tempfile.TemporaryDirectory() as tmp:
                    walls[name].append(_run_all(executor, jobs, _stand_in_runner(suite, Path(tmp))))
                print(f"  {name}: {walls[name][-1]:.2f} s for {rollouts} rollouts", file=sys.stderr)
    finally:
        ray.shutdown()
    for name, found in walls.items():
        out[name] = {"wall_s": statistics.median(found), "walls_s": found}
    out["ray_adds_ms"] = 1000 * (out["ray"]["wall_s"] - out["local"]["wall_s"]) * workers / rollouts
    return out


def sealing(rollouts: int, repeats: int = 3) -> dict[str, Any]:
    """Per-rollout wall of the instant stand-in, unsealed and sealed, in alternate blocks of
    ``rollouts`` (``repeats`` blocks each): medians, what sealing adds, the ratio."""
    from skilltune.sandbox import UNSEALED, Seal, bwrap_problem

    problem = bwrap_problem()
    if problem is not None:
        return {"skipped": problem}
    suite = load_suite(SUITE)
    skill = load_skill(SKILL)
    tasks = suite.tasks("train")
    backend = get_backend("claude")
    options = backend.parse_options({"executable": str(INSTANT), "wall_limit_s": 60})
    walls: dict[str, list[float]] = {"unsealed": [], "sealed": []}
    for block in range(repeats + 1):  # block 0 warms up (imports, the CLI's version), not counted
        for name, seal in (("unsealed", UNSEALED), ("sealed", Seal("bwrap"))):
            with tempfile.TemporaryDirectory() as tmp:
                runner = RolloutRunner(
                    suite=suite, backend=backend, options=options, out=Path(tmp), seal=seal
                )
                for i in range(rollouts if block else 2):
                    t0 = time.perf_counter()
                    record = runner.run(RolloutJob(tasks[i % len(tasks)], "eval", skill, i, 0))
                    if block:
                        walls[name].append(time.perf_counter() - t0)
                    if record.status != "ok" or record.sandbox != ("bwrap" if seal.sealed else "none"):
                        raise RuntimeError(f"{name} rollout ended {record.status}: {record.reason}")
    medians = {name: 1000 * statistics.median(found) for name, found in walls.items()}
    return {
        "rollouts": rollouts * repeats,
        "unsealed_ms": medians["unsealed"],
        "sealed_ms": medians["sealed"],
        "sealing_adds_ms": medians["sealed"] - medians["unsealed"],
        "ratio": medians["sealed"] / medians["unsealed"],
        "walls_ms": {name: [round(1000 * w, 2) for w in found] for name, found in walls.items()},
    }


def sealing_table(s: dict[str, Any]) -> str:
    if "skipped" in s:
        return f"sealed vs unsealed: skipped ({s['skipped']})"
    return "\n".join(
        [
            "| harness overhead per rollout, agent process answering at once (median of "
            f"{s['rollouts']}) | figure |",
            "|---|---|",
            f"| unsealed | {s['unsealed_ms']:.1f} ms |",
            f"| sealed (bwrap) | {s['sealed_ms']:.1f} ms |",
            f"| what sealing adds | {s['sealing_adds_ms']:.1f} ms |",
            f"| ratio sealed / unsealed | {s['ratio']:.2f} |",
        ]
    )


def table(result: dict[str, Any]) -> str:
    o = result["overhead"]
    lines = [
        "| measure | figure | target |",
        "|---|---|---|",
        f"| harness overhead per rollout (median of {o['rollouts']}) | {o['median_ms']:.1f} ms (p90 {o['p90_ms']:.1f} ms) | <= 50 ms |",
    ]
    for row in result["efficiency"]:
        target = ">= 90%" if row["workers"] == 8 else ""
        lines.append(
            f"| parallel efficiency, {row['workers']} worker(s), 2 s agent process | "
            f"{100 * row['efficiency']:.1f}% (median {row['wall_s']:.2f} s for {row['rollouts']}) | {target} |"
        )
    if "ray" in result:
        r = result["ray"]
        lines.append(
            f"| {r['rollouts']} rollouts of the 2 s agent at {r['workers']} workers, median of "
            f"{r['repeats']}: local / Ray | "
            f"{r['local']['wall_s']:.2f} s / {r['ray']['wall_s']:.2f} s | |"
        )
        lines.append(f"| what Ray adds per rollout | {r['ray_adds_ms']:.1f} ms | <= 50 ms |")
    parts = ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(o["parts_ms"].items(), key=lambda kv: -kv[1]) if k != "agent"
    )
    text = "\n".join(lines) + f"\n\nwhere the overhead goes (median ms): {parts}"
    if "sealing" in result:
        text += "\n\n" + sealing_table(result["sealing"])
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument(
        "--sealing-only", action="store_true", help="only (4): benchmarks/results/sealing.json"
    )
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("SKILLTUNE_WORKSPACES", tempfile.mkdtemp(prefix="skilltune-bench-ws-"))
    result: dict[str, Any] = {"cpus": os.cpu_count()}
    if args.sealing_only:
        result["sealing"] = sealing(args.rollouts)
        out = args.out or ROOT / "benchmarks" / "results" / "sealing.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(sealing_table(result["sealing"]) + f"\n\nJSON: {out}")
        return 0
    args.out = args.out or ROOT / "benchmarks" / "results" / "throughput.json"
    result["overhead"] = overhead(args.rollouts)
    print(f"(1) overhead: median {result['overhead']['median_ms']:.1f} ms", file=sys.stderr)
    result["efficiency"] = efficiency()
    if not args.no_ray:
        result["ray"] = local_vs_ray(32, 8)
    result["sealing"] = sealing(20)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
