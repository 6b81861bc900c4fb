"""The call hooks (before, after, wrap) as `toolflow.invoke` runs them, with real plugins."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import toolflow
from toolflow import CallHookWarning, hookimpl, invoke, load_plugins, load_registry

SPEC = """\
toolflow: 1
tools:
  add:
    description: Add two numbers.
    parameters:
      type: object
      properties:
        a: {type: integer, description: First}
        b: {type: integer, description: Second}
      required: [a, b]
    implementation: math.add
"""


class Recorder:
    """A plugin that binds math.add and records every call hook."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @hookimpl
    def toolflow_register_implementations(self, register: Any) -> None:
        if self.name == "first":
            register("math.add", lambda a, b: a + b)

    @hookimpl
    def toolflow_before_call(self, call: toolflow.ToolCall) -> None:
        self.log.append(f"{self.name} before {call.name} {dict(call.arguments)}")

    @hookimpl
    def toolflow_after_call(self, call: toolflow.ToolCall, result: toolflow.ToolResult) -> None:
        self.log.append(f"{self.name} after {result.success} {result.data}")

    @hookimpl
    def toolflow_wrap_call(self, call: toolflow.ToolCall) -> Any:
        @contextlib.asynccontextmanager
        async def wrapper() -> AsyncIterator[None]:
            self.log.append(f"{self.name} enter")
            yield
            self.log.append(f"{self.name} exit")

        return wrapper()


def _setup(tmp_path: Path, *plugins: object) -> tuple[toolflow.Registry, toolflow.Plugins]:
    spec = tmp_path / "math.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    loaded = load_plugins(entry_points=False)
    for index, plugin in enumerate(plugins):
        loaded.register(plugin, f"plugin{index}")
    return load_registry([spec], plugins=loaded), loaded


async def test_hooks_run_around_the_call_in_registration_order(tmp_path: Path) -> None:
    """before, wraps (first registered outermost), the call, then after; arguments are the validated ones."""
    log: list[str] = []
    registry, plugins = _setup(tmp_path, Recorder("first", log), Recorder("second", log))
    result = await invoke(registry.get("add"), {"a": "2", "b": 3}, plugins=plugins)
    assert (result.success, result.data) == (True, 5)
    assert log == [
        "first before add {'a': 2, 'b': 3}",
        "second before add {'a': 2, 'b': 3}",
        "first enter",
        "second enter",
        "second exit",
        "first exit",
        "first after True 5",
        "second after True 5",
    ]


async def test_invalid_arguments_skip_before_and_wrap_but_reach_after(tmp_path: Path) -> None:
    """A call rejected by validation never runs, so only after_call sees it (as a failure)."""
    log: list[str] = []
    registry, plugins = _setup(tmp_path, Recorder("first", log))
    result = await invoke(registry.get("add"), {"a": 1}, plugins=plugins)
    assert not result.success
    assert log == ["first after False None"]


class Broken:
    """Observers that raise, and a wrapper that refuses the call."""

    @hookimpl
    def toolflow_before_call(self, call: Any) -> None:
        raise RuntimeError("observer bug")

    @hookimpl
    def toolflow_wrap_call(self, call: Any) -> Any:
        @contextlib.asynccontextmanager
        async def deny() -> AsyncIterator[None]:
            raise PermissionError("not allowed")
            yield  # pragma: no cover

        return deny()


async def test_a_raising_observer_warns_and_a_refusing_wrapper_fails_the_call(tmp_path: Path) -> None:
    """An observer's exception is a warning naming its plugin; a wrapper's exception is the call's failure."""
    log: list[str] = []
    registry, plugins = _setup(tmp_path, Recorder("first", log), Broken())
    with pytest.warns(CallHookWarning, match="toolflow_before_call of plugin 'plugin1' raised RuntimeError"):
        result = await invoke(registry.get("add"), {"a": 1, "b": 2}, plugins=plugins)
    assert (result.success, result.error) == (False, "PermissionError: not allowed")
    assert log[-1] == "first after False None"
