"""The call context: what an implementation may know about the call it is running (issue 4, step 6).

An implementation that declares a parameter named ``ctx`` (positional-or-keyword or
keyword-only; ``**kwargs`` does not count) receives a :class:`CallContext` as the keyword
argument ``ctx``, one per attempt. Implementations without it are called exactly as before.
Whether an implementation wants the context is decided by :func:`wants_context`, which
inspects each callable once and caches the answer, so the engine's hot path does no
``inspect`` work.

Progress: :meth:`CallContext.report_progress` hands each report to the progress sink in force
where the call runs, set with :func:`reporting_progress` (``toolflow serve`` sets one per MCP
request that asked for progress). The sink lives in a :class:`contextvars.ContextVar`, which
reaches the engine's task and the worker threads of sync tools (``trio.to_thread`` copies the
context); a context captures the sink when it is made, so a report from a thread the
implementation starts itself still arrives. Without a sink a report does nothing.

The caller's context (issue 21): the JSON-like mapping of the application that makes the calls
(the user, the channel; in ``toolflow serve`` the authenticated principal), set with
:func:`providing_context` around the calls and read by :func:`current_context`. It lives in a
:class:`contextvars.ContextVar` like the progress sink, not on the engine: one engine serves
concurrent callers (``toolflow serve``'s requests), each with its own context, and the tasks
and worker threads of a call inherit their caller's. The engine fills a tool's parameters bound
under ``context:`` from it (``toolflow._bound``), and :attr:`CallContext.context` hands it to
implementations.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import attrs
import trio

__all__ = [
    "CONTEXT_PARAMETER",
    "CallContext",
    "ProgressSink",
    "current_context",
    "current_progress_sink",
    "providing_context",
    "reporting_progress",
    "wants_context",
]

CONTEXT_PARAMETER = "ctx"
"""The name of the parameter through which an implementation receives its :class:`CallContext`."""

ProgressSink: TypeAlias = Callable[[float, "float | None", "str | None"], None]
"""Receives ``(progress, total, message)`` reports; called from the trio thread or a worker thread."""

_progress_sink: contextvars.ContextVar[ProgressSink | None] = contextvars.ContextVar(
    "toolflow_progress_sink", default=None
)


_EMPTY: Mapping[str, Any] = MappingProxyType({})
_caller_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "toolflow_caller_context", default=_EMPTY
)


@contextlib.contextmanager
def providing_context(context: Mapping[str, Any] | None) -> Iterator[None]:
    """Make *context* the caller's context of the calls started inside the ``with`` block.

    Parameters a tool binds under ``context:`` are filled from it (and never from the model), and
    implementations that declare ``ctx`` read it as :attr:`CallContext.context`. ``None`` is the
    empty context. The mapping is not copied: do not change it while calls run.

    Raises:
        TypeError: *context* is not a mapping (nor ``None``).
    """
    if context is None:
        context = _EMPTY
    elif not isinstance(context, Mapping):
        msg = f"the caller's context must be a mapping (a JSON object), got {type(context).__name__!r}"
        raise TypeError(msg)
    token = _caller_context.set(context)
    try:
        yield
    finally:
        _caller_context.reset(token)


def current_context() -> Mapping[str, Any]:
    """The caller's context in force where the caller runs (empty when none was provided)."""
    return _caller_context.get()


@contextlib.contextmanager
def reporting_progress(sink: ProgressSink) -> Iterator[None]:
    """Send the progress reports of the calls started inside the ``with`` block to *sink*.

    *sink* must be safe to call from any thread, must not block and must not raise: sync
    implementations report from their worker thread, and a report may arrive after the call
    ended (from an abandoned thread).
    """
    token = _progress_sink.set(sink)
    try:
        yield
    finally:
        _progress_sink.reset(token)


def current_progress_sink() -> ProgressSink | None:
    """The progress sink in force where the caller runs (``None``: nobody listens)."""
    return _progress_sink.get()


