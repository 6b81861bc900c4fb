"""The project's ``[tool.toolflow]`` settings: where the specs are, which local plugins to load.

::

    [tool.toolflow]
    specs = ["specs"]              # default spec paths, relative to pyproject.toml
    plugins = ["myproject.tools"]  # local, unpackaged plugin modules, importable from the project root
    shutdown-grace = "10s"         # call, run, serve: how long calls in flight may finish after SIGTERM
    state = "redis://cache.internal:6379/0"  # the shared state (default "memory"); see state_setting()

    [tool.toolflow.cache]          # the ``persistent`` cache scope
    path = ".toolflow/cache.sqlite3"   # the SQLite file, relative to pyproject.toml (the default)
    backend = "sqlite"             # or the name of a plugin's cache backend
    options = {url = "redis://127.0.0.1"}  # keyword arguments of a plugin backend's factory
    timeout = "50ms"               # how long a call waits for the persistent cache (the default)

    [tool.toolflow.serve]          # toolflow serve --transport http
    allowed-hosts = ["mcp.example.com"]    # Host names clients use (added to the bind address's)
    allowed-origins = ["https://app.example.com"]  # browser origins (added to the allowed hosts')
    auth-tokens = "secrets/tokens.toml"    # bearer tokens, relative to pyproject.toml
    auth-token-env = ["TOOLFLOW_TOKEN"]    # variables that hold a bearer token each
    max-sessions = 100             # concurrent HTTP sessions
    session-idle-timeout = "30m"   # an HTTP session without requests expires
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from toolflow._errors import ConfigError
from toolflow._model import parse_duration_text
from toolflow._schemas import did_you_mean

__all__ = [
    "DEFAULT_SPECS",
    "STATE_ENV",
    "ProjectConfig",
    "ServeConfig",
    "find_pyproject",
    "load_project",
    "read_pyproject",
    "state_setting",
]

DEFAULT_SPECS = "specs"

STATE_ENV = "TOOLFLOW_STATE"
"""The variable that chooses the state backend, between ``--state`` and ``[tool.toolflow] state``."""


@attrs.frozen(kw_only=True)
class ServeConfig:
    """``[tool.toolflow.serve]``: the HTTP transport's settings (``None``: not set, the defaults apply).

    Attributes:
        allowed_hosts: ``Host`` header values accepted besides the bind address's own.
        allowed_origins: ``Origin`` header values accepted besides the allowed hosts' own.
        auth_tokens: The bearer-token file, made absolute against the project root.
        auth_token_env: Names of environment variables that each hold one bearer token.
        max_sessions: Concurrent HTTP sessions.
        session_idle_timeout: Seconds an HTTP session may go without a request.
    """

    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    auth_tokens: str | None = None
    auth_token_env: tuple[str, ...] = ()
    max_sessions: int | None = None
    session_idle_timeout: float | None = None


_SERVE_KEYS = (
    "allowed-hosts",
    "allowed-origins",
    "auth-tokens",
    "auth-token-env",
    "max-sessions",
    "session-idle-timeout",
)
"""The keys of ``[tool.toolflow.serve]``."""

_CACHE_KEYS = ("path", "backend", "options", "timeout")
"""The keys of ``[tool.toolflow.cache]``."""


@attrs.frozen(kw_only=True)
class ProjectConfig:
    """``[tool.toolflow]`` of the nearest pyproject.toml (or the defaults when there is none).

    Attributes:
        root: The directory of pyproject.toml (the working directory without one).
        pyproject: The file read, if any.
        specs: Spec paths, relative to the working directory.
        plugins: Module names of local plugins.
        cache_path: The persistent cache's SQLite file (``None``: the default under *root*).
        cache_backend: The persistent cache's backend (``None``: SQLite).
        cache_options: Keyword arguments of a plugin backend's factory.
        cache_timeout: How long a call waits for the persistent cache, in seconds (``None``: not set).
        shutdown_grace: ``shutdown-grace`` in seconds (``None``: not set).
        serve: ``[tool.toolflow.serve]``.
        state: ``state``: the state backend's URL (``None``: not set, this process's memory).
    """

    root: str = "."
    pyproject: str | None = None
    specs: tuple[str, ...] = (DEFAULT_SPECS,)
    plugins: tuple[str, ...] = ()
    cache_path: str | None = None
    cache_backend: str | None = None
    cache_options: Mapping[str, Any] = attrs.field(factory=dict, converter=MappingProxyType)
    cache_timeout: float | None = None
    shutdown_grace: float | None = None
    serve: ServeConfig = ServeConfig()
    state: str | None = None


def state_setting(option: str | None, project: ProjectConfig, environ: Mapping[str, str]) -> str | None:
    """The state backend's URL: the option (``serve --state``), else ``TOOLFLOW_STATE``, else ``[tool.toolflow] state``.

    ``None`` when none is set: the default, this process's memory (and the SQLite file for the
    persistent cache). An empty option or variable counts as not set.
    """
    return option or environ.get(STATE_ENV) or project.state


def find_pyproject(start: str | os.PathLike[str] = ".") -> Path | None:
    """Return the nearest ``pyproject.toml`` at or above *start*, if any."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def read_pyproject(pyproject: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a pyproject.toml.

    Raises:
        ConfigError: The file cannot be read or is not valid TOML.
    """
    where = os.fspath(pyproject)
    try:
        with open(pyproject, "rb") as stream:
            return tomllib.load(stream)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=where) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", path=where) from None


def load_project(start: str | os.PathLike[str] = ".") -> ProjectConfig:
    """Read ``[tool.toolflow]`` from the nearest pyproject.toml at or above *start*.

    Raises:
        ConfigError: The file is not valid TOML, or ``specs``/``plugins`` are not lists of strings.
    """
    pyproject = find_pyproject(start)
    if pyproject is None:
        return ProjectConfig()
    where = os.fspath(pyproject)
    table: object = read_pyproject(pyproject)
    for key in ("tool", "toolflow"):
        table = table.get(key, {}) if isinstance(table, dict) else table
    if not isinstance(table, dict):
        raise ConfigError("[tool] and [tool.toolflow] must be tables", path=where)

    def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = table.get(key)
        if value is None:
            return default
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"[tool.toolflow] {key} must be a list of strings", path=where)
        return tuple(value)

    root = pyproject.parent
    specs = strings("specs", ())
    cache = _cache_table(table.get("cache", {}), where)
    options = cache.get("options", {})
    state = table.get("state")
    if state is not None and (not isinstance(state, str) or not state):
        raise ConfigError("[tool.toolflow] state must be a non-empty string: 'memory' or a redis:// URL", path=where)
    return ProjectConfig(
        root=os.fspath(root),
        pyproject=where,
        specs=tuple(os.path.relpath(root / s) for s in specs) if specs else (DEFAULT_SPECS,),
        plugins=strings("plugins", ()),
        cache_path=os.fspath(root / cache["path"]) if "path" in cache else None,
        cache_backend=cache.get("backend"),
        cache_options=options,
        cache_timeout=_seconds(cache.get("timeout"), "[tool.toolflow.cache] timeout", where, finite=True),
        shutdown_grace=_seconds(table.get("shutdown-grace"), "[tool.toolflow] shutdown-grace", where, zero=True),
        serve=_serve_config(table.get("serve", {}), root, where),
        state=state,
    )


def _cache_table(cache: object, where: str) -> dict[str, Any]:
    """``[tool.toolflow.cache]`` checked: known keys, non-empty strings, a table of options."""
    if not isinstance(cache, dict):
        raise ConfigError("[tool.toolflow] cache must be a table", path=where)
    unknown = sorted(set(cache) - set(_CACHE_KEYS))
    if unknown:
        hint = did_you_mean(unknown[0], _CACHE_KEYS)
        msg = f"[tool.toolflow.cache] has unknown key {unknown[0]!r}{hint}"
        raise ConfigError(msg, path=where)
    for key in ("path", "backend"):
        value = cache.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"[tool.toolflow.cache] {key} must be a non-empty string", path=where)
    if not isinstance(cache.get("options", {}), dict):
        raise ConfigError("[tool.toolflow.cache] options must be a table", path=where)
    return cache


def _seconds(value: object, key: str, where: str, *, zero: bool = False, finite: bool = False) -> float | None:
    """A duration setting in seconds (``None`` when not set); 0 only when *zero* allows it, ``inf`` unless *finite*."""
    if value is None:
        return None
    if zero and value in (0, "0") and not isinstance(value, bool):
        return 0.0
    try:
        seconds = parse_duration_text(value)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}", path=where) from None
    if finite and not math.isfinite(seconds):
        raise ConfigError(f"{key}: expected a finite duration, got {value!r}", path=where)
    return seconds


def _serve_config(table: object, root: Path, where: str) -> ServeConfig:
    """``[tool.toolflow.serve]`` checked: known keys, lists of strings, a positive session count, a duration."""
    if not isinstance(table, dict):
        raise ConfigError("[tool.toolflow] serve must be a table", path=where)
    unknown = sorted(set(table) - set(_SERVE_KEYS))
    if unknown:
        msg = f"[tool.toolflow.serve] has unknown key {unknown[0]!r}{did_you_mean(unknown[0], _SERVE_KEYS)}"
        raise ConfigError(msg, path=where)

    def strings(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"[tool.toolflow.serve] {key} must be a list of non-empty strings", path=where)
        return tuple(value)

    tokens = table.get("auth-tokens")
    if tokens is not None and (not isinstance(tokens, str) or not tokens):
        raise ConfigError("[tool.toolflow.serve] auth-tokens must be a non-empty string (a file)", path=where)
    sessions = table.get("max-sessions")
    if sessions is not None and (type(sessions) is not int or sessions < 1):
        msg = f"[tool.toolflow.serve] max-sessions must be a positive integer, got {sessions!r}"
        raise ConfigError(msg, path=where)
    return ServeConfig(
        allowed_hosts=strings("allowed-hosts"),
        allowed_origins=strings("allowed-origins"),
        auth_tokens=os.fspath(root / tokens) if tokens is not None else None,
        auth_token_env=strings("auth-token-env"),
        max_sessions=sessions,
        session_idle_timeout=_seconds(
            table.get("session-idle-timeout"), "[tool.toolflow.serve] session-idle-timeout", where, finite=True
        ),
    )
