"""Proposers backed by a language model.

``ModelProposer`` holds what every model-backed proposer does the same way: render the prompts,
ask its plain model (skilltune.modelcalls.plain: an endpoint, or an agent CLI with no tools)
for the edits as structured output through ``ask_structured`` (the one read-and-repair policy
the judge uses too: one repair round, a cut answer's complete edits kept), and run rewrite mode's
roles as separate calls. Subclasses only build the model (``self.model``). ``APIProposer``
(``--proposer api``) asks an OpenAI-compatible or Anthropic endpoint through
skilltune.modelcalls, so each call is bounded in tokens and wall-clock time, retried within
limits, and ends at once when the run is asked to stop (``stop_requested``: the first Ctrl-C).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from skilltune.errors import SkilltuneError, UsageError
from skilltune.modelcalls import (
    CallSettings,
    ChatRequest,
    ModelCallError,
    ModelClient,
    Provider,
    resolve_endpoint,
)
from skilltune.modelcalls.plain import (
    FENCE,
    Answer,
    APIPlainModel,
    Asked,
    Exchange,
    PlainModel,
    ask_structured,
    complete_items,
    parse_json,
    schema_problems,
)
from skilltune.proposal import Edit, EvidencePacket, Proposal, ProposerCall
from skilltune.propose.base import Proposer, ProposerOptions, SlowUpdate, role_of
from skilltune.propose.prompts import reflect_prompt, rewrite_prompt, slow_update_prompt, tagged
from skilltune.propose.vet import (
    AnchorRepair,
    anchor_problem,
    anchor_repair_prompt,
    append_unanchored,
    cited,
    parse_anchor_repair,
    repair_anchors,
)

T = TypeVar("T")


class ProposerUnavailable(SkilltuneError):
    """The model endpoint could not be reached or refused us (after its own retries)."""

    exit_code = 3


class EditsAnswer(BaseModel):
    """Record the proposed edits to the skill, strongest first."""

    # ``edits`` is required and nothing else is allowed: an answer of another shape (a lone edit,
    # say) gets the repair retry instead of passing as "no edits".
    model_config = ConfigDict(extra="forbid", title="record_edits")

    edits: list[Edit]


def read_edits(answer: Answer) -> list[Edit]:
    """The edits of an answer: the tool call's, else the JSON in its text (a bare list too). A cut
    answer (the token limit) keeps its complete edits; none complete is a ValueError as any
    unreadable answer, for the repair round."""
    if isinstance(answer.parsed, EditsAnswer):
        if answer.reply.finish != "length":
            return answer.parsed.edits
        # a streamed tool call cut at the limit reaches us closed by the partial-JSON reader: its last
        # edit may be cut short
        if len(answer.parsed.edits) < 2:
            raise ValueError("the answer was cut before its first complete edit")
        return answer.parsed.edits[:-1]
    text = answer.reply.text
    try:
        data = parse_json(text)
    except ValueError:
        if answer.reply.finish != "length":
            raise
        data = {"edits": complete_items(text, "edits")}
        if not data["edits"]:
            raise ValueError("the answer was cut before its first complete edit") from None
    if isinstance(data, list):  # the edits without their wrapper
        data = {"edits": data}
    try:
        return EditsAnswer.model_validate(data).edits
    except ValidationError as exc:
        raise ValueError(f"the JSON does not match the schema: {schema_problems(exc)}") from None


class DescriptionAnswer(BaseModel):
    """Record the skill's new description."""

    model_config = ConfigDict(extra="forbid", title="record_description")

    description: str
    rationale: str = ""
    support: list[str] = Field(default_factory=list)


