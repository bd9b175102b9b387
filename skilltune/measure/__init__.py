"""Measuring a skill: run (evaluate), compare, calibrate and smoke, each over a rollout session."""

from __future__ import annotations

from pathlib import Path

from skilltune.settings import RolloutSettings
from skilltune.suite import Suite, load_suite


def read_suite(suite: Suite | Path | str, settings: RolloutSettings) -> Suite:
    """The suite a command measures on: a path read with the settings' prompt variant and judge
    overrides; a Suite as it was loaded (its own variant and judge)."""
    if isinstance(suite, Suite):
        return suite
    return load_suite(suite, prompt_variant=settings.prompt_variant, judge_options=settings.judge_options)
