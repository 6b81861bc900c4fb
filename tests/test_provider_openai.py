"""The ``openai`` provider against a real Chat Completions server on 127.0.0.1 (``tests/_openai_server.py``)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import Any

import pytest
import trio
from _openai_server import (
    FakeOpenAI,
    RecordedRequest,
    Reply,
    chunk,
    completion,
    error_body,
    serve,
    split_bytes,
    sse,
    stream_reply,
    tool_call,
    tool_call_delta,
    usage_chunk,
)
from hypothesis import given
from hypothesis import strategies as st

from toolflow import ModelProvider, ModelRequest, ModelResponse, ProviderError, Usage, UsageError
from toolflow._plugins import load_plugins
from toolflow.default_plugins import _http_provider, _openai_chat, openai
from toolflow.default_plugins._openai_chat import OpenAIProvider
from toolflow.default_plugins.openai import create_provider

GUARD = 10
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the notes.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}
WEATHER_ARGS = '{"city": "Zürich", "unit": "celsius"}'
SEARCH_ARGS = '{"q": "naïve 🌍 café"}'


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own OPENAI_* variables never reach these tests."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def fast_clock() -> trio.testing.MockClock:
    """Trio time running 100 times faster than real time, for timeouts of seconds against a real server.

    (``autojump_clock`` would jump whenever trio waits for the server thread, racing its answers.)
    """
    return trio.testing.MockClock(rate=100)


@asynccontextmanager
async def open_provider(server: FakeOpenAI, **options: Any) -> AsyncIterator[OpenAIProvider]:
    provider = create_provider("test-model", **{"base_url": server.base_url, **options})
    try:
        yield provider
    finally:
        await provider.aclose()


def _request(fmt: str = "openai", **fields: Any) -> ModelRequest:
    fields.setdefault("messages", [{"role": "user", "content": "Find my notes on trio."}])
    return ModelRequest(format=fmt, **fields)


async def _ask(server: FakeOpenAI, request: ModelRequest | None = None, **options: Any) -> ModelResponse:
    async with open_provider(server, **options) as provider:
        return await provider.complete(request or _request())


async def _fails(server: FakeOpenAI, request: ModelRequest | None = None, **options: Any) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await _ask(server, request, **options)
    assert caught.value.provider == "openai"
    return caught.value


def _interleaved_tool_call_events() -> list[dict[str, Any]]:
    """Two calls whose argument pieces alternate and split JSON strings (and words) anywhere."""
    return [
        chunk(role="assistant"),
        chunk(tool_calls=[tool_call_delta(0, call_id="call_w", name="get_weather", arguments="")]),
        chunk(tool_calls=[tool_call_delta(0, arguments='{"city": "Zü')]),
        chunk(tool_calls=[tool_call_delta(1, call_id="call_s", name="search", arguments='{"q": "na')]),
        chunk(tool_calls=[tool_call_delta(0, arguments='rich", "unit": "cel')]),
        chunk(tool_calls=[tool_call_delta(1, arguments="ïve 🌍 ca")]),
        chunk(tool_calls=[tool_call_delta(0, arguments='sius"}'), tool_call_delta(1, arguments='fé"}')]),
        chunk(finish_reason="tool_calls"),
        usage_chunk(31, 17),
    ]


EXPECTED_CALLS = [
    tool_call("call_w", "get_weather", WEATHER_ARGS),
    tool_call("call_s", "search", SEARCH_ARGS),
]


# -- registration and options -------------------------------------------------------------------


def test_the_default_plugins_register_the_openai_factory() -> None:
    """load_plugins() offers `openai` under toolflow_register_model_providers, from the built-in plugin."""
    plugins = load_plugins(entry_points=False)
    found = plugins.registered("toolflow_register_model_providers")["openai"]
    assert found == [("toolflow.default_plugins.openai", create_provider)]


def test_registering_the_plugin_imports_no_httpx() -> None:
    """Importing the plugin module and loading the plugins leaves httpx unimported."""
    code = (
        "import sys\nfrom toolflow._plugins import load_plugins\n"
        "load_plugins(entry_points=False).registered('toolflow_register_model_providers')\n"
        "print('httpx' in sys.modules, 'toolflow.default_plugins.openai' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.split() == ["False", "True"]


def test_the_provider_meets_the_protocol() -> None:
    """An OpenAIProvider is a ModelProvider named openai that speaks openai, fallback and text, and hides its key."""
    provider = create_provider("gpt-4o-mini", api_key="sk-secret")
    assert isinstance(provider, ModelProvider)
    assert (provider.name, provider.formats) == ("openai", ("openai", "fallback", "text"))
    assert (provider.model, provider.base_url, provider.stream) == ("gpt-4o-mini", openai.DEFAULT_BASE_URL, True)
    assert "sk-secret" not in repr(provider)


@pytest.mark.parametrize(
    ("target", "options", "error", "words"),
    [
        ("gpt-4o", {"temprature": 0.2}, TypeError, "temprature"),
        ("  ", {}, UsageError, "needs a model name"),
        ("gpt-4o", {"base_url": "ftp://example.com"}, UsageError, "'ftp://example.com'"),
        ("gpt-4o", {"base_url": "http://[::1"}, UsageError, r"is not a URL: Invalid IPv6 URL, got 'http://\[::1'"),
        ("gpt-4o", {"base_url": "http://u:s3cret@h:port/v1"}, UsageError, r"is not a URL: .*, got 'http://h:port/v1'"),
        ("gpt-4o", {"base_url": "https://:8080/v1"}, UsageError, "is not a URL: it names no host"),
        ("gpt-4o", {"timeout": 0}, UsageError, "timeout must be a positive number"),
        ("gpt-4o", {"response_timeout": 0}, UsageError, "response_timeout must be a positive number"),
        ("gpt-4o", {"response_timeout": float("inf")}, UsageError, "response_timeout must be a positive number"),
        (
            "gpt-4o",
            {"response_timeout": "60"},
            UsageError,
            "response_timeout must be a positive number of seconds, got '60'",
        ),
        ("gpt-4o", {"response_timeout": True}, UsageError, "response_timeout must be a positive number"),
        ("gpt-4o", {"max_tokens": 0}, UsageError, "max_tokens must be a positive integer"),
        ("gpt-4o", {"temperature": -1}, UsageError, "temperature must be a number from 0"),
        ("gpt-4o", {"extra_body": ["seed"]}, UsageError, "extra_body must be a mapping"),
    ],
)
def test_bad_options_are_refused_when_the_provider_is_made(
    target: str, options: dict[str, Any], error: type[Exception], words: str
) -> None:
    """An unknown option is a TypeError; a bad value a UsageError naming it."""
    with pytest.raises(error, match=words):
        create_provider(target, **options)


async def test_base_url_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without options, OPENAI_BASE_URL and OPENAI_API_KEY decide where the request goes and its bearer token."""
    with trio.fail_after(GUARD), serve(Reply(json=completion("hi"))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "/")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        provider = create_provider("env-model")
        try:
            await provider.complete(_request())
        finally:
            await provider.aclose()
        (request,) = server.requests
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-from-env"
        assert request.json()["model"] == "env-model"


