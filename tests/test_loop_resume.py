"""Deferred calls and saved runs (issue 21, section 3): the loop leaves some calls to the application,
its state goes to JSON and back, and a resumed run goes on as if it had never stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _loop_support import Setup, call, check_openai_history

import toolflow
from toolflow._loop import Agent, LoopResult
from toolflow._run_state import MAX_STATE_BYTES, SavedRun

DEFERRED_TOOLS = """\
  ask_human:
    description: Asks a person; the application answers later.
    deferred: true
    parameters:
      type: object
      properties:
        question: {type: string, description: What to ask}
      required: [question]
    output_schema: {type: object, properties: {answer: {type: string}}, required: [answer]}
    template:
      source: '{"answer": "yes"}'
      output: json
  review:
    description: A call a person reviews.
    category: review
    implementation: t.poke
policy:
  categories:
    review: {deferred: true}
"""

PAUSE = [
    {"tool_calls": [call("look", where="north"), call("ask_human", question="left or right?"), call("review")]},
    {"tool_calls": [call("say", message="going left")]},
]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path, DEFERRED_TOOLS)


async def _agent_run(setup: Setup, turns: list[Any], **options: Any) -> tuple[Agent, LoopResult]:
    provider = setup.transcript(turns)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy, **options)
        result = await agent.run("go")
    return agent, result


async def test_a_deferred_call_ends_the_run_and_holds_the_turns_results_back(setup: Setup) -> None:
    """The turn's other calls run; the run ends ``deferred`` with the pending calls; no result enters the history."""
    agent, result = await _agent_run(setup, PAUSE)
    assert result.reason == "deferred"
    assert [(c.id, c.tool, dict(c.arguments)) for c in result.pending] == [
        ("call_1_1", "ask_human", {"question": "left or right?"}),
        ("call_1_2", "review", {}),
    ]
    assert setup.tools.runs == ["look"]  # neither the deferred tool nor the deferred category ran
    assert [m["role"] for m in result.messages] == ["user", "assistant"]  # the look result waits with them
    statuses = [entry.result.extra.get("status") for entry in result.turns[0].entries]
    assert statuses == [None, "deferred", "deferred"]
    document = result.to_dict()
    assert document["pending"][0] == {
        "id": "call_1_1",
        "tool": "ask_human",
        "arguments": {"question": "left or right?"},
        "approval": False,
    }
    with pytest.raises(toolflow.UsageError, match="waits for the results of its deferred calls"):
        await agent.run("again")


async def test_resume_writes_the_turns_results_in_call_order_and_goes_on(setup: Setup) -> None:
    """Results for every waiting call: the turn's results enter the history together, and the loop goes on."""
    provider = setup.transcript(PAUSE)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        first = await agent.run("go")
        saved = SavedRun.from_json(agent.snapshot().to_json())
        results = {"call_1_1": {"answer": "left"}, "call_1_2": toolflow.ToolResult.failure("the reviewer said no")}
        second = await agent.resume(saved, results=results)
    assert first.reason == "deferred"
    assert second.reason == "terminal"
    check_openai_history(second.messages)
    tools = [m for m in second.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools[:3]] == ["call_1_0", "call_1_1", "call_1_2"]
    assert json.loads(tools[1]["content"])["data"] == {"answer": "left"}
    assert json.loads(tools[2]["content"])["error"] == "Error: the reviewer said no"
    assert [turn.turn for turn in second.turns] == [1, 2]  # the turn kept back, then the next
    assert second.pending == ()


_DONE = json.dumps({"message": "done"})


@pytest.mark.parametrize("format_name", ["openai", "anthropic", "fallback", "text", "gemini"])
async def test_a_resumed_run_equals_one_that_never_stopped(tmp_path: Path, format_name: str) -> None:
    """Same history and decision as when the tool ran then and gave the same result (every history format)."""
    (tmp_path / "ran").mkdir()
    (tmp_path / "deferred").mkdir()
    ran = Setup(tmp_path / "ran", DEFERRED_TOOLS.replace("    deferred: true\n", "").replace("{deferred: true}", "{}"))
    paused = Setup(tmp_path / "deferred", DEFERRED_TOOLS)
    turns = [
        {"tool_calls": [call("look"), call("ask_human", question="q")], "usage": {"prompt_tokens": 10}},
        # The id the whole transcript gives the call, which a transcript of the rest would not.
        {"tool_calls": [{"id": "call_2_0", "type": "function", "function": {"name": "say", "arguments": _DONE}}]},
    ]
    _, whole = await _agent_run(ran, turns, format=format_name)
    first, stopped = await _agent_run(paused, turns, format=format_name)
    provider = paused.transcript(turns[1:], name="rest.yaml")
    async with toolflow.open_engine(paused.registry, plugins=paused.plugins) as engine:
        agent = Agent(engine, provider, policy=paused.policy, format=format_name)
        saved = SavedRun.from_json(first.snapshot().to_json())
        # The same result as the tool's, with the count of attempts the engine adds to a result.
        same = {"success": True, "data": {"answer": "yes"}, "attempts": 1}
        resumed = await agent.resume(saved, results={stopped.pending[0].id: same})
    assert resumed.messages == whole.messages
    assert resumed.decision == whole.decision
    assert resumed.usage == whole.usage


