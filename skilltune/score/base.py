"""The Score contract and the Scorer plug-in base class."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltune.contracts import AgentResult, FeedbackPolicy, Task
from skilltune.errors import ContractMismatchError, ScoringError
from skilltune.metric import Metric, as_metric
from skilltune.score.context import ScoringContext
from skilltune.validation import field_problems

# 2 = ``feedback``: what the scorer says a person would need to fix the failure (a file of
# version 1 reads with none).
SCORE_SCHEMA_VERSION = 2
FEEDBACK_LIMIT = 4000  # characters of feedback a score keeps


class Score(BaseModel):
    """How well one rollout did.

    Invariants: ``hard`` is 0 or 1; ``soft`` and ``mixed`` lie in [0, 1];
    ``mixed = (1 - w) * hard + w * soft`` with the suite's ``mixed_weight`` w;
    ``contract`` is the scoring-contract hash of the suite that produced it;
    ``feedback`` is what the scorer says a person would need to fix a failure, as far as the
    suite's ``feedback`` policy lets it (the analyst reads it for train rollouts only).
    A Score only exists for a rollout that was actually scored.
    """

    hard: int = Field(ge=0, le=1)
    soft: float = Field(ge=0.0, le=1.0)
    mixed: float = Field(ge=0.0, le=1.0)
    checks: list[str] = Field(default_factory=list)
    contract: str
    feedback: str = ""

    def metric(self, name: Metric) -> float:
        return float(getattr(self, as_metric(name)))

    def file_json(self) -> dict[str, Any]:
        """The score.json object: ``{schema_version, hard, soft, mixed, checks, contract, feedback}``."""
        return {"schema_version": SCORE_SCHEMA_VERSION, **self.model_dump(mode="json")}


class ScoringUsage(BaseModel):
    """What a scorer spent on model calls for one rollout (the judge): record.json's ``judge``.

    ``cached``: the verdicts came from the rollout's judge.json, so nothing was spent now.
    """

    model: str
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    cached: bool = False

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True)
class Scored:
    """A scorer's answer for one rollout: the score, and what scoring it cost (None: nothing)."""

    score: Score
    usage: ScoringUsage | None = None


def make_score(
    hard: Any, soft: Any, checks: Iterable[Any], *, weight: float, contract: str, feedback: str = ""
) -> Score:
    """Build a Score from a scorer's raw answer, refusing values a scorer must not return."""
    try:
        hard_f = float(hard)
        soft_f = float(soft)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"hard and soft must be numbers, got {hard!r} and {soft!r}") from exc
    if hard_f not in (0.0, 1.0):
        raise ScoringError(f"hard must be 0 or 1, got {hard!r}")
    if math.isnan(soft_f) or not 0.0 <= soft_f <= 1.0:
        raise ScoringError(f"soft must lie in [0, 1], got {soft!r}")
    hard_i = int(hard_f)
    mixed = round((1.0 - weight) * hard_i + weight * soft_f, 6)
    return Score(
        hard=hard_i,
        soft=round(soft_f, 6),
        mixed=min(1.0, max(0.0, mixed)),
        checks=[str(c) for c in checks],
        contract=contract,
        feedback=_capped(feedback.strip()),
    )


def _capped(text: str) -> str:
    cut = "\n[feedback truncated]"
    return text if len(text) <= FEEDBACK_LIMIT else text[: FEEDBACK_LIMIT - len(cut)] + cut


def feedback_text(raw: Any, source: str) -> str:
    """A user scorer's ``feedback`` (a string, or a list of strings: one a line)."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list | tuple) and all(isinstance(line, str) for line in raw):
        return "\n".join(raw)
    raise ScoringError(f"{source} returned feedback of type {type(raw).__name__}; expected a string")


def score_from_mapping(
    raw: Any, *, weight: float, contract: str, source: str, policy: FeedbackPolicy = "full"
) -> Score:
    """Normalise what a user scorer returned (a mapping or an object with hard/soft/checks and an
    optional ``feedback``). Its feedback is free text, which may hold the answer: only the
    ``full`` policy keeps it."""
    if isinstance(raw, Score):
        kept = raw.feedback if policy == "full" else ""
        return make_score(raw.hard, raw.soft, raw.checks, weight=weight, contract=contract, feedback=kept)
    if isinstance(raw, Mapping):
        get = raw.get
    elif hasattr(raw, "hard") and hasattr(raw, "soft"):

        def get(key: str, default: Any = None) -> Any:
            return getattr(raw, key, default)

    else:
        raise ScoringError(f"{source} returned {type(raw).__name__}; expected {{hard, soft, checks}}")
    if get("hard") is None or get("soft") is None:
        raise ScoringError(f"{source} returned no hard/soft: {raw!r}")
    checks = get("checks", []) or []
    feedback = feedback_text(get("feedback"), source) if policy == "full" else ""
    return make_score(get("hard"), get("soft"), checks, weight=weight, contract=contract, feedback=feedback)


def require_same_contract(contracts: Iterable[str]) -> str:
    """The one contract hash shared by all ``contracts``; refuse to compare mixed stamps."""
    seen = sorted(set(contracts))
    if len(seen) > 1:
        raise ContractMismatchError(
            "scores were produced under different scoring contracts "
            f"({', '.join(c[:12] for c in seen)}): the suite's scoring.md, rubric.py, judge.md, "
            "refs/ or task scoring fields changed between them; re-score or re-run one side"
        )
    if not seen:
        raise ValueError("no scores to compare")
    return seen[0]


class ScoringFields(BaseModel):
    """The base of a scoring mode's ``Fields``: a task's ``scoring`` object without its ``mode``.

    Unknown keys are refused: a mode reads only its own fields, so a misspelt one
    (``ignorecase``) or another mode's would otherwise be ignored without a word.
    Each field's ``description`` says what it must hold (``validate`` quotes it);
    a validator that raises ``ValueError`` gives the whole message instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


