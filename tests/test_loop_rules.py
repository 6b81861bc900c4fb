"""The policy's order rules and call limits (issue 20 section 1) in the agent loop and the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _loop_support import SPEC, Setup, call, check_openai_history

import toolflow
from toolflow._policy import Policy
from toolflow._rules import RuleBook, ToolRule, describe_rules

RULES = """\
policy:
  rules:
    - first: [look]
    - after: look
      only: [say, fail]
    - tool: fail
      max_calls: {per_turn: 1, per_run: 2}
"""


def _names(tools: tuple[Any, ...]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in tools)


def _policy(setup: Setup, **changes: Any) -> Policy:
    return toolflow.Policy.from_mapping(changes, base=setup.policy)


async def test_the_tools_offered_follow_the_rules_turn_by_turn(tmp_path: Path) -> None:
    """First only `look`; after `look` only `say` and `fail`; a tool past its run limit is no longer offered."""
    setup = Setup(tmp_path, RULES)
    turns = [
        {"tool_calls": [call("look")]},
        {"tool_calls": [call("fail")]},
        {"tool_calls": [call("fail")]},
        {"text": "done"},
    ]
    result, provider = await setup.run(turns)
    assert result.reason == "final_answer"
    offered = [_names(request.tools) for request in provider.requests]
    every = sorted(["look", "fail", "slow", "say", "shout", "poke", "notify"])
    assert offered[0] == ["look"]
    assert offered[1] == ["fail", "say"]  # after look
    assert offered[2] == every  # after fail: no after rule; fail has 1 of 2 calls left
    assert "fail" not in offered[3]  # two calls: its per_run limit
    assert setup.tools.runs == ["look", "fail", "fail"]


async def test_the_rules_are_described_in_the_system_prompt(tmp_path: Path) -> None:
    """Every format's system prompt carries a `## Tool rules` section, but not the turn without tools."""
    setup = Setup(tmp_path, RULES)
    for name in ("openai", "anthropic", "gemini", "fallback", "text"):
        _, provider = await setup.run([{"text": "hi"}], format=name)
        system = provider.requests[0].system
        assert "## Tool rules\n- your first tool call must be one of 'look'" in system, name
        assert "- after 'look', call only 'say', 'fail' next" in system
        assert "- call 'fail' at most 1 per turn and 2 per run" in system


async def test_a_call_breaking_a_rule_gets_a_blocked_result_naming_it(tmp_path: Path) -> None:
    """A call the rules forbid is not run; its result names the rule and what is allowed now."""
    setup = Setup(tmp_path, RULES)
    turns = [{"tool_calls": [call("shout"), call("look"), call("shout"), call("say", message="hi")]}]
    result, _ = await setup.run(turns)
    entries = result.turns[0].entries
    assert [entry.success for entry in entries] == [False, True, False, True]
    first = entries[0].result
    assert first.extra["status"] == "blocked"
    assert first.extra["rule"] == "first"
    assert first.extra["allowed"] == ["look"]
    assert first.error == (
        "Error: 'shout' breaks the rule: your first tool call must be one of 'look'. Allowed now: 'look'"
    )
    after = entries[2].result  # the call before it was look (the blocked shout does not count)
    assert (after.extra["rule"], after.extra["allowed"]) == ("after", ["fail", "say"])
    assert setup.tools.runs == ["look"]  # neither shout ran
    assert result.reason == "terminal"  # say was allowed: the call before it that counts is look
    check_openai_history(result.messages)


async def test_calls_of_one_batch_count_in_call_order(tmp_path: Path) -> None:
    """`max_calls.per_turn` counts a batch's calls in their order: the first runs, the second is blocked."""
    setup = Setup(tmp_path, "policy:\n  rules:\n    - tool: look\n      max_calls: {per_turn: 2}\n")
    turns = [
        {"tool_calls": [call("look", where="a"), call("look", where="b"), call("look", where="c")]},
        {"tool_calls": [call("look", where="d")]},
        {"text": "done"},
    ]
    result, _ = await setup.run(turns)
    first, second = result.turns[0].entries, result.turns[1].entries
    assert [entry.success for entry in first] == [True, True, False]
    assert first[2].result.error is not None
    assert "'look' was called 2 time(s) this turn, its limit; call it again next turn" in first[2].result.error
    assert second[0].success  # a new turn, a new count
    assert [entry.result.data for entry in first[:2]] == ["you see a", "you see b"]


