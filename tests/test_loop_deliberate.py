"""Deliberate mode's triggers and retention window (issue 20, section 2): through `Agent` and `toolflow run`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _loop_support import Setup, call, check_openai_history

import toolflow
from toolflow._cli import run as cli_run
from toolflow._deliberate import Trigger, phrase_pattern
from toolflow._loop import Agent
from toolflow._serve import exposed_tools

POLICY = """\
policy:
  deliberate:
    tools: [look, poke, fail]
    triggers:
      poke: ["poke it", "change the world"]
      fail: ["try and fail"]
    retain_turns: 1
"""


def _offered(request: Any) -> list[str]:
    return [definition["function"]["name"] for definition in request.tools]


async def _runs(setup: Setup, prompts: list[str], turns: list[Any], **options: Any) -> tuple[list[Any], Any]:
    """Run the agent once per prompt, on one scripted session; the results and the provider."""
    provider = setup.transcript(turns)
    with trio.fail_after(10):
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            agent = Agent(engine, provider, policy=setup.policy, deliberate=True, **options)
            results = [await agent.run(prompt) for prompt in prompts]
    return results, provider


async def test_a_tool_with_triggers_is_hidden_until_a_user_message_asks_for_it(tmp_path: Path) -> None:
    """Not offered, and a call of it gets seed 002's `blocked` result naming the tools allowed now; not run."""
    setup = Setup(tmp_path, POLICY)
    (result,), provider = await _runs(setup, ["look around"], [{"tool_calls": [call("poke")]}, {"text": "ok"}])
    assert _offered(provider.requests[0]) == ["look"]
    refused = result.turns[0].entries[0].result
    assert refused.to_dict() == {
        "success": False,
        "data": None,
        "error": "Error: tool 'poke' is not available now - deliberate mode offers it only when the user asks "
        "for it; allowed tools: 'look'",
        "status": "blocked",
        "reason": "deliberate_tool_mode",
        "allowed": ["look"],
    }
    assert setup.tools.runs == []
    assert result.turns[0].triggers == ()
    check_openai_history(result.messages)


async def test_other_refusals_do_not_name_a_hidden_tool(tmp_path: Path) -> None:
    """The engine's allowlist gate and its "did you mean" list only the tools offered now."""
    setup = Setup(tmp_path, POLICY)
    turns = [{"tool_calls": [call("say", message="hi"), call("pokee")]}, {"text": "ok"}]
    (result,), _ = await _runs(setup, ["look around"], turns)
    outside, unknown = (entry.result for entry in result.turns[0].entries)
    assert outside.extra == {"status": "blocked", "allowed": ["look"]}
    assert "'poke'" not in (outside.error or "") + (unknown.error or "")
    assert (unknown.error or "").endswith("(available: 'look')")


async def test_a_phrase_exposes_its_tool_and_the_record_says_which(tmp_path: Path) -> None:
    """Case-insensitive, any blanks between words; the tool runs; the turn records tool and phrase, the model never."""
    setup = Setup(tmp_path, POLICY)
    turns = [{"tool_calls": [call("poke")]}, {"text": "done"}]
    (result,), provider = await _runs(setup, ["Please POKE\n  it, gently"], turns)
    assert _offered(provider.requests[0]) == ["look", "poke"]
    assert result.turns[0].entries[0].success
    assert setup.tools.runs == ["poke"]
    assert result.turns[0].triggers == (Trigger(tool="poke", phrase="poke it"),)
    assert result.turns[1].triggers == ()
    assert result.to_dict()["turns"][0]["triggers"] == [{"tool": "poke", "phrase": "poke it", "retained": False}]
    others = [m for request in provider.requests for m in request.messages if m["role"] != "user"]
    sent = json.dumps(others) + provider.requests[0].system
    assert "poke it" not in sent  # only the user's own message carries the phrase
    assert "deliberate" not in sent


@pytest.mark.parametrize(
    ("message", "matches"),
    [
        ("poke it", True),
        ("now: poke it!", True),
        ("spoke it", False),  # inside a word
        ("poke items", False),
        ("poke\tit", True),
        ("POKE IT", True),
    ],
)
def test_phrases_match_whole_words(message: str, *, matches: bool) -> None:
    """A phrase matches as whole words, so a short trigger does not fire inside other words."""
    assert bool(phrase_pattern("poke it").search(message)) is matches
    assert phrase_pattern(" \t").search(message) is None  # a blank phrase exposes nothing


