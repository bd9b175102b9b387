"""The files a run writes and reads back, as versioned pydantic models: the run directory's schema.

Every JSON file of a run directory (and each journal line) is one model here, written and
read through it. Each carries ``schema_version``; reading checks it:

- a file from a **newer** skilltune is refused with a message saying what to do
  (``NewerRunFileError``), never half-read;
- a file from an **older** one is migrated on read, one version at a time
  (``RunFile.MIGRATIONS``); a version with no way forward is refused (``OldRunFileError``).

The version is one number for the whole run format (``SCHEMA_VERSION``): a change to any
file's shape bumps it, registers the migration (or the refusal) of the files it changed,
and adds a test that reads a file of the old version (tests/test_runfiles.py). Models
nested in these files (``Score``, ``Edit``, ``ProposerCall``) are part of the schema too.
score.json keeps a version of its own: nothing reads it back.

History: 1 = the files of skilltune 0.1.0.dev0 before this package (record.json,
comparison.json, config.json and step.json carried a version; seed.json, gate.json,
reflections.json, slow_update.json and journal lines did not). 2 = every file versioned;
journal events typed; ``UnitRecord.verdict`` lost the never-written value ``crash``.
3 = audit.json (``AuditFile``) and findings.json (``FindingsRecord``) are new (a file of
either claiming an older version is refused); config.json gained ``findings`` (the shared
findings file; a schema 2 config.json reads with none).
4 = record.json keeps each failed attempt of a retried rollout (``attempt_history``: status,
reason, wall time, its events file); proposer calls (reflections.json, slow_update.json) carry
``cost_usd`` and ``notes``. Files of schema 3 migrate with an empty history and unknown costs.
5 = judged scoring: judge.json and judge_inputs.json (new files); record.json gained the
status ``unscored`` with ``pending_status`` and the judge's usage (``judge``); stage events
the judge's tokens and USD; config.json the settings ``prompt_variant`` and
``judge_options``; gate.json ``secondary``. Files of version 4 read unchanged (every new
field has a default); a judge.json or judge_inputs.json claiming a version before 5 is refused.
6 = gate.json holds the task-level test: ``Verdict.test``, ``reused`` and ``prefetched``, each ``Round``'s
``reused`` incumbent rollouts and per-(task, replicate) ``pairs`` (gate.json of schema 5 or older
is migrated: its sequential verdicts are marked ``test: replicate-t``).
7 = a score (record.json's ``score``, score.json) carries ``feedback``: what the scorer says a person
would need to fix the failure. Also in 7: reflections.json keeps the edits taken out before the merge (``dropped``: an edit citing no
trajectory of its step's evidence, with the reason); a step record's ``decision`` may be ``repeat``
(a candidate equal to one a gate rejected earlier in the run: not gated again). Files of version 6
read unchanged (no feedback, ``dropped`` empty).
8 = record.json carries the agent's load decision (``skill_loaded``), comparison.json each arm's
``trigger`` statistics (precision, recall, accuracy on trigger tasks). Files of version 7 read
unchanged (the decision unknown, no trigger statistics). Also in 8: record.json says whether the
rollout was sealed (``sandbox``: bwrap, none, or inert for a backend that starts no process) and
config.json the run's ``--sandbox``; files of version 7 read as unsealed (``none``; ``inert`` for
the mock and the direct chat targets), as they ran.
9 = config.json's ``component`` (what the steps tune: ``body``, ``description`` or ``both``), an
edit's op may be ``description`` (the front matter's description rewritten), gate.json's secondary
check may name the tasks it vetoed on (``gated_on``: the joint gate of body and description edits).
Files of version 8 read unchanged (``body``). Also in 9: transfer.json (``Transfer``, new:
``skilltune compare`` with several agents), which no older skilltune reads. Also in 9 (a training
run with several agents, issue 22): config.json's ``agents`` (label, backend, options of each) and
``agents_gate`` (``mean`` or ``no-worse``); record.json's ``target`` (the label of the agent that
ran the rollout); gate.json's ``agents`` (each agent's val means of both arms and its one-sided
regression test) and ``agents_gate``; step.json / epoch.json's ``agents``. Each is left out of the
file when the run has one agent, so those files are as before, and schema-9 files without them read
unchanged (one agent).
10 = several proposals a step (issue 31): config.json's ``proposals`` (a config.json without it reads
as 1, the one ask of every earlier run); a step's ``asks/ask_NN.json`` (``AskFile``, new), and
reflections.json's ``proposals`` (each with its screen and fate) and ``selection``. Also in 10: a step
carried on ungated is verdict ``carried`` with decision ``carry`` in step.json and results.tsv (schema
9 wrote verdict ``discard`` and decision ``defer``; such a step.json is migrated on read, and
results.tsv, rebuilt from the records, follows).
"""

