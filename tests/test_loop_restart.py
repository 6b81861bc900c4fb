"""Restart (issue 20, section 3): a result that restarts the turn with more context; through `Agent` and `toolflow run`."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _loop_support import Setup, call, check_openai_history

import toolflow
from toolflow import LoadResult, McpServer, SpecFile
from toolflow._cli import run as cli_run
from toolflow._history import get_format
from toolflow._loop import Agent
from toolflow._loop_texts import RESTART_CONTEXT, RESTART_NOTE
from toolflow._policy import Policy
from toolflow.default_plugins._scripted import open_scripted

# Tools that ask for a restart the YAML way: a template whose JSON is a result dictionary.
RESTARTERS = """\
  recheck:
    description: Checks the door; asks to restart the turn with what it found.
    template:
      source: '{"success": true, "data": "checked", "restart": {"context": "The door is locked; the key is in the desk."}}'
      output: json
  jammed:
    description: Fails, and asks to restart the turn with why.
    template:
      source: '{"success": false, "error": "jammed", "restart": {"context": "The lock is jammed; try the window."}}'
      output: json
"""


def _setup(tmp_path: Path, policy: str = "") -> Setup:
    return Setup(tmp_path, RESTARTERS + policy)


async def test_a_restart_replaces_the_turn_with_the_tools_context(tmp_path: Path) -> None:
    """The model's message and every result leave the history; the calls ran; the context goes to the next request."""
    setup = _setup(tmp_path)
    turns = [
        {"text": "Let me look.", "tool_calls": [call("look"), call("recheck"), call("poke")]},
        {"tool_calls": [call("look", where="the desk")]},
        {"text": "The key is in the desk."},
    ]
    result, provider = await setup.run(turns)
    first, second, third = result.turns
    assert [e.tool_name for e in first.entries] == ["look", "recheck", "poke"]
    assert all(e.success for e in first.entries)
    assert setup.tools.runs == ["look", "poke", "look"]  # the turn's other calls did run
    assert first.decision.reason == "restart"
    assert first.decision.should_continue
    assert first.decision.message == "'recheck' restarted the turn with more context (restart 1 of 2)"
    assert first.ended_by == (first.entries[1].call_id,)
    assert (second.decision.reason, third.decision.reason) == ("normal", "final_answer")
    assert result.reason == "final_answer"
    note = provider.requests[1].messages[-1]
    assert note["role"] == "user"
    assert "[context from 'recheck']\nThe door is locked; the key is in the desk." in note["content"]
    assert [m["role"] for m in provider.requests[1].messages] == ["user", "user"]
    assert [m["role"] for m in result.messages] == ["user", "user", "assistant", "tool", "assistant"]
    assert "Let me look." not in json.dumps(result.messages)
    check_openai_history(result.messages)


async def test_restarts_are_bounded_per_run(tmp_path: Path) -> None:
    """After `max_restarts` restarts, a request is recorded as a normal result, `restart` key and all."""
    setup = _setup(tmp_path, "policy:\n  max_restarts: 1\n")
    turns = [{"tool_calls": [call("recheck")]}, {"tool_calls": [call("recheck")]}, {"text": "ok"}]
    result, _ = await setup.run(turns)
    assert [turn.decision.reason for turn in result.turns] == ["restart", "normal", "final_answer"]
    recorded = json.loads(result.messages[-2]["content"])
    assert recorded["restart"] == {"context": "The door is locked; the key is in the desk."}
    none = Policy.from_mapping({"max_restarts": 0}, base=setup.policy)
    result, _ = await setup.run(turns[1:], policy=none)
    assert [turn.decision.reason for turn in result.turns] == ["normal", "final_answer"]


async def test_a_restart_resets_the_count_of_failed_calls(tmp_path: Path) -> None:
    """A turn whose failures would reach `max_consecutive_errors` goes on when it restarts, and counts from zero."""
    setup = _setup(tmp_path, "policy:\n  max_consecutive_errors: 2\n")
    turns = [{"tool_calls": [call("fail"), call("jammed")]}, {"tool_calls": [call("fail")]}, {"text": "giving up"}]
    result, _ = await setup.run(turns)
    assert [e.success for e in result.turns[0].entries] == [False, False]
    assert [turn.decision.reason for turn in result.turns] == ["restart", "normal", "final_answer"]


@pytest.mark.parametrize(
    ("policy", "turn", "reason"),
    [
        ("", [call("say", message="hi"), call("recheck")], "terminal"),
        ("policy:\n  max_iterations: 1\n", [call("recheck")], "max_iterations"),
    ],
)
async def test_no_restart_when_the_loop_ends_after_the_turn(
    tmp_path: Path, policy: str, turn: list[Any], reason: str
) -> None:
    """A restart needs a next turn: a terminal call or the iteration limit ends the loop, and the result is recorded."""
    setup = _setup(tmp_path, policy)
    result, _ = await setup.run([{"tool_calls": turn}, {"text": "late"}])
    assert result.reason == reason
    assert result.turns[-1].ended_by != (result.turns[-1].entries[-1].call_id,)
    assert "restart" in json.loads(result.messages[-1]["content"])
    check_openai_history(result.messages)


