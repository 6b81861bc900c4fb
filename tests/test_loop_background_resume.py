"""Background calls (issue 21 section 1) meet saved runs (section 3): a run that ends ``deferred`` with a
background call of the same turn, saved to JSON and resumed by a new agent on a new engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from _background_support import Setup, call, notes

import toolflow
from toolflow._loop import Agent
from toolflow._run_state import SavedRun

ASK = """\
  ask_human:
    description: Asks a person; the application answers later.
    deferred: true
    parameters:
      type: object
      properties:
        question: {type: string, description: What to ask}
      required: [question]
    template: unused
"""

TURNS = [
    {"tool_calls": [call("fetch", seconds=1, text="the weather"), call("ask_human", question="go out?")]},
    {"tool_calls": [call("fetch", seconds=1, text="the news")]},
    {"text": "waiting for the news"},
    {"text": "done"},
]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path, tools=ASK)


def _check_openai(messages: list[dict[str, object]]) -> None:
    """Every assistant message's calls are answered by the tool messages right after it (a note never between)."""
    for index, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls") or ()]  # type: ignore[attr-defined]
        if ids:
            answers = [m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(ids)]]
            assert answers == ids, (index, messages)


async def test_a_deferred_runs_background_outcome_waits_in_the_saved_run_and_comes_after_the_results(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """The outcome of a background call of the deferred turn is saved, not noted; on resume it follows the results."""
    first_provider = setup.transcript(TURNS[:1])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, first_provider, policy=setup.policy)
        first = await agent.run("go")
        text = agent.snapshot().to_json()
    saved = SavedRun.from_json(text)
    assert first.reason == "deferred"
    assert notes(first.messages) == []  # nothing between the model's calls and their results
    assert [item["task_id"] for item in json.loads(text)["background"]] == ["task-1"]
    assert json.loads(text)["tasks_started"] == 1

    resumed_provider = setup.transcript(TURNS[1:])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        again = Agent(engine, resumed_provider, policy=setup.policy)
        second = await again.resume(saved, results={"call_1_1": "yes"})
    messages = [dict(m) for m in second.messages]
    _check_openai(messages)
    assert second.reason == "final_answer"
    lines = notes(messages)
    assert [line.split(" ")[2] for line in lines] == ["task-1", "task-2"]  # numbered on, each noted once
    assert "the weather" in lines[0]
    assert "the news" in lines[1]
    started = [json.loads(str(m["content"]))["data"] for m in messages if m["role"] == "tool"]
    assert {"status": "started", "task_id": "task-2"} in started
