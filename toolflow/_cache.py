"""Result caches for the executor: cache keys, the backend protocol, memory and SQLite backends.

Synchronous and trio-free. The ``tick`` and ``session`` caches are dictionaries, cheap enough
for the event loop. The ``persistent`` store (a SQLite file or a plugin's backend) may block
(disk, locks, network): the executor calls it from worker threads, one operation at a time, and
waits for each at most its cache timeout (see :mod:`toolflow._executor`).

Scopes (:class:`toolflow._model.CacheScope`):

- ``tick`` and ``session``: a :class:`MemoryCache` each; the executor calls ``clear()`` on the
  tick cache at every new tick and drops the session cache with the engine;
- ``persistent``: a :class:`SQLiteCache` (the embedded default, a file that survives restarts
  and that several engines may share) or a backend registered by a plugin through
  ``toolflow_register_cache_backends``; see :func:`persistent_store`.

Only successful results are cached: ``set`` of a failure is a no-op in every built-in backend.
A backend never raises on a broken store: a problem becomes one :class:`CacheWarning` per
problem kind (per SQLite file and process, or per plugin backend) and the operation degrades
to a miss (``get``) or does nothing (``set``), so that the call still runs. A SQLite row is
served only for the exact key it was stored under and only when its checksum verifies. Cached
results are shared; treat them as read-only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import struct
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from toolflow._errors import ConfigError, error_message, error_text
from toolflow._json import encoder, loads
from toolflow._model import ToolSpec
from toolflow._plugins import Plugins
from toolflow._results import RESERVED_RESULT_KEYS, ToolResult
from toolflow._schemas import did_you_mean

__all__ = [
    "CACHE_BACKENDS_HOOK",
    "DEFAULT_CACHE_PATH",
    "DEFAULT_CACHE_TIMEOUT",
    "MAX_STORED_BYTES",
    "SQLITE_BACKEND",
    "CacheBackend",
    "CacheWarning",
    "MemoryCache",
    "PersistentStore",
    "SQLiteCache",
    "cache_backend_factory",
    "cache_key",
    "check_cache_backend",
    "default_cache_path",
    "persistent_store",
    "spec_digest",
]

CACHE_BACKENDS_HOOK = "toolflow_register_cache_backends"

SQLITE_BACKEND = "sqlite"
"""Name of the built-in persistent backend; plugins may not reuse it."""

DEFAULT_CACHE_PATH = Path(".toolflow") / "cache.sqlite3"
"""Where the persistent cache lives, relative to the project root (see :func:`default_cache_path`)."""

DEFAULT_CACHE_TIMEOUT = 0.05
"""Seconds a call waits for the persistent store (a look-up, or a store) before it goes on without it.

A lock held by another process, a slow disk or a hung plugin backend costs a call at most this
much: the look-up is then a miss (the tool runs) and the store is skipped.
"""

_BUSY_SHARE = 0.8
"""SQLite's own wait for a lock, as a share of the cache timeout (:func:`persistent_store`).

Shorter than the call's wait, so that SQLite gives up first: the problem is then reported as a
lock, and the connection is free again, by the time the call stops waiting.
"""

MAX_STORED_BYTES = 16 * 1024 * 1024
"""The largest result (its JSON, in bytes) that :class:`SQLiteCache` stores or reads back.

A larger result is not stored; a larger row in the file (which toolflow never writes) is a
miss, so that a damaged or hostile file cannot make every look-up load gigabytes.
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
    """What the executor needs from a cache store. Implementations must not raise on a broken store.

    The engine calls a ``persistent`` store from worker threads, one operation at a time.
    """

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


class PersistentStore(CacheBackend, Protocol):
    """The ``persistent`` scope's store as the engine holds it (:func:`persistent_store`)."""

    busy: bool
    """Whether the last operation gave up because someone else held the store (a lock)."""

    def report(self, kind: str, detail: str) -> None:
        """Warn, once per *kind*, that the store has a problem (the engine's ``busy`` when it stopped waiting)."""
        ...


