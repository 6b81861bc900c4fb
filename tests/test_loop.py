"""The agent loop: turns, the continuation policy, stop and kill, provider errors, with a scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
import yaml
from _loop_support import Setup, call, check_openai_history

import toolflow
from toolflow._loop import Agent
from toolflow._policy import Policy
from toolflow._providers import HistoryView


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


async def test_calls_then_a_final_answer(setup: Setup) -> None:
    """A turn of calls, then an answer without calls: `final_answer`, with a valid OpenAI history."""
    result, provider = await setup.run(
        [{"text": "looking", "tool_calls": [call("look", where="north")]}, {"text": "done"}]
    )
    assert (result.reason, result.final_answer) == ("final_answer", "done")
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    tool_message = result.messages[2]
    assert json.loads(tool_message["content"])["data"] == "you see north"
    assert len(provider.requests) == 2
    assert provider.requests[1].messages[-1] == tool_message
    assert [d["function"]["name"] for d in provider.requests[0].tools] == [t.name for t in setup.registry]
    check_openai_history(result.messages)


async def test_terminal_success_ends_the_loop_but_a_failure_does_not(setup: Setup) -> None:
    """A failed terminal call lets the loop go on; a successful one ends it with `terminal`."""
    result, _ = await setup.run(
        [
            {"tool_calls": [call("shout")]},
            {"tool_calls": [call("say", message="hi")]},
            {"text": "never asked"},
        ]
    )
    assert result.reason == "terminal"
    assert len(result.turns) == 2
    assert [e.success for t in result.turns for e in t.entries] == [False, True]


async def test_consecutive_errors_across_tools_end_the_loop(setup: Setup) -> None:
    """Three failures in a row, across tools, end the loop; a success in between resets the count."""
    turns = [
        {"tool_calls": [call("fail"), call("nope")]},
        {"tool_calls": [call("look")]},
        {"tool_calls": [call("fail"), call("fail")]},
        {"tool_calls": [call("nope")]},
        {"text": "never asked"},
    ]
    result, _ = await setup.run(turns)
    assert result.reason == "error_cap"
    assert len(result.turns) == 4
    check_openai_history(result.messages)


async def test_max_iterations_ends_the_loop_with_every_call_answered(setup: Setup) -> None:
    """At the iteration limit the loop ends after answering the turn's calls; the soft warning comes first."""
    turns = [{"tool_calls": [call("look")]} for _ in range(6)]
    policy = Policy(max_iterations=3, soft_warn_iterations=2)
    result, _ = await setup.run(turns, policy=policy)
    assert result.reason == "max_iterations"
    assert len(result.turns) == 3
    advisories = [t.entries[-1].result.extra.get("_loop_advisory") for t in result.turns]
    assert advisories[0] is None
    assert advisories[1] == {
        "iterations_remaining": 1,
        "message": "1 turn(s) left before the iteration limit; wrap up and answer",
    }
    check_openai_history(result.messages)


@pytest.mark.parametrize("format_name", ["openai", "text"])
async def test_answer_at_limit_gives_one_last_turn_without_tools(setup: Setup, format_name: str) -> None:
    """`answer_at_limit`: after the last allowed turn the model answers, offered no tools; a call then is refused."""
    answered = [{"tool_calls": [call("look")]}, {"tool_calls": [call("look")]}, {"text": "Here is what I found."}]
    policy = Policy(max_iterations=2, answer_at_limit=True)
    result, provider = await setup.run(answered, policy=policy, format=format_name)
    assert (result.reason, result.final_answer, len(result.turns)) == ("max_iterations", "Here is what I found.", 3)
    last = provider.requests[-1]
    assert last.tools == ()
    assert "This task has used all its turns." in str(last.messages[-1])
    stubborn = [{"tool_calls": [call("look")]}, {"tool_calls": [call("look")]}, {"tool_calls": [call("look")]}]
    result, _ = await setup.run(stubborn, policy=policy, format=format_name)
    assert result.reason == "max_iterations"
    assert result.decision.message == "the model used its last turn for tool calls"
    refused = result.turns[-1].entries[0].result
    assert refused.error == "Error: no tools may be called now - the task has used all its turns; answer in plain text"
    without, _ = await setup.run(answered, policy=Policy(max_iterations=2), format=format_name)
    assert (without.reason, len(without.turns)) == ("max_iterations", 2)  # off by default


