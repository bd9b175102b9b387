"""The training loop: rollout -> reflect -> merge -> edit -> lint -> [screen] -> gate -> keep / reset.

A run is a sequence of *units*: steps, an epoch slow update after every
``epoch_steps`` steps, then the final held-out comparison. Every unit writes
its outputs to its own folder, atomically and stage by stage; a unit is done
when its record (step.json / epoch.json) exists. Resuming re-enters the first
unfinished unit and skips every stage whose output is on disk; every random
choice is derived from (seed, unit, purpose). So a run killed at any instant
ends exactly as an uninterrupted one. Decisions live in strategy objects (the
gate, the edit budget, the proposer); this module only sequences them.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skilltune.agents import AgentBackend, AgentOptions, get_backend, parse_agent_options
from skilltune.alpha import RunAlpha
from skilltune.budget import Budget, BudgetExhausted, Plan, records_run
from skilltune.cache import RolloutCache
from skilltune.compare import Comparison, build_comparison
from skilltune.errors import SkilltuneError, UsageError
from skilltune.execute import Executor, make_executor
from skilltune.gate import GATES, Gate, Verdict, make_gate
from skilltune.progress import Reporter, RunProgress, fmt
from skilltune.propose import (
    EditBudget,
    PatchError,
    Proposal,
    Proposer,
    apply_patch,
    make_proposer,
    merge_edits,
)
from skilltune.propose.edit import protected_blocks
from skilltune.propose.model import Edit
from skilltune.propose.reflect import build_packet, rejected_buffer, render_memory
from skilltune.rollout import (
    Phase,
    RetryPolicy,
    RolloutJob,
    RolloutRecord,
    RolloutRunner,
    accuracy,
    jobs_for,
    rollout_dir,
)
from skilltune.skill import Candidate, lint_candidate
from skilltune.store import RunDir, UnitRecord, read_json, write_json, write_text
from skilltune.suite import Suite, Task, load_suite
from skilltune.versions import SkillRepo

if TYPE_CHECKING:
    from skilltune.train import TrainConfig

REPLICATE_STRIDE = 1000  # replicate indices of unit u start at u * stride: always fresh, never reused
Records = list[tuple[RolloutRecord, Path]]


class StopRequested(Exception):
    """SIGINT/SIGTERM or a STOP file: end after the current rollout."""


class BlockedError(SkilltuneError):
    """The run cannot continue without the user (a contaminated batch, a changed suite...)."""

    exit_code = 3


def _stop_signals(flag: dict[str, bool]) -> Callable[[], None]:
    """SIGINT/SIGTERM ask for a stop after the current rollout; a second SIGINT interrupts at once."""
    previous = {}

    def handler(signum: int, frame: Any) -> None:
        if flag.get("stop") and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if not flag.get("stop"):
            sys.stderr.write(
                "\nstopping after the rollouts now running"
                + (" (Ctrl-C again to stop at once)\n" if signum == signal.SIGINT else "\n")
            )
        flag["stop"] = True

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: signals stay with the caller
        return lambda: None

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


class Trainer:
    """Sequences the units of one run (``train`` and ``resume`` build it)."""

    def __init__(
        self,
        config: TrainConfig,
        run: RunDir,
        reporter: Reporter,
        retry: RetryPolicy | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.config = config
        self.run = run
        self.reporter = reporter
        self.retry = retry or RetryPolicy()
        self.suite: Suite = load_suite(config.suite)
        self.suite_hash = ""
        self.backend: AgentBackend = get_backend(config.agent)
        self.options: AgentOptions = parse_agent_options(self.backend, config.agent_options)
        self.proposer: Proposer = make_proposer(config.proposer, self.suite, config.proposer_options)
        self.make_gate(0.05)  # an unknown gate or gate option is bad input, found before anything runs
        self.executor = executor or make_executor(
            config.workers, self.suite.config.max_concurrency, config.executor, config.ray_address
        )
        c = config
        self.edit_budget = EditBudget(
            c.edit_budget.schedule, c.edit_budget.start, c.edit_budget.end, c.total_steps
        )
        self.plan = Plan.of(
            self.suite, c.batch, c.reps, c.test_reps, c.screen, c.slow_update_sample, c.gate_reps
        )
        self.run_alpha = RunAlpha(c.alpha, c.alpha_policy, c.planned_decisions)
        self.budget = Budget(c.budget_rollouts, c.budget_tokens, c.budget_usd, c.budget_hours)
        self.flag: dict[str, bool] = {}
        self.progress = RunProgress(tag=c.tag, max_steps=c.total_steps)
        self.seed: Candidate | None = None
        self.repo: SkillRepo | None = None
        self.cache = RolloutCache(Path(c.cache)) if c.cache else None
        self.rollout_tokens = [0, 0]  # agents' tokens in and out over this session's rollouts

    # --- small services --------------------------------------------------------------------------
    def rng(self, *purpose: object) -> random.Random:
        return random.Random("|".join(str(p) for p in (self.config.seed, *purpose)))

    def stop_requested(self) -> bool:
        return bool(self.flag.get("stop")) or self.run.stop_file.exists()

    def check_stop(self) -> None:
        if self.stop_requested():
            raise StopRequested

    @contextmanager
    def stage(self, unit: str, name: str) -> Iterator[dict[str, Any]]:
        """Journal a stage's wall time (and whatever the body adds: rollouts, tokens)."""
        t0 = time.monotonic()
        tokens_before = tuple(self.rollout_tokens)
        info: dict[str, Any] = {}
        yield info
        if "tokens_in" not in info and "rollouts" in info:  # the agents' tokens in this stage's rollouts
            info["tokens_in"] = self.rollout_tokens[0] - tokens_before[0]
            info["tokens_out"] = self.rollout_tokens[1] - tokens_before[1]
        self.run.journal("stage", unit=unit, stage=name, seconds=round(time.monotonic() - t0, 3), **info)

    def units(self) -> list[tuple[str, int]]:
        """("step", n) and ("epoch", e) in run order."""
        out: list[tuple[str, int]] = []
        for n in range(1, self.config.total_steps + 1):
            out.append(("step", n))
            if n % self.config.epoch_steps == 0:
                out.append(("epoch", n // self.config.epoch_steps))
        return out

    def unit_dir(self, kind: str, index: int) -> Path:
        return self.run.step_dir(index) if kind == "step" else self.run.epoch_dir(index)

    def finished(self) -> list[UnitRecord]:
        done = []
        for kind, index in self.units():
            path = self.unit_dir(kind, index) / f"{kind}.json"
            if not path.is_file():
                break
            done.append(UnitRecord.model_validate(read_json(path)))
        return done

    def incumbent(self, done: list[UnitRecord]) -> Candidate:
        assert self.seed is not None
        for record in reversed(done):
            if record.verdict == "keep":
                return Candidate.load(self.unit_dir(record.kind, record.index) / "candidate", self.seed)
        return self.seed

    def load_seed(self) -> Candidate:
        meta = read_json(self.run.root / "seed.json")
        stub = Candidate({meta["main"]: ""}, meta["main"], meta["kind"], meta["fallback_name"])
        self.seed = Candidate.load(self.run.seed_dir, stub)
        return self.seed

    # --- rollouts --------------------------------------------------------------------------------
    def jobs(
        self, tasks: list[Task], candidate: Candidate | None, phase: Phase, base: int, reps: int
    ) -> list[RolloutJob]:
        return jobs_for(tasks, candidate, phase, reps, self.config.seed, base)

    def rollouts(self, out: Path, jobs: list[RolloutJob]) -> Records:
        """Run ``jobs`` into ``out``, reusing finished records (never an infra error or a crash).

        Returns (record, folder) pairs in canonical (candidate, task, replicate) order.
        """
        runner = RolloutRunner(
            suite=self.suite, backend=self.backend, options=self.options, out=out, retry=self.retry,
            cache=self.cache, fresh=self.config.fresh,
        )  # fmt: skip
        by_key = {(j.cand12, j.task.id, j.replicate): j for j in jobs}
        records: Records = []
        todo = []
        for job in jobs:
            record = runner.reusable(job)
            if record is not None:
                records.append((record, rollout_dir(out, job)))
            else:
                todo.append(job)
        self.check_stop()
        with contextlib.closing(self.executor.map(todo, runner)) as batch:
            for record in batch:
                job = by_key[(record.candidate[:12], record.task_id, record.replicate)]
                records.append((record, rollout_dir(out, job)))
                self.progress.rollouts_done += 1
                self.progress.session_rollouts += 1
                self.reporter.update(self.progress)
                if self.stop_requested():
                    break  # the executor finishes the rollouts already running, then stops
        self.check_stop()
        for record, _ in records:  # what the agents used (a record copied from a shared cache: nothing)
            if not record.cached_from:
                self.rollout_tokens[0] += record.tokens_in or 0
                self.rollout_tokens[1] += record.tokens_out or 0
        return sorted(records, key=lambda rf: (rf[0].candidate, rf[0].task_id, rf[0].replicate))

    # --- the run ---------------------------------------------------------------------------------
    def execute(self) -> None:
        """Run every unfinished unit, then finish; every ending writes TERMINAL."""
        restore = _stop_signals(self.flag)
        self.run.journal("session_start", pid=os.getpid())
        try:
            self._execute()
        except StopRequested:
            self.run.write_terminal(
                "stopped", "stopped by a signal or the STOP file; `skilltune resume` continues"
            )
            self.reporter.line(f"stopped: continue with `skilltune resume {self.run.root}`")
        except KeyboardInterrupt:  # a second Ctrl-C: the executor killed the running agents
            self.run.write_terminal(
                "stopped",
                "interrupted: running rollouts were killed and left no record; `skilltune resume` continues",
            )
            self.reporter.line(f"interrupted: continue with `skilltune resume {self.run.root}`")
            raise
        except BudgetExhausted as exc:
            self.run.write_terminal("exhausted", str(exc))
            self.reporter.line(f"exhausted: {exc}")
        except SkilltuneError as exc:
            self.run.write_terminal("blocked", str(exc).splitlines()[0])
            self.reporter.line(f"blocked: {exc}")
        except Exception as exc:
            self.run.journal("crash", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
            self.run.write_terminal("crash", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.run.journal("session_end", rollouts=self.progress.session_rollouts)
            restore()

    def _execute(self) -> None:
        from skilltune.epoch import slow_update

        seed = self.load_seed()
        self.repo = SkillRepo(self.run.skill_repo, f"skilltune/{seed.name}/{self.config.tag}")
        self.repo.ensure(seed)
        self.repo.clean()
        self.check_suite()
        self.progress.seed_val = self.baseline()
        self.warn_regime(self.progress.seed_val)
        done = self.finished()
        self.refresh(done)  # a kill between a unit's record and these files loses nothing
        stopped_early = False
        for kind, index in self.units()[len(done) :]:
            if discard_streak(done) >= self.config.patience:
                stopped_early = True
                break
            self.check_stop()
            self.check_suite()
            need = self.plan.step if kind == "step" else self.plan.epoch
            already = len(records_run(self.unit_dir(kind, index)))
            self.budget.check(self.run, need, already)
            record = self.step(index, done) if kind == "step" else slow_update(self, index, done)
            done.append(record)
            self.after_unit(done)
        self.finish(done, stopped_early)

    def check_suite(self) -> None:
        current = load_suite(self.config.suite).content_hash
        if current != self.suite_hash:
            raise BlockedError(
                f"the suite at {self.config.suite} changed under the run "
                f"(content hash {current[:12]}, the run started with {self.suite_hash[:12]})"
            )

    def warn_regime(self, seed_val: float | None) -> None:
        if seed_val is None or 0.3 <= seed_val <= 0.8:
            return
        regime = "saturated (above 0.8)" if seed_val > 0.8 else "too hard (below 0.3)"
        self.reporter.line(
            f"warning: the seed's val {self.config.metric} is {seed_val:.3f}, {regime}: a gate on it can hardly "
            "tell skills apart; use harder tasks or restrict the agent's tools (see skilltune calibrate)"
        )

    def refresh(self, done: list[UnitRecord]) -> None:
        """Rebuild results.tsv, META.md and the live view from the unit records."""
        self.run.write_results([r.row() for r in done])
        write_text(self.run.meta, render_memory(done))
        kept = [r.val_candidate for r in done if r.verdict == "keep" and r.val_candidate is not None]
        self.progress.current_val = self.progress.best_val = kept[-1] if kept else self.progress.seed_val
        if done:
            self.progress.last_verdict = f"{done[-1].kind} {done[-1].index}: {done[-1].verdict}"
        self.reporter.update(self.progress)

    def after_unit(self, done: list[UnitRecord]) -> None:
        self.refresh(done)
        last = done[-1]
        vals = (
            f"val {fmt(last.val_candidate)} vs {fmt(last.val_incumbent)}"
            if last.val_candidate is not None
            else last.reason
        )
        self.reporter.line(
            f"{last.kind} {last.index} (epoch {last.epoch}): {last.verdict}, {vals}; {len(last.edits)} edit(s)"
        )

    def baseline(self) -> float | None:
        """The seed on val once, before any step: the regime warning and the seed's val score."""
        assert self.seed is not None
        with self.stage("step_0000", "baseline") as info:
            jobs = self.jobs(self.suite.tasks("val"), self.seed, "eval", 0, self.config.reps)
            recs = self.rollouts(self.run.step_dir(0), jobs)
            info["rollouts"] = len(recs)
        return accuracy([r for r, _ in recs], self.config.metric)

    # --- one step --------------------------------------------------------------------------------
    def step(self, n: int, done: list[UnitRecord]) -> UnitRecord:
        c = self.config
        unit = f"step_{n:04d}"
        folder = self.run.step_dir(n)
        folder.mkdir(parents=True, exist_ok=True)
        epoch = (n - 1) // c.epoch_steps + 1
        self.progress.step, self.progress.epoch, self.progress.phase = n, epoch, "train"
        incumbent = self.incumbent(done)
        seq = len(done) + 1
        train = self.suite.tasks("train")
        tasks = [train[i] for i in sorted(self.rng(n, "batch").sample(range(len(train)), self.plan.batch))]

        with self.stage(unit, "rollout") as info:
            evidence = self.train_evidence(n, folder, tasks, incumbent, seq)
            info["rollouts"] = len(evidence)
        self.progress.phase = "reflect"
        with self.stage(unit, "reflect") as info:
            proposal = self.reflect(n, folder, incumbent, evidence, done)
            info["calls"] = len(proposal.calls)
            info["tokens_in"] = sum(call.tokens_in or 0 for call in proposal.calls)
            info["tokens_out"] = sum(call.tokens_out or 0 for call in proposal.calls)
        with self.stage(unit, "edit"):
            shown = {f"{r.task_id}#r{r.replicate}" for r, _ in evidence}
            candidate, edits, problem = self.make_candidate(n, folder, incumbent, proposal, shown)
        base: dict[str, Any] = dict(
            kind="step", index=n, step=n, epoch=epoch, parent=incumbent.hash, metric=c.metric
        )
        base |= {"edits": [e.compact() for e in edits], "edit_texts": [e.text for e in edits]}
        if problem is not None or candidate is None:
            cand_hash = (candidate or incumbent).hash
            decision = "lint" if candidate is not None else "empty"
            record = UnitRecord(
                **base, candidate=cand_hash, verdict="discard", decision=decision, reason=problem or ""
            )
            return self.close_unit(folder, record, None)
        assert self.repo is not None
        self.repo.stage(candidate)

        if c.screen:
            self.progress.phase = "screen"
            with self.stage(unit, "screen") as info:
                screened = self.rollouts(
                    folder, self.jobs(tasks, candidate, "screen", seq * REPLICATE_STRIDE, c.reps)
                )
                info["rollouts"] = len(screened)
            before = accuracy([r for r, _ in evidence], c.metric)
            after = accuracy([r for r, _ in screened], c.metric)
            if before is not None and after is not None and after < before:
                reason = f"screen: train {after:.3f} < {before:.3f}"
                record = UnitRecord(
                    **base, candidate=candidate.hash, verdict="discard", decision="screen", reason=reason
                )
                return self.close_unit(folder, record, None)

        self.progress.phase = "gate"
        with self.stage(unit, "gate") as info:
            verdict = self.decide(folder, candidate, incumbent, seq)
            info["rollouts"] = verdict.rollouts
        return self.close_unit(
            folder, self.verdict_record(base, candidate, verdict), candidate if verdict.accept else None
        )

    @staticmethod
    def verdict_record(base: dict[str, Any], candidate: Candidate, verdict: Verdict) -> UnitRecord:
        return UnitRecord(
            **base,
            candidate=candidate.hash,
            verdict="keep" if verdict.accept else "discard",
            decision=verdict.decision,
            reason=verdict.reason,
            val_candidate=verdict.val_candidate,
            val_incumbent=verdict.val_incumbent,
            alpha=verdict.alpha,
        )

    def train_evidence(
        self, n: int, folder: Path, tasks: list[Task], incumbent: Candidate, seq: int
    ) -> Records:
        if self.config.evidence_from:
            # Another arm's recorded train rollouts (same suite: checked when the run started);
            # only train tasks of this suite are evidence, whatever the folder holds.
            source = RunDir(Path(self.config.evidence_from)).step_dir(n)
            train_ids = {t.id for t in self.suite.tasks("train")}
            found = []
            for path in sorted(source.glob("rollouts/train/*/*/record.json")):
                record = RolloutRecord.model_validate_json(path.read_text(encoding="utf-8"))
                if record.phase == "train" and record.task_id in train_ids:
                    found.append((record, path.parent))
            if not found:
                raise BlockedError(f"--evidence-from: {source} holds no train rollouts for step {n}")
            return found
        recs = self.rollouts(
            folder, self.jobs(tasks, incumbent, "train", seq * REPLICATE_STRIDE, self.config.reps)
        )
        if not any(r.score for r, _ in recs):
            raise BlockedError(f"step {n}: no train rollout could be scored (infra errors after retries)")
        return recs

    def reflect(
        self, n: int, folder: Path, incumbent: Candidate, evidence: Records, done: list[UnitRecord]
    ) -> Proposal:
        path = folder / "reflections.json"
        if path.is_file():
            return Proposal.model_validate(read_json(path))
        packet = build_packet(
            step=n,
            mode=self.config.mode,
            incumbent=incumbent,
            records=evidence,
            suite=self.suite,
            rejected=rejected_buffer(done),
            memory=render_memory(done),
            max_edits=self.edit_budget.at(n) * 2,
            seed=self.rng(n, "propose").randrange(2**31),
        )
        proposal = self.proposer.propose(packet)
        write_json(path, proposal)
        return proposal

    def make_candidate(
        self, n: int, folder: Path, incumbent: Candidate, proposal: Proposal, shown: set[str]
    ) -> tuple[Candidate | None, list[Edit], str | None]:
        """Merge and apply (patch mode) or take the new document (rewrite mode), then lint."""
        if self.config.mode == "rewrite":
            if not proposal.files:
                return None, [], "the rewrite proposer returned no document"
            candidate = Candidate(proposal.files, incumbent.main, incumbent.kind, incumbent.fallback_name)
            edits = [Edit(op="replace", anchor="(whole document)", text=f"rewrite {candidate.short}")]
        else:
            merged = merge_edits(proposal.edits, incumbent, self.edit_budget.at(n), known=shown)
            write_json(folder / "merged_patch.json", merged)
            edits = [m.edit for m in merged.kept]
            if not edits:
                return None, [], "no applicable edits were proposed"
            try:
                candidate, edits = apply_patch(incumbent, edits)
            except PatchError as exc:
                return None, edits, f"patch did not apply: {exc}"
        candidate.save(folder / "candidate")
        write_text(folder / "candidate_skill.md", candidate.text)
        return candidate, edits, self.lint(candidate, incumbent)

    def lint(self, candidate: Candidate, incumbent: Candidate, own_block: str | None = None) -> str | None:
        """Why ``candidate`` may not be gated (None when it may). Only problems the edit
        introduced count: a seed with a broken link can still be improved."""
        if candidate.hash == incumbent.hash:
            return "the candidate is identical to the incumbent"
        before = {i.message for i in lint_candidate(incumbent) if i.severity == "error"}
        errors = [
            str(i) for i in lint_candidate(candidate) if i.severity == "error" and i.message not in before
        ]
        if errors:
            return "lint: " + "; ".join(errors[:3])
        if candidate.name != incumbent.name:
            return f"lint: the front-matter name changed ({incumbent.name} -> {candidate.name})"
        old_blocks, new_blocks = protected_blocks(incumbent.text), protected_blocks(candidate.text)
        if own_block is not None:  # the epoch slow update writes its own block, and only that one
            old_blocks.pop(own_block, None)
            new_blocks.pop(own_block, None)
        if old_blocks != new_blocks:
            return "lint: a PROTECTED block changed"
        limit = len(incumbent.text) * (1 + self.config.growth_cap) + 200
        if len(candidate.text) > limit:
            return f"lint: {candidate.main} grew from {len(incumbent.text)} to {len(candidate.text)} characters (cap {int(limit)})"
        return None

    def decide(self, folder: Path, candidate: Candidate, incumbent: Candidate, seq: int) -> Verdict:
        """The gate on val; gate.json is its memo (a resumed unit never re-decides)."""
        path = folder / "gate.json"
        if path.is_file():
            verdict = Verdict.model_validate(read_json(path))
        else:
            val = self.suite.tasks("val")
            trainer = self

            class _Sampler:
                def round(
                    self, index: int, replicates: int
                ) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
                    base = seq * REPLICATE_STRIDE + index * replicates
                    jobs = trainer.jobs(val, candidate, "gate", base, replicates)
                    jobs += trainer.jobs(val, incumbent, "gate", base, replicates)
                    recs = [r for r, _ in trainer.rollouts(folder, jobs)]
                    return (
                        [r for r in recs if r.candidate == candidate.hash],
                        [r for r in recs if r.candidate == incumbent.hash],
                    )

            # The run's error-control policy sets this decision's level from earlier decisions.
            decided = [r.verdict == "keep" for r in self.finished() if r.alpha is not None]
            level = self.run_alpha.level(decided)
            verdict = self.make_gate(level).decide(_Sampler())
            if self.config.gate == "sequential":  # only its level comes from the run's alpha policy
                verdict = verdict.model_copy(update={"alpha": level})
            if verdict.decision != "contaminated":  # a resumed unit must re-run the failed rollouts
                write_json(path, verdict)
        if verdict.decision == "contaminated":
            raise BlockedError(f"{folder.name}: {verdict.reason}; no gate decides on a contaminated batch")
        return verdict

    def make_gate(self, level: float) -> Gate:
        """The configured gate; a sequential one tests at this decision's ``level``."""
        c = self.config
        settings = dict(c.gate_options)
        if "alpha" in settings:
            raise UsageError(
                "gate option alpha: a training run sets each decision's level from the run-wide alpha "
                "(--alpha, default 0.05, spent over the run's decisions); drop alpha from the gate options"
            )
        known = sorted(set(GATES.get(c.gate).OPTIONS) - {"alpha"})
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise UsageError(
                f"unknown gate option(s) {', '.join(unknown)} for the {c.gate} gate "
                f"(known: {', '.join(known) or 'none'})"
            )
        if c.gate == "sequential":
            settings["alpha"] = level
        return make_gate(c.gate, c.metric, c.reps, **settings)

    def close_unit(self, folder: Path, record: UnitRecord, accepted: Candidate | None) -> UnitRecord:
        """Account the unit, move git, then write its record: the unit's commit point."""
        assert self.repo is not None
        recs = records_run(folder)  # what this unit ran: a record copied from a shared cache cost nothing
        tokens = sum((r.tokens_in or 0) + (r.tokens_out or 0) for r in recs)
        if (folder / "reflections.json").is_file():
            calls = read_json(folder / "reflections.json").get("calls", [])
            tokens += sum((c.get("tokens_in") or 0) + (c.get("tokens_out") or 0) for c in calls)
        cost = round(sum(r.cost_usd or 0.0 for r in recs), 6)
        record = record.model_copy(update={"rollouts": len(recs), "tokens": tokens, "cost_usd": cost})
        if accepted is not None:
            vals = f"val {fmt(record.val_candidate)} > {fmt(record.val_incumbent)}"
            self.repo.accept(
                accepted,
                f"{record.kind} {record.index}",
                f"{accepted.short} {vals}: {'; '.join(record.edits[:3])}",
            )
            self.write_best(accepted)
        else:
            self.repo.reject()
        write_json(folder / f"{record.kind}.json", record)
        self.run.journal(
            "unit_end",
            unit=folder.name,
            verdict=record.verdict,
            candidate=record.candidate[:12],
            rollouts=record.rollouts,
        )
        return record

    def write_best(self, best: Candidate) -> None:
        tmp = self.run.root / ".best_skill.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        best.write(tmp)
        shutil.rmtree(self.run.best_dir, ignore_errors=True)
        tmp.rename(self.run.best_dir)
        write_text(self.run.best_md, best.text)

    # --- the end ---------------------------------------------------------------------------------
    def finish(self, done: list[UnitRecord], stopped_early: bool) -> None:
        """Held-out comparison of S0 and best (when they differ), then TERMINAL.

        ``no-progress``: nothing was kept, or ``patience`` discards in a row cut the run
        short (the comparison still runs when something was kept before).
        """
        assert self.seed is not None
        best = self.incumbent(done)
        self.write_best(best)
        kept = sum(1 for r in done if r.verdict == "keep")
        steps = sum(1 for r in done if r.kind == "step")
        if best.hash == self.seed.hash:
            why = (
                f"{self.config.patience} discards in a row"
                if stopped_early
                else f"{steps} steps, nothing kept"
            )
            self.run.write_terminal("no-progress", why)
            return
        reason = f"{steps} steps, {kept} kept; best {best.short}"
        if self.suite.has_split("test"):
            self.progress.phase = "test"
            self.budget.check(self.run, self.plan.final, len(records_run(self.run.root / "final")))
            with self.stage("final", "compare") as info:
                comparison = self.final_comparison(best)
                info["rollouts"] = sum(a.n_rollouts for a in comparison.arms.values())
            pair = comparison.pairs[0]
            arms = comparison.arms
            reason += f"; test {comparison.metric} S0 {fmt(arms['S0'].mixed)} -> best {fmt(arms['best'].mixed)} ({pair.verdict})"
        state = "success"
        if stopped_early:
            state, reason = "no-progress", f"{self.config.patience} discards in a row after {reason}"
        self.run.write_terminal(state, reason)

    def final_comparison(self, best: Candidate) -> Comparison:
        assert self.seed is not None
        if self.run.comparison.is_file():
            return Comparison.model_validate(read_json(self.run.comparison))
        arms = {"S0": self.seed, "best": best}
        tasks = self.suite.tasks("test")
        jobs = [j for cand in arms.values() for j in self.jobs(tasks, cand, "test", 0, self.config.test_reps)]
        recs = [r for r, _ in self.rollouts(self.run.root / "final", jobs)]
        by_arm = {
            name: (cand.hash, [r for r in recs if r.candidate == cand.hash]) for name, cand in arms.items()
        }
        comparison = build_comparison(
            self.suite, "test", self.backend.name, self.config.test_reps, self.config.metric, by_arm
        )
        write_json(self.run.comparison, comparison)
        return comparison


def discard_streak(done: list[UnitRecord]) -> int:
    """Candidates discarded in a row since the last keep.

    Only steps count; a step that produced no candidate (nothing proposed, nothing
    applicable, a patch that did not apply: decision ``empty``) neither counts nor
    resets the streak.
    """
    streak = 0
    for record in done:
        if record.kind != "step" or record.decision == "empty":
            continue
        streak = 0 if record.verdict == "keep" else streak + 1
    return streak
