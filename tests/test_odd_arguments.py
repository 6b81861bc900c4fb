"""Odd arguments from the Python API are a failure result naming them, never an exception.

JSON has only string keys, so only a caller of ``Engine.call`` or ``toolflow.invoke`` can send
another: an integer longer than Python writes in digits, or an object whose ``repr()`` raises,
made the refusal's own message raise (``Engine.call``) or be lost to "Could not be checked"
(``toolflow.invoke``, whose validator shows values with ``toolflow._checking.show``). The engine's
refusal now writes the key as ``json_text`` does, and ``show`` never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import toolflow

SPEC = """\
toolflow: 1
tools:
  echo:
    description: Say which arguments it was given.
    parameters:
      type: object
      properties:
        n: {description: Anything}
    implementation: odd.echo
"""


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no text")

    __str__ = __repr__


class _Tools:
    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        register("odd.echo", lambda **arguments: sorted(arguments))


KEYS: dict[str, tuple[object, str]] = {
    "an integer": (1, "1"),
    "a long integer": (10**5000, '"<an integer of about 5,001 digits>"'),
    "an unprintable object": (_Unprintable(), '"<_Unprintable object>"'),
    "a tuple": ((1, 2), "[1,2]"),
}
"""Each odd key, and how the refusal writes it."""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins]:
    """The registry of SPEC with its plugin."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(_Tools(), "odd-tools")
    return toolflow.load_registry([spec], plugins=plugins), plugins


@pytest.mark.parametrize("case", sorted(KEYS))
async def test_engine_call_and_invoke_refuse_an_odd_key_by_name(
    setup: tuple[toolflow.Registry, toolflow.Plugins], case: str
) -> None:
    """The failure says the key is not a string, written as text, through Engine.call and toolflow.invoke."""
    registry, plugins = setup
    key, shown = KEYS[case]
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            called = await engine.call("echo", {key: 1, "n": 2})
        invoked = await toolflow.invoke(registry.get("echo"), {key: 1, "n": 2}, plugins=plugins)
    assert called.error == f"Error: Argument names must be strings, got {shown}"
    assert "Parameter names must be strings" in (invoked.error or "")
