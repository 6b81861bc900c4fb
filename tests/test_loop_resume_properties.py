"""History integrity across deferred calls and saved runs (issue 21, section 3), property-tested.

Random transcripts call quick, slow, failing, terminal, unknown and deferred tools (a deferred tool and a
deferred category), a tool of a background category, and tools that need approval (deferred for approval, or approved at once), under random limits, with a stop or a kill at a random moment. Whenever a run
ends, its state goes through JSON to a new agent on a new engine (a new process, as far as the
loop can tell), which resumes it: with random results (successes and errors) for the calls it
waits for, or with a new user message. Whatever the sequence, every tool call of the final
history has exactly one result, in the OpenAI and Anthropic formats, whose providers reject
orphaned tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.strategies as st
import trio
import trio.testing
import yaml
from _background_support import notes
from _loop_support import Setup

import toolflow
from toolflow._loop import Agent, LoopResult
from toolflow._policy import Policy
from toolflow._run_state import SavedRun
from toolflow.default_plugins._scripted import open_scripted

_DEFERRED = """\
  ask:
    description: Asks a person.
    deferred: true
    implementation: t.poke
  review:
    description: Reviewed by a person.
    category: review
    implementation: t.poke
  later:
    description: Takes 10 s, in the background.
    category: later
    timeout: 60s
    implementation: t.slow
policy:
  categories:
    review: {deferred: true}
    notify: {approval: true}
    later: {background: true}
"""

_CALL = st.sampled_from(["look", "fail", "slow", "say", "nope", "ask", "review", "ask", "notify", "later"]).map(
    lambda name: {"name": name, "arguments": {}}
)
_TURN = st.one_of(
    st.fixed_dictionaries(
        {
            "tool_calls": st.lists(_CALL, max_size=4),
            "usage": st.fixed_dictionaries({"prompt_tokens": st.integers(0, 1200)}),
        }
    ),
    st.just({"text": "the answer"}),
)
_RESULT = st.one_of(st.just("fine"), st.just({"answer": 1}), st.just(toolflow.ToolResult.failure("no")))


def _check(messages: tuple[Mapping[str, Any], ...], fmt: str) -> None:
    """Every call is answered once, before the model speaks again."""
    pending: list[str] = []
    for message in messages:
        if fmt == "openai":
            if message["role"] == "tool":
                assert message["tool_call_id"] in pending, (message, pending)
                pending.remove(message["tool_call_id"])
                continue
            assert not pending, pending
            if message["role"] == "assistant":
                pending = [c["id"] for c in message.get("tool_calls") or []]
        else:
            blocks = message["content"] if isinstance(message["content"], list) else []
            if message["role"] == "assistant":
                assert not pending, pending
                pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            else:
                answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
                assert sorted(answered) == sorted(pending), (answered, pending)
                pending = []
    assert not pending, pending


def _check_tasks(messages: tuple[Mapping[str, Any], ...], fmt: str) -> None:
    """Every background call that started has its outcome noted exactly once, whatever stopped, saved or resumed it."""
    started = []
    for message in messages:
        contents = [message["content"]] if fmt == "openai" and message["role"] == "tool" else []
        if fmt == "anthropic" and isinstance(message["content"], list):
            contents = [b["content"] for b in message["content"] if b.get("type") == "tool_result"]
        for content in contents:
            data = json.loads(content if isinstance(content, str) else content[0]["text"]).get("data")
            if isinstance(data, dict) and data.get("status") == "started":
                started.append(data["task_id"])
    noted = [line.split(" ")[2] for line in notes(messages)]
    assert sorted(noted) == sorted(started), (noted, started)


@hypothesis.settings(max_examples=80, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(
    turns=st.lists(_TURN, min_size=1, max_size=8),
    fmt=st.sampled_from(["openai", "anthropic"]),
    max_iterations=st.integers(1, 5),
    action=st.one_of(st.none(), st.tuples(st.sampled_from(["stop", "kill"]), st.floats(0, 30))),
    defer=st.booleans(),
    data=st.data(),
)
def test_every_call_has_one_result_after_any_sequence_of_defer_save_and_resume(
    tmp_path_factory: Any,
    turns: list[Any],
    fmt: str,
    max_iterations: int,
    action: tuple[str, float] | None,
    defer: bool,
    data: st.DataObject,
) -> None:
    """Defer, save, load, resume (with results or a new message), again and again: the history stays whole."""
    tmp_path: Path = tmp_path_factory.mktemp("resume")
    setup = Setup(tmp_path, _DEFERRED)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    policy = Policy.from_mapping({"max_iterations": max_iterations}, base=setup.policy)

    async def segment(provider: Any, saved: SavedRun | None, first: bool) -> tuple[LoopResult, SavedRun]:
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            approve = toolflow.defer_approval if defer else (lambda call, category: True)
            agent = Agent(engine, provider, policy=policy, format=fmt, approve=approve)
            async with trio.open_nursery() as nursery:
                if first and action is not None:
                    kind, delay = action

                    async def act() -> None:
                        await trio.sleep(delay)
                        agent.request_stop() if kind == "stop" else agent.kill()

                    nursery.start_soon(act)
                if saved is None:
                    result = await agent.run("go")
                elif saved.pending:
                    results = {c.id: data.draw(st.booleans() if c.approval else _RESULT) for c in saved.pending}
                    result = await agent.resume(saved, results=results)
                else:
                    result = await agent.resume(saved, prompt="go on")
                nursery.cancel_scope.cancel()
            assert result.messages == agent.messages
            hypothesis.event(f"a run ended {result.reason}" + (" (resumed)" if saved is not None else ""))
            assert (result.reason == "deferred") == bool(result.pending)
            if not result.pending:
                _check(agent.messages, fmt)
            return result, SavedRun.from_json(agent.snapshot().to_json())

    async def main() -> None:
        with trio.fail_after(3600):  # virtual time: a loop that hangs fails at once
            await whole()

    async def whole() -> None:
        provider = open_scripted(str(tmp_path / "t.yaml"))
        result, saved = await segment(provider, None, first=True)
        for _ in range(6):
            if not result.pending and not data.draw(st.booleans()):
                break
            before = len(saved.history)
            result, saved = await segment(provider, saved, first=False)
            assert len(result.messages) >= before
        while result.pending:  # the application always answers in the end
            result, saved = await segment(provider, saved, first=False)
        _check(result.messages, fmt)
        _check_tasks(result.messages, fmt)
        hypothesis.note(f"runs: {setup.tools.runs}")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
