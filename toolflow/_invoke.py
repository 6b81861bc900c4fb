"""Run one call of a registered tool: validate, dispatch under its timeout, normalise, with the call hooks.

:func:`invoke` runs the engine's own call steps (:mod:`toolflow._attempts`) for one tool,
without what needs an engine's lifetime: one attempt, no caches, no gates, no concurrency
limits. ``toolflow call`` and the agent loop use :func:`~toolflow._executor.open_engine`;
``invoke`` is for tests and tools that want the bare call.
"""

from __future__ import annotations

from toolflow._attempts import CallHookWarning, call_once
from toolflow._plugins import Plugins
from toolflow._registry import RegisteredTool
from toolflow._results import ToolResult

__all__ = ["CallHookWarning", "invoke"]


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
    implementations run in a worker thread so that they do not block trio
    (a cancelled call abandons the thread). The call runs under the tool's
    ``timeout``, as in an engine: at the deadline it is cancelled (a sync
    implementation's thread is abandoned) and the result is the failure
    ``timed out after 30s``. An implementation that declares a ``ctx`` parameter
    receives a :class:`~toolflow._context.CallContext` (attempt 1, with the deadline).

    These are the steps :meth:`toolflow.Engine.call` runs, minus what belongs to an
    engine: the spec's ``retry``, ``cache`` and ``concurrency`` are not applied,
    ``depends_on``, allowlists and approval are not checked, and the result has no
    ``attempts`` key. Use :func:`~toolflow._executor.open_engine` for all of those.

    With *plugins*, their call hooks take part: ``toolflow_before_call`` sees
    the validated call, ``toolflow_wrap_call`` context managers are entered
    around the implementation (the first registered outermost), and
    ``toolflow_after_call`` sees every result. A hook that raises is reported
    with a :class:`CallHookWarning` naming its plugin and never fails the call;
    a wrapper that raises while entering or leaving fails the call, as
    middleware such as authentication must be able to.
    """
    return await call_once(tool, arguments, plugins=plugins, call_id=call_id)
