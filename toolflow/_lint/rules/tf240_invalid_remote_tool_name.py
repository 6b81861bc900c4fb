"""A tool of an MCP server whose name in toolflow, with the server's prefix, is not a legal tool name.

## What it does
Reports each entry of an MCP server's `tools:` whose registry name (`prefix`
followed by the server's name of the tool) does not match
`^[a-zA-Z0-9_-]{1,64}$`, the rule OpenAI and Anthropic apply to tool names,
with a legal name to ask the server's authors for.

## Why is this bad?
The provider rejects the whole request that lists the tool, so no tool of the
agent can be called. The server's own name may be fine for MCP clients that
allow dots or long names; the prefix may make it too long.

## Example
```yaml
mcp_servers:
  files:
    command: [files-server]
    prefix: workspace_files_
    tools: [read.file]
```

## Use instead
```yaml
mcp_servers:
  files:
    command: [files-server]
    prefix: fs_
    tools: [read_file]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint.rules.tf201_invalid_tool_name import PROVIDER_NAME, legal_name


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        for server in spec_file.mcp_servers:
            for index, remote in enumerate(server.tools or ()):
                name = server.local_name(remote)
                if PROVIDER_NAME.match(name):
                    continue
                reason = (
                    "is longer than 64 characters"
                    if len(name) > 64
                    else "has characters other than a-z, A-Z, 0-9, '_' and '-'"
                )
                if suggestion := legal_name(name):
                    reason += f" (a legal name would be {suggestion!r})"
                message = f"MCP server {server.name!r} imports {remote!r} as {name!r}, which {reason}"
                yield RULE.diag(spec_file, f"{server.pointer}/tools/{index}", message)


RULE = Rule(code="TF240", name="invalid-remote-tool-name", severity=Severity.ERROR, doc=__doc__ or "", check=check)
