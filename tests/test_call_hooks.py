"""The call hooks (before, after, wrap) as `toolflow.invoke` and the engine run them, with real plugins.

`toolflow.invoke` runs the engine's own call steps, minus what belongs to an engine (timeout,
retries, caches): both runners must give the same hooks and the same results.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import toolflow
from toolflow import CallHookWarning, hookimpl, invoke, load_plugins, load_registry, open_engine

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


def _setup(tmp_path: Path, *plugins: object, spec_text: str = SPEC) -> tuple[toolflow.Registry, toolflow.Plugins]:
    spec = tmp_path / "math.yaml"
    spec.write_text(spec_text, encoding="utf-8")
    loaded = load_plugins(entry_points=False)
    for index, plugin in enumerate(plugins):
        loaded.register(plugin, f"plugin{index}")
    return load_registry([spec], plugins=loaded), loaded


Run = Callable[[toolflow.Registry, toolflow.Plugins, str, object], Awaitable[toolflow.ToolResult]]


async def _through_invoke(
    registry: toolflow.Registry, plugins: toolflow.Plugins, name: str, arguments: object
) -> toolflow.ToolResult:
    return await invoke(registry.get(name), arguments, plugins=plugins)


async def _through_engine(
    registry: toolflow.Registry, plugins: toolflow.Plugins, name: str, arguments: object
) -> toolflow.ToolResult:
    async with open_engine(registry, plugins=plugins) as engine:
        return await engine.call(name, arguments)


@pytest.fixture(params=[_through_invoke, _through_engine], ids=["invoke", "engine"])
def run(request: pytest.FixtureRequest) -> Run:
    """One call through `toolflow.invoke` or through `Engine.call`."""
    return request.param  # type: ignore[no-any-return]


async def test_hooks_run_around_the_call_in_registration_order(tmp_path: Path, run: Run) -> None:
    """before, wraps (first registered outermost), the call, then after; arguments are the validated ones."""
    log: list[str] = []
    registry, plugins = _setup(tmp_path, Recorder("first", log), Recorder("second", log))
    result = await run(registry, plugins, "add", {"a": "2", "b": 3})
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


async def test_invalid_arguments_skip_before_and_wrap_but_reach_after(tmp_path: Path, run: Run) -> None:
    """A call rejected by validation never runs, so only after_call sees it (as a failure)."""
    log: list[str] = []
    registry, plugins = _setup(tmp_path, Recorder("first", log))
    result = await run(registry, plugins, "add", {"a": 1})
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


async def test_a_raising_observer_warns_and_a_refusing_wrapper_fails_the_call(tmp_path: Path, run: Run) -> None:
    """An observer's exception is a warning naming its plugin; a wrapper's exception is the call's failure."""
    log: list[str] = []
    registry, plugins = _setup(tmp_path, Recorder("first", log), Broken())
    with pytest.warns(CallHookWarning, match="toolflow_before_call of plugin 'plugin1' raised RuntimeError"):
        result = await run(registry, plugins, "add", {"a": 1, "b": 2})
    assert (result.success, result.error) == (False, "Error: tool 'add' raised PermissionError: not allowed")
    assert log[-1] == "first after False None"


# --- invoke and the engine: one implementation of the call steps --------------------------------

ENGINE_SPEC = """\
toolflow: 1
tools:
  slow:
    description: Takes 5 s, with a 1 s timeout.
    timeout: 1s
    implementation: e.slow
  flaky:
    description: Fails once with a connection error, then succeeds.
    retry: {attempts: 2, initial: 1s, jitter: false}
    implementation: e.flaky
  counted:
    description: Counts its runs; session-cached.
    cache: {scope: session}
    implementation: e.counted
  echo:
    description: Echoes its text.
    parameters:
      type: object
      properties:
        text: {type: string, description: Text}
        times: {type: integer, description: Repeats}
      required: [text]
    implementation: e.echo
  boom:
    description: Raises.
    implementation: e.boom
  result_dict:
    description: Returns a result dictionary with extra keys.
    implementation: e.result_dict
  missing:
    description: Bound to a module that does not exist.
    implementation: e.missing
"""


