"""What a tool raises reaches every door as a failure result, however odd the exception.

An exception whose ``__str__`` raises, or whose message is an integer longer than Python writes
in digits; ``SystemExit`` (a library's ``sys.exit()``), ``GeneratorExit``, a ``BaseException``
subclass of the plugin's own, a ``KeyboardInterrupt`` raised by a sync tool in its worker
thread (no signal arrives there); a ``retry_after`` too long for a float. Each is the tool's
failure, written with ``toolflow._errors.error_text``, through ``toolflow call``, ``toolflow
run``, ``toolflow serve`` over stdio, a pipeline's step, ``Engine.call`` and ``toolflow.invoke``;
and a plugin's hook that raises such an exception is still a warning, not a crash.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _cli_project import plugin_project
from _cli_project import toolflow as toolflow_in_process
from _mcp_project import serve_argv
from mcp import ClientSession, StdioServerParameters, stdio_client, types

import toolflow
from toolflow._errors import error_text
from toolflow._retrying import retry_after_seconds

SPECS = """\
toolflow: 1
tools:
  raiser:
    description: Raise an odd exception.
    category: terminal
    retry: {attempts: 1}
    parameters:
      type: object
      properties:
        kind: {type: string, description: Which exception}
      required: [kind]
    implementation: odd.raiser
  retried:
    description: Raise an odd exception, or fail asking for an odd wait; retried.
    category: terminal
    retry: {attempts: 2, initial: 0.001, max: 0.001}
    parameters:
      type: object
      properties:
        kind: {type: string, description: Which exception}
      required: [kind]
    implementation: odd.raiser
  piped:
    description: A pipeline whose step raises.
    category: terminal
    parameters:
      type: object
      properties:
        kind: {type: string, description: Which exception}
      required: [kind]
    pipeline:
      steps:
        first:
          tool: raiser
          with: {kind: "{{ kind }}"}
"""

PLUGIN = """\
import toolflow


class Unwritable(Exception):
    def __str__(self):
        raise RuntimeError("no text")


class Own(BaseException):
    pass


def raiser(kind):
    if kind == "unwritable":
        raise Unwritable()
    if kind == "long":
        raise ValueError(10**5000)
    if kind == "exit":
        raise SystemExit(2)
    if kind == "generator":
        raise GeneratorExit
    if kind == "own":
        raise Own("the plugin's own")
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "wait":
        return {"success": False, "error": "busy", "retry_after": 10**400}
    if kind == "wait_raised":
        error = ConnectionError("busy")
        error.retry_after = 10**400
        raise error
    return "fine"


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("odd.raiser", raiser)
"""

RAISED = {
    "unwritable": "raised Unwritable: <a message that cannot be written as text>",
    "long": "raised ValueError: <a message that cannot be written as text>",
    "exit": "raised SystemExit: 2",
    "generator": "raised GeneratorExit",
    "own": "raised Own: the plugin's own",
    "interrupt": "raised KeyboardInterrupt",
}
"""What the failure of each kind says after ``Error: tool 'raiser' ``."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The spec and its plugin in a project that is the working directory."""
    with plugin_project(tmp_path, monkeypatch, specs=SPECS, module="odd_raisers", plugin=PLUGIN) as path:
        yield path


def _registry(project: Path) -> tuple[toolflow.Registry, toolflow.Plugins]:
    import odd_raisers  # type: ignore[import-not-found]  # the fixture writes it

    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(odd_raisers, "odd_raisers")
    return toolflow.load_registry([project / "specs"], plugins=plugins), plugins


# --- error_text -----------------------------------------------------------------------------


class _UnwritableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (ValueError("bad"), "ValueError: bad"),
        (ValueError(), "ValueError"),
        (_UnwritableError(), "_UnwritableError: <a message that cannot be written as text>"),
        (ValueError(10**5000), "ValueError: <a message that cannot be written as text>"),
        (SystemExit(3), "SystemExit: 3"),
    ],
)
def test_error_text_writes_any_exception(error: BaseException, text: str) -> None:
    """error_text is 'TypeName: message', the type alone without a message, a note when str() fails."""
    assert error_text(error) == text


