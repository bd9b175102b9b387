"""Issue 35's seeds tables: the trigger demo over seeds, its null twin over seeds, and null labellings.

    .venv/bin/python benchmarks/trigger_seeds.py                     # the three tables (about 50 runs)
    .venv/bin/python benchmarks/trigger_seeds.py --only labellings   # one of them
    .venv/bin/python benchmarks/trigger_seeds.py --only labellings --labellings-from 20 --labellings 40

Every run is train's command as the examples' READMEs give it, at the defaults, in a temporary
runs folder: `skilltune train SUITE --skill examples/trigger-demo/skill --agent mock --proposer
mock --component description --seed S`.

- `demo`: examples/trigger-demo/suite, seeds 0-9 (issue 35: a better description kept in >= 8).
- `null`: examples/trigger-null/suite, seeds 0-19: the demo's requests under one coin-flip
  labelling (salt `coin`), fixed for every seed.
- `labellings`: the demo's requests under labelling k (salt `coin-k`, k = 0-19), run with seed k.
  A gate's error rate is a rate over what it cannot see, the labels of the val requests; a fixed
  labelling shares its luck with every seed that runs on it (examples/trigger-null/README.md), so a
  false-keep rate is read over labellings, one run each.

A query of labelling `SALT` should load the skill when the first byte of sha256(SALT + "|" +
query) is even (the rule examples/trigger-null was written by: `relabelled(..., "coin")` gives its
files byte for byte). Writes benchmarks/results/trigger_seeds.json and prints the tables.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "trigger-demo"
NULL = ROOT / "examples" / "trigger-null"
SKILLTUNE = Path(sys.executable).with_name("skilltune")
SPLITS = ("train", "val", "test")


def coin(salt: str, query: str) -> bool:
    return hashlib.sha256(f"{salt}|{query}".encode()).digest()[0] % 2 == 0


def relabelled(source: Path, out: Path, salt: str) -> Path:
    """The trigger suite at `source` with every label drawn by the coin of `salt`, written to `out`."""
    out.mkdir(parents=True)
    scoring = (NULL / "suite" / "scoring.md").read_text(encoding="utf-8")
    (out / "scoring.md").write_text(scoring.replace('sha256("coin|"', f'sha256("{salt}|"'), encoding="utf-8")
    evals = json.loads((source / "trigger_evals.json").read_text(encoding="utf-8"))
    lines = [json.dumps({"query": e["query"], "should_trigger": coin(salt, e["query"])}) for e in evals]
    (out / "trigger_evals.json").write_text("[\n  " + ",\n  ".join(lines) + "\n]\n", encoding="utf-8")
    for split in SPLITS:
        rows = [
            json.loads(line) for line in (source / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        text = "".join(
            json.dumps({**row, "should_trigger": coin(salt, row["prompt"])}) + "\n" for row in rows
        )
        (out / f"{split}.jsonl").write_text(text, encoding="utf-8")
    return out


def one_run(suite: Path, seed: int, runs: Path, tag: str) -> dict[str, Any]:
    command = [
        str(SKILLTUNE), "train", str(suite), "--skill", str(DEMO / "skill"), "--agent", "mock",
        "--proposer", "mock", "--component", "description", "--seed", str(seed), "--tag", tag,
        "--runs-dir", str(runs), "--quiet",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=runs, check=False)
    if done.returncode != 0:  # a run that keeps nothing ends no-progress, exit 0
        raise SystemExit(f"{tag}: exit {done.returncode}\n{done.stderr[-2000:]}")
    run = runs / tag
    with (run / "results.tsv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    gated = [r for r in rows if r["val_candidate"]]
    kept = [r for r in rows if r["verdict"] == "keep"]
    last = gated[-1] if gated else None
    entry: dict[str, Any] = {
        "seed": seed,
        "kept": len(kept),
        "val_seed": float(gated[0]["val_incumbent"]) if gated else None,
        "val_last_gated": float(last["val_candidate"]) if last else None,
        "terminal": (run / "TERMINAL").read_text(encoding="utf-8").strip(),
    }
    comparison = run / "comparison.json"
    if comparison.is_file():
        pair = json.loads(comparison.read_text(encoding="utf-8"))["pairs"][0]
        entry["held_out"] = {"diff": pair["diff"], "ci95": pair["ci95"], "verdict": pair["verdict"]}
    return entry


def table(name: str, jobs: list[tuple[Path, int, str]], workers: int, tmp: Path) -> list[dict[str, Any]]:
    runs = tmp / name
    runs.mkdir()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(lambda job: one_run(job[0], job[1], runs, job[2]), jobs))
    for row, (_, _, tag) in zip(rows, jobs, strict=True):
        row["run"] = tag
        held = row.get("held_out")
        shown = f"held-out {held['diff']:+.3f} {held['verdict']}" if held else "no held-out test"
        val = (
            f"val seed {row['val_seed']:.3f}, last gated {row['val_last_gated']:.3f}"
            if row["val_seed"] is not None
            else "no gate"
        )
        print(f"{name} {tag}: kept {row['kept']}; {val}; {shown}")
    keeping = sum(r["kept"] > 0 for r in rows)
    print(f"{name}: {keeping} of {len(rows)} runs keep a rewrite\n")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["demo", "null", "labellings"], action="append", default=None)
    parser.add_argument("--demo-seeds", type=int, default=10)
    parser.add_argument("--null-seeds", type=int, default=20)
    parser.add_argument("--labellings", type=int, default=20)
    parser.add_argument("--labellings-from", type=int, default=0, help="the first labelling's k")
    parser.add_argument("--workers", type=int, default=2, help="runs at once")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "trigger_seeds.json")
    args = parser.parse_args()
    chosen = args.only or ["demo", "null", "labellings"]
    stored: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="trigger-seeds-") as name:
        tmp = Path(name)
        for which in chosen:
            started = time.monotonic()
            if which == "demo":
                jobs = [(DEMO / "suite", s, f"demo-s{s}") for s in range(args.demo_seeds)]
            elif which == "null":
                jobs = [(NULL / "suite", s, f"null-s{s}") for s in range(args.null_seeds)]
            else:
                suites = tmp / "suites"
                jobs = [(relabelled(DEMO / "suite", suites / f"coin-{k}", f"coin-{k}"), k, f"coin-{k}-s{k}")
                        for k in range(args.labellings_from, args.labellings_from + args.labellings)]  # fmt: skip
            rows = table(which, jobs, args.workers, tmp)
            # runs of other seeds or labellings stored before are kept beside these (each run is its tag)
            tags = {row["run"] for row in rows}
            before = [r for r in stored.get(which, {}).get("runs", []) if r["run"] not in tags]
            seconds = round(time.monotonic() - started, 1)  # with the earlier runs' time where any are kept
            stored[which] = {
                "runs": before + rows,
                "keeping": sum(r["kept"] > 0 for r in before + rows),
                "of": len(before + rows),
                "seconds": seconds + (stored[which].get("seconds", 0.0) if before else 0.0),
            }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(stored, indent=2) + "\n")
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