class OpenFields(ScoringFields):
    """Any fields, kept as given (in ``model_extra``): the ``Fields`` of a scorer that declares none."""

    model_config = ConfigDict(extra="allow")


def parse_fields(cls: type[Scorer], scoring: Mapping[str, Any]) -> BaseModel:
    """``scoring`` without its ``mode``, validated by the mode's ``Fields``; raises pydantic's
    ValidationError."""
    return cls.Fields.model_validate({k: v for k, v in scoring.items() if k != "mode"})


def declared_fields(cls: type[Scorer]) -> set[str] | None:
    """The field names a mode's ``Fields`` declares, or None when it accepts any (``OpenFields``)."""
    if cls.Fields.model_config.get("extra") == "allow":
        return None
    return {info.alias or name for name, info in cls.Fields.model_fields.items()}


def unknown_fields(cls: type[Scorer], scoring: Mapping[str, Any]) -> list[str]:
    """Fields of ``scoring`` the mode does not read: skill-trainer ignores them, so skilltune
    ignores them too and ``validate`` warns (a misspelt field does nothing)."""
    declared = declared_fields(cls)
    if declared is None:
        return []
    return [k for k in scoring if k != "mode" and k not in declared]


class Scorer(ABC):
    """A scoring mode: ``(task, workspace, agent_result) -> Score``.

    Subclasses set ``mode`` and implement ``score``; they register through the
    ``skilltune.scorers`` entry-point group (the built-ins too). A scorer is made with the
    suite's ``ScoringContext`` (``self.context``: the suite folder, the contract hash, the
    mixed weight, the feedback policy, what rubric and judge modes read), never the suite itself.
    ``Fields`` is the pydantic model of the mode's fields (the task's ``scoring`` object without
    ``mode``), as a backend's ``Options``: ``validate`` reports what it refuses (file:line), and
    ``score`` reads them typed through ``fields(task)``. A scorer that declares none gets
    ``OpenFields``: anything passes, ``task.scoring`` as is. ``check_fields`` checks what a model
    cannot see (files in the suite folder); it runs once ``Fields`` accepted the object
    (``check_task`` sees the whole task object, for fields a mode reads beside ``scoring``). A
    scorer that cannot score raises ``ScoringError``; it never returns 0 for its own failure.
    ``make`` builds its Score (weight and contract from the context); ``feedback`` there is what
    ``context.allowed_feedback`` lets through.

    Scorers that call a model (the judge) also implement ``score_rollout`` (the rollout's
    record folder at hand: inputs saved there, verdicts cached there, usage reported),
    ``rescore`` (score again from the record folder alone, its workspace gone) and
    ``preflight`` (refuse to start a run that cannot be scored: no key, no client); a
    service that still fails after retries raises ``ScorerUnavailable``.
    """

    mode: ClassVar[str]
    Fields: ClassVar[type[BaseModel]] = OpenFields

    def __init__(self, context: ScoringContext) -> None:
        self.context = context

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        """Problems with a task's ``scoring`` fields that ``Fields`` cannot see (empty when valid)."""
        return []

    @classmethod
    def check_task(cls, task: Mapping[str, Any], suite_root: Path) -> list[str]:
        """Problems with the fields a mode reads from the task object itself (empty when valid)."""
        return []

    def fields(self, task: Task) -> BaseModel:
        """The task's scoring fields as ``Fields``; ScoringError for fields a validated suite cannot hold."""
        unknown = set(unknown_fields(type(self), task.scoring))
        try:
            return parse_fields(type(self), {k: v for k, v in task.scoring.items() if k not in unknown})
        except ValidationError as exc:
            where = "; ".join(field_problems(exc, top="scoring"))
            raise ScoringError(f"task {task.id}: invalid {self.mode} fields ({where})") from None

    @abstractmethod
    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score: ...

    def score_rollout(self, task: Task, workspace: Path, result: AgentResult, record_dir: Path) -> Scored:
        """Score a finished rollout whose record folder is ``record_dir`` (written before the record)."""
        return Scored(self.score(task, workspace, result))

    def rescore(self, task: Task, record_dir: Path, result: AgentResult) -> Scored:
        """Score again from the record folder alone (the workspace is gone)."""
        raise ScoringError(
            f"{self.mode} mode scores the workspace, which is gone: this rollout has to run again"
        )

    def preflight(self) -> None:  # noqa: B027 (most modes need nothing: a hook, not an abstract method)
        """Raise UsageError when nothing could be scored (checked before a run spends anything)."""

    def make(self, hard: Any, soft: Any, checks: Iterable[Any], feedback: str = "") -> Score:
        """A Score of this suite (its mixed weight and contract hash) from a scorer's raw answer."""
        return make_score(
            hard,
            soft,
            checks,
            weight=self.context.mixed_weight,
            contract=self.context.contract,
            feedback=feedback,
        )
