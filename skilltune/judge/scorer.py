"""The ``judge`` scoring mode: a model grades the output against judge.md (and a reference).

Per task (beside ``scoring``, where skill-trainer has them): ``reference`` (a file under the
suite: a good output) or ``reference_text`` (inline), and ``judge_inputs`` (workspace globs
the judge reads besides the final output). Each rollout gets ``samples`` verdicts, drawn in
parallel; hard and soft follow skill-trainer's rules (``verdict.aggregate``). The judge is a
plain model asked through ``ask_structured`` (skilltune.modelcalls.plain), the policy the
proposers use: a reply that is not a verdict is asked again with a correction, up to
``max_attempts`` in all, then the rollout is a ``scoring_error`` (never a 0). A judge that still
fails after its retries raises ``ScorerUnavailable``: the rollout stays ``unscored`` and the
batch stops.

The rollout's record folder keeps what re-judging needs, since workspaces are deleted:
judge_inputs.json (the input files as read, capped) and judge.json (the verdicts, keyed on
the judge, its settings and every message it read: scoring again with the same inputs
calls nobody).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from skilltune.contracts import AgentResult, Task
from skilltune.errors import ScorerUnavailable, ScoringError, SkilltuneError
from skilltune.judge.models import check_judge, judge_request_model, make_judge_model
from skilltune.judge.prompt import (
    PROMPT_VERSION,
    JudgeCase,
    collect_inputs,
    correction,
    messages,
    reference_text,
)
from skilltune.judge.verdict import RecordVerdict, aggregate, parse_reply, verdict_feedback
from skilltune.modelcalls import CallCancelled, ChatRequest, ModelCallError
from skilltune.modelcalls.plain import Answer, PlainModel, ask_structured
from skilltune.runfiles.base import RunFileError
from skilltune.runfiles.judge import JudgeCall, JudgeFile, JudgeInputsFile, JudgeVerdict
from skilltune.score.base import Score, Scored, Scorer, ScoringFields, ScoringUsage
from skilltune.score.context import ScoringContext
from skilltune.store import canonical_json, sha256_text
from skilltune.suite.judge import JudgeSettings

JUDGE_FILE = "judge.json"
INPUTS_FILE = "judge_inputs.json"
RUBRIC_FILE = "judge.md"


class JudgeError(ScoringError):
    """The judge answered but gave no usable verdict: a scoring error, with what it cost and the
    verdicts the other samples did give (``judge agreement`` counts them)."""

    def __init__(
        self, message: str, usage: ScoringUsage | None, verdicts: list[JudgeVerdict] | None = None
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.verdicts = verdicts or []


class JudgeFields(ScoringFields):
    """judge mode reads no field of ``scoring``: its task fields (reference, reference_text,
    judge_inputs) sit beside it, where skill-trainer has them."""


def cache_key(system: str, user: str, identity: Mapping[str, Any]) -> str:
    """The verdicts' key: the judge and its settings, the protocol's version, every message."""
    return sha256_text(canonical_json([PROMPT_VERSION, dict(identity), system, user]))


class JudgeScorer(Scorer):
    mode = "judge"
    Fields = JudgeFields

    def __init__(self, context: ScoringContext) -> None:
        super().__init__(context)
        # The context's judge block, overrides applied: checked when the suite was read.
        self.settings = JudgeSettings.model_validate(dict(context.judge))
        self._lock = threading.Lock()
        self._model: PlainModel | None = None
        self._down: str | None = None  # the endpoint failed after its retries: fail fast from now on

    # --- validation -------------------------------------------------------------------------
    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        if not (suite_root / RUBRIC_FILE).is_file():
            return [
                "judge mode needs judge.md in the suite folder: the criteria, their weights, the pass rule"
            ]
        return []

    @classmethod
    def check_task(cls, task: Mapping[str, Any], suite_root: Path) -> list[str]:
        problems: list[str] = []
        reference = task.get("reference")
        inline = task.get("reference_text")
        if inline is not None and not isinstance(inline, str):
            problems.append("'reference_text' must be a string: a good output for this task")
        if reference is not None:
            problems += _check_reference(reference, task.get("files"), suite_root)
        inputs = task.get("judge_inputs")
        if inputs is not None and not (
            isinstance(inputs, list) and all(isinstance(g, str) and g.strip() for g in inputs)
        ):
            problems.append("'judge_inputs' must be a list of workspace globs (e.g. [\"src/*.py\"])")
        elif inputs:
            for pattern in inputs:
                if PurePosixPath(pattern).is_absolute() or ".." in PurePosixPath(pattern).parts:
                    problems.append(
                        f"judge_inputs {pattern!r} must stay inside the workspace (relative, no '..')"
                    )
        return problems

    # --- readiness --------------------------------------------------------------------------
    def preflight(self) -> None:
        check_judge(self.settings, self.context.root)
        self.model()

    def model(self) -> PlainModel:
        with self._lock:
            if self._model is None:
                self._model = make_judge_model(self.settings, self.context.root)
            return self._model

    # --- scoring ----------------------------------------------------------------------------
    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        return self._judge(task, result.final_text, collect_inputs(task, workspace), None).score

    def score_rollout(self, task: Task, workspace: Path, result: AgentResult, record_dir: Path) -> Scored:
        inputs = collect_inputs(task, workspace)
        inputs.write(record_dir / INPUTS_FILE)
        return self._judge(task, result.final_text, inputs, record_dir)

    def rescore(self, task: Task, record_dir: Path, result: AgentResult) -> Scored:
        path = record_dir / INPUTS_FILE
        if path.is_file():
            inputs = JudgeInputsFile.read(path)
        elif task.field("judge_inputs"):
            raise ScoringError(
                f"task {task.id}: the record at {record_dir} kept no judge_inputs.json, and its workspace "
                "is gone: this rollout has to run again"
            )
        else:
            inputs = JudgeInputsFile()
        return self._judge(task, result.final_text, inputs, record_dir)

    def case(self, task: Task, output: str, inputs: JudgeInputsFile) -> JudgeCase:
        rubric = (self.context.root / RUBRIC_FILE).read_text(encoding="utf-8")
        return JudgeCase(
            rubric=rubric,
            prompt=self.context.prompt(task),
            reference=reference_text(task, self.context.root),
            inputs=dict(inputs.files),
            output=output,
        )

    def _judge(self, task: Task, output: str, inputs: JudgeInputsFile, record_dir: Path | None) -> Scored:
        if not output.strip():  # skill-trainer: an empty output scores 0 and costs no call
            empty = "the final output was empty: nothing was judged"
            return Scored(self.make(0, 0.0, ["output_empty"], self.context.allowed_feedback(empty, empty)))
        case = self.case(task, output, inputs)
        settings = self.settings
        drawn = self.verdicts(case, settings.samples, record_dir / JUDGE_FILE if record_dir else None)
        hard, soft, checks = aggregate(drawn.samples, settings.criteria_weights, settings.pass_threshold)
        first = drawn.samples[0]
        feedback = self.context.allowed_feedback(
            verdict_feedback(first), verdict_feedback(first, evidence=False)
        )
        return Scored(self.make(hard, soft, [*checks, f"ref:{case.mode}"], feedback), drawn.usage)

    def verdicts(self, case: JudgeCase, samples: int, path: Path | None) -> Drawn:
        """``samples`` verdicts on ``case``: judge.json at ``path`` when its key matches, else drawn
        (in parallel) and written there."""
        system, user = messages(case)
        settings = self.settings
        key = cache_key(system, user, settings.identity())
        cached = _cached(path, key, samples)
        if cached is not None:
            return Drawn(cached.samples, ScoringUsage(model=cached.model, cached=True), cached)
        if self._down is not None:
            raise ScorerUnavailable(f"the judge's endpoint failed earlier in this run: {self._down}")
        try:
            model = self.model()
        except SkilltuneError as exc:  # the judge cannot be set up: every rollout would fail alike
            self._down = str(exc)
            raise ScorerUnavailable(str(exc)) from None
        with ThreadPoolExecutor(max_workers=samples, thread_name_prefix="skilltune-judge") as pool:
            futures = [
                pool.submit(self._one, model, system, user, i, settings.max_attempts) for i in range(samples)
            ]
            outcomes = []
            for future in futures:
                try:
                    outcomes.append(future.result())
                except SkilltuneError as exc:  # the endpoint is down, or refuses us (a key, a model name)
                    self._down = str(exc)
                    if isinstance(exc, ScorerUnavailable):
                        raise
                    raise ScorerUnavailable(str(exc)) from None
        failed = [o for o in outcomes if isinstance(o, JudgeCall)]
        calls = [o[1] if isinstance(o, tuple) else o for o in outcomes]
        usage = ScoringUsage(
            model=model.name,
            calls=sum(c.attempts for c in calls),
            tokens_in=sum(c.tokens_in for c in calls),
            tokens_out=sum(c.tokens_out for c in calls),
            cost_usd=round(sum(c.cost_usd for c in calls), 6),
        )
        if failed:
            last = failed[0].rejected[-1] if failed[0].rejected else "no answer"
            raise JudgeError(
                f"the judge gave no usable verdict in {settings.max_attempts} attempt(s) "
                f"(sample {failed[0].sample}): {last}",
                usage,
                [o[0] for o in outcomes if isinstance(o, tuple)],
            )
        verdicts = [o[0] for o in outcomes if isinstance(o, tuple)]
        file = JudgeFile(
            key=key,
            provider=settings.provider,
            model=model.name,
            mode=case.mode,
            samples=verdicts,
            calls=calls,
        )
        if path is not None:
            file.write(path)
        return Drawn(verdicts, usage, file)

    def _one(
        self, model: PlainModel, system: str, user: str, sample: int, max_attempts: int
    ) -> tuple[JudgeVerdict, JudgeCall] | JudgeCall:
        """One sample: its verdict and calls, or (no usable verdict after ``max_attempts``) its calls."""
        from skilltune.process import RolloutInterrupted, interrupted

        settings = self.settings
        request = ChatRequest.of(
            user, system=system, model=judge_request_model(settings), max_tokens=settings.max_tokens,
            temperature=settings.temperature,
        )  # fmt: skip
        try:
            asked = ask_structured(
                model, request, RecordVerdict, _read_verdict, repair_rounds=max_attempts - 1,
                repair=lambda prompt, problem, attempt: correction(prompt, attempt, problem), cancel=interrupted,
            )  # fmt: skip
        except ModelCallError as exc:
            raise ScorerUnavailable(
                f"the judge ({model.what}) failed after its retries: {exc}; `skilltune resume` judges the "
                "kept rollouts once it answers again"
            ) from None
        except CallCancelled:
            raise RolloutInterrupted from None
        replies = [e.answer.reply for e in asked.exchanges]
        call = JudgeCall(
            sample=sample, attempts=len(replies), model=replies[-1].model or model.name,
            tokens_in=sum(r.tokens_in or 0 for r in replies), tokens_out=sum(r.tokens_out or 0 for r in replies),
            cost_usd=sum(r.cost_usd or 0.0 for r in replies), rejected=asked.problems,
            seconds=round(sum(e.seconds for e in asked.exchanges), 3),
        )  # fmt: skip
        return call if asked.value is None else (asked.value, call)


def _read_verdict(answer: Answer) -> JudgeVerdict:
    """The verdict in a judge's answer: the tool call's, else the first verdict object in its text."""
    parsed = answer.parsed.model_dump() if answer.parsed is not None else None
    return parse_reply(parsed, answer.reply.text)


class Drawn:
    """Verdicts for one case, what they cost now (nothing when cached) and the judge.json they are."""

    def __init__(self, samples: list[JudgeVerdict], usage: ScoringUsage, file: JudgeFile) -> None:
        self.samples = samples
        self.usage = usage
        self.file = file


def _cached(path: Path | None, key: str, samples: int) -> JudgeFile | None:
    if path is None or not path.is_file():
        return None
    try:
        found = JudgeFile.read(path)
    except RunFileError:
        return None  # damaged, or from a newer skilltune: judge again
    return found if found.key == key and len(found.samples) == samples else None


def _check_reference(reference: Any, files: Any, suite_root: Path) -> list[str]:
    if not isinstance(reference, str) or not reference.strip():
        return ["'reference' must be a path under the suite folder (a good output, e.g. refs/t1/gold.md)"]
    posix = PurePosixPath(reference)
    if posix.is_absolute() or ".." in posix.parts:
        return [f"reference {reference!r} must be a path inside the suite folder (relative, no '..')"]
    path = suite_root / reference
    if not path.is_file():
        return [f"reference {reference!r} is not a file under {suite_root}"]
    if not path.resolve().is_relative_to(suite_root.resolve()):
        return [f"reference {reference!r} escapes the suite through a symlink"]
    for entry in files if isinstance(files, list) else []:
        given = (suite_root / str(entry)).resolve()
        if path.resolve() == given or path.resolve().is_relative_to(given):
            return [
                f"reference {reference!r} is inside files entry {entry!r}: the answer would be copied "
                "into the agent's workspace; list the fixture folder without it"
            ]
    return []
