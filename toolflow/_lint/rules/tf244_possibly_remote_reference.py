"""A reference to a tool that no file declares, which may be a tool of an MCP server.

## What it does
Reports, as a warning, each tool name written in a `depends_on`, a pipeline
step, a toolset or a policy's `allow`, `deny` or `deliberate` that no spec file
declares and no server's `tools:` lists, while some MCP server imports all its
tools (it has no `tools:`) under a `prefix` the name starts with. Lint starts
no server, so it cannot know; `toolflow lint --connect` asks the servers and
decides. Without such a server, the name is an error of its own rule (TF213,
TF222, TF224, TF227).

## Why is this bad?
If the server does not list the tool, the reference is as broken as a typo: a
tool that can never run, a toolset or allowlist that silently leaves a tool
out. Listing the tools a project uses under `tools:` makes lint check them
without a connection, and keeps a new tool of the server from reaching the
model unreviewed.

## Example
```yaml
mcp_servers:
  search:
    url: http://127.0.0.1:8931/mcp
policy:
  allow: [web_search]
```

## Use instead
```yaml
mcp_servers:
  search:
    url: http://127.0.0.1:8931/mcp
    tools: [web_search]
policy:
  allow: [web_search]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    if not summary.importing_all:
        return
    for reference in summary.iter_references():
        servers = summary.may_be_remote(reference.name)
        if not servers:
            continue
        names = ", ".join(repr(server.name) for server in servers)
        which = (
            f"MCP server {names}, which imports every tool it lists"
            if len(servers) == 1
            else f"MCP servers {names}, which import every tool they list"
        )
        message = (
            f"{reference.by} {reference.name!r}, which no spec file declares; it may be a tool of {which}: "
            "'toolflow lint --connect' checks it"
        )
        yield RULE.diag_at(reference.place, message)


RULE = Rule(
    code="TF244", name="possibly-remote-reference", severity=Severity.WARNING, doc=__doc__ or "", check_project=check
)