async def test_token_warning_then_critical_gives_one_last_turn_without_tools(setup: Setup) -> None:
    """60 %: an advisory on the results; 80 %: one more turn without tools, then `token_critical`."""
    policy = attrs_evolve(setup.policy, tokens={"context_window": 1000})
    turns = [
        {"tool_calls": [call("look")], "usage": {"prompt_tokens": 600, "completion_tokens": 10}},
        {"tool_calls": [call("look")], "usage": {"prompt_tokens": 850, "completion_tokens": 10}},
        {"text": "my answer", "usage": {"prompt_tokens": 900, "completion_tokens": 10}},
    ]
    result, provider = await setup.run(turns, policy=policy)
    assert (result.reason, result.final_answer) == ("token_critical", "my answer")
    first = result.turns[0].entries[-1].result.extra["_token_advisory"]
    assert (first["level"], first["tokens_used"]) == ("warning", 610)
    second = result.turns[1].entries[-1].result.extra["_token_advisory"]
    assert second["level"] == "critical"
    assert provider.requests[1].tools
    assert provider.requests[2].tools == ()
    assert result.turns[2].tools_offered is False
    assert result.usage.total_tokens == 610 + 860 + 910


async def test_tool_calls_on_the_last_turn_are_answered_but_not_run(setup: Setup) -> None:
    """A model that calls tools on its no-tools turn gets `not_run` results and the loop ends."""
    policy = attrs_evolve(setup.policy, tokens={"context_window": 100})
    turns = [
        {"tool_calls": [call("look")], "usage": {"prompt_tokens": 90, "completion_tokens": 0}},
        {"tool_calls": [call("look")]},
    ]
    result, _ = await setup.run(turns, policy=policy)
    assert result.reason == "token_critical"
    assert setup.tools.runs == ["look"]
    assert result.turns[1].entries[0].result.extra["status"] == "not_run"
    check_openai_history(result.messages)


def attrs_evolve(policy: Policy, *, tokens: Mapping[str, int]) -> Policy:
    return Policy.from_mapping({"tokens": tokens}, base=policy)


async def test_one_dangerous_call_per_turn(setup: Setup) -> None:
    """The second dangerous call of a turn is answered without running; the next turn may run it."""
    turns = [{"tool_calls": [call("poke"), call("poke")]}, {"tool_calls": [call("poke")]}, {"text": "ok"}]
    result, _ = await setup.run(turns)
    first, second = result.turns[0].entries
    assert first.success
    assert second.result.extra["status"] == "blocked"
    assert "at most 1 dangerous call(s) per turn" in (second.result.error or "")
    assert result.turns[1].entries[0].success
    assert setup.tools.runs == ["poke", "poke"]


async def test_per_turn_comes_from_the_policy(tmp_path: Path) -> None:
    """A policy allowing two dangerous calls per turn runs two; the third is answered without running."""
    setup = Setup(tmp_path, "policy:\n  categories:\n    dangerous: {per_turn: 2}\n")
    result, _ = await setup.run([{"tool_calls": [call("poke"), call("poke"), call("poke")]}, {"text": "ok"}])
    assert [e.success for e in result.turns[0].entries] == [True, True, False]
    assert "at most 2 dangerous call(s) per turn" in (result.turns[0].entries[2].result.error or "")
    assert setup.tools.runs == ["poke", "poke"]


