"""Start-up benchmark: `skilltune --version`, `--help` and `validate`, before and after, beside the floor.

    .venv/bin/python benchmarks/startup.py                    # about a minute
    .venv/bin/python benchmarks/startup.py --runs 9 --baseline none

Every command is a fresh process: the `skilltune` console script next to this Python (what a user
runs), RUNS times after one warm-up, in interleaved rounds (each command once per round, so a
busy machine slows all of them alike); the figures are medians. Absolute times depend on the
machine, so each is also given as a ratio, measured in the same run: to `python -c pass` and to
the bare imports of typer, pydantic and rich, the libraries every command loads (issue 34's
floor: the targets are multiples of it, `validate` <= 2x), in wall-clock and in CPU time (user +
system, which a busy machine stretches less). For scale, two more references: the older floor,
those imports and pygit2 (no quick command needs pygit2 any more, so a ratio to it flatters them),
and a one-command typer app with a Path argument that builds one pydantic model: what any command
of a CLI on typer and pydantic models pays before doing anything of its own.

"before" is the package at --baseline (main before the lazy commands, 11fafbb), exported with git
archive into a temporary folder and run by the same Python and console script (its folder first on
PYTHONPATH) in the same rounds; "after" is this tree. Each side gets its own empty TMPDIR, and what
the commands left in it is counted (validate must write nothing). The load average before and
after the rounds is recorded: run it once on an idle machine and once beside a CPU hog
(`--out benchmarks/results/startup_loaded.json`).

Writes benchmarks/results/startup.json and prints the table.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REF = "11fafbb"  # main before the lazy commands (issue 34, item 10)
SUITE = "examples/mock-demo/suite"
BARE_IMPORTS = "import typer, pydantic, rich.console, rich.table"  # the floor of issue 34
# Beside it, for scale: the floor of the figures before issue 34 (pygit2 too), and a command no CLI
# on typer and pydantic models can undercut: typer builds a pydantic TypeAdapter for a command's
# arguments, and the first model loads pydantic's schema machinery and its plug-ins.
REFERENCES: dict[str, tuple[str, str]] = {
    "bare_imports_with_pygit2": ("bare imports and pygit2", f"{BARE_IMPORTS}, pygit2"),
    "typer_command": (
        "a typer command: one Path argument, one pydantic model",
        "import pathlib, typer, pydantic, rich.console, rich.table\n"
        "class Model(pydantic.BaseModel):\n    name: str\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def check(path: pathlib.Path) -> None:\n    Model(name=path.name)\n"
        "app(['.'], standalone_mode=False)\n",
    ),
}
# (label, arguments, target as a multiple of the bare imports)
COMMANDS: list[tuple[str, list[str], float | None]] = [
    ("skilltune --version", ["--version"], 1.2),
    ("skilltune --help", ["--help"], None),
    (f"skilltune validate {SUITE}", ["validate", SUITE], 2.0),
]


@dataclass
class Case:
    """One command line under one tree, and its timings."""

    label: str
    argv: list[str]
    env: dict[str, str]
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)

    def run(self) -> tuple[float, float]:
        """Wall-clock and CPU seconds (user + system) of one run."""
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        proc = subprocess.run(self.argv, cwd=ROOT, env=self.env, capture_output=True, check=False)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{self.label} failed ({proc.returncode}):\n{proc.stderr.decode()[-2000:]}")
        return elapsed, _children_cpu() - cpu0

    def figures(self) -> dict[str, Any]:
        return {
            "median_s": statistics.median(self.times),
            "times_s": [round(t, 4) for t in self.times],
            "median_cpu_s": statistics.median(self.cpu_times),
        }


def _children_cpu() -> float:
    """CPU seconds of the waited-for child processes so far: a busy machine stretches a command's
    wall-clock time more than its CPU time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _console_script() -> str:
    script = Path(sys.executable).parent / "skilltune"
    if not script.is_file():
        raise SystemExit(f"no skilltune console script next to {sys.executable}: run `make install`")
    return str(script)


