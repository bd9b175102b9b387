"""Proposers backed by a language model.

``ModelProposer`` holds what every model-backed proposer does the same way: render
the prompts, ask, validate the JSON answer against a schema (one repair retry),
and run rewrite mode's roles as separate calls. Subclasses only say how to ask
(``ask(role, prompt) -> Answer``). ``APIProposer`` (``--proposer api``) asks an
OpenAI-compatible or Anthropic endpoint through skilltune.modelcalls, so each call is
bounded in tokens and wall-clock time, retried within limits, and ends at once when the
run is asked to stop (``stop_requested``: the first Ctrl-C).
"""

from __future__ import annotations

import json
import re
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from skilltune.errors import SkilltuneError, UsageError
from skilltune.modelcalls import CallSettings, ModelCallError, ModelClient, Provider, resolve_endpoint
from skilltune.proposal import Edit, EvidencePacket, Proposal, ProposerCall
from skilltune.propose.base import Proposer, ProposerOptions, SlowUpdate, role_of
from skilltune.propose.prompts import reflect_prompt, rewrite_prompt, slow_update_prompt, tagged
from skilltune.propose.vet import (
    anchor_problem,
    anchor_repair_prompt,
    cited,
    parse_anchor_repair,
    repair_anchors,
)
from skilltune.validation import field_problems

_FENCE = re.compile(r"```(?:json|markdown|md)?\s*\n(.*?)```", re.S)


class ProposerUnavailable(SkilltuneError):
    """The model endpoint could not be reached or refused us (after its own retries)."""

    exit_code = 3


@dataclass
class Answer:
    text: str
    model: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    notes: list[str] = field(default_factory=list)  # what the model-call layer warned about


class EditsAnswer(BaseModel):
    # ``edits`` is required and nothing else is allowed: an answer of another shape (a lone edit,
    # say) gets the repair retry instead of passing as "no edits".
    model_config = ConfigDict(extra="forbid")

    edits: list[Edit]


def parse_json(text: str) -> Any:
    """The JSON in a model's answer (bare, or in a fenced block): the whole block when it is JSON
    (an array too: small models answer a bare list), else the outermost object in it."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        try:
            return json.loads(chunk)
        except json.JSONDecodeError:
            pass
        start, end = chunk.find("{"), chunk.rfind("}")
        if start >= 0 and end > start:
            try:
                return json.loads(chunk[start : end + 1])
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object found in the answer")


def extract_document(text: str) -> str:
    """A whole skill document from an answer: the fenced block when there is one."""
    fenced = [m.group(1) for m in _FENCE.finditer(text)]
    body = max(fenced, key=len) if fenced else text
    return body.strip() + "\n"


class ModelProposer(Proposer):
    """Prompts, schema validation with one repair retry, and roles as separate calls."""

    @abstractmethod
    def ask(self, role: str, prompt: str) -> Answer: ...

    def _call(self, role: str, prompt: str, calls: list[ProposerCall]) -> Answer:
        t0 = time.monotonic()
        answer = self.ask(role, prompt)
        calls.append(
            ProposerCall(
                role=role,
                model=answer.model,
                prompt=prompt,
                response=answer.text,
                seconds=round(time.monotonic() - t0, 3),
                tokens_in=answer.tokens_in,
                tokens_out=answer.tokens_out,
                cost_usd=answer.cost_usd,
                notes=answer.notes,
            )
        )
        return answer

    def propose(self, packet: EvidencePacket) -> Proposal:
        if packet.mode == "rewrite":
            return self._rewrite(packet)
        calls: list[ProposerCall] = []
        prompt = reflect_prompt(packet)
        answer = self._call("analyst", prompt, calls)
        try:
            edits = self._edits(answer.text)
        except ValueError as first:
            repair = (
                f"{prompt}\n\nYour previous answer could not be used:\n\n{tagged('problem', str(first))}\n\n"
                'Answer again with the JSON object only, {"edits": [...]}, as described at the top.'
            )
            answer = self._call("analyst (repair)", repair, calls)
            try:
                edits = self._edits(answer.text)
            except ValueError as second:
                return Proposal(calls=calls, notes={"error": f"invalid answer twice: {second}"})
        for rank, edit in enumerate(edits):
            edit.rank = rank
        return self._repair_anchors(packet, Proposal(edits=edits, calls=calls))

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
        answer = self._call("analyst (anchor repair)", prompt, proposal.calls)
        notes = dict(proposal.notes)
        try:
            anchors = parse_anchor_repair(parse_json(answer.text))
        except ValueError as exc:
            notes["anchor_repair"] = f"0 of {len(failed)} anchors repaired: {exc}"
            return proposal.model_copy(update={"notes": notes})
        edits, repaired = repair_anchors(edits, [i for i, _ in failed], anchors, packet)
        notes["anchor_repair"] = f"{repaired} of {len(failed)} anchors repaired"
        return proposal.model_copy(update={"edits": edits, "notes": notes})

    def _edits(self, text: str) -> list[Edit]:
        try:
            answer = parse_json(text)
            if isinstance(answer, list):  # the edits without their wrapper
                answer = {"edits": answer}
            return EditsAnswer.model_validate(answer).edits
        except ValidationError as exc:
            problems = "; ".join(field_problems(exc, limit=5))
            raise ValueError(f"the JSON does not match the schema: {problems}") from None

    def _rewrite(self, packet: EvidencePacket) -> Proposal:
        calls: list[ProposerCall] = []
        causes = self._call("failure analyst", rewrite_prompt(packet, "failure analyst"), calls).text
        draft = self._call("author", rewrite_prompt(packet, "author", causes=causes), calls).text
        review_prompt = rewrite_prompt(packet, "red-team reviewer", draft=extract_document(draft))
        final = extract_document(self._call("red-team reviewer", review_prompt, calls).text)
        files = dict(packet.skill_files)
        files[packet.skill_main] = final
        return Proposal(files=files, calls=calls)

    def slow_update(
        self, skill_text: str, comparison: str, kept: list[str], rejected: list[str], seed: int
    ) -> SlowUpdate:
        calls: list[ProposerCall] = []
        answer = self._call("slow-update", slow_update_prompt(skill_text, comparison, kept, rejected), calls)
        return SlowUpdate(guidance=extract_document(answer.text).strip(), calls=calls)


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
        self.client = ModelClient(endpoint, self.options, where="--proposer-opt")

    def ask(self, role: str, prompt: str) -> Answer:
        options = self.options
        assert isinstance(options, APIProposerOptions)
        model = options.model_for(role_of(role)) or str(options.model)
        try:
            reply = self.client.ask(
                prompt,
                model=model,
                max_tokens=options.max_tokens,
                temperature=options.temperature,
                cancel=self.stop_requested,
            )
        except ModelCallError as exc:
            raise ProposerUnavailable(
                f"the {options.provider} endpoint failed for the {role}: {exc}"
            ) from None
        return Answer(
            text=reply.text,
            model=model,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            cost_usd=reply.cost_usd,
            notes=reply.notes,
        )
