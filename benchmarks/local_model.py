"""Local-model benchmark: does training raise a small model's held-out score, and does a pure-noise twin keep nothing?

On a chat model served on your machine (any OpenAI-compatible endpoint; see
examples/local-model/README.md for llama-cpp-python), through the direct ``openai``
target (the skill is the system prompt, the task the user message, the reply the output):

1. calibrate: the seed skill S0 on val, 2 replicates;
2. train: examples/local-model/suite (a support desk: ticket numbers, addresses and product areas
   from customer messages, exact scoring),
   the mock proposer drawing from the suite's proposer_pool (helpful rules and
   distractors) or ``--proposer api`` (a model as the analyst, on its own endpoint:
   ``--analyst-base-url``, ``--analyst-model``, each call bounded by ``--analyst-max-tokens``
   and ``--analyst-timeout-s``), the sequential gate, held-out test at the end; with
   ``--proposer api`` also the same run with the mock proposer, the ceiling beside it;
3. compare: S0, the best skill (and the ceiling's) and no skill on the held-out test split
   (S0 and the best skills come from the runs' own test rollouts through the shared cache);
4. the null twin (examples/local-model/null: the same tasks, each rollout scored by a
   seeded coin that never reads the reply): the same training run, and a comparison
   of S0 with the twin's best skill from step 2 on its test split.

Such a server answers one request at a time, so rollouts run one by one. Before
anything else the script times a few requests, sizes the runs (steps per run, the
gate's replicate cap) so the worst case fits ``--budget-min``, prints that plan, and
gives each training run its share as a wall-clock budget. It ends with what the
proposer did (edits proposed, dropped and why, applied, kept, a sample of its answers),
held-out S0 vs best with 95% CIs, the null runs' verdicts, rollouts and wall time per
phase, and writes benchmarks/results/local_model.json (local_model_api.json with
``--proposer api``). Not part of CI (it needs a model).

    python benchmarks/local_model.py --base-url http://127.0.0.1:8080/v1 --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proposer_log import print_summary, run_summary  # noqa: E402
from skilltune.errors import SkilltuneError  # noqa: E402
from skilltune.measure.calibrate import calibrate  # noqa: E402
from skilltune.measure.compare import compare  # noqa: E402
from skilltune.progress import PlainReporter  # noqa: E402
from skilltune.runfiles import UnitRecord  # noqa: E402
from skilltune.skill import load_skill  # noqa: E402
from skilltune.suite import load_suite  # noqa: E402
from skilltune.training import train  # noqa: E402

EXAMPLE = ROOT / "examples" / "local-model"
SUITE = EXAMPLE / "suite"
NULL = EXAMPLE / "null"
SKILL = EXAMPLE / "skill"
RESULTS = ROOT / "benchmarks" / "results"
CAL_REPS = 2
BATCH = 8
PROBES = 3
GROWTH_CAP = 2.0  # the seed is short: room for the 2-4 pool rules a step appends
HARNESS_S = 0.3  # per rollout on top of the model call: workspace, git baseline, records


# --- the endpoint ---------------------------------------------------------------------------------
def _post(url: str, body: dict[str, Any], key: str | None, timeout: float) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer: dict[str, Any] = json.load(response)
    return answer


def measure(base_url: str, model: str, key: str | None, max_tokens: int) -> float:
    """Median seconds of a rollout-sized chat call (the seed skill as system prompt, a val task)."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=30) as response:
            response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise SystemExit(
            f"no model server at {base_url} ({exc}); start one, e.g.\n"
            "  python -m llama_cpp.server --model MODEL.gguf --host 127.0.0.1 --port 8080 "
            "--model_alias NAME --n_ctx 4096"
        ) from None
    system = (SKILL / "SKILL.md").read_text()
    prompts = [t.prompt for t in load_suite(SUITE).tasks("val")][:PROBES]
    times = []
    for prompt in prompts:
        body = {
            "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
        }
        t0 = time.monotonic()
        _post(f"{base_url}/chat/completions", body, key, timeout=300)
        times.append(time.monotonic() - t0)
    return statistics.median(times) + HARNESS_S