def _export(ref: str, into: Path) -> str:
    """The skilltune package at ``ref``, written under ``into``; returns the full commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", commit, "skilltune"], cwd=ROOT, capture_output=True, check=True
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return commit


def _env(tree: Path, tmp: Path) -> dict[str, str]:
    env = {**_plain_env(), "PYTHONPATH": str(tree), "TMPDIR": str(tmp)}
    env.pop("SKILLTUNE_DEBUG", None)
    probe = subprocess.run(
        [sys.executable, "-c", "import skilltune; print(skilltune.__file__)"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(probe).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"PYTHONPATH={tree} does not win: skilltune comes from {probe}")
    return env


def _plain_env() -> dict[str, str]:
    """This environment without PYTHONDONTWRITEBYTECODE: the warm-up round writes each tree's
    bytecode, as an installed package has it, or every run would compile skilltune's modules again
    (tens of milliseconds that the floor, all of whose libraries have their bytecode, never pays)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(runs: int, baseline: str | None) -> dict[str, Any]:
    script = _console_script()
    with tempfile.TemporaryDirectory(prefix="skilltune-bench-startup-") as scratch:
        base = Path(scratch)
        trees: dict[str, Path] = {"after": ROOT}
        result: dict[str, Any] = {"baseline": None}
        if baseline:
            trees["before"] = base / "before"
            result["baseline"] = {"ref": baseline, "commit": _export(baseline, trees["before"])}
        tmps = {side: base / f"tmp-{side}" for side in trees}
        for tmp in tmps.values():
            tmp.mkdir()
        envs = {side: _env(tree, tmps[side]) for side, tree in trees.items()}
        plain = {**_plain_env(), "TMPDIR": str(base)}
        floor = Case("python -c pass", [sys.executable, "-c", "pass"], plain)
        bare = Case("bare imports", [sys.executable, "-c", BARE_IMPORTS], plain)
        references = {
            key: Case(label, [sys.executable, "-c", code], plain) for key, (label, code) in REFERENCES.items()
        }
        cases: dict[tuple[str, str], Case] = {}
        for label, args, _ in COMMANDS:
            for side in trees:
                cases[label, side] = Case(f"{label} ({side})", [script, *args], envs[side])
        for tmp in tmps.values():  # what probing the trees left is not the commands' doing
            for entry in tmp.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        everything = [floor, bare, *references.values(), *cases.values()]
        for round_ in range(runs + 1):  # round 0 warms up: bytecode, the page cache
            for case in everything:
                elapsed, cpu = case.run()
                if round_:
                    case.times.append(elapsed)
                    case.cpu_times.append(cpu)
            print(f"  round {round_}/{runs} done", file=sys.stderr)
        result["left_in_tmpdir"] = {side: len(list(tmp.iterdir())) for side, tmp in tmps.items()}
    result["floor"] = floor.figures()
    result["bare_imports"] = {"code": BARE_IMPORTS, **bare.figures()}
    for key, case in references.items():
        result[key] = {"label": case.label, "code": REFERENCES[key][1], **case.figures()}
    f, b = result["floor"]["median_s"], result["bare_imports"]["median_s"]
    b_cpu = result["bare_imports"]["median_cpu_s"]
    result["commands"] = []
    for label, args, target_x in COMMANDS:
        row: dict[str, Any] = {"command": label, "args": args, "target_x_bare": target_x}
        for side in trees:
            figures = cases[label, side].figures()
            figures["x_floor"] = figures["median_s"] / f
            figures["x_bare"] = figures["median_s"] / b
            figures["x_bare_cpu"] = figures["median_cpu_s"] / b_cpu
            for key in REFERENCES:
                figures[f"x_{key}"] = figures["median_s"] / result[key]["median_s"]
            row[side] = figures
        row["met"] = None if target_x is None else row["after"]["x_bare"] <= target_x
        result["commands"].append(row)
    return result


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms"


def table(result: dict[str, Any]) -> str:
    before = result["baseline"]
    head = f"before ({before['ref']})" if before else "before"
    floor, bare = result["floor"]["median_s"], result["bare_imports"]["median_s"]
    lines = [
        f"| (median of {result['runs']}) | {head} | after | after / floor | after / bare imports "
        "| CPU time: after / bare imports | after / bare imports and pygit2 | after / a typer command | target |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| `python -c pass` (floor) | | {_ms(floor)} | 1.0x | | | | | |",
        f"| bare imports: typer, pydantic, rich | | {_ms(bare)} | {bare / floor:.1f}x | 1.00x | 1.00x | | | |",
    ]
    for key in REFERENCES:
        ref = result[key]
        cpu = ref["median_cpu_s"] / result["bare_imports"]["median_cpu_s"]
        lines.append(
            f"| {ref['label']} | | {_ms(ref['median_s'])} | {ref['median_s'] / floor:.1f}x "
            f"| {ref['median_s'] / bare:.2f}x | {cpu:.2f}x | | | |"
        )
    for row in result["commands"]:
        was = "-"
        if before:
            was = f"{_ms(row['before']['median_s'])} ({row['before']['x_bare']:.2f}x bare, {row['before']['x_bare_cpu']:.2f}x CPU)"
        after = row["after"]
        target = ""
        if row["target_x_bare"] is not None:
            target = f"<= {row['target_x_bare']}x bare: {'met' if row['met'] else 'NOT met'}"
        lines.append(
            f"| `{row['command']}` | {was} | {_ms(after['median_s'])} | {after['x_floor']:.1f}x | "
            f"{after['x_bare']:.2f}x | {after['x_bare_cpu']:.2f}x | {after['x_bare_imports_with_pygit2']:.2f}x | "
            f"{after['x_typer_command']:.2f}x | {target} |"
        )
    left = ", ".join(f"{side} {n}" for side, n in sorted(result["left_in_tmpdir"].items()))
    runs = (result["runs"] + 1) * len(result["commands"])
    load = " -> ".join(
        ", ".join(f"{x:.2f}" for x in result[key]) for key in ("loadavg_before", "loadavg_after")
    )
    return (
        "\n".join(lines)
        + f"\n\nentries left in TMPDIR by {runs} command runs per side: {left}"
        + f"\nload average (1, 5, 15 min) before -> after the rounds: {load} on {result['cpus']} CPUs"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command (after one warm-up)")
    parser.add_argument(
        "--baseline",
        default=BASELINE_REF,
        help="git ref of the 'before' code, or 'none' (default %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    args = parser.parse_args()
    baseline = None if args.baseline.lower() == "none" else args.baseline
    result: dict[str, Any] = {
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    result["loadavg_before"] = os.getloadavg()
    result.update(measure(args.runs, baseline))
    result["loadavg_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
