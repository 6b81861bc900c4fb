"""The executor end to end with real parts: an HTTP server, a second process, a SQLite file and subprocesses."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import toolflow
from toolflow import Abort
from toolflow._cache import CacheWarning
from toolflow._executor import open_engine

# --- helpers -----------------------------------------------------------------------------------


def _write_spec(tmp_path: Path, text: str) -> Path:
    spec = tmp_path / "tools.yaml"
    spec.write_text(text, encoding="utf-8")
    return spec


def _registry(spec: Path, *extra_plugins: tuple[object, str]) -> tuple[toolflow.Registry, toolflow.Plugins]:
    plugins = toolflow.load_plugins(entry_points=False)
    for plugin, name in extra_plugins:
        plugins.register(plugin, name)
    return toolflow.load_registry([spec], plugins=plugins), plugins


def _gone(pid: int) -> bool:
    """Whether *pid* no longer runs: no such process, or a zombie waiting for its reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


# --- 1. Retry-After ----------------------------------------------------------------------------


class _RateLimitedHandler(http.server.BaseHTTPRequestHandler):
    """Answers the first request with 429 and ``Retry-After: 1``, every later one with 200."""

    times: list[float]
    lock: threading.Lock

    def do_GET(self) -> None:
        with self.lock:
            self.times.append(time.monotonic())
            first = len(self.times) == 1
        body = b'{"error": "slow down"}' if first else b'{"ok": true}'
        self.send_response(429 if first else 200)
        if first:
            self.send_header("Retry-After", "1")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class names it so
        """Keep the test output quiet."""


