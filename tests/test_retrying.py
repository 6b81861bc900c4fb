"""The pure retry schedule and retry decisions of toolflow._retrying."""

from __future__ import annotations

import datetime as dt
import errno
import io
import logging
import math
import socket
import ssl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolflow._model import RetryPolicy, ToolSpec
from toolflow._results import ToolResult
from toolflow._retrying import (
    MAX_RETRY_AFTER,
    RETRY_AFTER_CEILING,
    Decision,
    _import_class,
    backoff_delays,
    classify,
    may_retry_automatically,
    next_delay,
    retry_after_seconds,
)

DEFAULT = RetryPolicy()
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


class QuotaError(Exception):
    """An exception class that a `module:Class` entry of retry.on names."""


class KeywordCancelled(BaseException):
    """A non-Exception whose message is full of retryable words."""


# --- backoff ---------------------------------------------------------------------------------


def test_default_schedule_without_jitter_follows_seed_000() -> None:
    """Seed 000's defaults give 1, 2, 4 seconds before attempts 2, 3 and 4."""
    assert backoff_delays(RetryPolicy(jitter=False)) == [1.0, 2.0, 4.0]


def test_schedule_is_capped_at_max() -> None:
    """Waits grow exponentially up to `max` and stay there."""
    policy = RetryPolicy(attempts=7, initial=1.0, multiplier=3.0, max=10.0, jitter=False)
    assert backoff_delays(policy) == [1.0, 3.0, 9.0, 10.0, 10.0, 10.0]


def test_full_jitter_scales_each_wait_by_the_random_draw() -> None:
    """With jitter each wait is the plain wait times a uniform draw in [0, 1)."""
    draws = iter([0.5, 0.0, 0.25])
    assert backoff_delays(DEFAULT, random=lambda: next(draws)) == [0.5, 0.0, 1.0]


@pytest.mark.parametrize("attempts", [0, 1])
def test_single_attempt_has_no_waits(attempts: int) -> None:
    """A policy of one attempt (or none) has nothing to wait for."""
    assert backoff_delays(RetryPolicy(attempts=attempts)) == []


def test_huge_exponent_does_not_overflow() -> None:
    """A large attempt count saturates at `max` instead of overflowing."""
    delays = backoff_delays(RetryPolicy(attempts=2000, multiplier=10.0, jitter=False))
    assert delays[-1] == 10.0


policies = st.builds(
    RetryPolicy,
    attempts=st.integers(min_value=0, max_value=30),
    initial=st.floats(min_value=0.001, max_value=100.0),
    max=st.floats(min_value=0.001, max_value=1000.0),
    multiplier=st.floats(min_value=1.0, max_value=10.0),
    jitter=st.booleans(),
)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@given(policies, draws)
def test_delays_are_bounded_and_counted(policy: RetryPolicy, draw: float) -> None:
    """There are attempts-1 waits, each between 0 and `max`."""
    delays = backoff_delays(policy, random=lambda: draw)
    assert len(delays) == max(0, policy.attempts - 1)
    assert all(0.0 <= d <= policy.max for d in delays)


@given(policies)
def test_without_jitter_the_schedule_is_deterministic_exponential(policy: RetryPolicy) -> None:
    """Jitter off: the waits are exactly min(max, initial * multiplier ** (n - 1)), whatever `random` says."""
    policy = RetryPolicy(
        attempts=policy.attempts, initial=policy.initial, max=policy.max, multiplier=policy.multiplier, jitter=False
    )
    expected = [min(policy.max, policy.initial * policy.multiplier ** (n - 1)) for n in range(1, policy.attempts)]
    assert backoff_delays(policy, random=lambda: 0.0) == pytest.approx(expected)
    assert backoff_delays(policy, random=lambda: 0.9) == backoff_delays(policy)


