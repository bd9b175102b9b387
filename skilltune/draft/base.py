"""The drafter's contract: ``write`` one ask's queries, ``classify`` one query; every exchange a ``DraftCall``.

A drafter is a model behind the one model door (skilltune/draft/drafters.py) or the mock
(skilltune/draft/mock.py); the draft (triggers.py) sees only this contract, and logs each call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

from skilltune.draft.asks import CheckAsk, QueryAsk
from skilltune.errors import SkilltuneError

T = TypeVar("T")


class DrafterUnavailable(SkilltuneError):
    """The drafter's model failed for good (after its retries): the draft stops, nothing is written."""

    exit_code = 3


@dataclass
class DraftCall:
    """One exchange with the drafter or the checker, as draft_log.jsonl records it."""

    ask: str
    drafter: str
    model: str
    prompt: str
    answer: str
    finish: str = "stop"
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    seconds: float = 0.0
    problem: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Drafted(Generic[T]):
    """What one ask got: the value read (``ok`` False: no answer could be used) and its exchanges."""

    value: T
    ok: bool
    calls: list[DraftCall] = field(default_factory=list)


class Drafter(ABC):
    """``write(ask)``: the queries of one ask; ``classify(ask)``: the skill that fits a query best (None:
    none does). A drafter never raises for an answer it cannot read (``ok`` False); a model that fails
    for good raises DrafterUnavailable."""

    name: str

    @abstractmethod
    def write(self, ask: QueryAsk) -> Drafted[list[str]]: ...

    @abstractmethod
    def classify(self, ask: CheckAsk) -> Drafted[str | None]: ...
