"""The mock agent: deterministic, no model, for tests, demos and benchmarks.

It reads skill-trainer's mock fields on each task:

- ``requires``: rule ids. A rule is satisfied when its normalised id or one of
  its ``match`` phrases occurs in the normalised skill text, or when a single
  skill line matches every regex of its ``match_regex`` group (case-insensitive).
- ``failure_hints``: the symptom printed for each missing rule.
- ``noise``: probability that one satisfied rule flips to missing; with empty
  ``requires`` the task fails with that probability (pure noise).

Extensions for benchmarks: ``forbids`` (phrases; a skill containing one fails the
task with probability ``forbid_penalty``, default 1), ``p_follow`` (each
satisfied rule is followed with this probability), ``mock_writes`` (files the
agent writes into its workspace when it solves the task) and
``mock_infra_errors`` (the first N attempts end in ``infra_error``).

Options that make two mock agents respond to different rules (``skilltune compare`` with several
``--agent``, the transfer table): ``ignores`` (rule ids this agent does not follow even when the
skill states them: they count as missing) and ``harmed_by`` (rules or phrases that make this
agent fail the task when the skill states them, whether or not the task requires them: a rule is
stated as ``requires`` matches it, by its id or the task's ``match``/``match_regex`` for it; any
other entry is a phrase, found in the normalised skill text as a rule id is). Both are
deterministic and part of the options, so of the cache key (left out of it when empty: keys of
rollouts without them are as before).

Randomness is seeded on (task id, replicate, run seed, candidate hash), so two
skills get independent noise as real agents do; option ``crn`` drops the
candidate hash (common random numbers across arms).

Load decision (``AgentResult.skill_loaded``, what trigger mode scores): the mock loads the skill
when the task's prompt shares a key term with the skill's front-matter ``description``
(``loads_skill``); with no skill it loads nothing, and a skill with no description (a single
instruction file) gets no decision (None). The decision is recorded only: the skill stays in
context as placed, so body tasks score as before.

Output: a header line, ``PASS:<rule>`` per satisfied rule, ``SYMPTOM: <hint>``
per missing rule, ``RESULT: solved|unsolved`` — skill-trainer's mock suites
score unchanged.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, NonNegativeFloat, SerializerFunctionWrapHandler, field_validator, model_serializer

from skilltune.agents.base import AgentBackend, AgentOptions, AgentRequest, AgentResult, Message, SealSupport
from skilltune.skill import split_front_matter
from skilltune.stats.seeds import seeded_random
from skilltune.suite.model import Task

DEFAULT_HINT = "the response failed one of the task requirements"
DEFAULT_FORBID_HINT = "the agent followed advice that does not fit this task"
HARM_HINT = "this agent followed the rule '{rule}' and it led it astray on this task"
_RULE_LISTS = ("ignores", "harmed_by")


class MockOptions(AgentOptions):
    crn: bool = Field(default=False, description="common random numbers: same noise for every skill")
    sleep_s: NonNegativeFloat = Field(default=0.0, description="stand-in latency per rollout (benchmarks)")
    ignores: list[str] = Field(
        default_factory=list,
        description="rule ids this agent does not follow even when the skill states them",
    )
    harmed_by: list[str] = Field(
        default_factory=list,
        description="rules (or phrases) whose statement in the skill makes this agent fail the task",
    )

    @field_validator(*_RULE_LISTS, mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        """``ignores=a`` (one rule) as well as ``ignores=a,b`` or a JSON list."""
        return [value] if isinstance(value, str) else value

    @model_serializer(mode="wrap")
    def _without_empty_rule_lists(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Empty ``ignores`` and ``harmed_by`` are left out of the dump (so of the cache key)."""
        data = handler(self)
        for key in _RULE_LISTS:
            if isinstance(data, dict) and not data.get(key):
                data.pop(key, None)
        return data


def normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