from __future__ import annotations

from skilltune.runfiles.base import (
    SCHEMA_VERSION,
    Migration,
    NewerRunFileError,
    OldRunFileError,
    RunFile,
    RunFileError,
)
from skilltune.runfiles.config import (
    AgentsGate,
    EditBudgetConfig,
    RunConfigFile,
    SeedFile,
    TrainConfig,
)
from skilltune.runfiles.journal import (
    Crashed,
    JournalEvent,
    Resumed,
    RunStart,
    SessionEnd,
    SessionStart,
    StageDone,
    UnitEnd,
    active_seconds,
    parse_event,
)
from skilltune.runfiles.judge import Criterion, JudgeCall, JudgeFile, JudgeInputsFile, JudgeVerdict
from skilltune.runfiles.proposals import (
    AskFile,
    LeaveOneOut,
    ProposalRecord,
    ProposalStatus,
    ReflectionsFile,
    ScreenFigures,
    Selection,
    SlowUpdateFile,
)
from skilltune.runfiles.review import (
    CHECKS,
    AuditFile,
    AuditFinding,
    Check,
    FindingsRecord,
    FindingsTarget,
)
from skilltune.runfiles.rollouts import (
    UNDECIDED,
    ArmResult,
    Comparison,
    FailedAttempt,
    Harm,
    PairResult,
    Phase,
    RolloutFiles,
    RolloutRecord,
    RolloutStatus,
    ScoredStatus,
    Transfer,
    TransferAgent,
)
from skilltune.runfiles.units import (
    CARRIED,
    UNIT_FILES,
    AgentEvidence,
    Decision,
    Figures,
    HarmCheck,
    Pair,
    PairedZStatistic,
    ReplicateTStatistic,
    Round,
    RoundCounts,
    SecondaryCheck,
    SignFlipStatistic,
    Statistic,
    StrictStatistic,
    UnitDecision,
    UnitRecord,
    UnitVerdict,
    Verdict,
    held_edits,
    replaced_by,
)
from skilltune.settings import AgentSpec, AgentSpecs, distinct_labels

__all__ = [
    "CARRIED",
    "CHECKS",
    "SCHEMA_VERSION",
    "UNDECIDED",
    "UNIT_FILES",
    "AgentEvidence",
    "AgentSpec",
    "AgentSpecs",
    "AgentsGate",
    "ArmResult",
    "AskFile",
    "AuditFile",
    "AuditFinding",
    "Check",
    "Comparison",
    "Crashed",
    "Criterion",
    "Decision",
    "EditBudgetConfig",
    "FailedAttempt",
    "Figures",
    "FindingsRecord",
    "FindingsTarget",
    "Harm",
    "HarmCheck",
    "JournalEvent",
    "JudgeCall",
    "JudgeFile",
    "JudgeInputsFile",
    "JudgeVerdict",
    "LeaveOneOut",
    "Migration",
    "NewerRunFileError",
    "OldRunFileError",
    "Pair",
    "PairResult",
    "PairedZStatistic",
    "Phase",
    "ProposalRecord",
    "ProposalStatus",
    "ReflectionsFile",
    "ReplicateTStatistic",
    "Resumed",
    "RolloutFiles",
    "RolloutRecord",
    "RolloutStatus",
    "Round",
    "RoundCounts",
    "RunConfigFile",
    "RunFile",
    "RunFileError",
    "RunStart",
    "ScoredStatus",
    "ScreenFigures",
    "SecondaryCheck",
    "SeedFile",
    "Selection",
    "SessionEnd",
    "SessionStart",
    "SignFlipStatistic",
    "SlowUpdateFile",
    "StageDone",
    "Statistic",
    "StrictStatistic",
    "TrainConfig",
    "Transfer",
    "TransferAgent",
    "UnitDecision",
    "UnitEnd",
    "UnitRecord",
    "UnitVerdict",
    "Verdict",
    "active_seconds",
    "distinct_labels",
    "held_edits",
    "parse_event",
    "replaced_by",
]
