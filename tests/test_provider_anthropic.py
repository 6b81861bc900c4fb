"""The ``anthropic`` provider against a real Messages API server on 127.0.0.1 (``tests/_anthropic_server.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from _anthropic_server import (
    FakeAnthropic,
    Reply,
    error_body,
    event,
    message,
    serve,
    split_bytes,
    stream_events,
    stream_message,
    text_block,
    tool_use_block,
)
from _sdk_shapes import anthropic_message

from toolflow import ModelProvider, ModelRequest, ModelResponse, ProviderError, Usage, UsageError, load_provider
from toolflow._plugins import load_plugins
from toolflow.default_plugins import anthropic
from toolflow.default_plugins._anthropic_messages import AnthropicProvider
from toolflow.default_plugins._http_provider import MAX_ANSWER_BYTES
from toolflow.default_plugins.anthropic import create_provider

GUARD = 10
SEARCH_TOOL = {
    "name": "search",
    "description": "Search the notes.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}
WEATHER = tool_use_block("toolu_w", "get_weather", {"city": "Zürich", "unit": "celsius", "days": [1, 2]})
SEARCH = tool_use_block("toolu_s", "search", {"q": "naïve 🌍 café"})


@pytest.fixture(autouse=True)
def _no_anthropic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own ANTHROPIC_* variables never reach these tests."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.fixture
def fast_clock() -> trio.testing.MockClock:
    """Trio time 100 times faster than real time, for timeouts of seconds against a real server."""
    return trio.testing.MockClock(rate=100)


@asynccontextmanager
async def open_provider(server: FakeAnthropic, **options: Any) -> AsyncIterator[AnthropicProvider]:
    provider = create_provider("test-model", **{"base_url": server.base_url, **options})
    try:
        yield provider
    finally:
        await provider.aclose()


def _request(fmt: str = "anthropic", **fields: Any) -> ModelRequest:
    fields.setdefault("messages", [{"role": "user", "content": "Find my notes on trio."}])
    return ModelRequest(format=fmt, **fields)


async def _ask(server: FakeAnthropic, request: ModelRequest | None = None, **options: Any) -> ModelResponse:
    async with open_provider(server, **options) as provider:
        return await provider.complete(request or _request())


async def _fails(server: FakeAnthropic, request: ModelRequest | None = None, **options: Any) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await _ask(server, request, **options)
    assert caught.value.provider == "anthropic"
    return caught.value


# -- registration and options -------------------------------------------------------------------


def test_the_default_plugins_register_the_anthropic_factory() -> None:
    """load_plugins() offers `anthropic` from the built-in plugin; load_provider makes one by name."""
    plugins = load_plugins(entry_points=False)
    found = plugins.registered("toolflow_register_model_providers")["anthropic"]
    assert found == [("toolflow.default_plugins.anthropic", create_provider)]
    provider = load_provider("anthropic:claude-test", plugins=plugins, api_key="sk-ant-secret")
    assert isinstance(provider, AnthropicProvider)
    assert provider.model == "claude-test"


def test_registering_the_plugin_imports_no_httpx() -> None:
    """Importing the plugin module and loading the plugins leaves httpx (and the anthropic SDK) unimported."""
    code = (
        "import sys\nfrom toolflow._plugins import load_plugins\n"
        "load_plugins(entry_points=False).registered('toolflow_register_model_providers')\n"
        "print('httpx' in sys.modules, 'anthropic' in sys.modules, 'toolflow.default_plugins.anthropic' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.split() == ["False", "False", "True"]


def test_the_provider_meets_the_protocol() -> None:
    """An AnthropicProvider is a ModelProvider named anthropic that speaks anthropic, fallback and text, and hides its key."""
    provider = create_provider("claude-test", api_key="sk-ant-secret")
    assert isinstance(provider, ModelProvider)
    assert (provider.name, provider.formats) == ("anthropic", ("anthropic", "fallback", "text"))
    assert (provider.base_url, provider.version, provider.stream) == ("https://api.anthropic.com", "2023-06-01", True)
    assert provider.response_timeout == anthropic.DEFAULT_RESPONSE_TIMEOUT == 600
    assert "sk-ant-secret" not in repr(provider)


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"temprature": 0.2}, TypeError, "temprature"),
        ({"base_url": "ftp://example.com"}, UsageError, "'ftp://example.com'"),
        ({"base_url": "https://[::1"}, UsageError, r"anthropic base URL is not a URL: Invalid IPv6 URL"),
        ({"timeout": 0}, UsageError, "timeout must be a positive number"),
        ({"response_timeout": float("inf")}, UsageError, "response_timeout must be a positive number"),
        ({"max_tokens": 0}, UsageError, "max_tokens must be a positive integer"),
        ({"temperature": -1}, UsageError, "temperature must be a number from 0"),
        ({"extra_body": ["top_k"]}, UsageError, "extra_body must be a mapping"),
        ({"version": " "}, UsageError, "version must be a non-empty string"),
    ],
)
def test_bad_options_are_refused_when_the_provider_is_made(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    """An unknown option is a TypeError; a bad value a UsageError naming it; an empty model name too."""
    with pytest.raises(error, match=words):
        create_provider("claude-test", **options)
    with pytest.raises(UsageError, match="needs a model name: --model anthropic:MODEL"):
        create_provider("  ")


async def test_base_url_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY are used; the key goes as x-api-key, with anthropic-version."""
    with trio.fail_after(GUARD), serve(Reply(json=message(text_block("hi")))) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url + "/")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
        provider = create_provider("test-model", version="2099-01-01")
        try:
            await provider.complete(_request())
        finally:
            await provider.aclose()
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert (sent.headers["x-api-key"], sent.headers["anthropic-version"]) == ("sk-ant-env", "2099-01-01")
    assert "authorization" not in sent.headers


