"""A model behind the Anthropic Messages API as a direct target (``--agent anthropic``).

``POST <host>/v1/messages``: ``base_url`` takes the bare host (``.../v1`` works too); default
``$ANTHROPIC_BASE_URL``, else api.anthropic.com. The model is ``model=`` or
``$ANTHROPIC_MODEL``; the key is read from ``api_key_env`` (default ``$ANTHROPIC_API_KEY``) and
sent as ``x-api-key``. The skill is the ``system`` field. The Messages API takes no seed:
replicates are independent samples at ``temperature`` (0.7 by default). See agents/chat.py
for what a rollout is.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import field_validator

from skilltune.agents.base import AgentOptions
from skilltune.agents.chat import ChatBackend, ChatOptions
from skilltune.modelcalls import TokenParam


class AnthropicOptions(ChatOptions):
    """``--agent-opt`` keys of the anthropic target."""

    @field_validator("token_param")
    @classmethod
    def _max_tokens_only(cls, value: TokenParam) -> TokenParam:
        if value == "max_completion_tokens":
            raise ValueError("the Messages API reads max_tokens only: drop token_param")
        return value


class AnthropicAgent(ChatBackend[AnthropicOptions]):
    name = "anthropic"
    provider = "anthropic"
    model_env = "ANTHROPIC_MODEL"
    Options: ClassVar[type[AgentOptions]] = AnthropicOptions
