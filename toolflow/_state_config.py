"""Which state backend a command uses, and the keys a process signs and seals with (issue 19).

``--state`` (serve), ``TOOLFLOW_STATE`` or ``[tool.toolflow] state`` name the backend by URL
(:func:`toolflow._project.state_setting`); :func:`state_from_url` opens it, importing redis-py
only for a Redis URL. The fleet's shared secret comes from the environment, never from Redis
(:func:`handle_keys_from_environ`), and :class:`FleetKeys` says once what a process's keys are
and whether the fleet shares them.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from toolflow._errors import UsageError
from toolflow._model import duration_setting, format_duration
from toolflow._state import LEASE_TTL, MIN_LEASE_TTL, HandleKeys, MemoryState, StateBackend, masked_url

__all__ = [
    "LEASE_TTL_ENV",
    "MEMORY",
    "PREVIOUS_SECRET_ENV",
    "REDIS_SCHEMES",
    "SECRET_ENV",
    "FleetKeys",
    "handle_keys_from_environ",
    "lease_ttl_from_environ",
    "state_from_url",
]

MEMORY = "memory"
"""The setting of the in-process state (the default): ``state = "memory"``."""

REDIS_SCHEMES = ("redis", "rediss", "unix")
"""The URL schemes of a Redis server (``unix``: a socket path), as redis-py reads them."""

SECRET_ENV = "TOOLFLOW_STATE_SECRET"  # noqa: S105 - the name of a variable, not a secret
"""The variable that holds the fleet's shared secret for conversation handles (never Redis)."""

PREVIOUS_SECRET_ENV = "TOOLFLOW_STATE_SECRET_PREVIOUS"  # noqa: S105 - a variable's name
"""The variable that holds the secret being rotated out: handles it signed are still accepted."""

LEASE_TTL_ENV = "TOOLFLOW_LEASE_TTL"
"""The variable that sets how long the ``concurrency`` leases a process takes live (:func:`lease_ttl_from_environ`)."""


def state_from_url(url: str | None, *, keys: HandleKeys | None = None, lease_ttl: float = LEASE_TTL) -> StateBackend:
    """The state backend that *url* names: ``None`` or ``"memory"``, this process's memory; ``redis://...``, Redis.

    ``redis://[:password@]host:port/db``, ``rediss://`` (TLS) and ``unix:///path.sock`` are
    Redis (:class:`toolflow._state_redis.RedisState`); nothing connects until the first operation.
    The caller closes the backend after every engine that uses it. With *keys* (the fleet's
    secret, :func:`handle_keys_from_environ`), what Redis stores is sealed with a MAC. *lease_ttl*
    is how long the ``concurrency`` leases this process takes in Redis live unless renewed
    (:func:`lease_ttl_from_environ`); the memory state takes none.

    Raises:
        UsageError: *url* is neither, or it is Redis and redis-py is not installed (the message
            names the extra to install) or does not accept it (a bad port, database or query
            option). No message shows a URL's password.
        ValueError: *lease_ttl* is below :data:`toolflow._state.MIN_LEASE_TTL` (a Redis URL).
    """
    if url is None or url == MEMORY:
        return MemoryState()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in REDIS_SCHEMES:
        msg = f"state must be 'memory' or a redis://, rediss:// or unix:// URL, got {masked_url(url)!r}"
        raise UsageError(msg)
    try:
        from toolflow._state_redis import RedisState  # noqa: PLC0415 - redis-py is an optional extra
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "redis":
            raise
        msg = f"state {masked_url(url)!r} needs redis-py, which is not installed: pip install 'toolflow-yaml[redis]'"
        raise UsageError(msg) from None
    return RedisState(url, keys=keys, lease_ttl=lease_ttl)


def handle_keys_from_environ(environ: Mapping[str, str]) -> HandleKeys | None:
    """The keys of conversation handles from :data:`SECRET_ENV` (and :data:`PREVIOUS_SECRET_ENV`); ``None`` without.

    Raises:
        UsageError: A secret is shorter than 16 characters, or only the previous one is set.
    """
    current, previous = environ.get(SECRET_ENV) or None, environ.get(PREVIOUS_SECRET_ENV) or None
    if current is None:
        if previous is not None:
            msg = f"{PREVIOUS_SECRET_ENV} is set but {SECRET_ENV} is not: set the new secret too"
            raise UsageError(msg)
        return None
    try:
        return HandleKeys.from_secrets(current, *([previous] if previous is not None else []))
    except ValueError:
        msg = f"{SECRET_ENV} and {PREVIOUS_SECRET_ENV} must hold 16 characters or more each"
        raise UsageError(msg) from None


def lease_ttl_from_environ(environ: Mapping[str, str]) -> float:
    """How long this process's ``concurrency`` leases live: :data:`LEASE_TTL_ENV` in *environ*, else 30 s.

    A shorter TTL frees a dead replica's leases sooner, at the cost of more renewals (one Redis
    round trip per running call every third of it) and less slack for a stalled replica. Each
    replica stamps its own leases with its own TTL, so the replicas of a fleet need not agree.

    Raises:
        UsageError: The variable is not a duration (``10s``, ``500ms``, a number of seconds) of
            at least :data:`toolflow._state.MIN_LEASE_TTL` seconds.
    """
    text = environ.get(LEASE_TTL_ENV, "").strip()
    if not text:
        return LEASE_TTL
    seconds = duration_setting(text, where=LEASE_TTL_ENV)
    if seconds < MIN_LEASE_TTL:
        msg = f"{LEASE_TTL_ENV}: a lease must live {format_duration(MIN_LEASE_TTL)} or more, got {text!r}"
        raise UsageError(msg)
    return seconds


@attrs.frozen(kw_only=True)
class FleetKeys:
    """The keys one process signs and seals with, and whether the other replicas of its fleet hold them too.

    ``toolflow serve`` signs conversation handles and task ids with *keys*, and seals the
    ``requestState`` of an approval question under a key derived from them when the fleet shares
    them (:attr:`secret_keys`); the state backend seals what it stores with them too
    (:func:`state_from_url`'s *keys*).

    Attributes:
        keys: The keys: the fleet's (:meth:`from_environ`, from :data:`SECRET_ENV` and
            :data:`PREVIOUS_SECRET_ENV`), or this process's own random ones (the default).
        from_secret: Whether *keys* come from the fleet's secret, so that every replica verifies
            what this one signed; ``False``: what this process signs is good in this process only.
    """

    keys: HandleKeys = attrs.field(factory=HandleKeys.random)
    from_secret: bool = False

    @classmethod
    def of_secret(cls, keys: HandleKeys) -> FleetKeys:
        """The fleet's *keys* (:meth:`HandleKeys.from_secrets`), which every replica holds."""
        return cls(keys=keys, from_secret=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> FleetKeys:
        """The fleet's keys from :data:`SECRET_ENV` (and :data:`PREVIOUS_SECRET_ENV`); without a secret, random ones.

        Raises:
            UsageError: As :func:`handle_keys_from_environ`.
        """
        keys = handle_keys_from_environ(environ)
        return cls() if keys is None else cls.of_secret(keys)

    @property
    def secret_keys(self) -> HandleKeys | None:
        """*keys* when they come from the fleet's secret, else ``None``: what other replicas must verify needs them."""
        return self.keys if self.from_secret else None