# -- non-streaming ------------------------------------------------------------------------------


async def test_non_streaming_text_answer_and_request_body() -> None:
    """stream=False: the system prompt is the first message, no tools or stream_options are sent, the answer is read."""
    with trio.fail_after(GUARD), serve(Reply(json=completion("Trio is structured.", usage=(12, 4)))) as server:
        request = _request(system="You are terse.")
        response = await _ask(server, request, stream=False, api_key="sk-test")
        assert response == ModelResponse(
            message={"role": "assistant", "content": "Trio is structured."},
            usage=Usage(prompt_tokens=12, completion_tokens=4),
            finish_reason="stop",
        )
        (sent,) = server.requests
        assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
        assert sent.headers["authorization"] == "Bearer sk-test"
        assert sent.headers["content-type"] == "application/json"
        assert sent.json() == {
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Find my notes on trio."},
            ],
            "stream": False,
        }


async def test_non_streaming_tool_calls() -> None:
    """Tool calls come back in the history's shape, with content None beside them; tools are sent."""
    reply = completion(None, tool_calls=EXPECTED_CALLS, usage=(40, 9))
    with trio.fail_after(GUARD), serve(Reply(json=reply)) as server:
        response = await _ask(server, _request(tools=[SEARCH_TOOL]), stream=False)
        assert response.message == {"role": "assistant", "content": None, "tool_calls": EXPECTED_CALLS}
        assert response.finish_reason == "tool_calls"
        assert response.usage == Usage(prompt_tokens=40, completion_tokens=9)
        body = server.requests[0].json()
        assert body["tools"] == [SEARCH_TOOL]
        assert "authorization" not in server.requests[0].headers