async def test_an_answer_over_max_calls_per_turn_runs_none_of_its_calls(tmp_path: Path) -> None:
    """Two calls under a limit of one: neither runs, each is answered with the limit, the model may try again."""
    setup = Setup(tmp_path, "policy:\n  max_calls_per_turn: 1\n")
    turns = [
        {"tool_calls": [call("look", where="a"), call("poke")]},
        {"tool_calls": [call("look", where="a")]},
        {"text": "done"},
    ]
    result, _ = await setup.run(turns)
    said = "Error: 2 tool calls in one turn, more than the 1 allowed: none ran; make at most 1"
    assert [(e.result.error, e.result.extra["status"]) for e in result.turns[0].entries] == [(said, "aborted")] * 2
    assert [e.success for e in result.turns[1].entries] == [True]
    assert setup.tools.runs == ["look"]
    assert result.reason == "final_answer"
    check_openai_history(result.messages)


async def test_approval_by_callback_and_by_plugin(tmp_path: Path) -> None:
    """A category that needs approval runs only approved calls; without an approver nothing runs."""
    setup = Setup(tmp_path, "policy:\n  categories:\n    notify: {approval: true}\n")
    turns = [{"tool_calls": [call("notify")]}, {"text": "ok"}]
    asked: list[tuple[str, str]] = []

    def approve(call: toolflow.ToolCall, category: str) -> bool:
        asked.append((call.name, category))
        return False

    refused, _ = await setup.run(turns, approve=approve)
    assert asked == [("notify", "notify")]
    assert refused.turns[0].entries[0].result.extra["status"] == "denied"
    nobody, _ = await setup.run(turns)
    assert nobody.turns[0].entries[0].result.extra["status"] == "denied"
    assert setup.tools.runs == []

    class Approver:
        @toolflow.hookimpl
        def toolflow_approve_call(self, call: toolflow.ToolCall, category: str) -> bool | None:
            return call.name == "notify"

    setup.plugins.register(Approver(), "approver")
    approved, _ = await setup.run(turns)
    assert approved.turns[0].entries[0].success
    assert setup.tools.runs == ["poke"]


async def test_depends_on_is_checked_before_the_approver_is_asked(tmp_path: Path) -> None:
    """A call whose prerequisite never ran is refused by depends_on first: nobody approves a call that cannot run."""
    guarded = (
        "  guarded:\n    description: Needs a look first, and approval.\n    category: notify\n"
        "    depends_on: [look]\n    implementation: t.poke\n"
        "policy:\n  categories:\n    notify: {approval: true}\n"
    )
    setup = Setup(tmp_path, guarded)
    asked: list[str] = []

    def approve(call: toolflow.ToolCall, category: str) -> bool:
        asked.append(call.name)
        return True

    turns = [
        {"tool_calls": [call("guarded")]},
        {"tool_calls": [call("look"), call("guarded")]},
        {"text": "done"},
    ]
    result, _ = await setup.run(turns, approve=approve)
    early = result.turns[0].entries[0].result
    assert early.extra["status"] == "dependency"
    assert [e.success for e in result.turns[1].entries] == [True, True]
    assert asked == ["guarded"]  # asked once: in the second turn, after `look` ran
    assert setup.tools.runs == ["look", "poke"]


async def test_toolset_and_deliberate_mode_block_other_tools(tmp_path: Path) -> None:
    """Only the exposed tools are offered; a call of another gets a model-visible `blocked` result."""
    setup = Setup(tmp_path, "policy:\n  toolset: quiet\n  deliberate: [look]\n")
    turns = [{"tool_calls": [call("poke"), call("look")]}, {"text": "ok"}]
    result, provider = await setup.run(turns)
    assert [d["function"]["name"] for d in provider.requests[0].tools] == ["look", "fail", "say"]
    blocked, looked = result.turns[0].entries
    assert blocked.result.extra["status"] == "blocked"
    assert blocked.result.extra["allowed"] == ["fail", "look", "say"]
    assert looked.success
    deliberate, provider = await setup.run(
        [{"tool_calls": [call("say", message="x")]}, {"text": "ok"}], deliberate=True
    )
    assert [d["function"]["name"] for d in provider.requests[0].tools] == ["look"]
    assert deliberate.turns[0].entries[0].result.extra["allowed"] == ["look"]
    assert setup.tools.runs == ["look"]