# --- the plan -------------------------------------------------------------------------------------
def sizes() -> dict[str, int]:
    suite = load_suite(SUITE)
    return {split: len(suite.tasks(split)) for split in ("train", "val", "test")}


PROPOSALS = 4  # --proposals: the default
EDITS = 4  # the most edits a step keeps (the edit budget's start): its leave-one-out screens


def worst_case(
    n: dict[str, int],
    steps: int,
    max_reps: int,
    test_reps: int,
    ceiling: bool = False,
    proposals: int = PROPOSALS,
) -> dict[str, int]:
    """Rollouts each phase may cost at most (``ceiling``: the mock proposer's run beside an analyst's):
    a step's train batch, its screens (each proposal at most on the batch, the candidate and one
    leave-one-out screen per edit) and its gate."""
    screens = 1 if proposals == 1 else proposals + 1 + EDITS
    step = min(BATCH, n["train"]) * (1 + screens) + 2 * n["val"] * max_reps
    train_run = n["val"] + steps * step + 2 * n["test"] * test_reps
    # The ceiling run shares S0's val baseline and test rollouts with the analyst's run (cache).
    extra = {"ceiling train": steps * step + n["test"] * test_reps} if ceiling else {}
    return {
        "calibrate": n["val"] * CAL_REPS,
        "train": train_run,
        **extra,
        # A run that kept something tested S0 and best itself (counted in "train"; compare reuses
        # them through the cache and adds no skill); one that kept nothing did not, and compare
        # runs S0 and no skill. Either way the two phases add one arm beyond the run's own.
        "compare": n["test"] * test_reps,
        "null train": train_run,
        "null compare": 2 * n["test"] * test_reps,
    }


def plan(
    n: dict[str, int],
    seconds: float,
    budget_min: float,
    steps: int,
    max_reps: int,
    test_reps: int,
    analyst_s: float = 0.0,
    proposals: int = PROPOSALS,
) -> tuple[int, int]:
    """The most steps (then the highest replicate cap) whose worst case fits the budget.
    ``analyst_s``: the wall limit of an analyst call, paid once per ask (``proposals`` a step) by the
    analyst's run and its null twin (which then also has the mock proposer's ceiling run)."""

    def cost(s: int, reps: int) -> float:
        rollouts = sum(worst_case(n, s, reps, test_reps, ceiling=analyst_s > 0, proposals=proposals).values())
        return rollouts * seconds + 2 * s * proposals * analyst_s

    for s in range(steps, 0, -1):
        for reps in range(max_reps, 2, -1):
            if cost(s, reps) <= budget_min * 60:
                return s, reps
    need = cost(1, 3) / 60
    raise SystemExit(
        f"at {seconds:.1f} s per rollout even 1 step per run with a cap of 3 replicates may take "
        f"{need:.0f} min, over --budget-min {budget_min:g}: raise the budget, lower --test-reps"
        + (" or --analyst-timeout-s" if analyst_s else "")
        + ", or run when the machine is idle"
    )


