"""MCP on the wire, without the SDK's client: raw JSON-RPC over a ``toolflow serve`` process's stdio, and over HTTP.

The SDK's client never sends a malformed message and hides what comes back; these helpers send
exactly the bytes a test gives and return exactly the messages the server answered.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
from _mcp_project import serve_argv, server_environment

PROTOCOL = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "wire", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

GREET_SPECS = """\
toolflow: 1
tools:
  greet:
    description: Greet someone.
    category: safe_chain
    parameters:
      type: object
      properties:
        name: {type: string, description: Who.}
      required: [name]
    template: "Hello, {{ name }}!"
"""
"""A spec file with one quick tool, ``greet``."""


def call(request_id: object, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``tools/call`` request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}},
    }


class StdioServer:
    """``toolflow serve`` over stdio in a subprocess: write lines, read the answers (a thread reads them)."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = root / "stdio-wire.log"
        with self.log.open("ab") as errors:
            self.process = subprocess.Popen(
                serve_argv(*args),
                cwd=root,
                env=env or server_environment(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        self.answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(None)

    def send(self, message: object) -> None:
        """Write *message* as one line (a ``str`` or ``bytes`` is written as it is)."""
        if isinstance(message, bytes):
            data = message
        elif isinstance(message, str):
            data = message.encode()
        else:
            data = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any] | None:
        """The next message the server wrote (None once its output ended)."""
        return self.answers.get(timeout=timeout)

    def start(self) -> dict[str, Any]:
        """Initialize; the ``initialize`` result."""
        self.send(INITIALIZE)
        answer = self.receive()
        assert answer is not None
        assert answer.get("id") == 0, answer
        self.send(INITIALIZED)
        return answer

    def close_input(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def stop(self, timeout: float = 30) -> int:
        """Close the input and wait for the exit code."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """End the server if it still runs, and close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


HTTP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def answers(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an HTTP response: its JSON body, or the ``data`` of its server-sent events."""
    if not response.content:
        return []
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = []
        for event in response.text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].strip() for line in event.split("\n") if line.startswith("data:"))
            if data:
                found.append(json.loads(data))
        return found
    try:
        document = response.json()
    except ValueError:
        return []
    return document if isinstance(document, list) else [document]


async def open_session(client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    """Initialize a session; the headers of its later requests (session id, protocol version, *headers*)."""
    response = await client.post(url, json=INITIALIZE, headers={**HTTP_HEADERS, **(headers or {})})
    assert response.status_code == 200, (response.status_code, response.text)
    session = {
        **HTTP_HEADERS,
        **(headers or {}),
        "Mcp-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": PROTOCOL,
    }
    done = await client.post(url, json=INITIALIZED, headers=session)
    assert done.status_code == 202, done.text
    return session


def pids_alive(pids: list[int]) -> list[int]:
    """The processes of *pids* that still run (a zombie waiting for its parent does not)."""
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            continue
        except PermissionError:
            state = "?"
        if state != "Z":
            alive.append(pid)
    return alive