# The problem kinds a store reports, and what happens to calls meanwhile.
_CONSEQUENCES = {
    "busy": "calls that cannot wait run without it",
    "corrupt": "its damaged entries are misses; the file may be deleted while no engine uses it",
    "not a toolflow cache": "calls run without it; delete it or choose another cache path",
}


class _Warner:
    """Emit one :class:`CacheWarning` per problem kind. Thread-safe: stores run in worker threads."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def warn(self, kind: str, detail: str) -> None:
        with self._lock:
            if kind in self._seen:
                return
            self._seen.add(kind)
        consequence = _CONSEQUENCES.get(kind, "calls run without it")
        warnings.warn(CacheWarning(f"cache {self.where} is {kind} ({detail}); {consequence}"), stacklevel=4)


_FILE_WARNERS: dict[str, _Warner] = {}
_FILE_WARNERS_LOCK = threading.Lock()


def _file_warner(path: Path) -> _Warner:
    """The warner of the SQLite file at *path*, shared by every engine of the process.

    A file's problem is then reported once per process, however many engines (one per
    ``toolflow serve`` session, say) open it.
    """
    name = os.path.realpath(path)
    with _FILE_WARNERS_LOCK:
        warner = _FILE_WARNERS.get(name)
        if warner is None:
            warner = _FILE_WARNERS[name] = _Warner(repr(os.fspath(path)))
    return warner


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

_APPLICATION_ID = 0x74666C77
"""``PRAGMA application_id`` of a toolflow cache file (``tflw``): a file without it is not ours."""

_FORMAT = 1
"""``PRAGMA user_version`` of the file format written here."""

_TABLE = (
    "CREATE TABLE toolflow_cache ("
    "key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL, expires_at REAL, stored_at REAL NOT NULL, "
    "checksum BLOB NOT NULL"
    ") WITHOUT ROWID"
)

# The key is read back with the row: SQLite finds a key by a binary search that trusts the
# page's order and, once the search has met an equal key, skips its final comparison, so on a
# damaged page it can stop at a neighbouring row. A value over the size cap is read as NULL.
_SELECT = (
    "SELECT key, CASE WHEN length(value) <= ? THEN value END, expires_at, checksum FROM toolflow_cache WHERE key = ?"
)


def _encode(text: str) -> bytes:
    # surrogatepass: arguments decoded from JSON may hold lone surrogates, which must still key
    # (and round-trip) rather than raise.
    return text.encode("utf-8", "surrogatepass")


_FRAME = struct.Struct("<Qd")


def _checksum(key: bytes, value: bytes, expires: float | None, secret: bytes = b"") -> bytes:
    """BLAKE2b-128 of a row: its key, its expiry and its value, framed so that no two rows share a text.

    The frame is the key's length and the expiry as a double; NaN stands for no expiry, which
    a stored expiry never is (SQLite stores NaN as NULL). With a *secret* it is BLAKE2b's keyed
    mode, a MAC that only the holders of the secret can compute (the state of a fleet,
    :mod:`toolflow._state`); without one, a checksum against damage.
    """
    frame = _FRAME.pack(len(key), math.nan if expires is None else expires)
    digest = hashlib.blake2b(frame, digest_size=16, key=secret)
    digest.update(key)
    digest.update(value)
    return digest.digest()


def _row_problem(row: tuple[Any, ...], key: bytes) -> str | None:
    """Why *row*, read for *key*, is not exactly what toolflow stored under *key*; ``None`` if it is."""
    found, value, expires, checksum = row
    if found != key:
        return "the look-up of one key returned the row of another"
    if value is None:
        return f"a row is larger than {MAX_STORED_BYTES:,} bytes or has no value"
    if type(value) is not bytes or type(checksum) is not bytes or not (expires is None or type(expires) is float):
        return "a row holds values of the wrong types"
    if checksum != _checksum(key, value, expires):
        return "a row does not match its checksum"
    return None


_PROBLEMS = (sqlite3.Error, OSError, UnicodeError)
"""What a damaged, locked or unreachable file raises. ``UnicodeError``: on a damaged schema page,
SQLite's own message can hold bytes that are not UTF-8, which Python fails to decode."""


