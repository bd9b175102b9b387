"""``skilltune.train`` and ``skilltune.resume``: start or continue a training run.

The loop itself is in ``loop.py``; this module validates settings, lays out the
run directory (config.json with secrets redacted, the seed, the skill repo,
allocation.md), takes the run lock and reports the outcome.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltune.compare import Comparison
from skilltune.errors import UsageError
from skilltune.execute import Executor
from skilltune.loop import Trainer
from skilltune.progress import PlainReporter, Reporter
from skilltune.rollout import RetryPolicy
from skilltune.skill import lint_candidate, load_skill
from skilltune.store import REDACTED, RunDir, read_json, redact, write_json, write_text
from skilltune.suite import load_suite
from skilltune.workspace import check_placement

CONFIG_SCHEMA_VERSION = 1


class EditBudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schedule: Literal["constant", "linear", "cosine"] = "cosine"
    start: int = Field(default=4, ge=1)
    end: int = Field(default=2, ge=1)


class TrainConfig(BaseModel):
    """Every setting of a run. config.json stores it (secrets redacted) so ``resume`` can continue."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    skill: str
    tag: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    agent: str = "mock"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    proposer: str = "mock"
    proposer_options: dict[str, Any] = Field(default_factory=dict)
    mode: Literal["patch", "rewrite"] = "patch"
    gate: str = "sequential"
    gate_options: dict[str, Any] = Field(default_factory=dict)
    metric: Literal["hard", "soft", "mixed"] = "mixed"
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5, description="run-wide error rate of the gate")
    alpha_policy: Literal["lord", "spend"] = "lord"
    max_steps: int = Field(default=10, ge=1)
    epochs: int | None = Field(default=None, ge=1)
    epoch_steps: int = Field(default=5, ge=1)
    batch: int = Field(default=8, ge=1)
    reps: int = Field(default=1, ge=1)
    test_reps: int = Field(default=3, ge=1)
    screen: bool = False
    budget_rollouts: int | None = Field(default=None, ge=1)
    budget_tokens: int | None = Field(default=None, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    budget_hours: float | None = Field(default=None, gt=0)
    seed: int = 0
    workers: int = Field(default=4, ge=1)
    runs_dir: str = "runs"
    edit_budget: EditBudgetConfig = Field(default_factory=EditBudgetConfig)
    growth_cap: float = Field(default=0.5, ge=0.0)
    patience: int = Field(default=5, ge=1)
    slow_update_sample: int = Field(default=6, ge=1)
    evidence_from: str | None = None
    cache: str | None = Field(default=None, description="a rollout cache folder shared between runs")
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    fresh: bool = Field(default=False, description="run rollouts even when the shared cache holds them")

    @property
    def total_steps(self) -> int:
        return min(self.max_steps, self.epochs * self.epoch_steps) if self.epochs else self.max_steps

    @property
    def planned_decisions(self) -> int:
        """Gate decisions the run may make: one per step and per epoch update."""
        return self.total_steps + self.total_steps // self.epoch_steps

    @property
    def gate_reps(self) -> int:
        """Replicates per task per arm a gate decision may use."""
        if self.gate == "sequential":
            return int(self.gate_options.get("max_reps", 8))
        return self.reps


class TrainResult(BaseModel):
    run_dir: str
    state: str
    reason: str
    seed_val: float | None
    best_val: float | None
    seed_hash: str
    best_hash: str
    steps: int
    kept: int
    comparison: Comparison | None = None


def make_config(**settings: Any) -> TrainConfig:
    try:
        return TrainConfig(**settings)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            hint = f" (got {err['input']!r})" if err["type"] != "extra_forbidden" else ""
            lines.append(f"{key}: {err['msg']}{hint}")
        raise UsageError("invalid training settings:\n  " + "\n  ".join(lines)) from None


def _result(trainer: Trainer) -> TrainResult:
    done = trainer.finished()
    state, reason = trainer.run.terminal() or ("", "")
    seed = trainer.seed or trainer.load_seed()
    best = trainer.incumbent(done)
    comparison = (
        Comparison.model_validate(read_json(trainer.run.comparison))
        if trainer.run.comparison.is_file()
        else None
    )
    kept_vals = [r.val_candidate for r in done if r.verdict == "keep" and r.val_candidate is not None]
    return TrainResult(
        run_dir=str(trainer.run.root),
        state=state,
        reason=reason,
        seed_val=trainer.progress.seed_val,
        best_val=kept_vals[-1] if kept_vals else trainer.progress.seed_val,
        seed_hash=seed.hash,
        best_hash=best.hash,
        steps=sum(1 for r in done if r.kind == "step"),
        kept=sum(1 for r in done if r.verdict == "keep"),
        comparison=comparison,
    )


def _write_config(run: RunDir, config: TrainConfig, suite_hash: str, contract: str) -> None:
    body = {"schema_version": CONFIG_SCHEMA_VERSION, "suite_hash": suite_hash, "contract": contract}
    write_json(run.config, body | redact(config.model_dump(mode="json")))


def _write_allocation(run: RunDir, trainer: Trainer) -> None:
    info = trainer.proposer.allocation(trainer.config.mode)
    lines = ["# Proposer allocation", "", f"- proposer: {info['proposer']}", f"- mode: {trainer.config.mode}"]
    lines += [f"- {role}: {model}" for role, model in info["roles"].items()]
    lines.append(f"- the roles ran as {'separate calls' if info['separate_calls'] else 'one call'}")
    write_text(run.allocation, "\n".join(lines) + "\n")


def _check_places(config: TrainConfig, suite_root: Path) -> None:
    """Refuse run directories that would be written into the suite, or onto a file."""
    runs = Path(config.runs_dir)
    if runs.exists() and not runs.is_dir():
        raise UsageError(f"--runs-dir {runs} is a file; give a folder")
    if runs.resolve().is_relative_to(suite_root.resolve()):
        raise UsageError(
            f"--runs-dir {runs} lies inside the suite {suite_root}: runs would change the suite under themselves"
        )


def _check_evidence(config: TrainConfig, suite_hash: str) -> None:
    if not config.evidence_from:
        return
    source = RunDir(Path(config.evidence_from))
    if not source.config.is_file():
        raise UsageError(f"--evidence-from {source.root}: not a skilltune run directory (no config.json)")
    if read_json(source.config).get("suite_hash") != suite_hash:
        raise UsageError(
            f"--evidence-from {source.root} ran on a different suite (its content hash differs): arms must share evidence of one suite"
        )


def train(
    suite: str | Path,
    skill: str | Path,
    *,
    tag: str,
    force: bool = False,
    reporter: Reporter | None = None,
    retry: RetryPolicy | None = None,
    executor: Executor | None = None,
    **settings: Any,
) -> TrainResult:
    """Train ``skill`` on ``suite`` into ``runs_dir/tag``; see TrainConfig for ``settings``.

    Everything is checked before anything is written. Refuses an existing run
    directory unless ``force`` (then it starts over).
    """
    for key in (
        "runs_dir",
        "evidence_from",
        "cache",
    ):  # config.json holds absolute paths: resume works from anywhere
        if settings.get(key):
            settings[key] = str(Path(settings[key]).resolve())
    config = make_config(
        suite=str(Path(suite).resolve()), skill=str(Path(skill).resolve()), tag=tag, **settings
    )
    run = RunDir(Path(config.runs_dir) / config.tag)
    loaded = load_suite(config.suite)
    seed = load_skill(config.skill)
    trainer = Trainer(config, run, reporter or PlainReporter(), retry, executor)
    check_placement(seed, trainer.backend, trainer.options.placement)
    _check_places(config, loaded.root)
    _check_evidence(config, loaded.content_hash)
    plan = trainer.plan
    first = plan.baseline + plan.step
    if config.budget_rollouts is not None and config.budget_rollouts < first:
        raise UsageError(
            f"--budget-rollouts {config.budget_rollouts} cannot pay for the seed's val pass and one full step "
            f"({first} rollouts: val {plan.val}x{plan.reps}, then {plan.explain_step()}); "
            f"raise it to at least {first} or lower --batch/--reps"
        )
    seed_errors = [str(i) for i in lint_candidate(seed) if i.severity == "error"]
    with run.lock():  # held from the existence check to the end: no second process can interleave
        if run.root.exists() and any(run.root.iterdir()):
            if not force:
                raise UsageError(
                    f"{run.root} exists: continue it with `skilltune resume {run.root}`, or pass --force to start over"
                )
            if not run.config.is_file():
                raise UsageError(
                    f"{run.root} is not a skilltune run directory; refusing to delete it with --force"
                )
        # Lay the run out beside its final place and rename it in: a kill never leaves half a run.
        staging = RunDir(run.root.parent / f".{config.tag}.staging")
        shutil.rmtree(staging.root, ignore_errors=True)
        try:
            seed.save(staging.seed_dir)
            write_json(
                staging.root / "seed.json",
                {
                    "main": seed.main,
                    "kind": seed.kind,
                    "fallback_name": seed.fallback_name,
                    "hash": seed.hash,
                },
            )
            _write_config(staging, config, loaded.content_hash, loaded.contract_hash)
            _write_allocation(staging, trainer)
            steps, epochs = config.total_steps, config.total_steps // config.epoch_steps
            total = plan.total(steps, epochs)
            staging.journal("run_start", tag=config.tag, planned_rollouts=total, per_step=plan.step)
            if run.root.exists():
                shutil.rmtree(run.root)
            staging.root.rename(run.root)
        finally:
            shutil.rmtree(staging.root, ignore_errors=True)
        trainer.suite_hash = loaded.content_hash
        trainer.progress.rollouts_planned = total
        trainer.reporter.line(
            f"train {config.tag}: up to {plan.step} rollouts per step ({plan.explain_step()}), "
            f"at most {total} in all for {steps} steps, {epochs} epoch update(s) and the held-out test"
        )
        for error in seed_errors:
            trainer.reporter.line(
                f"warning: the seed skill has a lint error (edits may not add new ones): {error}"
            )
        trainer.execute()
        return _result(trainer)


def resume(
    run_dir: str | Path,
    *,
    reporter: Reporter | None = None,
    retry: RetryPolicy | None = None,
    executor: Executor | None = None,
    **overrides: Any,
) -> TrainResult:
    """Continue a run without TERMINAL, or one that ended stopped, exhausted, blocked or crash.

    ``overrides`` replace settings (a raised budget, more workers); secrets redacted in
    config.json must come back through the environment or ``overrides``.
    """
    run = RunDir(Path(run_dir))
    if not run.config.is_file():
        raise UsageError(f"{run_dir}: not a skilltune run directory (no config.json)")
    terminal = run.terminal()
    if terminal is not None and terminal[0] in ("success", "no-progress"):
        raise UsageError(
            f"{run_dir} already ended ({terminal[0]}: {terminal[1]}); train a new tag to go further"
        )
    stored = read_json(run.config)
    suite_hash = stored.pop("suite_hash")
    for key in ("schema_version", "contract"):
        stored.pop(key, None)
    stored.update({k: v for k, v in overrides.items() if v is not None})
    if REDACTED in json.dumps(stored):
        raise UsageError(
            f"{run.config} holds redacted secrets: pass them again (e.g. agent_options) to resume"
        )
    config = make_config(**stored)
    trainer = Trainer(config, run, reporter or PlainReporter(), retry, executor)
    with run.lock():
        run.terminal_path.unlink(missing_ok=True)
        if run.stop_file.exists():  # the STOP that ended the last session must not end this one
            run.stop_file.unlink()
        trainer.suite_hash = suite_hash
        if overrides:
            _write_config(run, config, suite_hash, trainer.suite.contract_hash)
        trainer.progress.rollouts_planned = trainer.plan.total(
            config.total_steps, config.total_steps // config.epoch_steps
        )
        done = trainer.finished()
        run.journal("resume", units_done=len(done))
        trainer.reporter.line(f"resume {config.tag}: {len(done)} unit(s) done")
        trainer.execute()
        return _result(trainer)
