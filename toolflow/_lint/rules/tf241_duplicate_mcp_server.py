"""The same MCP server name is declared in more than one file.

## What it does
Reports every declaration of an `mcp_servers:` name that another spec file
declares too, naming the other places as `path:line:col`. (The same name twice
in one file is a duplicate key, TF002.)

## Why is this bad?
The engine opens one connection per server name, and each remote tool records
the name of the server that runs it: one of the entries would silently win,
and which one would depend on the order the files are loaded in. The registry
refuses to build with such specs.

## Example
```yaml
# specs/files.yaml
mcp_servers:
  files:
    command: [files-server, ./workspace]
# specs/archive.yaml
mcp_servers:
  files:
    command: [files-server, ./archive]
    prefix: archive_
```

## Use instead
```yaml
# specs/files.yaml
mcp_servers:
  files:
    command: [files-server, ./workspace]
# specs/archive.yaml
mcp_servers:
  archive:
    command: [files-server, ./archive]
    prefix: archive_
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule, duplicate_declarations
from toolflow._lint._summary import Place, ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    declared: dict[str, list[Place]] = {}
    for server in summary.servers:
        declared.setdefault(server.name, []).append(server.place)
    for name, place, others in duplicate_declarations(declared):
        yield RULE.diag_at(place, f"MCP server {name!r} is also declared at {others}")


RULE = Rule(code="TF241", name="duplicate-mcp-server", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