def _kind(error: BaseException) -> str:
    if isinstance(error, UnicodeError):
        return "corrupt"
    text = str(error).lower()
    if "locked" in text or "busy" in text:
        return "busy"
    if "readonly" in text or "read-only" in text or isinstance(error, PermissionError):
        return "read-only"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return "corrupt"
    return "unusable"


def _identity(conn: sqlite3.Connection) -> tuple[int, int]:
    return conn.execute("PRAGMA application_id").fetchone()[0], conn.execute("PRAGMA user_version").fetchone()[0]


def _is_blank(conn: sqlite3.Connection) -> bool:
    """Whether the database is new: no toolflow identity and nothing in its schema."""
    return _identity(conn) == (0, 0) and conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None


def _adopt(conn: sqlite3.Connection) -> str | None:
    """Make a blank database a toolflow cache file; say why the file is not one, or ``None``.

    Only a blank database is written to: a file that holds anything else (another program's
    tables, another format) is never changed. Raises :class:`sqlite3.Error`.
    """
    if _is_blank(conn):
        conn.execute("PRAGMA journal_mode = WAL")  # outside the transaction, which cannot change it
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _is_blank(conn):  # checked again under the write lock: another engine may have been first
                conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {_FORMAT}")
                conn.execute(_TABLE)
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    application_id, version = _identity(conn)
    if application_id != _APPLICATION_ID:
        return f"its application_id is {application_id:#x}, not toolflow's {_APPLICATION_ID:#x}"
    if version != _FORMAT:
        return f"it has format {version}; this toolflow reads format {_FORMAT}"
    table = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'toolflow_cache'")
    if table.fetchone() != (_TABLE.encode(),):
        return "its toolflow_cache table is not the one toolflow creates"
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != b"wal":
        conn.execute("PRAGMA journal_mode = WAL")
    return None


