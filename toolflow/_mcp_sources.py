"""MCP servers as tool sources: a spec's ``mcp_servers:`` connected, their tools in the registry.

:func:`open_registry` loads the specs, connects to every server they import (a subprocess over
stdio, or streamable HTTP), lists the servers' tools and builds one :class:`~toolflow.Registry`
in which a remote tool is a tool like any other: its ``inputSchema`` validates the arguments
before they are sent, and the engine gates, caches, times out, retries and counts its calls. The
connections stay open until the ``async with`` block ends.

- **Trust.** What a server lists is data from a party the spec author does not control: its
  annotations decide nothing unless the entry says ``trust_annotations: true``
  (:func:`~toolflow._mcp_specs.remote_tool_spec`); a schema toolflow cannot use leaves that tool
  out, with a :class:`ToolSourceWarning`; at most :data:`MAX_REMOTE_TOOLS` tools per server.
- **Results.** ``isError`` becomes a failure result with the server's text; ``structuredContent``
  becomes the data; otherwise the text of the content (one string), or the content blocks.
- **Outages.** A server that dies (its process ends, its connection drops) is restarted with
  backoff (:data:`BACKOFF`); calls in flight and calls made while it is down get a
  :class:`ConnectionError` (a failure result, retried as ``retry.on: connection`` says); one
  :class:`ToolSourceWarning` per outage. The registry keeps the tools listed at the start.
- **Cancellation.** A call cancelled by its timeout, a stop or a kill is abandoned, and the SDK
  sends the server ``notifications/cancelled``. Progress the server reports reaches the
  progress sink of the call (``toolflow serve`` forwards it to its own client).

Only this module talks to the ``mcp`` client SDK, imported when a spec declares a server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

from toolflow._context import current_progress_sink
from toolflow._diagnostics import Locator
from toolflow._errors import ToolflowError, expect
from toolflow._loader import load_specs
from toolflow._mcp_specs import MCP_KIND, ToolSourceError, ToolSourceWarning, remote_tool_spec
from toolflow._mcp_stdio import stdio_transport
from toolflow._model import LoadResult, McpServer, McpToolRef, RemoteTool, SpecFile, ToolSpec
from toolflow._plugins import ImplementationKind, Plugins, load_plugins
from toolflow._registry import Registry, RegistryError
from toolflow._results import json_text
from toolflow._tool_references import unknown_references
from toolflow._validation import ArgumentValidator

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "BACKOFF",
    "MAX_LISTED",
    "MAX_REMOTE_DESCRIPTION",
    "MAX_REMOTE_SCHEMA_BYTES",
    "MAX_REMOTE_TOOLS",
    "ToolSourceError",
    "ToolSourceWarning",
    "client_for",
    "describe_error",
    "list_server",
    "open_registry",
    "remote_specs",
]

MAX_REMOTE_TOOLS = 1000
"""At most this many tools are imported from one server; the rest are left out with a warning."""

_MAX_PAGES = 100
"""At most this many ``tools/list`` pages are read from one server."""

MAX_LISTED = 10_000
"""At most this many tools of one server's listing are read (imported or not)."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")

MAX_REMOTE_DESCRIPTION = 10_000
"""The most characters of a remote tool's description (and title) sent to a model; a longer one is cut.

Every model request carries every offered tool's description: a server that lists one of
megabytes would fill each request. The entry's ``overrides:`` can give the tool a description.
"""

MAX_REMOTE_SCHEMA_BYTES = 256 * 1024
"""The largest JSON of a remote tool's input or output schema; a tool with a larger one is left out."""
"""The tool names MCP allows (SEP-986); a listed tool named otherwise is left out."""

BACKOFF = (0.5, 30.0)
"""The first and the longest wait, in seconds, before a dead server is started again (doubling)."""


def _require_mcp() -> None:
    """Nothing when the ``mcp`` SDK is installed; else a ToolflowError saying how to install it."""
    try:
        import mcp  # noqa: F401, PLC0415 - only specs that import servers need the SDK
    except ImportError:
        msg = "the specs declare mcp_servers, which need the mcp SDK: pip install 'toolflow-yaml[mcp]'"
        raise ToolflowError(msg) from None
    # The SDK logs what a server sent that it could not read with a traceback, which Python prints
    # when the application configured no logging; toolflow says it as a ToolSourceWarning instead.
    # An application that configures logging still gets the SDK's records.
    client_logger = logging.getLogger("mcp.client")
    if not any(isinstance(handler, logging.NullHandler) for handler in client_logger.handlers):
        client_logger.addHandler(logging.NullHandler())


