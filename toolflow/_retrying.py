"""Retry schedule and retry decisions: pure maths and classification, no trio, no I/O, no sleeping.

The executor loops over attempts; this module tells it, after each failed attempt, whether the
failure may be retried (:func:`classify`) and how long to wait first (:func:`next_delay`).

Retries
=======

A tool's ``retry:`` block (defaults from seed 000) sets ``attempts`` (4, counting the first
call), ``initial`` (1 s), ``max`` (10 s), ``multiplier`` (2) and ``jitter`` (on). Before attempt
*n* + 1 the engine waits ``min(max, initial * multiplier ** (n - 1))`` seconds: 1 s, 2 s, 4 s
with the defaults. With ``jitter`` the wait is drawn uniformly between 0 and that value ("full
jitter"): seed 000 only says ``jitter: True``; full jitter spreads clients that failed together
best and never waits longer than the plain schedule, so ``max`` stays a true bound.

A failure is retried when it is one of the kinds named in ``retry.on`` (all five by default):

- ``timeout``: a :class:`TimeoutError` (the engine's own per-attempt timeout included);
- ``connection``: a :class:`ConnectionError` (refused, reset, aborted, broken pipe);
- ``network``: a name-resolution failure (:class:`socket.gaierror`, :class:`socket.herror`) or
  an :class:`OSError` whose errno says the network or host is down or unreachable;
- ``temporary``: any other :class:`OSError` (busy, interrupted, out of buffers or file handles,
  an I/O error, ...) except the permanent ones, which a retry cannot mend: a missing or existing
  file, a directory where a file was expected or the reverse, no permission, an invalid argument,
  a full or read-only disk, a name too long, an unsupported operation, a TLS failure;
- ``rate_limit``: no exception class, only the words below;
- ``module:Class``: instances of that exception class, imported on first use; an import that
  fails makes the entry match nothing and is logged once (logger ``toolflow.retry``).

Any enabled kind also matches by the words of seed 000 in the error text (the exception's class
name and message, or a failed result's ``error``), case-insensitively: ``timeout``/``timed out``,
``connection``, ``network``, ``temporary``/``temporarily``/``try again``, ``rate limit``/
``too many requests``.

A failed result decides for itself when it says so: ``"retryable": true`` retries,
``"retryable": false`` does not, whatever its text. A ``retry_after`` in the result (seconds, or
an HTTP ``Retry-After`` value) makes it retryable too, and the next wait is at least that long.
A server asking for more than :data:`RETRY_AFTER_CEILING` (60 s) is not retried: retrying sooner
than it allows only burns an attempt, and a tool call should not block a turn for minutes.

Never retried: errors that are not :class:`Exception` (``trio.Cancelled``, ``KeyboardInterrupt``,
``SystemExit``), and automatic retries of a ``dangerous`` tool unless it is ``idempotent: true``.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import errno
import functools
import importlib
import logging
import math
import random as _random
import re
import socket
import ssl
from collections.abc import Callable
from typing import Any

import attrs

from toolflow._errors import error_text
from toolflow._model import Category, RetryPolicy, ToolSpec
from toolflow._results import ToolResult

__all__ = [
    "MAX_RETRY_AFTER",
    "RETRY_AFTER_CEILING",
    "Decision",
    "backoff_delays",
    "classify",
    "may_retry_automatically",
    "next_delay",
    "retry_after_seconds",
]

logger = logging.getLogger("toolflow.retry")

MAX_RETRY_AFTER = 86_400.0
"""Largest ``Retry-After`` :func:`retry_after_seconds` returns (one day); larger values are cut to it.

Keeps absurd headers finite; anything above :data:`RETRY_AFTER_CEILING` stops retrying anyway.
"""

RETRY_AFTER_CEILING = 60.0
"""Longest wait :func:`next_delay` honours for a ``Retry-After``; a longer request is not retried."""

_NETWORK_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENETDOWN", "ENETUNREACH", "ENETRESET", "EHOSTDOWN", "EHOSTUNREACH")
    if hasattr(errno, name)
)

_PERMANENT_OS_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    ssl.SSLError,  # a certificate or TLS protocol failure: configuration, not luck
    ValueError,  # io.UnsupportedOperation is an OSError and a ValueError
)
_PERMANENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "E2BIG",
        "EBADF",
        "EDOM",
        "EINVAL",
        "ELOOP",
        "ENAMETOOLONG",
        "ENOEXEC",
        "ENOSPC",
        "ENOTEMPTY",
        "ENOTSUP",
        "ENOTTY",
        "EOPNOTSUPP",
        "ERANGE",
        "EROFS",
        "ESPIPE",
        "EXDEV",
    )
    if hasattr(errno, name)
)
"""OS errors a retry cannot mend (``temporary`` matches every other :class:`OSError`)."""

_KEYWORDS: dict[str, re.Pattern[str]] = {
    "timeout": re.compile(r"time[ _-]?out|timed[ _-]out", re.IGNORECASE),
    "connection": re.compile(r"connection", re.IGNORECASE),
    "network": re.compile(r"network", re.IGNORECASE),
    "temporary": re.compile(r"temporar(?:y|ily)|try again", re.IGNORECASE),
    "rate_limit": re.compile(r"rate[ _-]?limit|too many requests", re.IGNORECASE),
}
"""Seed 000's retryable words, per kind of ``retry.on``."""

