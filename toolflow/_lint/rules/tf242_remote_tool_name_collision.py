"""A tool an MCP server imports under a name that a YAML tool or another server's tool has.

## What it does
Reports each entry of a server's `tools:` whose registry name (with the
server's `prefix`) is also the name of a tool declared in a spec file, or of a
tool another server's `tools:` lists, naming the other places.

## Why is this bad?
The registry holds one tool per name, and the name is what models call tools
by: one of the two would be unreachable, and a model would call the other
thinking it called this one. A `prefix` keeps the servers' names apart.

## Example
```yaml
mcp_servers:
  files:
    command: [files-server]
    tools: [read_file]
  archive:
    command: [files-server, --archive]
    tools: [read_file]
```

## Use instead
```yaml
mcp_servers:
  files:
    command: [files-server]
    tools: [read_file]
  archive:
    command: [files-server, --archive]
    prefix: archive_
    tools: [read_file]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for name, imported in summary.remote_by_name.items():
        local = summary.tools_by_name.get(name, ())
        for server, entry in imported:
            # Entries of servers of the same name are TF241's (and one server lists a name once).
            others = [f"MCP server {s.name!r} at {e.place.position}" for s, e in imported if s.name != server.name]
            others[:0] = [f"the spec file's tool at {tool.place.position}" for tool in local]
            if others:
                message = f"MCP server {server.name!r} imports a tool named {name!r}, as does {', '.join(others)}"
                yield RULE.diag_at(entry.place, message)


RULE = Rule(
    code="TF242", name="remote-tool-name-collision", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
