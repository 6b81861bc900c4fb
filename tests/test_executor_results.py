"""The engine's results: normalised, counted, read-only; waiting calls keep their order."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import toolflow
from toolflow._executor import open_engine

SPEC = """\
toolflow: 1
tools:
  nap:
    description: Sleeps, then says which call it was.
    parameters:
      type: object
      properties:
        tag: {type: string, description: Which call}
        delay: {type: number, description: Seconds}
      required: [tag]
    implementation: f.nap
  plain:
    description: Returns what it is given, as its data.
    parameters:
      type: object
      properties:
        kind: {type: string, description: What to return}
      required: [kind]
    implementation: f.plain
"""

VALUES: dict[str, Any] = {
    "int": 3,
    "float": 1.5,
    "str": "text",
    "bool": False,
    "list": [1, "a"],
    "none": None,
    "dict": {"k": 1},
    "result_dict": {"success": True, "data": 1, "note": "kept"},
    "failure_dict": {"success": False},
}


class Tools:
    """The implementations of SPEC."""

    def __init__(self) -> None:
        self.order: list[str] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def nap(tag: str, delay: float = 1) -> str:
            self.order.append(tag)
            await trio.sleep(delay)
            return tag

        async def plain(kind: str) -> Any:
            return VALUES[kind]

        register("f.nap", nap)
        register("f.plain", plain)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Tools]:
    """The registry of SPEC with its plugin."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    tools = Tools()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(tools, "fast-tools")
    return toolflow.load_registry([spec], plugins=plugins), plugins, tools


@pytest.mark.parametrize("kind", sorted(VALUES))
async def test_results_are_the_normalised_ones_plus_attempts(
    setup: tuple[toolflow.Registry, toolflow.Plugins, Tools], kind: str
) -> None:
    """Whatever a tool returns, engine.call's result is ResultValidator.normalize's, plus `attempts`."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("plain", {"kind": kind})
    expected = registry.get("plain").result_validator.normalize(VALUES[kind])
    assert result.to_dict() == {**expected.to_dict(), "attempts": 1}


async def test_calls_waiting_for_a_slot_run_in_arrival_order(
    setup: tuple[toolflow.Registry, toolflow.Plugins, Tools], autojump_clock: trio.testing.MockClock
) -> None:
    """With one slot, waiting calls get it first come, first served; nobody jumps the queue."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins, max_concurrency=1) as engine, trio.open_nursery() as nursery:
        for tag in "abcde":
            nursery.start_soon(functools.partial(engine.call, "nap", {"tag": tag}))
            await trio.sleep(0.1)  # a arrives first and holds the slot; then b, c, d, e queue in this order
    assert tools.order == list("abcde")
    assert trio.current_time() == pytest.approx(5.0)


async def test_result_extras_stay_read_only(setup: tuple[toolflow.Registry, toolflow.Plugins, Tools]) -> None:
    """The extra keys of a result, `attempts` included, cannot be changed by whoever receives it."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        plain = await engine.call("plain", {"kind": "int"})
        with_extra = await engine.call("plain", {"kind": "result_dict"})
    for result in (plain, with_extra):
        with pytest.raises(TypeError):
            result.extra["attempts"] = 5  # type: ignore[index]
    assert dict(with_extra.extra) == {"note": "kept", "attempts": 1}
