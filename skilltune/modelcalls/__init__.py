"""Bounded model calls: the one door every model call of skilltune goes through.

``--proposer api``, the direct targets (``--agent openai`` / ``anthropic``) and the judge ask
their model here, so each call is bounded the same way:

- **tokens**, in the field the endpoint reads: ``max_completion_tokens`` for api.openai.com
  and Azure, ``max_tokens`` for every other OpenAI-compatible server (llama.cpp's server,
  llama-cpp-python, vLLM, Ollama, LM Studio: llama-cpp-python ignores
  ``max_completion_tokens``) and for Anthropic. ``token_param=auto`` (the default) picks by
  host and learns from the endpoint: a 400 refusing the field swaps it, and a streamed
  reply that runs past the limit is cut by the client (the endpoint ignored the field:
  later calls send the other one). ``token_param=max_tokens|max_completion_tokens`` forces it.
  The client counts streamed pieces of text and tool-call arguments; ChatOpenAI drops a
  reasoning server's ``reasoning_content``, so thinking is bounded by the field and the clock.
- **wall-clock**: ``timeout_s`` per attempt, from sending the request to the last byte, and
  ``wall_limit_s`` for the whole call with its retries and backoff. At the limit the
  connection is shut down from the calling thread, so a generating server is cut off, not
  waited for (a server that keeps generating for a client that left still holds its own
  slot: bound it with the token limit).
- **retries**: 429 (after ``retry-after`` / ``retry-after-ms``, and every caller of the
  endpoint pauses as long), 5xx/408/409, connection resets and timeouts, with doubling
  backoff from ``backoff_s`` (capped at 30 s) and jitter, at most ``max_retries`` times;
  anything else (401/403, 404, 400) fails at once. Every final error names the endpoint,
  what it said and the setting to change.
- **rate limits** per endpoint URL, shared by all threads of the process: ``max_concurrent``
  requests in flight, ``requests_per_minute``, ``tokens_per_minute`` (the strictest any
  caller set). Waiting for them does not count against ``wall_limit_s``.
- **cancel**: ``cancel()`` is polled every 50 ms, while waiting for a limit, during the
  attempt and during backoff; when it turns true the connection is closed and
  ``CallCancelled`` raised. A KeyboardInterrupt in the calling thread closes it too.
- **accounting**: each Reply has the endpoint's token counts (LangChain's ``usage_metadata``;
  estimated when the endpoint sent none, ``usage_estimated``), USD from the price table
  (skilltune/modelcalls/prices.py, extended by ``prices``), the attempts and the reason of each
  failed one, and ``events`` (request parameters without the messages or the key, errors,
  retries, notes, the reply).
- **an endpoint that does not stream** (answers ``stream: true`` with one JSON object) is
  asked again without streaming, and later calls to it are not streamed (a note says so).

Transport: LangChain chat models, ``ChatOpenAI`` for any OpenAI-compatible endpoint (Chat
Completions) and ``ChatAnthropic``, built per attempt with their own retries off, on an
``httpx2`` client of ours that hands each attempt's socket to the thread that watches the
clock (transport.py). LangChain and the vendor SDKs are imported on a client's first call; a
missing one is a UsageError saying ``pip install 'skilltune[api]'``.

Public API::

    from skilltune.modelcalls import CallSettings, ChatRequest, ModelClient, resolve_endpoint

    endpoint = resolve_endpoint("openai", "http://127.0.0.1:8080/v1", None, where="--agent-opt")
    client = ModelClient(endpoint, CallSettings(timeout_s=60), where="--agent-opt")
    reply = client.ask("Say hi", system="Be brief.", model="qwen", max_tokens=64, temperature=0.7)
    reply.text, reply.finish, reply.tokens_in, reply.tokens_out, reply.cost_usd, reply.events

- ``resolve_endpoint(provider, base_url, api_key_env, where)`` -> ``Endpoint``: base_url or
  $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL or the vendor's host (an OpenAI-compatible bare host
  gets ``/v1``; Anthropic takes the bare host or ``.../v1``); the key is read from
  ``api_key_env`` (default OPENAI_API_KEY / ANTHROPIC_API_KEY) when a request is sent and is
  required (UsageError) when the variable was named or the vendor's host is used.
- ``CallSettings``: the limits above, a pydantic model whose fields callers mix into their own
  typed options (``class MyOptions(ProposerOptions, CallSettings)``).
- ``ModelClient(endpoint, settings, where=...)``: thread-safe; ``chat(ChatRequest, cancel=...)``
  and ``ask(prompt, system=..., cancel=..., model=..., max_tokens=..., temperature=...,
  seed=..., stop=(...))`` return a ``Reply``.
- ``structured(ChatRequest, schema, cancel=...)`` -> ``(parsed | None, Reply)``: the answer as an
  instance of the pydantic model ``schema``, asked for through LangChain's
  ``with_structured_output(schema, method="function_calling", include_raw=True)`` (a tool call
  the model is made to use), bounded, retried and accounted as ``chat``. ``parsed`` is None when
  the model answered without the tool call (``Reply.text`` is then its text, for the caller to
  parse itself: small local models often answer in prose or fenced JSON) or with arguments that
  do not validate (``Reply.text`` is then the arguments as JSON); ``Reply.notes`` says which.
  A server that streams the tool's name in every piece (llama-cpp-python) is read all the same.
- ``ChatRequest(messages=(ChatMessage(role, content), ...), model, max_tokens, temperature,
  seed, stop, extra, tools)``; ``ChatRequest.of(prompt, system=..., ...)``. ``extra`` holds more
  request fields sent as they are (``response_format`` for JSON output, ``top_p``...).
  ``tools`` offers functions (OpenAI's function form, sent in each API's own) that the model may
  call: ``Reply.tool_calls`` holds its calls (``ToolCall(id, name, arguments)``); the caller
  sends them back as an ``assistant`` ChatMessage with ``tool_calls`` and one ``tool`` message
  (``tool_call_id``) per result, and asks again (the direct targets' ``load_skill`` tool).
- ``ModelCallError`` (a SkilltuneError, exit 3): ``kind`` (rate_limited, server_error, network,
  timeout, auth, not_found, bad_request, budget), ``status``, ``retryable``, ``attempts``,
  ``events``. ``CallCancelled``: the cancel check fired (``events`` so far).
- ``forget_endpoints()``: drop the shared per-endpoint state (tests).
- ``skilltune.modelcalls.plain``: the proposers' and the judge's one door to a plain model, the
  ``PlainModel`` protocol (``APIPlainModel`` here, the agent CLIs' in skilltune.agents.plain)
  and ``ask_structured``, the one read-and-repair policy for an answer that must fit a schema.

Example of structured output::

    class Verdict(BaseModel):
        passed: bool
        reasoning: str

    verdict, reply = client.structured(ChatRequest.of(prompt, model="qwen", max_tokens=256), Verdict)
    if verdict is None:
        ...  # parse reply.text, or ask again
"""

from __future__ import annotations

from skilltune.modelcalls.client import ModelClient
from skilltune.modelcalls.limits import forget_endpoints
from skilltune.modelcalls.settings import (
    CallCancelled,
    CallSettings,
    ChatMessage,
    ChatRequest,
    Endpoint,
    ModelCallError,
    Provider,
    Reply,
    TokenParam,
    ToolCall,
    resolve_endpoint,
)

__all__ = [
    "CallCancelled",
    "CallSettings",
    "ChatMessage",
    "ChatRequest",
    "Endpoint",
    "ModelCallError",
    "ModelClient",
    "Provider",
    "Reply",
    "TokenParam",
    "ToolCall",
    "forget_endpoints",
    "resolve_endpoint",
]
