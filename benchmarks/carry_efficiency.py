"""--carry screen beside the default on part (i)'s simulated runs (2,000 runs a design, the same seeds).

    .venv/bin/python benchmarks/carry_efficiency.py 2000 > benchmarks/results/carry_efficiency.txt

Prints per proposal model: gain per 1,000 training rollouts [95% bootstrap], training rollouts a run,
gain a run, keeps a run, (a) and (b) in % with their Wilson upper limits, and the paired ratio
carry / default [95%]. The full part (i) table (verdicts.py --parts i) also holds the design.
"""

import sys

import numpy as np

from benchmarks.efficiency import MODELS, designs, summarise, versus
from benchmarks.runsim import RunShape, training_runs

runs = int(sys.argv[1])
rng = np.random.default_rng(5)
for model, proposals in MODELS.items():
    arrays = {}
    for name in ["default (sequential + veto, spend, shared, screen, stops)", "default, --carry screen"]:
        gating, decider = designs()[name]
        got = training_runs(gating, RunShape(), proposals, runs, 20260, decider, per_run=True)
        arrays[name] = got.pop("per_run")
        r = summarise(arrays[name], rng)
        print(
            model,
            name,
            round(r["gain_per_1000"]["value"], 3),
            r["gain_per_1000"]["ci95"],
            round(r["training_rollouts_per_run"]),
            "gain/run",
            round(r["gain_per_run"], 3),
            "kept",
            r["kept_per_run"],
            "a",
            round(100 * r["useless_keep"], 1),
            round(100 * r["useless_keep_upper"], 1),
            "b",
            round(100 * r["worse_than_seed"], 1),
            round(100 * r["worse_than_seed_upper"], 1),
            flush=True,
        )
    a, b = arrays.values()
    print(model, "carry vs default", versus(b, a, rng))
