"""``toolflow serve`` end to end: a real server process driven by the ``mcp`` SDK's own client.

Over stdio (the client starts the server) and over streamable HTTP on 127.0.0.1 (one server for
the module, started with ``--port 0``; it announces the port it got). The project served is
``tests/_mcp_project.py``'s: a template, a command and plugin tools.
"""

from __future__ import annotations

import contextlib
import io
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from _mcp_project import HTTPServer, serve_argv, server_environment, write_project
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client

import toolflow
from toolflow._cli import run

# The SDK's HTTP client (httpx2) leaves its SSE streams' async generators to the garbage
# collector when a session ends under trio; trio's finalizer warns about each one.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

# --- helpers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served project, written once for the module."""
    return write_project(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def http_server(project: Path) -> Iterator[HTTPServer]:
    """``toolflow serve --transport http`` on a free port of 127.0.0.1, for the whole module."""
    server = HTTPServer(project)
    try:
        yield server
    finally:
        server.close()


@contextlib.asynccontextmanager
async def stdio_session(project: Path, *args: str) -> AsyncIterator[ClientSession]:
    """A client session with a ``toolflow serve`` process the client starts over stdio."""
    argv = serve_argv(*args)
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=project, env=server_environment())
    with (project / "stdio-server.log").open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    """A client session with the HTTP server at *url*."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def texts(result: types.CallToolResult) -> list[str]:
    """The text blocks of *result*."""
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def text(result: types.CallToolResult) -> str:
    """The first text block of *result*."""
    return texts(result)[0]


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
    return await session.call_tool(name, arguments or {})


async def check_calls_and_failures(session: ClientSession) -> None:
    """The calls both transports must answer alike; the last call shows the server still serves."""
    greeting = await call(session, "greet", {"name": "Ada"})
    assert (greeting.is_error, text(greeting), greeting.structured_content) == (False, "Hello, Ada!", None)

    shouted = await call(session, "shout", {"word": "hi"})
    assert not shouted.is_error
    assert shouted.structured_content == {"exit_code": 0, "stdout": "hi\n", "stderr": "", "truncated": False}

    added = await call(session, "add", {"a": 2, "b": "3"})
    assert (added.is_error, added.structured_content) == (False, {"sum": 5})
    assert texts(added) == ['{"sum":5}', "Warnings:\n  - converted 'b' from a string to an integer"]

    invalid = await call(session, "add", {"a": 2, "c": 3})
    assert invalid.is_error
    assert text(invalid) == (
        "Error: Parameter validation failed for 'add':\n  - b: Missing required parameter\n"
        "  - c: Unknown parameter (expected: additionalProperties: false) (got: 3)"
    )

    unknown = await call(session, "ad", {})
    assert unknown.is_error
    assert text(unknown).startswith("Error: Unknown tool: 'ad' (did you mean 'add'?")

    timed_out = await call(session, "hang")
    assert (timed_out.is_error, text(timed_out)) == (True, "Error: tool 'hang' timed out after 300ms")

    failed = await call(session, "boom")
    assert (failed.is_error, text(failed)) == (
        True,
        "Error: tool 'boom' raised ValueError: the dice fell off the table",
    )

    again = await call(session, "greet", {"name": "Grace"})
    assert (again.is_error, text(again)) == (False, "Hello, Grace!")


async def check_cancellation(session: ClientSession) -> None:
    """Cancel a call once the tool runs; the tool sees the cancellation and the server still serves."""
    started = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with trio.open_nursery() as nursery:

        async def call_and_get_cancelled() -> None:
            await session.call_tool("wait_forever", {}, progress_callback=on_progress)

        nursery.start_soon(call_and_get_cancelled)
        await started.wait()
        nursery.cancel_scope.cancel()
    counted = await call(session, "cancellations")
    assert (counted.is_error, counted.structured_content) == (False, {"cancelled": 1})
    after = await call(session, "greet", {"name": "Linus"})
    assert text(after) == "Hello, Linus!"


# --- stdio -------------------------------------------------------------------------------------


async def test_stdio_lists_calls_and_reports_failures(project: Path) -> None:
    """Over stdio: tools/list, a template, a command and a plugin tool, every kind of failure, warnings on stderr."""
    with trio.fail_after(60):
        async with stdio_session(project) as session:
            listed = await session.list_tools()
            assert [tool.name for tool in listed.tools][:3] == ["greet", "shout", "add"]
            await check_calls_and_failures(session)
    log = (project / "stdio-server.log").read_text(encoding="utf-8")
    assert "toolflow: serving 11 tools over stdio\n" in log
    assert (
        "toolflow: warning: toolflow_after_call of plugin 'serve_tools' raised RuntimeError: the observer tripped\n"
        in log
    )


async def test_stdio_cancels_a_call_in_flight_and_reports_progress(project: Path) -> None:
    """Over stdio: a cancelled call stops in the server; a sync tool's progress reaches the client."""
    with trio.fail_after(60):
        async with stdio_session(project) as session:
            await check_cancellation(session)
            reports = await call_with_progress(session)
            assert reports == [(1.0, 4.0, "step 1"), (2.0, 4.0, "step 2"), (3.0, 4.0, "step 3"), (4.0, 4.0, "step 4")]


