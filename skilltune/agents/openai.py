"""A model behind an OpenAI-compatible Chat Completions endpoint as a direct target (``--agent openai``).

Any server that speaks ``POST .../v1/chat/completions``: OpenAI, Azure, vLLM, llama.cpp's
server, llama-cpp-python, Ollama, LM Studio. ``base_url`` takes the ``.../v1`` URL (a bare
host gets ``/v1``); default ``$OPENAI_BASE_URL``, else api.openai.com. The model is
``model=`` or ``$OPENAI_MODEL``; the key is read from ``api_key_env`` (default
``$OPENAI_API_KEY``; a local server needs none). Each replicate sends its own ``seed``
(derived from the run seed, the replicate, the task and the skill; ``crn=true`` leaves the
skill out, so arms share their random numbers), which servers that honour seeds (OpenAI,
vLLM, llama.cpp, Ollama) use to make a replicate reproducible; ``seed=false`` sends none.
See agents/chat.py for what a rollout is.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from skilltune.agents.base import AgentOptions, AgentRequest
from skilltune.agents.chat import ChatBackend, ChatOptions
from skilltune.stats.seeds import derived_seed


class OpenAIOptions(ChatOptions):
    """``--agent-opt`` keys of the openai target."""

    seed: bool = Field(default=True, description="send a seed per replicate (where the endpoint honours one)")
    crn: bool = Field(default=False, description="the same seed for every skill (common random numbers)")


class OpenAIAgent(ChatBackend[OpenAIOptions]):
    name = "openai"
    provider = "openai"
    model_env = "OPENAI_MODEL"
    Options: ClassVar[type[AgentOptions]] = OpenAIOptions

    def seed_for(self, request: AgentRequest[OpenAIOptions]) -> int | None:
        options = request.options
        if not options.seed:
            return None
        skill = "" if options.crn else request.candidate_hash
        return derived_seed(request.seed, request.replicate, request.task.id, skill)