async def test_before_exit_refuses_a_final_answer_until_the_tool_succeeded(tmp_path: Path) -> None:
    """A final answer before `say` gets one message saying what to do; the model calls `say` and the loop ends."""
    setup = Setup(tmp_path, "policy:\n  rules:\n    - before_exit: [say]\n")
    turns = [{"text": "I am done"}, {"tool_calls": [call("say", message="bye")]}]
    result, provider = await setup.run(turns)
    assert result.reason == "terminal"
    assert [turn.decision.reason for turn in result.turns] == ["before_exit", "terminal"]
    assert result.turns[0].decision.should_continue
    refusal = provider.requests[1].messages[-1]
    assert refusal["role"] == "user"
    assert refusal["content"] == (
        "Error: you cannot give your final answer yet. The tool rules say: "
        "before your final answer, call one of 'say' successfully. Do that now, then answer."
    )
    check_openai_history(result.messages)


async def test_before_exit_is_bounded_by_max_iterations(tmp_path: Path) -> None:
    """A model that never calls the required tool ends at `max_iterations`, the rule named in the decision."""
    setup = Setup(tmp_path, "policy:\n  max_iterations: 3\n  rules:\n    - before_exit: [say]\n")
    result, _ = await setup.run([{"text": "done"}] * 3)
    assert [turn.decision.reason for turn in result.turns] == ["before_exit", "before_exit", "max_iterations"]
    assert result.reason == "max_iterations"
    assert "with a rule unmet: before your final answer, call one of 'say' successfully" in result.decision.message
    assert result.final_answer == "done"


async def test_the_answer_turn_offers_only_the_tools_still_required(tmp_path: Path) -> None:
    """With `answer_at_limit`, the last turn offers the `before_exit` tools; their call runs, another is refused."""
    policy = "policy:\n  max_iterations: 1\n  answer_at_limit: true\n  rules:\n    - before_exit: [say]\n"
    setup = Setup(tmp_path, policy)
    turns = [{"tool_calls": [call("look")]}, {"tool_calls": [call("look"), call("say", message="found it")]}]
    result, provider = await setup.run(turns)
    last = provider.requests[-1]
    assert _names(last.tools) == ["say"]
    assert "The tool rules still require a call of 'say'" in str(last.messages[-1])
    entries = result.turns[-1].entries
    assert [entry.tool_name for entry in entries] == ["look", "say"]
    assert entries[0].result.extra["status"] == "not_run"
    assert entries[1].success
    assert result.reason == "terminal"
    assert setup.tools.runs == ["look"]  # the refused look did not run


async def test_without_answer_at_limit_a_refused_answer_at_the_last_turn_ends_the_loop(tmp_path: Path) -> None:
    """At the last turn a refused answer ends the loop at once: no further turn."""
    setup = Setup(tmp_path, "policy:\n  max_iterations: 1\n  rules:\n    - before_exit: [say]\n")
    result, provider = await setup.run([{"text": "done"}])
    assert (result.reason, len(provider.requests)) == ("max_iterations", 1)


SURVEY = """\
  survey:
    description: Looks twice.
    pipeline:
      steps:
        one: {tool: look, with: {where: north}}
        two: {tool: look, with: {where: south}, needs: [one]}
"""


