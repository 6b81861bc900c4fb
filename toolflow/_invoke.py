"""Run one call of a registered tool: validate, dispatch under its timeout, normalise, with the call hooks.

:func:`invoke` runs the engine's own call steps (:mod:`toolflow._attempts`) for one tool,
without what needs an engine's lifetime: one attempt, no caches, no gates, no concurrency
limits. ``toolflow call`` and the agent loop use :func:`~toolflow._executor.open_engine`;
``invoke`` is for tests and tools that want the bare call. A pipeline tool's steps are calls of
other tools: they run through a temporary engine over the registry the caller passes.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import trio

from toolflow._approval import Approvals
from toolflow._attempts import Attempts, CallHookWarning, Hooks, call_once, record
from toolflow._executor import open_engine
from toolflow._pipeline_plan import CompiledPipeline
from toolflow._pipelines import run_pipeline
from toolflow._plugins import Plugins
from toolflow._registry import RegisteredTool, Registry
from toolflow._results import ToolResult

__all__ = ["CallHookWarning", "invoke"]


async def invoke(
    tool: RegisteredTool,
    arguments: object,
    *,
    plugins: Plugins | None = None,
    call_id: str = "call_0",
    registry: Registry | None = None,
) -> ToolResult:
    """Validate *arguments*, run *tool* and return its normalised result.

    Invalid arguments, an implementation that cannot be imported and an
    implementation that raises all become failure results with a
    model-readable error; nothing but cancellation escapes. Sync
    implementations run in a worker thread so that they do not block trio
    (a cancelled call abandons the thread). The call runs under the tool's
    ``timeout``, as in an engine: at the deadline it is cancelled (a sync
    implementation's thread is abandoned) and the result is the failure
    ``timed out after 30s``. An implementation that declares a ``ctx`` parameter
    receives a :class:`~toolflow._context.CallContext` (attempt 1, with the deadline).

    These are the steps :meth:`toolflow.Engine.call` runs, minus what belongs to an
    engine: the spec's ``retry``, ``cache`` and ``concurrency`` are not applied,
    ``depends_on``, allowlists and the policy's approval are not checked, and the result has no
    ``attempts`` key. Use :func:`~toolflow._executor.open_engine` for all of those. The tool's
    own ``approval:`` (its spec's) is: the plugins' ``toolflow_approve_call``, then the request's
    asker (:func:`~toolflow.asking_approval`) decide, else the call is refused, as in an engine.

    With *plugins*, their call hooks take part: ``toolflow_before_call`` sees
    the validated call, ``toolflow_wrap_call`` context managers are entered
    around the implementation (the first registered outermost), and
    ``toolflow_after_call`` sees every result. A hook that raises is reported
    with a :class:`CallHookWarning` naming its plugin and never fails the call;
    a wrapper that raises while entering or leaving fails the call, as
    middleware such as authentication must be able to.

    A pipeline tool (``pipeline:``) runs under its timeout too, and its steps run through a
    temporary engine over *registry* (its gates, caches, retries and limits apply to the steps,
    for the length of this call); without *registry*, the result is a failure saying so.
    """
    approval = None if not tool.spec.approval else functools.partial(_approved, tool, plugins, call_id)
    if tool.pipeline is None:
        return await call_once(tool, arguments, plugins=plugins, call_id=call_id, approval=approval)
    return await _pipeline_once(tool, arguments, plugins=plugins, call_id=call_id, registry=registry, approval=approval)


async def _approved(
    tool: RegisteredTool, plugins: Plugins | None, call_id: str, cleaned: Mapping[str, Any]
) -> ToolResult | None:
    """``None`` when the tool's own approval lets the call run; else the result of the call not approved."""
    attempts = Attempts(
        Hooks(plugins), threads=trio.to_thread.current_default_thread_limiter(), slots=None, counted=False
    )
    answer = await Approvals(plugins, attempts).check(
        record(call_id, tool.name, cleaned), tool.spec, by_category=False, approve=None
    )
    return None if isinstance(answer, bool) else answer


async def _pipeline_once(
    tool: RegisteredTool,
    arguments: object,
    *,
    plugins: Plugins | None,
    call_id: str,
    registry: Registry | None,
    approval: Callable[[Mapping[str, Any]], Awaitable[ToolResult | None]] | None,
) -> ToolResult:
    """One call of a pipeline tool, its steps through a temporary engine over *registry*."""
    pipeline = cast("CompiledPipeline", tool.pipeline)

    async def steps(cleaned: Mapping[str, Any]) -> ToolResult:
        if registry is None:
            msg = f"tool {tool.name!r} is a pipeline: pass the registry of its steps (toolflow.invoke(..., registry=))"
            return ToolResult.failure(msg)
        async with open_engine(registry, plugins=plugins) as engine:
            return await run_pipeline(engine, tool.spec, pipeline, cleaned, call_id=call_id)

    return await call_once(tool, arguments, plugins=plugins, call_id=call_id, body=steps, approval=approval)