async def test_non_streaming_calls_are_normalised() -> None:
    """Decoded arguments are re-encoded, a missing id is made up (unique), extra keys are dropped."""
    raw: list[dict[str, Any]] = [
        {"function": {"name": "search", "arguments": {"q": "x"}}, "index": 0},
        {"type": "function", "function": {"name": "search", "arguments": '{"q": "y"}'}},
    ]
    reply = completion("", tool_calls=raw, usage=None)
    with trio.fail_after(GUARD), serve(Reply(json=reply)) as server:
        response = await _ask(server, stream=False)
    calls = response.message["tool_calls"]
    assert [c["function"] for c in calls] == [
        {"name": "search", "arguments": '{"q": "x"}'},
        {"name": "search", "arguments": '{"q": "y"}'},
    ]
    assert all(set(c) == {"id", "type", "function"} and c["type"] == "function" for c in calls)
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["id"] != calls[1]["id"]
    assert response.message["content"] is None
    assert response.usage is None


async def test_read_only_history_and_extra_options_are_sent() -> None:
    """Read-only mappings serialise; max_tokens, temperature and extra_body are sent; a None in extra_body removes."""
    history = [MappingProxyType({"role": "user", "content": "hi", "name": "ann"})]
    with trio.fail_after(GUARD), serve(stream_reply(chunk(content="ok"), chunk(finish_reason="stop"))) as server:
        await _ask(
            server,
            _request(messages=history),
            max_tokens=64,
            temperature=0.0,
            extra_body={"seed": 7, "stream_options": None, "temperature": 0.5},
        )
        body = server.requests[0].json()
    assert body["messages"] == [{"role": "user", "content": "hi", "name": "ann"}]
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (64, 0.5, 7)
    assert "stream_options" not in body
    assert body["stream"] is True


async def test_a_server_that_ignores_stream_true_is_read_as_json() -> None:
    """A JSON body to a streaming request is parsed like a non-streaming answer."""
    with trio.fail_after(GUARD), serve(Reply(json=completion("plain"))) as server:
        response = await _ask(server)
    assert response.message == {"role": "assistant", "content": "plain"}


# -- streaming ----------------------------------------------------------------------------------


async def test_streamed_text_is_joined_with_usage_and_finish_reason() -> None:
    """Content deltas join into one message; usage comes from the final chunk with empty choices."""
    events = [
        chunk(role="assistant", content=""),
        chunk(content="Trio "),
        chunk(content="is "),
        chunk(content="structured."),
        chunk(finish_reason="stop"),
        usage_chunk(12, 4),
    ]
    with trio.fail_after(GUARD), serve(stream_reply(*events)) as server:
        response = await _ask(server, _request(system="Be terse.", tools=[SEARCH_TOOL]))
        sent = server.requests[0]
    assert response == ModelResponse(
        message={"role": "assistant", "content": "Trio is structured."},
        usage=Usage(prompt_tokens=12, completion_tokens=4),
        finish_reason="stop",
    )
    body = sent.json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    assert body["tools"] == [SEARCH_TOOL]
    assert sent.headers["accept"] == "text/event-stream"


async def test_streamed_tool_calls_equal_the_non_streaming_answer() -> None:
    """Interleaved calls with split arguments assemble into the message a non-streaming call returns."""
    plain = completion(None, tool_calls=EXPECTED_CALLS, usage=(31, 17))
    with trio.fail_after(GUARD), serve(stream_reply(*_interleaved_tool_call_events()), Reply(json=plain)) as server:
        streamed = await _ask(server)
        unstreamed = await _ask(server, stream=False)
    assert streamed == unstreamed
    assert streamed.message["tool_calls"] == EXPECTED_CALLS
    assert streamed.finish_reason == "tool_calls"
    assert streamed.usage == Usage(prompt_tokens=31, completion_tokens=17)


@pytest.mark.parametrize("cut", ["inside multi-byte characters", "every byte"])
async def test_a_byte_stream_split_anywhere_assembles_the_same_calls(cut: str) -> None:
    """HTTP chunks that split lines, JSON strings and UTF-8 characters (ü, 🌍) change nothing."""
    data = sse(*_interleaved_tool_call_events(), "[DONE]")
    if cut == "every byte":
        offsets: list[int] = list(range(1, len(data)))
    else:
        umlaut, globe = data.index("ü".encode()), data.index("🌍".encode())
        offsets = [umlaut + 1, globe + 1, globe + 2, globe + 3, data.index(b"data:") + 3, data.index(b"\n\n") + 1]
    with trio.fail_after(GUARD), serve(Reply(chunks=split_bytes(data, offsets))) as server:
        response = await _ask(server)
    assert response.message == {"role": "assistant", "content": None, "tool_calls": EXPECTED_CALLS}


