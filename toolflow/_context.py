"""The call context: what an implementation may know about the call it is running (issue 4, step 6).

An implementation that declares a parameter named ``ctx`` (positional-or-keyword or
keyword-only; ``**kwargs`` does not count) receives a :class:`CallContext` as the keyword
argument ``ctx``, one per attempt. Implementations without it are called exactly as before.
Whether an implementation wants the context is decided by :func:`wants_context`, which
inspects each callable once and caches the answer, so the engine's hot path does no
``inspect`` work.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable
from typing import Any

import attrs
import trio

__all__ = ["CONTEXT_PARAMETER", "CallContext", "wants_context"]

CONTEXT_PARAMETER = "ctx"
"""The name of the parameter through which an implementation receives its :class:`CallContext`."""


@attrs.frozen(kw_only=True)
class CallContext:
    """What one attempt of one call knows about itself, passed to implementations as ``ctx``.

    Attributes:
        call_id: The id of the call (the ``tool_call_id`` its result answers).
        tool: The name of the tool being run.
        attempt: Which attempt this is, from 1; a retry gets a new context.
        deadline: When the attempt times out, in trio time (``trio.current_time()``);
            ``math.inf`` when it has no timeout.
    """

    call_id: str
    tool: str
    attempt: int
    deadline: float
    _clock: trio.abc.Clock = attrs.field(alias="clock", repr=False, eq=False)

    @classmethod
    def current(cls, *, call_id: str, tool: str, attempt: int, deadline: float) -> CallContext:
        """Make a context for the running trio task's attempt (uses the run's clock)."""
        return cls(call_id=call_id, tool=tool, attempt=attempt, deadline=deadline, clock=trio.lowlevel.current_clock())

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