async def test_no_key_sends_no_key_header() -> None:
    """An empty key (a local proxy that adds its own) sends no x-api-key; the version header still goes."""
    with trio.fail_after(GUARD), serve(Reply(json=message(text_block("hi")))) as server:
        await _ask(server, api_key="")
    (sent,) = server.requests
    assert "x-api-key" not in sent.headers
    assert sent.headers["anthropic-version"] == anthropic.API_VERSION


# -- answers ------------------------------------------------------------------------------------


async def test_non_streaming_answer_and_request_body() -> None:
    """The system prompt goes as `system`, the tools as they are, `max_tokens` always; the answer's blocks come back."""
    reply = Reply(json=message(text_block("Let me search."), SEARCH, usage=(12, 4)))
    request = _request(system="Be brief.", tools=[SEARCH_TOOL])
    with trio.fail_after(GUARD), serve(reply) as server:
        response = await _ask(server, request, stream=False, temperature=0.5, extra_body={"top_k": 5})
    assert response.message == {"role": "assistant", "content": [text_block("Let me search."), SEARCH]}
    anthropic_message(response.message)
    assert response.usage == Usage(prompt_tokens=12, completion_tokens=4)
    assert response.finish_reason == "tool_use"
    assert server.requests[0].json() == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "Find my notes on trio."}],
        "stream": False,
        "system": "Be brief.",
        "tools": [SEARCH_TOOL],
        "max_tokens": 4096,
        "temperature": 0.5,
        "top_k": 5,
    }
    assert server.requests[0].headers["accept"] == "application/json"


async def test_no_system_no_tools_and_extra_body_removes_fields() -> None:
    """Without a system prompt or tools neither field is sent; an extra_body key set to None removes a field."""
    with trio.fail_after(GUARD), serve(stream_message(text_block("ok"))) as server:
        await _ask(server, _request(model="other-model"), max_tokens=99, extra_body={"stream": None})
    body = server.requests[0].json()
    assert body == {
        "model": "other-model",
        "messages": [{"role": "user", "content": "Find my notes on trio."}],
        "max_tokens": 99,
    }


async def test_streamed_tool_calls_split_across_many_deltas_equal_the_plain_answer() -> None:
    """Text and two tool_use blocks whose JSON input arrives a character a delta assemble to the non-streamed answer."""
    blocks = (text_block("Let me look that up."), WEATHER, SEARCH)
    with (
        trio.fail_after(GUARD),
        serve(stream_message(*blocks, piece=1, usage=(31, 17)), Reply(json=message(*blocks))) as server,
    ):
        streamed = await _ask(server)
        plain = await _ask(server, stream=False)
    assert streamed.message == plain.message == {"role": "assistant", "content": list(blocks)}
    assert streamed.usage == Usage(prompt_tokens=31, completion_tokens=17)
    assert streamed.finish_reason == "tool_use"
    deltas = [e for e in stream_events(*blocks, piece=1) if e["type"] == "content_block_delta"]
    assert len(deltas) > 90
    assert server.requests[0].headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("step", [1, 7])
