"""record.json (one rollout) and comparison.json (arms on a held-out split)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from skilltune.metric import Metric
from skilltune.runfiles.base import Migration, RunFile
from skilltune.sandbox import RolloutSandbox
from skilltune.score.base import Score, ScoringUsage
from skilltune.score.trigger import TriggerStats

Phase = Literal["train", "screen", "gate", "test", "eval"]
RolloutStatus = Literal["ok", "task_failed", "timeout", "infra_error", "scoring_error", "crashed", "unscored"]
ScoredStatus = Literal["ok", "task_failed", "timeout"]
# No decision is made on a batch holding one of these: they are no result, neither good nor bad.
UNDECIDED = ("infra_error", "crashed", "unscored")


class RolloutFiles(BaseModel):
    conversation: str = "conversation.json"
    events: str = "events.jsonl"
    diff: str = "diff.patch"
    output: str = "output.txt"
    score: str | None = "score.json"


class FailedAttempt(BaseModel):
    """An attempt of a rollout that was run again: how it ended and why. ``status`` is the agent's
    (``crashed``: the harness itself failed; ``stalled``: the liveness check killed the agent);
    ``events`` is the attempt's events.jsonl in the record folder (its raw logs lie beside it)."""

    attempt: int  # counted from 1
    status: RolloutStatus
    stalled: bool = False
    reason: str | None = None
    wall_s: float
    events: str | None = None


_INERT_AGENTS = ("mock", "openai", "anthropic")  # the built-ins that start no process (schema 7)


def _sandbox_unknown(raw: dict[str, Any]) -> dict[str, Any]:
    # Before schema 8 no rollout was sealed: a CLI's agent saw what the user sees.
    return {"sandbox": "inert" if raw.get("agent") in _INERT_AGENTS else "none"} | raw


def _no_attempt_history(raw: dict[str, Any]) -> dict[str, Any]:
    # Schema 3 and before kept only the number of attempts; what the failed ones said is lost.
    return raw | {"attempt_history": []}


class RolloutRecord(RunFile):
    """The outcome of one rollout (record.json).

    Invariants: ``score`` is set iff ``status`` is ok, task_failed or timeout;
    ``infra_error`` and ``crashed`` are never task failures and are never scored;
    ``unscored``: the agent finished (``pending_status`` says how) but the scorer's
    service (the judge's endpoint) failed after its retries; the record folder holds
    what scoring it needs, and a resume scores it from there. ``judge`` is what the
    judge spent on this rollout (tokens, USD). ``candidate`` is the full candidate
    hash or ``"noskill"``; ``attempt_history`` holds every attempt before the last (the
    record's own status is the last one's), so ``attempts`` is ``len(attempt_history) + 1``
    for a rollout that ran. ``skill_loaded`` is whether the agent loaded the skill, as its backend
    reported it (None: the backend cannot tell, or the rollout ended before a decision).
    ``agent`` is the backend's name; ``target`` the label of the agent in a run with several (two
    agents may share a backend, e.g. two mock configurations), left out of the file otherwise.
    """

    MIGRATIONS: ClassVar[dict[int, Migration]] = {3: _no_attempt_history, 7: _sandbox_unknown}
    OMIT_WHEN_EMPTY = ("target",)

    task_id: str
    split: str
    phase: Phase
    replicate: int
    seed: int
    candidate: str
    agent: str
    target: str | None = None  # the label of the agent that ran it, in a run with several (None: one)
    model: str | None = None
    options_hash: str
    task_hash: str
    sandbox: RolloutSandbox = "none"  # bwrap: sealed; inert: the backend starts no process (sandbox.py)
    status: RolloutStatus
    reason: str | None = None
    score: Score | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    cost_estimated: bool = False
    turns: int | None = None
    wall_s: float
    attempts: int = 1
    attempt_history: list[FailedAttempt] = Field(default_factory=list)
    started_at: str
    files: RolloutFiles = Field(default_factory=RolloutFiles)
    cached_from: str | None = None  # the cache key, when this record was copied from the rollout cache
    pending_status: ScoredStatus | None = None  # set when unscored: the status a score will confirm
    judge: ScoringUsage | None = None
    skill_loaded: bool | None = None  # the agent's load decision, as its backend reported it (None: unknown)

    @property
    def spent_tokens(self) -> int:
        """The tokens this rollout used, its agent's and its judge's: what budgets and the report count
        (they skip a record copied from a shared cache, ``cached_from``: it cost nothing in this run;
        this figure is the original rollout's all the same)."""
        judged = self.judge.tokens if self.judge is not None else 0
        return (self.tokens_in or 0) + (self.tokens_out or 0) + judged

    @property
    def spent_usd(self) -> float:
        """The USD of this rollout: its agent's (reported or estimated) and its judge's."""
        return (self.cost_usd or 0.0) + (self.judge.cost_usd if self.judge is not None else 0.0)