async def test_stream_lines_end_only_at_cr_or_lf() -> None:
    """U+2028, U+0085 and a surrogate pair split across deltas survive; CRLF line ends and comments are fine."""
    text = "a\u2028b\u0085c"
    data = (
        ": keep-alive\r\n\r\n"
        f"data: {json.dumps(chunk(content=text), ensure_ascii=False)}\r\n\r\n"
        'data: {"choices": [{"index": 0, "delta": {"content": " \\ud83c"}}]}\r\n\r\n'
        'data: {"choices": [{"index": 0, "delta": {"content": "\\udf0d"}}]}\r\r'
        "data: [DONE]\n\n"
    ).encode()
    with trio.fail_after(GUARD), serve(Reply(chunks=split_bytes(data, range(1, len(data), 7)))) as server:
        response = await _ask(server)
    assert response.message == {"role": "assistant", "content": text + " 🌍"}


async def test_streamed_calls_without_index_and_text_beside_calls() -> None:
    """Deltas without an index start a call at each new id; text beside the calls is kept."""
    events = [
        chunk(content="Let me look."),
        chunk(tool_calls=[{"id": "a", "type": "function", "function": {"name": "search", "arguments": '{"q":'}}]),
        chunk(tool_calls=[{"function": {"arguments": ' "x"}'}}]),
        chunk(tool_calls=[{"id": "b", "function": {"name": "search", "arguments": {"q": "y"}}}]),
        chunk(finish_reason="tool_calls"),
    ]
    with trio.fail_after(GUARD), serve(stream_reply(*events)) as server:
        response = await _ask(server)
    assert response.message == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [tool_call("a", "search", '{"q": "x"}'), tool_call("b", "search", '{"q": "y"}')],
    }
    assert response.usage is None


def _index_zero_events(grouped: bool) -> list[dict[str, Any]]:
    """Ollama's parallel calls: every call whole in one delta, all at index 0 (in one chunk, or one chunk each)."""
    deltas = [
        tool_call_delta(0, call_id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"])
        for call in EXPECTED_CALLS
    ]
    chunks = [chunk(tool_calls=deltas)] if grouped else [chunk(tool_calls=[delta]) for delta in deltas]
    return [chunk(role="assistant"), *chunks, chunk(finish_reason="tool_calls"), usage_chunk(31, 17)]


def _index_zero_split_events() -> list[dict[str, Any]]:
    """LiteLLM's: each call's id and name first, then its argument pieces, all at index 0."""
    return [
        chunk(tool_calls=[tool_call_delta(0, call_id="call_w", name="get_weather")]),
        chunk(tool_calls=[tool_call_delta(0, arguments='{"city": "Zü')]),
        chunk(tool_calls=[tool_call_delta(0, arguments='rich", "unit": "celsius"}')]),
        chunk(tool_calls=[tool_call_delta(0, call_id="call_s", name="search", arguments='{"q": "na')]),
        chunk(tool_calls=[tool_call_delta(0, arguments="ïve 🌍 café")]),
        chunk(tool_calls=[tool_call_delta(0, arguments='"}')]),
        chunk(finish_reason="tool_calls"),
        usage_chunk(31, 17),
    ]


@pytest.mark.parametrize(
    "events",
    [_index_zero_events(grouped=False), _index_zero_events(grouped=True), _index_zero_split_events()],
    ids=["one-chunk-per-call", "one-chunk", "split-arguments"],
)
async def test_parallel_calls_all_at_index_zero_stay_apart(events: list[dict[str, Any]]) -> None:
    """A new id at index 0 starts a new call: the calls equal the non-streaming answer, not one merged call."""
    plain = completion(None, tool_calls=EXPECTED_CALLS, usage=(31, 17))
    with trio.fail_after(GUARD), serve(stream_reply(*events), Reply(json=plain)) as server:
        streamed = await _ask(server)
        unstreamed = await _ask(server, stream=False)
    assert streamed == unstreamed
    assert streamed.message["tool_calls"] == EXPECTED_CALLS


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retryable"),
    [*((s, False) for s in (400, 401, 403, 404, 422)), *((s, True) for s in (408, 409, 429, 500, 502, 503))],
)
async def test_error_statuses_say_whether_to_retry(status: int, retryable: bool) -> None:
    """4xx client errors are final; 408, 409, 429 and 5xx may be retried; the server's message is kept."""
    reply = Reply(status=status, json=error_body(f"the server says {status}", type_="invalid_request_error"))
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert (error.status, error.retryable, error.retry_after) == (status, retryable, None)
    assert f"HTTP {status}: the server says {status}" in str(error)
    assert str(error).startswith("openai: POST http://127.0.0.1:")


