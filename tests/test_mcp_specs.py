"""The specs of remote MCP tools: a server's listing seen through the spec's mcp_servers entry."""

from __future__ import annotations

import pytest

from toolflow._mcp_specs import MCP_KIND, remote_tool_spec
from toolflow._model import McpServer, McpToolRef, RemoteTool

READ_ONLY = RemoteTool(name="read_file", annotations={"readOnlyHint": True, "idempotentHint": True})


def test_a_remote_tool_is_dangerous_and_not_idempotent_whatever_it_claims() -> None:
    """Untrusted annotations change nothing: the tool is dangerous, not idempotent, never retried by default."""
    spec = remote_tool_spec(McpServer(name="files", command=("srv",)), READ_ONLY)
    assert (spec.category, spec.idempotent, spec.retry.attempts) == ("dangerous", False, 1)


def test_trusted_annotations_decide_category_and_idempotence() -> None:
    """With trust_annotations, read-only is safe_chain and idempotent; anything else is dangerous."""
    server = McpServer(name="files", command=("srv",), trust_annotations=True)
    assert (remote_tool_spec(server, READ_ONLY).category, remote_tool_spec(server, READ_ONLY).idempotent) == (
        "safe_chain",
        True,
    )
    writer = RemoteTool(name="write_file", annotations={"destructiveHint": False, "idempotentHint": True})
    assert (remote_tool_spec(server, writer).category, remote_tool_spec(server, writer).idempotent) == (
        "dangerous",
        True,
    )


def test_overrides_use_the_servers_name_and_win_over_the_annotations() -> None:
    """overrides: is keyed by the unprefixed name; its keys win; the registry name has the prefix."""
    server = McpServer(
        name="files",
        command=("srv",),
        prefix="fs_",
        trust_annotations=True,
        overrides={"read_file": {"category": "dangerous", "cache": {"scope": "session"}}},
    )
    spec = remote_tool_spec(server, READ_ONLY)
    assert (spec.name, spec.category, spec.cache is not None and spec.cache.scope.value) == (
        "fs_read_file",
        "dangerous",
        "session",
    )
    assert spec.implementations[0].kind == MCP_KIND
    assert spec.implementations[0].config == McpToolRef(server="files", tool="read_file")


def test_defaults_apply_as_a_files_defaults_do() -> None:
    """defaults: sets timeout and retry of every tool; asking for attempts retries even a dangerous tool."""
    server = McpServer(name="s", url="http://127.0.0.1:1/mcp", defaults={"timeout": "10s", "retry": {"attempts": 2}})
    spec = remote_tool_spec(server, RemoteTool(name="search", description="Search."))
    assert (spec.timeout, spec.retry.attempts, spec.description) == (10.0, 2, "Search.")


def test_schemas_come_from_the_listing() -> None:
    """parameters is the server's inputSchema; output_schema its outputSchema."""
    tool = RemoteTool(
        name="add",
        input_schema={"type": "object", "properties": {"a": {"type": "number"}}},
        output_schema={"type": "object", "properties": {"sum": {"type": "number"}}},
    )
    spec = remote_tool_spec(McpServer(name="m", command=("srv",)), tool)
    assert spec.parameters["properties"] == {"a": {"type": "number"}}
    assert spec.output_schema == {"type": "object", "properties": {"sum": {"type": "number"}}}


def test_an_override_the_model_refuses_is_a_value_error() -> None:
    """A bad value in overrides (the loader reports it first) raises ValueError naming it."""
    server = McpServer(name="m", command=("srv",), overrides={"add": {"timeout": "soon"}})
    with pytest.raises(ValueError, match="soon"):
        remote_tool_spec(server, RemoteTool(name="add"))