def read_description(answer: Answer) -> Edit:
    """The description edit of an answer: the tool call's, else the JSON in its text."""
    parsed = answer.parsed
    if not isinstance(parsed, DescriptionAnswer):
        try:
            parsed = DescriptionAnswer.model_validate(parse_json(answer.reply.text))
        except ValidationError as exc:
            raise ValueError(f"the JSON does not match the schema: {schema_problems(exc)}") from None
    if not parsed.description.strip():
        raise ValueError("the description is empty")
    return Edit(
        op="description", text=parsed.description.strip(), rationale=parsed.rationale, support=parsed.support
    )


def edits_repair(prompt: str, problem: str, attempt: int) -> str:
    return (
        f"{prompt}\n\nYour previous answer could not be used:\n\n{tagged('problem', problem)}\n\n"
        'Answer again with the JSON object only, {"edits": [...]}, as described at the top.'
    )


def description_repair(prompt: str, problem: str, attempt: int) -> str:
    return (
        f"{prompt}\n\nYour previous answer could not be used:\n\n{tagged('problem', problem)}\n\n"
        'Answer again with the JSON object only, {"description": ..., "rationale": ..., "support": [...]}.'
    )


def read_anchors(answer: Answer) -> list[str | None]:
    if isinstance(answer.parsed, AnchorRepair):
        return answer.parsed.anchors
    return parse_anchor_repair(parse_json(answer.reply.text))


_RULE_WORDS = (3, 60)  # a rule of fewer words is a label, of more a paragraph
_LEAD = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|rule\s*\d*\s*[:.)-])\s*", re.I)


def read_rules(text: str) -> list[str]:
    """The rules of a focused ask's plain answer, in order: one per line, list markers, emphasis and
    quotes taken off; a line that introduces (ends with a colon), a heading, a placeholder or a line of
    too few or too many words is no rule. An answer given as JSON edits anyway yields their texts."""
    try:
        data = parse_json(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("edits"), list):
        lines = [str(e.get("text", "")) for e in data["edits"] if isinstance(e, dict)]
    else:
        lines = FENCE.sub(lambda m: m.group(1), text).splitlines()
    rules = []
    for line in lines:
        rule = _LEAD.sub("", line.strip()).replace("**", "").strip().strip("\"'`").strip()
        if not rule or rule.endswith(":") or rule.startswith("#") or "<" in rule or "{" in rule:
            continue
        if _RULE_WORDS[0] <= len(rule.split()) <= _RULE_WORDS[1]:
            rules.append(rule if rule[-1] in ".!?" else f"{rule}.")
    return list(dict.fromkeys(rules))


def extract_document(text: str) -> str:
    """A whole skill document from an answer: the fenced block when there is one."""
    fenced = [m.group(1) for m in FENCE.finditer(text)]
    body = max(fenced, key=len) if fenced else text
    return body.strip() + "\n"