async def test_results_are_checked_before_anything_is_written(setup: Setup) -> None:
    """Unknown and missing ids, and a value the output_schema refuses, are usage errors naming them."""
    provider = setup.transcript(PAUSE)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        await agent.run("go")
        saved = agent.snapshot()
        with pytest.raises(
            toolflow.UsageError, match=r"no call waits for a result under 'nope'.*no result for 'call_1_2'"
        ):
            await agent.resume(saved, results={"call_1_1": {"answer": "x"}, "nope": 1})
        with pytest.raises(toolflow.UsageError, match=r"'call_1_1' \(ask_human\) is not a result of the tool"):
            await agent.resume(saved, results={"call_1_1": {"answer": 3}, "call_1_2": "ok"})
        with pytest.raises(toolflow.UsageError, match="give them, not a new message"):
            await agent.resume(saved, prompt="hello")
        assert agent.messages == saved.history


async def test_a_run_that_ended_otherwise_resumes_with_a_new_message(setup: Setup) -> None:
    """No calls waiting: resume() takes the next user message, as a second run() of the same agent would."""
    turns = [{"tool_calls": [call("look")]}, {"text": "north is a wall"}, {"text": "bye"}]
    provider = setup.transcript(turns)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        await agent.run("look")
        saved = SavedRun.from_json(agent.snapshot().to_json())
    provider = setup.transcript(turns[2:], name="rest.yaml")
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        with pytest.raises(toolflow.UsageError, match="give the next user message"):
            await agent.resume(saved)
        result = await agent.resume(saved, prompt="thanks")
    assert result.final_answer == "bye"
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def _bad(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "run.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(toolflow.UsageError) as caught:
        SavedRun.load(path)
    return str(caught.value)


async def test_bad_saved_runs_are_usage_errors(setup: Setup, tmp_path: Path) -> None:
    """Another version, another shape, a history of another format, not JSON, too deep: a message, no traceback."""
    agent, _ = await _agent_run(setup, PAUSE)
    good = agent.snapshot().to_dict()
    assert "version 2; this toolflow reads version 1" in _bad(tmp_path, json.dumps({**good, "version": 2}))
    assert "at .run.iteration: 'x' is not of type 'integer'" in _bad(
        tmp_path, json.dumps({**good, "run": {**good["run"], "iteration": "x"}})
    )
    gemini = [{"role": "model", "parts": [{"text": "hi"}]}]
    assert "a history in another format?" in _bad(tmp_path, json.dumps({**good, "history": gemini}))
    assert "not JSON" in _bad(tmp_path, "{nope")
    assert "nests too deeply" in _bad(tmp_path, "[" * 100_000)
    assert "expected a JSON object, got list" in _bad(tmp_path, "[]")
    assert "are not the calls of the turn kept back" in _bad(tmp_path, json.dumps({**good, "pending": []}))
    with pytest.raises(toolflow.UsageError, match="cannot read the saved run"):
        SavedRun.load(tmp_path / "none")


def test_a_saved_run_larger_than_the_limit_is_refused_unread() -> None:
    """The limit is checked before parsing."""
    with pytest.raises(toolflow.UsageError, match="larger than 67,108,864 bytes"):
        SavedRun.from_json(b" " * (MAX_STATE_BYTES + 1))


async def test_save_is_atomic_and_leaves_no_temporary_file(setup: Setup, tmp_path: Path) -> None:
    """save() writes a temporary file beside the target and renames it."""
    agent, _ = await _agent_run(setup, PAUSE)
    target = tmp_path / "state" / "run.json"
    target.parent.mkdir()
    target.write_text("old", encoding="utf-8")
    agent.snapshot().save(target)
    assert SavedRun.load(target).pending == agent.snapshot().pending
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]
    with pytest.raises(toolflow.UsageError, match="cannot save the run"):
        agent.snapshot().save(tmp_path / "missing" / "run.json")


APPROVALS = "policy:\n  categories:\n    notify: {approval: true}\n"