async def test_unknown_policy_names_are_usage_errors(tmp_path: Path) -> None:
    """A policy naming a tool or toolset that does not exist fails before the loop starts."""
    setup = Setup(tmp_path, "policy:\n  allow: [look, lok]\n")
    with pytest.raises(toolflow.UsageError, match="'lok'"):
        await setup.run([{"text": "x"}])
    with pytest.raises(toolflow.UsageError, match="deliberate"):
        await Setup(tmp_path).run([{"text": "x"}], deliberate=True)


async def test_stop_lets_calls_in_flight_finish(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A stop during a slow call lets it finish, answers it, and ends the loop as `stopped`."""
    provider = setup.transcript([{"tool_calls": [call("slow"), call("look")]}, {"text": "never"}])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_later, 5, agent.request_stop)
            result = await agent.run("go")
    assert result.reason == "stopped"
    assert setup.tools.finished == ["slow"]
    assert [e.success for e in result.turns[0].entries] == [True, True]
    assert len(provider.requests) == 1
    check_openai_history(result.messages)


async def test_kill_cancels_calls_in_flight(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A kill cancels the slow call at once; every call gets a `cancelled` result and the loop ends `killed`."""
    provider = setup.transcript([{"tool_calls": [call("look"), call("slow")]}, {"text": "never"}])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_later, 5, agent.kill)
            start = trio.current_time()
            result = await agent.run("go")
    assert trio.current_time() - start == pytest.approx(5)
    assert result.reason == "killed"
    assert setup.tools.finished == []
    assert {e.result.extra["status"] for e in result.turns[0].entries} == {"cancelled"}
    check_openai_history(result.messages)


async def test_a_stop_reaches_a_session_of_quick_tools(setup: Setup) -> None:
    """Quick tools never yield, but the scripted model does now and then, so a stop from another task gets through."""
    turns: list[Any] = [{"tool_calls": [call("look")]}] * 400 + [{"text": "done"}]
    provider = setup.transcript(turns)
    policy = attrs.evolve(setup.policy, max_iterations=500)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=policy)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_later, 0, agent.request_stop)
            result = await agent.run("go")
    assert result.reason == "stopped"
    assert len(result.turns) < 200  # the stop got through at one of the model's first checkpoints, not at the end
    check_openai_history(result.messages)


async def _later(seconds: float, action: Callable[[], None]) -> None:
    await trio.sleep(seconds)
    action()