def test_a_retry_after_too_long_for_a_float_is_capped() -> None:
    """An integer retry_after past a float's range is the longest wait, not an OverflowError."""
    assert retry_after_seconds(10**400) == 86_400.0
    assert retry_after_seconds(-(10**400)) is None


# --- the doors ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(RAISED))
def test_toolflow_call_fails_the_call_for_each_odd_exception(project: Path, kind: str) -> None:
    """`toolflow call` prints the failure naming the exception and exits 1, with no traceback."""
    code, out, err = toolflow_in_process("call", "raiser", json.dumps({"kind": kind}))
    assert code == 1, err
    assert json.loads(out)["error"] == f"Error: tool 'raiser' {RAISED[kind]}"
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", ["unwritable", "wait", "wait_raised"])
def test_toolflow_call_decides_retries_of_odd_failures(project: Path, kind: str) -> None:
    """A retried tool's unwritable exception or too-long retry_after ends in its failure after the decision."""
    code, out, err = toolflow_in_process("call", "retried", json.dumps({"kind": kind}))
    assert code == 1, err
    assert json.loads(out)["success"] is False


def test_toolflow_call_fails_the_pipeline_whose_step_exits(project: Path) -> None:
    """A pipeline's step raising SystemExit fails the step and the pipeline, naming it."""
    code, out, err = toolflow_in_process("call", "piped", json.dumps({"kind": "exit"}))
    assert code == 1, err
    assert "step 'first' (raiser) failed: tool 'raiser' raised SystemExit: 2" in json.loads(out)["error"]


