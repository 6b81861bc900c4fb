"""``toolflow lint --connect``: ask each MCP server of the specs for its tools, for lint to check them.

Its own code path: plain ``toolflow lint`` never imports this module, trio or the ``mcp`` SDK.
Every server is started (``command``) or reached (``url``) at once, listed page by page and
closed again, each within :data:`CONNECT_TIMEOUT` seconds; no tool is called. What each server
listed, or why it could not be listed, becomes a :class:`~toolflow._lint._engine.ServerListing`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from toolflow._lint._engine import ServerListing
from toolflow._loader import load_specs
from toolflow._mcp_sources import describe_error, list_server
from toolflow._mcp_specs import remote_tool_spec
from toolflow._model import McpServer, ToolSpec

if TYPE_CHECKING:
    from toolflow._plugins import Plugins

__all__ = ["CONNECT_TIMEOUT", "list_servers", "server_listings"]

CONNECT_TIMEOUT = 30.0
"""Seconds each server has to start (or answer) and list its tools."""


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
            tools = await list_server(server)
    except trio.TooSlowError:
        return ServerListing(error=f"it did not list its tools within {connect_timeout:g}s")
    except Exception as exc:  # noqa: BLE001 - whatever stops a server from answering is the diagnostic
        return ServerListing(error=describe_error(exc))
    specs: list[ToolSpec] = []
    for tool in tools:
        if server.imports(tool.name):
            with contextlib.suppress(ValueError):  # an override the loader reported already
                specs.append(remote_tool_spec(server, tool))
    return ServerListing(names=tuple(tool.name for tool in tools), specs=tuple(specs))
