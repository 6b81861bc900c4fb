"""The agent loop over the ``anthropic`` provider and a real Messages API server on 127.0.0.1.

``toolflow.Agent`` in-process, and ``toolflow run`` in a subprocess over the shipped example (the
game assistant's specs and the turns of ``examples/assistant-session.yaml``, answered by the
loopback server as streamed Messages API answers instead of by the scripted provider).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import yaml
from _anthropic_server import FakeAnthropic, RecordedRequest, Reply, error_body, serve, stream_message, text_block
from _anthropic_server import tool_use_block as tool_use
from _loop_support import Setup
from _sdk_shapes import anthropic_request

import toolflow
from toolflow import Agent, RetryPolicy, Usage
from toolflow.default_plugins.anthropic import create_provider

GUARD = 20
ROOT = Path(__file__).resolve().parent.parent
QUICK_RETRY = RetryPolicy(attempts=3, initial=0.01, max=0.01, jitter=False)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


@pytest.fixture
def fast_clock() -> trio.testing.MockClock:
    """Trio time 100 times faster than real time: seconds of backoff against a real server."""
    return trio.testing.MockClock(rate=100)


@asynccontextmanager
async def open_agent(setup: Setup, server: FakeAnthropic, **options: Any) -> AsyncIterator[Agent]:
    """An Agent in the anthropic format over the test specs' engine and a provider asking *server*."""
    provider = create_provider("test-model", base_url=server.base_url, api_key="sk-ant-test")
    try:
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            yield Agent(engine, provider, policy=setup.policy, format="anthropic", model="test-model", **options)
    finally:
        await provider.aclose()


def check_anthropic_history(messages: Any) -> None:
    """Every tool_use block is answered by one tool_result block in the next (user) message."""
    pending: set[str] = set()
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            assert not pending, f"unanswered tool_use blocks {pending}"
            pending = {block["id"] for block in content if block["type"] == "tool_use"}
        else:
            answered = {block["tool_use_id"] for block in content if block["type"] == "tool_result"}
            assert answered == pending, (answered, pending)
            pending = set()
    assert not pending


async def test_a_tool_round_trip_reaches_the_server_as_tool_result_blocks(setup: Setup) -> None:
    """The streamed tool_use runs, and the next request carries it and a tool_result block with its id."""
    look = stream_message(text_block("Let me look."), tool_use("toolu_look", "look", {"where": "north"}), piece=2)
    answer = stream_message(text_block("North is clear."), usage=(30, 4))
    with trio.fail_after(GUARD), serve(look, answer) as server:
        async with open_agent(setup, server, system="Be brief.") as agent:
            result = await agent.run("What is north?")
    assert (result.reason, result.final_answer) == ("final_answer", "North is clear.")
    assert setup.tools.runs == ["look"]
    assert result.usage == Usage(prompt_tokens=40, completion_tokens=9)
    first, second = (request.json() for request in server.requests)
    assert first["messages"] == [{"role": "user", "content": "What is north?"}]
    assert first["system"] == second["system"] == "Be brief."
    _, assistant, results = second["messages"]
    assert assistant == {
        "role": "assistant",
        "content": [text_block("Let me look."), tool_use("toolu_look", "look", {"where": "north"})],
    }
    (block,) = results["content"]
    assert (results["role"], block["type"], block["tool_use_id"]) == ("user", "tool_result", "toolu_look")
    assert json.loads(block["content"])["data"] == "you see north"
    anthropic_request(second["system"], second["messages"], second["tools"])
    assert [t["name"] for t in second["tools"]] == [t.name for t in setup.registry]
    check_anthropic_history(result.messages)


