"""Result caches for the executor: cache keys, the backend protocol, memory and SQLite backends.

Synchronous and trio-free: every operation is a short, bounded piece of work (a dictionary
look-up, or one indexed SQLite statement with a short busy timeout), so the executor may call
it directly from its event loop.

Scopes (:class:`toolflow._model.CacheScope`):

- ``tick`` and ``session``: a :class:`MemoryCache` each; the executor calls ``clear()`` on the
  tick cache at every new tick and drops the session cache with the engine;
- ``persistent``: a :class:`SQLiteCache` (the embedded default, a file that survives restarts
  and that several engines may share) or a backend registered by a plugin through
  ``toolflow_register_cache_backends``; see :func:`open_cache`.

Only successful results are cached: ``set`` of a failure is a no-op in every built-in backend.
A backend never raises on a broken store: a problem becomes one :class:`CacheWarning` per
problem kind per backend and the operation degrades to a miss (``get``) or does nothing
(``set``), so that the call still runs. Cached results are shared; treat them as read-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from toolflow._errors import ConfigError
from toolflow._json import encoder, loads
from toolflow._model import CacheScope, ToolSpec
from toolflow._plugins import Plugins
from toolflow._results import RESERVED_RESULT_KEYS, ToolResult
from toolflow._schemas import did_you_mean

__all__ = [
    "CACHE_BACKENDS_HOOK",
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_CACHE_PATH",
    "SQLITE_BACKEND",
    "CacheBackend",
    "CacheWarning",
    "MemoryCache",
    "NullCache",
    "SQLiteCache",
    "cache_backend_factory",
    "cache_key",
    "default_cache_path",
    "open_cache",
    "spec_digest",
]

CACHE_BACKENDS_HOOK = "toolflow_register_cache_backends"

SQLITE_BACKEND = "sqlite"
"""Name of the built-in persistent backend; plugins may not reuse it."""

DEFAULT_CACHE_PATH = Path(".toolflow") / "cache.sqlite3"
"""Where the persistent cache lives, relative to the project root (see :func:`default_cache_path`)."""

DEFAULT_BUSY_TIMEOUT = 0.25
"""Seconds a SQLite statement waits for another engine's write lock before giving up (a miss).

Write transactions here are one short statement, so a healthy competitor releases its lock
within milliseconds; a longer wait would only stall the caller's event loop behind a stuck one.
"""

SPEC_FIELDS = ("name", "parameters", "output_schema", "implementations", "timeout", "strict")
"""The :class:`ToolSpec` fields whose change invalidates a tool's cached results.