class ArmResult(BaseModel):
    skill_hash: str
    hard_acc: float | None
    soft_acc: float | None
    mixed: float | None
    n_tasks: int
    n_rollouts: int
    n_scored: int
    statuses: dict[str, int]
    per_task: dict[str, list[float | None]]
    trigger: TriggerStats | None = None  # load decisions on the split's trigger tasks, when it has any

    def metric(self, name: Metric) -> float | None:
        """The arm's score on ``name`` (hard, soft or mixed)."""
        return {"hard": self.hard_acc, "soft": self.soft_acc}.get(name, self.mixed)


class PairResult(BaseModel):
    a: str
    b: str
    diff: float
    ci95: list[float] | None
    p_value: float | None
    n_tasks: int
    verdict: str


class Comparison(RunFile):
    """comparison.json of ``skilltune compare`` and of a training run's held-out test."""

    suite: str
    split: str
    agent: str
    reps: int
    metric: Metric
    contract: str | None
    contaminated: bool
    arms: dict[str, ArmResult]
    pairs: list[PairResult]


class TransferAgent(BaseModel):
    """One agent's column of the transfer table: what a single-agent comparison computes, for it."""

    label: str  # its name on the command line (its folder and column)
    agent: str  # its backend
    options: dict[str, Any] = Field(default_factory=dict)  # as given (secrets redacted)
    comparison: str  # its comparison.json, relative to transfer.json's folder
    scores: dict[str, float | None]  # arm -> held-out score on the comparison's metric
    pairs: list[PairResult]
    n_rollouts: int
    n_scored: int
    n_cached: int = 0  # records copied from the rollout cache (their tokens and USD are counted)
    tokens: int = 0  # the agent's and the judge's, over its rollouts
    cost_usd: float = 0.0
    contaminated: bool = False


class Harm(BaseModel):
    """An agent the held-out test says a skill hurts: its pair (``pair.a`` the seed, ``pair.b`` the
    tuned skill) came out ``a_better``, the seed significantly better for this agent."""

    agent: str  # the agent's label (its column of the transfer table)
    split: str
    pair: PairResult

    def line(self) -> str:
        """``agent codex: best is worse than S0 on test, -0.286 [-0.556, -0.015] (a_better)``."""
        p = self.pair
        ci = f" [{p.ci95[0]:+.3f}, {p.ci95[1]:+.3f}]" if p.ci95 else ""
        return (
            f"agent {self.agent}: {p.b} is worse than {p.a} on {self.split}, {p.diff:+.3f}{ci} ({p.verdict})"
        )


class Transfer(RunFile):
    """transfer.json of ``skilltune compare`` with several agents: the skill x agent table (each
    agent's full comparison.json lies in its own folder beside it)."""

    suite: str
    split: str
    reps: int
    metric: Metric
    contract: str | None
    arms: dict[str, str]  # arm -> skill hash
    agents: list[TransferAgent]

    def agent(self, label: str) -> TransferAgent:
        """The column of the agent named ``label``."""
        for column in self.agents:
            if column.label == label:
                return column
        raise KeyError(label)

    def hurt(self, a: str = "S0", b: str = "best") -> list[Harm]:
        """The agents for whom ``b`` is significantly worse than ``a`` (the pair's verdict ``a_better``),
        in the table's order: what the report, ``status``, findings, train's last lines and ``promote``
        warn of (the pooled comparison may gain while one agent loses)."""
        return [
            Harm(agent=column.label, split=self.split, pair=pair)
            for column in self.agents
            for pair in column.pairs
            if (pair.a, pair.b) == (a, b) and pair.verdict == "a_better"
        ]
