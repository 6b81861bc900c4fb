"""An MCP server that `toolflow lint --connect` could not start, reach or list.

## What it does
Only with `toolflow lint --connect`: reports each server whose tools could not
be listed (the command could not be started, the URL did not answer, the
server failed or took longer than the connect timeout), with the reason.

## Why is this bad?
The engine connects to every server when it opens: a server lint cannot list
is one that `toolflow run`, `call` and `serve` cannot use either, and the
references to its tools stay unchecked (TF244).

## Example
```yaml
mcp_servers:
  files:
    command: [files-servr, ./workspace]
```

## Use instead
```yaml
mcp_servers:
  files:
    command: [files-server, ./workspace]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for server in summary.servers:
        problem = summary.listed.get(server.name) if summary.listed is not None else None
        if isinstance(problem, str):
            yield RULE.diag_at(server.place, f"could not list the tools of MCP server {server.name!r}: {problem}")


RULE = Rule(
    code="TF246", name="mcp-server-unavailable", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