# The clause of a description that says when to use the skill: from "Use when" (or "use this skill
# when", "use it for", "trigger whenever"...) to the end.
_WHEN_CLAUSE = re.compile(
    r"\b(?:use|trigger|load|invoke)\b(?:\s+(?:it|this|this skill|the skill))?\s+(?:when|whenever|for|if|on)\b(.*)",
    re.IGNORECASE | re.DOTALL,
)
# Words of a "use when" clause that say nothing about the task (compared once stemmed).
_STOP_WORDS = [
    "about",
    "after",
    "also",
    "any",
    "anything",
    "asks",
    "being",
    "both",
    "does",
    "doing",
    "done",
    "each",
    "even",
    "every",
    "from",
    "have",
    "help",
    "into",
    "just",
    "like",
    "make",
    "many",
    "more",
    "most",
    "much",
    "need",
    "only",
    "other",
    "over",
    "really",
    "request",
    "says",
    "should",
    "skill",
    "some",
    "something",
    "such",
    "task",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "this",
    "those",
    "through",
    "using",
    "what",
    "when",
    "whenever",
    "where",
    "which",
    "while",
    "will",
    "with",
    "within",
    "without",
    "work",
    "would",
    "your",
    "user",
    "users",
    "want",
    "wants",
    "mention",
    "mentions",
    "asked",
]
_MIN_TERM = 4  # letters of a key term, once stemmed