def _result_from_json(value: bytes) -> ToolResult | None:
    """The successful result stored as *value* (the JSON of :meth:`ToolResult.to_dict`), or ``None``."""
    try:
        data = loads(value.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None
    if type(data) is not dict or data.get("success") is not True:
        return None
    warnings_ = data.get("warnings", [])
    if type(warnings_) is not list or (warnings_ and not all(type(w) is str for w in warnings_)):
        return None
    error = data.get("error")
    if error is not None and type(error) is not str:
        return None
    extra = {k: v for k, v in data.items() if k not in RESERVED_RESULT_KEYS}
    return ToolResult(success=True, data=data.get("data"), error=error, warnings=tuple(warnings_), extra=extra)


class SQLiteCache:
    """The persistent cache: one SQLite file that survives restarts and that several engines share.

    The file is a toolflow cache file (``PRAGMA application_id`` ``0x74666c77``, format 1): a
    new or empty file is made one; any other database is left untouched and used by no call.
    It runs in WAL mode (readers never wait for a writer) with a busy timeout of *busy_timeout*
    seconds; each operation is one autocommitted statement. Results are stored as the JSON of
    :meth:`ToolResult.to_dict` and rebuilt on a hit, so a hit's ``data`` holds lists where the
    original held tuples. Results that JSON cannot express, or whose JSON is larger than
    :data:`MAX_STORED_BYTES`, are not stored. An expired entry is deleted when it is read.

    Every row carries a checksum (BLAKE2b) of its key, expiry and value. A row is served only
    when it comes back with the exact key asked for and its checksum verifies, so a damaged
    file costs misses, never another call's data. Problems give one :class:`CacheWarning` per
    kind per file and process, and the operation is then a miss or does nothing: ``corrupt``
    (a row that does not verify, a damaged page, a file that is not a database), ``busy`` (a
    lock held longer than the busy timeout), ``read-only``, ``not a toolflow cache``,
    ``unusable``. A file that is not a database or not a toolflow cache is not opened again by
    this object; a lock is retried at the next operation, and a damaged file keeps serving the
    rows that verify (and a store replaces a damaged row).

    One connection, used by one thread at a time (a lock orders the operations of several
    threads); the engine calls it from worker threads.

    Args:
        path: The database file; its folder is created when missing. Default:
            :func:`default_cache_path` of the current directory.
        clock: Returns the current time in seconds (``time.time``), compared with the stored expiry.
        busy_timeout: Seconds a statement waits for another connection's lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = _BUSY_SHARE * DEFAULT_CACHE_TIMEOUT,
    ) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False
        self._closed = False
        self._warner = _file_warner(self.path)
        self.busy = False
        """Whether the last operation gave up on another connection's lock."""

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
            conn.text_factory = bytes  # a damaged TEXT value is then bytes to compare, not a decoding error
            # No fsync while a new file is made a cache (an empty cache has nothing to lose, and
            # the syncs would cost the first call its whole wait); then WAL's usual NORMAL, which
            # syncs at checkpoints only and keeps the file consistent through a power loss.
            conn.execute("PRAGMA synchronous = OFF")
            foreign = _adopt(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
        except _PROBLEMS as exc:
            if conn is not None:
                conn.close()
            self._problem(exc)
            if _kind(exc) != "busy":
                self._broken = True
            return None
        if foreign is not None:
            conn.close()
            self._warner.warn("not a toolflow cache", foreign)
            self._broken = True
            return None
        self._conn = conn
        return conn

    def _problem(self, error: BaseException) -> None:
        kind = _kind(error)
        self.busy = kind == "busy"
        self._warner.warn(kind, str(error) or type(error).__name__)

    def report(self, kind: str, detail: str) -> None:
        """Warn, once per *kind* for this file in this process, that it has a problem."""
        self._warner.warn(kind, detail)

    def get(self, key: str) -> ToolResult | None:
        """Return the live result stored under exactly *key*, or ``None``; an expired entry is deleted."""
        stored = _encode(key)
        with self._lock:
            self.busy = False
            conn = self._connection()
            if conn is None:
                return None
            try:
                row = conn.execute(_SELECT, (MAX_STORED_BYTES, stored)).fetchone()
                if row is None:
                    return None
                problem = _row_problem(row, stored)
                if problem is None and row[2] is not None and self._clock() >= row[2]:
                    # Only the row just verified: on a damaged page "key = ?" may match another.
                    conn.execute("DELETE FROM toolflow_cache WHERE key = ? AND checksum = ?", (stored, row[3]))
                    return None
            except _PROBLEMS as exc:
                self._problem(exc)
                return None
        if problem is not None:
            self._warner.warn("corrupt", problem)
            return None
        result = _result_from_json(row[1])
        if result is None:
            self._warner.warn("corrupt", "a row's value is not a stored result")
        return result

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        """Store the successful *result* for *ttl* seconds; anything else is a no-op."""
        if not result.success or (ttl is not None and ttl <= 0):
            return
        try:
            value = _encode(_stored_json(result.to_dict()))
        except (TypeError, ValueError, RecursionError):
            return
        if len(value) > MAX_STORED_BYTES:
            return
        stored = _encode(key)
        with self._lock:
            self.busy = False
            conn = self._connection()
            if conn is None:
                return
            now = float(self._clock())
            expires = _expiry(now, None if ttl is None else float(ttl))
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO toolflow_cache (key, value, expires_at, stored_at, checksum) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (stored, value, expires, now, _checksum(stored, value, expires)),
                )
            except _PROBLEMS as exc:
                self._problem(exc)

    def clear(self) -> None:
        """Delete every entry, for every engine sharing the file."""
        self._write("DELETE FROM toolflow_cache", ())

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            self.busy = False
            conn = self._connection()
            if conn is None:
                return
            try:
                conn.execute(sql, params)
            except _PROBLEMS as exc:
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


def persistent_store(
    *,
    backend: str | None = None,
    plugins: Plugins | None = None,
    path: str | os.PathLike[str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
    options: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = time.time,
    timeout: float = DEFAULT_CACHE_TIMEOUT,
) -> PersistentStore:
    """The ``persistent`` scope's store, not yet opened: no file, connection or plugin code is touched here.

    *backend* ``None`` or ``"sqlite"`` is a :class:`SQLiteCache` at *path* (default
    :func:`default_cache_path` of *project_root*) whose busy timeout is four fifths of
    *timeout*, the longest a call waits for the store; any other name is the factory a plugin
    registered (:func:`cache_backend_factory`), called as ``factory(**options)`` at the first
    operation and guarded: a factory that raises or returns something other than a
    :class:`CacheBackend` is one :class:`CacheWarning` and a store that keeps nothing, and an
    exception from ``get``, ``set``, ``clear`` or ``close`` is one warning naming the plugin (per
    kind of exception) and a miss or nothing, like a broken SQLite file.

    Raises:
        ConfigError: No plugin registered *backend*, or several did.
    """
    if backend is None or backend == SQLITE_BACKEND:
        where = path if path is not None else default_cache_path(project_root)
        return SQLiteCache(where, clock=clock, busy_timeout=_BUSY_SHARE * timeout)
    plugin, factory = cache_backend_factory(backend, plugins)
    return _GuardedCache(factory, options or {}, f"backend {backend!r} of plugin {plugin!r}")


def check_cache_backend(backend: str | None, plugins: Plugins | None) -> None:
    """Refuse a ``persistent`` cache *backend* that no plugin of *plugins* provides (``None``: the default, SQLite).

    Engines and services ask when they are made, so that the mistake stops the command at its
    start rather than failing every call.

    Raises:
        ConfigError: As :func:`cache_backend_factory`.
    """
    if backend is not None and backend != SQLITE_BACKEND:
        cache_backend_factory(backend, plugins)


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
    """A plugin's backend, opened at its first use, whose failures become warnings: a crash never fails a call.

    Not for concurrent use: the engine calls it one operation at a time.
    """

    busy = False  # a plugin's backend does not say; the engine's wait is its bound

    def __init__(self, factory: Callable[..., Any], options: Mapping[str, Any], where: str) -> None:
        self._factory = factory
        self._options = dict(options)
        self._store: CacheBackend | None = None
        self._unopenable = False
        self._where = where
        self._warner = _Warner(where)

    def open(self) -> CacheBackend:
        """The plugin's backend, made by its factory at the first operation.

        Raises:
            ConfigError: The factory raised, or returned something that is not a :class:`CacheBackend`.
        """
        if self._store is None:
            try:
                store = self._factory(**self._options)
            except Exception as exc:
                msg = f"cache {self._where} failed to open: {error_message(exc)}"
                raise ConfigError(msg) from exc
            if not isinstance(store, CacheBackend):
                msg = f"cache {self._where} returned {store!r}, which is not a cache backend"
                raise ConfigError(msg)
            self._store = store
        return self._store

    def report(self, kind: str, detail: str) -> None:
        """Warn, once per *kind* for this backend, that it has a problem."""
        self._warner.warn(kind, detail)

    def _guarded(self, operation: str, *args: Any) -> Any:
        """``store.operation(*args)``, or ``None`` (and a warning) when it raises or the store cannot open."""
        if self._unopenable:
            return None
        try:
            store = self.open()
        except ConfigError as exc:
            self._unopenable = True
            warnings.warn(CacheWarning(f"{exc}; calls run without the persistent cache"), stacklevel=3)
            return None
        try:
            return getattr(store, operation)(*args)
        except Exception as exc:  # noqa: BLE001 - a plugin's failure is a warning and a miss; the call goes on
            self._warner.warn("failing", f"{operation} raised {error_text(exc)}")
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
        if self._store is not None:  # a backend never opened is not opened to be closed
            self._guarded("close")
