"""Systemic faults: bad input, missing tools, a suite that cannot be used.

A failed rollout is data (a RolloutRecord with a status), never one of these.
These are raised for problems the user must fix; the CLI prints the message
without a traceback and exits with ``exit_code``.
"""

from __future__ import annotations


class SkilltuneError(Exception):
    """A problem the user can fix. ``str(err)`` says what is wrong and how to fix it."""

    exit_code: int = 2


class UsageError(SkilltuneError):
    """Bad input or usage: a malformed suite, skill, option or path (exit 2)."""


class ScoringError(Exception):
    """A scorer could not score a rollout (not a 0: the rollout gets status scoring_error)."""


class ContractMismatchError(SkilltuneError):
    """Scores stamped with different scoring contracts were about to be compared."""


class InfraFailure(SkilltuneError):
    """Every rollout of a command ended ``infra_error``: nothing could be measured (exit 3)."""

    exit_code = 3


class SkilltuneWarning(UserWarning):
    """Something the user set that skilltune cannot honour as they may expect (the command goes on);
    the CLI prints it as one ``warning:`` line."""
