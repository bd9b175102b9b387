"""What every unit of a run works with: its settings turned into parts, the run directory, git.

``Setup`` checks a TrainConfig and builds the parts (suite, agent, proposer, gate, plan)
before anything is written, so bad input fails first. ``RunContext`` adds what exists
once the run directory does (the seed, the skill's repository, the session) and the two
small services every unit uses: seeded RNGs and journaled stages.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from skilltune.execute import Executor
from skilltune.gate.run import RunGate
from skilltune.progress import Reporter, RunProgress
from skilltune.propose import EditBudget, Proposer, make_proposer
from skilltune.rollout.runner import RetryPolicy
from skilltune.rundir import RunDir
from skilltune.runfiles import StageDone, TrainConfig
from skilltune.session import RolloutSession
from skilltune.skill import Candidate
from skilltune.skill_repo import SkillRepo
from skilltune.suite import Suite, load_suite
from skilltune.training.agents import open_rollouts
from skilltune.training.budget import Budget, Plan
from skilltune.training.rollouts import RunRollouts
from skilltune.training.session import Session
from skilltune.training.units import Unit, load_seed, unit_order


@dataclass(frozen=True)
class Setup:
    """A run's settings checked and turned into the parts it runs with."""

    config: TrainConfig
    suite: Suite
    rollouts: RolloutSession  # every target agent's, by label
    proposer: Proposer
    gate: RunGate
    plan: Plan

    @classmethod
    def of(
        cls,
        config: TrainConfig,
        seed: Candidate,
        retry: RetryPolicy | None = None,
        executor: Executor | None = None,
    ) -> Setup:
        """Raises UsageError for anything the settings get wrong (nothing is written)."""
        suite = load_suite(
            config.suite, prompt_variant=config.prompt_variant, judge_options=config.judge_options
        )
        rollouts = open_rollouts(suite, config, seed, retry, executor)
        proposer = make_proposer(config.proposer, suite, config.proposer_options)
        gate = RunGate(
            config.gate, config.metric, config.reps, config.gate_options,
            config.alpha, config.alpha_policy, config.planned_decisions,
        )  # fmt: skip
        plan = Plan.of(
            suite, config.batch, config.reps, config.test_reps, config.screen,
            config.slow_update_sample, gate.max_replicates, len(rollouts.targets), config.asks,
            max(config.edit_budget.start, config.edit_budget.end),
        )  # fmt: skip
        return cls(config, suite, rollouts, proposer, gate, plan)

    @property
    def planned_rollouts(self) -> int:
        return self.plan.total(self.config.total_steps, self.config.total_epochs)


class RunContext:
    """One session's view of a run: its parts, directory, seed, git repository and rollouts."""

    def __init__(self, setup: Setup, run: RunDir, reporter: Reporter, suite_hash: str) -> None:
        c = setup.config
        self.config = c
        self.suite = setup.suite
        self.proposer = setup.proposer
        self.gate = setup.gate
        self.plan = setup.plan
        self.run = run
        self.reporter = reporter
        self.suite_hash = suite_hash
        self.order: list[Unit] = unit_order(c)
        self.edit_budget = EditBudget(
            c.edit_budget.schedule, c.edit_budget.start, c.edit_budget.end, c.total_steps
        )
        self.budget = Budget(c.budget_rollouts, c.budget_tokens, c.budget_usd, c.budget_hours)
        self.progress = RunProgress(
            tag=c.tag, max_steps=c.total_steps, rollouts_planned=setup.planned_rollouts
        )
        self.session = Session(run, reporter)
        self.proposer.stop_requested = self.session.stop_requested  # a stop ends a proposer call at once
        self.rollouts = RunRollouts(c, setup.rollouts, self.session, self.progress, reporter)
        self.seed: Candidate = load_seed(run)
        self.repo = SkillRepo(run.skill_repo, f"skilltune/{self.seed.name}/{c.tag}")

    def rng(self, *purpose: object) -> random.Random:
        """An RNG derived from (run seed, purpose): the same draw however the run was interrupted."""
        return random.Random("|".join(str(p) for p in (self.config.seed, *purpose)))

    @contextmanager
    def stage(self, unit: str, name: str) -> Iterator[dict[str, Any]]:
        """Journal a stage's wall time, and what the body puts in the dict (rollouts, calls, tokens);
        a stage that ran rollouts and said nothing of tokens gets the agents' tokens."""
        t0 = time.monotonic()
        before = (self.rollouts.tokens_in, self.rollouts.tokens_out)
        judged = self.rollouts.judge_usage()
        info: dict[str, Any] = {}
        yield info
        if "tokens_in" not in info and "rollouts" in info:
            info["tokens_in"] = self.rollouts.tokens_in - before[0]
            info["tokens_out"] = self.rollouts.tokens_out - before[1]
        spent = [now - then for now, then in zip(self.rollouts.judge_usage(), judged, strict=True)]
        if any(spent):  # what the judge cost on this stage's rollouts
            info["judge_tokens_in"], info["judge_tokens_out"] = int(spent[0]), int(spent[1])
            info["judge_cost_usd"] = round(spent[2], 6)
        self.run.journal(StageDone(unit=unit, stage=name, seconds=round(time.monotonic() - t0, 3), **info))