# --- Retry-After -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("0", 0.0),
        ("1.5", 1.5),
        (7, 7.0),
        (2.5, 2.5),
        ("Fri, 02 Jan 2026 03:05:05 GMT", 60.0),
        ("Fri, 02 Jan 2026 03:00:00 GMT", 0.0),
        ("Thu, 01 Jan 2026 00:00:00 GMT", 0.0),
        ("Fri, 02 Jan 2026 03:04:05 -0100", 3600.0),
        ("999999999", MAX_RETRY_AFTER),
        ("Fri, 02 Jan 2099 03:04:05 GMT", MAX_RETRY_AFTER),
        ("-5", None),
        (-1, None),
        (math.inf, None),
        (math.nan, None),
        (True, None),
        ("", None),
        ("soon", None),
        ("12 seconds", None),
        ("Fri, 32 Foo 2026 99:99:99 GMT", None),
        (None, None),
    ],
)
def test_retry_after_forms(value: str | float | None, seconds: float | None) -> None:
    """Delta-seconds and HTTP dates are read; past dates are 0; garbage, negatives and non-finite are None."""
    assert retry_after_seconds(value, now=NOW) == seconds


def test_retry_after_date_defaults_to_the_current_time() -> None:
    """Without `now`, an HTTP date is compared with the current UTC time."""
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    seconds = retry_after_seconds(soon.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    assert seconds is not None
    assert 25.0 <= seconds <= 31.0


# --- classify: exceptions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "retryable", "reason_part"),
    [
        (TimeoutError("slow"), True, "is a timeout"),
        (TimeoutError(errno.ETIMEDOUT, "Connection timed out"), True, "is a timeout"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), True, "connection error"),
        (ConnectionResetError("reset"), True, "connection error"),
        (BrokenPipeError(), True, "connection error"),
        (socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), True, "network error"),
        (socket.herror(1, "Unknown host"), True, "network error"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), True, "network error"),
        (OSError(errno.EHOSTUNREACH, "No route to host"), True, "network error"),
        (RuntimeError("service temporarily unavailable"), True, "'temporarily' (temporary)"),
        (RuntimeError("Please TRY AGAIN later"), True, "'try again' (temporary)"),
        (RuntimeError("Rate limit exceeded"), True, "'rate limit' (rate_limit)"),
        (RuntimeError("429 Too Many Requests"), True, "'too many requests' (rate_limit)"),
        (RuntimeError("upstream timed out"), True, "'timed out' (timeout)"),
        (RuntimeError("lost the network"), True, "'network' (network)"),
        (type("ReadTimeout", (Exception,), {})("read"), True, "'timeout' (timeout)"),
        (OSError(errno.EBUSY, "Device or resource busy"), True, "operating-system error a retry may mend"),
        (BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"), True, "operating-system error"),
        (OSError(errno.EIO, "Input/output error"), True, "operating-system error"),
        (OSError(errno.EMFILE, "Too many open files"), True, "operating-system error"),
        (OSError("disk hiccup"), True, "OSError is an operating-system error"),
        (OSError(errno.ENOSPC, "No space left on device"), False, "none of retry.on"),
        (OSError(errno.EROFS, "Read-only file system"), False, "none of retry.on"),
        (IsADirectoryError(errno.EISDIR, "Is a directory"), False, "none of retry.on"),
        (io.UnsupportedOperation("not readable"), False, "none of retry.on"),
        (FileNotFoundError(errno.ENOENT, "no such file"), False, "FileNotFoundError is none of retry.on"),
        (OSError(errno.EACCES, "permission denied"), False, "none of retry.on"),
        (ssl.SSLCertVerificationError("certificate verify failed"), False, "none of retry.on"),
        (ValueError("bad argument"), False, "ValueError is none of retry.on"),
        (KeyError("x"), False, "none of retry.on"),
    ],
)
def test_classify_exceptions_with_the_default_policy(error: Exception, retryable: bool, reason_part: str) -> None:
    """Exceptions are retryable by class (timeout, connection, network, other OS errors) or by seed 000's keywords."""
    decision = classify(error, DEFAULT)
    assert decision.retryable is retryable
    assert reason_part in decision.reason


