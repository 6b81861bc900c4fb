"""The tool specs of remote MCP tools: what a server lists, seen through the spec's ``mcp_servers:`` entry.

A server's listing is data from a party the spec author does not control. Its annotations are hints:
unless the entry says ``trust_annotations: true``, a remote tool is ``dangerous`` and not idempotent,
whatever it claims, and only the entry's ``overrides`` (written by the spec author) say otherwise.
"""

from __future__ import annotations

from typing import Any

import attrs

from toolflow import _yaml
from toolflow._diagnostics import Diagnostic, Locator
from toolflow._errors import ToolflowError
from toolflow._loader import _Builder  # the one way from a tool's keys to a ToolSpec
from toolflow._model import Category, Implementation, McpServer, McpToolRef, RemoteTool, ToolSpec

__all__ = ["MCP_KIND", "ToolSourceError", "ToolSourceWarning", "remote_tool_spec"]

MCP_KIND = "mcp"
"""The implementation kind of a remote tool (not a key spec files may use)."""


class ToolSourceError(ToolflowError):
    """An MCP server of the specs could not be reached or listed when the registry was opened."""

    def __init__(self, message: str, *, server: McpServer) -> None:
        super().__init__(message)
        self.server = server


class ToolSourceWarning(UserWarning):
    """A tool source's problem that toolflow went on after (a tool left out, a server restarting)."""


def _trusted(tool: RemoteTool) -> dict[str, Any]:
    """Category and idempotence as the server's annotations say (for ``trust_annotations: true``)."""
    hints = tool.annotations
    read_only = hints.get("readOnlyHint") is True
    return {
        "category": Category.SAFE_CHAIN.value if read_only else Category.DANGEROUS.value,
        "idempotent": hints.get("idempotentHint") is True or read_only,
    }


def remote_tool_spec(server: McpServer, tool: RemoteTool, *, locator: Locator | None = None) -> ToolSpec:
    """The spec of *server*'s tool *tool*, named ``server.prefix + tool.name``.

    The body is the server's description, title and schemas; then the category and idempotence
    (``dangerous``, not idempotent, unless the entry trusts the annotations); then the entry's
    ``overrides`` for the tool. The entry's ``defaults`` apply as a file's ``defaults:`` do.
    *locator* (the server's file's) places the tool at its server's entry in listings and messages.

    Raises:
        ValueError: A value the model refuses (a key of the overrides that the loader would have
            reported, or a listing that does not make a tool).
    """
    body: dict[str, Any] = {
        "description": tool.description,
        "title": tool.title,
        "parameters": dict(tool.input_schema),
        "category": Category.DANGEROUS.value,
        "idempotent": False,
    }
    if tool.output_schema is not None:
        body["output_schema"] = dict(tool.output_schema)
    if server.trust_annotations:
        body.update(_trusted(tool))
    body.update(server.overrides.get(tool.name, {}))
    problems: list[Diagnostic] = []
    builder = _Builder(
        server.file,
        None,
        "",
        _yaml.NodeLocator(None),
        problems,
        kinds={},
        packs={},
        interpolated=(),
        exact=None,
    )
    spec = builder.tool(server.local_name(tool.name), body, dict(server.defaults))
    if problems:
        raise ValueError("; ".join(problem.message for problem in problems))
    return attrs.evolve(
        spec,
        implementations=(
            Implementation(
                kind=MCP_KIND, config=McpToolRef(server=server.name, tool=tool.name), pointer=server.pointer
            ),
        ),
        pointer=server.pointer,
        locator=locator,
    )
