"""What a tool raised: its failure, or an interruption that must go on (the attempt runner's rule).

Everything a tool raises is its failure, which the model reads as a result
(``Error: tool 'x' raised SystemExit: 2``): ``SystemExit`` (a library's ``sys.exit()``),
``GeneratorExit`` and a plugin's own ``BaseException`` subclasses included, none of which is
toolflow's business to act on. Two things are not the tool's: ``trio.Cancelled`` (a kill, a
caller's scope) and, from async code, ``KeyboardInterrupt``, which is how trio delivers a real
Ctrl-C to a program that does not receive SIGINT itself; those propagate, alone or in a group.
A sync tool runs in a worker thread, where no signal arrives, so whatever it raises there is its
own, ``KeyboardInterrupt`` too: :func:`sync_call` brings it out as a :class:`Thrown` value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio

__all__ = ["Thrown", "interrupts", "own_error", "sync_call"]

_INTERRUPTIONS = (trio.Cancelled, KeyboardInterrupt)


def interrupts(error: BaseException) -> bool:
    """Whether *error*, raised out of an attempt, propagates rather than being the tool's failure."""
    if isinstance(error, BaseExceptionGroup):
        return error.subgroup(_INTERRUPTIONS) is not None
    return isinstance(error, _INTERRUPTIONS)


def own_error(error: BaseException) -> BaseException:
    """*error*, raised out of an attempt, as the tool's failure; an interruption is raised on."""
    if interrupts(error):
        raise error
    return error


@attrs.frozen
class Thrown:
    """What a sync tool raised in its worker thread that would pass for an interruption there."""

    error: BaseException


def sync_call(function: Callable[[], Any]) -> Any:
    """*function*'s value, in a worker thread; what would pass for an interruption is returned as a :class:`Thrown`."""
    try:
        return function()
    except BaseException as exc:
        if interrupts(exc):
            return Thrown(exc)
        raise