async def test_the_loop_retries_a_529_overloaded_honouring_retry_after(
    setup: Setup, fast_clock: trio.testing.MockClock
) -> None:
    """529 overloaded_error with retry-after: 3 is asked again, the same request, after at least 3 s."""
    overloaded = Reply(status=529, json=error_body("overloaded_error", "Overloaded"), headers={"retry-after": "3"})
    with trio.fail_after(60), serve(overloaded, stream_message(text_block("Here I am."))) as server:
        start = trio.current_time()
        async with open_agent(setup, server, provider_retry=QUICK_RETRY) as agent:
            result = await agent.run("hello")
        waited = trio.current_time() - start
    assert (result.reason, result.final_answer) == ("final_answer", "Here I am.")
    first, second = server.requests
    assert first.body == second.body
    assert waited >= 3


async def test_an_overloaded_stream_ends_the_loop_after_the_retries(setup: Setup) -> None:
    """An `event: error` of overloaded_error mid-answer is retried, then ends the loop with provider_error."""
    broken = stream_message(events=[{"type": "ping"}, error_body("overloaded_error", "Overloaded")])
    with trio.fail_after(GUARD), serve(*[broken] * QUICK_RETRY.attempts) as server:
        async with open_agent(setup, server, provider_retry=QUICK_RETRY) as agent:
            result = await agent.run("hello")
    assert result.reason == "provider_error"
    assert result.decision.message == "anthropic: the server answered with an error: overloaded_error: Overloaded"
    assert len(server.requests) == QUICK_RETRY.attempts


def _session_replies() -> list[Reply]:
    """The turns of the shipped scripted session, as streamed Messages API answers (inputs a few characters a delta)."""
    session = yaml.safe_load((ROOT / "examples" / "assistant-session.yaml").read_text(encoding="utf-8"))
    replies = []
    for number, turn in enumerate(session["turns"], 1):
        calls = [tool_use(f"toolu_{number}_{i}", c["name"], c["arguments"]) for i, c in enumerate(turn["tool_calls"])]
        usage = turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"]
        replies.append(stream_message(text_block(turn["text"]), *calls, usage=usage, piece=5))
    return replies


def _tool_results(request: RecordedRequest) -> Mapping[str, str]:
    """The tool_result blocks of a request's last message, by tool_use id: their text."""
    last = request.json()["messages"][-1]
    return {block["tool_use_id"]: block["content"] for block in last["content"] if block["type"] == "tool_result"}


async def test_toolflow_run_plays_the_shipped_session_through_the_server() -> None:
    """`toolflow run --specs specs --model anthropic:M` over the game assistant: the pipeline, the cached and the
    retried call, the blocked one and the terminal `say`, each tool_use answered by its tool_result."""
    replies = _session_replies()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")} | {"ANTHROPIC_API_KEY": "sk-t"}
    with trio.fail_after(120), serve(*replies) as server:
        argv = ["run", "--specs", "specs", "--model", "anthropic:claude-test", "--base-url", server.base_url]
        done = await trio.run_process(
            [sys.executable, "-m", "toolflow", *argv, "--prompt", "Where can I get my sword mended?", "--no-cache"],
            cwd=ROOT,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + out
    assert out.splitlines()[-1].startswith("loop ended: terminal ('say' ended the loop)"), out
    assert "blocked: Error: tool 'execute_command' is not available now" in out
    requests = server.requests
    assert len(requests) == len(replies) == 4
    assert {r.headers["x-api-key"] for r in requests} == {"sk-t"}
    assert [r.json()["model"] for r in requests] == ["claude-test"] * 4
    assert set(_tool_results(requests[1])) == {"toolu_1_0", "toolu_1_1"}
    assert set(_tool_results(requests[2])) == {"toolu_2_0", "toolu_2_1"}
    assert "not available now" in _tool_results(requests[2])["toolu_2_1"]
    assert set(_tool_results(requests[3])) == {"toolu_3_0", "toolu_3_1", "toolu_3_2"}
    last = requests[3].json()
    anthropic_request(last.get("system", ""), last["messages"], last["tools"])
    check_anthropic_history(last["messages"])