class Engineish:
    """The implementations of ENGINE_SPEC, counting their runs."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def _count(self, name: str) -> int:
        self.runs[name] = self.runs.get(name, 0) + 1
        return self.runs[name]

    @hookimpl
    def toolflow_register_implementations(self, register: Any) -> None:
        async def slow() -> str:
            await trio.sleep(5)
            return "done"

        async def flaky() -> str:
            if self._count("flaky") == 1:
                msg = "connection reset by peer"
                raise ConnectionError(msg)
            return "ok"

        async def counted() -> int:
            return self._count("counted")

        async def echo(text: str, times: int = 1) -> str:
            return text * times

        async def boom() -> None:
            msg = "bad input shape"
            raise ValueError(msg)

        async def result_dict() -> dict[str, Any]:
            return {"success": True, "data": [1], "warnings": "careful", "source": "e"}

        register("e.slow", slow)
        register("e.flaky", flaky)
        register("e.counted", counted)
        register("e.echo", echo)
        register("e.boom", boom)
        register("e.result_dict", result_dict)
        register("e.missing", "toolflow_no_such_module:thing")


async def test_invoke_applies_the_timeout_but_no_retries_or_cache(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """invoke runs one attempt under the spec's timeout, without retries or cache, and adds no `attempts` key."""
    tools = Engineish()
    registry, plugins = _setup(tmp_path, tools, spec_text=ENGINE_SPEC)
    started = trio.current_time()
    slow = await invoke(registry.get("slow"), {}, plugins=plugins)
    assert trio.current_time() - started == pytest.approx(1.0)  # cut at the 1 s timeout, not after 5 s
    flaky = await invoke(registry.get("flaky"), {}, plugins=plugins)
    counted = [await invoke(registry.get("counted"), {}, plugins=plugins) for _ in range(2)]
    assert (slow.success, slow.error, dict(slow.extra)) == (False, "Error: tool 'slow' timed out after 1s", {})
    assert (flaky.success, flaky.error) == (
        False,
        "Error: tool 'flaky' raised ConnectionError: connection reset by peer",
    )
    assert [result.data for result in counted] == [1, 2]
    tools.runs.clear()
    async with open_engine(registry, plugins=plugins) as engine:
        timed_out = await engine.call("slow", {})
        retried = await engine.call("flaky", {})
        cached = [await engine.call("counted", {}) for _ in range(2)]
    assert timed_out.error == "Error: tool 'slow' timed out after 1s"
    assert (retried.success, retried.extra["attempts"]) == (True, 2)
    assert [result.data for result in cached] == [1, 1]


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("echo", {"text": "ab", "times": "2"}),  # coerced, with a warning
        ("echo", {"text": "ab", "tmes": 2}),  # an unknown key dropped, with a warning
        ("echo", {"times": 2}),  # invalid
        ("echo", ["not", "an", "object"]),  # invalid
        ("boom", {}),
        ("result_dict", {}),
        ("missing", {}),
    ],
)
async def test_invoke_and_the_engine_give_the_same_result(tmp_path: Path, name: str, arguments: object) -> None:
    """Outside what belongs to an engine (the `attempts` key), invoke's result is the engine's."""
    tools = Engineish()
    registry, plugins = _setup(tmp_path, tools, spec_text=ENGINE_SPEC)
    invoked = await invoke(registry.get(name), arguments, plugins=plugins)
    async with open_engine(registry, plugins=plugins) as engine:
        called = await engine.call(name, arguments)
    assert "attempts" not in invoked.extra
    if name == "missing":
        assert "cannot import 'toolflow_no_such_module:thing'" in (invoked.error or "")
    engine_view = called.to_dict()
    engine_view.pop("attempts", None)
    assert invoked.to_dict() == engine_view
