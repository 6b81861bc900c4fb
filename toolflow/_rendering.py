"""Template workers: every template renders in a worker process, under its call's timeout and the per-render budget.

A rendering is synchronous Python that no cancel scope can interrupt, and a template can make it
as long or as large as it likes (``lipsum(n)``, ``{% for %}`` over ``range``, a string doubled in
a ``{% set %}``). So toolflow never renders in its own process: :func:`run_in_template_worker`
sends the job to a worker process of trio-parallel's cache, with

- the per-render budget: the worker's data memory may grow by at most
  ``toolflow._templates.template_budget()`` bytes during the job (``RLIMIT_DATA``, on Linux), and
  a job that needs more fails with a :class:`TemplateError` that says so;
- cancellation (a timeout, a kill): the worker is killed with ``SIGKILL`` and reaped before the
  cancellation goes on, so a looping template stops at once, output or not;
- no GIL shared with the server: a hostile template costs another session's call the CPU it
  takes, nothing more (docs/design.md, "Template isolation", has the numbers).

Workers are trio-parallel's default cache: spawned processes, reused across calls and across
``trio.run`` calls, retired after ten idle minutes; at most :data:`TEMPLATE_WORKERS` of them
render at once in one run. A worker imports only the modules of the job it runs (for the
built-in kinds, Jinja2 and ``toolflow._templates``), never trio.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import trio
import trio_parallel

from toolflow._templates import (
    CompiledTemplate,
    TemplateError,
    budget_text,
    render,
    render_each,
    run_job,
    template_budget,
)

__all__ = ["TEMPLATE_WORKERS", "render_each_template", "render_template", "run_in_template_worker"]

T = TypeVar("T")

TEMPLATE_WORKERS = 8
"""At most this many template workers render at once in one ``trio.run`` (the others wait for one)."""

_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("toolflow_template_workers")


def _limiter() -> trio.CapacityLimiter:
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(TEMPLATE_WORKERS)
        _LIMITER.set(limiter)
        return limiter


async def run_in_template_worker(function: Callable[..., T], /, *args: Any) -> T:
    """Run ``function(*args)`` in a template worker process and return its result.

    This is how a plugin kind renders its templates under toolflow's limits: *function* renders
    with :func:`toolflow.template_environment` (whose templates render nowhere else) and returns
    what the call needs. *function* and *args* go to the worker by pickling (a module-level
    function, plain data), and so does the result or the exception.

    Args:
        function: A picklable synchronous callable.
        *args: Its positional arguments.

    A job takes as long as the caller's cancel scopes allow: wrap the call in the tool's
    timeout (``with trio.move_on_after(spec.timeout)``), as the built-in kinds do.

    Raises:
        TemplateError: The job needed more memory than the per-render budget, its worker
            died, or the budget variable is set wrongly.
        trio.Cancelled: The caller was cancelled; the worker was killed first.
        Exception: Whatever *function* raised, or the error pickling its arguments.
    """
    budget = template_budget()
    try:
        result = await trio_parallel.run_sync(run_job, budget, function, args, kill_on_cancel=True, limiter=_limiter())
    except trio_parallel.BrokenWorkerError:
        # Killed from outside, or a crash in C code; the cache already dropped the worker.
        msg = f"the template worker stopped unexpectedly (the per-render budget is {budget_text(budget)})"
        raise TemplateError(msg) from None
    return cast("T", result)


async def render_template(template: CompiledTemplate, variables: Mapping[str, Any]) -> str:
    """Render *template* with *variables* in a template worker.

    A template without Jinja syntax is its own text, with no worker involved.

    Args:
        template: A template made by :func:`toolflow.compile_template`.
        variables: What the template sees (plain data: they are pickled to the worker).

    It takes as long as the caller's cancel scopes allow (see :func:`run_in_template_worker`).

    Raises:
        TemplateError: The rendering failed or passed the budget; the message is fit for a
            model and names no Python internals.
        trio.Cancelled: The caller was cancelled; the worker was killed first.
    """
    if template.constant is not None:
        return template.constant
    return await _run(render, template, dict(variables))


async def render_each_template(templates: Sequence[CompiledTemplate], variables: Mapping[str, Any]) -> list[str]:
    """Render each of *templates* with *variables*, in one job of a template worker.

    Raises:
        TemplateError: As :func:`render_template`; when a template failed, ``line`` is its index.
    """
    if all(template.constant is not None for template in templates):
        return [template.constant for template in templates if template.constant is not None]
    return await _run(render_each, list(templates), dict(variables))


async def _run(function: Callable[..., T], *args: Any) -> T:
    """:func:`run_in_template_worker` for toolflow's own jobs, which raise only :class:`TemplateError`."""
    try:
        return await run_in_template_worker(function, *args)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        # Only pickling the variables raises these: the jobs turn their own errors into TemplateError.
        msg = f"the template's variables cannot be sent to a template worker: {exc}"
        raise TemplateError(msg) from None