def test_toolflow_run_hands_the_model_each_failure(project: Path) -> None:
    """The loop writes each failure into the history; the turn's one success ends it as terminal."""
    kinds = [*sorted(RAISED)[:3], "fine", *sorted(RAISED)[3:]]  # a success between: at most 3 failures in a row
    session = {"prompt": "go", "turns": [{"tool_calls": [{"name": "raiser", "arguments": {"kind": k}} for k in kinds]}]}
    (project / "session.yaml").write_text(yaml.safe_dump(session), encoding="utf-8")
    code, out, err = toolflow_in_process("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert code == 0, out + err
    document = json.loads(out)
    assert document["reason"] == "terminal", document
    for text in RAISED.values():
        assert text in out


async def test_toolflow_serve_answers_each_odd_exception_and_lives_on(project: Path) -> None:
    """An MCP client's tools/call of each kind is an error result, and the server still answers afterwards."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv()[1:],
        cwd=project,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "odd_raisers", "PYTHONPATH": str(project)},
    )
    answers: dict[str, types.CallToolResult] = {}
    with trio.fail_after(60):
        with (project / "serve.log").open("a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for kind in [*RAISED, "fine"]:
                    answers[kind] = await session.call_tool("raiser", {"kind": kind})
    for kind, text in RAISED.items():
        assert answers[kind].is_error, answers[kind]
        shown = "".join(block.text for block in answers[kind].content if isinstance(block, types.TextContent))
        assert text in shown
    assert not answers["fine"].is_error


async def test_engine_call_and_invoke_return_each_failure(project: Path) -> None:
    """Engine.call and toolflow.invoke return the failure of each kind; nothing escapes."""
    registry, plugins = _registry(project)
    results: dict[str, Any] = {}
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            for kind in RAISED:
                results[kind] = await engine.call("raiser", {"kind": kind})
            for kind in ("wait", "wait_raised", "unwritable"):
                results[f"retried {kind}"] = await engine.call("retried", {"kind": kind})
        for kind in RAISED:
            results[f"invoked {kind}"] = await toolflow.invoke(registry.get("raiser"), {"kind": kind}, plugins=plugins)
    for kind, text in RAISED.items():
        assert results[kind].error == f"Error: tool 'raiser' {text}"
        assert results[f"invoked {kind}"].error == f"Error: tool 'raiser' {text}"
    assert results["retried wait"].extra["attempts"] == 1  # the wait is longer than a retry may wait
    assert results["retried wait_raised"].extra["attempts"] == 1
    unwritable = "Error: tool 'retried' raised Unwritable: <a message that cannot be written as text>"
    assert results["retried unwritable"].error == unwritable


class _UnwritableHooks:
    """A plugin whose after_call hook raises an exception whose message cannot be written."""

    @toolflow.hookimpl
    def toolflow_after_call(self, call: Any, result: Any) -> None:
        raise _UnwritableError


async def test_a_hook_raising_an_unwritable_exception_is_a_warning(project: Path) -> None:
    """The call's result comes back and the hook's failure is a CallHookWarning naming the exception."""
    registry, plugins = _registry(project)
    plugins.register(_UnwritableHooks(), "unwritable-hooks")
    with trio.fail_after(30), pytest.warns(toolflow.CallHookWarning, match="raised _UnwritableError: <a message"):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("raiser", {"kind": "fine"})
    assert result.data == "fine"


# --- a plugin's kind or cache backend raising one ----------------------------------------------

KIND_SPEC = """\
toolflow: 1
tools:
  fetched:
    description: Fetch a thing with the plugin's kind.
    category: terminal
    cache: {scope: persistent, ttl: 60}
    parameters: {type: object, properties: {}}
    odd: anything
"""


class _OddPlugin:
    """A plugin whose kind cannot build a tool, or whose cache backend cannot open, with an unwritable message."""

    def __init__(self, *, kind_builds: bool) -> None:
        self.kind_builds = kind_builds

    def _build(self, spec: Any) -> Any:
        if not self.kind_builds:
            raise _UnwritableError

        async def run() -> str:
            return "fetched"

        return run

    def _open(self, **options: Any) -> Any:
        raise _UnwritableError

    @toolflow.hookimpl
    def toolflow_register_kinds(self, register: Any) -> None:
        register(toolflow.ImplementationKind(name="odd", schema={"type": "string"}, build=self._build))

    @toolflow.hookimpl
    def toolflow_register_cache_backends(self, register: Any) -> None:
        register("odd", self._open)


def _kind_registry(tmp_path: Path, *, kind_builds: bool) -> tuple[toolflow.Registry, toolflow.Plugins]:
    (tmp_path / "kind.yaml").write_text(KIND_SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(_OddPlugin(kind_builds=kind_builds), "odd-plugin")
    return toolflow.load_registry([tmp_path / "kind.yaml"], plugins=plugins), plugins


async def test_a_kind_that_cannot_build_with_an_unwritable_message_fails_the_call(tmp_path: Path) -> None:
    """Engine.call and toolflow.invoke return the failure naming the kind, with the note for its message."""
    registry, plugins = _kind_registry(tmp_path, kind_builds=False)
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            called = await engine.call("fetched", {})
        invoked = await toolflow.invoke(registry.get("fetched"), {}, plugins=plugins)
    expected = (
        "Error: the 'odd' kind of plugin 'odd-plugin' cannot build tool 'fetched': "
        "<a message that cannot be written as text>"
    )
    assert called.error == expected
    assert invoked.error == expected


async def test_a_cache_backend_that_cannot_open_with_an_unwritable_message_is_a_warning(tmp_path: Path) -> None:
    """The call runs without the cache, and the CacheWarning names the backend with the note for its message."""
    registry, plugins = _kind_registry(tmp_path, kind_builds=True)
    with trio.fail_after(30), pytest.warns(toolflow.CacheWarning, match="failed to open: <a message that cannot"):
        async with toolflow.open_engine(registry, plugins=plugins, cache_backend="odd") as engine:
            result = await engine.call("fetched", {})
    assert result.data == "fetched"