async def test_a_500_streaming_request_is_retryable_with_the_servers_message() -> None:
    """A 500 answer to a streaming request reads the JSON error body."""
    reply = Reply(status=500, json=error_body("The server had an error while processing your request."))
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert error.retryable
    assert "The server had an error while processing your request." in str(error)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"Retry-After": "3"}, 3.0), ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5), ({"Retry-After": "x"}, None)],
)
async def test_rate_limits_carry_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    """429 is retryable and retry_after comes from retry-after-ms, else Retry-After."""
    reply = Reply(status=429, json=error_body("Rate limit reached", type_="requests"), headers=headers)
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert (error.status, error.retryable, error.retry_after) == (429, True, seconds)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ('{"error": "model \'x\' not found"}', "model 'x' not found"),
        ('{"object": "error", "message": "bad tool", "code": 400}', "bad tool"),
        ('{"detail": "Not authenticated"}', "Not authenticated"),
        ("<html>Bad gateway</html>", "<html>Bad gateway</html>"),
    ],
)
async def test_other_error_bodies_are_quoted(body: str, detail: str) -> None:
    """Ollama's, vLLM's and FastAPI's error shapes, and plain text, give the server's words."""
    with trio.fail_after(GUARD), serve(Reply(status=400, body=body)) as server:
        error = await _fails(server, stream=False)
    assert str(error).endswith(f"HTTP 400: {detail}")


_MIB = b"x" * (1 << 20)
_OVER = _http_provider.MAX_ANSWER_BYTES // len(_MIB) + 2  # chunks of a MiB: just past the limit


@pytest.mark.parametrize(
    ("reply", "stream"),
    [
        (
            Reply(chunks=[b'{"choices": [{"message": {"content": "', *[_MIB] * _OVER], content_type="application/json"),
            False,
        ),
        (Reply(chunks=[b'data: {"choices": [{"delta": {"content": "', *[_MIB] * _OVER]), True),
        (Reply(chunks=[*[b"data: " + json.dumps(chunk(content="x" * 4000)).encode() + b"\n\n"] * (_OVER * 262)]), True),
        (Reply(status=500, chunks=[b'{"error": "', *[_MIB] * _OVER], content_type="application/json"), False),
    ],
    ids=["json", "one-endless-line", "many-events", "error-body"],
)
async def test_an_answer_longer_than_the_limit_is_not_read(reply: Reply, stream: bool) -> None:
    """A server that sends more than MAX_ANSWER_BYTES: a final ProviderError, not a process out of memory."""
    with trio.fail_after(60), serve(reply) as server:
        error = await _fails(server, stream=stream)
    if reply.status == 500:  # the status is still told; the body is not quoted
        assert (error.status, error.retryable) == (500, True)
        assert str(error).endswith("HTTP 500: Internal Server Error")
    else:
        assert not error.retryable
        assert str(error) == "openai: the answer is longer than 64 MiB, more than any model's: it was not read"


@pytest.mark.parametrize("sent", [0, 3])
async def test_a_dropped_stream_is_retryable(sent: int) -> None:
    """The server closing the connection mid-stream (before or after some chunks) gives a retryable error."""
    reply = stream_reply(*_interleaved_tool_call_events(), drop_after=sent)
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert error.retryable
    assert error.status is None
    assert "the connection to http://127.0.0.1:" in str(error)


async def test_a_stream_that_ends_without_done_is_retryable() -> None:
    """A cleanly ended stream that never sent [DONE] is incomplete: retryable."""
    with trio.fail_after(GUARD), serve(stream_reply(chunk(content="Half an ans"), done=False)) as server:
        error = await _fails(server)
    assert error.retryable
    assert "ended before [DONE]" in str(error)