class ModelProposer(Proposer):
    """Prompts, the edits asked for through ``ask_structured``, and roles as separate calls.
    Subclasses set ``self.model`` and may bound the answer (``max_tokens``, ``temperature``)."""

    model: PlainModel
    max_tokens: int = 4096
    temperature: float | None = None

    def _request(self, role: str, prompt: str, packet: EvidencePacket | None = None) -> ChatRequest:
        """The request of one call. A step's sample or re-ask (``packet.temperature``) is asked at that
        temperature, or the proposer's own when higher, with the packet's seed where the endpoint
        takes one: the step's asks must be able to differ, and a resumed step asks the same."""
        model = self.options.model_for(role_of(role)) or ""
        temperature, seed = self.temperature, None
        if packet is not None and packet.temperature is not None:
            temperature = max(packet.temperature, self.temperature or 0.0)
            seed = packet.seed
        return ChatRequest.of(
            prompt, model=model, max_tokens=self.max_tokens, temperature=temperature, seed=seed
        )

    def _record(self, role: str, exchanges: list[Exchange], calls: list[ProposerCall]) -> None:
        for i, exchange in enumerate(exchanges):
            reply, parsed = exchange.answer.reply, exchange.answer.parsed
            calls.append(
                ProposerCall(
                    role=role if i == 0 else f"{role} (repair)",
                    model=reply.model,
                    prompt=exchange.prompt,
                    response=reply.text or (parsed.model_dump_json() if parsed is not None else ""),
                    seconds=exchange.seconds,
                    tokens_in=reply.tokens_in,
                    tokens_out=reply.tokens_out,
                    cost_usd=reply.cost_usd,
                    notes=reply.notes,
                )
            )

    def _structured(
        self,
        role: str,
        prompt: str,
        schema: type[BaseModel],
        read: Callable[[Answer], T],
        repair_rounds: int,
        calls: list[ProposerCall],
        repair: Callable[[str, str, int], str] = edits_repair,
        packet: EvidencePacket | None = None,
    ) -> Asked[T]:
        try:
            asked = ask_structured(
                self.model, self._request(role, prompt, packet), schema, read,
                repair_rounds=repair_rounds, repair=repair, cancel=self.stop_requested,
            )  # fmt: skip
        except ModelCallError as exc:
            raise ProposerUnavailable(f"{self.model.what} failed for the {role}: {exc}") from None
        self._record(role, asked.exchanges, calls)
        return asked

    def _call(
        self, role: str, prompt: str, calls: list[ProposerCall], packet: EvidencePacket | None = None
    ) -> str:
        """A text answer (rewrite's roles, the slow update)."""
        try:
            answer = self.model.ask(self._request(role, prompt, packet), cancel=self.stop_requested)
        except ModelCallError as exc:
            raise ProposerUnavailable(f"{self.model.what} failed for the {role}: {exc}") from None
        self._record(role, [Exchange(prompt, answer, answer.reply.seconds)], calls)
        return answer.reply.text

    def propose(self, packet: EvidencePacket) -> Proposal:
        if packet.component == "description":
            return self._describe(packet)
        if packet.mode == "rewrite":
            return self._rewrite(packet)
        if packet.focus is not None:
            return self._focused(packet)
        calls: list[ProposerCall] = []
        asked = self._structured(
            "analyst", reflect_prompt(packet), EditsAnswer, read_edits, 1, calls, packet=packet
        )
        if asked.value is None:
            return Proposal(calls=calls, notes={"error": f"invalid answer twice: {asked.problems[-1]}"})
        edits = asked.value
        for rank, edit in enumerate(edits):
            edit.rank = rank
        last = asked.exchanges[-1].answer.reply
        notes = {}
        if last.finish == "length":
            notes["cut"] = f"the answer was cut at the token limit: its {len(edits)} complete edits kept"
        return self._repair_anchors(packet, Proposal(edits=edits, calls=calls, notes=notes))

    def _focused(self, packet: EvidencePacket) -> Proposal:
        """A focused ask: one short question, the answer in plain words; each rule in it appended to the
        skill, citing the group's failed trajectories (a small model writes a rule more readily than it
        fills a schema of anchored edits)."""
        assert packet.focus is not None
        calls: list[ProposerCall] = []
        answer = self._call("analyst (focused)", reflect_prompt(packet), calls, packet)
        rules = read_rules(answer)[: packet.max_edits]
        support = [t.id for t in packet.failures]
        edits = [
            Edit(op="append", file=packet.skill_main, text=f"- {rule}", rationale=packet.focus.label,
                 support=support, rank=rank)
            for rank, rule in enumerate(rules)
        ]  # fmt: skip
        notes = {} if edits else {"error": f"no rule in the answer: {' '.join(answer.split())[:200]!r}"}
        return Proposal(edits=edits, calls=calls, notes=notes)

    def _describe(self, packet: EvidencePacket) -> Proposal:
        """One call for a new description (whatever the mode): one ``description`` edit."""
        calls: list[ProposerCall] = []
        asked = self._structured(
            "analyst", reflect_prompt(packet), DescriptionAnswer, read_description, 1, calls,
            repair=description_repair, packet=packet,
        )  # fmt: skip
        if asked.value is None:
            return Proposal(calls=calls, notes={"error": f"invalid answer twice: {asked.problems[-1]}"})
        return Proposal(edits=[asked.value], calls=calls)

    def _repair_anchors(self, packet: EvidencePacket, proposal: Proposal) -> Proposal:
        """One repair round for the anchors not found in the skill (of edits that cite the evidence:
        the others are dropped anyway)."""
        edits = proposal.edits
        failed = [
            (index, problem)
            for index, edit in enumerate(edits)
            if cited(edit, packet) and (problem := anchor_problem(packet, edit)) is not None
        ]
        if not failed:
            return proposal
        prompt = anchor_repair_prompt(packet, [(edits[i], problem) for i, problem in failed])
        asked = self._structured(
            "analyst (anchor repair)", prompt, AnchorRepair, read_anchors, 0, proposal.calls
        )
        notes = dict(proposal.notes)
        if asked.value is None:
            notes["anchor_repair"] = f"0 of {len(failed)} anchors repaired: {asked.problems[-1]}"
        else:
            edits, repaired = repair_anchors(edits, [i for i, _ in failed], asked.value, packet)
            notes["anchor_repair"] = f"{repaired} of {len(failed)} anchors repaired"
        edits, turned = append_unanchored(edits, packet)
        if turned:
            notes["anchor_repair"] += (
                f"; {turned} edit(s) whose anchor is nowhere in the skill appended at its end instead"
            )
        return proposal.model_copy(update={"edits": edits, "notes": notes})

    def _rewrite(self, packet: EvidencePacket) -> Proposal:
        calls: list[ProposerCall] = []
        causes = self._call("failure analyst", rewrite_prompt(packet, "failure analyst"), calls, packet)
        draft = self._call("author", rewrite_prompt(packet, "author", causes=causes), calls, packet)
        review_prompt = rewrite_prompt(packet, "red-team reviewer", draft=extract_document(draft))
        final = extract_document(self._call("red-team reviewer", review_prompt, calls, packet))
        files = dict(packet.skill_files)
        files[packet.skill_main] = final
        return Proposal(files=files, calls=calls)

    def slow_update(
        self, skill_text: str, comparison: str, kept: list[str], rejected: list[str], seed: int
    ) -> SlowUpdate:
        calls: list[ProposerCall] = []
        answer = self._call("slow-update", slow_update_prompt(skill_text, comparison, kept, rejected), calls)
        return SlowUpdate(guidance=extract_document(answer).strip(), calls=calls)


