"""Bounded model calls against the scripted fake server: token limits as the endpoint reads them,
wall-clock limits that end a call, retries, rate limits, cancel, accounting, structured output."""

from __future__ import annotations

import _thread
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel

from skilltune.errors import UsageError
from skilltune.modelcalls import (
    CallCancelled,
    CallSettings,
    ChatRequest,
    Endpoint,
    ModelCallError,
    ModelClient,
    Provider,
    forget_endpoints,
    resolve_endpoint,
)
from skilltune.modelcalls.limits import endpoint_state
from tests.fake_openai import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI
from tests.fakeserver import INPUT_TOKENS, Failure, FakeModelServer, ModelRequest, Reply, ToolCall

ANSWER = "one two three four five six seven eight nine ten"
KEY = "sk-test-secret-123"
NEVER = 600.0  # a hang no test waits for: the call must end it


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FAKE_KEY", KEY)
    forget_endpoints()
    yield
    forget_endpoints()


def answer(text: str = ANSWER) -> Callable[[ModelRequest], Reply]:
    return lambda request: Reply(text=text)


def client(
    server: FakeModelServer, provider: str = "openai", base: str = "/v1", **settings: Any
) -> ModelClient:
    quick = {"backoff_s": 0.01, "timeout_s": 30.0} | settings
    endpoint = resolve_endpoint(provider, server.url + base, "FAKE_KEY", where="--opt")  # type: ignore[arg-type]
    return ModelClient(endpoint, CallSettings(**quick), where="--opt")


def failing(failures: list[Failure]) -> FakeModelServer:
    """A server whose direct chat calls meet ``failures`` first, then get ANSWER."""
    return FakeModelServer(answer(), failures, side=answer(), failures_for="all")


def ask(c: ModelClient, max_tokens: int = 64, **fields: Any) -> Any:
    return c.ask("Count to ten.", system="Be brief.", model="local-model", max_tokens=max_tokens, **fields)


def headers(server: FakeModelServer) -> dict[str, str]:
    """The last request's headers, by lower-case name (HTTP names are case-insensitive)."""
    return {k.lower(): v for k, v in server.raw[-1]["headers"].items()}


def wait_for(check: Callable[[], bool], what: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s:g} s waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_reads_text_usage_and_sends_max_tokens_to_a_local_server(stream: bool) -> None:
    with FakeModelServer(answer(), side=answer()) as server:
        c = client(server, stream=stream, prices={"local-model": (1.0, 2.0)})
        reply = ask(c, temperature=0.7, seed=42, stop=("END",))
    assert reply.text == ANSWER and reply.finish == "stop" and reply.attempts == 1
    assert (reply.tokens_in, reply.tokens_out, reply.usage_estimated) == (INPUT_TOKENS, 30, False)
    assert reply.cost_usd == pytest.approx((INPUT_TOKENS * 1.0 + 30 * 2.0) / 1e6)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions" and request.stream is stream
    body = request.body
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body  # what local servers read
    assert (body["temperature"], body["seed"], body["stop"]) == (0.7, 42, ["END"])
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count to ten."},
    ]
    assert headers(server)["authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(reply.events)
    assert [e["type"] for e in reply.events] == ["request", "reply"]


def test_the_token_field_follows_the_host() -> None:
    assert (
        Endpoint("openai", "https://api.openai.com/v1", "K").default_token_param() == "max_completion_tokens"
    )
    assert (
        Endpoint("openai", "https://x.openai.azure.com/o", "K").default_token_param()
        == "max_completion_tokens"
    )
    for local in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "https://vllm.example/v1"):
        assert Endpoint("openai", local, "K").default_token_param() == "max_tokens"
    assert Endpoint("openai", "http://h:1", "K").url == "http://h:1/v1/chat/completions"
    assert Endpoint("openai", "http://h:1/v1/", "K").url == "http://h:1/v1/chat/completions"
    assert Endpoint("anthropic", "http://h:1", "K").url == "http://h:1/v1/messages"
    assert Endpoint("anthropic", "http://h:1/v1", "K").url == "http://h:1/v1/messages"


