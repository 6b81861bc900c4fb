"""Run one call of a registered tool: validate, dispatch, normalise.

This is the thin core that ``toolflow call`` uses; the executor (timeouts,
retries, caching, gating) is built around it.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import trio

from toolflow._plugins import PluginError
from toolflow._registry import RegisteredTool
from toolflow._results import ToolResult

__all__ = ["invoke"]


async def invoke(tool: RegisteredTool, arguments: object) -> ToolResult:
    """Validate *arguments*, run *tool* and return its normalised result.

    Invalid arguments, an implementation that cannot be imported and an
    implementation that raises all become failure results with a
    model-readable error; nothing but cancellation escapes. Sync
    implementations run in a worker thread so that they do not block trio.
    """
    validation = tool.validator.validate(arguments)
    if not validation.valid:
        return ToolResult.failure(validation.format_for_llm(tool.name), warnings=tuple(validation.warnings))
    try:
        implementation = tool.resolve()
    except PluginError as exc:
        return ToolResult.failure(str(exc), warnings=tuple(validation.warnings))
    call: Any = functools.partial(implementation, **validation.cleaned)
    try:
        value = await call() if tool.is_async else await trio.to_thread.run_sync(call)
    except Exception as exc:  # noqa: BLE001 - a failing tool is a result the model sees; Cancelled is not an Exception
        return ToolResult.failure(f"{type(exc).__name__}: {exc}", warnings=tuple(validation.warnings))
    result = tool.result_validator.normalize(value)
    if validation.warnings:
        result = attrs.evolve(result, warnings=(*validation.warnings, *result.warnings))
    return result
