"""--carry screen beside the default (nothing run ahead) and the former default (the incumbent's
next round run ahead), on part (i)'s simulated runs (2,000 runs a design, the same seeds).

    .venv/bin/python benchmarks/carry_efficiency.py 2000 > benchmarks/results/carry_efficiency.txt

Prints per proposal model: gain per 1,000 training rollouts [95% bootstrap], training rollouts a run,
gain a run, keeps a run, (a) and (b) in % with their Wilson upper limits, and the paired ratio
--carry screen / former default and --carry screen / default [95%]. The full part (i) table (verdicts.py
--parts i) also holds the designs.
"""

import sys

import numpy as np

from benchmarks.efficiency import CARRY, DEFAULT, FORMER, MODELS, designs, summarise, versus
from benchmarks.runsim import RunShape, training_runs

runs = int(sys.argv[1])
rng = np.random.default_rng(5)
for model, proposals in MODELS.items():
    arrays = {}
    for name in [CARRY, FORMER, DEFAULT]:
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
    carry, former, default = arrays.values()
    print(model, "--carry screen vs former default", versus(carry, former, rng))
    print(model, "--carry screen vs default", versus(carry, default, rng))