def test_a_stream_that_ignores_the_limit_is_cut_and_the_field_learnt() -> None:
    """llama-cpp-python reads max_tokens only: sent max_completion_tokens, it generates until its
    context is full. The client cuts the stream at the limit, closes the connection, and later calls
    (token_param=auto) send max_tokens."""
    with FakeModelServer(answer(), side=answer(), limit_fields=("max_tokens",)) as server:
        c = client(server)
        c.state.learn(token_param="max_completion_tokens")  # as an endpoint on OpenAI's host starts
        first = ask(c, max_tokens=4)
        wait_for(lambda: server.disconnects == 1, "the server to see its client leave")
        second = ask(c, max_tokens=4)
    assert first.finish == "length" and first.text == "one two three four "
    assert any("ignores max_completion_tokens" in n and "token_param=max_tokens" in n for n in first.notes)
    assert [r.body.get("max_completion_tokens") for r in server.requests] == [4, None]
    assert server.requests[1].body["max_tokens"] == 4
    assert second.finish == "length" and second.text == first.text and not second.notes


def test_a_server_that_does_not_stream_is_asked_for_one_json_answer() -> None:
    """A server that answers stream=true with one JSON object: the SDK reads no event from it, so
    the call resends unstreamed (not counted as a retry) and later calls ask for JSON at once."""
    with FakeOpenAI(lambda body: ANSWER) as server:
        endpoint = resolve_endpoint("openai", server.base_url, "FAKE_KEY")
        c = ModelClient(endpoint, CallSettings(max_retries=0), where="--opt")
        first, second = ask(c), ask(c)
    assert first.text == second.text == ANSWER and first.attempts == 2 and second.attempts == 1
    assert [r["body"]["stream"] for r in server.requests] == [True, False, False]
    assert "does not stream" in first.notes[0] and "--opt stream=false" in first.notes[0]
    assert not second.notes and (second.tokens_in, second.tokens_out) == (PROMPT_TOKENS, COMPLETION_TOKENS)


def test_a_forced_field_the_server_ignores_still_ends_within_the_limits() -> None:
    with FakeModelServer(answer(), side=answer(), limit_fields=("max_tokens",)) as server:
        streamed = ask(client(server, token_param="max_completion_tokens"), max_tokens=3)
        assert streamed.finish == "length" and len(streamed.text.split()) == 3
        plain = client(
            server, token_param="max_completion_tokens", stream=False, timeout_s=1.0, max_retries=1
        )
        with pytest.raises(ModelCallError, match=r"timeout_s=1 s.*raise --opt timeout_s") as caught:
            ask(plain, max_tokens=3)
    assert caught.value.kind == "timeout" and caught.value.attempts == 2
    assert len(server.requests) == 3


def test_a_400_refusing_a_field_is_answered_by_switching_it() -> None:
    refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    with FakeModelServer(answer(), side=answer(), refuse_fields={"max_tokens": refusal}) as server:
        c = client(server, max_retries=0)
        reply = ask(c)
        again = ask(c)
    assert reply.text == ANSWER and again.text == ANSWER
    assert [("max_tokens" in r.body, r.body.get("max_completion_tokens")) for r in server.requests] == [
        (True, None),
        (False, 64),
        (False, 64),
    ]
    with FakeModelServer(
        answer(), side=answer(), refuse_fields={"stream_options": "Unrecognized field stream_options"}
    ) as server:
        assert ask(client(server, max_retries=0)).text == ANSWER
    assert ["stream_options" in r.body for r in server.requests] == [True, False]


def test_429_waits_as_long_as_retry_after_says_and_500_is_retried() -> None:
    failures = [
        Failure(status=429, message="slow down", headers={"retry-after": "1"}),
        Failure(status=500, message="boom"),
        Failure(status=503, message="busy", headers={"retry-after-ms": "20"}),
    ]
    with FakeModelServer(answer(), failures, side=answer(), failures_for="all") as server:
        reply = ask(client(server))
    assert reply.text == ANSWER and reply.attempts == 4 and len(server.requests) == 4
    errors = [e for e in reply.events if e["type"] == "error"]
    assert [(e["status"], e["kind"]) for e in errors] == [
        (429, "rate_limited"),
        (500, "server_error"),
        (503, "server_error"),
    ]
    assert errors[0]["retry_in_s"] == 1.0 and errors[2]["retry_in_s"] == 0.02
    assert reply.failures[0].startswith("rate_limited: HTTP 429: slow down")


def test_retries_are_bounded_and_the_message_names_the_setting() -> None:
    with (
        failing([Failure(status=500)] * 5) as server,
        pytest.raises(ModelCallError, match=r"HTTP 500.*after 3 attempts.*--opt max_retries") as caught,
    ):
        ask(client(server, max_retries=2))
    assert caught.value.retryable and caught.value.kind == "server_error" and len(server.requests) == 3
    with (
        failing([Failure(status=429, headers={"retry-after": "3600"})]) as server,
        pytest.raises(ModelCallError, match=r"wall_limit_s=60 s: raise --opt wall_limit_s") as caught,
    ):
        ask(client(server, wall_limit_s=60))
    assert caught.value.kind == "budget" and len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "kind", "fix"),
    [
        (401, "auth", r"\$FAKE_KEY was refused.*--opt api_key_env"),
        (404, "not_found", "--opt base_url"),
        (400, "bad_request", "--opt model"),
    ],
)
def test_other_errors_fail_at_once_naming_the_setting(status: int, kind: str, fix: str) -> None:
    with failing([Failure(status=status)] * 3) as server, pytest.raises(ModelCallError, match=fix) as caught:
        ask(client(server))
    assert caught.value.kind == kind and not caught.value.retryable and len(server.requests) == 1


