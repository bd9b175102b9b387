"""A judged rollout's files: judge.json (the verdicts, a cache keyed on every input) and
judge_inputs.json (the workspace files the judge read, kept because workspaces are deleted)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from skilltune.runfiles.base import Migration, OldRunFileError, RunFile

FIRST_VERSION = 5  # judge.json and judge_inputs.json first exist in run schema 5


def _predating(name: str) -> dict[int, Migration]:
    """Refusals for versions before the file existed: such a file was not written by skilltune."""

    def refuse(raw: dict[str, Any]) -> dict[str, Any]:
        raise OldRunFileError(
            f"{name} claims a run schema from before {name} existed: delete it and the rollout is judged again"
        )

    return dict.fromkeys(range(1, FIRST_VERSION), refuse)


class Criterion(BaseModel):
    name: str
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""


class JudgeVerdict(BaseModel):
    """One sample's verdict, as validated: every criterion scored in [0, 1].

    ``passed`` is None when the judge did not say; the scorer then applies the suite's
    ``pass_threshold`` to the sample's soft score.
    """

    criteria: list[Criterion] = Field(min_length=1)
    overall: float = Field(ge=0.0, le=1.0)
    passed: bool | None = None
    reasoning: str = ""


class JudgeCall(BaseModel):
    """The calls behind one sample: attempts (a malformed reply is retried with a correction)."""

    sample: int
    attempts: int
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    rejected: list[str] = Field(default_factory=list)  # why each malformed reply was refused


class JudgeFile(RunFile):
    """judge.json: the samples of a judged rollout, valid while ``key`` matches its inputs."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = _predating("judge.json")

    key: str
    provider: str
    model: str
    mode: Literal["dataset", "rubric"]
    samples: list[JudgeVerdict]
    calls: list[JudgeCall] = Field(default_factory=list)


class JudgeInputsFile(RunFile):
    """judge_inputs.json: ``judge_inputs`` files of the workspace as the judge read them (capped)."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = _predating("judge_inputs.json")

    files: dict[str, str] = Field(default_factory=dict)
    truncated: list[str] = Field(default_factory=list)
    dropped: int = 0  # matches past the cap on the number of files