class APIProposerOptions(ProposerOptions, CallSettings):
    """``--proposer-opt`` keys of ``--proposer api``: the endpoint, sampling, and the model-call
    limits of skilltune.modelcalls (``timeout_s`` per attempt, ``wall_limit_s`` per call with its
    retries, ``max_retries``, ``token_param``, ``stream``, ``max_concurrent``,
    ``requests_per_minute``, ``tokens_per_minute``, ``prices``)."""

    provider: Provider = "openai"
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="name of the variable holding the key")
    temperature: float = 0.0
    max_tokens: PositiveInt = 4096


class APIProposer(ModelProposer):
    """A model behind an OpenAI-compatible or Anthropic API, through skilltune.modelcalls."""

    name = "api"
    Options = APIProposerOptions

    def __init__(self, suite: Any, options: ProposerOptions) -> None:
        super().__init__(suite, options)
        assert isinstance(self.options, APIProposerOptions)
        if not self.options.model:
            raise UsageError("the api proposer needs a model: --proposer-opt model=NAME")
        endpoint = resolve_endpoint(
            self.options.provider, self.options.base_url, self.options.api_key_env, where="--proposer-opt"
        )
        self.model = APIPlainModel(
            ModelClient(endpoint, self.options, where="--proposer-opt"), self.options.model
        )
        self.max_tokens = self.options.max_tokens
        self.temperature = self.options.temperature
