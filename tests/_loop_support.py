"""The specs, tools and scripted-session helpers shared by the agent-loop tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
import yaml

import toolflow
from toolflow._loop import Agent, LoopResult
from toolflow._policy import Policy
from toolflow.default_plugins._scripted import ScriptedProvider, open_scripted

__all__ = ["SPEC", "Setup", "Tools", "call", "check_openai_history"]

SPEC = """\
toolflow: 1
toolsets:
  quiet:
    tools: [look, fail, say]
tools:
  look:
    description: Look around.
    parameters:
      type: object
      properties:
        where: {type: string, description: Where}
    implementation: t.look
  fail:
    description: Always fails.
    retry: false
    implementation: t.fail
  slow:
    description: Takes 10 s.
    timeout: 60s
    implementation: t.slow
  say:
    description: Say something; ends the loop.
    category: terminal
    parameters:
      type: object
      properties:
        message: {type: string, description: What}
      required: [message]
    template: "You say {{ message }}"
  shout:
    description: A failing terminal tool.
    category: terminal
    retry: false
    implementation: t.fail
  poke:
    description: Changes the world.
    category: dangerous
    implementation: t.poke
  notify:
    description: A custom category that needs approval.
    category: notify
    implementation: t.poke
"""


class Tools:
    """Implementations of SPEC that record their runs."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.finished: list[str] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def look(where: str = "here") -> str:
            self.runs.append("look")
            return f"you see {where}"

        async def fail() -> None:
            self.runs.append("fail")
            msg = "it broke"
            raise ValueError(msg)

        async def slow() -> str:
            self.runs.append("slow")
            await trio.sleep(10)
            self.finished.append("slow")
            return "done"

        async def poke() -> str:
            self.runs.append("poke")
            return "poked"

        for name, function in {"t.look": look, "t.fail": fail, "t.slow": slow, "t.poke": poke}.items():
            register(name, function)


class Setup:
    """Registry, plugins and tools of SPEC in a temporary directory."""

    def __init__(self, tmp_path: Path, policy: str = "") -> None:
        spec = tmp_path / "tools.yaml"
        spec.write_text(SPEC + policy, encoding="utf-8")
        self.tmp_path = tmp_path
        self.tools = Tools()
        self.plugins = toolflow.load_plugins(entry_points=False)
        self.plugins.register(self.tools, "test-tools")
        specs = toolflow.load_specs([spec], kinds=self.plugins.kind_schemas())
        assert specs.ok, [d.render() for d in specs.diagnostics]
        self.registry = toolflow.Registry.build(specs, self.plugins)
        self.policy = Policy.from_specs(specs)

    def transcript(self, turns: Sequence[Any], name: str = "session.yaml") -> ScriptedProvider:
        path = self.tmp_path / name
        path.write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
        return open_scripted(str(path), record_requests=True)

    async def run(
        self,
        turns: Sequence[Any],
        *,
        format: str = "openai",  # noqa: A002
        policy: Policy | None = None,
        prompt: str = "go",
        **options: Any,
    ) -> tuple[LoopResult, ScriptedProvider]:
        provider = self.transcript(turns)
        async with toolflow.open_engine(self.registry, plugins=self.plugins) as engine:
            agent = Agent(engine, provider, policy=policy or self.policy, format=format, **options)
            result = await agent.run(prompt)
        return result, provider


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def check_openai_history(messages: tuple[Mapping[str, Any], ...]) -> None:
    """Every assistant tool call is answered by exactly one tool message, before the next assistant turn."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "assistant":
            assert not pending, f"unanswered tool calls {pending}"
            pending = [c["id"] for c in message.get("tool_calls") or []]
        elif message["role"] == "tool":
            assert message["tool_call_id"] in pending, message
            pending.remove(message["tool_call_id"])
        else:
            assert not pending, f"unanswered tool calls {pending} before a {message['role']} message"
    assert not pending, f"unanswered tool calls {pending}"