@pytest.mark.parametrize(
    "event",
    [
        sse(error_body("Model overloaded, try later")),
        b'event: error\ndata: {"message": "Model overloaded, try later"}\n\n',
        b"event: error\ndata: Model overloaded, try later\n\n",
    ],
)
async def test_an_error_event_mid_stream_is_retryable(event: bytes) -> None:
    """An error object (or an `event: error`) after some deltas gives a retryable error with its message."""
    reply = Reply(chunks=[sse(chunk(content="Once upon")), event, sse("[DONE]")])
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert error.retryable
    assert "the stream sent an error:" in str(error)
    assert "Model overloaded, try later" in str(error)


async def test_a_disconnect_without_an_answer_is_retryable() -> None:
    """The server hanging up before any response is a retryable connection error."""
    with trio.fail_after(GUARD), serve(Reply(disconnect=True)) as server:
        error = await _fails(server, stream=False)
    assert error.retryable


async def test_a_refused_connection_is_retryable() -> None:
    """Nothing listening on the port: a retryable error naming the URL."""
    with trio.fail_after(GUARD):
        with serve() as server:
            base_url = server.base_url
        provider = create_provider("m", base_url=base_url)
        try:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(_request())
        finally:
            await provider.aclose()
    assert caught.value.retryable
    assert f"{base_url}/chat/completions" in str(caught.value)


async def test_a_silent_server_times_out_as_retryable(fast_clock: trio.testing.MockClock) -> None:
    """No answer within `timeout` seconds (fast time) gives a retryable error naming the timeout."""
    with trio.fail_after(60), serve(Reply(stall=True)) as server:
        error = await _fails(server, timeout=5)
    assert error.retryable
    assert "within 5s" in str(error)


async def test_a_stream_left_open_after_done_still_answers(fast_clock: trio.testing.MockClock) -> None:
    """A server that sends [DONE] but neither ends nor closes the stream: the answer comes after a short grace."""
    reply = stream_reply(chunk(content="done"), chunk(finish_reason="stop"), stall=True)
    with trio.fail_after(60), serve(reply) as server:
        start = trio.current_time()
        response = await _ask(server)
        waited = trio.current_time() - start
    assert response.message == {"role": "assistant", "content": "done"}
    assert _http_provider._DRAIN_SECONDS <= waited < 30


async def test_a_stream_that_stalls_mid_answer_times_out(fast_clock: trio.testing.MockClock) -> None:
    """A stream that stops sending before [DONE] times out after `timeout` seconds without data: retryable."""
    reply = stream_reply(chunk(content="Once"), done=False, stall=True)
    with trio.fail_after(60), serve(reply) as server:
        error = await _fails(server, timeout=3)
    assert error.retryable
    assert "within 3s" in str(error)


async def test_keep_alive_comments_do_not_extend_the_response_timeout(fast_clock: trio.testing.MockClock) -> None:
    """A stream that sends keep-alive comments forever ends at `response_timeout`, as a retryable error.

    Each comment arrives well within `timeout`, so only the whole-answer deadline can end it;
    the provider used to wait for [DONE] for ever.
    """
    reply = stream_reply(chunk(content="Thinking"), done=False, keepalive=0.02)  # 2 s of trio time apart
    with trio.fail_after(120), serve(reply) as server:
        start = trio.current_time()
        error = await _fails(server, timeout=5, response_timeout=30)
        waited = trio.current_time() - start
    assert error.retryable
    assert (
        str(error)
        == f"openai: {server.base_url}/chat/completions did not finish its answer within 30s (response_timeout)"
    )
    assert 30 <= waited < 60


@pytest.mark.parametrize("stream", [True, False])
async def test_the_response_timeout_bounds_a_silent_server_too(
    stream: bool, fast_clock: trio.testing.MockClock
) -> None:
    """With a long `timeout`, a server that never answers is cut off at the shorter `response_timeout`."""
    with trio.fail_after(120), serve(Reply(stall=True)) as server:
        error = await _fails(server, timeout=100, response_timeout=10, stream=stream)
    assert error.retryable
    assert "within 10s (response_timeout)" in str(error)