async def test_retryable_provider_errors_are_retried(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A 503 is retried after its Retry-After; a 400 ends the loop with `provider_error`."""
    start = trio.current_time()
    result, provider = await setup.run(
        [
            {"error": {"message": "overloaded", "status": 503, "retry_after": 7}},
            {"text": "answer"},
        ]
    )
    assert (result.reason, result.final_answer) == ("final_answer", "answer")
    assert len(provider.requests) == 2
    assert trio.current_time() - start >= 7
    failed, _ = await setup.run([{"tool_calls": [call("look")]}, {"error": {"message": "bad request", "status": 400}}])
    assert failed.reason == "provider_error"
    assert "bad request" in failed.decision.message
    check_openai_history(failed.messages)


async def test_a_transcript_that_runs_out_is_a_provider_error(setup: Setup) -> None:
    """Asking past the last turn ends the loop with `provider_error`, naming the file."""
    result, _ = await setup.run([{"tool_calls": [call("look")]}])
    assert result.reason == "provider_error"
    assert "session.yaml has no turn 2" in result.decision.message


async def test_the_scripted_provider_keeps_requests_only_when_asked(setup: Setup) -> None:
    """`record_requests` is the scripted provider's one option; without it nothing is kept."""
    path = setup.tmp_path / "kept.yaml"
    path.write_text(yaml.safe_dump({"turns": [{"tool_calls": [call("look")]}, {"text": "done"}]}), encoding="utf-8")
    kept = toolflow.load_provider(f"scripted:{path}", plugins=setup.plugins, record_requests=True)
    plain = toolflow.load_provider(f"scripted:{path}", plugins=setup.plugins)
    for provider in (kept, plain):
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            result = await Agent(engine, provider, policy=setup.policy).run("go")
        assert result.reason == "final_answer"
    assert [request.turn for request in kept.requests] == [1, 2]  # type: ignore[attr-defined]
    assert kept.requests[1].messages == result.messages[:-1]  # type: ignore[attr-defined]
    assert plain.requests == []  # type: ignore[attr-defined]
    with pytest.raises(toolflow.UsageError, match="does not take these options"):
        toolflow.load_provider(f"scripted:{path}", plugins=setup.plugins, temperature=0)


async def test_reflection_turns_stay_out_of_the_history(setup: Setup) -> None:
    """A reflection turn runs its calls, but neither its prompt, answer nor results enter the history."""
    provider = setup.transcript([{"tool_calls": [call("look")]}, {"text": "fine"}])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        record = await agent.reflect("think about it")
        assert agent.messages == ()
        result = await agent.run("now answer")
    assert record.reflection
    assert record.entries[0].success
    assert setup.tools.runs == ["look"]
    assert [m["role"] for m in result.messages] == ["user", "assistant"]


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "fallback", "text"])
async def test_every_format_runs_the_same_session(setup: Setup, fmt: str) -> None:
    """The same transcript gives the same calls and results in every history format."""
    turns = [
        {"text": "let me look", "tool_calls": [call("look", where="up"), call("fail")]},
        {"tool_calls": [call("say", message="bye")]},
    ]
    result, provider = await setup.run(turns, format=fmt)
    assert result.reason == "terminal"
    assert [(e.tool_name, e.success) for t in result.turns for e in t.entries] == [
        ("look", True),
        ("fail", False),
        ("say", True),
    ]
    assert provider.requests[0].format == fmt
    assert bool(provider.requests[0].tools) == (fmt in {"openai", "anthropic"})
    if fmt in {"fallback", "text"}:
        assert "look" in provider.requests[0].system


def _function(call_id: str | None, name: str = "look") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": "{}"}}
    return item if call_id is None else {"id": call_id, **item}


def _tool_use(call_id: str | None, name: str = "look") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": {}}
    return block if call_id is None else {**block, "id": call_id}


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("openai", {"role": "assistant", "content": None, "tool_calls": [_function("dup"), _function("dup")]}),
        ("openai", {"role": "assistant", "content": "hm", "tool_calls": [_function(None), _function("call_0")]}),
        ("openai", {"role": "assistant", "content": None, "tool_calls": _function(None)}),
        ("openai", {"role": "assistant", "content": None, "function_call": {"name": "look", "arguments": "{}"}}),
        (
            "anthropic",
            {"role": "assistant", "content": [{"type": "text", "text": "hm"}, _tool_use("dup"), _tool_use("dup")]},
        ),
        ("anthropic", {"role": "assistant", "content": [_tool_use(None), _tool_use("call_0")]}),
    ],
    ids=[
        "openai-duplicate",
        "openai-missing",
        "openai-one-mapping",
        "openai-legacy",
        "anthropic-duplicate",
        "anthropic-missing",
    ],
)
async def test_the_history_keeps_the_ids_the_results_answer(setup: Setup, fmt: str, message: dict[str, Any]) -> None:
    """Calls whose ids parsing renamed or invented are kept in the history with those ids, and nothing else changes."""
    result, provider = await setup.run([{"message": message}, {"text": "done"}], format=fmt)
    assert result.reason == "final_answer"
    answered = [entry.call_id for entry in result.turns[0].entries]
    assert len(set(answered)) == len(answered) >= 1
    stored = result.messages[1]
    if fmt == "openai":
        assert [c["id"] for c in stored["tool_calls"]] == answered
        assert [m["tool_call_id"] for m in result.messages[2:-1]] == answered
        assert stored["content"] == message["content"]
        assert "function_call" not in stored
        check_openai_history(result.messages)
    else:
        assert [b["id"] for b in stored["content"] if b["type"] == "tool_use"] == answered
        assert [b["tool_use_id"] for b in result.messages[2]["content"]] == answered
        assert [b for b in stored["content"] if b["type"] == "text"] == [
            b for b in message["content"] if b["type"] == "text"
        ]
    assert provider.requests[1].messages[1] == stored  # the provider is sent what the history keeps
    assert setup.tools.runs == ["look"] * len(answered)


