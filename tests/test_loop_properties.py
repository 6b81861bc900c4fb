"""History integrity, property-tested: whatever ends the loop, every tool call has exactly one result.

Random transcripts (calls of quick, failing, slow, dangerous, terminal, unknown and approval-needing
tools; provider errors; malformed output; calls with repeated or missing ids) run under a random
policy and approver (yes, no, raising, never answering), with results asking to restart the turn
(issue 20) and a stop, a kill or a cancellation
from outside at a random moment, in the OpenAI and Anthropic formats, whose providers reject
orphaned tool calls and results that answer ids the assistant message does not have.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.strategies as st
import trio
import trio.testing
import yaml
from _loop_support import Setup

import toolflow
from toolflow._loop import Agent
from toolflow._policy import Policy
from toolflow.default_plugins._scripted import open_scripted

_CALL = st.sampled_from(["look", "fail", "slow", "poke", "say", "shout", "nope", "notify", "recheck"]).map(
    lambda name: {"name": name, "arguments": {}}
)
_TURN = st.one_of(
    st.fixed_dictionaries(
        {
            "tool_calls": st.lists(_CALL, max_size=4),
            "usage": st.fixed_dictionaries({"prompt_tokens": st.integers(0, 1200)}),
        }
    ),
    st.just({"error": {"message": "overloaded", "status": 503}}),
    st.just({"error": {"message": "bad request", "status": 400}}),
    st.just({"text": "the answer"}),
)
_MALFORMED = {
    "openai": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "bad_1", "type": "function", "function": {"name": "look", "arguments": "{oops"}}],
    },
    "anthropic": {"role": "assistant", "content": [{"type": "tool_use", "id": "bad_1", "name": "", "input": {}}]},
}
_LOOK = {"type": "function", "function": {"name": "look", "arguments": "{}"}}
_ODD_IDS = {  # ids that parsing renames (repeated) or invents (missing)
    "openai": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "dup", **_LOOK}, {"id": "dup", **_LOOK}, _LOOK, {"id": "call_2", **_LOOK}],
    },
    "anthropic": {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "dup", "name": "look", "input": {}},
            {"type": "tool_use", "id": "dup", "name": "notify", "input": {}},
            {"type": "tool_use", "name": "look", "input": {}},
        ],
    },
}
# A tool whose result asks to restart the turn (issue 20, section 3): the turn leaves the history.
_RECHECK = """\
  recheck:
    description: Asks to restart the turn.
    template:
      source: '{"success": true, "data": "checked", "restart": {"context": "look again"}}'
      output: json
"""
_ACTION = st.one_of(st.none(), st.tuples(st.sampled_from(["stop", "kill", "cancel"]), st.floats(0, 30)))


class ApprovalDownError(Exception):
    """The approver's failure: the engine refuses the call (approval fails closed) and warns."""


def _check(messages: tuple[Mapping[str, Any], ...], fmt: str) -> int:
    """Assert that every call is answered once, before the model speaks again; return the number of calls."""
    pending: list[str] = []
    calls = 0
    for message in messages:
        if fmt == "openai":
            if message["role"] == "assistant":
                assert not pending, pending
                pending = [c["id"] for c in message.get("tool_calls") or []]
                calls += len(pending)
            elif message["role"] == "tool":
                assert message["tool_call_id"] in pending, (message, pending)
                pending.remove(message["tool_call_id"])
            else:
                assert not pending, pending
        else:
            content = message["content"]
            blocks = content if isinstance(content, list) else []
            if message["role"] == "assistant":
                assert not pending, pending
                pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
                calls += len(pending)
            else:
                answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
                assert sorted(answered) == sorted(pending), (answered, pending)
                pending = []
    assert not pending, pending
    return calls


@hypothesis.settings(max_examples=150, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(
    turns=st.lists(st.one_of(_TURN, st.sampled_from(["malformed", "odd_ids"])), min_size=1, max_size=6),
    fmt=st.sampled_from(["openai", "anthropic"]),
    max_iterations=st.integers(1, 6),
    max_errors=st.integers(1, 4),
    action=_ACTION,
    approval=st.sampled_from(["yes", "no", "raise", "never"]),
    max_restarts=st.integers(0, 2),
)
def test_every_tool_call_gets_exactly_one_result(
    tmp_path_factory: Any,
    turns: list[Any],
    fmt: str,
    max_iterations: int,
    max_errors: int,
    action: tuple[str, float] | None,
    approval: str,
    max_restarts: int,
) -> None:
    """Whatever ends the loop (answer, terminal, caps, tokens, stop, kill, provider error, cancellation, restarts), the history is whole."""
    tmp_path: Path = tmp_path_factory.mktemp("loop")
    setup = Setup(tmp_path, _RECHECK)
    verbatim = {"malformed": _MALFORMED[fmt], "odd_ids": _ODD_IDS[fmt]}
    script = [{"message": verbatim[turn]} if isinstance(turn, str) else turn for turn in turns]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"turns": script}), encoding="utf-8")
    policy = Policy.from_mapping(
        {
            "max_iterations": max_iterations,
            "max_consecutive_errors": max_errors,
            "tokens": {"context_window": 1000},
            "categories": {"notify": {"approval": True}},
            "max_restarts": max_restarts,
        },
        base=setup.policy,
    )

    async def approve(call: toolflow.ToolCall, category: str) -> bool:
        if approval == "raise":
            raise ApprovalDownError
        if approval == "never":
            await trio.sleep(20)
        return approval == "yes"

    async def main() -> None:
        provider = open_scripted(str(tmp_path / "t.yaml"), record_requests=True)
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            agent = Agent(engine, provider, policy=policy, format=fmt, approve=approve)

            async def act() -> None:
                if action is not None and action[0] != "cancel":
                    await trio.sleep(action[1])
                    agent.request_stop() if action[0] == "stop" else agent.kill()

            result = None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(act)
                with trio.move_on_after(action[1] if action is not None and action[0] == "cancel" else math.inf):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", toolflow.ApprovalWarning)
                        result = await agent.run("go")
                nursery.cancel_scope.cancel()
        calls = _check(agent.messages, fmt)
        if result is None:  # run() was cancelled: the history is whole all the same
            return
        assert result.messages == agent.messages
        restarted = [turn for turn in result.turns if turn.decision.reason == "restart"]
        assert len(restarted) <= max_restarts
        # A restarted turn's calls ran, but neither they nor their results are in the history.
        assert calls == sum(len(turn.entries) for turn in result.turns if turn not in restarted)
        assert len(result.turns) <= max_iterations + 1
        if action is None:
            assert result.reason not in {"stopped", "killed"}
        elif result.reason == "killed":
            assert action[0] == "kill"
            cancelled = [e for t in result.turns for e in t.entries if e.result.extra.get("status") == "cancelled"]
            assert all(not e.success for e in cancelled)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