@attrs.frozen(kw_only=True)
class CallContext:
    """What one attempt of one call knows about itself, passed to implementations as ``ctx``.

    Attributes:
        call_id: The id of the call (the ``tool_call_id`` its result answers).
        tool: The name of the tool being run.
        attempt: Which attempt this is, from 1; a retry gets a new context.
        deadline: When the attempt times out, in trio time (``trio.current_time()``);
            ``math.inf`` when it has no timeout.
        context: The caller's context (:func:`providing_context`: ``Agent(context=...)``,
            ``--context JSON``, the principal in ``toolflow serve``); empty when none was given.
    """

    call_id: str
    tool: str
    attempt: int
    deadline: float
    context: Mapping[str, Any] = attrs.field(default=_EMPTY, eq=False)
    _clock: trio.abc.Clock = attrs.field(alias="clock", repr=False, eq=False)
    _progress: ProgressSink | None = attrs.field(alias="progress", default=None, repr=False, eq=False)

    @classmethod
    def current(cls, *, call_id: str, tool: str, attempt: int, deadline: float) -> CallContext:
        """Make a context for the running trio task's attempt (its clock, and the progress sink in force)."""
        return cls(
            call_id=call_id,
            tool=tool,
            attempt=attempt,
            deadline=deadline,
            clock=trio.lowlevel.current_clock(),
            progress=_progress_sink.get(),
            context=_caller_context.get(),
        )

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report how far the call has got, for a caller that shows progress; a no-op when none listens.

        Call it from an async implementation or from a sync one's worker thread; it never blocks.
        ``toolflow serve`` sends each report to the MCP client as ``notifications/progress`` when
        the client asked for progress (a report that does not increase *progress* is dropped, as
        MCP requires progress to increase).

        Args:
            progress: The work done so far, in any unit (items, bytes, percent).
            total: The total amount of work in the same unit, when known.
            message: A short human-readable note on the current step.

        Raises:
            TypeError: *progress* or *total* is not a number.
            ValueError: *progress* or *total* is not finite.
        """
        done = _finite("progress", progress)
        whole = None if total is None else _finite("total", total)
        sink = self._progress
        if sink is not None:
            sink(done, whole, None if message is None else str(message))

    def time_left(self) -> float:
        """Seconds until :attr:`deadline` (never negative; ``math.inf`` without a timeout).

        Works in an async implementation and in a sync one running in its worker thread.
        """
        if math.isinf(self.deadline):
            return self.deadline
        return max(0.0, self.deadline - self._clock.current_time())

    @property
    def cancelled(self) -> bool:
        """Whether the call has been cancelled (timed out or killed) and should stop.

        In an async implementation this is the state of the task's cancel scopes; in a sync
        implementation's worker thread it asks trio whether the task that started the thread
        was cancelled (an abandoned thread sees ``True`` and should return soon).
        """
        try:
            return trio.current_effective_deadline() == -math.inf
        except RuntimeError:  # not in a trio task: a worker thread, or no trio at all
            pass
        try:
            trio.from_thread.check_cancelled()
        except trio.Cancelled:
            return True
        except RuntimeError:  # not a trio worker thread: nothing can cancel it
            return False
        return False

    async def checkpoint(self) -> None:
        """Raise :class:`trio.Cancelled` if the call was cancelled; otherwise return at once.

        Does not yield to the scheduler; use ``await trio.sleep(0)`` for that.
        """
        await trio.lowlevel.checkpoint_if_cancelled()


def _finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{name} must be a number, got {value!r}"
        raise TypeError(msg)
    if not math.isfinite(value):
        msg = f"{name} must be finite, got {value!r}"
        raise ValueError(msg)
    return float(value)


_lock = threading.Lock()
_wants: dict[int, tuple[Callable[..., Any], bool]] = {}


def wants_context(function: Callable[..., Any]) -> bool:
    """Whether *function* declares a ``ctx`` parameter that can be passed by keyword.

    Inspected once per callable and cached (the cache holds the callable, so its id is
    never reused). ``**kwargs`` alone does not count, and a callable whose signature cannot
    be read does not get the context.
    """
    entry = _wants.get(id(function))
    if entry is not None and entry[0] is function:
        return entry[1]
    wants = _inspect(function)
    with _lock:
        _wants[id(function)] = (function, wants)
    return wants


def _inspect(function: Callable[..., Any]) -> bool:
    try:
        parameter = inspect.signature(function).parameters.get(CONTEXT_PARAMETER)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )
