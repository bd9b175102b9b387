"""The Score contract and the Scorer plug-in base class."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltune.errors import ContractMismatchError, ScoringError

# score imports nothing of skilltune.suite at run time (these names are annotations only): the suite
# asks the scorer registry, so the dependency runs one way, suite -> score.
if TYPE_CHECKING:
    from skilltune.agents.base import AgentResult
    from skilltune.suite import Suite, Task

SCORE_SCHEMA_VERSION = 1


class Score(BaseModel):
    """How well one rollout did.

    Invariants: ``hard`` is 0 or 1; ``soft`` and ``mixed`` lie in [0, 1];
    ``mixed = (1 - w) * hard + w * soft`` with the suite's ``mixed_weight`` w;
    ``contract`` is the scoring-contract hash of the suite that produced it.
    A Score only exists for a rollout that was actually scored.
    """

    hard: int = Field(ge=0, le=1)
    soft: float = Field(ge=0.0, le=1.0)
    mixed: float = Field(ge=0.0, le=1.0)
    checks: list[str] = Field(default_factory=list)
    contract: str

    def metric(self, name: str) -> float:
        if name not in ("hard", "soft", "mixed"):
            raise ValueError(f"unknown metric {name!r}: use hard, soft or mixed")
        return float(getattr(self, name))

    def file_json(self) -> dict[str, Any]:
        """The score.json object: ``{schema_version, hard, soft, mixed, checks, contract}``."""
        return {"schema_version": SCORE_SCHEMA_VERSION, **self.model_dump(mode="json")}


def make_score(hard: Any, soft: Any, checks: Iterable[Any], *, weight: float, contract: str) -> Score:
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
    )


def score_from_mapping(raw: Any, *, weight: float, contract: str, source: str) -> Score:
    """Normalise what a user scorer returned (a mapping or an object with hard/soft/checks)."""
    if isinstance(raw, Score):
        return make_score(raw.hard, raw.soft, raw.checks, weight=weight, contract=contract)
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
    return make_score(get("hard"), get("soft"), checks, weight=weight, contract=contract)


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


class Scorer(ABC):
    """A scoring mode: ``(task, workspace, agent_result) -> Score``.

    Subclasses set ``mode`` and implement ``score``; they register through the
    ``skilltune.scorers`` entry-point group (the built-ins too). ``Fields`` is the
    pydantic model of the mode's fields (the task's ``scoring`` object without
    ``mode``), as a backend's ``Options``: ``validate`` reports what it refuses
    (file:line), and ``score`` reads them typed through ``fields(task)``. A scorer
    that declares none gets ``OpenFields``: anything passes, ``task.scoring`` as is.
    ``check_fields`` checks what a model cannot see (files in the suite folder);
    it runs once ``Fields`` accepted the object. A scorer that cannot score raises
    ``ScoringError``; it never returns 0 for its own failure.
    """

    mode: ClassVar[str]
    Fields: ClassVar[type[BaseModel]] = OpenFields

    def __init__(self, suite: Suite) -> None:
        self.suite = suite

    @classmethod
    def parse_fields(cls, scoring: Mapping[str, Any]) -> BaseModel:
        """``scoring`` without its ``mode``, validated by ``Fields``; raises pydantic's ValidationError."""
        return cls.Fields.model_validate({k: v for k, v in scoring.items() if k != "mode"})

    @classmethod
    def check_fields(cls, scoring: Mapping[str, Any], suite_root: Path) -> list[str]:
        """Problems with a task's ``scoring`` fields that ``Fields`` cannot see (empty when valid)."""
        return []

    def fields(self, task: Task) -> BaseModel:
        """The task's scoring fields as ``Fields``; ScoringError for fields a validated suite cannot hold."""
        try:
            return self.parse_fields(task.scoring)
        except ValidationError as exc:
            where = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'scoring'}: {e['msg']}" for e in exc.errors()
            )
            raise ScoringError(f"task {task.id}: invalid {self.mode} fields ({where})") from None

    @abstractmethod
    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score: ...

    def make(self, hard: Any, soft: Any, checks: Iterable[Any]) -> Score:
        return make_score(
            hard,
            soft,
            checks,
            weight=self.suite.config.mixed_weight,
            contract=self.suite.contract_hash,
        )