def _stem(word: str) -> str:
    """A light suffix stemmer: plural -s / -ies, then -ing or -ed, then a final -e."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_TERM:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > _MIN_TERM else word


_STOP_STEMS = frozenset(_stem(w) for w in _STOP_WORDS)


def trigger_terms(description: str) -> set[str]:
    """The key terms of a skill's description: the stemmed words (at least four letters, stop words
    aside) of its "use when" clause, or of the whole description when it has none."""
    found = _WHEN_CLAUSE.search(description)
    clause = found.group(1) if found and found.group(1).strip() else description
    stems = (_stem(w) for w in normalise(clause).split())
    return {s for s in stems if len(s) >= _MIN_TERM and s not in _STOP_STEMS}


def loads_skill(description: str, prompt: str) -> tuple[bool, list[str]]:
    """The mock's load decision: (loaded, the key terms of ``description`` found in ``prompt``). It
    loads the skill when one of the description's key terms (``trigger_terms``) is a word of the
    prompt, both stemmed alike."""
    words = {_stem(w) for w in normalise(prompt).split()}
    matched = sorted(trigger_terms(description) & words)
    return bool(matched), matched


class MockAgent(AgentBackend[MockOptions]):
    name = "mock"
    Options = MockOptions
    native_files: ClassVar[tuple[str, ...]] = ("AGENTS.md", "CLAUDE.md")
    reports_skill_loads = True
    seal_support: ClassVar[SealSupport] = "inert"  # no process; it reads only its workspace

    def run(self, request: AgentRequest[MockOptions]) -> AgentResult:
        options = request.options
        task = request.task
        if options.sleep_s:
            time.sleep(options.sleep_s)
        if request.attempt < int(task.field("mock_infra_errors", 0) or 0):
            return AgentResult(
                status="infra_error",
                reason="mock: scripted infra error (HTTP 529 overloaded)",
                events=[{"type": "error", "status": 529}],
            )
        skill_text = self._skill_text(request)
        seed_parts: list[object] = [task.id, request.replicate, request.seed]
        if not options.crn:
            seed_parts.append(request.candidate_hash)
        rng = seeded_random(*seed_parts)
        output, solved = run_mock_rules(
            task,
            skill_text,
            rng,
            header=(f"MOCK ROLLOUT task={task.id} seed={request.seed} replicate={request.replicate}"),
            ignores=options.ignores,
            harmed_by=options.harmed_by,
        )
        if solved:
            for rel, text in (task.field("mock_writes") or {}).items():
                target = request.workspace / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(str(text), encoding="utf-8")
        loaded, matched = self._load_decision(request)
        events: list[dict[str, Any]] = [
            {"type": "init", "agent": "mock", "skill_chars": len(skill_text), "placement": options.placement},
            {"type": "skill_load", "skill": request.skill_name, "loaded": loaded, "matched": matched},
            {"type": "message", "role": "assistant", "text": output},
            {"type": "result", "solved": solved, "turns": 1},
        ]
        return AgentResult(
            status="ok",
            final_text=output,
            events=events,
            messages=[Message(role="assistant", content=output)],
            model=options.model or "mock",
            tokens_in=max(1, len(request.prompt) // 4 + len(skill_text) // 4),
            tokens_out=max(1, len(output) // 4),
            cost_usd=0.0,
            turns=1,
            exit_code=0,
            skill_loaded=loaded,
        )

    def _load_decision(self, request: AgentRequest[MockOptions]) -> tuple[bool | None, list[str]]:
        """(loaded, matched key terms): False with no skill, None for a skill with no description."""
        if request.skill_name is None:
            return False, []
        text = self._skill_file(request)
        data = split_front_matter(text).data if text is not None else None
        description = (data or {}).get("description")
        if not isinstance(description, str) or not description.strip():
            return None, []
        return loads_skill(description, request.task.prompt)

    def _skill_file(self, request: AgentRequest[MockOptions]) -> str | None:
        """The skill's SKILL.md as the agent got it (None: a single instruction file, or none)."""
        placement = request.options.placement
        if placement == "system":
            return request.system_prompt
        if placement == "prepend":
            return request.prompt.replace(request.task.prompt, "")
        path = request.workspace / self.native_skill_dir(request.skill_name or "") / "SKILL.md"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def _skill_text(self, request: AgentRequest[MockOptions]) -> str:
        """What the agent would have read of the skill, given its placement."""
        placement = request.options.placement
        if placement == "system":
            return request.system_prompt or ""
        if placement == "prepend":
            return request.prompt.replace(request.task.prompt, "")
        parts = []
        if request.skill_name:
            folder = request.workspace / self.native_skill_dir(request.skill_name)
            parts += [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.md")) if p.is_file()]
        parts += [
            (request.workspace / name).read_text(encoding="utf-8")
            for name in self.native_files
            if (request.workspace / name).is_file()
        ]
        return "\n".join(parts)


def run_mock_rules(
    task: Task,
    skill_text: str,
    rng: random.Random,
    header: str,
    ignores: Sequence[str] = (),
    harmed_by: Sequence[str] = (),
) -> tuple[str, bool]:
    """The mock's decision for one task and skill text: (output, solved). A rule in ``ignores`` is
    missing even when the skill states it; a rule of ``harmed_by`` the skill states fails the task."""
    requires = [str(r) for r in task.field("requires", []) or []]
    hints: dict[str, str] = task.field("failure_hints", {}) or {}
    match: dict[str, list[str]] = task.field("match", {}) or {}
    match_regex: dict[str, list[str]] = task.field("match_regex", {}) or {}
    noise = float(task.field("noise", 0.0) or 0.0)
    p_follow = float(task.field("p_follow", 1.0) if task.field("p_follow") is not None else 1.0)
    norm_skill = normalise(skill_text)
    lines = skill_text.splitlines()

    def satisfied_by_skill(rule: str) -> bool:
        phrases = [rule, *match.get(rule, [])]
        if any(normalise(p) and normalise(p) in norm_skill for p in phrases):
            return True
        regexes = match_regex.get(rule, [])
        return bool(regexes) and any(
            all(re.search(rx, line, re.IGNORECASE) for rx in regexes) for line in lines
        )

    satisfied = [r for r in requires if r not in ignores and satisfied_by_skill(r)]
    missing = [r for r in requires if r not in satisfied]
    if p_follow < 1.0:
        followed = [r for r in satisfied if rng.random() < p_follow]
        missing += [r for r in satisfied if r not in followed]
        satisfied = followed
    if noise > 0 and satisfied and rng.random() < noise:
        missing.append(satisfied.pop(rng.randrange(len(satisfied))))

    symptoms = [hints.get(r, DEFAULT_HINT) for r in missing]
    forbids = [str(f) for f in task.field("forbids", []) or []]
    penalty = float(task.field("forbid_penalty", 1.0) if task.field("forbid_penalty") is not None else 1.0)
    forbidden = any(normalise(f) and normalise(f) in norm_skill for f in forbids)
    forbid_hit = forbidden and rng.random() < penalty
    if forbid_hit:
        symptoms.append(str(task.field("forbid_hint") or DEFAULT_FORBID_HINT))
    harms = [r for r in harmed_by if satisfied_by_skill(r)]
    symptoms += [HARM_HINT.format(rule=r) for r in harms]

    if requires:
        solved = not missing and not forbid_hit and not harms
    else:
        solved = not (noise > 0 and rng.random() < noise) and not forbid_hit and not harms
    out = [header, *(f"PASS:{r}" for r in satisfied), *(f"SYMPTOM: {s}" for s in symptoms)]
    out.append(f"RESULT: {'solved' if solved else 'unsolved'}")
    return "\n".join(out) + "\n", solved