@pytest.fixture
def rate_limited_server() -> Iterator[tuple[str, list[float]]]:
    """A real HTTP server on 127.0.0.1 that rate-limits its first request; yields its URL and request times."""
    times: list[float] = []
    handler = type("Handler", (_RateLimitedHandler,), {"times": times, "lock": threading.Lock()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}/limited", times
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_rate_limited_http_tool_waits_for_retry_after(
    tmp_path: Path, rate_limited_server: tuple[str, list[float]]
) -> None:
    """A 429 with `Retry-After: 1` is retried after at least 1 s (not the 100 ms backoff) and succeeds."""
    http_plugin = pytest.importorskip("toolflow_http.plugin")
    url, times = rate_limited_server
    spec = _write_spec(
        tmp_path,
        "toolflow: 1\ntools:\n  limited:\n    description: A rate-limited endpoint.\n"
        "    timeout: 5s\n    retry: {attempts: 3, jitter: false, initial: 100ms}\n"
        f"    http:\n      url: {url}\n",
    )
    registry, plugins = _registry(spec, (http_plugin, "toolflow-http-test"))
    with trio.fail_after(20):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("limited", {})
    assert result.success, result.error
    assert result.data == {"ok": True}
    assert result.extra["attempts"] == 2
    assert len(times) == 2
    assert times[1] - times[0] >= 0.95


# --- 2. the persistent cache across processes ------------------------------------------------

_COUNTED_SPEC = """\
toolflow: 1
tools:
  counted:
    description: Appends a line to a counter file and says how many lines it has.
    cache: {{scope: persistent, ttl: 60s}}
    retry: {{attempts: 1}}
    command: [sh, -c, "echo run >> '{counter}'; wc -l < '{counter}'"]
"""

_CHILD = """\
import json, sys, trio, toolflow

async def main() -> None:
    plugins = toolflow.load_plugins(entry_points=False)
    registry = toolflow.load_registry([sys.argv[1]], plugins=plugins)
    async with toolflow.open_engine(registry, plugins=plugins, cache_path=sys.argv[2], cache_timeout=10) as engine:
        result = await engine.call("counted", {})
    print(json.dumps({"success": result.success, "data": result.data, "extra": dict(result.extra)}))

trio.run(main)
"""


async def test_persistent_cache_survives_a_new_process_and_expires_after_its_ttl(tmp_path: Path) -> None:
    """A result cached by another process is a hit here; once its 60 s TTL has passed it is computed again."""
    counter = tmp_path / "counter"
    cache_path = tmp_path / "cache.sqlite3"
    spec = _write_spec(tmp_path, _COUNTED_SPEC.format(counter=counter))
    with trio.fail_after(60):
        child = await trio.run_process(
            [sys.executable, "-c", _CHILD, str(spec), str(cache_path)], capture_stdout=True, capture_stderr=True
        )
    first = json.loads(child.stdout)
    assert first["success"] is True
    assert first["data"]["stdout"].strip() == "1"
    assert "cached" not in first["extra"]
    assert counter.read_text(encoding="utf-8").count("run") == 1

    registry, plugins = _registry(spec)
    with trio.fail_after(20):
        # The look-up's 50 ms default is for a tool call, not a loaded test machine: this test is about persistence.
        async with open_engine(registry, plugins=plugins, cache_path=cache_path, cache_timeout=10) as engine:
            hit = await engine.call("counted", {})
    assert (hit.success, hit.extra["cached"], hit.extra["attempts"]) == (True, True, 0)
    assert hit.data["stdout"].strip() == "1"
    assert counter.read_text(encoding="utf-8").count("run") == 1

    def later() -> float:
        return time.time() + 61

    with trio.fail_after(20):
        async with open_engine(
            registry, plugins=plugins, cache_path=cache_path, clock=later, cache_timeout=10
        ) as engine:
            expired = await engine.call("counted", {})
    assert expired.success, expired.error
    assert "cached" not in expired.extra
    assert expired.data["stdout"].strip() == "2"
    assert counter.read_text(encoding="utf-8").count("run") == 2


# --- 3. a corrupt cache file -------------------------------------------------------------------


class _Counter:
    """A test plugin with one async implementation that counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def counted(x: int) -> int:
            self.runs += 1
            return x * 10

        register("it.counted", counted)


async def test_corrupt_cache_file_warns_and_calls_still_run(tmp_path: Path) -> None:
    """Random bytes in the cache file give a CacheWarning; every call still runs and succeeds."""
    spec = _write_spec(
        tmp_path,
        "toolflow: 1\ntools:\n  counted:\n    description: Counts.\n    cache: {scope: persistent}\n"
        "    parameters:\n      type: object\n      properties:\n        x: {type: integer, description: In}\n"
        "      required: [x]\n    implementation: it.counted\n",
    )
    cache_path = tmp_path / "cache.sqlite3"
    cache_path.write_bytes(os.urandom(8192))
    tool = _Counter()
    registry, plugins = _registry(spec, (tool, "it-counter"))
    with trio.fail_after(20):
        async with open_engine(registry, plugins=plugins, cache_path=cache_path) as engine:
            with pytest.warns(CacheWarning, match="corrupt"):
                first = await engine.call("counted", {"x": 2})
            second = await engine.call("counted", {"x": 2})  # warned once: another warning would be an error
    assert (first.success, first.data, second.success, second.data) == (True, 20, True, 20)
    assert "cached" not in second.extra
    assert tool.runs == 2


# --- 4. a kill during a retry back-off ---------------------------------------------------------


class _FailsOnce:
    """A test plugin whose implementation fails once with a connection error, then succeeds."""

    def __init__(self) -> None:
        self.runs = 0

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def fails_once() -> str:
            self.runs += 1
            if self.runs == 1:
                msg = "connection reset by peer"
                raise ConnectionError(msg)
            return "ok"

        register("it.fails_once", fails_once)


async def test_kill_during_retry_backoff_aborts_with_nothing_cached(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A kill during a 10 s back-off aborts the batch as killed at once; the next call runs the tool again."""
    spec = _write_spec(
        tmp_path,
        "toolflow: 1\ntools:\n  flaky:\n    description: Fails once.\n    cache: {scope: session}\n"
        "    retry: {attempts: 3, initial: 10s, jitter: false}\n    implementation: it.fails_once\n",
    )
    tool = _FailsOnce()
    registry, plugins = _registry(spec, (tool, "it-fails-once"))
    outcomes: list[object] = []
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()

        async def run() -> None:
            outcomes.append(
                await engine.execute_batch(
                    [{"id": "k1", "type": "function", "function": {"name": "flaky", "arguments": "{}"}}]
                )
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.sleep(5)
            assert tool.runs == 1  # in the back-off before attempt 2
            engine.kill()
        killed_after = trio.current_time() - start
        engine.tick()
        later = await engine.call("flaky", {})
    [outcome] = outcomes
    assert isinstance(outcome, Abort)
    assert (outcome.reason, outcome.call_ids, outcome.finished) == ("killed", ("k1",), ())
    assert killed_after == pytest.approx(5.0)
    assert (later.success, later.data, later.extra["attempts"]) == (True, "ok", 1)
    assert "cached" not in later.extra
    assert tool.runs == 2


# --- 5. a command killed on timeout ------------------------------------------------------------


async def test_command_killed_on_timeout_leaves_no_process_behind(tmp_path: Path) -> None:
    """A command that outlives its 300 ms timeout fails as timed out; the shell and both its sleeps are gone."""
    spec = _write_spec(
        tmp_path,
        "toolflow: 1\ntools:\n  sleeper:\n    description: Sleeps with a child in the background.\n"
        "    timeout: 300ms\n    retry: {attempts: 1}\n"
        "    parameters:\n      type: object\n      properties:\n        pidfile: {type: string, description: Where}\n"
        "      required: [pidfile]\n"
        '    command: [sh, -c, "sleep 100 & echo $! > {{ pidfile }}; sleep 100 & echo $! >> {{ pidfile }}; echo $$ >> {{ pidfile }}; wait"]\n'
        "  warm:\n    description: Renders in a template worker.\n    timeout: 60s\n    template: \"{{ 'ready' }}\"\n",
    )
    pidfile = tmp_path / "pids"
    registry, plugins = _registry(spec)
    with trio.fail_after(20):
        async with open_engine(registry, plugins=plugins) as engine:
            # The first render starts a template worker, which may take longer than the 300 ms.
            assert (await engine.call("warm", {})).data == "ready"
            result = await engine.call("sleeper", {"pidfile": str(pidfile)})
    assert (result.success, result.error, result.extra["attempts"]) == (
        False,
        "Error: tool 'sleeper' timed out after 300ms",
        1,
    )
    pids = [int(line) for line in pidfile.read_text(encoding="ascii").split()]
    assert len(pids) == 3, pids  # two sleeps and the shell
    with trio.fail_after(5):
        for _ in range(100):  # the orphaned sleeps are reaped by init: poll briefly
            if all(_gone(pid) for pid in pids):
                break
            await trio.sleep(0.05)
    assert [pid for pid in pids if not _gone(pid)] == []