_DELTA_SECONDS = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


@attrs.frozen(kw_only=True)
class Decision:
    """Whether one failure may be retried, and why.

    Attributes:
        retryable: The failure may be retried (attempts and the tool's category permitting).
        reason: Why, for traces and logs, e.g. ``"ConnectionError is a connection error"``.
        retry_after: Seconds the failure asked to wait before the next attempt, if it asked.
    """

    retryable: bool
    reason: str
    retry_after: float | None = None


def _ceiling(policy: RetryPolicy, failed_attempt: int) -> float:
    """The un-jittered wait after attempt *failed_attempt* (1-based)."""
    try:
        raw = policy.initial * policy.multiplier ** (failed_attempt - 1)
    except OverflowError:
        raw = math.inf
    return max(0.0, min(policy.max, raw))


def _delay(policy: RetryPolicy, failed_attempt: int, random: Callable[[], float]) -> float:
    top = _ceiling(policy, failed_attempt)
    return top * random() if policy.jitter else top


def backoff_delays(policy: RetryPolicy, *, random: Callable[[], float] = _random.random) -> list[float]:
    """Return the waits before attempts 2..``policy.attempts``, in seconds.

    Wait *n* is ``min(max, initial * multiplier ** (n - 1))``; with ``policy.jitter`` it is that
    value times ``random()`` (full jitter, uniform in ``[0, value)``). An ``attempts`` of 1 or
    less gives ``[]``.
    """
    return [_delay(policy, n, random) for n in range(1, policy.attempts)]


def retry_after_seconds(value: str | float | None, *, now: dt.datetime | None = None) -> float | None:
    """Return the seconds to wait from an HTTP ``Retry-After`` value, or ``None`` when it says nothing usable.

    *value* is delta-seconds (a number, or a string of digits, decimals tolerated) or an HTTP
    date (``Wed, 21 Oct 2015 07:28:00 GMT``), compared with *now* (default: the current UTC
    time). A date in the past gives ``0.0``; negative, non-finite, boolean or unreadable values
    give ``None``; results are capped at :data:`MAX_RETRY_AFTER`. Never raises.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        seconds = float(max(-1, min(value, int(MAX_RETRY_AFTER))))  # float() of a longer int overflows
    elif isinstance(value, float):
        seconds = value
    elif isinstance(value, str):
        text = value.strip()
        if _DELTA_SECONDS.fullmatch(text):
            seconds = float(text)
        else:
            until = _seconds_until(text, now)
            if until is None:
                return None
            seconds = until
    else:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


def _seconds_until(text: str, now: dt.datetime | None) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())


@functools.cache
def _import_class(entry: str) -> type[BaseException] | None:
    """The exception class ``module:Class`` names, or ``None`` (logged once per entry)."""
    module_name, _, attribute = entry.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except Exception as exc:  # noqa: BLE001 - any import failure disables the entry, reported once
        logger.warning("retry.on entry %r matches nothing: cannot import it (%s: %s)", entry, type(exc).__name__, exc)
        return None
    if not (isinstance(target, type) and issubclass(target, Exception)):
        logger.warning("retry.on entry %r matches nothing: %r is not an Exception subclass", entry, target)
        return None
    return target


def _is_network_error(error: Exception) -> bool:
    return isinstance(error, socket.gaierror | socket.herror) or (
        isinstance(error, OSError) and error.errno in _NETWORK_ERRNOS
    )


def _is_temporary_error(error: Exception) -> bool:
    return (
        isinstance(error, OSError)
        and not isinstance(error, _PERMANENT_OS_ERRORS)
        and error.errno not in _PERMANENT_ERRNOS
    )


_CLASS_KINDS: dict[str, tuple[Callable[[Exception], bool], str]] = {
    "timeout": (lambda error: isinstance(error, TimeoutError), "is a timeout"),
    "connection": (lambda error: isinstance(error, ConnectionError), "is a connection error"),
    "network": (_is_network_error, "is a network error"),
    "temporary": (_is_temporary_error, "is an operating-system error a retry may mend"),
}
"""The ``retry.on`` kinds matched by the error's class: the test, and what the reason says."""