def test_a_context_overflow_says_to_lower_max_tokens() -> None:
    failure = Failure(status=400, message="requested tokens exceed context window of 2048")
    with (
        failing([failure]) as server,
        pytest.raises(ModelCallError, match=r"exceed the model's context: lower --opt max_tokens"),
    ):
        ask(client(server))


@pytest.mark.parametrize("after_pieces", [None, 3])
def test_a_hanging_server_is_cut_off_at_the_wall_clock(after_pieces: int | None) -> None:
    """Before the headers, or mid-stream: the server hangs for ten minutes, the call ends."""
    failures = [Failure(hang_s=NEVER, after_pieces=after_pieces)] * 2
    with FakeModelServer(
        answer(), failures, side=answer(), failures_for="all", limit_fields=("max_tokens",)
    ) as server:
        with pytest.raises(ModelCallError, match=r"no complete answer within timeout_s=0\.5 s") as caught:
            ask(client(server, timeout_s=0.5, max_retries=1))
        assert len(server.requests) == 2 and not server.release.is_set()  # both still hanging
    assert caught.value.kind == "timeout" and [e["type"] for e in caught.value.events].count("error") == 2


def test_cancel_closes_the_connection_at_once() -> None:
    stop = threading.Event()
    with FakeModelServer(answer(), [Failure(hang_s=NEVER)], side=answer(), failures_for="all") as server:
        c = client(server, timeout_s=NEVER, wall_limit_s=NEVER)

        def press() -> None:  # Ctrl-C, once the request is in flight
            wait_for(lambda: bool(server.requests), "the request")
            stop.set()

        threading.Thread(target=press).start()
        with pytest.raises(CallCancelled) as caught:
            ask(c, cancel=stop.is_set)
        assert not server.release.is_set()  # the server was still hanging: the call did not wait for it
    assert [e["type"] for e in caught.value.events] == ["request", "cancelled"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_ctrl_c_closes_a_generating_connection_at_once(provider: str) -> None:
    """The server streams for minutes (it reads no field we send); a Ctrl-C in the calling thread
    ends the call, and the server sees its client leave long before its answer would end."""
    with FakeModelServer(answer(), side=answer(), limit_fields=("no_such_field",)) as server:
        c = client(server, provider, "", timeout_s=NEVER, wall_limit_s=NEVER)

        def press() -> None:
            wait_for(lambda: bool(server.requests), "the request")
            _thread.interrupt_main()

        threading.Thread(target=press, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            ask(c, max_tokens=10_000_000)
        wait_for(lambda: server.disconnects == 1, "the server to see its client leave")
        assert not server.release.is_set()


def test_concurrency_is_held_across_threads() -> None:
    lock = threading.Lock()
    state = {"now": 0, "most": 0}

    def slow(request: ModelRequest) -> Reply:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return Reply(text="ok")

    with FakeModelServer(slow, side=slow) as server:
        c = client(server, max_concurrent=1)
        threads = [threading.Thread(target=ask, args=(c,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert len(server.requests) == 4 and state["most"] == 1


def _blocks(state: Any, tokens: int = 1) -> bool:
    """Whether acquiring must wait (the cancel check passes once, then stops the wait)."""
    polls = iter([False])
    try:
        state.release(state.acquire(tokens, cancel=lambda: next(polls, True)), None)
    except CallCancelled:
        return True
    return False


def test_requests_and_tokens_per_minute_and_a_429_pause_hold_for_every_caller() -> None:
    rpm = endpoint_state("http://a/v1/chat/completions")
    rpm.configure(CallSettings(requests_per_minute=2))
    assert not _blocks(rpm) and not _blocks(rpm) and _blocks(rpm)
    tpm = endpoint_state("http://b/v1/chat/completions")
    tpm.configure(CallSettings(tokens_per_minute=1000))
    assert not _blocks(tpm, 600) and _blocks(tpm, 600)
    assert not _blocks(endpoint_state("http://c"), 5000)  # one request over the limit still goes, alone
    paused = endpoint_state("http://d")
    paused.pause(30)
    assert _blocks(paused)


@pytest.mark.parametrize(("stream", "base"), [(True, ""), (False, "/v1")])
def test_the_anthropic_messages_api(stream: bool, base: str) -> None:
    with FakeModelServer(answer(), side=answer()) as server:
        reply = ask(client(server, "anthropic", base, stream=stream), temperature=0.2, stop=("END",))
    assert reply.text == ANSWER and reply.finish == "stop" and reply.tokens_out == 30
    # LangChain reads a stream's input count from message_delta, where the current API repeats it;
    # this server sends it in message_start only, as older Anthropic-compatible servers do: estimated.
    prompt_estimate = (len("Be brief.") + len("Count to ten.")) // 4
    assert (reply.tokens_in, reply.usage_estimated) == (
        (prompt_estimate, True) if stream else (INPUT_TOKENS, False)
    )
    (request,) = server.requests
    assert request.path == "/v1/messages" and request.api == "anthropic"
    assert request.body["system"] == "Be brief." and request.body["messages"] == [
        {"role": "user", "content": "Count to ten."}
    ]
    assert (request.body["max_tokens"], request.body["stop_sequences"], request.body["temperature"]) == (
        64,
        ["END"],
        0.2,
    )
    sent = headers(server)  # the anthropic SDK (2.x) sends the key as a bearer token
    assert sent["authorization"] == f"Bearer {KEY}" and sent["anthropic-version"]


def test_an_endpoint_resolves_its_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("NAMED_KEY", raising=False)
    local = resolve_endpoint("openai", "http://127.0.0.1:9/v1", None)
    assert local.key() is None  # a local server needs no key
    with pytest.raises(UsageError, match=r"\$NAMED_KEY.*--x api_key_env=VAR"):
        resolve_endpoint("openai", "http://127.0.0.1:9/v1", "NAMED_KEY", where="--x")
    with pytest.raises(UsageError, match=r"\$OPENAI_API_KEY"):
        resolve_endpoint("openai", None, None)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.1:8000/v1")
    assert resolve_endpoint("openai", None, None).base_url == "http://10.0.0.1:8000/v1"
    with pytest.raises(UsageError, match="not an http"):
        resolve_endpoint("openai", "127.0.0.1:8080", None)


def test_prices_the_user_sets_come_first() -> None:
    from skilltune.modelcalls.prices import estimate_cost

    assert estimate_cost("gpt-4.1", 1_000_000, 0) == 2.0
    assert estimate_cost("gpt-4.1", 1_000_000, 0, {"gpt-4": (1.0, 1.0)}) == 1.0
    assert estimate_cost("qwen2.5-coder-0.5b", 1000, 1000) is None
    assert estimate_cost("qwen2.5-coder-0.5b", 1000, 1000, {"qwen2.5": (0.0, 0.0)}) == 0.0


def test_a_request_is_bounded_by_construction_and_extra_fields_pass() -> None:
    request = ChatRequest.of("hi", model="m", max_tokens=5)
    assert request.max_tokens == 5 and request.messages[0].role == "user"
    schema = {"type": "json_object"}
    with FakeModelServer(answer(), side=lambda r: Reply(text='{"ok": true}')) as server:
        reply = ask(client(server), extra={"response_format": schema, "max_tokens": 10**6, "top_p": 0.5})
    assert reply.text == '{"ok": true}' and server.requests[0].wants_json
    body = server.requests[0].body
    assert (body["response_format"], body["top_p"], body["max_tokens"]) == (schema, 0.5, 64)


class Verdict(BaseModel):
    score: int
    reason: str


def judge(c: ModelClient) -> tuple[Verdict | None, Any]:
    return c.structured(ChatRequest.of("Judge this.", model="local-model", max_tokens=64), Verdict)


@pytest.mark.parametrize(
    ("provider", "base", "stream"),
    [("openai", "/v1", True), ("openai", "/v1", False), ("anthropic", "", True), ("anthropic", "", False)],
)
def test_structured_output_parses_the_forced_tool_call(provider: str, base: str, stream: bool) -> None:
    call = ToolCall("Verdict", {"score": 3, "reason": "clear"})
    with FakeModelServer(lambda request: Reply(tool_calls=[call]), [Failure(status=500)]) as server:
        parsed, reply = judge(client(server, provider, base, stream=stream))
    assert parsed == Verdict(score=3, reason="clear") and reply.finish == "tool_calls" and not reply.notes
    assert reply.attempts == 2 and [e["type"] for e in reply.events].count("error") == 1  # bounded as chat is
    assert [r.tools for r in server.requests] == [["Verdict"], ["Verdict"]]
    forced = server.requests[-1].body["tool_choice"]
    assert forced == (
        {"type": "tool", "name": "Verdict"}
        if provider == "anthropic"
        else {"type": "function", "function": {"name": "Verdict"}}
    )
    assert reply.events[0]["tool_choice"] == "Verdict" and reply.events[-1]["parsed"] is True


def test_structured_output_without_a_tool_call_returns_the_text_unparsed() -> None:
    """A small model may answer in prose: the caller (the judge) parses the text itself."""
    text = '<think>fine</think> {"score": 2, "reason": "ok"}'
    with FakeModelServer(lambda request: Reply(text=text)) as server:
        parsed, reply = judge(client(server))
    assert parsed is None and reply.text == text and reply.finish == "stop"
    assert reply.notes == ["the model answered without a Verdict tool call: its text is returned unparsed"]


def test_the_forced_tool_call_is_read_whatever_name_the_server_streams() -> None:
    """llama-cpp-python repeats the function name in each streamed delta, which LangChain joins."""
    call = ToolCall("VerdictVerdictVerdict", {"score": 1, "reason": "repeated name"})
    with FakeModelServer(lambda request: Reply(tool_calls=[call])) as server:
        parsed, reply = judge(client(server))
    assert parsed == Verdict(score=1, reason="repeated name") and not reply.notes


def test_a_tool_call_that_does_not_validate_comes_back_as_its_arguments() -> None:
    call = ToolCall("Verdict", {"score": "high"})
    with FakeModelServer(lambda request: Reply(tool_calls=[call])) as server:
        parsed, reply = judge(client(server, stream=False))
    assert parsed is None and json.loads(reply.text) == {"score": "high"}
    assert "the Verdict tool call does not validate" in reply.notes[0]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_local_server_gets_no_key(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with FakeModelServer(answer(), side=answer()) as server:
        endpoint = resolve_endpoint(provider, server.url, None)  # type: ignore[arg-type]
        reply = ModelClient(endpoint, CallSettings()).ask("hi", model="m", max_tokens=8)
        sent = headers(server)
    assert reply.text == ANSWER and "authorization" not in sent and "x-api-key" not in sent


def test_a_missing_langchain_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    c = ModelClient(Endpoint("anthropic", "http://127.0.0.1:9", "K"), CallSettings())
    with pytest.raises(UsageError, match=r"langchain_anthropic is missing\): pip install 'skilltune\[api\]'"):
        c.ask("hi", model="m", max_tokens=5)


# Answers the scripted server does not give: an error inside a 200 (a stream's error event, a JSON
# error object), a page that is no API answer, a connection closed with no answer.
ODD_ANSWERS = {
    "openai-stream-error": (b'data: {"error": {"message": "server overloaded"}}\n\n', "text/event-stream"),
    "openai-json-error": (b'{"error": {"message": "model unavailable"}}', "application/json"),
    "openai-html": (b"<html>a proxy's page</html>", "text/html"),
    "anthropic-stream-error": (
        b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n',
        "text/event-stream",
    ),
    "openai-reset": (b"", ""),
}


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("openai-stream-error", "error in the answer: server overloaded"),
        ("openai-json-error", "error in the answer: model unavailable"),
        ("openai-html", "the answer is not one of this API"),
        ("anthropic-stream-error", "error in the answer: overloaded_error: Overloaded"),
        ("openai-reset", "RemoteProtocolError: Server disconnected"),
    ],
)
def test_odd_answers_are_retried_as_server_errors(case: str, said: str) -> None:
    data, content_type = ODD_ANSWERS[case]
    posts: list[str] = []

    class Odd(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            posts.append(self.path)
            self.close_connection = True
            if not content_type:
                return  # closed with no answer
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    odd = ThreadingHTTPServer(("127.0.0.1", 0), Odd)
    threading.Thread(target=odd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    provider: Provider = "anthropic" if case.startswith("anthropic") else "openai"
    url = f"http://127.0.0.1:{odd.server_address[1]}" + ("/v1" if provider == "openai" else "")
    settings = CallSettings(max_retries=1, backoff_s=0.01, stream="stream" in case)
    c = ModelClient(Endpoint(provider, url, "FAKE_KEY"), settings)
    try:
        with pytest.raises(ModelCallError, match=said) as caught:
            ask(c)
    finally:
        odd.shutdown()
        odd.server_close()
    kind = "network" if case.endswith("reset") else "server_error"
    assert (caught.value.kind, caught.value.retryable, caught.value.attempts, len(posts)) == (
        kind,
        True,
        2,
        2,
    )
