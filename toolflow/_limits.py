"""Limits that hold across engines: a tool's ``rate_limit``, and its ``concurrency`` across a fleet (issue 19).

Both are kept by the engine's state backend (:class:`toolflow._state.Limits`), so they hold
across every engine that shares it: the process's (``toolflow serve``'s sessions share one
in-memory backend) or, with a Redis state, the fleet's.

- ``rate_limit`` (:meth:`ToolLimits.admit`): the engine asks once per call, after the cache
  look-up (a hit costs the downstream nothing and is not counted) and before the approval (nobody
  approves a call that would be refused). A call over the limit is not run: its result says when
  to try again (``status: rate_limited``, ``retry_after`` in seconds).
- ``concurrency`` with a shared backend (:meth:`ToolLimits.take`, :meth:`ToolLimits.hold`,
  :meth:`ToolLimits.give_back`): each attempt, once it has a slot of the engine's own limit, takes
  a lease of the tool's fleet-wide limit, waiting (polling, with back-off) while all are held. The
  lease expires after :data:`LEASE_TTL` seconds unless renewed, and it is renewed every third of
  that while the attempt runs, so a replica that dies (SIGKILL) holds its leases for at most
  :data:`LEASE_TTL` seconds, or the backend's ``lease_ttl`` (``state_from_url(url, lease_ttl=)``,
  which the commands take from ``TOOLFLOW_LEASE_TTL``). With an in-memory backend the engine's own
  slots are the limit.

The state unavailable (:class:`ConnectionError`): a rate limit does what its ``on_outage`` says
(``closed``, the default: the call is refused; ``open``: it runs uncounted); a lease too, with
the opposite default (``open``: the engine's own slots hold, so the per-replica limit; ``closed``:
the call is refused with ``status: unavailable``). Each is logged on
``toolflow.state``, once per outage of each kind.

Every backend operation runs in a worker thread (the Redis client is synchronous), as the
persistent cache's do (:mod:`toolflow._store_access`), and a kill ends any wait for one.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TypeVar

import outcome
import trio

from toolflow._attempts import KILLED, STOPPED, Attempts
from toolflow._model import ToolSpec, format_duration
from toolflow._results import ToolResult
from toolflow._state import LEASE_TTL, Limits

__all__ = ["LEASE_TTL", "FleetLimits", "ToolLimits", "off_loop"]

_POLL_FIRST = 0.02
_POLL_MAX = 0.2
"""How often a call waiting for a lease asks again: from 20 ms, doubling, to at most 200 ms. Cheap:
only the calls that hold a slot of their engine's own limit wait here, at most ``concurrency`` per
replica."""

logger = logging.getLogger("toolflow.state")

_T = TypeVar("_T")


class FleetLimits:
    """An engine's use of its state backend's limits (see the module's docstring).

    Args:
        state: The backend's limits.
        shared: Whether other processes share it (a tool's ``concurrency`` then takes leases).
        attempts: The engine's attempt runner, whose kill ends every wait here.
    """

    def __init__(self, state: Limits, *, shared: bool, attempts: Attempts) -> None:
        self.state = state
        self.attempts = attempts
        self._shared = shared
        # The backend's, which the process chose (the commands: TOOLFLOW_LEASE_TTL); a shared
        # backend that says nothing of it (a third party's) gets the default.
        self.lease_ttl: float = getattr(state, "lease_ttl", LEASE_TTL) if shared else LEASE_TTL
        self._limiter = trio.CapacityLimiter(16)  # worker threads for the backend, per engine
        self._down: set[str] = set()  # the kinds of operation failing now, each logged once

    def for_tool(self, spec: ToolSpec) -> ToolLimits | None:
        """The limits of *spec* kept by the backend, or ``None`` when it has none."""
        leased = spec.concurrency if self._shared else None
        if spec.rate_limit is None and leased is None:
            return None
        return ToolLimits(self, spec, leased)

    async def run(self, kind: str, operation: Callable[[], _T]) -> _T | None:
        """*operation* in a worker thread; ``None`` if the backend is unavailable (logged once per outage of *kind*).

        A kill ends the wait (the caller tells it by the kill count), and ``None`` is returned.
        """
        with self.attempts.guarded(trio.CancelScope(), stoppable=False):
            return await off_loop(operation, self._limiter, self._down, kind)
        return None


async def off_loop(operation: Callable[[], _T], limiter: trio.CapacityLimiter, down: set[str], kind: str) -> _T | None:
    """*operation* of a state backend in a worker thread; ``None`` if the backend is unavailable.

    An outage is logged on ``toolflow.state`` once per outage of *kind*: *down* holds the kinds
    failing now (the caller's own set). Cancellation abandons the thread (it finishes on its own).
    """
    try:
        value = await trio.to_thread.run_sync(operation, abandon_on_cancel=True, limiter=limiter)
    except ConnectionError as exc:
        if kind not in down:
            down.add(kind)
            logger.warning("the shared state is unavailable (%s): %s", kind, exc)
        return None
    down.discard(kind)
    return value


class ToolLimits:
    """One tool's limits kept by the state backend: its ``rate_limit``, and its ``concurrency`` as leases."""

    __slots__ = ("_fleet", "_leased", "_spec")

    def __init__(self, fleet: FleetLimits, spec: ToolSpec, leased: int | None) -> None:
        self._fleet = fleet
        self._spec = spec
        self._leased = leased

    @property
    def leases(self) -> bool:
        """Whether each attempt takes a lease (a ``concurrency`` with a shared backend)."""
        return self._leased is not None

    async def admit(self) -> ToolResult | None:
        """Count the call under the ``rate_limit``; ``None`` when it may run, else its result (or KILLED)."""
        limit = self._spec.rate_limit
        if limit is None:
            return None
        state, name = self._fleet.state, self._spec.name
        kills = self._fleet.attempts.kills
        admitted = await self._fleet.run("rate", lambda: state.admit_rate(name, limit.calls, limit.per))
        if self._fleet.attempts.kills != kills:
            return KILLED
        if admitted:
            return None
        rule = f"at most {limit.calls} call{'s' if limit.calls != 1 else ''} per {_period(limit.per)}"
        if admitted is None:
            if limit.on_outage == "open":
                return None
            return ToolResult.failure(
                f"Error: tool {name!r} is rate limited ({rule}) and its calls cannot be counted now; try again later",
                extra={"status": "rate_limited", "retry_after": None},
            )
        wait = await self._fleet.run("rate", lambda: state.rate_wait(name, limit.calls, limit.per))
        seconds = max(0.001, float(wait)) if wait is not None else limit.per
        return ToolResult.failure(
            f"Error: tool {name!r} is rate limited ({rule}); try again in {format_duration(_tenths(seconds))}",
            extra={"status": "rate_limited", "retry_after": round(seconds, 3)},
        )

    async def take(self, *, stoppable: bool) -> str | ToolResult:
        """A lease of the tool's fleet-wide ``concurrency`` (its holder's id), waiting while all are held.

        :data:`~toolflow._attempts.KILLED` or :data:`~toolflow._attempts.STOPPED` (no lease held)
        when a kill or, if *stoppable*, a stop ended the wait. The backend unavailable: as the
        spec's ``on_outage`` says, an empty holder (``open``: no lease; the engine's own slots
        hold) or the call's refusal (``closed``).
        """
        fleet, limit = self._fleet, int(self._leased or 1)
        holder, name, kills = secrets.token_hex(8), self._spec.name, fleet.attempts.kills
        poll = _POLL_FIRST
        while True:
            taken = await fleet.run("lease", lambda: fleet.state.acquire(name, limit, holder, fleet.lease_ttl))
            if fleet.attempts.kills != kills:
                await self.give_back(holder if taken else "")
                return KILLED
            if taken is None:
                return "" if self._spec.concurrency_on_outage == "open" else self._outage(limit)
            if taken:
                return holder
            with fleet.attempts.guarded(trio.CancelScope(), stoppable=stoppable):
                await trio.sleep(poll)
                poll = min(poll * 2, _POLL_MAX)
                continue
            return KILLED if fleet.attempts.kills != kills else STOPPED

    def _outage(self, limit: int) -> ToolResult:
        """The refusal of a call whose lease cannot be taken while the state is down (``on_outage: closed``)."""
        return ToolResult.failure(
            f"Error: tool {self._spec.name!r} may run at most {limit} at once across the fleet, and the"
            " fleet's leases cannot be taken now; try again later",
            extra={"status": "unavailable", "retry_after": None},
        )

    async def hold(self, work: Awaitable[_T], holder: str) -> _T:
        """Await *work* while renewing *holder*'s lease every third of its TTL; *work*'s value or exception.

        *work*'s outcome is captured inside the renewing nursery and returned or raised outside
        it, so that an exception reaches the caller as it was raised, never in an exception group.
        """
        if not holder:
            return await work
        captured: outcome.Outcome[_T] | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._renew, holder)
            captured = await outcome.acapture(_awaited, work)
            nursery.cancel_scope.cancel()
        return captured.unwrap()

    async def _renew(self, holder: str) -> None:
        fleet, limit, name = self._fleet, int(self._leased or 1), self._spec.name
        while True:
            await trio.sleep(fleet.lease_ttl / 3)
            await fleet.run("lease", lambda: fleet.state.acquire(name, limit, holder, fleet.lease_ttl))

    async def give_back(self, holder: str) -> None:
        """Release *holder*'s lease, shielded from cancellation and bounded (it expires anyway)."""
        if holder:
            fleet, name = self._fleet, self._spec.name
            with trio.CancelScope(shield=True, deadline=trio.current_time() + 5):
                await fleet.run("lease", lambda: fleet.state.release(name, holder))


def _period(seconds: float) -> str:
    """A rate limit's period as a spec would write it: ``1h``, ``1m``, else ``90s``."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.15g}{unit}"
    return format_duration(seconds)


def _tenths(seconds: float) -> float:
    """*seconds* rounded up to a tenth (a millisecond below one second), for the model to read."""
    step = 0.001 if seconds < 1 else 0.1
    return round(-(-seconds // step) * step, 3)


async def _awaited(work: Awaitable[_T]) -> _T:
    return await work
