"""A run's settings: checked into a TrainConfig, and the rule of which ones a resume may change.

A resumed run must end as the uninterrupted one would: only settings that cannot change
a result may differ from the stored ones (budgets, where rollouts run, how many at once),
and secrets, which config.json stores redacted, come back from the caller. Every way
of resuming (``skilltune resume``, ``train --resume``, ``skilltune.resume``) goes through
``settings_for_resume``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skilltune.errors import UsageError
from skilltune.runfiles import RunConfigFile, TrainConfig
from skilltune.runfiles.config import SEVERAL_AGENTS_SETTINGS
from skilltune.store import REDACTED, redact
from skilltune.validation import field_problems

# Settings a resume may change: none of them can change what the run decides.
MAY_CHANGE_ON_RESUME = frozenset(
    {"budget_rollouts", "budget_tokens", "budget_usd", "budget_hours", "workers", "executor", "ray_address"}
    | {"findings"}  # where the run's findings entry goes: it is written after every decision
)
_PATHS = frozenset({"suite", "skill", "runs_dir", "evidence_from", "cache", "findings"})
# Option tables that may hold secrets: config.json stores them redacted, a resume takes them again.
SECRET_TABLES = ("agent_options", "proposer_options", "gate_options")


def make_config(**settings: Any) -> TrainConfig:
    """Settings -> TrainConfig; every invalid value is listed (UsageError)."""
    try:
        return TrainConfig(**settings)
    except ValidationError as exc:
        lines = field_problems(exc, model=TrainConfig)
        raise UsageError("invalid training settings:\n  " + "\n  ".join(lines)) from None


def absolute_paths(settings: dict[str, Any]) -> dict[str, Any]:
    """config.json holds absolute paths, so resume works from any folder."""
    return {
        key: str(Path(value).resolve()) if key in _PATHS and value else value
        for key, value in settings.items()
    }


def config_file(config: TrainConfig, suite_hash: str, contract: str) -> RunConfigFile:
    """What config.json holds: the settings with secrets redacted, the suite's hashes."""
    exclude = set() if config.several else set(SEVERAL_AGENTS_SETTINGS)  # one agent: as before them
    stored = redact(config.model_dump(mode="json", exclude=exclude))
    return RunConfigFile.model_validate(stored | {"suite_hash": suite_hash, "contract": contract})


def _differs(given: Any, kept: Any, key: str) -> bool:
    """Whether a given value changes a stored one (flags arrive as text, paths relative)."""
    if key in _PATHS and isinstance(given, str | Path) and isinstance(kept, str):
        return Path(given).resolve() != Path(kept).resolve()
    if isinstance(given, dict) and isinstance(kept, dict):
        return any(_differs(v, kept.get(k), k) for k, v in given.items())
    if isinstance(given, bool) or isinstance(kept, bool):
        return bool(given != kept)
    try:
        return float(given) != float(kept)
    except (TypeError, ValueError):
        return str(given) != str(kept)


def _restore_secrets(stored: Any, given: Any) -> Any:
    """``stored`` with every redacted value replaced by the caller's; the rest stays as stored (a
    given value that differs from it, or a key it lacks, is then a change the caller sees)."""
    if isinstance(stored, dict) and isinstance(given, dict):
        out = dict(stored)
        for key, value in given.items():
            if key in stored:
                out[key] = _restore_secrets(stored[key], value)
        return out
    return given if stored == REDACTED else stored


def settings_for_resume(stored: RunConfigFile, given: dict[str, Any]) -> TrainConfig:
    """The settings of a resumed run: the stored ones, with what ``given`` may change applied.

    ``given`` holds the caller's settings (None values are "not given"); a value equal to
    the stored one is no change. Changing anything else is refused (UsageError, nothing
    written): the run would no longer be the one it started as.
    """
    settings = stored.settings().model_dump(mode="json")
    given = {key: value for key, value in given.items() if value is not None and value != {}}
    unknown = sorted(set(given) - set(settings))
    if unknown:
        raise UsageError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(settings))}")
    changed = []
    for key, value in given.items():
        if key in MAY_CHANGE_ON_RESUME:
            settings[key] = value
        elif key in SECRET_TABLES and isinstance(value, dict):
            restored = _restore_secrets(settings[key], value)
            if _differs(value, restored, key):
                changed.append(key)
            settings[key] = restored
        elif _differs(value, settings[key], key):
            changed.append(key)
    if changed:
        # suite and edit_budget have no flag: named as keys
        names = ", ".join((TrainConfig.flags(k) or [k])[0] for k in sorted(changed))
        raise UsageError(
            f"{names}: a resumed run keeps the settings it started with (a change would make it another "
            f"run); only {', '.join(sorted(MAY_CHANGE_ON_RESUME))} and redacted secrets may be given. "
            "Start a new --tag to change the others."
        )
    if REDACTED in str(settings.get("agents")):
        raise UsageError(
            "config.json holds redacted secrets in the options of --agent: a run with several agents "
            "takes them from the environment to resume (e.g. api_key_env=NAME in the agent's options)"
        )
    if REDACTED in str(settings):
        missing = sorted(k for k in SECRET_TABLES if REDACTED in str(settings[k]))
        raise UsageError(
            f"config.json holds redacted secrets under {', '.join(missing)}: give them again to resume "
            "(e.g. --agent-opt api_key=...), or set them in the environment"
        )
    return make_config(**settings)
