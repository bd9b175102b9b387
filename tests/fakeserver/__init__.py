"""A scripted fake model server for offline tests of the real agent CLIs.

It speaks Anthropic Messages (SSE and plain), OpenAI Chat Completions and
Responses (SSE and plain) and Gemini generateContent / streamGenerateContent, on
127.0.0.1. A *scenario* picks each answer from the normalised request; the usual
rule is to count the tool results already in the conversation, so retries and
side calls (titles, routers: requests offering no tools) cannot shift the
script. Token usage is fixed (``INPUT_TOKENS``, ``OUTPUT_TOKENS``) so parsed usage
can be checked; scripted HTTP errors (400, 429, 529, 503) and a hanging answer
test infra-error handling. Every request is recorded.
"""

from tests.fakeserver.core import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    Failure,
    FakeModelServer,
    ModelRequest,
    Reply,
    ToolCall,
    final_text,
)

__all__ = [
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "Failure",
    "FakeModelServer",
    "ModelRequest",
    "Reply",
    "ToolCall",
    "final_text",
]