async def test_a_byte_stream_split_anywhere_assembles_the_same_answer(step: int) -> None:
    """The events' bytes cut every byte (inside multi-byte characters and CRLFs) or every 7 still give the answer."""
    blocks = (text_block("Grüße 🌍"), SEARCH)
    data = b"".join(event(e) for e in stream_events(*blocks, piece=3)).replace(b"\n", b"\r\n")
    with trio.fail_after(GUARD), serve(Reply(chunks=split_bytes(data, range(step, len(data), step)))) as server:
        response = await _ask(server)
    assert response.message == {"role": "assistant", "content": list(blocks)}


async def test_interleaved_blocks_empty_inputs_thinking_and_cached_usage() -> None:
    """Deltas are folded by index even when interleaved; a tool without input gets {}; thinking blocks keep
    their signature; empty text blocks are dropped; cached input tokens count as prompt tokens."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **message(),
                "content": [],
                "usage": {
                    "input_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 20,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two tools"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {**SEARCH, "input": {}}},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_n", "name": "now", "input": {}},
        },
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"q": "na'}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'ïve 🌍 café"}'},
        },
        {"type": "content_block_stop", "index": 3},
        {"type": "content_block_stop", "index": 2},
        {"type": "ping"},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}},
        {"type": "message_stop"},
    ]
    with trio.fail_after(GUARD), serve(stream_message(events=events)) as server:
        response = await _ask(server)
    assert response.message["content"] == [
        {"type": "thinking", "thinking": "Two tools", "signature": "sig=="},
        SEARCH,
        {"type": "tool_use", "id": "toolu_n", "name": "now", "input": {}},
    ]
    assert response.usage == Usage(prompt_tokens=125, completion_tokens=40)


@pytest.mark.parametrize("fmt", ["fallback", "text"])
@pytest.mark.parametrize("stream", [True, False])
async def test_the_fallback_and_text_formats_get_a_plain_string(fmt: str, stream: bool) -> None:
    """For the formats without native tools the answer's text blocks are one string; no tools are sent."""
    blocks = (text_block('{"tool": "search", '), text_block('"parameters": {}}'))
    reply = stream_message(*blocks) if stream else Reply(json=message(*blocks))
    with trio.fail_after(GUARD), serve(reply) as server:
        response = await _ask(server, _request(fmt, system="Tools: search"), stream=stream)
    assert response.message == {"role": "assistant", "content": '{"tool": "search", "parameters": {}}'}
    assert response.finish_reason == "end_turn"
    assert "tools" not in server.requests[0].json()


async def test_the_openai_format_is_refused_without_a_request() -> None:
    with trio.fail_after(GUARD), serve() as server:
        error = await _fails(server, _request("openai"))
    assert "cannot take the 'openai' history format; use one of anthropic, fallback, text" in str(error)
    assert not error.retryable
    assert server.requests == []


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (404, "not_found_error", False),
        (413, "request_too_large", False),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (529, "overloaded_error", True),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
async def test_error_statuses_say_whether_to_retry(status: int, kind: str, retryable: bool, stream: bool) -> None:
    """4xx are final but 429; 5xx and 529 overloaded are retryable; the message quotes the error's type and text."""
    with trio.fail_after(GUARD), serve(Reply(status=status, json=error_body(kind, "It went wrong."))) as server:
        error = await _fails(server, stream=stream)
    assert (error.status, error.retryable, error.retry_after) == (status, retryable, None)
    assert str(error) == f"anthropic: POST {server.base_url}/v1/messages answered HTTP {status}: {kind}: It went wrong."


@pytest.mark.parametrize(("status", "seconds"), [(429, "3"), (529, "0.5")])
async def test_rate_limits_and_overload_carry_retry_after(status: int, seconds: str) -> None:
    reply = Reply(status=status, json=error_body("rate_limit_error", "slow down"), headers={"retry-after": seconds})
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert (error.retryable, error.retry_after) == (True, float(seconds))


@pytest.mark.parametrize(
    ("kind", "retryable"), [("overloaded_error", True), ("api_error", True), ("invalid_request_error", False)]
)
async def test_an_error_event_mid_stream_says_whether_to_retry(kind: str, retryable: bool) -> None:
    """The API's `event: error` after some text: overloaded and api errors are retryable, a wrong request is not."""
    events = [*stream_events(text_block("Once upon a time"))[:4], error_body(kind, "Overloaded")]
    with trio.fail_after(GUARD), serve(stream_message(events=events)) as server:
        error = await _fails(server)
    assert error.retryable is retryable
    assert str(error) == f"anthropic: the server answered with an error: {kind}: Overloaded"