async def test_a_successful_call_keeps_the_tool_for_retain_turns_further_messages(tmp_path: Path) -> None:
    """Counted across runs of one agent: "do it again" needs no phrase, until the window closes."""
    setup = Setup(tmp_path, POLICY)
    turns = [
        {"tool_calls": [call("poke")]},  # run 1: triggered
        {"text": "poked"},
        {"tool_calls": [call("poke")]},  # run 2: retained (retain_turns: 1), and succeeds again
        {"text": "poked again"},
        {"text": "nothing to do"},  # run 3: retained by run 2's success
        {"tool_calls": [call("poke")]},  # run 4: hidden again
        {"text": "sorry"},
    ]
    results, provider = await _runs(setup, ["poke it", "do it again", "thanks", "once more"], turns)
    offered = [_offered(request) for request in provider.requests]
    assert offered == [["look", "poke"]] * 5 + [["look"]] * 2
    assert [r.turns[0].triggers for r in results] == [
        (Trigger(tool="poke", phrase="poke it"),),
        (Trigger(tool="poke", phrase=None),),
        (Trigger(tool="poke", phrase=None),),
        (),
    ]
    assert results[3].turns[0].entries[0].result.extra["reason"] == "deliberate_tool_mode"
    assert setup.tools.runs == ["poke", "poke"]


async def test_a_failed_call_keeps_nothing(tmp_path: Path) -> None:
    """Only a success opens the window: after a failed call the tool is hidden at the next message."""
    setup = Setup(tmp_path, POLICY)
    turns = [{"tool_calls": [call("fail")]}, {"text": "it broke"}, {"text": "ok"}]
    _, provider = await _runs(setup, ["try and fail", "and now?"], turns)
    assert [_offered(request) for request in provider.requests] == [["look", "fail"], ["look", "fail"], ["look"]]


async def test_tools_without_triggers_and_modes_without_deliberate_are_as_before(tmp_path: Path) -> None:
    """Outside deliberate mode triggers hide nothing; serve (which has no deliberate mode) offers the same tools."""
    setup = Setup(tmp_path, POLICY)
    result, provider = await setup.run([{"tool_calls": [call("poke")]}, {"text": "ok"}], prompt="hello")
    assert "poke" in _offered(provider.requests[0])
    assert result.turns[0].entries[0].success
    plain = toolflow.Policy.from_mapping({"deliberate": ["look", "poke", "fail"]})
    assert exposed_tools(setup.registry, setup.policy).names() == exposed_tools(setup.registry, plain).names()


async def test_the_text_format_describes_only_the_offered_tools(tmp_path: Path) -> None:
    """Formats that describe tools in the system prompt describe a hidden tool only once a message exposes it."""
    setup = Setup(tmp_path, POLICY)
    turns = [{"text": "hello"}, {"text": "poking"}]
    _, provider = await _runs(setup, ["hi", "poke it"], turns, format="text")
    first, second = provider.requests
    assert "look" in first.system
    assert "poke" not in first.system
    assert "poke" in second.system


def test_toolflow_run_traces_and_records_the_trigger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow run --deliberate`: the live trace and the JSON output say which phrase exposed which tool."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(
        "toolflow: 1\ntools:\n"
        "  look:\n    description: Look.\n    template: 'a room'\n"
        "  shell:\n    description: Run a command.\n    template: 'ran'\n"
        "policy:\n  deliberate:\n    tools: [look, shell]\n    triggers: {shell: [run the command]}\n",
        encoding="utf-8",
    )
    session = {"turns": [{"tool_calls": [call("shell")]}, {"text": "done"}]}
    (tmp_path / "session.yaml").write_text(yaml.safe_dump(session), encoding="utf-8")
    common = ["run", "--model", "scripted:session.yaml", "--deliberate"]

    out, err = io.StringIO(), io.StringIO()
    assert cli_run([*common, "--prompt", "please run the command"], stdout=out, stderr=err) == 0, err.getvalue()
    assert "  deliberate: 'shell' exposed by 'run the command'\n" in out.getvalue()
    assert '    ok: "ran"' in out.getvalue()

    out = io.StringIO()
    assert cli_run([*common, "--prompt", "hello", "--output-format", "json"], stdout=out, stderr=err) == 0
    document = json.loads(out.getvalue())
    assert document["turns"][0]["triggers"] == []
    assert document["turns"][0]["calls"][0]["result"]["reason"] == "deliberate_tool_mode"


async def test_triggers_and_rules_narrow_the_offer_together(tmp_path: Path) -> None:
    """The tools offered are those deliberate mode offers and the rules allow now: the intersection."""
    setup = Setup(tmp_path, POLICY + "  rules:\n    - first: [look]\n")
    turns = [
        {"tool_calls": [call("look")]},
        {"text": "ok"},
        {"tool_calls": [call("look")]},
        {"text": "ok"},
    ]
    _, provider = await _runs(setup, ["poke it", "hello"], turns)
    offered = [_offered(request) for request in provider.requests]
    assert offered == [["look"], ["look", "poke"], ["look"], ["look"]]