async def test_stdio_modern_client_keeps_one_session(project: Path) -> None:
    """The SDK's `Client` speaks the 2026-07-28 era over stdio; the process is still one session."""
    from mcp import Client

    argv = serve_argv("--project", str(project))  # started elsewhere, as MCP clients start servers
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=server_environment())
    with trio.fail_after(60):
        async with Client(params) as client:
            assert client.session.protocol_version not in {None, "2025-11-25"}
            assert (await client.call_tool("login", {"user": "ada"})).is_error is False
            assert text(await client.call_tool("whoami", {})) == "the user who logged in"


# --- streamable HTTP ---------------------------------------------------------------------------


async def test_http_lists_the_tools_with_their_mcp_definitions(http_server: HTTPServer) -> None:
    """tools/list gives each tool's name, title, description, schemas and category annotations."""
    with trio.fail_after(30):
        async with http_session(http_server.url) as session:
            listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert list(tools) == [
        "greet",
        "shout",
        "add",
        "boom",
        "hang",
        "wait_forever",
        "cancellations",
        "ticket",
        "login",
        "whoami",
        "count",
    ]
    greet = tools["greet"]
    assert (greet.title, greet.description) == ("Greet someone", "Greet a person by name.")
    assert greet.input_schema == {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Who to greet."}},
        "required": ["name"],
    }
    assert greet.annotations is not None
    assert greet.annotations.read_only_hint is True
    assert greet.annotations.open_world_hint is False
    assert tools["add"].output_schema == {
        "type": "object",
        "properties": {"sum": {"type": "integer"}},
        "required": ["sum"],
    }
    assert tools["shout"].annotations is not None
    assert tools["shout"].annotations.open_world_hint is True
    assert tools["boom"].input_schema == {"type": "object", "properties": {}, "additionalProperties": False}


async def test_http_calls_tools_and_reports_failures(http_server: HTTPServer) -> None:
    """Over HTTP: template, command and plugin tools, invalid arguments, unknown tool, timeout, failure."""
    with trio.fail_after(60):
        async with http_session(http_server.url) as session:
            await check_calls_and_failures(session)


async def test_http_cancels_a_call_in_flight(http_server: HTTPServer) -> None:
    """Over HTTP: the client's cancellation reaches the tool, and the server keeps serving."""
    with trio.fail_after(60):
        async with http_session(http_server.url) as session:
            await check_cancellation(session)


async def call_with_progress(session: ClientSession) -> list[tuple[float, float | None, str | None]]:
    """Call `count` with a progress callback; return the reports, in progress order."""
    reports: list[tuple[float, float | None, str | None]] = []
    four = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))
        if len(reports) == 4:
            four.set()

    result = await session.call_tool("count", {"steps": 4}, progress_callback=on_progress)
    assert (result.is_error, text(result)) == (False, "counted to 4")
    # The client runs each callback in a task of its own, which may run after the result arrived.
    await four.wait()
    return sorted(reports, key=lambda report: report[0])


async def test_http_reports_progress(http_server: HTTPServer) -> None:
    """A tool's ctx.report_progress becomes notifications/progress; a report that does not increase is dropped."""
    with trio.fail_after(30):
        async with http_session(http_server.url) as session:
            reports = await call_with_progress(session)
    assert reports == [(1.0, 4.0, "step 1"), (2.0, 4.0, "step 2"), (3.0, 4.0, "step 3"), (4.0, 4.0, "step 4")]


async def test_http_clients_get_sessions_of_their_own(http_server: HTTPServer) -> None:
    """Two clients at once: a depends_on rule and the session cache of one are not the other's."""
    with trio.fail_after(60):
        async with http_session(http_server.url) as first, http_session(http_server.url) as second:
            blocked = await call(first, "whoami")
            assert (blocked.is_error, text(blocked)) == (
                True,
                "Error: 'whoami' cannot run yet - run 'login' successfully first",
            )
            assert not (await call(first, "login", {"user": "ada"})).is_error
            assert text(await call(first, "whoami")) == "the user who logged in"
            assert (await call(second, "whoami")).is_error

            ticket = (await call(first, "ticket")).structured_content
            assert (await call(first, "ticket")).structured_content == ticket
            assert (await call(second, "ticket")).structured_content != ticket