def describe_error(error: BaseException) -> str:
    """One line for *error* (the first leaf of an exception group; whitespace collapsed; at most 300 characters)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join((str(error) or type(error).__name__).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _where(server: McpServer) -> str:
    return f"MCP server {server.name!r}" + (f" (declared in {server.file})" if server.file else "")


def client_for(server: McpServer, errlog: TextIO | int, *, message_handler: Any = None) -> Client:
    """An unentered ``mcp`` client of *server* (stdio: its standard error to *errlog*).

    *message_handler* gets the server's notifications and what the transport could not read
    (an ``Exception``), as the SDK's ``Client(message_handler=...)`` does.
    """
    from mcp import Client, StdioServerParameters  # noqa: PLC0415 - only specs with servers need the SDK
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    from toolflow._mcp_http import http_client  # noqa: PLC0415 - it needs httpx2, which comes with the SDK

    if server.url:

        @contextlib.asynccontextmanager
        async def http_transport() -> AsyncIterator[Any]:
            # A client we pass in is ours to close (the SDK closes only the ones it makes).
            async with (
                http_client(server.headers) as http,
                streamable_http_client(server.url, http_client=http) as streams,
            ):
                yield streams

        return Client(http_transport(), cache=None, message_handler=message_handler)
    parameters = StdioServerParameters(
        command=server.command[0],
        args=list(server.command[1:]),
        env=dict(server.env) or None,
        cwd=server.cwd or None,
    )
    return Client(stdio_transport(parameters, errlog), cache=None, message_handler=message_handler)


async def list_server(server: McpServer, *, errlog: TextIO | int | None = None) -> list[RemoteTool]:
    """Connect to *server*, read every tool it lists (bounded: :data:`MAX_LISTED`), and disconnect.

    For ``toolflow lint --connect``, which needs the names of all the tools, imported or not.

    Raises:
        Exception: Whatever the ``mcp`` SDK or the transport raised (the server cannot be used).
    """
    async with client_for(server, _errlog(errlog)) as client:
        return await _all_tools(client)


@attrs.define
class _Connection:
    """One server's connection, kept up by :meth:`supervise` in the registry's nursery."""

    server: McpServer
    errlog: TextIO | int
    _client: Client | None = None
    _lost: trio.Event = attrs.field(factory=trio.Event)
    _error: str = ""
    _calls: dict[trio.CancelScope, str] = attrs.field(factory=dict)
    """The calls in flight: each one's cancel scope, and why it was cancelled by us ("" until then)."""

    async def supervise(self, *, task_status: trio.TaskStatus[list[RemoteTool]] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, list the tools (reported through *task_status*), and keep the connection up.

        The first connection's failure is raised (as :class:`ToolSourceError`); later ones are
        retried with backoff, one warning per outage.
        """
        listing: list[RemoteTool] | None = None
        delay = BACKOFF[0]
        while True:
            try:
                async with client_for(self.server, self.errlog, message_handler=self._heard) as client:
                    if listing is None:
                        listing = _imported(self.server, await _all_tools(client))
                        task_status.started(listing)
                    self._client, self._lost, delay = client, trio.Event(), BACKOFF[0]
                    await self._lost.wait()
            except Exception as exc:  # noqa: BLE001 - whatever ended the connection is this outage's cause
                if listing is None:
                    msg = f"{_where(self.server)} cannot be used: {describe_error(exc)}"
                    raise ToolSourceError(msg, server=self.server) from None
                self._error = describe_error(exc)
            finally:
                self._client = None
            warnings.warn(
                f"{_where(self.server)} is down ({self._error or 'connection lost'}); restarting it in {delay:g}s",
                ToolSourceWarning,
                stacklevel=1,
            )
            await trio.sleep(delay)
            delay = min(delay * 2, BACKOFF[1])

    async def _heard(self, message: object) -> None:
        """The client's message handler: a message the SDK could not read fails every call in flight.

        Any of them may have been waiting for it (an answer with a number of 5,000 digits, nested
        10,000 levels, not JSON): each would wait for its timeout, and then say the server was slow.
        """
        await trio.lowlevel.checkpoint()
        if not isinstance(message, Exception):
            return
        why = _unreadable(message)
        warnings.warn(
            f"{_where(self.server)} sent a message toolflow cannot read ({why}); the calls in flight fail",
            ToolSourceWarning,
            stacklevel=1,
        )
        for scope, cause in self._calls.items():
            if not cause:
                self._calls[scope] = why
                scope.cancel()

    def lost(self, error: BaseException) -> ConnectionError:
        """Note that the connection is gone; the error a call gets for it."""
        self._error = describe_error(error)
        self._client = None  # calls from now on are told at once, before the supervisor wakes up
        self._lost.set()
        return ConnectionError(f"{_where(self.server)} closed the connection: {self._error}; it is being restarted")

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call the server's tool *tool*; the outcome as a tool implementation returns it.

        Raises:
            ConnectionError: The server is down, or the connection dropped during the call.
        """
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415
        from mcp_types import CONNECTION_CLOSED  # noqa: PLC0415

        client = self._client
        if client is None:
            why = f": {self._error}" if self._error else ""
            msg = f"{_where(self.server)} is not connected{why}; it is being restarted"
            raise ConnectionError(msg)
        sink = current_progress_sink()

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if sink is not None:
                sink(progress, total, message)

        scope = trio.CancelScope()
        self._calls[scope] = ""
        try:
            with scope:
                return _outcome(await client.call_tool(tool, dict(arguments), progress_callback=progress))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self.lost(exc) from None
            return {"success": False, "error": f"{_where(self.server)} refused the call: {exc.message}"}
        except (trio.BrokenResourceError, trio.ClosedResourceError, EOFError) as exc:
            raise self.lost(exc) from None
        finally:
            why = self._calls.pop(scope)
        error = f"{_where(self.server)} sent a message toolflow cannot read during the call ({why})"
        return {"success": False, "error": error + "; it may have been the answer"}


def _unreadable(error: Exception) -> str:
    """What was wrong with a message the transport could not read: pydantic's first error, or the error's text."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        with contextlib.suppress(Exception):
            first = errors(include_url=False, include_input=False)[0]
            return describe_error(ValueError(first["msg"]))
    return describe_error(error)


def _outcome(result: Any) -> Any:
    """What a ``CallToolResult`` means as a tool's return value."""
    if result.is_error:
        text = _text(result.content)
        if not text and result.structured_content is not None:
            text = json_text(result.structured_content)
        return {"success": False, "error": text or "the remote tool failed without saying why"}
    if result.structured_content is not None:
        return result.structured_content
    text_only = all(getattr(block, "type", None) == "text" for block in result.content)
    if text_only:
        return _text(result.content)
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


def _text(content: Iterable[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


async def _all_tools(client: Client) -> list[RemoteTool]:
    """Every tool the server lists, read page by page (at most :data:`MAX_LISTED`, 100 pages)."""
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools[: MAX_LISTED - len(tools)]:
            hints = tool.annotations
            tools.append(
                RemoteTool(
                    name=tool.name,
                    description=tool.description or "",
                    title=tool.title or "",
                    input_schema=tool.input_schema,
                    output_schema=tool.output_schema,
                    annotations=hints.model_dump(by_alias=True, exclude_none=True) if hints is not None else {},
                )
            )
        cursor = page.next_cursor
        if cursor is None or len(tools) == MAX_LISTED:
            break
    return tools


def _shown(name: str) -> str:
    """*name* for a message: its repr (control characters escaped), cut after 60 characters."""
    return repr(name) if len(name) <= 60 else repr(name[:60]) + f"... ({len(name):,} characters)"


def _named(server: McpServer, listed: list[RemoteTool]) -> list[RemoteTool]:
    """The tools of *listed* with a name MCP allows, each name once; a warning for each one left out.

    A name of control characters reaches terminals and model requests; a name listed twice would
    make the whole registry fail for the server's mistake.
    """
    seen: set[str] = set()
    named: list[RemoteTool] = []
    for tool in listed:
        if _TOOL_NAME.fullmatch(tool.name) is None:
            problem = "its name is not 1 to 128 characters of A-Z, a-z, 0-9, '_', '-' and '.'"
        elif tool.name in seen:
            problem = "the server lists that name more than once (the first is imported)"
        elif (size := _schema_bytes(tool)) > MAX_REMOTE_SCHEMA_BYTES:
            problem = f"its schemas take {size:,} bytes of JSON, more than the {MAX_REMOTE_SCHEMA_BYTES:,} allowed"
        else:
            seen.add(tool.name)
            named.append(_within_limits(server, tool))
            continue
        warnings.warn(
            f"{_where(server)}: tool {_shown(tool.name)} is left out: {problem}", ToolSourceWarning, stacklevel=1
        )
    return named


def _schema_bytes(tool: RemoteTool) -> int:
    """The length of the JSON of *tool*'s schemas (what each model request carries of them)."""
    return sum(len(json_text(schema)) for schema in (tool.input_schema, tool.output_schema) if schema is not None)


def _within_limits(server: McpServer, tool: RemoteTool) -> RemoteTool:
    """*tool* with its description and title cut to :data:`MAX_REMOTE_DESCRIPTION` characters, with a warning."""
    cut: dict[str, Any] = {}
    for field in ("description", "title"):
        text: str = getattr(tool, field)
        if len(text) > MAX_REMOTE_DESCRIPTION:
            cut[field] = text[:MAX_REMOTE_DESCRIPTION] + "..."
            warnings.warn(
                f"{_where(server)}: tool {_shown(tool.name)}: its {field} of {len(text):,} characters is cut to "
                f"{MAX_REMOTE_DESCRIPTION:,} (give it one under overrides:)",
                ToolSourceWarning,
                stacklevel=1,
            )
    return attrs.evolve(tool, **cut) if cut else tool


def _imported(server: McpServer, listed: list[RemoteTool]) -> list[RemoteTool]:
    """The tools of *listed* that the entry imports (at most :data:`MAX_REMOTE_TOOLS`); warnings for the rest."""
    tools = _named(server, [tool for tool in listed if server.imports(tool.name)])
    if len(tools) > MAX_REMOTE_TOOLS:
        warnings.warn(
            f"{_where(server)} lists more than {MAX_REMOTE_TOOLS} tools; the rest are left out "
            "(name the ones to import under tools:)",
            ToolSourceWarning,
            stacklevel=1,
        )
        tools = tools[:MAX_REMOTE_TOOLS]
    missing = [name for name in server.tools or () if name not in {tool.name for tool in listed}]
    if missing:
        warnings.warn(
            f"{_where(server)} lists no tool {', '.join(repr(name) for name in missing)} (named under tools:)",
            ToolSourceWarning,
            stacklevel=1,
        )
    return tools


@attrs.frozen
class _RemoteCall:
    """The implementation of one remote tool: a call of the server's tool over its connection."""

    connection: _Connection
    tool: str

    async def __call__(self, **arguments: Any) -> Any:
        return await self.connection.call(self.tool, arguments)


def _usable(server: McpServer, tool: RemoteTool, locator: Locator | None) -> ToolSpec | None:
    """The spec of *tool*, or ``None`` (with a warning) when toolflow cannot use what the server listed."""
    try:
        spec = remote_tool_spec(server, tool, locator=locator)
    except (ValueError, TypeError) as exc:
        problem = str(exc)
    else:
        compiled = ArgumentValidator.for_spec(spec).compiled
        if compiled is None or not compiled.problem:
            return spec
        problem = f"its inputSchema cannot be used: {compiled.problem}"
    warnings.warn(f"{_where(server)}: tool {tool.name!r} is left out: {problem}", ToolSourceWarning, stacklevel=1)
    return None


@contextlib.asynccontextmanager
async def open_registry(
    paths: Iterable[str | os.PathLike[str]] | LoadResult,
    *,
    plugins: Plugins | None = None,
    environ: Mapping[str, str] | None = None,
    connect_timeout: float = 60.0,
    errlog: TextIO | int | None = None,
) -> AsyncIterator[Registry]:
    """Load the specs, connect to the MCP servers they import, and build one registry.

    Like :func:`~toolflow.load_registry`, with the tools of the specs' ``mcp_servers:`` in it,
    bound to connections that stay open until the block ends (servers over stdio are stopped
    then). Specs without servers give the same registry as ``load_registry`` and connect nothing.

    Args:
        paths: Spec files and directories, or specs loaded already (:func:`~toolflow.load_specs`).
        plugins: The plugins to bind with (default: :func:`~toolflow.load_plugins` with its defaults).
        environ: Variables for ``${VAR}`` interpolation (default: ``os.environ``).
        connect_timeout: Seconds each server has to start, answer and list its tools.
        errlog: Where the standard error of servers run over stdio goes: a file, or
            ``subprocess.DEVNULL`` (default: ``sys.stderr`` when it is a real file, else nowhere).

    Raises:
        SpecError: The specs have errors.
        RegistryError: The specs (the remote tools included) and plugins do not fit together.
        ToolSourceError: A server could not be started, reached or listed within *connect_timeout*.
        ToolflowError: The specs declare servers and the ``mcp`` SDK is not installed.
    """
    expect(plugins, (Plugins, type(None)), "open_registry: plugins", "a toolflow.Plugins or None")
    if plugins is None:
        plugins = load_plugins()
    specs = paths if isinstance(paths, LoadResult) else load_specs(paths, environ=environ, **plugins.loader_options())
    servers = specs.mcp_servers
    if not servers or not specs.ok:
        yield Registry.build(specs, plugins)
        return
    locators = {spec_file.path: spec_file.locator for spec_file in specs.files}
    opened = _open_connections(servers, connect_timeout=connect_timeout, errlog=errlog, locators=locators)
    async with opened as (connections, remote):
        kind = ImplementationKind(name=MCP_KIND, schema={}, build=_binder(connections), plugin="mcp_servers")
        joined = attrs.evolve(specs, files=(*specs.files, SpecFile(path="<mcp_servers>", tools=tuple(remote))))
        registry = Registry.build(joined, plugins, kinds={MCP_KIND: kind})
        # Names that only may have been remote were let through by build(); the servers have listed now.
        problems = unknown_references(specs, registry.names(), listed=True)
        if problems:
            raise RegistryError(problems)
        yield registry


async def remote_specs(
    specs: LoadResult, *, connect_timeout: float = 60.0, errlog: TextIO | int | None = None
) -> list[ToolSpec]:
    """The specs of the tools that the MCP servers of *specs* list (each connected, listed and closed again).

    For what reads the remote tools without calling them (``toolflow list``).

    Raises:
        ToolSourceError: A server could not be started, reached or listed within *connect_timeout*.
        ToolflowError: The ``mcp`` SDK is not installed.
    """
    locators = {spec_file.path: spec_file.locator for spec_file in specs.files}
    opened = _open_connections(specs.mcp_servers, connect_timeout=connect_timeout, errlog=errlog, locators=locators)
    async with opened as (_, remote):
        return remote


@contextlib.asynccontextmanager
async def _open_connections(
    servers: tuple[McpServer, ...],
    *,
    connect_timeout: float,
    errlog: TextIO | int | None,
    locators: Mapping[str, Locator | None],
) -> AsyncIterator[tuple[Mapping[str, _Connection], list[ToolSpec]]]:
    """Connect to every server and list its tools; the connections stay up until the block ends."""
    _require_mcp()
    try:
        async with trio.open_nursery() as nursery:
            connections = {server.name: _Connection(server, _errlog(errlog)) for server in servers}
            remote: list[ToolSpec] = []
            for connection in connections.values():
                try:
                    with trio.fail_after(connect_timeout):
                        listing: list[RemoteTool] = await nursery.start(connection.supervise)
                except trio.TooSlowError:
                    msg = f"{_where(connection.server)} did not list its tools within {connect_timeout:g}s"
                    raise ToolSourceError(msg, server=connection.server) from None
                locator = locators.get(connection.server.file)
                remote.extend(s for tool in listing if (s := _usable(connection.server, tool, locator)) is not None)
            try:
                yield connections, remote
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The nursery wraps what its body raised (the caller's own exception, from the yield) and
        # what a connection raised; one exception is raised as itself, as if there were no nursery.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def _binder(connections: Mapping[str, _Connection]) -> Any:
    """The ``build`` of the ``mcp`` kind: a remote tool's spec to its call over its server's connection."""

    def build(spec: ToolSpec) -> _RemoteCall:
        ref = spec.implementations[0].config
        if not isinstance(ref, McpToolRef):  # pragma: no cover - only remote specs have this kind
            msg = f"tool {spec.name!r} is not a remote tool"
            raise TypeError(msg)
        return _RemoteCall(connections[ref.server], ref.tool)

    return build


def _errlog(errlog: TextIO | int | None) -> TextIO | int:
    """Where a stdio server's standard error goes: *errlog*, else ours when it is a real file, else nowhere."""
    if errlog is not None:
        return errlog
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # captured (tests, an in-process CLI run)
        return subprocess.DEVNULL
    return sys.stderr