async def test_a_call_awaiting_approval_is_deferred_then_approved_or_refused(tmp_path: Path) -> None:
    """approve=defer_approval: nobody is asked, the run ends deferred; approved on resume, the call runs."""
    setup = Setup(tmp_path, APPROVALS)
    turns = [{"tool_calls": [call("look"), call("notify"), call("notify")]}, {"text": "done"}]
    provider = setup.transcript(turns)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy, approve=toolflow.defer_approval)
        first = await agent.run("go")
        saved = SavedRun.from_json(agent.snapshot().to_json())
    assert first.reason == "deferred"
    assert [(c.id, c.tool, c.approval) for c in first.pending] == [
        ("call_1_1", "notify", True),
        ("call_1_2", "notify", True),
    ]
    assert setup.tools.runs == ["look"]
    assert first.to_dict()["pending"][0]["approval"] is True
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        with pytest.raises(toolflow.UsageError, match=r"waits for an approval: approve it \(True\) or refuse it"):
            await agent.resume(saved, results={"call_1_1": "yes", "call_1_2": False})
        result = await agent.resume(saved, results={"call_1_1": True, "call_1_2": False})
    assert result.reason == "final_answer"
    assert setup.tools.runs == ["look", "poke"]  # the approved call ran, through the engine, once
    check_openai_history(result.messages)
    tools = [json.loads(m["content"]) for m in result.messages if m["role"] == "tool"]
    assert tools[1]["data"] == "poked"
    assert tools[2]["status"] == "denied"


async def test_reflection_defers_nothing(setup: Setup) -> None:
    """A deferred call in a reflection turn waits for nothing: the next run is not held by it."""
    turns = [{"tool_calls": [call("ask_human", question="q")]}, {"text": "hello"}]
    provider = setup.transcript(turns)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        record = await agent.reflect("think")
        result = await agent.run("go")
    assert record.entries[0].result.extra["status"] == "deferred"
    assert result.reason == "final_answer"
    assert result.pending == ()
    assert agent.snapshot().pending == ()


async def test_an_approved_call_runs_even_after_a_stop_of_the_same_agent(tmp_path: Path) -> None:
    """A stop that ended the run before does not keep the approved call from running on resume."""
    setup = Setup(tmp_path, APPROVALS)
    provider = setup.transcript([{"tool_calls": [call("notify")]}, {"text": "done"}])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy, approve=toolflow.defer_approval)
        first = await agent.run("go")
        agent.request_stop()  # after the run: the engine keeps the stop until its next turn
        result = await agent.resume(agent.snapshot(), results={first.pending[0].id: True})
    assert setup.tools.runs == ["poke"]
    assert result.reason == "final_answer"


BOUND_DEFERRED = """\
  ask_owner:
    description: Asks the account's owner; the application answers later.
    deferred: true
    context: {owner: user.id}
    parameters:
      type: object
      properties:
        owner: {type: string, description: Whom to ask}
        question: {type: string, description: What to ask}
      required: [owner, question]
    template: '{"answer": "yes"}'
"""


class NoSecrets:
    """A plugin whose ``toolflow_validate_arguments`` refuses questions about passwords."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    @toolflow.hookimpl
    def toolflow_validate_arguments(self, call: toolflow.ToolCall, arguments: Any) -> Any:
        self.seen.append((call.name, dict(arguments)))
        return {"question": "never ask for a password"} if "password" in arguments.get("question", "") else None


async def test_the_plugins_check_a_deferred_calls_arguments(tmp_path: Path) -> None:
    """``toolflow_validate_arguments`` is asked about a deferred call, with the bound values filled; its refusal answers it."""
    setup = Setup(tmp_path, BOUND_DEFERRED)
    checks = NoSecrets()
    setup.plugins.register(checks, "no-secrets")
    turns = [
        {"tool_calls": [call("ask_owner", question="your password?"), call("ask_owner", question="left or right?")]},
        {"text": "unused"},
    ]
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, setup.transcript(turns), policy=setup.policy, context={"user": {"id": "u1"}})
        result = await agent.run("go")
    assert checks.seen == [
        ("ask_owner", {"owner": "u1", "question": "your password?"}),
        ("ask_owner", {"owner": "u1", "question": "left or right?"}),
    ]
    refused, waiting = result.turns[0].entries
    assert refused.result.error is not None
    assert "question: never ask for a password" in refused.result.error
    assert waiting.result.extra["status"] == "deferred"
    assert [(c.id, dict(c.arguments)) for c in result.pending] == [
        ("call_1_1", {"owner": "u1", "question": "left or right?"})
    ]


@pytest.mark.parametrize(("bound_arguments", "waits"), [("refuse", False), ("ignore", True)], ids=["refuse", "ignore"])
async def test_a_deferred_call_setting_a_bound_parameter_follows_the_policy(
    tmp_path: Path, bound_arguments: str, waits: bool
) -> None:
    """A value sent for a bound parameter is refused, or dropped for the context's, as for a call that runs."""
    setup = Setup(tmp_path, BOUND_DEFERRED + f"policy:\n  bound_arguments: {bound_arguments}\n")
    turns = [{"tool_calls": [call("ask_owner", owner="someone-else", question="ok?")]}, {"text": "unused"}]
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, setup.transcript(turns), policy=setup.policy, context={"user": {"id": "u1"}})
        result = await agent.run("go")
    if waits:
        assert result.reason == "deferred"
        assert [dict(c.arguments) for c in result.pending] == [{"owner": "u1", "question": "ok?"}]
    else:
        assert result.pending == ()
        error = result.turns[0].entries[0].result.error
        assert error is not None
        assert "the parameter 'owner' is set by the application, not by you" in error
