"""Shared state in Redis, wired in (issue 19): the setting, and the persistent cache a fleet shares.

Engines here are "replicas": several engines of this process, or several ``toolflow``
processes, on one real ``redis-server`` (the ``redis_server`` fixture of ``tests/_redis.py``,
skipped, saying how to install it, where there is none). The backend's own contract is in
``tests/test_state.py``; the limits across replicas in ``tests/test_fleet_limits.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import redis
import trio
from _cache_support import answer, key_of, setup
from _mcp_wire import StdioServer, call
from _redis import RedisServer

import toolflow
from toolflow._errors import ConfigError, UsageError
from toolflow._project import ProjectConfig, load_project, state_setting
from toolflow._state import PERSISTENT, MemoryState
from toolflow._state_config import handle_keys_from_environ, state_from_url
from toolflow._state_redis import RedisState

# --------------------------------------------------------------------------- the setting


def test_the_option_wins_then_the_environment_then_the_project() -> None:
    project = ProjectConfig(state="redis://project:6379/0")
    environ = {"TOOLFLOW_STATE": "redis://environment:6379/0"}
    assert state_setting("redis://option:6379/0", project, environ) == "redis://option:6379/0"
    assert state_setting(None, project, environ) == "redis://environment:6379/0"
    assert state_setting(None, project, {"TOOLFLOW_STATE": ""}) == "redis://project:6379/0"
    assert state_setting(None, ProjectConfig(), {}) is None  # the default: this process's memory


def test_the_project_names_the_state(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.toolflow]\nstate = "redis://cache:6379/0"\n[tool.toolflow.cache]\ntimeout = "2s"\n', encoding="utf-8"
    )
    project = load_project(tmp_path)
    assert (project.state, project.cache_timeout) == ("redis://cache:6379/0", 2.0)
    (tmp_path / "pyproject.toml").write_text("[tool.toolflow]\nstate = 6379\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pyproject\.toml: \[tool\.toolflow\] state must be a non-empty string"):
        load_project(tmp_path)


def test_a_url_names_its_backend_and_never_shows_its_password() -> None:
    assert isinstance(state_from_url(None), MemoryState)
    assert isinstance(state_from_url("memory"), MemoryState)
    redis_state = state_from_url("redis://:s3cret@127.0.0.1:1/0")  # nothing connects yet
    assert isinstance(redis_state, RedisState)
    assert isinstance(redis_state, toolflow.StateBackend)
    assert redis_state.url == "redis://:***@127.0.0.1:1/0"
    redis_state.close()
    with pytest.raises(UsageError, match="memory' or a redis://") as caught:
        state_from_url("postgres://admin:s3cret@db/0")
    assert "s3cret" not in str(caught.value)
    assert "postgres://admin:***@db/0" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://:s3cret@127.0.0.1:notaport/0", "Port could not be cast to integer value as 'notaport'"),
        ("redis://:s3cret@127.0.0.1:99999/0", "Port out of range 0-65535"),
        ("redis://:s3cret@127.0.0.1:1/0?socket_timeout=soon", "Invalid value for 'socket_timeout' in connection URL."),
        ("redis://:s3cret@[::1/0", "Invalid IPv6 URL"),
    ],
    ids=["port", "port-range", "query-option", "ipv6"],
)
def test_a_url_redis_py_refuses_is_a_usage_error_without_its_password(url: str, why: str) -> None:
    with pytest.raises(UsageError) as caught:
        state_from_url(url)
    message = str(caught.value)
    assert message.startswith("state 'redis://:***@")
    assert message.endswith(f"is not a Redis URL redis-py accepts: {why}")
    assert "s3cret" not in message


def test_the_urls_timeouts_win_over_the_default_second() -> None:
    default = state_from_url("redis://127.0.0.1:1/0")
    tuned = state_from_url("redis://127.0.0.1:1/0?socket_timeout=3&socket_connect_timeout=5")
    try:
        options = [state._client.connection_pool.connection_kwargs for state in (default, tuned)]  # type: ignore[attr-defined]
        assert [(o["socket_timeout"], o["socket_connect_timeout"]) for o in options] == [(1.0, 1.0), (3.0, 5.0)]
    finally:
        default.close()
        tuned.close()


def test_the_secrets_of_handles_come_from_the_environment() -> None:
    assert handle_keys_from_environ({}) is None
    keys = handle_keys_from_environ({"TOOLFLOW_STATE_SECRET": "the new secret of the fleet"})
    assert keys is not None
    assert len(keys.keys) == 1
    rotating = handle_keys_from_environ(
        {"TOOLFLOW_STATE_SECRET": "the new secret of the fleet", "TOOLFLOW_STATE_SECRET_PREVIOUS": "the old secret!!"}
    )
    assert rotating is not None
    assert len(rotating.keys) == 2
    with pytest.raises(UsageError, match="16 characters"):
        handle_keys_from_environ({"TOOLFLOW_STATE_SECRET": "short"})
    with pytest.raises(UsageError, match="TOOLFLOW_STATE_SECRET is not"):
        handle_keys_from_environ({"TOOLFLOW_STATE_SECRET_PREVIOUS": "the old secret!!"})


# --------------------------------------------------------------------------- the persistent cache


async def _look(
    registry: toolflow.Registry, plugins: toolflow.Plugins, state: toolflow.StateBackend, numbers: list[int]
) -> tuple[list[toolflow.ToolResult], list[str]]:
    """``look(n)`` for each of *numbers* through a new engine ("replica") on *state*; the results and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with trio.fail_after(60):
            # A generous wait for the store: the machine may be loaded, and a late answer would be a miss.
            async with toolflow.open_engine(registry, plugins=plugins, state=state, cache_timeout=30) as engine:
                results = [await engine.call("look", {"n": n}) for n in numbers]
    assert all(issubclass(w.category, toolflow.CacheWarning) for w in caught), [str(w.message) for w in caught]
    return results, [str(w.message) for w in caught]