@pytest.mark.parametrize(
    ("on", "error", "retryable"),
    [
        (("timeout",), TimeoutError(), True),
        (("timeout",), ConnectionResetError(), False),
        (("connection",), ConnectionResetError(), True),
        (("connection",), RuntimeError("rate limit"), False),
        (("network",), socket.gaierror(socket.EAI_AGAIN, "x"), True),
        (("network",), TimeoutError(), False),
        (("rate_limit",), RuntimeError("rate-limited"), True),
        (("rate_limit",), RuntimeError("temporary glitch"), False),
        (("temporary",), RuntimeError("temporary glitch"), True),
        ((), TimeoutError("timeout"), False),
        (("bogus",), RuntimeError("bogus"), False),
    ],
)
def test_classify_honours_only_the_kinds_in_retry_on(on: tuple[str, ...], error: Exception, retryable: bool) -> None:
    """Only the kinds listed in `retry.on` count, by class and by keyword."""
    assert classify(error, RetryPolicy(on=on)).retryable is retryable


def test_module_class_entry_matches_instances_and_subclasses() -> None:
    """A `module:Class` entry retries that class and its subclasses, nothing else."""
    policy = RetryPolicy(on=(f"{__name__}:QuotaError",))
    sub = type("SubQuotaError", (QuotaError,), {})
    assert classify(QuotaError("nope"), policy) == Decision(
        retryable=True, reason=f"QuotaError matches retry.on entry {__name__ + ':QuotaError'!r}"
    )
    assert classify(sub(), policy).retryable
    assert not classify(ValueError(), policy).retryable


def test_dotted_attribute_entry_is_resolved() -> None:
    """A `module:Outer.Inner` entry walks attributes after the import."""
    assert classify(ssl.SSLCertVerificationError(), RetryPolicy(on=("ssl:SSLCertVerificationError",))).retryable


@pytest.mark.parametrize(
    "entry", ["no_such_module_xyz:Error", "ssl:NoSuchClass", "ssl:CERT_NONE", "builtins:KeyboardInterrupt"]
)
def test_unusable_module_class_entry_matches_nothing_and_is_logged_once(
    entry: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry that cannot be imported, or is not an Exception class, matches nothing and warns once."""
    policy = RetryPolicy(on=(entry,))
    _import_class.cache_clear()
    with caplog.at_level(logging.WARNING, logger="toolflow.retry"):
        first = classify(RuntimeError("x"), policy)
        second = classify(RuntimeError("y"), policy)
    assert not first.retryable
    assert not second.retryable
    messages = [r.getMessage() for r in caplog.records if entry in r.getMessage()]
    assert len(messages) == 1
    assert "matches nothing" in messages[0]


@pytest.mark.parametrize(
    "error",
    [KeyboardInterrupt(), SystemExit(1), GeneratorExit(), KeywordCancelled("timeout, try again, rate limit")],
)
def test_base_exceptions_are_never_retried(error: BaseException) -> None:
    """Cancellation-like BaseExceptions are never retryable, whatever their message or a plugin says."""
    expected = Decision(retryable=False, reason="cancellation is never retried")
    assert classify(error, DEFAULT) == expected
    assert classify(error, DEFAULT, verdict=True) == expected


def test_plugin_verdict_overrides_policy() -> None:
    """A plugin's verdict from `toolflow_retryable` wins over `retry.on` in both directions."""
    assert classify(ValueError("bad"), DEFAULT, verdict=True).retryable
    assert not classify(TimeoutError(), DEFAULT, verdict=False).retryable
    assert "plugin" in classify(TimeoutError(), DEFAULT, verdict=False).reason


def test_exception_retry_after_attribute_is_read() -> None:
    """An exception with a `retry_after` attribute carries that wait in its decision."""
    error = ConnectionError("busy")
    error.retry_after = "3"  # type: ignore[attr-defined]
    assert classify(error, DEFAULT).retry_after == 3.0


# --- classify: results -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "retryable", "retry_after"),
    [
        (ToolResult(success=True, data=1), False, None),
        (ToolResult.failure("HTTP 503", extra={"retryable": True, "retry_after": 2.0}), True, 2.0),
        (ToolResult.failure("HTTP 429", extra={"retryable": True, "retry_after": "7"}), True, 7.0),
        (ToolResult.failure("HTTP 503", extra={"retryable": True}), True, None),
        (ToolResult.failure("connection refused", extra={"retryable": False}), False, None),
        (ToolResult.failure("HTTP 429", extra={"retry_after": 1}), True, 1.0),
        (ToolResult.failure("HTTP 429", extra={"retry_after": "garbage"}), False, None),
        (ToolResult.failure("Rate limit hit, try again later"), True, None),
        (ToolResult.failure("Connection reset by peer"), True, None),
        (ToolResult.failure("Network unreachable"), True, None),
        (ToolResult.failure("timed out after 30s"), True, None),
        (ToolResult.failure("the service is Temporarily unavailable"), True, None),
        (ToolResult.failure("HTTP 404 Not Found"), False, None),
        (ToolResult(success=False), False, None),
        (ToolResult.failure("bad", extra={"retryable": "yes"}), False, None),
    ],
)
def test_classify_results(result: ToolResult, retryable: bool, retry_after: float | None) -> None:
    """Failed results are retryable by their flag, by a retry_after, or by seed 000's keywords in `error`."""
    decision = classify(result, DEFAULT)
    assert decision.retryable is retryable
    assert decision.retry_after == retry_after


