"""An MCP server's override of a tool that its `tools:` does not import.

## What it does
Reports each key of a server's `overrides:` that its `tools:` list does not
name (when the server has a `tools:` list), with the closest listed name.
Both use the server's own names, without the `prefix`.

## Why is this bad?
The override never applies: the tool it is for is not imported. It is usually
a typo, or a prefixed name (`fs_read_file` for `read_file`), and the tool it
meant keeps the server's defaults: `dangerous`, not cached, not retried.

## Example
```yaml
mcp_servers:
  files:
    command: [files-server]
    prefix: fs_
    tools: [read_file]
    overrides:
      fs_read_file: {category: safe_chain}
```

## Use instead
```yaml
mcp_servers:
  files:
    command: [files-server]
    prefix: fs_
    tools: [read_file]
    overrides:
      read_file: {category: safe_chain}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import did_you_mean, json_pointer


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        for server in spec_file.mcp_servers:
            if server.tools is None:
                continue
            for remote in server.overrides:
                if remote in server.tools:
                    continue
                own = remote.removeprefix(server.prefix) if server.prefix else remote
                if own != remote and own in server.tools:
                    hint = f" ('overrides' uses the server's own names, without the prefix: {own!r})"
                else:
                    hint = did_you_mean(remote, server.tools)
                message = f"MCP server {server.name!r} overrides {remote!r}, which its 'tools' does not import{hint}"
                yield RULE.diag(spec_file, f"{server.pointer}/overrides{json_pointer([remote])}", message, key=True)


RULE = Rule(code="TF243", name="unknown-override-tool", severity=Severity.ERROR, doc=__doc__ or "", check=check)