def test_the_response_timeout_defaults_to_ten_minutes() -> None:
    """`response_timeout` is 600 s unless given."""
    assert create_provider("m").response_timeout == openai.DEFAULT_RESPONSE_TIMEOUT == 600
    assert create_provider("m", response_timeout=42).response_timeout == 42


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "application/xhtml+xml"])
async def test_an_html_page_is_named_as_such(stream: bool, content_type: str) -> None:
    """A 200 that is a web page (a captive portal, a wrong base URL) says so and names the URL, without credentials."""
    page = "<!doctype html><html><head><title>Sign in to Wi-Fi</title></head><body>...</body></html>"
    with trio.fail_after(GUARD), serve(Reply(body=page, content_type=content_type)) as server:
        base_url = server.base_url.replace("http://", "http://someone:hunter2@")
        error = await _fails(server, stream=stream, base_url=base_url)
    assert not error.retryable
    assert error.status == 200
    message = str(error)
    assert message.startswith(f"openai: POST {server.base_url}/chat/completions answered HTTP 200 with an HTML page")
    assert "captive portal" in message
    assert "hunter2" not in message
    assert "someone" not in message


async def test_messages_never_show_the_credentials_of_the_url(fast_clock: trio.testing.MockClock) -> None:
    """A user name and password in the base URL stay out of every error message and the repr."""
    with trio.fail_after(120), serve(Reply(stall=True), Reply(status=503, json=error_body("busy"))) as server:
        base_url = server.base_url.replace("http://", "http://someone:hunter2@")
        async with open_provider(server, base_url=base_url, timeout=5, stream=False) as provider:
            messages = [repr(provider)]
            for _ in range(2):
                with pytest.raises(ProviderError) as caught:
                    await provider.complete(_request())
                messages.append(str(caught.value))
        assert server.requests[0].headers["authorization"].startswith("Basic ")  # they were used, not dropped
    assert len(messages) == 3
    assert all(server.base_url in m and "hunter2" not in m and "someone" not in m for m in messages), messages


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply(body="<html>hello</html>", content_type="application/json"), "the answer is not JSON"),
        (Reply(json={"choices": []}), "the answer has no choices"),
        (Reply(json=[1, 2]), "expected a Chat Completions object, got list"),
    ],
)
async def test_an_answer_that_is_not_a_completion_is_final(reply: Reply, words: str) -> None:
    """A 200 that is not a Chat Completions answer is an error that retrying will not fix."""
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server, stream=False)
    assert not error.retryable
    assert words in str(error)


async def test_a_malformed_event_is_final() -> None:
    """An event whose data is not JSON is a protocol error, not retried."""
    with trio.fail_after(GUARD), serve(Reply(chunks=[b"data: {oops\n\n"])) as server:
        error = await _fails(server)
    assert not error.retryable
    assert "not JSON" in str(error)


async def test_the_anthropic_format_is_refused_without_a_request() -> None:
    """Chat Completions cannot carry tool_use blocks: format anthropic fails at once, not retryable."""
    with trio.fail_after(GUARD), serve(Reply(json=completion("unused"))) as server:
        error = await _fails(server, _request("anthropic"))
        assert server.requests == []
    assert not error.retryable
    assert "'anthropic' history format" in str(error)


async def test_an_unencodable_request_is_final() -> None:
    """A NaN in the history cannot become JSON: a final error, and nothing is sent."""
    with trio.fail_after(GUARD), serve() as server:
        error = await _fails(server, _request(messages=[{"role": "user", "content": float("nan")}]))
        assert server.requests == []
    assert not error.retryable
    assert "cannot be encoded as JSON" in str(error)


# -- lifecycle ----------------------------------------------------------------------------------


async def test_fallback_and_text_requests_and_a_reopened_client() -> None:
    """fallback/text requests send plain messages and no tools; after aclose() the provider opens a new client."""

    def echo_format(request: RecordedRequest) -> Reply:
        return Reply(json=completion(json.dumps(sorted(request.json()))))

    with trio.fail_after(GUARD), serve(echo_format, echo_format) as server:
        provider = create_provider("m", base_url=server.base_url, stream=False)
        try:
            first = await provider.complete(_request("fallback", system="Tools: ..."))
            await provider.aclose()
            second = await provider.complete(_request("text"))
        finally:
            await provider.aclose()
    assert json.loads(first.message["content"]) == ["messages", "model", "stream"]
    assert second.message == first.message


# -- the event decoder --------------------------------------------------------------------------

_EVENTS: list[dict[str, Any] | str] = [
    chunk(content="Grüße 🌍\u2028"),
    usage_chunk(1, 2),
    "[DONE]",
]


