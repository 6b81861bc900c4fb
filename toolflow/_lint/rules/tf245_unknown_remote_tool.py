"""A tool named under an MCP server's `tools:` or `overrides:` that the server does not list.

## What it does
Only with `toolflow lint --connect`, which asks each server for its tools:
reports each entry of a server's `tools:`, and each key of its `overrides:`,
naming a tool the server does not list, with the closest listed name.

## Why is this bad?
The tool never joins the registry: every reference to it (a toolset, an
allowlist, a pipeline step) names nothing, and its override never applies.
The name is usually a typo, or a tool the server renamed or dropped.

## Example
```yaml
mcp_servers:
  files:
    command: [files-server]
    tools: [read_file, list_dir]
```

## Use instead
```yaml
mcp_servers:
  files:
    command: [files-server]
    tools: [read_file, list_directory]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import Named, ProjectSummary
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for server in summary.servers:
        listed = summary.listed.get(server.name) if summary.listed is not None else None
        if listed is None or isinstance(listed, str):
            continue
        # With tools:, its entries (an override of a tool not among them is TF243's); else the overrides.
        entries = server.overrides
        if server.tools is not None:
            entries = tuple(Named(name=e.name.removeprefix(server.prefix), place=e.place) for e in server.tools)
        for entry in entries:
            if entry.name not in listed:
                message = f"MCP server {server.name!r} lists no tool {entry.name!r}{did_you_mean(entry.name, listed)}"
                yield RULE.diag_at(entry.place, message)


RULE = Rule(code="TF245", name="unknown-remote-tool", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
