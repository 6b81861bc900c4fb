"""The agent loop over the ``openai`` provider and a real Chat Completions server on 127.0.0.1.

``toolflow.Agent`` in-process, and ``toolflow run`` in a subprocess, against the scripted server of
``tests/_openai_server.py``: a tool round trip as the server sees it, retries of a 503, and a
stream that fails mid-answer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from _loop_support import Setup, check_openai_history
from _openai_server import (
    FakeOpenAI,
    Reply,
    chunk,
    error_body,
    serve,
    sse,
    stream_reply,
    tool_call,
    tool_call_delta,
    usage_chunk,
)
from _sdk_shapes import openai_request

import toolflow
from toolflow import Agent, RetryPolicy, Usage
from toolflow.default_plugins.openai import create_provider

GUARD = 20
QUICK_RETRY = RetryPolicy(attempts=3, initial=0.01, max=0.01, jitter=False)
"""Retries a few milliseconds apart: the loop's backoff, without waiting on the real clock for seconds."""


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


@asynccontextmanager
async def open_agent(setup: Setup, server: FakeOpenAI, **options: Any) -> AsyncIterator[Agent]:
    """An Agent over the test specs' engine and an openai provider asking *server* (no key, streaming)."""
    provider = create_provider("test-model", base_url=server.base_url, api_key="")
    try:
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            yield Agent(engine, provider, policy=setup.policy, model="test-model", **options)
    finally:
        await provider.aclose()


def look_call_reply() -> Reply:
    """A streamed answer: some text, then one call of `look` whose arguments arrive in two pieces."""
    return stream_reply(
        chunk(role="assistant", content="Let me look."),
        chunk(tool_calls=[tool_call_delta(0, call_id="call_look", name="look", arguments='{"where":')]),
        chunk(tool_calls=[tool_call_delta(0, arguments=' "north"}')]),
        chunk(finish_reason="tool_calls"),
        usage_chunk(20, 8),
    )


def answer_reply(text: str) -> Reply:
    return stream_reply(chunk(content=text), chunk(finish_reason="stop"), usage_chunk(30, 4))


def sent_messages(server: FakeOpenAI) -> list[list[dict[str, Any]]]:
    """The messages of each request the server received."""
    return [request.json()["messages"] for request in server.requests]


async def test_a_tool_round_trip_reaches_the_server_as_a_tool_message(setup: Setup) -> None:
    """The call runs, and the next request carries it and a `role: tool` message with its id; then a final answer."""
    with trio.fail_after(GUARD), serve(look_call_reply(), answer_reply("North is clear.")) as server:
        async with open_agent(setup, server) as agent:
            result = await agent.run("What is north?")
    assert (result.reason, result.final_answer) == ("final_answer", "North is clear.")
    assert setup.tools.runs == ["look"]
    assert result.usage == Usage(prompt_tokens=50, completion_tokens=12)
    first, second = sent_messages(server)
    assert first == [{"role": "user", "content": "What is north?"}]
    user, assistant, tool = second
    assert user == first[0]
    assert assistant == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [tool_call("call_look", "look", '{"where": "north"}')],
    }
    assert (tool["role"], tool["tool_call_id"]) == ("tool", "call_look")
    assert json.loads(tool["content"])["data"] == "you see north"
    body = server.requests[1].json()
    openai_request("", second, body["tools"])
    assert [t["function"]["name"] for t in body["tools"]] == [t.name for t in setup.registry]
    assert [dict(m) for m in result.messages] == [*second, {"role": "assistant", "content": "North is clear."}]
    check_openai_history(result.messages)


@pytest.fixture
def fast_clock() -> trio.testing.MockClock:
    """Trio time 100 times faster than real time: seconds of backoff against a real server.

    (``autojump_clock`` would jump to the provider's timeout whenever trio waits for the server thread.)
    """
    return trio.testing.MockClock(rate=100)


async def test_the_loop_retries_a_503_honouring_retry_after(setup: Setup, fast_clock: trio.testing.MockClock) -> None:
    """A 503 with Retry-After: 3 is asked again, the same request, after at least 3 s; then the answer ends the loop."""
    overloaded = Reply(status=503, json=error_body("overloaded, try later"), headers={"Retry-After": "3"})
    with trio.fail_after(60), serve(overloaded, answer_reply("Here I am.")) as server:
        start = trio.current_time()
        async with open_agent(setup, server, provider_retry=QUICK_RETRY) as agent:
            result = await agent.run("hello")
        waited = trio.current_time() - start
    assert (result.reason, result.final_answer) == ("final_answer", "Here I am.")
    first, second = server.requests
    assert first.body == second.body
    assert waited >= 3
    assert [m["role"] for m in result.messages] == ["user", "assistant"]


@pytest.mark.parametrize(
    "broken",
    [
        Reply(chunks=[sse(chunk(content="Once upon")), sse(error_body("Model overloaded")), sse("[DONE]")]),
        stream_reply(chunk(content="Once upon"), chunk(content=" a time"), drop_after=1),
    ],
    ids=["error-event", "dropped-connection"],
)
async def test_a_stream_failing_mid_answer_ends_the_loop_with_provider_error(setup: Setup, broken: Reply) -> None:
    """After a tool turn, answers that break off mid-stream are retried, then end the loop; the history stays whole."""
    with trio.fail_after(GUARD), serve(look_call_reply(), *[broken] * QUICK_RETRY.attempts) as server:
        async with open_agent(setup, server, provider_retry=QUICK_RETRY) as agent:
            result = await agent.run("What is north?")
    assert result.reason == "provider_error"
    assert result.decision.message.startswith("openai: ")
    assert len(server.requests) == 1 + QUICK_RETRY.attempts
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool"]
    assert "Once upon" not in json.dumps(result.to_dict())
    check_openai_history(result.messages)
    assert [len(turn.entries) for turn in result.turns] == [1]
    assert sent_messages(server)[1:] == [[dict(m) for m in result.messages]] * QUICK_RETRY.attempts


SPECS = """\
toolflow: 1
tools:
  look:
    description: Look around.
    parameters: {type: object, properties: {where: {type: string, description: Where}}}
    template: "you see {{ where }}"
"""
"""The test specs' `look` as a template tool: `toolflow run` in a subprocess has no test plugins."""


async def test_toolflow_run_talks_to_the_server_in_a_subprocess(tmp_path: Path) -> None:
    """`toolflow run --model openai:M --base-url URL` runs the tool round trip and prints the whole loop as JSON."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "tools.yaml").write_text(SPECS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"TOOLFLOW_LOAD_PLUGINS": "none"}
    with trio.fail_after(60), serve(look_call_reply(), answer_reply("North is clear.")) as server:
        argv = ["run", "--specs", "tools.yaml", "--model", "openai:test-model", "--base-url", server.base_url]
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "toolflow",
                *argv,
                "--prompt",
                "What is north?",
                "--output-format",
                "json",
                "--no-cache",
            ],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    document = json.loads(done.stdout)
    assert (document["reason"], document["final_answer"]) == ("final_answer", "North is clear.")
    assert document["usage"] == {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}
    assert [r.json()["model"] for r in server.requests] == ["test-model", "test-model"]
    tool = sent_messages(server)[1][2]
    assert (tool["role"], tool["tool_call_id"]) == ("tool", "call_look")
    assert json.loads(tool["content"])["data"] == "you see north"
    assert document["history"] == [*sent_messages(server)[1], {"role": "assistant", "content": "North is clear."}]
