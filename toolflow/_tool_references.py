"""References to tools in the spec files, checked against the names a registry has.

``Registry.build`` reports what these find; :func:`~toolflow.open_registry` calls
:func:`unknown_references` again once the servers have listed their tools.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator, Mapping

from toolflow._diagnostics import Locator
from toolflow._mcp_specs import MCP_KIND
from toolflow._model import LoadResult, McpServer, ToolSpec
from toolflow._schemas import did_you_mean

__all__ = ["position", "server_problems", "unknown_references"]


def position(path: str, locator: Locator | None, pointer: str, *, key: bool = False) -> str:
    """``path:line:col`` of *pointer* (or of its key) in the file at *path* (the path alone without a locator)."""
    if locator is None:
        return path
    span = locator.locate(pointer, key=key)
    return f"{path}:{span.line}:{span.column}"


def unknown_references(specs: LoadResult, names: Collection[str], *, listed: bool = False) -> list[str]:
    """One message per pipeline step or toolset member of *specs* that names no tool of *names*.

    ``Registry.build`` calls it with the tools of the spec files and those the ``mcp_servers``
    entries list under ``tools:``. Until the servers' tools are *listed*, a name that may be a
    tool of a server importing all its tools (one whose ``prefix`` it starts with) is not
    reported; once the engine has listed them, call it again with every registry name and
    ``listed=True`` to report the rest (lint's TF227, TF222 and TF244 say the same).
    """
    open_prefixes = () if listed else tuple(s.prefix for s in specs.mcp_servers if s.tools is None)

    def unknown(name: str) -> bool:
        return name not in names and not name.startswith(open_prefixes)

    problems = []
    for spec in specs.tools:
        for step in spec.pipeline.steps if spec.pipeline is not None else ():
            if unknown(step.tool):
                where = position(spec.file, spec.locator, f"{step.pointer}/tool")
                hint = did_you_mean(step.tool, sorted(names))
                problems.append(
                    f"{where}: step {step.name!r} of tool {spec.name!r} calls {step.tool!r}, no such tool{hint}"
                )
    for spec_file in specs.files:
        at = functools.partial(position, spec_file.path, spec_file.locator)
        for toolset in spec_file.toolsets:
            for key, members in (("tools", toolset.tools), ("exclude", toolset.exclude)):
                for index, name in enumerate(members):
                    if unknown(name):
                        problems.append(
                            f"{at(f'{toolset.pointer}/{key}/{index}')}: toolset {toolset.name!r} "
                            f"{'excludes' if key == 'exclude' else 'names'} tool {name!r}, "
                            f"which no spec file declares{did_you_mean(name, sorted(names))}"
                        )
    return problems


def server_problems(specs: LoadResult, tools: Mapping[str, ToolSpec]) -> Iterator[str]:
    """Server names declared twice, and tools listed under ``tools:`` named like a spec file's tool (TF241, TF242)."""
    first: dict[str, McpServer] = {}
    for server in specs.mcp_servers:
        where = position(server.file, _locator(specs, server.file), server.pointer, key=True)
        if first.setdefault(server.name, server) is not server:
            yield f"{where}: MCP server {server.name!r} is declared twice (first in {first[server.name].file})"
        for name in server.declared:
            if name in tools and not _remote(tools[name]):  # open_registry's build holds the remote tools too
                yield f"{where}: MCP server {server.name!r} imports a tool named {name!r}, as does {tools[name].file}"


def _remote(spec: ToolSpec) -> bool:
    implementation = spec.implementation
    return implementation is not None and implementation.kind == MCP_KIND


def _locator(specs: LoadResult, path: str) -> Locator | None:
    return next((f.locator for f in specs.files if f.path == path), None)
