"""A small toolflow project for the ``toolflow serve`` tests: specs, a local plugin, a pyproject.toml.

Written into a temporary directory and served by ``toolflow serve`` in a subprocess, so the
tests see what an MCP client sees. The plugin keeps its state in module globals of the server
process: each served process starts fresh.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from queue import Empty, Queue

PLUGIN = '''\
"""Implementations of the serve tests' tools."""

import itertools
import os

import trio

import toolflow

_tickets = itertools.count(1)
_cancelled = None  # made on first use: an Event belongs to a trio run
_cancellations = 0


def add(a, b):
    return {"sum": a + b}


def boom():
    raise ValueError("the dice fell off the table")


def ticket():
    # The process's id too: replicas count from 1 each, and a fleet's test must tell their tickets apart.
    return {"ticket": f"{os.getpid()}-{next(_tickets)}"}


def login(user):
    return f"logged in as {user}"


def whoami():
    return "the user who logged in"


def count(steps, ctx):
    # A sync tool reports from its worker thread; the repeated 2 is dropped (progress must increase).
    for step in (1, 2, 2, *range(3, steps + 1)):
        ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


def _event():
    global _cancelled
    if _cancelled is None:
        _cancelled = trio.Event()
    return _cancelled


async def hang():
    await trio.sleep_forever()


async def wait_forever(ctx):
    global _cancellations
    ctx.report_progress(1, None, "started")
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        _cancellations += 1
        _event().set()
        raise


async def cancellations():
    # Waits for the cancellation to reach the tool: the client's notification and this call race.
    with trio.move_on_after(10):
        await _event().wait()
    return {"cancelled": _cancellations}


@toolflow.hookimpl
def toolflow_after_call(call, result):
    if call.name == "boom":
        raise RuntimeError("the observer tripped")


@toolflow.hookimpl
def toolflow_register_implementations(register):
    for function in (add, boom, ticket, login, whoami, count, hang, wait_forever, cancellations):
        register(f"serve.{function.__name__}", function)
'''

SPECS = """\
toolflow: 1
tools:
  greet:
    title: Greet someone
    description: Greet a person by name.
    category: safe_chain
    parameters:
      type: object
      properties:
        name: {type: string, description: Who to greet.}
      required: [name]
    template: "Hello, {{ name }}!"
  shout:
    description: Echo a word through a command.
    category: terminal
    parameters:
      type: object
      properties:
        word: {type: string, description: The word.}
      required: [word]
    command: [echo, "{{ word }}"]
  add:
    description: Add two integers.
    category: safe_chain
    parameters:
      type: object
      properties:
        a: {type: integer, description: The first.}
        b: {type: integer, description: The second.}
      required: [a, b]
      additionalProperties: false
    output_schema:
      type: object
      properties:
        sum: {type: integer}
      required: [sum]
    implementation: serve.add
  boom:
    description: Always fails.
    retry: false
    implementation: serve.boom
  hang:
    description: Never finishes in time.
    timeout: 300ms
    retry: false
    implementation: serve.hang
  wait_forever:
    description: Waits until cancelled.
    timeout: 60s
    retry: false
    implementation: serve.wait_forever
  cancellations:
    description: How many calls of wait_forever were cancelled.
    retry: false
    implementation: serve.cancellations
  ticket:
    description: A new ticket number, the same for the whole session.
    cache: {scope: session}
    implementation: serve.ticket
  login:
    description: Log in.
    parameters:
      type: object
      properties:
        user: {type: string, description: Who logs in.}
      required: [user]
    implementation: serve.login
  whoami:
    description: Who is logged in.
    depends_on:
      - {tool: login, scope: session}
    implementation: serve.whoami
  count:
    description: Count to a number, reporting progress.
    parameters:
      type: object
      properties:
        steps: {type: integer, minimum: 1, description: How far to count.}
      required: [steps]
    implementation: serve.count
toolsets:
  greetings:
    tools: [greet]
"""


def write_project(root: Path) -> Path:
    """Write the project into *root* and return it."""
    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    (root / "serve_tools.py").write_text(PLUGIN, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "serve-demo"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["serve_tools"]\n',
        encoding="utf-8",
    )
    return root


def server_environment() -> dict[str, str]:
    """The environment of a served process: no entry-point plugins but the project's own."""
    return {**os.environ, "TOOLFLOW_DISABLE_PLUGINS": "assistant,http"}


@contextlib.contextmanager
def announced_url(argv: list[str]) -> Iterator[str]:
    """Run *argv*, a server that prints ``URL <url>`` first; its URL while the block runs, then stop it."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("URL "), line
        yield line.split()[1]
    finally:
        process.terminate()
        process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()


def serve_argv(*args: str) -> list[str]:
    """The command line of ``toolflow serve`` with *args*, run by this interpreter."""
    return [sys.executable, "-m", "toolflow", "serve", *args]


class HTTPServer:
    """``toolflow serve --transport http --port 0`` in a subprocess; the URL is read from its announcement.

    *env* is added to :func:`server_environment`'s (a fleet's replicas share a secret and a state).
    """

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.lines: Queue[str] = Queue()
        self.output: list[str] = []
        self.process = subprocess.Popen(
            serve_argv("--transport", "http", "--port", "0", *args),
            cwd=root,
            env={**server_environment(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Drain stderr all along, so a chatty server never blocks on a full pipe.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = self._wait_for_url(timeout=60)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.output.append(line)
            self.lines.put(line)

    def _wait_for_url(self, timeout: float) -> str:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except Empty:
                self.close()
                msg = f"toolflow serve did not start: {''.join(self.output)}"
                raise RuntimeError(msg) from None
            if " at http://" in line:
                return line.rsplit(" at ", 1)[1].strip()

    def close(self, timeout: float = 30) -> None:
        """Stop the server (SIGTERM), wait for it at most *timeout* seconds, then SIGKILL it."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(timeout=5)
        if self.process.stderr is not None:
            self.process.stderr.close()

    def kill(self) -> None:
        """End the server at once (SIGKILL), as a crash or the kernel's OOM killer would, and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