async def test_http_serves_only_the_chosen_toolset(project: Path) -> None:
    """--toolset limits tools/list and tools/call to the toolset's tools."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(project, "--toolset", "greetings"))
    try:
        with trio.fail_after(30):
            async with http_session(server.url) as session:
                listed = await session.list_tools()
                assert [tool.name for tool in listed.tools] == ["greet"]
                outside = await call(session, "add", {"a": 1, "b": 2})
                assert (outside.is_error, text(outside)) == (
                    True,
                    "Error: tool 'add' is not available now; allowed tools: 'greet'",
                )
                unknown = await call(session, "gret", {})
                assert text(unknown).startswith("Error: Unknown tool: 'gret' (did you mean 'greet'?")
    finally:
        await trio.to_thread.run_sync(server.close)


# --- command line ------------------------------------------------------------------------------


def test_serve_without_the_mcp_sdk_names_the_extra(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the `mcp` package, `toolflow serve` says which extra to install and exits 2, no traceback."""
    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.delitem(sys.modules, "toolflow._serve", raising=False)
    monkeypatch.delattr(toolflow, "_serve", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = run(["serve", "--specs", str(project / "specs")], stdout=out, stderr=err)
    assert (code, out.getvalue()) == (2, "")
    assert err.getvalue() == (
        "toolflow: error: serve needs the MCP SDK ('mcp' is not installed): pip install 'toolflow-yaml[mcp]'\n"
    )


def test_serve_on_a_port_in_use_is_a_usage_error(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port another socket holds gives one error line and exit 2."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out, err = io.StringIO(), io.StringIO()
        code = run(["serve", "--transport", "http", "--port", str(port)], stdout=out, stderr=err)
    assert code == 2
    assert err.getvalue().startswith(f"toolflow: error: cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_on_a_port_outside_the_range_is_a_usage_error(project: Path, port: str) -> None:
    """`--port` takes 0 to 65535: anything else is one error line and exit 2, not a traceback."""
    out, err = io.StringIO(), io.StringIO()
    code = run(["serve", "--transport", "http", f"--port={port}"], stdout=out, stderr=err)
    assert (code, out.getvalue()) == (2, "")
    assert f"argument --port: expected a port number from 0 to 65535, got '{port}'" in err.getvalue()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--toolset", "nope"], "toolflow: error: Unknown toolset: 'nope'"),
        (["--tool", "gret"], "toolflow: error: Unknown tool: 'gret' (did you mean 'greet'?)"),
        (["--transport", "sse"], "toolflow: error: serve: argument --transport: invalid choice: 'sse'"),
        (["--project", "no/such/dir"], "toolflow: error: serve: cannot use project directory 'no/such/dir': "),
    ],
)
def test_serve_refuses_unknown_choices(
    project: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    """Unknown toolsets, tools and transports are usage errors naming the value, before serving starts."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")
    out, err = io.StringIO(), io.StringIO()
    assert run(["serve", *argv], stdout=out, stderr=err) == 2
    assert err.getvalue().startswith(message)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_serve_refuses_an_unknown_cache_backend_before_serving(tmp_path: Path, transport: str) -> None:
    """A ``[tool.toolflow.cache] backend`` no plugin provides stops serve at its start: one line, exit 2.

    Before, stdio ended in a traceback, and HTTP served, failing every call.
    """
    project = write_project(tmp_path)
    with (project / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write("\n[tool.toolflow.cache]\nbackend = 'redis-ish'\n")
    done = subprocess.run(
        serve_argv("--transport", transport, "--port", "0"),
        cwd=project,
        env=server_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (2, "toolflow: error: unknown cache backend 'redis-ish'\n")


def test_only_the_serve_modules_import_mcp() -> None:
    """`mcp` stays an optional extra: only `toolflow serve`'s modules, the client of `mcp_servers:` (and its transports) and `lint --connect`."""
    import ast

    package = Path(toolflow.__file__).parent
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(name.split(".")[0] in {"mcp", "mcp_types", "hypercorn", "starlette"} for name in names):
                importers.add(path.relative_to(package).as_posix())
    serving = {
        "_serve.py",
        "_serve_conversation.py",
        "_serve_fleet.py",
        "_serve_http.py",
        "_serve_progress.py",
        "_serve_stdio.py",
        "_serve_approval.py",
        "_serve_tasks.py",
        "_task_records.py",
    }
    assert importers == {*serving, "_mcp_sources.py", "_mcp_stdio.py", "_mcp_http.py", "_cli_lint_connect.py"}