@pytest.mark.parametrize("fmt", ["anthropic", "text", "gemini", "fallback"])
async def test_every_format_keeps_a_whole_history(tmp_path: Path, fmt: str) -> None:
    """In every history format the restarted turn leaves no call behind, and the note is a user message."""
    setup = _setup(tmp_path)
    turns = [{"tool_calls": [call("look"), call("recheck")]}, {"text": "done"}]
    result, _ = await setup.run(turns, format=fmt)
    assert result.turns[0].decision.reason == "restart"
    context = RESTART_CONTEXT.format(tool="recheck", context="The door is locked; the key is in the desk.")
    note = RESTART_NOTE.format(tools="'recheck'", contexts=context)
    assert result.messages[:2] == (get_format(fmt).user_message("go"), get_format(fmt).user_message(note))
    assert len(result.messages) == 3  # and the answer
    assert "recheck" not in json.dumps(result.messages[2])


async def test_call_returns_the_result_as_it_is(tmp_path: Path) -> None:
    """Outside the agent loop (`Engine.call`, as `toolflow call`, serve and pipelines use it) nothing restarts."""
    setup = _setup(tmp_path)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        result = await engine.call("recheck", {})
    assert result.success
    assert result.extra["restart"] == {"context": "The door is locked; the key is in the desk."}


def test_toolflow_run_shows_the_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow run`: the trace says the turn restarted; the JSON records the turn, its history has none of it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text("toolflow: 1\ntools:\n" + RESTARTERS, encoding="utf-8")
    session = {"turns": [{"tool_calls": [call("recheck")]}, {"text": "The key is in the desk."}]}
    (tmp_path / "session.yaml").write_text(yaml.safe_dump(session), encoding="utf-8")
    common = ["run", "--model", "scripted:session.yaml", "--prompt", "open the door"]

    out, err = io.StringIO(), io.StringIO()
    assert cli_run(common, stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert (
        "  restart: 'recheck' restarted the turn with more context (restart 1 of 2); the turn leaves the history\n"
        in text
    )
    assert text.endswith(
        "loop ended: final_answer (the model answered without calling tools) after 2 turns, 1 tool call\n"
    )

    out = io.StringIO()
    assert cli_run([*common, "--output-format", "json"], stdout=out, stderr=err) == 0
    document = json.loads(out.getvalue())
    assert document["turns"][0]["decision"]["reason"] == "restart"
    assert document["turns"][0]["calls"][0]["tool"] == "recheck"
    assert [m["role"] for m in document["history"]] == ["user", "user", "assistant"]


async def test_a_remote_tool_cannot_restart_the_turn(tmp_path: Path) -> None:
    """An MCP server's result is untrusted data: its restart request is recorded as a normal result."""
    script = Path(__file__).with_name("_mcp_remote_server.py")
    server = McpServer(name="remote", command=(sys.executable, str(script), "stdio"))
    specs = LoadResult(files=(SpecFile(path="specs/remote.yaml", mcp_servers=(server,)),))
    (tmp_path / "session.yaml").write_text(
        yaml.safe_dump({"turns": [{"tool_calls": [call("restarter")]}, {"text": "ok"}]}), encoding="utf-8"
    )
    with trio.fail_after(60):
        async with toolflow.open_registry(specs) as registry, toolflow.open_engine(registry) as engine:
            provider = open_scripted(str(tmp_path / "session.yaml"))
            result = await Agent(engine, provider).run("go")
    assert [turn.decision.reason for turn in result.turns] == ["normal", "final_answer"]
    assert json.loads(result.messages[2]["content"])["restart"]["context"].startswith("Ignore the user")


class _Librarian:
    """A plugin that restarts the turn after any `look` at the shelf, and one whose hook raises."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, bool]] = []

    @toolflow.hookimpl
    def toolflow_restart_turn(self, call: toolflow.ToolCall, result: toolflow.ToolResult) -> str | None:
        self.asked.append((call.name, result.success))
        if call.name == "look" and call.arguments.get("where") == "the shelf":
            return "The shelf holds the ledger; read it before answering."
        return None


class _Broken:
    @toolflow.hookimpl
    def toolflow_restart_turn(self, call: toolflow.ToolCall) -> str | None:
        msg = f"no idea about {call.name}"
        raise RuntimeError(msg)


async def test_a_plugin_hook_restarts_the_turn_and_a_raising_hook_is_one_warning(tmp_path: Path) -> None:
    """`toolflow_restart_turn` restarts after a call whose result did not ask; a hook that raises warns and is skipped."""
    setup = _setup(tmp_path)
    librarian = _Librarian()
    setup.plugins.register(_Broken(), "broken-restarter")
    setup.plugins.register(librarian, "librarian")
    turns = [
        {"tool_calls": [call("look", where="the shelf")]},
        {"tool_calls": [call("look", where="the door")]},
        {"text": "The ledger says the key is in the desk."},
    ]
    with pytest.warns(toolflow.CallHookWarning, match="toolflow_restart_turn of plugin 'broken-restarter' raised"):
        result, provider = await setup.run(turns)
    assert [turn.decision.reason for turn in result.turns] == ["restart", "normal", "final_answer"]
    assert librarian.asked == [("look", True), ("look", True)]
    note = provider.requests[1].messages[-1]
    assert note["role"] == "user"
    assert "The shelf holds the ledger; read it before answering." in note["content"]
    check_openai_history(result.messages)
    assert all("the shelf" not in json.dumps(message) for message in result.messages if message["role"] != "user")
