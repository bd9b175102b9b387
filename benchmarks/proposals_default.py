"""skilltune's default step against the designs issue 31 names, on the same simulated runs.

benchmarks/proposals.py sweeps every design; this runs the few a reader compares, 2,000 runs a design
for each of the three analysts (weak, base, hard): skill-trainer's strict K=3 gate with one proposal a
step, today's one-proposal step (``--proposals 1 --carry screen``), the step issue 31 planned, a
GEPA-style design, the simulator's recommended design, and skilltune's default (the recommended one
whose asks left over go round the failure groups again). It prints one line per design and the
eligible winner per analyst, and writes benchmarks/results/proposals_default.json (about 7 minutes
on our 2-core machine under load).

    .venv/bin/python benchmarks/proposals_default.py [RUNS]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proposals import (  # noqa: E402
    DEFAULT,
    GEPA,
    PLANNED,
    RECOMMENDED,
    STRICT,
    TODAY,
    WORLDS,
    compare,
    designs,
)

RESULTS = ROOT / "benchmarks" / "results" / "proposals_default.json"


def main(runs: int) -> None:
    every = designs()
    chosen = {k: every[k] for k in (STRICT, TODAY, PLANNED, GEPA, RECOMMENDED, DEFAULT)}
    rng = np.random.default_rng(11)
    out = {}
    for analyst in ("weak", "base", "hard"):
        got = compare(chosen, analyst, WORLDS["default"], runs, 20261204, rng)
        out[analyst] = got
        for name, r in got["designs"].items():
            lo, hi = r["gain_per_1000"]["ci95"]
            ratio = r["vs_strict"]
            print(
                f"{analyst} {name[:70]:70s} {r['gain_per_1000']['value']:.3f} [{lo:.3f}, {hi:.3f}] "
                f"x{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}] rollouts {r['training_rollouts_per_run']:.0f} "
                f"(a) {100 * r['useless_keep']:.1f} [{100 * r['useless_keep_upper']:.1f}] "
                f"(a/rule) {100 * r['useless_rule']:.1f} (b) {100 * r['worse_than_seed']:.1f} "
                f"[{100 * r['worse_than_seed_upper']:.1f}] calls {r['analyst_calls_per_run']:.1f}",
                flush=True,
            )
        print(f"{analyst} winner: {got['winner']}", flush=True)
    RESULTS.write_text(json.dumps(out, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