@given(st.lists(st.integers(min_value=1, max_value=400), max_size=30))
def test_event_decoder_ignores_where_the_bytes_are_split(offsets: list[int]) -> None:
    """Any split of the byte stream yields the same events as the whole stream at once."""
    data = sse(*_EVENTS).replace(b"\n", b"\r\n")
    decoder = _http_provider.EventDecoder()
    events = [event for piece in split_bytes(data, offsets) for event in decoder.feed(piece)] + decoder.close()
    expected = [("", e if isinstance(e, str) else json.dumps(e, ensure_ascii=False)) for e in _EVENTS]
    assert events == expected


def test_event_decoder_joins_data_lines_and_flushes_the_last_event() -> None:
    """Several data lines join with newlines; an event without its blank line is delivered at the end."""
    decoder = _http_provider.EventDecoder()
    assert decoder.feed(b"event: note\ndata: a\ndata:b\nid: 1\n\ndata: tail") == [("note", "a\nb")]
    assert decoder.close() == [("", "tail")]


def _message_of(events: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    assembler = _openai_chat._Assembler()
    for event in events:
        assembler.add(event)
    return assembler.response().message


def test_assembler_ignores_other_choices() -> None:
    """Only choice 0 is assembled (n > 1 servers send other indexes too)."""
    other = chunk(content="other")
    other["choices"][0]["index"] = 1
    assert _message_of([chunk(content="mine"), other]) == {"role": "assistant", "content": "mine"}
    assert _message_of([]) == {"role": "assistant", "content": ""}


def test_assembler_joins_a_repeated_id_and_adopts_a_late_one() -> None:
    """A delta repeating its call's id continues that call; a call begun without an id takes the id sent later."""
    events = [
        chunk(tool_calls=[tool_call_delta(0, call_id="a", name="search", arguments='{"q":')]),
        chunk(tool_calls=[tool_call_delta(1, name="search", arguments='{"q": ')]),
        chunk(tool_calls=[tool_call_delta(0, call_id="a", arguments=' "x"}')]),
        chunk(tool_calls=[tool_call_delta(1, call_id="b", arguments='"y"}')]),
    ]
    assert _message_of(events)["tool_calls"] == [
        tool_call("a", "search", '{"q": "x"}'),
        tool_call("b", "search", '{"q": "y"}'),
    ]


_ARGUMENTS = st.dictionaries(st.text(max_size=6), st.text(max_size=12) | st.integers(), max_size=3)


@st.composite
def _streamed_calls(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Calls with unique ids, and the chunks a server streams them in, in one of three index styles.

    ``indexed``: index i per call, the calls' deltas interleaved at random; ``index-zero``: all at
    index 0, one call after another; ``no-index``: no index at all. Each call's arguments are cut
    at random points, its first delta carries its id and name (and maybe a first piece), and
    consecutive deltas are grouped into chunks at random.
    """
    style = draw(st.sampled_from(["indexed", "index-zero", "no-index"]))
    ids = draw(st.lists(st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True), min_size=1, max_size=4, unique=True))
    calls = [tool_call(call_id, draw(st.sampled_from(["look", "say", "search"])), draw(_ARGUMENTS)) for call_id in ids]
    per_call: list[list[dict[str, Any]]] = []
    for position, call in enumerate(calls):
        text = call["function"]["arguments"]
        cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=5))) | {0, len(text)})
        pieces = [text[a:b] for a, b in itertools.pairwise(cuts)] or [""]
        index = position if style == "indexed" else 0
        first = tool_call_delta(index, call_id=call["id"], name=call["function"]["name"])
        if draw(st.booleans()):
            first["function"]["arguments"] = pieces.pop(0)
        deltas = [first, *(tool_call_delta(index, arguments=piece) for piece in pieces)]
        if style == "no-index":
            for delta in deltas:
                del delta["index"]
        per_call.append(deltas)
    order: list[dict[str, Any]] = []
    if style == "indexed":
        while any(per_call):
            queue = draw(st.sampled_from([q for q in per_call if q]))
            order.append(queue.pop(0))
    else:
        order = [delta for deltas in per_call for delta in deltas]
    events = []
    while order:
        size = draw(st.integers(1, len(order)))
        events.append(chunk(tool_calls=order[:size]))
        del order[:size]
    return calls, events


@given(_streamed_calls())
def test_assembled_calls_equal_the_streamed_ones(case: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """Whatever the index style, the interleaving and the cut points, the assembled calls are the calls sent."""
    calls, events = case
    assert _message_of(events)["tool_calls"] == calls
