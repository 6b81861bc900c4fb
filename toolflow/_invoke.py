"""Run one call of a registered tool: validate, dispatch, normalise, with the call hooks.

This is the thin core that ``toolflow call`` uses; the executor (timeouts,
retries, caching, gating) is built around it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Iterator
from typing import Any

import attrs
import trio

from toolflow._calls import ToolCall
from toolflow._context import CallContext, wants_context
from toolflow._plugins import PluginError, Plugins
from toolflow._registry import RegisteredTool
from toolflow._results import ToolResult

__all__ = ["CallHookWarning", "invoke"]


class CallHookWarning(UserWarning):
    """A plugin's call hook raised; the call went on without it."""


async def invoke(
    tool: RegisteredTool,
    arguments: object,
    *,
    plugins: Plugins | None = None,
    call_id: str = "call_0",
) -> ToolResult:
    """Validate *arguments*, run *tool* and return its normalised result.

    Invalid arguments, an implementation that cannot be imported and an
    implementation that raises all become failure results with a
    model-readable error; nothing but cancellation escapes. Sync
    implementations run in a worker thread so that they do not block trio.
    An implementation that declares a ``ctx`` parameter receives a
    :class:`~toolflow._context.CallContext` (attempt 1, no deadline).

    With *plugins*, their call hooks take part: ``toolflow_before_call`` sees
    the validated call, ``toolflow_wrap_call`` context managers are entered
    around the implementation (the first registered outermost), and
    ``toolflow_after_call`` sees every result. A hook that raises is reported
    with a :class:`CallHookWarning` naming its plugin and never fails the call;
    a wrapper that raises while entering or leaving fails the call, as
    middleware such as authentication must be able to.
    """
    validation = tool.validator.validate(arguments)
    cleaned = dict(validation.cleaned) if validation.valid else dict(arguments) if isinstance(arguments, dict) else {}
    call = ToolCall(id=call_id, name=tool.name, arguments=cleaned, format="direct")
    result = await _run(tool, validation, call, plugins)
    if validation.warnings:
        result = attrs.evolve(result, warnings=(*validation.warnings, *result.warnings))
    if plugins is not None:
        _observe(plugins, "toolflow_after_call", call=call, result=result)
    return result


async def _run(tool: RegisteredTool, validation: Any, call: ToolCall, plugins: Plugins | None) -> ToolResult:
    if not validation.valid:
        return ToolResult.failure(validation.format_for_llm(tool.name))
    try:
        implementation = tool.resolve()
    except PluginError as exc:
        return ToolResult.failure(str(exc))
    if plugins is not None:
        _observe(plugins, "toolflow_before_call", call=call)
    function: Any = functools.partial(implementation, **validation.cleaned)
    if wants_context(implementation):  # one attempt, no timeout; the context wins over an argument named ctx
        context = CallContext.current(call_id=call.id, tool=tool.name, attempt=1, deadline=math.inf)
        function = functools.partial(function, ctx=context)
    try:
        async with contextlib.AsyncExitStack() as stack:
            for wrapper in _wrappers(plugins, call):
                await stack.enter_async_context(wrapper)
            value = await function() if tool.is_async else await trio.to_thread.run_sync(function)
    except Exception as exc:  # noqa: BLE001 - a failing tool is a result the model sees; Cancelled is not an Exception
        return ToolResult.failure(f"{type(exc).__name__}: {exc}")
    return tool.result_validator.normalize(value)


def _observe(plugins: Plugins, hook_name: str, **kwargs: Any) -> None:
    """Call every implementation of an observer hook, reporting (not raising) what fails."""
    for impl in getattr(plugins.manager.hook, hook_name).get_hookimpls():  # registration order
        try:
            impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:  # noqa: BLE001 - an observer must never fail the call
            message = f"{hook_name} of plugin {impl.plugin_name!r} raised {type(exc).__name__}: {exc}"
            warnings.warn(CallHookWarning(message), stacklevel=2)


def _wrappers(plugins: Plugins | None, call: ToolCall) -> Iterator[Any]:
    """The wrap_call context managers for *call*, first registered first (outermost)."""
    if plugins is None:
        return
    for impl in plugins.manager.hook.toolflow_wrap_call.get_hookimpls():  # registration order
        wrapper = impl.function(**{name: call for name in impl.argnames if name == "call"})
        if wrapper is not None:
            yield wrapper
