"""``toolflow lint --connect``: ask each MCP server of the specs for its tools, for lint to check them.

Its own code path: plain ``toolflow lint`` never imports this module, trio or the ``mcp`` SDK.
Every server is started (``command``) or reached (``url``) at once, listed page by page and
closed again, each within :data:`CONNECT_TIMEOUT` seconds; no tool is called. What each server
listed, or why it could not be listed, becomes a :class:`~toolflow._lint._engine.ServerListing`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from toolflow._lint._engine import ServerListing
from toolflow._loader import load_specs
from toolflow._mcp_specs import remote_tool_spec
from toolflow._model import McpServer, RemoteTool, ToolSpec

if TYPE_CHECKING:
    from mcp import Client

    from toolflow._plugins import Plugins

__all__ = ["CONNECT_TIMEOUT", "list_servers", "server_listings"]

CONNECT_TIMEOUT = 30.0
"""Seconds each server has to start (or answer) and list its tools."""

MAX_PAGES = 100
"""At most this many ``tools/list`` pages are read from one server."""


def server_listings(
    paths: Iterable[str | os.PathLike[str]], plugins: Plugins | None, *, connect_timeout: float = CONNECT_TIMEOUT
) -> dict[str, ServerListing]:
    """Load the specs at *paths* and list the tools of each of their MCP servers (the first of a name)."""
    options: Mapping[str, Any] = plugins.loader_options() if plugins is not None else {}
    servers: dict[str, McpServer] = {}
    for server in load_specs(paths, **options).mcp_servers:
        servers.setdefault(server.name, server)
    return trio.run(list_servers, tuple(servers.values()), connect_timeout) if servers else {}


async def list_servers(
    servers: tuple[McpServer, ...], connect_timeout: float = CONNECT_TIMEOUT
) -> dict[str, ServerListing]:
    """The listing of each of *servers*, all asked at once; a failure is a listing's ``error``, never raised.

    *connect_timeout* bounds each server on its own (a slow one does not eat another's time).
    """
    try:
        import mcp  # noqa: F401, PLC0415 - only --connect needs the SDK
    except ImportError:
        missing = ServerListing(error="the mcp SDK is not installed: pip install 'toolflow-yaml[mcp]'")
        return dict.fromkeys((server.name for server in servers), missing)
    found: dict[str, ServerListing] = {}

    async def one(server: McpServer) -> None:
        found[server.name] = await _listing(server, connect_timeout)

    async with trio.open_nursery() as nursery:
        for server in servers:
            nursery.start_soon(one, server)
    return found


async def _listing(server: McpServer, connect_timeout: float) -> ServerListing:
    try:
        with trio.fail_after(connect_timeout):
            tools = await _list_tools(server)
    except trio.TooSlowError:
        return ServerListing(error=f"it did not list its tools within {connect_timeout:g}s")
    except Exception as exc:  # noqa: BLE001 - whatever stops a server from answering is the diagnostic
        return ServerListing(error=_describe(exc))
    specs: list[ToolSpec] = []
    for tool in tools:
        if server.imports(tool.name):
            with contextlib.suppress(ValueError):  # an override the loader reported already
                specs.append(remote_tool_spec(server, tool))
    return ServerListing(names=tuple(tool.name for tool in tools), specs=tuple(specs))


async def _list_tools(server: McpServer) -> list[RemoteTool]:
    """Every tool *server* lists (its own names), read page by page."""
    tools: list[RemoteTool] = []
    async with _client(server) as client:
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(_remote(tool) for tool in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    return tools


def _remote(tool: Any) -> RemoteTool:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return RemoteTool(
        name=tool.name,
        description=tool.description or "",
        title=tool.title or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
    )


@contextlib.asynccontextmanager
async def _client(server: McpServer) -> AsyncIterator[Client]:
    from mcp import Client, StdioServerParameters  # noqa: PLC0415 - only --connect needs the SDK
    from mcp.client.stdio import stdio_client  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415
    from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: PLC0415

    if server.url:
        # A client we pass in is ours to close (the SDK closes only the ones it makes).
        async with (
            create_mcp_http_client(headers=dict(server.headers)) as http,
            Client(streamable_http_client(server.url, http_client=http), cache=None) as client,
        ):
            yield client
        return
    parameters = StdioServerParameters(
        command=server.command[0], args=list(server.command[1:]), env=dict(server.env) or None, cwd=server.cwd or None
    )
    async with Client(stdio_client(parameters, errlog=_errlog()), cache=None) as client:
        yield client


def _errlog() -> Any:
    """Where a stdio server's standard error goes: ours when it is a real file, else nowhere (captured output)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL
    return sys.stderr


def _describe(error: BaseException) -> str:
    """One line for *error* (the first leaf of an exception group)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join((str(error) or type(error).__name__).split())
    return text if len(text) <= 300 else text[:297] + "..."
