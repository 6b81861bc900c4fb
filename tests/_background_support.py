"""The specs, tools and helpers of the background-call tests (issue 21 section 1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing
import yaml

import toolflow
from toolflow._loop import Agent, LoopResult
from toolflow._policy import Policy
from toolflow.default_plugins._scripted import ScriptedProvider, open_scripted

__all__ = ["SPEC", "Setup", "call", "notes"]

SPEC = """\
toolflow: 1
tools:
  look:
    description: Look around.
    implementation: t.look
  wait:
    description: Takes a while, in the foreground.
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long}
    implementation: t.wait
  fail:
    description: Always fails.
    retry: false
    implementation: t.fail
  fetch:
    description: Fetches slowly, in the background.
    category: async_required
    timeout: 60s
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long}
        text: {type: string, description: What it returns}
      required: [seconds]
    implementation: t.fetch
  broken:
    description: Fails, in the background.
    category: async_required
    retry: false
    implementation: t.fail
  hurry:
    description: Times out, in the background.
    category: async_required
    timeout: 2s
    retry: false
    implementation: t.hang
  flaky:
    description: Fails once, then works, in the background.
    category: async_required
    retry: {attempts: 3, initial: 1s, on: [temporary]}
    idempotent: true
    implementation: t.flaky
  remember:
    description: Cached, in the background.
    category: async_required
    cache: {scope: session}
    parameters:
      type: object
      properties:
        key: {type: string, description: The key}
    implementation: t.remember
  mine:
    description: The user's own data, in the background.
    category: async_required
    context: {user_id: user.id}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: The user}
      required: [user_id]
    implementation: t.mine
  say:
    description: Say something; ends the loop.
    category: terminal
    parameters:
      type: object
      properties:
        message: {type: string, description: What}
      required: [message]
    implementation: t.say
policy:
  categories:
    async_required:
      background: true
"""


class Tools:
    """Implementations of SPEC that record what ran and what finished."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.finished: list[str] = []
        self.flaky_calls = 0

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def look() -> str:
            self.runs.append("look")
            return "a room"

        async def wait(seconds: float = 10) -> str:
            self.runs.append("wait")
            await trio.sleep(seconds)
            return f"waited {seconds:g}s"

        async def fail() -> None:
            self.runs.append("fail")
            msg = "it broke"
            raise ValueError(msg)

        async def fetch(seconds: float, text: str = "fetched") -> str:
            self.runs.append("fetch")
            await trio.sleep(seconds)
            self.finished.append("fetch")
            return text

        async def hang() -> None:
            self.runs.append("hang")
            await trio.sleep(3600)

        async def flaky() -> str:
            self.flaky_calls += 1
            if self.flaky_calls == 1:
                msg = "first attempt fails"
                raise ConnectionError(msg)
            return "worked"

        async def remember(key: str = "k") -> str:
            self.runs.append("remember")
            await trio.sleep(1)
            return f"value of {key}"

        async def say(message: str) -> str:
            return f"You say {message}"

        async def mine(user_id: str) -> str:
            await trio.sleep(1)
            return f"data of {user_id}"

        functions = {
            "t.look": look,
            "t.wait": wait,
            "t.fail": fail,
            "t.fetch": fetch,
            "t.hang": hang,
            "t.flaky": flaky,
            "t.remember": remember,
            "t.mine": mine,
            "t.say": say,
        }
        for name, function in functions.items():
            register(name, function)


class Setup:
    """Registry, plugins and tools of SPEC in a temporary directory: *tools* added, *policy* appended."""

    def __init__(self, tmp_path: Path, policy: str = "", *, tools: str = "") -> None:
        spec = tmp_path / "tools.yaml"
        spec.write_text(SPEC.replace("policy:\n", tools + "policy:\n") + policy, encoding="utf-8")
        self.tmp_path = tmp_path
        self.tools = Tools()
        self.plugins = toolflow.load_plugins(entry_points=False)
        self.plugins.register(self.tools, "test-tools")
        specs = toolflow.load_specs([spec], kinds=self.plugins.kind_schemas())
        assert specs.ok, [d.render() for d in specs.diagnostics]
        self.registry = toolflow.Registry.build(specs, self.plugins)
        self.policy = Policy.from_specs(specs)

    def transcript(self, turns: Sequence[Any]) -> ScriptedProvider:
        path = self.tmp_path / "session.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}), encoding="utf-8")
        return open_scripted(str(path), record_requests=True)

    def policy_with(self, **changes: Any) -> Policy:
        return Policy.from_mapping(changes, base=self.policy)

    async def run(
        self,
        turns: Sequence[Any],
        *,
        format: str = "openai",  # noqa: A002 - the Agent's argument
        policy: Policy | None = None,
        during: Callable[[Agent], Any] | None = None,
        clock: trio.testing.MockClock | None = None,
        **options: Any,
    ) -> tuple[LoopResult, ScriptedProvider, Agent]:
        """Run *turns* through an agent; *during* (given the agent) runs beside the loop.

        With a *clock* (``mock_clock``), the system prompt is written first (the text format
        renders it in a worker thread, which the mock clock must not time out), then the clock
        jumps whenever every task waits.
        """
        provider = self.transcript(turns)
        async with toolflow.open_engine(self.registry, plugins=self.plugins) as engine:
            agent = Agent(engine, provider, policy=policy or self.policy, format=format, **options)
            if clock is not None:
                await agent._write_system_prompts()  # in real time, before the clock jumps
                clock.autojump_threshold = 0
            async with trio.open_nursery() as nursery:
                if during is not None:
                    nursery.start_soon(during, agent)
                result = await agent.run("go")
                nursery.cancel_scope.cancel()
        return result, provider, agent


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def notes(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of every background note in *messages* (any format)."""
    found: list[str] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else []
        if isinstance(content, list):
            texts = [block.get("text", "") for block in content if isinstance(block, Mapping)]
        texts += [part.get("text", "") for part in message.get("parts", ()) if "text" in part]
        found.extend(line for text in texts for line in text.splitlines() if line.startswith("Background task "))
    return found
