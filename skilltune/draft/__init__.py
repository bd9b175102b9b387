"""Drafting suites for a person to review: ``skilltune draft triggers`` and ``skilltune draft apply``.

``draft_triggers`` (skilltune/draft/triggers.py) writes a trigger suite for a skill from the user's
other skills, with a review file; ``apply_review`` (review.py) writes the suite's split files from
the reviewed file. The names are loaded on first use, so the command's ``--help`` and the settings
model (settings.py) load no model-call machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skilltune.draft.review import Applied, apply_review
    from skilltune.draft.settings import DraftSettings
    from skilltune.draft.triggers import DraftResult, draft_triggers

_LAZY = {
    "Applied": "skilltune.draft.review",
    "apply_review": "skilltune.draft.review",
    "DraftSettings": "skilltune.draft.settings",
    "DraftResult": "skilltune.draft.triggers",
    "draft_triggers": "skilltune.draft.triggers",
}

__all__ = ["Applied", "DraftResult", "DraftSettings", "apply_review", "draft_triggers"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