async def test_two_replicas_share_the_persistent_cache_in_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    registry, plugins, looker = setup(tmp_path)
    one, two = RedisState(redis_server.url, timeout=10), RedisState(redis_server.url, timeout=10)
    try:
        first, _ = await _look(registry, plugins, one, [1, 2])
        second, _ = await _look(registry, plugins, two, [1, 2, 3])
    finally:
        one.close()
        two.close()
    assert looker.runs == {1: 1, 2: 1, 3: 1}  # the second replica ran only what the first had not
    assert [r.data for r in second] == [answer(1), answer(2), answer(3)]
    assert [r.extra.get("cached") for r in second] == [True, True, None]
    assert not any(r.extra.get("cached") for r in first)
    assert not (tmp_path / ".toolflow").exists()  # no SQLite file: the cache is Redis's
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:  # keys namespaced by the spec's digest, which cache_key holds
        assert client.exists(b"toolflow:cache:persistent:" + key_of(registry, 1))
    finally:
        client.close()


async def test_a_memory_state_leaves_the_persistent_cache_in_the_sqlite_file(tmp_path: Path) -> None:
    registry, plugins, looker = setup(tmp_path)
    state = MemoryState()
    with trio.fail_after(60):
        async with toolflow.open_engine(
            registry, plugins=plugins, state=state, cache_path=tmp_path / "cache.sqlite3", cache_timeout=30
        ) as engine:
            await engine.call("look", {"n": 1})
    assert (tmp_path / "cache.sqlite3").exists()
    assert state.cache_get(PERSISTENT, key_of(registry, 1).decode()) is None
    assert looker.runs == {1: 1}


async def test_a_damaged_or_foreign_entry_is_a_miss_and_the_tool_runs(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    registry, plugins, looker = setup(tmp_path)
    state = RedisState(redis_server.url, timeout=10)
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        await _look(registry, plugins, state, [1, 2])
        one, two = (b"toolflow:cache:persistent:" + key_of(registry, n) for n in (1, 2))
        sealed = client.get(one)
        assert isinstance(sealed, bytes)
        client.set(two, sealed)  # 1's answer under 2's key
        client.set(one, sealed.replace(b'"thing 1"', b'"thing 9"'))  # damaged
        results, warned = await _look(registry, plugins, state, [1, 2])
    finally:
        state.close()
        client.close()
    assert [r.data for r in results] == [answer(1), answer(2)]  # never the wrong data
    assert looker.runs == {1: 2, 2: 2}
    assert warned == []


async def test_a_redis_outage_costs_misses_and_one_warning(tmp_path: Path, redis_server: RedisServer) -> None:
    registry, plugins, looker = setup(tmp_path)
    state = RedisState(redis_server.url, timeout=10)
    try:
        await _look(registry, plugins, state, [1])
        redis_server.kill()
        down, warned = await _look(registry, plugins, state, [1, 1, 2])
        assert [r.data for r in down] == [answer(1), answer(1), answer(2)]  # the calls still run
        assert looker.runs == {1: 3, 2: 1}
        assert len(warned) == 1, warned
        assert "is unavailable" in warned[0]
        assert "calls run without it until it is back" in warned[0]
        redis_server.start()  # back, empty (no persistence): misses, then cached again
        back, warned = await _look(registry, plugins, state, [1, 1])
    finally:
        state.close()
    assert warned == []
    assert [r.extra.get("cached") for r in back] == [None, True]
    assert looker.runs == {1: 4, 2: 1}


# --------------------------------------------------------------------------- through the doors

STAMP_SPEC = """\
toolflow: 1
tools:
  stamp:
    description: A fresh random stamp per run; its results are kept in the persistent cache.
    cache: {scope: persistent}
    parameters:
      type: object
      properties:
        topic: {type: string, description: What the stamp is for}
      required: [topic]
    command: ["%s", "-c", "import secrets; print(secrets.token_hex(8))"]
"""


def _project(root: Path, pyproject: str = "") -> Path:
    root.mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "fleet"\n[tool.toolflow.cache]\ntimeout = "30s"\n{pyproject}', encoding="utf-8"
    )
    (root / "specs").mkdir()
    (root / "specs" / "stamp.yaml").write_text(STAMP_SPEC % sys.executable, encoding="utf-8")
    return root