async def test_counts_restart_with_each_run_and_the_rules_see_no_pipeline_steps(tmp_path: Path) -> None:
    """`per_run` and `first` start again with each `Agent.run()`; a pipeline's steps are not the model's calls."""
    rules = "policy:\n  rules:\n    - first: [survey]\n    - tool: look\n      max_calls: {per_run: 1}\n"
    spec = tmp_path / "tools.yaml"
    setup = Setup(tmp_path)
    spec.write_text(SPEC.replace("tools:\n  look:", "tools:\n" + SURVEY + "  look:", 1) + rules, encoding="utf-8")
    specs = toolflow.load_specs([spec], kinds=setup.plugins.kind_schemas())
    assert specs.ok, [d.render() for d in specs.diagnostics]
    registry = toolflow.Registry.build(specs, setup.plugins)
    turns = [
        {"tool_calls": [call("survey"), call("look"), call("look")]},
        {"text": "a"},
        {"tool_calls": [call("survey"), call("look")]},
        {"text": "b"},
    ]
    provider = setup.transcript(turns)
    async with toolflow.open_engine(registry, plugins=setup.plugins) as engine:
        agent = toolflow.Agent(engine, provider, policy=Policy.from_specs(specs))
        first = await agent.run("go")
        second = await agent.run("again")
    # The survey's two looks did not count: the model's first look runs, its second is over per_run.
    assert [entry.success for entry in first.turns[0].entries] == [True, True, False]
    assert first.turns[0].entries[2].result.extra["rule"] == "max_calls"
    # A new run: `first` holds again (survey is allowed first) and look has its one call again.
    assert [entry.success for entry in second.turns[0].entries] == [True, True]
    assert setup.tools.runs.count("look") == 2 + 1 + 2 + 1


def test_a_rule_book_combines_rules_of_one_kind() -> None:
    """Two `first` rules allow what both allow; two `after` rules of one tool too; limits count per tool."""
    rules = (
        ToolRule(kind="first", tools=("a", "b")),
        ToolRule(kind="first", tools=("b", "c")),
        ToolRule(kind="after", tool="b", tools=("a", "c")),
        ToolRule(kind="after", tool="b", tools=("c", "d")),
    )
    book = RuleBook(rules)
    assert book.allowed("abcd") == {"b"}
    assert book.admit("b", "abcd") is None
    assert book.allowed("abcd") == {"c"}
    refused = book.admit("a", "abcd")
    assert refused is not None
    assert refused.extra["allowed"] == ["c"]
    assert describe_rules(()) == ""


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "after", "tools": ("a",)}, "needs the tool it is about"),
        ({"kind": "first", "tools": ()}, "needs at least one tool"),
        ({"kind": "max_calls", "tool": "a"}, "needs per_turn, per_run or both"),
        ({"kind": "sometimes", "tools": ("a",)}, "kind must be"),
    ],
)
def test_a_malformed_rule_is_a_value_error(entry: dict[str, Any], message: str) -> None:
    """ToolRule refuses a rule that could not mean anything."""
    with pytest.raises(ValueError, match=message):
        ToolRule(**entry)


async def test_engine_call_follows_the_rules_of_its_policy(tmp_path: Path) -> None:
    """The Python API: `Engine.call` counts and refuses like the loop; `new_loop` and setting a policy restart the counts."""
    setup = Setup(tmp_path, RULES)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins, policy=setup.policy) as engine:
        refused = await engine.call("say", {"message": "x"})
        assert (refused.extra["status"], refused.extra["rule"]) == ("blocked", "first")
        assert (await engine.call("look", {})).success
        assert (await engine.call("poke", {})).extra["rule"] == "after"
        assert (await engine.call("fail", {})).extra.get("rule") is None  # ran (and failed)
        engine.tick()
        assert (await engine.call("fail", {})).extra.get("rule") is None
        engine.tick()
        assert (await engine.call("fail", {})).extra["rule"] == "max_calls"  # per_run: 2
        engine.new_loop()
        assert (await engine.call("fail", {})).extra["rule"] == "first"
        engine.policy = Policy()  # no rules
        assert engine.rules is None
        assert (await engine.call("fail", {})).extra.get("rule") is None
    assert setup.tools.runs == ["look", "fail", "fail", "fail"]


async def test_a_rule_naming_an_unknown_tool_is_a_usage_error(tmp_path: Path) -> None:
    """`first: [typo]` would block every first call: the agent refuses it before the first turn, like `allow`."""
    setup = Setup(tmp_path, "policy:\n  rules:\n    - first: [lok]\n")
    with pytest.raises(toolflow.UsageError, match=r"policy 'rules' names tools that do not exist: 'lok'"):
        await setup.run([{"text": "hi"}])