def _class_match(kind: str, error: Exception) -> str | None:
    """The reason *error* is of *kind* by its class, or ``None``."""
    name = type(error).__name__
    known = _CLASS_KINDS.get(kind)
    if known is not None:
        matches, what = known
        return f"{name} {what}" if matches(error) else None
    if ":" in kind:
        cls = _import_class(kind)
        if cls is not None and isinstance(error, cls):
            return f"{name} matches retry.on entry {kind!r}"
    return None


def _keyword_match(on: tuple[str, ...], text: str) -> str | None:
    for kind in on:
        pattern = _KEYWORDS.get(kind)
        if pattern is not None and (match := pattern.search(text)):
            return f"the error mentions {match[0].lower()!r} ({kind})"
    return None


def classify(error: BaseException | ToolResult, policy: RetryPolicy, *, verdict: bool | None = None) -> Decision:
    """Decide whether *error* (an exception a tool raised, or the result it returned) may be retried.

    *verdict* is a plugin's answer from the ``toolflow_retryable`` hook, when one decided: it
    overrides ``policy.on`` and the result's flags, never the cancellation rule. Attempts left
    and the tool's category are not considered here (see :func:`next_delay` and
    :func:`may_retry_automatically`). Never raises.
    """
    if not isinstance(error, ToolResult | Exception):
        return Decision(retryable=False, reason="cancellation is never retried")
    retry_after = _retry_after_of(error)
    if verdict is not None:
        return Decision(retryable=verdict, reason=f"a plugin decided {verdict!r}", retry_after=retry_after)
    if isinstance(error, ToolResult):
        return _classify_result(error, policy, retry_after)
    for kind in policy.on:
        if reason := _class_match(kind, error):
            return Decision(retryable=True, reason=reason, retry_after=retry_after)
    if reason := _keyword_match(policy.on, error_text(error)):
        return Decision(retryable=True, reason=reason, retry_after=retry_after)
    return Decision(
        retryable=False,
        reason=f"{type(error).__name__} is none of retry.on {list(policy.on)!r}",
        retry_after=retry_after,
    )


def _retry_after_of(error: Exception | ToolResult) -> float | None:
    raw = error.extra.get("retry_after") if isinstance(error, ToolResult) else getattr(error, "retry_after", None)
    return retry_after_seconds(raw) if isinstance(raw, str | int | float) else None


def _classify_result(result: ToolResult, policy: RetryPolicy, retry_after: float | None) -> Decision:
    if result.success:
        return Decision(retryable=False, reason="the call succeeded")
    flag = result.extra.get("retryable")
    if flag is True:
        return Decision(retryable=True, reason="the result is flagged retryable", retry_after=retry_after)
    if flag is False:
        return Decision(retryable=False, reason="the result is flagged not retryable", retry_after=retry_after)
    if retry_after is not None:
        return Decision(retryable=True, reason="the result asks to retry after a delay", retry_after=retry_after)
    if reason := _keyword_match(policy.on, result.error or ""):
        return Decision(retryable=True, reason=reason)
    return Decision(retryable=False, reason="the failure is not retryable")


def may_retry_automatically(spec: ToolSpec) -> bool:
    """Whether the engine may retry *spec* on its own: not for a ``dangerous`` tool unless ``idempotent``."""
    return spec.category != Category.DANGEROUS.value or spec.idempotent


def next_delay(
    policy: RetryPolicy,
    attempt: int,
    decision: Decision,
    *,
    random: Callable[[], float] = _random.random,
) -> float | None:
    """Return the seconds to wait after failed attempt *attempt* (1-based), or ``None`` to stop.

    Stops when *decision* is not retryable, when *attempt* was the last of ``policy.attempts``,
    or when ``decision.retry_after`` exceeds :data:`RETRY_AFTER_CEILING`. Otherwise the wait is
    the backoff of :func:`backoff_delays` for this attempt, raised to ``decision.retry_after``
    when that is longer.
    """
    if not decision.retryable or attempt >= policy.attempts:
        return None
    wait = _delay(policy, attempt, random)
    if decision.retry_after is not None:
        if decision.retry_after > RETRY_AFTER_CEILING:
            return None
        wait = max(wait, decision.retry_after)
    return wait
