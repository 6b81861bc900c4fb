"""SIGTERM, SIGINT and SIGHUP for the commands that run tools: stop, then kill after a grace period.

``toolflow call``, ``toolflow run`` and ``toolflow serve`` answer signals alike, as a container
platform means them: the first signal *stops* (no new work starts; the calls in flight may
finish), and the calls still running when the grace period is over, or when a second signal
arrives, are *killed* (cancelled: a ``command`` tool's process group is killed and the program
reaped before the command goes on). What stopping and killing mean is each command's own; this
module only decides when, with one :func:`trio.open_signal_receiver`.

Imported only by the commands that run tools, so ``toolflow --help`` and ``toolflow lint`` never
import trio.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import AsyncIterator, Callable
from signal import Signals
from typing import TextIO

import attrs
import trio

from toolflow._model import duration_setting
from toolflow._results import ToolResult

__all__ = ["DEFAULT_GRACE", "SIGNALS", "Interrupts", "open_signal_watch", "parse_grace", "watch_signals"]

DEFAULT_GRACE = 10.0
"""Seconds the calls in flight may run on after the first signal (``--shutdown-grace``)."""

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals that stop a command: a platform's stop, Ctrl-C, and the terminal going away."""


def parse_grace(value: object, *, where: str) -> float:
    """The grace period *value* in seconds: a duration (``500ms``, ``10s``, ``1m``), a number, or 0.

    Raises:
        UsageError: *value* is not a duration or is negative; the message names *where* it was set.
    """
    if value in (0, "0") and not isinstance(value, bool):
        return 0.0
    return duration_setting(value, where=where)


@attrs.define(kw_only=True)
class Interrupts:
    """What the signals did to one command.

    Attributes:
        grace: Seconds between the stop and the kill.
        signal: The first signal received, if any.
        second: The second signal, when one came before the grace period was over.
    """

    grace: float = DEFAULT_GRACE
    signal: Signals | None = None
    second: Signals | None = None

    @property
    def exit_code(self) -> int | None:
        """``128 + N`` for signal ``N`` (130 for Ctrl-C, 143 for SIGTERM), as a shell reports it; None without one."""
        return None if self.signal is None else 128 + int(self.signal)

    def grace_text(self) -> str:
        """The grace period for messages: ``10s``, ``1.5s``."""
        return f"{self.grace:g}s"

    def cancelled(self) -> ToolResult:
        """The result of a call killed by the signals: a ``cancelled`` failure saying what ended it."""
        name = self.signal.name if self.signal is not None else "a signal"
        ending = (
            f"the call did not finish within the grace period ({self.grace_text()})"
            if self.second is None
            else f"a second signal ({self.second.name}) killed the call"
        )
        return ToolResult.failure(
            f"Error: cancelled - toolflow was stopped ({name}) and {ending}", extra={"status": "cancelled"}
        )


async def watch_signals(
    interrupts: Interrupts,
    *,
    stop: Callable[[], None],
    kill: Callable[[], None],
    stderr: TextIO,
    stopping: str,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Call *stop* at the first of :data:`SIGNALS`, then *kill* after the grace period or at a second signal.

    Runs until cancelled: start it in a nursery with ``await nursery.start(...)`` (from then on
    SIGINT no longer raises ``KeyboardInterrupt``) and cancel it when the command's work is done.
    Signals after the kill are received and ignored, so a third Ctrl-C cannot cut the clean-up
    short. A signal the process was started with ignored stays ignored (``nohup`` ignores
    SIGHUP, a shell ignores SIGINT for a background job). Outside the main thread, where Python
    cannot receive signals, it only waits.

    Each step is one line on *stderr*: ``toolflow: SIGTERM: <stopping>``, then what killed the calls.
    """
    if threading.current_thread() is not threading.main_thread():
        task_status.started()
        await trio.sleep_forever()
    watched = [number for number in SIGNALS if signal.getsignal(number) is not signal.SIG_IGN]
    with trio.open_signal_receiver(*watched) as signals:
        task_status.started()
        received = Signals(await signals.__anext__())
        interrupts.signal = received
        print(f"toolflow: {received.name}: {stopping}", file=stderr, flush=True)
        stop()
        with trio.move_on_after(interrupts.grace):
            interrupts.second = Signals(await signals.__anext__())
        if interrupts.second is None:
            ending = f"the grace period ({interrupts.grace_text()}) is over"
        else:
            ending = f"{interrupts.second.name} again"
        print(f"toolflow: {ending}: killing the calls in flight", file=stderr, flush=True)
        kill()
        async for _ in signals:
            pass


@contextlib.asynccontextmanager
async def open_signal_watch(
    interrupts: Interrupts, *, stop: Callable[[], None], kill: Callable[[], None], stderr: TextIO, stopping: str
) -> AsyncIterator[None]:
    """Run the body with :func:`watch_signals` watching; the watch ends with the body."""
    async with trio.open_nursery() as nursery:
        watch = functools.partial(watch_signals, interrupts, stop=stop, kill=kill, stderr=stderr, stopping=stopping)
        await nursery.start(watch)
        yield
        nursery.cancel_scope.cancel()