async def test_a_stream_longer_than_the_limit_is_not_read() -> None:
    """An event line that never ends, past MAX_ANSWER_BYTES: a final error, read in linear time."""
    mib = b"x" * (1 << 20)
    reply = Reply(chunks=[b"event: content_block_delta\ndata: ", *[mib] * (MAX_ANSWER_BYTES // len(mib) + 2)])
    with trio.fail_after(60), serve(reply) as server:
        error = await _fails(server)
    assert not error.retryable
    assert str(error) == "anthropic: the answer is longer than 64 MiB, more than any model's: it was not read"


@pytest.mark.parametrize("sent", [0, 4])
async def test_a_dropped_stream_is_retryable(sent: int) -> None:
    with trio.fail_after(GUARD), serve(stream_message(text_block("Once upon a time"), drop_after=sent)) as server:
        error = await _fails(server)
    assert error.retryable


async def test_a_stream_that_ends_without_message_stop_is_retryable() -> None:
    events = stream_events(text_block("Half an answer"))[:-1]
    with trio.fail_after(GUARD), serve(stream_message(events=events)) as server:
        error = await _fails(server)
    assert error.retryable
    assert "ended before message_stop" in str(error)


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply(body="<<not json>>", content_type="application/json"), "the answer is not JSON: '<<not json>>'"),
        (Reply(json=[1, 2]), "expected a Messages API message, got list"),
        (Reply(json={"id": "msg_1", "type": "message"}), "has no content list"),
        (Reply(chunks=[b"event: message_start\ndata: {oops\n\n"]), "an event that is not JSON: '{oops'"),
        (Reply(chunks=[b"data: [1]\n\n"]), "sent list where an event object belongs"),
        (Reply(body="<html>login</html>", content_type="text/html"), "with an HTML page (text/html)"),
        (
            stream_message(
                events=[
                    *stream_events(SEARCH, piece=4, stop_reason="max_tokens")[:4],
                    {"type": "content_block_stop", "index": 0},
                    {"type": "message_stop"},
                ]
            ),
            """the input of tool_use 'search' is not complete JSON: '{"q"' (an answer cut at max_tokens?""",
        ),
    ],
    ids=["not-json", "not-an-object", "no-content", "bad-event", "event-not-object", "html", "cut-input"],
)
async def test_a_malformed_answer_is_final(reply: Reply, words: str) -> None:
    """Answers that are not Messages API answers are not retried: asking again would get the same."""
    with trio.fail_after(GUARD), serve(reply) as server:
        error = await _fails(server)
    assert not error.retryable
    assert words in str(error)


async def test_a_refused_connection_is_retryable() -> None:
    with trio.fail_after(GUARD):
        with serve() as server:
            base_url = server.base_url
        provider = create_provider("test-model", base_url=base_url)
        try:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(_request())
        finally:
            await provider.aclose()
    assert caught.value.retryable
    assert f"the connection to {base_url}/v1/messages failed" in str(caught.value)


# -- deadlines ----------------------------------------------------------------------------------


async def test_a_silent_server_times_out_as_retryable(fast_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(60), serve(Reply(stall=True)) as server:
        error = await _fails(server, timeout=5)
    assert error.retryable
    assert "within 5s" in str(error)


async def test_a_busy_stream_ends_at_the_response_timeout(fast_clock: trio.testing.MockClock) -> None:
    """A stream that keeps the connection busy for ever (a comment every 2 s of trio time, well within `timeout`)
    ends at `response_timeout`, as a retryable error naming it."""
    events = stream_events(text_block("Thinking"))[:4]
    reply = stream_message(events=events, keepalive=0.02)
    with trio.fail_after(120), serve(reply) as server:
        start = trio.current_time()
        error = await _fails(server, timeout=5, response_timeout=30)
        waited = trio.current_time() - start
    assert error.retryable
    assert str(error) == (
        f"anthropic: {server.base_url}/v1/messages did not finish its answer within 30s (response_timeout)"
    )
    assert 30 <= waited < 60


async def test_messages_never_show_the_credentials_of_the_url() -> None:
    with trio.fail_after(GUARD), serve(Reply(status=529, json=error_body("overloaded_error", "busy"))) as server:
        secret_url = server.base_url.replace("http://", "http://user:hunter2@")
        provider = create_provider("test-model", base_url=secret_url)
        try:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(_request())
        finally:
            await provider.aclose()
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(provider)
    assert json.loads(server.requests[0].body)["model"] == "test-model"