What a result depends on: the arguments it accepts (``parameters``, ``strict``), what it must
return (``output_schema``), how it runs (every implementation's kind and config) and how long it
may take (``timeout``). Descriptions, examples, retry and cache policies and the file position
are left out: editing them does not change what the tool returns.
"""


class CacheWarning(UserWarning):
    """A cache store is unusable (corrupt, locked, read-only, ...); the call ran without it."""


# --------------------------------------------------------------------------- keys


_DIGESTS: dict[int, tuple[weakref.ref[ToolSpec], str]] = {}


def spec_digest(spec: ToolSpec) -> str:
    """Return the SHA-256 (hex) of the canonical JSON of *spec*'s :data:`SPEC_FIELDS`.

    Values JSON cannot express are written as their ``repr()``, so this never raises. Computed
    once per spec object.
    """
    known = _DIGESTS.get(id(spec))
    if known is not None and known[0]() is spec:
        return known[1]
    fields: dict[str, Any] = {
        "name": spec.name,
        "parameters": spec.parameters,
        "output_schema": spec.output_schema,
        "implementations": [[i.kind, i.config] for i in spec.implementations],
        "timeout": spec.timeout,
        "strict": spec.strict,
    }
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    digest = hashlib.sha256(text.encode()).hexdigest()
    key = id(spec)
    _DIGESTS[key] = (weakref.ref(spec, lambda _: _DIGESTS.pop(key, None)), digest)
    return digest


_canonical_json = encoder(sort_keys=True, ensure_ascii=False, allow_nan=False)
_stored_json = encoder(ensure_ascii=False)


def cache_key(spec: ToolSpec, arguments: Mapping[str, Any]) -> str | None:
    """Return the cache key of calling *spec* with the cleaned *arguments*, or ``None``.

    The key is ``name:digest:arguments``: the tool's name, the first 16 hex digits of
    :func:`spec_digest` (so that editing the spec invalidates its entries) and the canonical
    JSON of the arguments (sorted keys, no whitespace, ``ensure_ascii=False``). Arguments that
    are not JSON-serialisable (or hold NaN or infinities) have no key: the call is not cached.
    Never raises.
    """
    try:
        args = _canonical_json(arguments)
    except (TypeError, ValueError, RecursionError):
        return None
    return f"{spec.name}:{spec_digest(spec)[:16]}:{args}"


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class CacheBackend(Protocol):
    """What the executor needs from a cache store. Implementations must not raise on a broken store."""

    def get(self, key: str) -> ToolResult | None:
        """Return the live result stored under *key*, or ``None`` (missing, expired, store unusable)."""
        ...

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        """Store the successful *result* under *key* for *ttl* seconds (``None``: no expiry)."""
        ...

    def clear(self) -> None:
        """Forget every entry."""
        ...

    def close(self) -> None:
        """Release the store; the backend is not used afterwards."""
        ...


class _Warner:
    """Emit one :class:`CacheWarning` per problem kind."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.seen: set[str] = set()

    def warn(self, kind: str, detail: str) -> None:
        if kind in self.seen:
            return
        self.seen.add(kind)
        message = f"cache {self.where} is {kind} ({detail}); calls run without it"
        warnings.warn(CacheWarning(message), stacklevel=4)


def _expiry(now: float, ttl: float | None) -> float | None:
    return None if ttl is None else now + ttl


# --------------------------------------------------------------------------- memory


class MemoryCache:
    """An in-process cache for the ``tick`` and ``session`` scopes; entries expire after their TTL.

    Args:
        clock: Returns the current time in seconds (``time.time``; tests pass a fake clock).
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[float | None, ToolResult]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> ToolResult | None:
        """Return the live result under *key*, or ``None``; an expired entry is dropped."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, result = entry
        if expires is not None and self._clock() >= expires:
            del self._entries[key]
            return None
        return result

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        """Store *result* for *ttl* seconds; failures and non-positive TTLs are not stored."""
        if not result.success or (ttl is not None and ttl <= 0):
            return
        self._entries[key] = (_expiry(self._clock(), ttl), result)

    def clear(self) -> None:
        """Forget every entry (what a new tick does to the tick cache)."""
        self._entries.clear()

    def close(self) -> None:
        """Forget every entry."""
        self._entries.clear()


# --------------------------------------------------------------------------- sqlite

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS toolflow_cache ("
    "key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, expires_at REAL, stored_at REAL NOT NULL"
    ") WITHOUT ROWID"
)


def _kind(error: BaseException) -> str:
    text = str(error).lower()
    if "locked" in text or "busy" in text:
        return "locked"
    if "readonly" in text or "read-only" in text or "unable to open" in text or isinstance(error, OSError):
        return "read-only"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return "corrupt"
    return "unusable"


def _result_from_dict(value: Any) -> ToolResult | None:
    if not isinstance(value, dict) or value.get("success") is not True:
        return None
    warnings_ = value.get("warnings") or ()
    extra = {k: v for k, v in value.items() if k not in RESERVED_RESULT_KEYS}
    return ToolResult(success=True, data=value.get("data"), error=value.get("error"), warnings=warnings_, extra=extra)


class SQLiteCache:
    """The persistent cache: one SQLite file that survives restarts and that several engines share.

    The database runs in WAL mode (readers never wait for a writer) with a busy timeout of
    *busy_timeout* seconds; each operation is one autocommitted statement. Results are stored as
    the JSON of :meth:`ToolResult.to_dict` and rebuilt on a hit, so a hit's ``data`` holds lists
    where the original held tuples. Results that JSON cannot express are not stored. An expired
    entry is deleted when it is read (:meth:`purge_expired` deletes them all).

    A file that is not a SQLite database, a database locked for longer than the busy timeout and
    a location that cannot be written each give one :class:`CacheWarning` per kind; the operation
    is then a miss or does nothing. A corrupt or unopenable store is not retried; a lock is.

    Args:
        path: The database file; its folder is created when missing. Default:
            :func:`default_cache_path` of the current directory.
        clock: Returns the current time in seconds (``time.time``), compared with the stored expiry.
        busy_timeout: Seconds to wait for another connection's lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False
        self._closed = False
        self._warner = _Warner(repr(os.fspath(self.path)))

    # The connection is opened on first use, so that a broken store costs nothing until a
    # cacheable tool runs, and a store locked during set-up is retried on the next operation.
    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if self._broken or self._closed:
            return None
        conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'toolflow_cache'")
            if exists.fetchone() is None:
                conn.execute(_SCHEMA)
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except (sqlite3.Error, OSError) as exc:
            if conn is not None:
                conn.close()
            self._problem(exc)
            if _kind(exc) != "locked":
                self._broken = True
            return None
        self._conn = conn
        return conn

    def _problem(self, error: BaseException) -> None:
        self._warner.warn(_kind(error), str(error) or type(error).__name__)

    def get(self, key: str) -> ToolResult | None:
        """Return the live result under *key*, or ``None``; an expired entry is deleted."""
        with self._lock:
            conn = self._connection()
            if conn is None:
                return None
            try:
                row = conn.execute("SELECT value, expires_at FROM toolflow_cache WHERE key = ?", (key,)).fetchone()
                if row is None:
                    return None
                value, expires = row
                if expires is not None and self._clock() >= expires:
                    conn.execute("DELETE FROM toolflow_cache WHERE key = ? AND expires_at = ?", (key, expires))
                    return None
            except sqlite3.Error as exc:
                self._problem(exc)
                return None
        try:
            return _result_from_dict(loads(value))
        except (ValueError, TypeError, RecursionError):
            return None

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        """Store the successful *result* for *ttl* seconds; anything else is a no-op."""
        if not result.success or (ttl is not None and ttl <= 0):
            return
        try:
            value = _stored_json(result.to_dict())
        except (TypeError, ValueError, RecursionError):
            return
        with self._lock:
            conn = self._connection()
            if conn is None:
                return
            now = self._clock()
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO toolflow_cache (key, value, expires_at, stored_at) VALUES (?, ?, ?, ?)",
                    (key, value, _expiry(now, ttl), now),
                )
            except sqlite3.Error as exc:
                self._problem(exc)

    def clear(self) -> None:
        """Delete every entry, for every engine sharing the file."""
        self._write("DELETE FROM toolflow_cache", ())

    def purge_expired(self) -> None:
        """Delete every expired entry."""
        self._write("DELETE FROM toolflow_cache WHERE expires_at <= ?", (self._clock(),))

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            conn = self._connection()
            if conn is None:
                return
            try:
                conn.execute(sql, params)
            except sqlite3.Error as exc:
                self._problem(exc)

    def close(self) -> None:
        """Close the connection; later operations are misses and no-ops."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# --------------------------------------------------------------------------- factory


def default_cache_path(project_root: str | os.PathLike[str] | None = None) -> Path:
    """Return the default persistent cache file: ``.toolflow/cache.sqlite3`` under *project_root*.

    *project_root* defaults to the current directory.
    """
    return Path(project_root if project_root is not None else os.getcwd()) / DEFAULT_CACHE_PATH


def open_cache(
    scope: CacheScope | str,
    *,
    backend: str | None = None,
    plugins: Plugins | None = None,
    path: str | os.PathLike[str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    options: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = time.time,
) -> CacheBackend:
    """Open the cache of *scope*.

    ``tick`` and ``session`` get a :class:`MemoryCache`. ``persistent`` gets the backend named
    *backend*: ``None`` or ``"sqlite"`` is a :class:`SQLiteCache` at *path* (default
    :func:`default_cache_path` of *project_root*); any other name is looked up among the
    factories that *plugins* registered with ``toolflow_register_cache_backends`` (see
    :func:`cache_backend_factory`) and called as ``factory(**options)``. A plugin's backend is
    returned behind a guard: an exception from its ``get``, ``set``, ``clear`` or ``close``
    becomes one :class:`CacheWarning` naming the plugin (per kind of exception), and the
    operation a miss or nothing, like a broken SQLite file.

    Raises:
        ConfigError: *scope* is not a cache scope, or the backend is unknown, registered by more
            than one plugin, fails to open, or does not provide the :class:`CacheBackend` methods.
    """
    try:
        scope = CacheScope(scope)
    except ValueError:
        msg = f"unknown cache scope {scope!r}{did_you_mean(str(scope), [s.value for s in CacheScope])}"
        raise ConfigError(msg) from None
    if scope is not CacheScope.PERSISTENT:
        return MemoryCache(clock=clock)
    if backend is None or backend == SQLITE_BACKEND:
        return SQLiteCache(path if path is not None else default_cache_path(project_root), clock=clock)
    plugin, factory = cache_backend_factory(backend, plugins)
    try:
        store = factory(**dict(options or {}))
    except Exception as exc:
        msg = f"cache backend {backend!r} of plugin {plugin!r} failed to open: {exc}"
        raise ConfigError(msg) from exc
    if not isinstance(store, CacheBackend):
        msg = f"cache backend {backend!r} of plugin {plugin!r} returned {store!r}, which is not a cache backend"
        raise ConfigError(msg)
    return _GuardedCache(store, f"backend {backend!r} of plugin {plugin!r}")


def cache_backend_factory(backend: str, plugins: Plugins | None) -> tuple[str, Callable[..., Any]]:
    """The plugin that registered the cache backend *backend*, and its factory.

    Raises:
        ConfigError: No plugin registered *backend* (the message names the nearest backends),
            or several did.
    """
    found = plugins.registered(CACHE_BACKENDS_HOOK) if plugins is not None else {}
    factories = found.get(backend)
    if not factories:
        msg = f"unknown cache backend {backend!r}{did_you_mean(backend, [SQLITE_BACKEND, *found])}"
        raise ConfigError(msg)
    if len(factories) > 1:
        owners = ", ".join(repr(plugin) for plugin, _ in factories)
        msg = f"cache backend {backend!r} is registered by several plugins: {owners}"
        raise ConfigError(msg)
    plugin, factory = factories[0]
    return plugin, factory


class _GuardedCache:
    """A plugin's backend whose failures become warnings: a crashing plugin never fails a call."""

    def __init__(self, store: CacheBackend, where: str) -> None:
        self._store = store
        self._warner = _Warner(where)

    def _guarded(self, operation: str, *args: Any) -> Any:
        """``store.operation(*args)``, or ``None`` (and a warning) when it raises."""
        try:
            return getattr(self._store, operation)(*args)
        except Exception as exc:  # noqa: BLE001 - a plugin's failure is a warning and a miss; the call goes on
            self._warner.warn("failing", f"{operation} raised {type(exc).__name__}: {exc}")
            return None

    def get(self, key: str) -> ToolResult | None:
        result = self._guarded("get", key)
        return result if isinstance(result, ToolResult) and result.success else None

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        if result.success:  # failures are never cached, whatever a plugin's backend would do
            self._guarded("set", key, result, ttl)

    def clear(self) -> None:
        self._guarded("clear")

    def close(self) -> None:
        self._guarded("close")


class NullCache:
    """A cache that keeps nothing: what the engine uses when a configured backend cannot open."""

    def get(self, key: str) -> ToolResult | None:  # noqa: ARG002 - the protocol's signature
        """Always a miss."""
        return None

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        """Keep nothing."""

    def clear(self) -> None:
        """Nothing to forget."""

    def close(self) -> None:
        """Nothing to close."""