def test_result_keywords_respect_retry_on() -> None:
    """Keywords in a result's error count only for the kinds in `retry.on`; explicit flags always count."""
    policy = RetryPolicy(on=("timeout",))
    assert not classify(ToolResult.failure("rate limit"), policy).retryable
    assert classify(ToolResult.failure("timeout"), policy).retryable
    assert classify(ToolResult.failure("HTTP 503", extra={"retryable": True}), policy).retryable


# --- dangerous tools -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("category", "idempotent", "allowed"),
    [
        ("safe_chain", False, True),
        ("terminal", False, True),
        ("async_required", False, True),
        ("dangerous", False, False),
        ("dangerous", True, True),
        ("custom_category", False, True),
    ],
)
def test_may_retry_automatically(category: str, idempotent: bool, allowed: bool) -> None:
    """A dangerous tool is retried automatically only when it is idempotent."""
    spec = ToolSpec(name="t", category=category, idempotent=idempotent)
    assert may_retry_automatically(spec) is allowed


# --- next_delay ------------------------------------------------------------------------------

RETRY = Decision(retryable=True, reason="test")
STOP = Decision(retryable=False, reason="test")


@pytest.mark.parametrize(
    ("attempt", "decision", "expected"),
    [
        (1, RETRY, 1.0),
        (2, RETRY, 2.0),
        (3, RETRY, 4.0),
        (4, RETRY, None),
        (9, RETRY, None),
        (1, STOP, None),
        (1, Decision(retryable=True, reason="", retry_after=5.0), 5.0),
        (3, Decision(retryable=True, reason="", retry_after=0.5), 4.0),
        (1, Decision(retryable=True, reason="", retry_after=RETRY_AFTER_CEILING), RETRY_AFTER_CEILING),
        (1, Decision(retryable=True, reason="", retry_after=RETRY_AFTER_CEILING + 1), None),
        (4, Decision(retryable=True, reason="", retry_after=1.0), None),
    ],
)
def test_next_delay(attempt: int, decision: Decision, expected: float | None) -> None:
    """The wait after a failed attempt: backoff, raised to Retry-After; None when done or not retryable."""
    assert next_delay(RetryPolicy(jitter=False), attempt, decision) == expected


@given(policies, draws, st.none() | st.floats(min_value=0.0, max_value=2 * RETRY_AFTER_CEILING))
def test_next_delay_matches_the_schedule_and_its_bounds(
    policy: RetryPolicy, draw: float, retry_after: float | None
) -> None:
    """next_delay walks backoff_delays, never waits less than Retry-After nor more than max or the ceiling."""
    decision = Decision(retryable=True, reason="", retry_after=retry_after)
    schedule = backoff_delays(policy, random=lambda: draw)
    waits = [next_delay(policy, n, decision, random=lambda: draw) for n in range(1, policy.attempts + 1)]
    assert waits[-1:] in ([], [None])
    if retry_after is None:
        assert waits[:-1] == schedule
    elif retry_after > RETRY_AFTER_CEILING:
        assert all(w is None for w in waits)
    else:
        assert waits[:-1] == [max(d, retry_after) for d in schedule]
    for wait in waits:
        assert wait is None or 0.0 <= wait <= max(policy.max, RETRY_AFTER_CEILING)