async def test_an_approver_that_raises_refuses_the_call_with_a_warning(tmp_path: Path) -> None:
    """Approval fails closed: an approver that raises is a warning naming it, its call is `denied`, the loop goes on."""
    setup = Setup(tmp_path, "policy:\n  categories:\n    notify: {approval: true}\n")
    provider = setup.transcript([{"tool_calls": [call("look"), call("notify")]}, {"text": "fine"}])

    def approve(call: toolflow.ToolCall, category: str) -> bool:
        msg = "the approval service is down"
        raise RuntimeError(msg)

    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy, approve=approve)
        with pytest.warns(toolflow.ApprovalWarning, match="raised RuntimeError: the approval service is down"):
            result = await agent.run("go")
    assert result.reason == "final_answer"
    check_openai_history(result.messages)
    answers = [json.loads(m["content"]) for m in result.messages if m["role"] == "tool"]
    assert [a.get("status") for a in answers] == [None, "denied"]
    assert setup.tools.runs == ["look"]


async def test_outside_cancellation_leaves_every_call_answered(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """A timeout around run() that fires while a tool runs cancels it; the call is answered `cancelled`."""
    provider = setup.transcript([{"tool_calls": [call("slow"), call("look")]}, {"text": "later"}])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        with trio.move_on_after(5) as timeout:
            await agent.run("go")
        assert timeout.cancelled_caught
        check_openai_history(agent.messages)
        assert [m["role"] for m in agent.messages] == ["user", "assistant", "tool", "tool"]
        result = await agent.run("again")
    assert setup.tools.finished == []
    assert result.reason == "final_answer"
    check_openai_history(result.messages)


@pytest.mark.parametrize("fmt", ["text", "fallback"])
async def test_the_answer_turn_describes_no_tools(tmp_path: Path, fmt: str) -> None:
    """On the turn without tools the system prompt has no tool section, for formats that put one there."""
    setup = Setup(tmp_path, "policy:\n  system_prompt: Be brief.\n  tokens: {context_window: 1000}\n")
    turns = [{"tool_calls": [call("look")], "usage": {"prompt_tokens": 900}}, {"text": "answer"}]
    result, provider = await setup.run(turns, format=fmt)
    assert result.reason == "token_critical"
    first, last = provider.requests
    assert "look" in first.system
    assert last.system == "Be brief."
    assert result.system == first.system


async def test_critical_on_the_last_iteration_still_gets_its_answer_turn(setup: Setup) -> None:
    """Reaching the critical level on the policy's last turn gives the model its turn without tools to answer."""
    policy = Policy.from_mapping({"max_iterations": 1, "tokens": {"context_window": 1000}}, base=setup.policy)
    turns = [{"tool_calls": [call("look")], "usage": {"prompt_tokens": 900}}, {"text": "the answer"}]
    result, provider = await setup.run(turns, policy=policy)
    assert (result.reason, result.final_answer) == ("token_critical", "the answer")
    assert [t.tools_offered for t in result.turns] == [True, False]
    assert provider.requests[1].tools == ()
    check_openai_history(result.messages)


async def test_calls_over_the_per_turn_limit_are_no_errors(setup: Setup) -> None:
    """Refused by `per_turn`, a call neither counts towards the error cap nor resets it; real failures still count."""
    policy = attrs.evolve(setup.policy, max_consecutive_errors=3)
    many, _ = await setup.run([{"tool_calls": [call("poke")] * 4}, {"text": "done"}], policy=policy)
    assert many.reason == "final_answer"
    assert [e.result.extra.get("status") for e in many.turns[0].entries] == [None, "blocked", "blocked", "blocked"]
    policy = attrs.evolve(setup.policy, max_consecutive_errors=2)
    turn = [call("poke"), call("fail"), call("poke"), call("fail")]
    capped, _ = await setup.run([{"tool_calls": turn}, {"text": "never"}], policy=policy)
    assert capped.reason == "error_cap"
    assert "2 failed tool calls in a row" in capped.decision.message


async def test_the_turn_record_names_the_call_that_ended_the_loop(setup: Setup) -> None:
    """`ended_by` holds the terminal call, not the calls after it; other turns have none."""
    turns = [{"tool_calls": [call("look")]}, {"tool_calls": [call("say", message="bye"), call("look")]}]
    result, _ = await setup.run(turns)
    assert result.reason == "terminal"
    first, last = result.turns
    assert first.ended_by == ()
    assert last.ended_by == (last.entries[0].call_id,)
    assert result.to_dict()["turns"][1]["ended_by"] == [last.entries[0].call_id]


async def test_each_request_shows_the_history_of_its_turn(tmp_path: Path) -> None:
    """Later turns do not change what an earlier request shows; the answer turn's request ends with its own message."""
    setup = Setup(tmp_path, "policy:\n  tokens: {context_window: 1000}\n")
    turns = [
        {"tool_calls": [call("look")]},
        {"tool_calls": [call("look"), call("look")], "usage": {"prompt_tokens": 900}},
        {"text": "answer"},
    ]
    result, provider = await setup.run(turns)
    assert result.reason == "token_critical"
    first, second, last = provider.requests
    history = result.messages
    assert first.messages == history[:1]
    assert second.messages == history[:3]
    assert len(last.messages) == len(history)  # the history before the answer, and the request to answer
    assert last.messages[:-1] == history[:-1]
    assert last.messages[-1]["role"] == "user"
    assert last.messages[-1] not in history
    assert [m["role"] for m in second.messages] == ["user", "assistant", "tool"]
    assert list(second.messages) == list(history[:3])
    with pytest.raises(TypeError):
        hash(first)  # messages are dicts, and requests are as hashable as before: not at all


def test_a_history_view_is_a_read_only_sequence() -> None:
    """A view shows the list's first messages as they were, then its tail; it compares and slices as a tuple."""
    history: list[Mapping[str, Any]] = [{"n": 0}, {"n": 1}]
    view = HistoryView(history, ({"n": "tail"},))
    history.append({"n": 2})
    assert len(view) == 3
    assert view == ({"n": 0}, {"n": 1}, {"n": "tail"})
    assert view != [{"n": 0}, {"n": 1}, {"n": "tail"}]  # as a tuple: not equal to a list
    assert view == HistoryView(history[:2], ({"n": "tail"},))
    assert (view[0], view[-1], view[-3]) == ({"n": 0}, {"n": "tail"}, {"n": 0})
    assert view[1:] == ({"n": 1}, {"n": "tail"})
    assert view[::-1] == tuple(reversed(view))
    assert {"n": 2} not in view
    for index in (3, -4):
        with pytest.raises(IndexError):
            view[index]
    assert repr(HistoryView([{"n": 0}])) == "HistoryView(({'n': 0},))"
    request = toolflow.ModelRequest(format="openai", messages=view)
    assert request.messages is view
    assert toolflow.ModelRequest(format="openai", messages=[{"n": 0}]).messages == ({"n": 0},)