# --- running and reading --------------------------------------------------------------------------
def timed(label: str, walls: dict[str, float], fn: Callable[[], Any]) -> Any:
    print(f"-- {label}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        return fn()
    finally:
        walls[label] = time.monotonic() - t0


def rollouts_made(folder: Path) -> int:
    """Rollouts run (not copied from the cache) under ``folder``."""
    made = 0
    for path in folder.rglob("record.json"):
        if json.loads(path.read_text()).get("cached_from") is None:
            made += 1
    return made


def units(run_dir: Path) -> list[UnitRecord]:
    found = [UnitRecord.read(p) for p in sorted((run_dir / "steps").glob("*/step.json"))]
    found += [UnitRecord.read(p) for p in sorted((run_dir / "steps").glob("*/epoch.json"))]
    return sorted(found, key=lambda u: (u.step, u.kind))


def fmt_ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def fmt_p(p: float | None) -> str:
    return "-" if p is None else ("<1e-6" if p < 1e-6 else f"{p:.3g}")


def fmt_wall(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}"


# --- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base-url", required=True, help="the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1"
    )
    parser.add_argument("--model", required=True, help="the model name the server answers to")
    parser.add_argument(
        "--api-key-env", help="variable holding the endpoint's key (a local server needs none)"
    )
    parser.add_argument(
        "--budget-min", type=float, default=150.0, help="wall-time budget for the whole script"
    )
    parser.add_argument("--steps", type=int, default=3, help="training steps per run, at most")
    parser.add_argument(
        "--max-reps", type=int, default=4, help="the sequential gate's replicate cap, at most"
    )
    parser.add_argument(
        "--test-reps",
        type=int,
        default=2,
        help="replicates per held-out task per arm (1 on a loaded machine)",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=32, help="reply limit per rollout (a label is 1-3 tokens)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.1,
        help="sampling temperature (a 0.5B model garbles copies at 0.7)",
    )
    parser.add_argument("--proposer", choices=("mock", "api"), default="mock")
    parser.add_argument(
        "--analyst-model", "--proposer-model", help="--proposer api: the analyst's model (default: --model)"
    )
    parser.add_argument(
        "--analyst-base-url",
        "--proposer-base-url",
        help="--proposer api: the analyst's endpoint (default: --base-url)",
    )
    parser.add_argument(
        "--analyst-api-key-env", help="--proposer api: variable holding the analyst endpoint's key"
    )
    parser.add_argument(
        "--analyst-max-tokens", type=int, default=1024, help="--proposer api: answer limit per analyst call"
    )
    parser.add_argument(
        "--analyst-timeout-s",
        type=float,
        default=900.0,
        help="--proposer api: wall limit of one analyst call, its one retry included",
    )
    parser.add_argument(
        "--proposals", type=int, default=PROPOSALS, help="asks to the proposer a step (train --proposals)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "runs" / "local-model"), help="where the runs go")
    parser.add_argument("--agent", default="openai", help=argparse.SUPPRESS)  # mock: a dry run of the flow
    args = parser.parse_args(argv)
    base_url = args.base_url.rstrip("/")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"  # this invocation's rollouts only: S0 and best reach compare from the run
    shutil.rmtree(cache, ignore_errors=True)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None

    agent_options: dict[str, Any] = {}
    if args.agent != "mock":
        agent_options = {"base_url": base_url, "model": args.model, "max_tokens": args.max_tokens}
        if args.api_key_env:
            agent_options["api_key_env"] = args.api_key_env
        agent_options["temperature"] = args.temperature
    proposer_options: dict[str, Any] = {}
    analyst_s = 0.0
    if args.proposer == "api":
        analyst_s = args.analyst_timeout_s
        proposer_options = {
            "model": args.analyst_model or args.model,
            "base_url": (args.analyst_base_url or base_url).rstrip("/"),
            "max_tokens": args.analyst_max_tokens,
            # One attempt of at most half the limit, one retry: a call never outlasts the limit.
            "timeout_s": analyst_s / 2,
            "wall_limit_s": analyst_s,
            "max_retries": 1,
        }
        if args.analyst_api_key_env or args.api_key_env:
            proposer_options["api_key_env"] = args.analyst_api_key_env or args.api_key_env

    seconds = HARNESS_S if args.agent == "mock" else measure(base_url, args.model, key, args.max_tokens)
    n = sizes()
    steps, max_reps = plan(
        n, seconds, args.budget_min, args.steps, args.max_reps, args.test_reps, analyst_s, args.proposals
    )
    worst = worst_case(
        n, steps, max_reps, args.test_reps, ceiling=args.proposer == "api", proposals=args.proposals
    )
    budget_s = args.budget_min * 60
    fixed_s = (worst["calibrate"] + worst["compare"] + worst["null compare"]) * seconds
    train_runs = 3 if args.proposer == "api" else 2
    train_hours = max((budget_s - fixed_s) / train_runs, 60.0) / 3600
    print(
        f"local model: {args.model} at {base_url} ({args.agent} target, max_tokens {args.max_tokens}, "
        f"temperature {args.temperature:g})"
    )
    if args.proposer == "api":
        print(
            f"analyst: {proposer_options['model']} at {proposer_options['base_url']} "
            f"(max_tokens {args.analyst_max_tokens}, at most {analyst_s:g} s per call); "
            "the mock proposer's run beside it is the ceiling"
        )
    print(
        f"measured {seconds:.1f} s per rollout (median of {PROBES} requests, harness included); "
        f"plan: {steps} step(s) per run, gate cap {max_reps} replicates, batch {BATCH}, "
        f"test {n['test']} tasks x {args.test_reps} reps"
    )
    print(
        f"budget: {args.budget_min:g} min; worst case {sum(worst.values())} rollouts "
        f"(~{sum(worst.values()) * seconds / 60:.0f} min): "
        + ", ".join(f"{k} {v}" for k, v in worst.items())
        + (
            f", {2 * steps * args.proposals} analyst call(s) <= {2 * steps * args.proposals * analyst_s / 60:.0f} min"
            if analyst_s
            else ""
        )
        + f"; each training run stops at {train_hours * 60:.0f} min"
    )
    sys.stdout.flush()  # fmt: skip

    walls: dict[str, float] = {}
    common: dict[str, Any] = {
        "agent": args.agent,
        "agent_options": agent_options,
        "workers": 1,
        "cache": cache,
    }
    settings: dict[str, Any] = {
        "proposer": args.proposer,
        "proposer_options": proposer_options,
        "max_steps": steps,
        "proposals": args.proposals,
        "batch": BATCH,
        "test_reps": args.test_reps,
        "gate_options": {"max_reps": max_reps},
        "seed": args.seed,
        "runs_dir": str(out),
        "budget_hours": train_hours,
        "growth_cap": GROWTH_CAP,
        **common,
    }
    reporter = PlainReporter()
    t_start = time.monotonic()
    try:
        cal = timed("calibrate", walls, lambda: calibrate(
            SUITE, SKILL, split="val", reps=CAL_REPS, seed=args.seed, out=out / "calibrate", force=True, **common
        ))  # fmt: skip
        run = timed("train", walls, lambda: train(
            SUITE, SKILL, tag="support", force=True, reporter=reporter, **settings
        ))  # fmt: skip
        ceiling = None
        if args.proposer == "api":
            mock = settings | {"proposer": "mock", "proposer_options": {}}
            ceiling = timed("ceiling train", walls, lambda: train(
                SUITE, SKILL, tag="ceiling", force=True, reporter=reporter, **mock
            ))  # fmt: skip
        seed_skill, best_skill = load_skill(SKILL), load_skill(Path(run.run_dir) / "best_skill")
        arms = {"S0": seed_skill, "best": best_skill, "noskill": None}
        if best_skill.hash == seed_skill.hash:
            arms.pop("best")
        if ceiling is not None:
            ceiling_skill = load_skill(Path(ceiling.run_dir) / "best_skill")
            if ceiling_skill.hash not in {seed_skill.hash, best_skill.hash}:
                arms["ceiling"] = ceiling_skill
        held_out = timed("compare", walls, lambda: compare(
            SUITE, arms, split="test", reps=args.test_reps, seed=args.seed, out=out / "compare", force=True, **common
        ))  # fmt: skip
        null_run = timed("null train", walls, lambda: train(
            NULL, SKILL, tag="null", force=True, reporter=reporter, **settings
        ))  # fmt: skip
        null_arms = {"S0": seed_skill, "support-best": best_skill}
        null_held_out = None
        if best_skill.hash != seed_skill.hash:
            null_held_out = timed("null compare", walls, lambda: compare(
                NULL, null_arms, split="test", reps=args.test_reps, seed=args.seed, out=out / "null-compare",
                force=True, **common,
            ))  # fmt: skip
    except SkilltuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    total = time.monotonic() - t_start

    made = {
        "calibrate": rollouts_made(out / "calibrate"),
        "train": rollouts_made(Path(run.run_dir)),
        **({"ceiling train": rollouts_made(Path(ceiling.run_dir))} if ceiling is not None else {}),
        "compare": rollouts_made(out / "compare"),
        "null train": rollouts_made(Path(null_run.run_dir)),
        "null compare": rollouts_made(out / "null-compare") if null_held_out is not None else 0,
    }
    main_units = units(Path(run.run_dir))
    null_units = units(Path(null_run.run_dir))

    print()
    print(f"{'phase':<14} {'rollouts':>8} {'wall':>7}")
    for phase, count in made.items():
        print(f"{phase:<14} {count:>8} {fmt_wall(walls.get(phase, 0.0)):>7}")
    print(f"{'total':<14} {sum(made.values()):>8} {fmt_wall(total):>7}")
    print()
    print(f"calibrate (val, S0, {CAL_REPS} reps): pass rate {cal.pass_rate}, regime {cal.regime}")
    runs = {"train": run} | ({"ceiling": ceiling} if ceiling is not None else {})
    proposers = {}
    for label, each in runs.items():
        print(f"{label}: {each.state}: {each.reason}")
        for u in units(Path(each.run_dir)):
            print(
                f"  {u.kind} {u.step}: {u.verdict:<7} val {u.val_candidate} vs {u.val_incumbent}; {u.reason[:90]}"
            )
        proposers[label] = run_summary(Path(each.run_dir))
        print_summary(f"  proposer ({'mock' if label == 'ceiling' else args.proposer})", proposers[label])
    print()
    print(f"held-out (test, {n['test']} tasks x {args.test_reps} reps, {held_out.metric}):")
    for name, arm in held_out.arms.items():
        print(f"  {name:<8} {arm.mixed:.3f}  (hard {arm.hard_acc:.3f}, {arm.n_rollouts} rollouts)")
    print(f"  {'pair':<16} {'diff':>7}  {'95% CI':<18} {'p':>8}  verdict")
    for p in held_out.pairs:
        print(
            f"  {p.a + ' -> ' + p.b:<16} {p.diff:+7.3f}  {fmt_ci(p.ci95):<18} {fmt_p(p.p_value):>8}  {p.verdict}"
        )
    print()
    kept = sum(1 for u in null_units if u.verdict == "keep")
    print(f"null twin: {null_run.state}: {null_run.reason}; kept {kept} of {len(null_units)} unit(s)")
    for u in null_units:
        print(f"  {u.kind} {u.step}: {u.verdict:<7} {u.reason[:100]}")
    if null_held_out is not None:
        for p in null_held_out.pairs:
            print(
                f"  held-out on the coin, {p.a} -> {p.b}: {p.diff:+.3f} {fmt_ci(p.ci95)} p {fmt_p(p.p_value)}: {p.verdict}"
            )

    result = {
        "model": args.model,
        "base_url": base_url,
        "agent": args.agent,
        "agent_options": {k: v for k, v in agent_options.items() if k != "api_key_env"},
        "proposer": args.proposer,
        "proposer_options": {k: v for k, v in proposer_options.items() if k != "api_key_env"},
        "proposers": proposers,
        "seconds_per_rollout_measured": round(seconds, 2),
        "budget_min": args.budget_min,
        "plan": {"steps": steps, "max_reps": max_reps, "batch": BATCH, "test_reps": args.test_reps,
                 "proposals": args.proposals, "worst_case": worst},
        "rollouts": made,
        "wall_s": {k: round(v, 1) for k, v in walls.items()} | {"total": round(total, 1)},
        "calibration": {"pass_rate": cal.pass_rate, "regime": cal.regime, "noise_sd": cal.noise_sd},
        "train": {"state": run.state, "reason": run.reason, "units": [u.model_dump(mode="json") for u in main_units]},
        "ceiling": None if ceiling is None else {"state": ceiling.state, "reason": ceiling.reason},
        "held_out": {
            "arms": {k: {"mixed": a.mixed, "hard": a.hard_acc, "rollouts": a.n_rollouts} for k, a in held_out.arms.items()},
            "pairs": [p.model_dump(mode="json") for p in held_out.pairs],
        },
        "null": {
            "state": null_run.state,
            "reason": null_run.reason,
            "units": [u.model_dump(mode="json") for u in null_units],
            "held_out": None if null_held_out is None else [p.model_dump(mode="json") for p in null_held_out.pairs],
        },
    }  # fmt: skip
    if args.agent != "mock":
        path = RESULTS / ("local_model_api.json" if args.proposer == "api" else "local_model.json")
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nresults: {path.relative_to(ROOT)}; runs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
