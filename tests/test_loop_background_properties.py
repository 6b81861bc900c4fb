"""Background calls, property-tested: one result per call, and each started task's outcome noted exactly once.

Random transcripts mix background calls (quick, slow, failing) with foreground ones, final
answers and provider errors, under a random policy (``on_exit``, iteration and error limits),
with a stop, a kill or a cancellation from outside at a random moment, in the OpenAI, Anthropic
and Gemini formats.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.strategies as st
import trio
import trio.testing
import yaml
from _background_support import Setup

import toolflow
from toolflow._loop import Agent
from toolflow.default_plugins._scripted import open_scripted

_CALL = st.one_of(
    st.sampled_from(["look", "fail", "broken", "hurry", "say"]).map(lambda name: {"name": name, "arguments": {}}),
    st.integers(0, 30).map(lambda s: {"name": "fetch", "arguments": {"seconds": s}}),
    st.integers(0, 15).map(lambda s: {"name": "wait", "arguments": {"seconds": s}}),
)
_TURN = st.one_of(
    st.fixed_dictionaries({"tool_calls": st.lists(_CALL, min_size=1, max_size=4)}),
    st.just({"error": {"message": "bad request", "status": 400}}),
    st.just({"text": "the answer"}),
)
_ACTION = st.one_of(st.none(), st.tuples(st.sampled_from(["stop", "kill", "cancel"]), st.floats(0, 40)))
_NOTE = re.compile(r"^Background task (task-\d+) ")


def _results(message: Mapping[str, Any], fmt: str) -> list[tuple[str, str]]:
    """The (call id, result text) pairs a message answers."""
    if fmt == "openai":
        return [(message["tool_call_id"], message["content"])] if message["role"] == "tool" else []
    if fmt == "anthropic":
        content = message["content"] if message["role"] == "user" else None
        blocks = content if isinstance(content, list) else []
        return [(b["tool_use_id"], b["content"]) for b in blocks if b.get("type") == "tool_result"]
    parts = message.get("parts", ()) if message["role"] == "user" else ()
    return [
        (p["functionResponse"]["id"], json.dumps(p["functionResponse"]["response"]))
        for p in parts
        if "functionResponse" in p
    ]


def _calls(message: Mapping[str, Any], fmt: str) -> list[str]:
    """The ids of the calls an assistant (model) message makes."""
    if fmt == "openai":
        return [c["id"] for c in message.get("tool_calls") or []] if message["role"] == "assistant" else []
    if fmt == "anthropic":
        blocks = message["content"] if message["role"] == "assistant" else []
        return [b["id"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    parts = message.get("parts", ()) if message["role"] == "model" else ()
    return [p["functionCall"]["id"] for p in parts if "functionCall" in p]


def _note_ids(message: Mapping[str, Any]) -> list[str]:
    if message["role"] != "user":
        return []
    content = message.get("content")
    texts = [content] if isinstance(content, str) else []
    texts += [p["text"] for p in message.get("parts", ()) if "text" in p]
    return [m[1] for text in texts for line in text.splitlines() if (m := _NOTE.match(line))]


def _check(messages: tuple[Mapping[str, Any], ...], fmt: str) -> tuple[Counter[str], Counter[str]]:
    """Every call answered once, right after its message; return the started task ids and the noted ones."""
    pending: list[str] = []
    started: Counter[str] = Counter()
    noted: Counter[str] = Counter()
    for message in messages:
        calls = _calls(message, fmt)
        if calls or message["role"] in ("assistant", "model"):
            assert not pending, pending
            pending = list(calls)
            continue
        results = _results(message, fmt)
        if fmt != "openai" and pending:  # one user message (content) answers all the turn's calls
            assert sorted(call_id for call_id, _ in results) == sorted(pending), (results, pending)
            pending = []
        for call_id, text in results:
            if fmt == "openai":
                assert call_id in pending, (call_id, pending)
                pending.remove(call_id)
            data = json.loads(text).get("data")
            if isinstance(data, dict) and data.get("status") == "started":
                started[data["task_id"]] += 1
        ids = _note_ids(message)
        if ids:
            assert not pending, f"a note among the results of {pending}"
        noted.update(ids)
    assert not pending, pending
    return started, noted


@hypothesis.settings(max_examples=120, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(
    turns=st.lists(_TURN, min_size=1, max_size=6),
    fmt=st.sampled_from(["openai", "anthropic", "gemini"]),
    max_iterations=st.integers(1, 6),
    max_errors=st.integers(1, 4),
    on_exit=st.sampled_from(["wait", "cancel"]),
    action=_ACTION,
)
@hypothesis.example(  # found by hypothesis: an outcome delivered before turn 3 came back after turn 4 as well
    turns=[
        {"tool_calls": [{"name": "broken", "arguments": {}}]},
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 0}}]},
        {"tool_calls": [{"name": "look", "arguments": {}}]},
        {"tool_calls": [{"name": "look", "arguments": {}}]},
    ],
    fmt="openai",
    max_iterations=4,
    max_errors=1,
    on_exit="wait",
    action=None,
)
def test_every_call_has_one_result_and_every_task_one_note(
    tmp_path_factory: Any,
    turns: list[Any],
    fmt: str,
    max_iterations: int,
    max_errors: int,
    on_exit: str,
    action: tuple[str, float] | None,
) -> None:
    """Whatever ends the run, each call has one result and each started task exactly one note."""
    tmp_path: Path = tmp_path_factory.mktemp("background")
    setup = Setup(tmp_path)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    policy = setup.policy_with(max_iterations=max_iterations, max_consecutive_errors=max_errors, on_exit=on_exit)
    outcome: dict[str, Any] = {}

    async def main() -> None:
        provider = open_scripted(str(tmp_path / "t.yaml"))
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            agent = Agent(engine, provider, policy=policy, format=fmt)

            async def act() -> None:
                if action is not None and action[0] != "cancel":
                    await trio.sleep(action[1])
                    agent.request_stop() if action[0] == "stop" else agent.kill()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(act)
                with trio.move_on_after(action[1] if action is not None and action[0] == "cancel" else math.inf):
                    outcome["result"] = await agent.run("go")
                nursery.cancel_scope.cancel()
            outcome["messages"] = agent.messages

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    started, noted = _check(outcome["messages"], fmt)
    assert all(count == 1 for count in started.values()), started
    assert noted == started
    result = outcome.get("result")
    if result is not None:
        delivered = [o.task_id for turn in result.turns for o in turn.outcomes] + [o.task_id for o in result.outcomes]
        assert Counter(delivered) == noted
