"""A real ``redis-server`` for the tests (issue 19): on 127.0.0.1, a free port, a temporary directory.

``python3 tasks.py test`` (and so CI) installs Debian's ``redis-server`` where it is missing.
Where it cannot (not root, no apt-get), it says why in ``TOOLFLOW_TEST_MISSING_REDIS``, and the
tests that ask for the :func:`redis_server` fixture skip with that reason.

The server keeps nothing on disk (no RDB snapshot, no AOF): :meth:`RedisServer.restart` brings
it back empty on the same port, which is what a replica sees when Redis restarts.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT = 30.0
"""Seconds the server may take to accept connections (a guard: it takes tens of milliseconds)."""

MISSING = os.environ.get("TOOLFLOW_TEST_MISSING_REDIS") or (
    "redis-server is not installed (python3 tasks.py test installs it; or: apt-get install redis-server)"
)
"""Why the tests that need Redis skip, as ``tasks.py test`` found it."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ping(port: int) -> bool:
    """Whether a server on *port* answers ``PING`` (the raw protocol: no client library needed here)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process; :attr:`url` is what a client connects to."""

    def __init__(self, executable: str, directory: Path) -> None:
        self._executable = executable
        self._directory = directory
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers ``PING``; fail the test with its log if it does not."""
        log = self._directory / "redis.log"
        argv = [
            self._executable,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self._directory),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", str(log),
        ]  # fmt: skip
        self._process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while not _ping(self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = log.read_text(errors="replace") if log.exists() else "(no log)"
                pytest.fail(f"redis-server on port {self.port} did not start:\n{text}")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop the server (SIGTERM; SIGKILL if it lingers) and wait for it."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """End the server at once (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def restart(self) -> None:
        """Stop the server and start an empty one on the same port."""
        self.stop()
        self.start()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A running ``redis-server`` of this test alone; skips, saying how to install it, where there is none."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip(MISSING)
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(executable, directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
