"""What a scorer knows of the suite it scores for: ``ScoringContext``, built by the suite."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from skilltune.contracts import FeedbackPolicy, PromptVariant, Task, variant_prompt


def _no_rubric() -> ModuleType:
    raise RuntimeError("this suite scores no task with rubric.py")


@dataclass(frozen=True)
class ScoringContext:
    """The suite's settings a scorer reads, and nothing else of the suite.

    ``root``: the suite folder (a command's ``SKILLTUNE_SUITE``, rubric.py, judge.md, a judge's
    references and ``.env``). ``contract``: the scoring-contract hash every Score carries.
    ``mixed_weight``: w in ``mixed = (1 - w) * hard + w * soft``. ``feedback``: scoring.md's
    ``feedback`` policy. ``prompt_variant``: the prompt the agent was given (rubric.py's ``mode``
    argument; the judge reads that prompt). ``judge``: the judge block of scoring.md with the
    ``--judge-opt`` overrides applied, unvalidated (judge mode validates it). ``rubric``: rubric.py
    as a module, imported once, on the first call (rubric mode).

    Built by ``Suite.scoring_context`` once the suite's options are set, so its hash is final.
    """

    root: Path
    contract: str
    mixed_weight: float = 0.5
    feedback: FeedbackPolicy = "full"
    prompt_variant: PromptVariant = "cheap"
    judge: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    rubric: Callable[[], ModuleType] = _no_rubric

    def prompt(self, task: Task) -> str:
        """The prompt the agent was given for ``task``; UsageError when the task has none for the variant."""
        return variant_prompt(task, self.prompt_variant, self.root)

    def allowed_feedback(self, full: str, no_answers: str) -> str:
        """The feedback the policy allows: ``full`` (answers included), ``no_answers`` (what failed,
        nothing of what was expected) or none."""
        return {"full": full, "no-answers": no_answers}.get(self.feedback, "")