def _toolflow(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    outside = {name: value for name, value in os.environ.items() if name != "TOOLFLOW_STATE"}
    environment = {**outside, "TOOLFLOW_LOAD_PLUGINS": "none", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "toolflow", *args],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_toolflow_call_shares_the_cache_through_the_environment(tmp_path: Path, redis_server: RedisServer) -> None:
    one, two = _project(tmp_path / "one"), _project(tmp_path / "two")  # two machines, one Redis
    env = {"TOOLFLOW_STATE": redis_server.url}
    first = _toolflow(one, "call", "stamp", '{"topic": "a"}', "--trace", env=env)
    second = _toolflow(two, "call", "stamp", '{"topic": "a"}', "--trace", env=env)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "cache miss (persistent)" in first.stderr
    assert "cache hit (persistent)" in second.stderr
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert not (one / ".toolflow").exists()


def test_the_fleets_secret_seals_the_shared_cache(tmp_path: Path, redis_server: RedisServer) -> None:
    """With TOOLFLOW_STATE_SECRET, only a process holding the same secret reads what another cached."""
    one, two, three = (_project(tmp_path / name) for name in ("one", "two", "three"))
    env = {"TOOLFLOW_STATE": redis_server.url, "TOOLFLOW_STATE_SECRET": "the fleet's shared secret"}
    first = _toolflow(one, "call", "stamp", '{"topic": "s"}', "--trace", env=env)
    same = _toolflow(two, "call", "stamp", '{"topic": "s"}', "--trace", env=env)
    other = {**env, "TOOLFLOW_STATE_SECRET": "another fleet's secret!"}
    foreign = _toolflow(three, "call", "stamp", '{"topic": "s"}', "--trace", env=other)
    for done in (first, same, foreign):
        assert done.returncode == 0, done.stderr
    assert "cache hit (persistent)" in same.stderr
    assert "cache miss (persistent)" in foreign.stderr
    assert json.loads(foreign.stdout) != json.loads(first.stdout)  # the tool ran again: a new stamp


def test_toolflow_call_reads_the_state_from_the_project(tmp_path: Path, redis_server: RedisServer) -> None:
    root = _project(tmp_path, f'[tool.toolflow]\nstate = "{redis_server.url}"\n')
    first = _toolflow(root, "call", "stamp", '{"topic": "b"}')
    second = _toolflow(root, "call", "stamp", '{"topic": "b"}', "--trace")
    assert first.returncode == 0, first.stderr
    assert "cache hit (persistent)" in second.stderr
    assert second.stdout == first.stdout
    assert not (root / ".toolflow").exists()


def test_without_redis_py_a_redis_state_is_a_usage_error(tmp_path: Path) -> None:
    root = _project(tmp_path)
    # redis-py "missing": a package of that name earlier on the path that fails to import, as a
    # missing one does (the installed one stays installed for the other tests).
    shadow = tmp_path / "shadow" / "redis"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'redis'\", name='redis')\n")
    env = {"PYTHONPATH": str(tmp_path / "shadow"), "TOOLFLOW_STATE": "redis://:s3cret@127.0.0.1:6379/0"}
    done = _toolflow(root, "call", "stamp", '{"topic": "c"}', env=env)
    assert done.returncode == 2, done.stderr
    assert "needs redis-py, which is not installed: pip install 'toolflow-yaml[redis]'" in done.stderr
    assert "redis://:***@127.0.0.1:6379/0" in done.stderr
    assert "s3cret" not in done.stderr
    assert "Traceback" not in done.stderr
    memory = _toolflow(root, "call", "stamp", '{"topic": "c"}', env={**env, "TOOLFLOW_STATE": "memory"})
    assert memory.returncode == 0, memory.stderr  # nothing asks for redis-py without Redis


def _served_stamp(root: Path, *args: str) -> Any:
    server = StdioServer(root, "--specs", "specs", *args, env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"})
    try:
        server.start()
        server.send(call(1, "stamp", {"topic": "d"}))
        answer = server.receive(timeout=60)
        assert server.stop() == 0
    finally:
        server.kill()
    assert answer is not None
    assert answer.get("id") == 1, answer
    result = answer["result"]
    assert result.get("isError") is not True, result
    return result["content"]


def test_toolflow_serve_state_shares_the_cache_between_replicas(tmp_path: Path, redis_server: RedisServer) -> None:
    one, two = _project(tmp_path / "one"), _project(tmp_path / "two")
    first = _served_stamp(one, "--state", redis_server.url)
    second = _served_stamp(two, "--state", redis_server.url)
    assert second == first
    assert not (one / ".toolflow").exists()
    alone = _served_stamp(two)  # without --state: its own SQLite file, which has not seen the stamp
    assert alone != first
    assert (two / ".toolflow" / "cache.sqlite3").exists()
