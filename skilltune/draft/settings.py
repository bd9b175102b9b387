"""The settings of ``skilltune draft triggers``: one field per flag (skilltune/cli/settings.py makes
the flags), the Python API (``draft_triggers``) takes the same model or its fields as keywords."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from skilltune.settings import Settings, key_value_flag


class DraftSettings(Settings):
    """How a trigger suite is drafted: how many queries, by whom, checked by whom."""

    count: int = Field(
        default=120,
        ge=8,
        le=2000,
        description="Queries to write: half should trigger the skill, half should not (near misses for the "
        "catalogue's skills and unrelated requests); fewer when the drafter gives fewer distinct ones.",
    )
    seed: int = Field(
        default=0,
        description="Seed of every random choice: the mock's phrasings, the seed sent with each ask.",
    )
    drafter: str = Field(
        default="mock",
        description="Who writes the queries, spelt as --proposer: mock, api (an OpenAI-compatible or Anthropic "
        "endpoint, --drafter-opt model=NAME base_url=URL) or an agent CLI (claude, codex, gemini...).",
    )
    drafter_options: dict[str, Any] = key_value_flag(
        "--drafter-opt",
        "Drafter option key=value (repeatable), as --proposer-opt: model, base_url, api_key_env, max_tokens, "
        "temperature, timeout_s, wall_limit_s...",
    )
    check: bool = Field(
        default=True,
        description="Ask once more, for each query kept, which skill fits it best (the label check); "
        "disagreements are flagged in the review file.",
    )
    checker: str | None = Field(
        default=None,
        description="Who answers the label check, spelt as --drafter (unset: the drafter itself).",
    )
    checker_options: dict[str, Any] = key_value_flag(
        "--checker-opt", "Checker option key=value (repeatable), as --drafter-opt (for --checker)."
    )
